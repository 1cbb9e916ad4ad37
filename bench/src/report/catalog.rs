//! What rushd did in a catalog run, from its `/metrics`: storage reads per
//! query, the Bloom filter's false-positive rate, and which layer answered.

use super::format::ops;
use super::select::run_name;
use crate::stats::RunReport;
use crate::suite::{ServerKind, SuiteResults, SuiteRun};
use crate::workloads::catalog::is_catalog;
use std::fmt::Write as _;

/// Catalog answers of one path (`bloom_negative`, …) to queries in a run.
fn query_path(r: &RunReport, path: &str) -> f64 {
    let want = format!("path=\"{path}\"");
    r.server_metrics
        .iter()
        .filter(|(k, _)| {
            k.starts_with("rush_catalog_answers_total{")
                && k.contains("op=\"query\"")
                && k.contains(&want)
        })
        .map(|(_, v)| v)
        .sum()
}

/// What rushd did for one catalog run: storage reads per query and the
/// Bloom filter's false-positive rate among absent owners, both measured
/// over the run.
pub struct ReadsPerQuery {
    pub queries: f64,
    pub reads_per_query: f64,
    /// (cache_negative + storage_miss) / (those + bloom_negative), this run.
    pub fp_rate: f64,
    /// Share of queries answered by each layer.
    pub bloom_negative: f64,
    pub cache: f64,
    pub storage: f64,
}

pub fn reads_per_query(r: &RunReport) -> Option<ReadsPerQuery> {
    let reads = r.metric_sum("rush_storage_reads_total")?;
    let queries = (r.ok + r.errors) as f64;
    if queries == 0.0 {
        return None;
    }
    let neg = query_path(r, "bloom_negative");
    let fp = query_path(r, "cache_negative") + query_path(r, "storage_miss");
    let cache = query_path(r, "cache_hit") + query_path(r, "cache_negative");
    let storage = query_path(r, "storage_hit") + query_path(r, "storage_miss");
    Some(ReadsPerQuery {
        queries,
        reads_per_query: reads / queries,
        fp_rate: if fp + neg > 0.0 { fp / (fp + neg) } else { 0.0 },
        bloom_negative: neg / queries,
        cache: cache / queries,
        storage: storage / queries,
    })
}

/// The goal for catalog queries: at most 0.6 + the false-positive rate.
pub fn reads_goal(q: &ReadsPerQuery) -> f64 {
    0.6 + q.fp_rate
}

pub(super) fn storage_reads_section(s: &mut String, results: &SuiteResults, workload: &str) {
    if !is_catalog(workload) {
        return;
    }
    let runs: Vec<&SuiteRun> = results
        .runs
        .iter()
        .filter(|r| r.server == ServerKind::Rush && r.report.workload == workload)
        .filter(|r| !r.report.server_metrics.is_empty())
        .collect();
    if runs.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "Rush's storage reads per query, from rushd's `/metrics` read before and after each run \
         (`rush_storage_reads_total`; answer layers from `rush_catalog_answers_total`). \
         Goal: at most 0.6 + the Bloom false-positive rate.\n"
    );
    let _ = writeln!(
        s,
        "| Run | Keys | ops/s | queries | storage reads / query | Bloom FP rate (this run) | goal | answered by Bloom / cache / storage |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---|");
    for run in runs {
        let Some(q) = reads_per_query(&run.report) else {
            continue;
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.4} | {:.4} | ≤ {:.4} {} | {:.1}% / {:.1}% / {:.1}% |",
            run_name(run),
            ops(run.report.keys as f64),
            ops(run.report.throughput),
            ops(q.queries),
            q.reads_per_query,
            q.fp_rate,
            reads_goal(&q),
            if q.reads_per_query <= reads_goal(&q) {
                "met"
            } else {
                "**missed**"
            },
            q.bloom_negative * 100.0,
            q.cache * 100.0,
            q.storage * 100.0
        );
    }
    let _ = writeln!(s);
}
