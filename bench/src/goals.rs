//! The issues' targets, checked against one run's figures: the "Issue
//! targets" table of `REPORT.md`. Issue 12 (the request path) sets CPU per
//! operation and throughput ratios against Redis; issue 7 set the services'
//! throughput, storage-read, latency, footprint and scaling goals; issue 17
//! (scale) throughput as the data grows, and memory on a budget at the
//! largest size.
//!
//! [`targets`] lists them in the table's order; each kind of target is a
//! function of its own.

use crate::report::{
    largest_footprints, ms, ops, peak_run, pinned_run, pipelines, reads_goal, reads_per_query,
    run_name, sweep_runs, variant_runs, workload_order, ReadsPerQuery,
};
use crate::suite::{Footprint, ServerKind, SuiteResults, SuiteRun, VARIANT_SCALING};
use crate::workloads::catalog::is_catalog;
use std::fmt::Write as _;

/// One of the targets, as measured.
pub struct TargetCheck {
    pub target: String,
    pub measured: String,
    /// `None`: not measured in this run.
    pub met: Option<bool>,
}

impl TargetCheck {
    /// A target this run has no figures for: `why` says which are missing.
    fn unmeasured(target: &str, why: &str) -> TargetCheck {
        TargetCheck {
            target: target.into(),
            measured: why.into(),
            met: None,
        }
    }
}

/// A throughput target of issue 7: Rush at least `need` × `other` on
/// `workload`.
struct RatioTarget {
    workload: &'static str,
    other: ServerKind,
    need: f64,
    target: &'static str,
}

/// Issue 7's throughput targets for links and limits.
const SERVICE_RATIOS: &[RatioTarget] = &[
    RatioTarget {
        workload: "links-shorten",
        other: ServerKind::RedisEverysec,
        need: 2.0,
        target:
            "(issue 7) links-shorten ≥ 2× Redis (everysec), Rush acknowledging only synced writes",
    },
    RatioTarget {
        workload: "links-resolve",
        other: ServerKind::RedisEverysec,
        need: 1.0,
        target: "(issue 7) links-resolve ≥ 1× Redis (everysec)",
    },
    RatioTarget {
        workload: "limits",
        other: ServerKind::RedisEverysec,
        need: 2.0,
        target: "(issue 7) limits ≥ 2× Redis's Lua script (everysec), Rush atomic and idempotent",
    },
];

/// Issue 7's throughput targets for the catalog and envelopes.
const CATALOG_AND_ENVELOPE_RATIOS: &[RatioTarget] = &[
    RatioTarget {
        workload: "catalog",
        other: ServerKind::RedisEverysec,
        need: 1.5,
        target: "(issue 7) catalog ≥ 1.5× Redis HGETALL (uniform owners)",
    },
    RatioTarget {
        workload: "catalog-zipf",
        other: ServerKind::RedisEverysec,
        need: 1.5,
        target: "(issue 7) catalog-zipf ≥ 1.5× Redis HGETALL (Zipf owners)",
    },
    RatioTarget {
        workload: "envelopes",
        other: ServerKind::RedisAlways,
        need: 3.0,
        target:
            "(issue 7) envelopes grab ≥ 3× Redis Lua with appendfsync always (both durable per grab)",
    },
];

/// Every target of issues 7, 12 and 17, checked against this run's figures (the
/// headline pipeline decides; the other pipeline, and the pinned layout for
/// CPU, are shown beside it).
pub fn targets(results: &SuiteResults, top: usize) -> Vec<TargetCheck> {
    let ratios = |list: &[RatioTarget]| -> Vec<TargetCheck> {
        list.iter()
            .map(|r| ratio_check(results, r.workload, r.other, r.need, top, r.target))
            .collect()
    };
    let mut t = request_path(results, top);
    t.extend(ratios(SERVICE_RATIOS));
    t.push(storage_reads(results));
    t.extend(ratios(CATALOG_AND_ENVELOPE_RATIOS));
    t.push(half_peak_latency(results));
    t.push(footprint(results));
    t.push(scale_ratio(
        results,
        "links-resolve",
        0.8,
        "(issue 7) links-resolve at the largest size within 20% of the smallest (10M vs 1M links in the full run; Rush)",
    ));
    t.extend(scale(results));
    t
}

/// Issue 17: throughput as the data grows (Rush, the largest size against
/// the smallest) and memory at the largest size.
fn scale(results: &SuiteResults) -> Vec<TargetCheck> {
    let mut t: Vec<TargetCheck> = [
        (
            "catalog",
            0.7,
            "(issue 17) catalog at the largest size ≥ 0.7× its smallest-size throughput (Rush)",
        ),
        (
            "links-resolve",
            0.8,
            "(issue 17) links-resolve at the largest size ≥ 0.8× its smallest (Rush)",
        ),
        (
            "links-shorten",
            0.8,
            "(issue 17) links-shorten at the largest size ≥ 0.8× its smallest (Rush)",
        ),
    ]
    .into_iter()
    .map(|(w, need, target)| scale_ratio(results, w, need, target))
    .collect();
    t.push(rss_within_budget(results));
    t.push(rss_per_item(results));
    t
}

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
        ("catalog-zipf", 1.0),
        ("links-shorten", 1.5),
        ("catalog", 1.5),
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
    let both =
        |find: for<'a> fn(&'a SuiteResults, &str, ServerKind, usize) -> Option<&'a SuiteRun>| {
            per_op(find(results, w, Rush, top)).zip(per_op(find(results, w, RedisEverysec, top)))
        };
    let shared = both(peak_run);
    let pinned = both(pinned_run);
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
    let throughput = |k, p| peak_run(results, w, k, p).map(|r| r.report.throughput);
    let mut parts = Vec::new();
    let mut at_top = None;
    let mut pipes = pipelines(results);
    pipes.reverse();
    for p in pipes {
        if let (Some(a), Some(b)) = (throughput(ServerKind::Rush, p), throughput(other, p)) {
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

/// The catalog: storage reads per query in every Rush catalog run; the run with
/// the least slack against its goal decides.
fn storage_reads(results: &SuiteResults) -> TargetCheck {
    const TARGET: &str =
        "(issue 7) catalog: storage reads per query ≤ 0.6 + Bloom false-positive rate";
    let slack = |q: &ReadsPerQuery| reads_goal(q) - q.reads_per_query;
    let mut worst: Option<(String, ReadsPerQuery)> = None;
    for run in results
        .runs
        .iter()
        .filter(|r| r.server == ServerKind::Rush && is_catalog(&r.report.workload))
    {
        if let Some(q) = reads_per_query(&run.report) {
            if worst.as_ref().is_none_or(|(_, w)| slack(&q) < slack(w)) {
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
    let Some((name, q)) = worst else {
        return TargetCheck::unmeasured(TARGET, "not measured (no /metrics)");
    };
    TargetCheck {
        target: TARGET.into(),
        measured: format!(
            "worst run ({name}): {:.4} reads/query, FP rate {:.4}, goal ≤ {:.4}",
            q.reads_per_query,
            q.fp_rate,
            reads_goal(&q)
        ),
        met: Some(q.reads_per_query <= reads_goal(&q)),
    }
}

/// Latency at half the peak, every workload, Rush.
fn half_peak_latency(results: &SuiteResults) -> TargetCheck {
    const TARGET: &str =
        "(issue 7) p99 ≤ 1 ms and p99.9 ≤ 5 ms at half the measured peak, every workload (Rush)";
    let mut ok = Vec::new();
    let mut missed = Vec::new();
    for w in workload_order(results) {
        let half = sweep_runs(results, &w, ServerKind::Rush)
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
    if ok.is_empty() && missed.is_empty() {
        return TargetCheck::unmeasured(TARGET, "not run");
    }
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    TargetCheck {
        target: TARGET.into(),
        measured: format!("met: {}; missed: {}", list(&ok), list(&missed)),
        met: Some(missed.is_empty()),
    }
}

/// Footprint at the largest size measured: Rush's whole RSS per link
/// against Redis's used_memory growth per link.
fn footprint(results: &SuiteResults) -> TargetCheck {
    const TARGET: &str = "(issue 7) footprint: Rush RSS per link ≤ 1/4 of Redis's memory per link (at the largest size measured; 10M links in the full run)";
    let Some(m) = per_item_at_largest(results, "links") else {
        return TargetCheck::unmeasured(TARGET, "not measured");
    };
    TargetCheck {
        target: TARGET.into(),
        measured: format!(
            "at {} links: Rush {:.0} B/link (whole RSS), Redis {:.0} B/link (used_memory growth): {:.2} of Redis's",
            m.at(),
            m.rush,
            m.redis,
            m.rush / m.redis
        ),
        met: Some(m.rush * 4.0 <= m.redis),
    }
}

/// `workload` on Rush at the largest scaling size against the smallest:
/// met when the largest's throughput is at least `need` × the smallest's.
fn scale_ratio(results: &SuiteResults, workload: &str, need: f64, target: &str) -> TargetCheck {
    let scale: Vec<&SuiteRun> = variant_runs(results, VARIANT_SCALING)
        .into_iter()
        .filter(|r| r.server == ServerKind::Rush && r.report.workload == workload)
        .collect();
    let small = scale.iter().min_by_key(|r| r.report.keys);
    let big = scale.iter().max_by_key(|r| r.report.keys);
    match (small, big) {
        (Some(a), Some(b)) if a.report.keys < b.report.keys => {
            let r = b.report.throughput / a.report.throughput;
            TargetCheck {
                target: target.into(),
                measured: format!(
                    "{} keys: {} ops/s; {} keys: {} ops/s ({:.2}×)",
                    ops(a.report.keys as f64),
                    ops(a.report.throughput),
                    ops(b.report.keys as f64),
                    ops(b.report.throughput),
                    r
                ),
                met: Some(r >= need),
            }
        }
        _ => TargetCheck::unmeasured(target, "not run"),
    }
}

/// Every Rush footprint at the largest size of its data (links, owners)
/// within the scaling phase's memory budget.
fn rss_within_budget(results: &SuiteResults) -> TargetCheck {
    const TARGET: &str = "(issue 17) Rush RSS at the largest size within its memory budget";
    let Some(mb) = results.scale_memory_mb else {
        return TargetCheck::unmeasured(TARGET, "not measured (no memory budget)");
    };
    let rows = largest_footprints(results, ServerKind::Rush);
    if rows.is_empty() {
        return TargetCheck::unmeasured(TARGET, "not measured");
    }
    let budget = mb * 1048576;
    let parts: Vec<String> = rows
        .iter()
        .map(|f| {
            format!(
                "{} at {}: {:.0} MiB",
                f.items(),
                ops(f.links as f64),
                f.rss_bytes as f64 / 1048576.0
            )
        })
        .collect();
    TargetCheck {
        target: TARGET.into(),
        measured: format!("budget {mb} MiB; {}", parts.join("; ")),
        met: Some(rows.iter().all(|f| f.rss_bytes <= budget)),
    }
}

/// Rush's whole RSS per item against Redis's memory per item (its
/// used_memory growth, as issue 7's footprint target takes it) at the
/// largest size each measured, for links and for owners.
fn rss_per_item(results: &SuiteResults) -> TargetCheck {
    const TARGET: &str = "(issue 17) Rush RSS per item ≤ 0.3× Redis's, links and owners";
    let mut parts = Vec::new();
    let mut met = None;
    for items in ["links", "owners"] {
        match per_item_at_largest(results, items) {
            Some(m) => {
                parts.push(format!(
                    "{items} at {}: Rush {:.0} B (whole RSS), Redis {:.0} B \
                     (used_memory growth; RSS {:.0} B): {:.2}×",
                    m.at(),
                    m.rush,
                    m.redis,
                    m.redis_rss,
                    m.rush / m.redis
                ));
                met = Some(met.unwrap_or(true) && m.rush <= 0.3 * m.redis);
            }
            None => parts.push(format!("{items}: not measured")),
        }
    }
    if met.is_none() {
        return TargetCheck::unmeasured(TARGET, "not measured");
    }
    TargetCheck {
        target: TARGET.into(),
        measured: parts.join("; "),
        met,
    }
}

/// Memory per item of Rush and Redis, each at the largest size of one
/// kind of item it measured.
struct PerItem {
    /// Items Rush and Redis held (they differ by the links links-shorten
    /// stored at the sizes before).
    rush_items: u64,
    redis_items: u64,
    /// Rush's whole RSS per item, bytes.
    rush: f64,
    /// Redis's used_memory growth per item, bytes.
    redis: f64,
    /// Redis's whole RSS per item, bytes.
    redis_rss: f64,
}

impl PerItem {
    /// The items: "10,000,000", or "10,400,000 (Redis 10,200,000)".
    fn at(&self) -> String {
        if self.rush_items == self.redis_items {
            ops(self.rush_items as f64)
        } else {
            format!(
                "{} (Redis {})",
                ops(self.rush_items as f64),
                ops(self.redis_items as f64)
            )
        }
    }
}

/// Rush's and Redis's memory per item of `items` (links, owners), each at
/// the largest size it measured (Redis: one with `INFO memory` figures).
fn per_item_at_largest(results: &SuiteResults, items: &str) -> Option<PerItem> {
    let rush = ServerKind::Rush;
    let ours = largest_footprints(results, rush)
        .into_iter()
        .find(|f| f.items() == items)?;
    let redis = results
        .footprint
        .iter()
        .filter(|f| f.server != rush && f.items() == items && f.links > 0)
        .filter(|f| f.used_memory.is_some())
        .max_by_key(|f| f.links)?;
    let used = redis
        .used_memory?
        .saturating_sub(redis.used_memory_empty.unwrap_or(0));
    let per = |b: u64, f: &Footprint| b as f64 / f.links as f64;
    Some(PerItem {
        rush_items: ours.links,
        redis_items: redis.links,
        rush: per(ours.rss_bytes, ours),
        redis: per(used, redis),
        redis_rss: per(redis.rss_bytes, redis),
    })
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
