//! Which runs a section shows: the queries every part of the report (and
//! the targets, and the charts) makes of one suite's results.

use crate::suite::{Layout, ServerKind, SuiteResults, SuiteRun};
use crate::workload::WORKLOADS;

/// Workload names in report order: registered ones first, then any others
/// found in the results (from an older or newer build).
pub(crate) fn workload_order(results: &SuiteResults) -> Vec<String> {
    workload_order_of(results, SuiteRun::main_matrix)
}

/// [`workload_order`] of the runs `keep` selects.
pub(crate) fn workload_order_of(
    results: &SuiteResults,
    keep: impl Fn(&SuiteRun) -> bool,
) -> Vec<String> {
    let kept: Vec<&SuiteRun> = results.runs.iter().filter(|r| keep(r)).collect();
    let mut names: Vec<String> = WORKLOADS
        .iter()
        .map(|e| e.name.to_string())
        .filter(|n| kept.iter().any(|r| &r.report.workload == n))
        .collect();
    for r in kept {
        if !names.contains(&r.report.workload) {
            names.push(r.report.workload.clone());
        }
    }
    names
}

/// The servers that have runs, in [`ServerKind::ALL`] order.
pub(crate) fn servers_in(results: &SuiteResults) -> Vec<ServerKind> {
    ServerKind::ALL
        .into_iter()
        .filter(|k| results.runs.iter().any(|r| r.server == *k))
        .collect()
}

/// The closed-loop run of `workload` on `server` at `pipeline` (main matrix).
pub fn peak_run<'a>(
    results: &'a SuiteResults,
    workload: &str,
    server: ServerKind,
    pipeline: usize,
) -> Option<&'a SuiteRun> {
    closed_run(results, workload, server, pipeline, SuiteRun::main_matrix)
}

/// The closed-loop run of `workload` on `server` at `pipeline` in the
/// pinned layout.
pub fn pinned_run<'a>(
    results: &'a SuiteResults,
    workload: &str,
    server: ServerKind,
    pipeline: usize,
) -> Option<&'a SuiteRun> {
    closed_run(results, workload, server, pipeline, |r| {
        r.layout == Layout::Pinned
    })
}

/// The closed-loop run of `workload` on `server` at `pipeline` among the
/// runs `keep` selects.
fn closed_run<'a>(
    results: &'a SuiteResults,
    workload: &str,
    server: ServerKind,
    pipeline: usize,
    keep: impl Fn(&SuiteRun) -> bool,
) -> Option<&'a SuiteRun> {
    results.runs.iter().find(|r| {
        r.fraction.is_none()
            && keep(r)
            && r.server == server
            && r.report.workload == workload
            && r.report.pipeline == pipeline
    })
}

/// Closed-loop runs in the pinned layout.
pub(crate) fn pinned_runs(results: &SuiteResults) -> impl Iterator<Item = &SuiteRun> {
    results
        .runs
        .iter()
        .filter(|r| r.layout == Layout::Pinned && r.fraction.is_none())
}

/// Open-loop steps of `workload` on `server`, by offered rate.
pub fn sweep_runs<'a>(
    results: &'a SuiteResults,
    workload: &str,
    server: ServerKind,
) -> Vec<&'a SuiteRun> {
    let mut v: Vec<_> = results
        .runs
        .iter()
        .filter(|r| {
            r.fraction.is_some()
                && r.main_matrix()
                && r.server == server
                && r.report.workload == workload
        })
        .collect();
    v.sort_by(|a, b| {
        a.report
            .rate
            .partial_cmp(&b.report.rate)
            .expect("rates are finite")
    });
    v
}

/// The pipelines of the main matrix's closed-loop runs, ascending.
pub(crate) fn pipelines(results: &SuiteResults) -> Vec<usize> {
    let mut p: Vec<usize> = results
        .runs
        .iter()
        .filter(|r| r.fraction.is_none() && r.main_matrix())
        .map(|r| r.report.pipeline)
        .collect();
    p.sort_unstable();
    p.dedup();
    p
}

/// The runs of one phase (`VARIANT_SCALING`, …), in the order they ran.
pub(crate) fn variant_runs<'a>(results: &'a SuiteResults, variant: &str) -> Vec<&'a SuiteRun> {
    results
        .runs
        .iter()
        .filter(|r| r.variant.as_deref() == Some(variant))
        .collect()
}

/// "closed, 16 in flight" / "open, 50% of peak" / "scaling" …
pub(crate) fn run_name(run: &SuiteRun) -> String {
    let base = match run.fraction {
        Some(f) => format!("open loop, {:.0}% of peak", f * 100.0),
        None => format!("closed loop, {} in flight", run.report.pipeline),
    };
    match &run.variant {
        Some(v) => format!("{base} ({v})"),
        None => base,
    }
}
