//! `REPORT.md` from a suite's results: the machine first, then the
//! durability of each server, a headline table, a table per workload (ops/s,
//! p50, p99, p99.9 per server, and the ratio Rush/Redis), latency against
//! offered load, errors; charts beside it; the pinned layout's headline and
//! CPU per operation when the suite ran it. Every number comes from one
//! `results.json`, written next to the report.

use crate::charts;
use crate::suite::{Layout, ServerKind, SuiteResults, SuiteRun};
use crate::workload::WORKLOADS;
use std::fmt::Write as _;
use std::path::Path;

/// Hand-written notes in the report directory, appended to the report.
pub const NOTES: &str = "NOTES.md";

/// Write `results.json`, `REPORT.md` and the charts into `out` (and append
/// `out/NOTES.md`, if there is one).
pub fn write(results: &SuiteResults, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(results)? + "\n",
    )?;
    let charts = charts::draw_all(results, out);
    let mut md = markdown(results, &charts);
    // Hand-written analysis (profiles, reasons, what would close a gap)
    // lives beside the report and is carried into it on every run.
    if let Ok(notes) = std::fs::read_to_string(out.join(NOTES)) {
        md.push_str("## Analysis (hand-written, from `");
        md.push_str(NOTES);
        md.push_str("`)\n\n");
        md.push_str(notes.trim());
        md.push('\n');
    }
    std::fs::write(out.join("REPORT.md"), md)?;
    eprintln!("wrote {}", out.join("REPORT.md").display());
    Ok(())
}

/// Workload names in report order: registered ones first, then any others
/// found in the results (from an older or newer build).
pub(crate) fn workload_order(results: &SuiteResults) -> Vec<String> {
    workload_order_of(results, SuiteRun::main_matrix)
}

/// [`workload_order`] of the runs `keep` selects.
fn workload_order_of(results: &SuiteResults, keep: impl Fn(&SuiteRun) -> bool) -> Vec<String> {
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

fn servers_in(results: &SuiteResults) -> Vec<ServerKind> {
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
    results.runs.iter().find(|r| {
        r.fraction.is_none()
            && r.main_matrix()
            && r.server == server
            && r.report.workload == workload
            && r.report.pipeline == pipeline
    })
}

/// The closed-loop run of `workload` on `server` at `pipeline` in the
/// pinned layout.
pub fn pinned_run<'a>(
    results: &'a SuiteResults,
    workload: &str,
    server: ServerKind,
    pipeline: usize,
) -> Option<&'a SuiteRun> {
    results.runs.iter().find(|r| {
        r.fraction.is_none()
            && r.layout == Layout::Pinned
            && r.server == server
            && r.report.workload == workload
            && r.report.pipeline == pipeline
    })
}

/// Closed-loop runs in the pinned layout.
fn pinned_runs(results: &SuiteResults) -> impl Iterator<Item = &SuiteRun> {
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

/// Milliseconds from microseconds, with sensible precision.
pub fn ms(us: f64) -> String {
    let ms = us / 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else if ms >= 1.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    }
}

pub(crate) fn ops(v: f64) -> String {
    crate::driver::group(v.round() as u64)
}

fn ratio(rush: f64, redis: f64) -> String {
    if redis > 0.0 {
        format!("{:.2}×", rush / redis)
    } else {
        "–".into()
    }
}

fn about(workload: &str) -> &'static str {
    WORKLOADS
        .iter()
        .find(|e| e.name == workload)
        .map_or("", |e| e.about)
}

/// The headline run of a workload on a server (shared or pinned layout).
type Lookup<'a> = &'a dyn Fn(&str, ServerKind) -> Option<&'a SuiteRun>;

/// Throughput of every workload on Rush and on each Redis, with the ratios.
fn throughput_table(s: &mut String, names: &[String], redis: &[ServerKind], run: Lookup) {
    let mut head = String::from("| Workload | Rush ops/s |");
    let mut rule = String::from("|---|---:|");
    for k in redis {
        let _ = write!(head, " {} ops/s | Rush/Redis |", k.label());
        rule.push_str("---:|---:|");
    }
    let _ = writeln!(s, "{head}\n{rule}");
    for w in names {
        let rush = run(w, ServerKind::Rush).map(|r| r.report.throughput);
        let mut row = format!("| {w} | {} |", rush.map_or("–".into(), ops));
        for k in redis {
            let other = run(w, *k).map(|r| r.report.throughput);
            let _ = write!(
                row,
                " {} | {} |",
                other.map_or("–".into(), ops),
                match (rush, other) {
                    (Some(a), Some(b)) => ratio(a, b),
                    _ => "–".into(),
                }
            );
        }
        let _ = writeln!(s, "{row}");
    }
    let _ = writeln!(s);
}

/// True when the headline runs on one of `servers` measured the server's
/// CPU time.
fn cpu_measured(names: &[String], servers: &[ServerKind], run: Lookup) -> bool {
    names.iter().any(|w| {
        servers
            .iter()
            .any(|k| run(w, *k).is_some_and(|r| r.report.server_cpu_secs.is_some()))
    })
}

/// Server and client CPU time per answered operation in the headline runs:
/// what each side costs, apart from how the two shared the cores.
fn cpu_section(
    s: &mut String,
    results: &SuiteResults,
    names: &[String],
    redis: &[ServerKind],
    top: usize,
) {
    let run = |w: &str, k| peak_run(results, w, k, top);
    if !cpu_measured(names, &[ServerKind::Rush], &run) {
        return;
    }
    let _ = writeln!(
        s,
        "### CPU per operation ({top} in flight per connection)
"
    );
    let _ = writeln!(
        s,
        "CPU time (user + system) of the server process, and of the bench client, over the \
         measured run, divided by the operations answered. On two shared cores a side that \
         needs more CPU per operation is slower no matter how the cores are shared; the \
         client column is the same harness driving each server.\n"
    );
    cpu_table(s, names, redis, &run);
}

/// Server and client µs per operation of every workload on each server.
fn cpu_table(s: &mut String, names: &[String], redis: &[ServerKind], run: Lookup) {
    let us = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.1}"));
    let mut head = String::from("| Workload | Rush server µs/op | client µs/op |");
    let mut rule = String::from("|---|---:|---:|");
    for k in redis {
        let _ = write!(head, " {} server µs/op | client µs/op |", k.label());
        rule.push_str("---:|---:|");
    }
    let _ = writeln!(s, "{head}\n{rule}");
    for w in names {
        let rush = run(w, ServerKind::Rush);
        let mut row = format!(
            "| {w} | {} | {} |",
            us(rush.and_then(|r| r.report.server_cpu_us_per_op())),
            us(rush.and_then(|r| r.report.client_cpu_us_per_op()))
        );
        for k in redis {
            let r = run(w, *k);
            let _ = write!(
                row,
                " {} | {} |",
                us(r.and_then(|r| r.report.server_cpu_us_per_op())),
                us(r.and_then(|r| r.report.client_cpu_us_per_op()))
            );
        }
        let _ = writeln!(s, "{row}");
    }
    let _ = writeln!(s);
}

/// The report text. `charts` lists the chart files drawn (or why none were).
pub fn markdown(results: &SuiteResults, charts: &charts::Drawn) -> String {
    let mut s = String::new();
    let m = &results.machine;
    let _ = writeln!(s, "# Rush vs Redis — benchmark report\n");
    let _ = writeln!(
        s,
        "Generated by `bench/compare.sh{}{}` on {} ({} mode). Every number below comes from this one run; \
         the raw figures are in `results.json`.\n",
        if results.mode == "quick" { " --quick" } else { "" },
        pin_flag(results),
        results.generated,
        results.mode
    );
    let _ = writeln!(s, "## Machine\n");
    let _ = writeln!(
        s,
        "- **CPU:** {}, **{} cores** — shared by the client and the server under test (one server runs at a time)",
        m.cpu, m.cores
    );
    if pinned_runs(results).next().is_some() {
        let _ = writeln!(
            s,
            "- **Pinned layout:** the headline runs again with {} — see \
             \"Pinned layout (server on one core, client on the other)\"",
            match &results.pinned {
                Some(p) => format!(
                    "the server on CPU {} and the client on CPU {}",
                    p.server_cpu, p.client_cpu
                ),
                None => "the server on one CPU and the client on another".into(),
            }
        );
    }
    let _ = writeln!(
        s,
        "- **Memory:** {:.1} GiB · **kernel** {} · **load average** (1 min) at start {}{} · **data directories** on {}",
        m.memory_gib,
        m.kernel,
        m.load_average,
        if results.load_average_end.is_empty() {
            String::new()
        } else {
            format!(", at the end {}", results.load_average_end)
        },
        m.data_fs
    );
    let loads: Vec<f64> = results.runs.iter().filter_map(|r| r.load_average).collect();
    if !loads.is_empty() {
        let lo = loads.iter().copied().fold(f64::MAX, f64::min);
        let hi = loads.iter().copied().fold(0.0, f64::max);
        let mean = loads.iter().sum::<f64>() / loads.len() as f64;
        let _ = writeln!(
            s,
            "- **Load during the runs** (1-minute average after each run): {lo:.2}–{hi:.2}, mean {mean:.2} on {} cores; \
             anything above the core count means client, server and other work queued for CPU{}",
            m.cores,
            if results.suite_secs > 0.0 {
                format!(" · the suite took {:.0} min", results.suite_secs / 60.0)
            } else {
                String::new()
            }
        );
    }
    let _ = writeln!(
        s,
        "- **rushd:** `{}` ({} build), shards: {}",
        results.rushd, results.rushd_profile, results.rush_shards
    );
    if results.rushd_profile != "release" {
        let _ = writeln!(
            s,
            "  - *Not a release build: Rush's figures here say the harness works, not how fast Rush is.*"
        );
    }
    if !results.redis_version.is_empty() {
        let _ = writeln!(
            s,
            "- **Redis:** {} with AOF on (`appendonly yes`), RDB snapshots off",
            results.redis_version
        );
    }
    let _ = writeln!(
        s,
        "- **Client:** rush-bench, the same for both sides: {} connections, each multiplexed \
         (P requests in flight), {} client threads; {} keys ({}), {}-byte values; \
         closed-loop runs of {:.0} s, open-loop steps of {:.1} s",
        results.connections,
        results.client_threads,
        crate::driver::group(results.keys),
        results.dist,
        results.value_size,
        results.duration_secs,
        results.sweep_secs
    );
    let _ = writeln!(s);

    let servers = servers_in(results);
    let _ = writeln!(s, "## What an acknowledged write means\n");
    let _ = writeln!(s, "| Server | Durability of an acknowledged write |");
    let _ = writeln!(s, "|---|---|");
    for k in &servers {
        let _ = writeln!(s, "| {} | {} |", k.label(), k.durability());
    }
    let _ = writeln!(s);

    let names = workload_order(results);
    let pipes = pipelines(results);
    let top = pipes.last().copied().unwrap_or(1);
    let redis: Vec<ServerKind> = servers
        .iter()
        .copied()
        .filter(|k| *k != ServerKind::Rush)
        .collect();

    // Headline: throughput at the deepest pipeline.
    let _ = writeln!(
        s,
        "## Headline (closed loop, {top} in flight per connection)\n"
    );
    throughput_table(&mut s, &names, &redis, &|w, k| peak_run(results, w, k, top));
    if let Some(f) = &charts.throughput {
        let _ = writeln!(s, "![Throughput per workload]({f})\n");
    }

    cpu_section(&mut s, results, &names, &redis, top);

    crate::goals::section(&mut s, results, top);

    if !results.calibration.is_empty() {
        let _ = writeln!(s, "### How much of Redis's speed does the client get?\n");
        let _ = writeln!(
            s,
            "The same Redis measured by redis-benchmark (Redis's C client: explicit pipelines, \
             one thread) with the same connections, pipeline, value size and key range. Where \
             rush-bench gets less, the client — which shares the cores with the server and is \
             the same for both sides — is part of the limit.\n"
        );
        let _ = writeln!(
            s,
            "| Server | Workload | redis-benchmark ops/s | p50 ms | p99 ms | rush-bench ops/s | rush-bench / redis-benchmark |"
        );
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|");
        for c in &results.calibration {
            let ours =
                peak_run(results, &c.workload, c.server, c.pipeline).map(|r| r.report.throughput);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.3} | {:.3} | {} | {} |",
                c.server.label(),
                c.workload,
                ops(c.throughput),
                c.p50_ms,
                c.p99_ms,
                ours.map_or("–".into(), ops),
                ours.map_or("–".into(), |o| format!(
                    "{:.0}%",
                    o / c.throughput * 100.0
                ))
            );
        }
        let _ = writeln!(s);
    }

    pinned_section(&mut s, results);

    for w in &names {
        let _ = writeln!(s, "## {w}\n");
        let a = about(w);
        if !a.is_empty() {
            let _ = writeln!(s, "{a}.\n");
        }
        let _ = writeln!(
            s,
            "| Server | Durability | In flight/conn | ops/s | p50 ms | p99 ms | p99.9 ms | max ms | errors | answers | Rush/Redis |"
        );
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
        for &p in &pipes {
            let rush = peak_run(results, w, ServerKind::Rush, p).map(|r| r.report.throughput);
            for k in &servers {
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
        let any_sweep = servers
            .iter()
            .any(|k| !sweep_runs(results, w, *k).is_empty());
        if any_sweep {
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
            for k in &servers {
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
            if let Some(f) = charts.latency.iter().find(|(n, _)| n == w).map(|(_, f)| f) {
                let _ = writeln!(s, "![Latency against offered load: {w}]({f})\n");
            }
        }
        storage_reads_section(&mut s, results, w);
    }

    scaling_section(&mut s, results);
    footprint_section(&mut s, results);
    one_shard_section(&mut s, results, top);

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
    let _ = writeln!(s, "## Reproduce\n");
    let _ = writeln!(
        s,
        "```sh\nbench/compare.sh{}{}{}    # builds rushd and rush-bench, installs redis-server if missing\n```",
        if results.mode == "quick" { " --quick" } else { "" },
        if results.rushd_profile == "debug" { " --debug" } else { "" },
        pin_flag(results)
    );
    s
}

/// " --pin" when the results hold pinned runs.
fn pin_flag(results: &SuiteResults) -> &'static str {
    if results.pinned.is_some() || pinned_runs(results).next().is_some() {
        " --pin"
    } else {
        ""
    }
}

/// The headline again in the pinned layout: throughput with the ratios, and
/// CPU per operation, at the deepest pipeline the pinned runs used.
fn pinned_section(s: &mut String, results: &SuiteResults) {
    let Some(top) = pinned_runs(results).map(|r| r.report.pipeline).max() else {
        return;
    };
    let names = workload_order_of(results, |r| {
        r.layout == Layout::Pinned && r.fraction.is_none()
    });
    let redis: Vec<ServerKind> = ServerKind::ALL
        .into_iter()
        .filter(|k| *k != ServerKind::Rush && pinned_runs(results).any(|r| r.server == *k))
        .collect();
    let run = |w: &str, k| pinned_run(results, w, k, top);
    let _ = writeln!(
        s,
        "## Pinned layout (server on one core, client on the other)\n"
    );
    let (cpus, client, shards) = match &results.pinned {
        Some(p) => (
            format!(
                "on CPU {} (started under `taskset -c {}`",
                p.server_cpu, p.server_cpu
            ),
            format!(
                "on CPU {} ({} runtime thread{})",
                p.client_cpu,
                p.client_threads,
                if p.client_threads == 1 { "" } else { "s" }
            ),
            p.rush_shards.to_string(),
        ),
        None => (
            "on one CPU (started under `taskset -c`".into(),
            "on another".into(),
            "1".into(),
        ),
    };
    let _ = writeln!(
        s,
        "The headline's closed-loop runs made again on fresh servers, {top} in flight on each of \
         {} connections: each server alone {cpus}, so its background threads — RocksDB's, \
         Redis's — are there too; rushd with `--shards {shards}`), the bench client {client}. \
         Neither side can take the other's core: each server's figure is what it does with \
         one core, against a client with one core of its own.\n",
        results.connections
    );
    let _ = writeln!(
        s,
        "### Throughput, pinned ({top} in flight per connection)\n"
    );
    throughput_table(s, &names, &redis, &run);
    if cpu_measured(&names, &ServerKind::ALL, &run) {
        let _ = writeln!(
            s,
            "### CPU per operation, pinned ({top} in flight per connection)\n"
        );
        let _ = writeln!(
            s,
            "CPU time (user + system) of the server process, and of the bench client, over the \
             measured run, divided by the operations answered, as in \"CPU per operation\" \
             above but with each side on its own core.\n"
        );
        cpu_table(s, &names, &redis, &run);
    }
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

/// Catalog answers of one path (`bloom_negative`, …) to queries in a run.
fn query_path(r: &crate::stats::RunReport, path: &str) -> f64 {
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

/// What rushd did for one lookups run: storage reads per query and the
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

pub fn reads_per_query(r: &crate::stats::RunReport) -> Option<ReadsPerQuery> {
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

/// The issue's goal for lookups: at most 0.6 + the false-positive rate.
pub fn reads_goal(q: &ReadsPerQuery) -> f64 {
    0.6 + q.fp_rate
}

fn storage_reads_section(s: &mut String, results: &SuiteResults, workload: &str) {
    if !workload.starts_with("lookups") {
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

pub(crate) fn variant_runs<'a>(results: &'a SuiteResults, variant: &str) -> Vec<&'a SuiteRun> {
    results
        .runs
        .iter()
        .filter(|r| r.variant.as_deref() == Some(variant))
        .collect()
}

fn scaling_section(s: &mut String, results: &SuiteResults) {
    let runs = variant_runs(results, crate::suite::VARIANT_SCALING);
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

fn mib(b: f64) -> String {
    format!("{:.0} MiB", b / 1048576.0)
}

fn footprint_section(s: &mut String, results: &SuiteResults) {
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

fn one_shard_section(s: &mut String, results: &SuiteResults, top: usize) {
    let runs = variant_runs(results, crate::suite::VARIANT_ONE_SHARD);
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

/// Now, as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (date, h, m, _) = rush_client::calendar::utc_parts(secs);
    format!("{date} {h:02}:{m:02} UTC")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_milliseconds() {
        assert_eq!(ms(123.0), "0.123");
        assert_eq!(ms(2500.0), "2.50");
        assert_eq!(ms(12_340.0), "12.3");
        assert_eq!(ms(250_000.0), "250");
    }

    use serde_json::{json, Value};

    /// One run as results.json holds it; `layout` and `variant` are left
    /// out when `None` (as in results written before layouts existed).
    fn run_json(
        server: &str,
        workload: &str,
        throughput: f64,
        layout: Option<&str>,
        variant: Option<&str>,
    ) -> Value {
        let mut run = json!({
            "server": server,
            "fraction": null,
            "report": {
                "workload": workload, "side": "rush", "target": "rush://127.0.0.1:1",
                "label": null, "durability": null, "mode": "closed",
                "connections": 50, "pipeline": 16, "rate": null, "keys": 1000,
                "dist": "uniform", "value_size": 100, "preloaded": 0, "preload_secs": 0.0,
                "ok": throughput as u64 * 3, "misses": 0, "errors": 0, "error_types": {},
                "elapsed_secs": 3.0, "throughput": throughput,
                "latency": {"min_us": 10.0, "mean_us": 100.0, "p50_us": 90.0, "p90_us": 200.0,
                            "p99_us": 400.0, "p999_us": 800.0, "max_us": 1000.0},
                "server_cpu_secs": 1.5, "client_cpu_secs": 2.0
            },
            "load_average": 1.0
        });
        if let Some(l) = layout {
            run["layout"] = json!(l);
        }
        if let Some(v) = variant {
            run["variant"] = json!(v);
        }
        run
    }

    fn results_json(runs: Vec<Value>, pinned: Option<Value>) -> Value {
        let mut r = json!({
            "mode": "full", "generated": "2026-12-01 10:00 UTC",
            "machine": {"cpu": "Test CPU", "cores": 2, "memory_gib": 8.0, "kernel": "6.1",
                        "load_average": "0.5", "data_fs": "ext4"},
            "rushd": "target/release/rushd", "rushd_profile": "release",
            "rush_shards": "2 (one per core)", "redis_version": "7.0.15",
            "connections": 50, "client_threads": 2, "duration_secs": 3.0, "sweep_secs": 1.0,
            "keys": 1000, "dist": "uniform", "value_size": 100,
            "runs": runs, "failures": []
        });
        if let Some(p) = pinned {
            r["pinned"] = p;
        }
        r
    }

    fn shared_runs(layout: Option<&str>) -> Vec<Value> {
        vec![
            run_json("rush", "kv-set", 100_000.0, layout, None),
            run_json("redis-everysec", "kv-set", 50_000.0, layout, None),
            run_json("redis-always", "kv-set", 25_000.0, layout, None),
        ]
    }

    fn render(json: &Value) -> (SuiteResults, String) {
        let text = serde_json::to_string_pretty(json).unwrap();
        let results: SuiteResults = serde_json::from_str(&text).expect("results.json loads");
        let md = markdown(&results, &charts::Drawn::default());
        (results, md)
    }

    #[test]
    fn results_without_layouts_load_as_shared() {
        let (results, md) = render(&results_json(shared_runs(None), None));
        assert!(results.pinned.is_none());
        assert!(results.runs.iter().all(|r| r.layout == Layout::Shared));
        assert!(
            md.contains("| kv-set | 100,000 | 50,000 | 2.00× | 25,000 | 4.00× |"),
            "{md}"
        );
        assert!(!md.contains("Pinned layout"), "{md}");
        assert!(!md.contains("--pin"), "{md}");
        // Written again, every run says which layout it used.
        let again = serde_json::to_value(&results).unwrap();
        assert!(again["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["layout"] == "shared"));
    }

    #[test]
    fn the_checked_in_results_load() {
        let text = include_str!("../results/results.json");
        let results: SuiteResults = serde_json::from_str(text).expect("results.json loads");
        if !text.contains("\"layout\"") {
            assert!(results.runs.iter().all(|r| r.layout == Layout::Shared));
        }
        let md = markdown(&results, &charts::Drawn::default());
        assert!(md.contains("## Headline"));
    }

    #[test]
    fn pinned_runs_have_their_own_section() {
        let mut runs = shared_runs(Some("shared"));
        for (server, t) in [
            ("rush", 90_000.0),
            ("redis-everysec", 60_000.0),
            ("redis-always", 30_000.0),
        ] {
            runs.push(run_json(
                server,
                "kv-set",
                t,
                Some("pinned"),
                Some("pinned"),
            ));
        }
        let pinned =
            json!({"server_cpu": 2, "client_cpu": 5, "client_threads": 1, "rush_shards": 1});
        let (results, md) = render(&results_json(runs, Some(pinned)));
        assert_eq!(results.pinned.as_ref().map(|p| p.server_cpu), Some(2));
        assert_eq!(
            results
                .runs
                .iter()
                .filter(|r| r.layout == Layout::Pinned)
                .count(),
            3
        );

        // Today's sections keep the shared figures only.
        let headline = md.find("## Headline").unwrap();
        let section = md
            .find("## Pinned layout (server on one core, client on the other)")
            .expect("pinned section");
        assert!(headline < section);
        let before = &md[..section];
        assert!(before.contains("| kv-set | 100,000 | 50,000 | 2.00× | 25,000 | 4.00× |"));
        assert!(before.contains("| kv-set | 5.0 | 6.7 | 10.0 | 13.3 | 20.0 | 26.7 |"));
        assert!(!before.contains("90,000"), "{md}");
        let per_workload = md.find("## kv-set").unwrap();
        assert!(section < per_workload);
        assert!(!md[per_workload..].contains("| 90,000 |"), "{md}");

        // The pinned section: throughput with ratios, then CPU per operation.
        let pinned = &md[section..per_workload];
        assert!(
            pinned.contains("CPU 2 (started under `taskset -c 2`"),
            "{pinned}"
        );
        assert!(pinned.contains("the bench client on CPU 5 (1 runtime thread)"));
        assert!(pinned.contains("`--shards 1`"));
        assert!(
            pinned.contains("| kv-set | 90,000 | 60,000 | 1.50× | 30,000 | 3.00× |"),
            "{pinned}"
        );
        let cpu = pinned
            .find("### CPU per operation, pinned (16 in flight per connection)")
            .expect("pinned CPU table");
        // 1.5 s server and 2 s client CPU over 3 s at each throughput.
        assert!(
            pinned[cpu..].contains("| kv-set | 5.6 | 7.4 | 8.3 | 11.1 | 16.7 | 22.2 |"),
            "{pinned}"
        );
        assert!(pinned[cpu..].contains("| Workload | Rush server µs/op | client µs/op |"));

        // The machine and the command line say the run was pinned.
        assert!(md.contains("- **Pinned layout:** the headline runs again with the server on CPU 2 and the client on CPU 5"));
        assert!(md.contains("`bench/compare.sh --pin`"), "{md}");
        assert!(md.contains("bench/compare.sh --pin    #"), "{md}");
    }

    #[test]
    fn utc_date_looks_right() {
        let d = utc_now();
        assert_eq!(d.len(), "2026-11-30 03:10 UTC".len(), "{d}");
        assert!(d.starts_with("20"), "{d}");
    }
}
