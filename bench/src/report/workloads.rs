//! A section per workload: every closed-loop run on every server (with its
//! durability and the Rush/Redis ratio), latency against offered load, and,
//! for the catalog workloads, Rush's storage reads per query.

use super::catalog;
use super::format::{ms, ops, ratio};
use super::select::{peak_run, sweep_runs};
use super::Matrix;
use crate::suite::ServerKind;
use crate::workload::WORKLOADS;
use std::fmt::Write as _;

/// "## WORKLOAD": its runs, its sweep and its chart, its storage reads.
pub(super) fn section(s: &mut String, m: &Matrix, w: &str) {
    let _ = writeln!(s, "## {w}\n");
    let a = about(w);
    if !a.is_empty() {
        let _ = writeln!(s, "{a}.\n");
    }
    runs_table(s, m, w);
    sweep_table(s, m, w);
    catalog::storage_reads_section(s, m.results, w);
}

/// Every closed-loop run of `w`: each pipeline, each server.
fn runs_table(s: &mut String, m: &Matrix, w: &str) {
    let results = m.results;
    let _ = writeln!(
        s,
        "| Server | Durability | In flight/conn | ops/s | p50 ms | p99 ms | p99.9 ms | max ms | errors | answers | Rush/Redis |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    for &p in &m.pipes {
        let rush = peak_run(results, w, ServerKind::Rush, p).map(|r| r.report.throughput);
        for k in &m.servers {
            let Some(run) = peak_run(results, w, *k, p) else {
                continue;
            };
            let r = &run.report;
            let rat = match (*k, rush) {
                (ServerKind::Rush, _) => String::new(),
                (_, Some(a)) => ratio(a, r.throughput),
                _ => "–".into(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                k.label(),
                k.durability(),
                p,
                ops(r.throughput),
                ms(r.latency.p50_us),
                ms(r.latency.p99_us),
                ms(r.latency.p999_us),
                ms(r.latency.max_us),
                r.errors,
                answers(r),
                rat
            );
        }
    }
    let _ = writeln!(s);
}

/// Latency against offered load: `w`'s open-loop steps on each server, and
/// the chart of them.
fn sweep_table(s: &mut String, m: &Matrix, w: &str) {
    let results = m.results;
    let any_sweep = m
        .servers
        .iter()
        .any(|k| !sweep_runs(results, w, *k).is_empty());
    if !any_sweep {
        return;
    }
    let _ = writeln!(
        s,
        "Latency against offered load (open loop, latency counted from each request's \
         scheduled send time, so queueing behind a slow answer is included):\n"
    );
    let _ = writeln!(
        s,
        "| Server | Offered ops/s | % of its peak | Achieved ops/s | p50 ms | p99 ms | p99.9 ms | errors |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for k in &m.servers {
        for run in sweep_runs(results, w, *k) {
            let r = &run.report;
            let _ = writeln!(
                s,
                "| {} | {} | {:.0}% | {} | {} | {} | {} | {} |",
                k.label(),
                ops(r.rate.unwrap_or(0.0)),
                run.fraction.unwrap_or(0.0) * 100.0,
                ops(r.throughput),
                ms(r.latency.p50_us),
                ms(r.latency.p99_us),
                ms(r.latency.p999_us),
                r.errors
            );
        }
    }
    let _ = writeln!(s);
    if let Some(f) = m
        .charts
        .latency
        .iter()
        .find(|(n, _)| n == w)
        .map(|(_, f)| f)
    {
        let _ = writeln!(s, "![Latency against offered load: {w}]({f})\n");
    }
}

/// The workload's line of help, for the section's first paragraph.
fn about(workload: &str) -> &'static str {
    WORKLOADS
        .iter()
        .find(|e| e.name == workload)
        .map_or("", |e| e.about)
}

/// "40.0% miss" / "12.1% denied": the answers that were not a plain success.
fn answers(r: &crate::stats::RunReport) -> String {
    let mut parts = Vec::new();
    if r.ok > 0 {
        if r.misses > 0 {
            parts.push(format!(
                "{:.1}% absent",
                r.misses as f64 * 100.0 / r.ok as f64
            ));
        }
        if r.denied > 0 {
            parts.push(format!(
                "{:.1}% denied",
                r.denied as f64 * 100.0 / r.ok as f64
            ));
        }
    }
    if parts.is_empty() {
        "all ok".into()
    } else {
        parts.join(", ")
    }
}
