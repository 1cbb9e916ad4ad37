//! The suite's later phases: throughput as the data grows, the footprint
//! per stored link, and a one-shard rushd beside the all-shards one.

use super::format::{mib, ms, ops};
use super::select::{peak_run, variant_runs};
use crate::suite::{ServerKind, SuiteResults, VARIANT_ONE_SHARD, VARIANT_SCALING};
use std::fmt::Write as _;

/// "## Scaling with data size": phase 2's runs at each key count.
pub(super) fn scaling(s: &mut String, results: &SuiteResults) {
    let runs = variant_runs(results, VARIANT_SCALING);
    if runs.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Scaling with data size\n");
    let _ = writeln!(
        s,
        "Fresh servers, data preloaded to each size in turn (links first, then owners), each \
         workload run closed-loop at that size. The last column compares with the smallest size \
         on the same server.\n"
    );
    let _ = writeln!(
        s,
        "| Workload | Server | Keys | ops/s | p50 ms | p99 ms | p99.9 ms | errors | vs smallest |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for run in &runs {
        let r = &run.report;
        let base = runs
            .iter()
            .filter(|o| o.server == run.server && o.report.workload == r.workload)
            .min_by_key(|o| o.report.keys)
            .map(|o| o.report.throughput);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            run.server.label(),
            ops(r.keys as f64),
            ops(r.throughput),
            ms(r.latency.p50_us),
            ms(r.latency.p99_us),
            ms(r.latency.p999_us),
            r.errors,
            base.map_or("–".into(), |b| format!("{:.2}×", r.throughput / b))
        );
    }
    let _ = writeln!(s);
}

/// "## Footprint per stored link": memory and disk per link at each size.
pub(super) fn footprint(s: &mut String, results: &SuiteResults) {
    let rows: Vec<_> = results.footprint.iter().filter(|f| f.links > 0).collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Footprint per stored link\n");
    let _ = writeln!(
        s,
        "Measured after the scaling phase's `links-resolve` run at each size (100-byte URLs, \
         7-character codes, 30-day TTL). Rush: the process's resident memory (VmRSS; it holds \
         RocksDB's block cache and memtables, bounded by config, not by data) and its data \
         directory after a full compaction. Redis: `INFO memory` used_memory (Redis's own \
         accounting, as in the issue's 241 bytes) and its resident memory. *Per link* divides the \
         growth since the empty server by the links; *total per link* divides the whole.\n"
    );
    let _ = writeln!(
        s,
        "| Server | Links | RSS | RSS per link (growth / total) | used_memory per link | disk | disk per link |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    for f in rows {
        let n = f.links as f64;
        let rss_growth = f.rss_bytes.saturating_sub(f.rss_empty_bytes) as f64 / n;
        let used = match (f.used_memory, f.used_memory_empty) {
            (Some(u), Some(e)) => format!("{:.0} B", u.saturating_sub(e) as f64 / n),
            _ => "–".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.0} B / {:.0} B | {} | {} | {:.0} B |",
            f.server.label(),
            ops(n),
            mib(f.rss_bytes as f64),
            rss_growth,
            f.rss_bytes as f64 / n,
            used,
            mib(f.disk_bytes as f64),
            f.disk_bytes.saturating_sub(f.disk_empty_bytes) as f64 / n
        );
    }
    let _ = writeln!(s);
}

/// "## One shard against all shards": phase 3 beside phase 1's rushd.
pub(super) fn one_shard(s: &mut String, results: &SuiteResults, top: usize) {
    let runs = variant_runs(results, VARIANT_ONE_SHARD);
    if runs.is_empty() {
        return;
    }
    let _ = writeln!(s, "## One shard against all shards\n");
    let _ = writeln!(
        s,
        "rushd restarted with `--shards 1` (fresh data, preloaded again), each workload closed-loop \
         at {top} in flight, beside phase 1's rushd with {} shards. Client and server share the \
         same {} cores, so more shard threads can only help while a core is idle.\n",
        results.rush_shards,
        results.machine.cores
    );
    let _ = writeln!(
        s,
        "| Workload | 1 shard ops/s | p99 ms | all shards ops/s | p99 ms | all / 1 |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    for run in runs {
        let r = &run.report;
        let all = peak_run(results, &r.workload, ServerKind::Rush, r.pipeline);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            r.workload,
            ops(r.throughput),
            ms(r.latency.p99_us),
            all.map_or("–".into(), |a| ops(a.report.throughput)),
            all.map_or("–".into(), |a| ms(a.report.latency.p99_us)),
            all.map_or("–".into(), |a| format!(
                "{:.2}×",
                a.report.throughput / r.throughput.max(1e-9)
            ))
        );
    }
    let _ = writeln!(s);
}
