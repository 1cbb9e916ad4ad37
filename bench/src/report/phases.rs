//! The suite's later phases: throughput as the data grows, the footprint
//! per stored item (links and owners) and its projection to 100M items,
//! and a one-shard rushd beside the all-shards one.

use super::format::{mib, ms, ops, size};
use super::select::{peak_run, variant_runs, workload_order_of};
use crate::suite::{
    Footprint, ServerKind, SuiteResults, ITEM_KINDS, SCALING_FAMILIES, VARIANT_ONE_SHARD,
    VARIANT_SCALING,
};
use std::fmt::Write as _;

/// "## Scaling with data size": phase 2's runs at each item count, by
/// workload (the families' order), server and size.
pub(super) fn scaling(s: &mut String, results: &SuiteResults) {
    let mut runs = variant_runs(results, VARIANT_SCALING);
    if runs.is_empty() {
        return;
    }
    // The families' workloads in the order they run, then any others.
    let order: Vec<String> = SCALING_FAMILIES
        .iter()
        .flat_map(|f| [f.grows, f.then])
        .map(str::to_string)
        .chain(workload_order_of(results, |r| {
            r.variant.as_deref() == Some(VARIANT_SCALING)
        }))
        .collect();
    let rank = |w: &str| order.iter().position(|n| n == w);
    let server_rank = |k: ServerKind| ServerKind::ALL.iter().position(|x| *x == k);
    runs.sort_by_key(|r| {
        (
            rank(&r.report.workload),
            server_rank(r.server),
            r.report.keys,
        )
    });
    let cpu = runs.iter().any(|r| r.report.server_cpu_secs.is_some());
    let _ = writeln!(s, "## Scaling with data size\n");
    let _ = writeln!(
        s,
        "Each family on a fresh server of its own, its data preloaded to each size in turn: \
         links (`links-resolve` at each size, then `links-shorten` writing new links into the \
         store of that size), owners (`catalog` at each size, then `catalog-zipf` on the same \
         owners), users (`limits-held`, orders reading the books its preload stored, then \
         `limits`, fresh users' books written into that store) and envelopes \
         (`envelopes-held`, grabs of the envelopes its preload stored, then the `envelopes` \
         storm in that store). Every run closed-loop at that size{}. The last column compares with the \
         smallest size of the same workload on the same server.\n",
        match results.scale_memory_mb {
            Some(mb) => format!("; rushd on a memory budget of {mb} MiB (`--memory-mb {mb}`)"),
            None => String::new(),
        }
    );
    let _ = writeln!(
        s,
        "| Workload | Server | Keys | ops/s | p50 ms | p99 ms | p99.9 ms | errors |{} vs smallest |",
        if cpu { " server µs/op |" } else { "" }
    );
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|{}---:|",
        if cpu { "---:|" } else { "" }
    );
    for run in &runs {
        let r = &run.report;
        let base = runs
            .iter()
            .filter(|o| o.server == run.server && o.report.workload == r.workload)
            .min_by_key(|o| o.report.keys)
            .map(|o| o.report.throughput);
        let us = match (cpu, r.server_cpu_us_per_op()) {
            (false, _) => String::new(),
            (true, Some(v)) => format!(" {v:.1} |"),
            (true, None) => " – |".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |{us} {} |",
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

/// The footprint rows with items, links first (then in the order measured).
fn footprint_rows(results: &SuiteResults) -> Vec<&Footprint> {
    let mut rows: Vec<_> = results.footprint.iter().filter(|f| f.links > 0).collect();
    rows.sort_by_key(|f| item_rank(f.items()));
    rows
}

/// Where rows of `items` go: in the order of [`ITEM_KINDS`].
fn item_rank(items: &str) -> usize {
    ITEM_KINDS
        .iter()
        .position(|k| *k == items)
        .unwrap_or(usize::MAX)
}

/// "## Footprint per stored item": memory and disk per link, owner, user
/// and envelope at each size.
pub(super) fn footprint(s: &mut String, results: &SuiteResults) {
    let rows = footprint_rows(results);
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "## Footprint per stored item\n");
    let bounded = match results.scale_memory_mb {
        Some(mb) => format!(
            "sized from rushd's memory budget, `--memory-mb {mb}` ({mb} MiB), not by the data"
        ),
        None => "bounded by config, not by data".into(),
    };
    let _ = writeln!(
        s,
        "Measured in the scaling phase on a server holding one family's data: links after \
         `links-resolve` at each size (100-byte URLs, 7-character codes, 30-day TTL; the items \
         count the links `links-shorten` stored at the sizes before), owners after `catalog` at \
         each size (3–5 records of ~40 bytes each), users after `limits-held` at each size \
         (a book with one order of one item today), envelopes after `envelopes-held` at each \
         size (100 shares, the grabs of the runs before included). Rush: the process's \
         resident memory (VmRSS; it holds RocksDB's block cache and memtables and the shards' \
         caches, {bounded}) and its data directory after a full compaction. Redis: `INFO \
         memory` used_memory (Redis's own accounting, as in the issue's 241 bytes per link) and \
         its resident memory. *Per item* divides the growth since the empty server by the \
         items; *total per item* divides the whole.\n"
    );
    let _ = writeln!(
        s,
        "| Server | Workload | Items | RSS | RSS per item (growth / total) | used_memory per item | disk | disk per item |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|");
    for f in rows {
        let n = f.links as f64;
        let used = match (f.used_memory, f.used_memory_empty) {
            (Some(u), Some(e)) => format!("{:.0} B", u.saturating_sub(e) as f64 / n),
            _ => "–".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.0} B / {:.0} B | {} | {} | {:.0} B |",
            f.server.label(),
            f.items(),
            ops(n),
            mib(f.rss_bytes as f64),
            growth(f.rss_bytes, f.rss_empty_bytes) / n,
            f.rss_bytes as f64 / n,
            used,
            mib(f.disk_bytes as f64),
            growth(f.disk_bytes, f.disk_empty_bytes) / n
        );
    }
    let _ = writeln!(s);
}

/// The items the projection is made for.
const PROJECTED_ITEMS: u64 = 100_000_000;

/// Bytes gained since the empty server (none when it shrank).
fn growth(now: u64, empty: u64) -> f64 {
    now.saturating_sub(empty) as f64
}

/// A server's figures at [`PROJECTED_ITEMS`], from its footprint at the
/// largest size measured: the empty server's figure plus the growth per
/// item times the items.
struct Projection<'a> {
    from: &'a Footprint,
    /// RSS growth per item, bytes.
    rss_per_item: f64,
    /// Disk growth per item, bytes.
    disk_per_item: f64,
    /// Projected RSS and disk, bytes.
    rss: f64,
    disk: f64,
}

impl Projection<'_> {
    fn of(f: &Footprint) -> Projection<'_> {
        let n = f.links.max(1) as f64;
        let rss_per_item = growth(f.rss_bytes, f.rss_empty_bytes) / n;
        let disk_per_item = growth(f.disk_bytes, f.disk_empty_bytes) / n;
        let at = PROJECTED_ITEMS as f64;
        Projection {
            from: f,
            rss_per_item,
            disk_per_item,
            rss: f.rss_empty_bytes as f64 + rss_per_item * at,
            disk: f.disk_empty_bytes as f64 + disk_per_item * at,
        }
    }
}

/// The footprint of `server` at the largest size measured of each kind of
/// item, in the order of [`ITEM_KINDS`].
pub(crate) fn largest_footprints(results: &SuiteResults, server: ServerKind) -> Vec<&Footprint> {
    ITEM_KINDS
        .into_iter()
        .filter_map(|items| {
            results
                .footprint
                .iter()
                .filter(|f| f.server == server && f.items() == items && f.links > 0)
                .max_by_key(|f| f.links)
        })
        .collect()
}

/// "## Projection to 100M": each family's RSS and disk at 100M items on
/// each server, linear in the growth per item measured.
pub(super) fn projection(s: &mut String, results: &SuiteResults) {
    let mut rows: Vec<Projection> = ServerKind::ALL
        .into_iter()
        .flat_map(|k| largest_footprints(results, k))
        .map(Projection::of)
        .collect();
    if rows.is_empty() {
        return;
    }
    rows.sort_by_key(|p| item_rank(p.from.items()));
    let _ = writeln!(s, "## Projection to 100M\n");
    let _ = writeln!(
        s,
        "Each figure at 100M items is the empty server's plus 100M × the growth per item \
         between the empty server and the largest size measured (a straight line through two \
         points). For Redis the RSS is the RAM it would need to hold the data.{}\n",
        match results.scale_memory_mb {
            Some(mb) => format!(
                " Rush's caches, memtables and held writes are sized from its memory budget \
                 ({mb} MiB), not by the data, so its RSS stops at the budget plus what the \
                 budget does not size (the catalog's Bloom filters, allocator overhead); the \
                 linear figure beside it is where the growth measured would lead without that \
                 bound."
            ),
            None => String::new(),
        }
    );
    let _ = writeln!(
        s,
        "| Server | Data | per item (RSS growth, disk) | projected RSS at 100M | projected disk at 100M |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|");
    for p in rows {
        let f = p.from;
        let rss = match (f.server, results.scale_memory_mb) {
            (ServerKind::Rush, Some(mb)) => format!(
                "≤ budget ({mb} MiB) + what it does not size; linear {}",
                size(p.rss)
            ),
            _ => size(p.rss),
        };
        let _ = writeln!(
            s,
            "| {} | {} (from {}) | {:.0} B, {:.0} B | {rss} | {} |",
            f.server.label(),
            f.items(),
            ops(f.links as f64),
            p.rss_per_item,
            p.disk_per_item,
            size(p.disk)
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
