//! The issues' targets, checked against one run's figures: the "Issue
//! targets" table of `REPORT.md`. Issue 12 (the request path) sets CPU per
//! operation and throughput ratios against Redis; issue 7 set the services'
//! throughput, storage-read, latency, footprint and scaling goals.

use crate::report::{
    ms, ops, peak_run, pinned_run, pipelines, reads_goal, reads_per_query, run_name, sweep_runs,
    variant_runs, workload_order, ReadsPerQuery,
};
use crate::suite::{ServerKind, SuiteResults, SuiteRun};
use std::fmt::Write as _;

/// Issue 12: Rush's server CPU per operation against Redis's (AOF
/// everysec: Redis's cheapest durable mode, and for limits and envelopes
/// its Lua script), and throughput at the headline pipeline.
fn request_path(results: &SuiteResults, top: usize) -> Vec<TargetCheck> {
    use ServerKind::*;
    let mut t = Vec::new();
    for (w, max) in [
        ("kv-set", 1.0),
        ("kv-get", 1.0),
        ("kv-incr", 1.0),
        ("links-resolve", 1.0),
        ("lookups-zipf", 1.0),
        ("links-shorten", 1.5),
        ("lookups", 1.5),
        ("limits", 0.5),
        ("envelopes", 0.5),
    ] {
        t.push(cpu_check(results, w, max, top));
    }
    for (w, other, need) in [
        ("kv-get", RedisEverysec, 1.0),
        ("links-resolve", RedisEverysec, 1.0),
        ("limits", RedisAlways, 1.5),
        ("envelopes", RedisAlways, 1.5),
    ] {
        let target = format!(
            "(issue 12) {w} throughput ≥ {need}× {} at {top} in flight",
            other.label()
        );
        t.push(ratio_check(results, w, other, need, top, &target));
    }
    t
}

/// Rush's server µs/op over Redis everysec's on `w`, at most `max`: judged
/// in the shared layout at `top` in flight; the pinned layout's ratio is
/// shown beside it when the suite ran one.
fn cpu_check(results: &SuiteResults, w: &str, max: f64, top: usize) -> TargetCheck {
    use ServerKind::*;
    let target = format!("(issue 12) {w}: Rush server CPU per op ≤ {max}× Redis everysec");
    let per_op = |run: Option<&SuiteRun>| run.and_then(|r| r.report.server_cpu_us_per_op());
    let shared = per_op(peak_run(results, w, Rush, top)).zip(per_op(peak_run(
        results,
        w,
        RedisEverysec,
        top,
    )));
    let pinned = per_op(pinned_run(results, w, Rush, top)).zip(per_op(pinned_run(
        results,
        w,
        RedisEverysec,
        top,
    )));
    let mut parts = Vec::new();
    if let Some((a, b)) = shared {
        parts.push(format!("{:.2}× ({a:.1} vs {b:.1} µs/op)", a / b));
    }
    if let Some((a, b)) = pinned {
        parts.push(format!("pinned {:.2}× ({a:.1} vs {b:.1} µs/op)", a / b));
    }
    TargetCheck {
        target,
        measured: if parts.is_empty() {
            "not measured".into()
        } else {
            parts.join("; ")
        },
        met: shared.map(|(a, b)| a <= max * b),
    }
}

/// One of the targets, as measured.
pub struct TargetCheck {
    pub target: String,
    pub measured: String,
    /// `None`: not measured in this run.
    pub met: Option<bool>,
}

fn throughput_of(results: &SuiteResults, w: &str, k: ServerKind, p: usize) -> Option<f64> {
    peak_run(results, w, k, p).map(|r| r.report.throughput)
}

/// Rush/Redis at every pipeline: "2.10× at 16, 1.40× at 1"; and whether
/// the ratio at `top` reaches `need`.
fn ratio_check(
    results: &SuiteResults,
    w: &str,
    other: ServerKind,
    need: f64,
    top: usize,
    target: &str,
) -> TargetCheck {
    let mut parts = Vec::new();
    let mut at_top = None;
    let mut pipes = pipelines(results);
    pipes.reverse();
    for p in pipes {
        if let (Some(a), Some(b)) = (
            throughput_of(results, w, ServerKind::Rush, p),
            throughput_of(results, w, other, p),
        ) {
            let r = a / b;
            parts.push(format!(
                "{r:.2}× at {p} in flight ({} vs {})",
                ops(a),
                ops(b)
            ));
            if p == top {
                at_top = Some(r);
            }
        }
    }
    TargetCheck {
        target: target.into(),
        measured: if parts.is_empty() {
            "not run".into()
        } else {
            parts.join("; ")
        },
        met: at_top.map(|r| r >= need),
    }
}

/// Every target of issues 7 and 12, checked against this run's figures (the
/// headline pipeline decides; the other pipeline, and the pinned layout for
/// CPU, are shown beside it).
pub fn targets(results: &SuiteResults, top: usize) -> Vec<TargetCheck> {
    use ServerKind::*;
    let mut t = request_path(results, top);
    t.extend([
        ratio_check(
            results,
            "links-shorten",
            RedisEverysec,
            2.0,
            top,
            "(issue 7) links-shorten ≥ 2× Redis (everysec), Rush acknowledging only synced writes",
        ),
        ratio_check(
            results,
            "links-resolve",
            RedisEverysec,
            1.0,
            top,
            "(issue 7) links-resolve ≥ 1× Redis (everysec)",
        ),
        ratio_check(
            results,
            "limits",
            RedisEverysec,
            2.0,
            top,
            "(issue 7) limits ≥ 2× Redis's Lua script (everysec), Rush atomic and idempotent",
        ),
    ]);
    // Lookups: storage reads per query in every Rush lookups run.
    let mut worst: Option<(String, ReadsPerQuery)> = None;
    for run in results
        .runs
        .iter()
        .filter(|r| r.server == Rush && r.report.workload.starts_with("lookups"))
    {
        if let Some(q) = reads_per_query(&run.report) {
            let slack = reads_goal(&q) - q.reads_per_query;
            if worst
                .as_ref()
                .is_none_or(|(_, w)| slack < reads_goal(w) - w.reads_per_query)
            {
                worst = Some((
                    format!(
                        "{} {}, {} keys",
                        run.report.workload,
                        run_name(run),
                        ops(run.report.keys as f64)
                    ),
                    q,
                ));
            }
        }
    }
    t.push(match worst {
        Some((name, q)) => TargetCheck {
            target: "(issue 7) lookups: storage reads per query ≤ 0.6 + Bloom false-positive rate"
                .into(),
            measured: format!(
                "worst run ({name}): {:.4} reads/query, FP rate {:.4}, goal ≤ {:.4}",
                q.reads_per_query,
                q.fp_rate,
                reads_goal(&q)
            ),
            met: Some(q.reads_per_query <= reads_goal(&q)),
        },
        None => TargetCheck {
            target: "(issue 7) lookups: storage reads per query ≤ 0.6 + Bloom false-positive rate"
                .into(),
            measured: "not measured (no /metrics)".into(),
            met: None,
        },
    });
    t.push(ratio_check(
        results,
        "lookups",
        RedisEverysec,
        1.5,
        top,
        "(issue 7) lookups ≥ 1.5× Redis HGETALL (uniform owners)",
    ));
    t.push(ratio_check(
        results,
        "lookups-zipf",
        RedisEverysec,
        1.5,
        top,
        "(issue 7) lookups-zipf ≥ 1.5× Redis HGETALL (Zipf owners)",
    ));
    t.push(ratio_check(
        results,
        "envelopes",
        RedisAlways,
        3.0,
        top,
        "(issue 7) envelopes grab ≥ 3× Redis Lua with appendfsync always (both durable per grab)",
    ));
    // Latency at half the peak, every workload, Rush.
    let mut ok = Vec::new();
    let mut missed = Vec::new();
    for w in workload_order(results) {
        let half = sweep_runs(results, &w, Rush)
            .into_iter()
            .find(|r| r.fraction.is_some_and(|f| (f - 0.5).abs() < 1e-9));
        if let Some(run) = half {
            let l = &run.report.latency;
            let line = format!("{w} p99 {} / p99.9 {} ms", ms(l.p99_us), ms(l.p999_us));
            if l.p99_us <= 1000.0 && l.p999_us <= 5000.0 && run.report.errors == 0 {
                ok.push(line);
            } else {
                missed.push(line);
            }
        }
    }
    t.push(TargetCheck {
        target:
            "(issue 7) p99 ≤ 1 ms and p99.9 ≤ 5 ms at half the measured peak, every workload (Rush)"
                .into(),
        measured: if ok.is_empty() && missed.is_empty() {
            "not run".into()
        } else {
            format!(
                "met: {}; missed: {}",
                if ok.is_empty() {
                    "none".into()
                } else {
                    ok.join(", ")
                },
                if missed.is_empty() {
                    "none".into()
                } else {
                    missed.join(", ")
                }
            )
        },
        met: if ok.is_empty() && missed.is_empty() {
            None
        } else {
            Some(missed.is_empty())
        },
    });
    // Footprint at the largest size both sides reached.
    let largest = results
        .footprint
        .iter()
        .filter(|f| f.server == Rush && f.links > 0)
        .map(|f| f.links)
        .max();
    let fp = largest.and_then(|n| {
        let rush = results
            .footprint
            .iter()
            .find(|f| f.server == Rush && f.links == n)?;
        let redis = results
            .footprint
            .iter()
            .find(|f| f.server != Rush && f.links == n && f.used_memory.is_some())?;
        let redis_per = redis
            .used_memory?
            .saturating_sub(redis.used_memory_empty.unwrap_or(0)) as f64
            / n as f64;
        let rush_per = rush.rss_bytes as f64 / n as f64;
        Some((n, rush_per, redis_per))
    });
    t.push(match fp {
        Some((n, rush, redis)) => TargetCheck {
            target: "(issue 7) footprint: Rush RSS per link ≤ 1/4 of Redis's memory per link (at the largest size measured; 10M links in the full run)".into(),
            measured: format!(
                "at {} links: Rush {:.0} B/link (whole RSS), Redis {:.0} B/link (used_memory growth): {:.2} of Redis's",
                ops(n as f64),
                rush,
                redis,
                rush / redis
            ),
            met: Some(rush * 4.0 <= redis),
        },
        None => TargetCheck {
            target: "(issue 7) footprint: Rush RSS per link ≤ 1/4 of Redis's memory per link (at the largest size measured; 10M links in the full run)".into(),
            measured: "not measured".into(),
            met: None,
        },
    });
    let scale: Vec<&SuiteRun> = variant_runs(results, crate::suite::VARIANT_SCALING)
        .into_iter()
        .filter(|r| r.server == Rush && r.report.workload == "links-resolve")
        .collect();
    let small = scale.iter().min_by_key(|r| r.report.keys);
    let big = scale.iter().max_by_key(|r| r.report.keys);
    t.push(match (small, big) {
        (Some(a), Some(b)) if a.report.keys < b.report.keys => {
            let r = b.report.throughput / a.report.throughput;
            TargetCheck {
                target: "(issue 7) links-resolve at the largest size within 20% of the smallest (10M vs 1M links in the full run; Rush)".into(),
                measured: format!(
                    "{} keys: {} ops/s; {} keys: {} ops/s ({:.2}×)",
                    ops(a.report.keys as f64),
                    ops(a.report.throughput),
                    ops(b.report.keys as f64),
                    ops(b.report.throughput),
                    r
                ),
                met: Some(r >= 0.8),
            }
        }
        _ => TargetCheck {
            target: "(issue 7) links-resolve at the largest size within 20% of the smallest (10M vs 1M links in the full run; Rush)".into(),
            measured: "not run".into(),
            met: None,
        },
    });
    t
}

/// The "Issue targets" section of the report.
pub fn section(s: &mut String, results: &SuiteResults, top: usize) {
    let checks = targets(results, top);
    if checks.iter().all(|c| c.met.is_none()) {
        return;
    }
    let _ = writeln!(s, "## Issue targets, as measured in this run\n");
    let _ = writeln!(
        s,
        "CPU and throughput targets are judged at {top} in flight per connection in the shared \
         layout (the headline); the pinned layout's CPU ratio and the other pipeline are shown \
         beside. Where a target is missed, the analysis at the end gives the profile-based \
         reason and what would close it.\n"
    );
    let _ = writeln!(s, "| Target | Measured | Verdict |");
    let _ = writeln!(s, "|---|---|---|");
    for c in checks {
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            c.target,
            c.measured,
            match c.met {
                Some(true) => "met",
                Some(false) => "**missed**",
                None => "–",
            }
        );
    }
    let _ = writeln!(s);
}
