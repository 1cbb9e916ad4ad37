//! `REPORT.md` from a suite's results: the machine first, then the
//! durability of each server, a headline table, a table per workload (ops/s,
//! p50, p99, p99.9 per server, and the ratio Rush/Redis), latency against
//! offered load, errors; charts beside it; the pinned layout's headline and
//! CPU per operation when the suite ran it. Every number comes from one
//! `results.json`, written next to the report.
//!
//! [`markdown`] lists the sections in order; each is a function of its own:
//! - `setup`: the title, the machine, what an acknowledged write means, and
//!   the command that reproduces the run;
//! - `headline`: throughput and CPU per operation at the deepest pipeline,
//!   and the redis-benchmark calibration (the tables the pinned section
//!   uses too);
//! - [`crate::goals`]: the issues' targets, as measured;
//! - `redis_benchmark`: redis-benchmark (an independent client) against
//!   Rush and each Redis, with the server CPU per request;
//! - `pinned`: the headline again in the pinned layout;
//! - `workloads`: a section per workload, with `catalog`'s storage reads;
//! - `phases`: scaling with data size, footprint per link, one shard;
//! - `stalls`: Rush runs whose shards stopped for a while, and where;
//! - `errors`: failed requests and runs.
//!
//! `select` holds the queries they make of the results, `format` how they
//! write numbers.

mod catalog;
mod errors;
mod format;
mod headline;
mod phases;
mod pinned;
mod redis_benchmark;
mod select;
mod setup;
mod stalls;
mod workloads;

pub use catalog::{reads_goal, reads_per_query, ReadsPerQuery};
pub(crate) use format::ops;
pub use format::{ms, utc_now};
pub use select::{peak_run, pinned_run, sweep_runs};
pub(crate) use select::{pipelines, run_name, servers_in, variant_runs, workload_order};

use crate::charts;
use crate::suite::{ServerKind, SuiteResults};
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

/// The main matrix as the sections see it: which servers, workloads and
/// pipelines it has.
struct Matrix<'a> {
    results: &'a SuiteResults,
    charts: &'a charts::Drawn,
    /// Servers with runs, Rush first.
    servers: Vec<ServerKind>,
    /// The Redis servers among them.
    redis: Vec<ServerKind>,
    /// Workloads in report order.
    names: Vec<String>,
    /// Closed-loop pipelines, ascending.
    pipes: Vec<usize>,
    /// The deepest pipeline: the headline's.
    top: usize,
}

impl<'a> Matrix<'a> {
    fn of(results: &'a SuiteResults, charts: &'a charts::Drawn) -> Matrix<'a> {
        let servers = servers_in(results);
        let redis = servers
            .iter()
            .copied()
            .filter(|k| *k != ServerKind::Rush)
            .collect();
        let pipes = pipelines(results);
        Matrix {
            results,
            charts,
            servers,
            redis,
            names: workload_order(results),
            top: pipes.last().copied().unwrap_or(1),
            pipes,
        }
    }
}

/// The report text. `charts` lists the chart files drawn (or why none were).
pub fn markdown(results: &SuiteResults, charts: &charts::Drawn) -> String {
    let m = Matrix::of(results, charts);
    let mut s = String::new();
    setup::title(&mut s, results);
    setup::machine(&mut s, results);
    setup::durability(&mut s, &m.servers);
    headline::section(&mut s, &m);
    headline::cpu_section(&mut s, &m);
    crate::goals::section(&mut s, results, m.top);
    headline::calibration_section(&mut s, results);
    redis_benchmark::section(&mut s, results);
    pinned::section(&mut s, results);
    for w in &m.names {
        workloads::section(&mut s, &m, w);
    }
    phases::scaling(&mut s, results);
    phases::footprint(&mut s, results);
    phases::one_shard(&mut s, results, m.top);
    stalls::section(&mut s, results);
    errors::section(&mut s, results, charts);
    setup::reproduce(&mut s, results);
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::suite::Layout;
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

    /// A results.json of these runs (the report's tests and its sections').
    pub(crate) fn results_json(runs: Vec<Value>, pinned: Option<Value>) -> Value {
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

    /// A run's histograms say how many passes, commits and write-back
    /// waits were over 250 ms; a run with none is left out, and results
    /// without the series say so.
    #[test]
    fn stalls_name_the_runs_with_slow_passes_and_where_the_time_went() {
        let (_, md) = render(&results_json(shared_runs(None), None));
        assert!(
            md.contains("## Stalls\n\nThese runs carry no pass timings"),
            "{md}"
        );

        let hist = |name: &str, count: f64, under_quarter: f64, under_second: f64| {
            json!({
                format!("{name}_count"): count,
                format!("{name}_bucket{{le=\"0.25\"}}"): under_quarter,
                format!("{name}_bucket{{le=\"1\"}}"): under_second,
            })
        };
        let mut runs = shared_runs(None);
        let mut metrics = hist("rush_shard_pass_seconds", 1000.0, 996.0, 998.0);
        for (k, v) in hist("rush_storage_commit_seconds", 900.0, 899.0, 900.0)
            .as_object()
            .unwrap()
            .iter()
            .chain(
                hist("rush_storage_write_back_wait_seconds", 3.0, 0.0, 1.0)
                    .as_object()
                    .unwrap(),
            )
        {
            metrics[k] = v.clone();
        }
        metrics["rush_storage_write_back_wait_seconds_sum"] = json!(4.5);
        runs[0]["report"]["server_metrics"] = metrics;
        let mut quiet = run_json("rush", "kv-get", 100_000.0, None, None);
        quiet["report"]["server_metrics"] = hist("rush_shard_pass_seconds", 1000.0, 1000.0, 1000.0);
        runs.push(quiet);
        let (_, md) = render(&results_json(runs, None));
        assert!(
            md.contains("| kv-set | main | 50 × 16 | 4 | 2 | 1 | 3 | 4.5 |"),
            "{md}"
        );
        assert!(!md.contains("| kv-get | main |"), "{md}");

        let mut runs = shared_runs(None);
        runs[0]["report"]["server_metrics"] = hist("rush_shard_pass_seconds", 10.0, 10.0, 10.0);
        let (_, md) = render(&results_json(runs, None));
        assert!(
            md.contains("None: no pass of the 1 timed Rush runs took over 250 ms."),
            "{md}"
        );
    }

    #[test]
    fn results_with_the_old_workload_names_read_as_catalog() {
        let runs = vec![
            run_json("rush", "lookups", 90_000.0, None, None),
            run_json("redis-everysec", "lookups", 45_000.0, None, None),
            run_json("rush", "lookups-zipf", 120_000.0, None, None),
        ];
        let (results, md) = render(&results_json(runs, None));
        let names: Vec<&str> = results
            .runs
            .iter()
            .map(|r| r.report.workload.as_str())
            .collect();
        assert_eq!(names, ["catalog", "catalog", "catalog-zipf"]);
        assert!(md.contains("| catalog | 90,000 | 45,000 | 2.00× |"), "{md}");
        assert!(md.contains("## catalog\n"), "{md}");
        assert!(md.contains("## catalog-zipf\n"), "{md}");
        assert!(!md.contains("lookups"), "{md}");
        // Written again, the file says catalog.
        let again = serde_json::to_string(&results).unwrap();
        assert!(!again.contains("lookups"), "{again}");
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
        // They use the workloads' current names.
        assert!(!text.contains("lookups"), "results.json names lookups");
        assert!(md.contains("## catalog\n"));
        // Written before the redis-benchmark phase: no such section.
        if results.redis_benchmark.is_empty() && results.redis_benchmark_skipped.is_none() {
            assert!(!md.contains(redis_benchmark::TITLE), "{md}");
        }
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
}
