//! "## Stalls": Rush runs in which a shard stopped for a while, and where
//! the time went — the group commit (the shard log's append and fsync: the
//! disk) or waiting for the write-back thread (RocksDB behind) — from the
//! histograms rushd exports and the suite reads around every run
//! (`scrape::STALL_METRICS`).

use crate::suite::{ServerKind, SuiteResults, SuiteRun};
use std::fmt::Write as _;

/// A pass (or commit, or wait) longer than this is a stall: every
/// connection of the shard waits that long. A bucket bound of every
/// histogram read (as exported, and in ms).
const SLOW: &str = "0.25";
const SLOW_MS: u32 = 250;

/// How many observations of histogram `name` in `run` were over `le`
/// (`None` when the run has no such histogram).
fn over(run: &SuiteRun, name: &str, le: &str) -> Option<f64> {
    let count = run.report.metric(&format!("{name}_count"))?;
    let under = run
        .report
        .metric(&format!("{name}_bucket{{le=\"{le}\"}}"))?;
    Some((count - under).max(0.0))
}

pub(super) fn section(s: &mut String, results: &SuiteResults) {
    let rush: Vec<&SuiteRun> = results
        .runs
        .iter()
        .filter(|r| r.server == ServerKind::Rush)
        .collect();
    if rush.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Stalls\n");
    let timed: Vec<&SuiteRun> = rush
        .iter()
        .copied()
        .filter(|r| r.report.metric("rush_shard_pass_seconds_count").is_some())
        .collect();
    if timed.is_empty() {
        let _ = writeln!(
            s,
            "These runs carry no pass timings (rushd did not export them yet).\n"
        );
        return;
    }
    let mut rows = String::new();
    for run in &timed {
        let passes = over(run, "rush_shard_pass_seconds", SLOW).unwrap_or(0.0);
        let long = over(run, "rush_shard_pass_seconds", "1").unwrap_or(0.0);
        let commits = over(run, "rush_storage_commit_seconds", SLOW).unwrap_or(0.0);
        let waits = over(run, "rush_storage_write_back_wait_seconds", SLOW).unwrap_or(0.0);
        if passes + commits + waits == 0.0 {
            continue;
        }
        let waited = run
            .report
            .metric("rush_storage_write_back_wait_seconds_sum")
            .unwrap_or(0.0);
        let _ = writeln!(
            rows,
            "| {} | {} | {} × {} | {passes:.0} | {long:.0} | {commits:.0} | {waits:.0} | {waited:.1} |",
            run.report.workload,
            run.variant.as_deref().unwrap_or("main"),
            run.report.connections,
            run.report.pipeline,
        );
    }
    let _ = writeln!(
        s,
        "A shard's pass (read, execute, group commit, answers) that takes over {} ms holds every connection of the shard that long. \
         Rush runs with any such pass, and where the time went: a group commit over {} ms is the shard log's append and fsync (the disk); \
         a wait for the write-back thread is RocksDB behind (pending writes over twice `storage.write_back_mb`).\n",
        SLOW_MS, SLOW_MS,
    );
    if rows.is_empty() {
        let _ = writeln!(
            s,
            "None: no pass of the {} timed Rush runs took over {} ms.\n",
            timed.len(),
            SLOW_MS,
        );
        return;
    }
    let _ = writeln!(
        s,
        "| workload | phase | connections × pipeline | passes > {SLOW} s | > 1 s | commits > {SLOW} s | write-back waits > {SLOW} s | waited, s |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    let _ = writeln!(s, "{rows}");
}
