//! "## Errors": every failed request by type, with an example, and every
//! run that could not be made; and why charts are missing, if they are.

use super::format::ops;
use crate::charts;
use crate::suite::SuiteResults;
use std::fmt::Write as _;

/// The errors of every run, the failed runs, and the charts not drawn.
pub(super) fn section(s: &mut String, results: &SuiteResults, charts: &charts::Drawn) {
    let _ = writeln!(s, "## Errors\n");
    let mut any = false;
    for run in &results.runs {
        for (kind, stat) in &run.report.error_types {
            any = true;
            let _ = writeln!(
                s,
                "- {}{} on {}{}: **{kind}** × {} — e.g. `{}`",
                run.report.workload,
                run.variant.as_ref().map_or(String::new(), |v| format!(
                    " ({v}, {} keys)",
                    ops(run.report.keys as f64)
                )),
                run.server.label(),
                run.report
                    .rate
                    .map_or(String::new(), |r| format!(" at {}/s", ops(r))),
                stat.count,
                stat.example.replace('`', "'")
            );
        }
    }
    for f in &results.failures {
        any = true;
        let _ = writeln!(s, "- run failed: {}", f.replace('`', "'"));
    }
    if !any {
        let _ = writeln!(s, "None: every request of every run succeeded.");
    }
    let _ = writeln!(s);
    if let Some(why) = &charts.skipped {
        let _ = writeln!(s, "Charts were not drawn: {why}\n");
    }
}
