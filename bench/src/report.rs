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
//! - `phases`: scaling with data size, footprint per stored item (links
//!   and owners), its projection to 100M items, one shard;
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
pub(crate) use phases::largest_footprints;
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
    phases::projection(&mut s, results);
    phases::one_shard(&mut s, results, m.top);
    stalls::section(&mut s, results);
    errors::section(&mut s, results, charts);
    setup::reproduce(&mut s, results);
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::suite::{Layout, VARIANT_SCALING};
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

    /// Runs that measured background work get a column for it, under the
    /// server's time; results without it keep the two columns.
    #[test]
    fn the_cpu_table_shows_background_work_when_it_was_measured() {
        let (_, md) = render(&results_json(shared_runs(None), None));
        assert!(
            md.contains("| Workload | Rush server µs/op | client µs/op |"),
            "{md}"
        );
        assert!(!md.contains("of it background"), "{md}");

        let mut runs = shared_runs(None);
        runs[0]["report"]["server_background_secs"] = json!(0.6);
        runs[1]["report"]["server_background_secs"] = json!(0.0);
        let (_, md) = render(&results_json(runs, None));
        assert!(
            md.contains(
                "| Workload | Rush server µs/op | of it background | client µs/op | \
                 Redis (AOF everysec) server µs/op | of it background | client µs/op |"
            ),
            "{md}"
        );
        // 1.5 s of server CPU, 0.6 s of it background, 2 s of client CPU,
        // over 300,000 requests (Rush) and 150,000 (Redis everysec).
        assert!(
            md.contains("| kv-set | 5.0 | 2.0 | 6.7 | 10.0 | 0.0 | 13.3 | 20.0 | – | 26.7 |"),
            "{md}"
        );
        assert!(md.contains("*Of it background*: the server's time"), "{md}");
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

    /// A scaling run of `workload` on `server` at `keys` items.
    fn scaling_json(server: &str, workload: &str, keys: u64, throughput: f64) -> Value {
        let mut run = run_json(server, workload, throughput, None, Some(VARIANT_SCALING));
        run["report"]["keys"] = json!(keys);
        run
    }

    /// A footprint at `items` items: RSS and disk grown by `rss` and `disk`
    /// bytes per item (and Redis's used_memory by `used`) since the empty
    /// server; `workload: None` leaves the field out, as older files do.
    fn footprint_json(
        server: &str,
        workload: Option<&str>,
        items: u64,
        (rss, disk, used): (u64, u64, Option<u64>),
    ) -> Value {
        let rss_empty: u64 = if server == "rush" { 100 << 20 } else { 8 << 20 };
        let disk_empty: u64 = if server == "rush" { 1_000_000 } else { 0 };
        let mut f = json!({
            "server": server, "links": items,
            "keys": used.map(|_| items + 1),
            "rss_bytes": rss_empty + rss * items, "rss_empty_bytes": rss_empty,
            "disk_bytes": disk_empty + disk * items, "disk_empty_bytes": disk_empty,
            "used_memory": used.map(|u| 1_000_000 + u * items),
            "used_memory_empty": used.map(|_| 1_000_000),
        });
        if let Some(w) = workload {
            f["workload"] = json!(w);
        }
        f
    }

    /// Results of a scaling phase: links and owners at 1M and 10M on Rush
    /// (on a 1024 MiB budget) and Redis everysec, with their footprints —
    /// Rush's links ones written before footprints named their workload.
    /// Redis's links footprint at the largest size counts more links than
    /// Rush's: its links-shorten stored more at the size before.
    fn scaling_results() -> Value {
        let m = 1_000_000;
        let mut runs = shared_runs(None);
        for (server, w, small, big) in [
            ("rush", "links-resolve", 100_000.0, 85_000.0),
            ("rush", "links-shorten", 50_000.0, 35_000.0),
            ("rush", "catalog", 80_000.0, 60_000.0),
            ("rush", "catalog-zipf", 90_000.0, 90_000.0),
            ("redis-everysec", "links-resolve", 60_000.0, 50_000.0),
            ("redis-everysec", "links-shorten", 40_000.0, 40_000.0),
        ] {
            runs.push(scaling_json(server, w, m, small));
            runs.push(scaling_json(server, w, 10 * m, big));
        }
        let mut r = results_json(runs, None);
        r["scale_memory_mb"] = json!(1024);
        r["footprint"] = json!([
            footprint_json("rush", None, m, (200, 60, None)),
            footprint_json("rush", None, 10 * m, (80, 50, None)),
            footprint_json("rush", Some("catalog"), 10 * m, (100, 120, None)),
            footprint_json("rush", Some("limits-held"), 10 * m, (90, 70, None)),
            // It holds the links links-shorten stored at 1M too.
            footprint_json(
                "redis-everysec",
                Some("links-resolve"),
                10_400_000,
                (300, 150, Some(241))
            ),
            footprint_json(
                "redis-everysec",
                Some("catalog"),
                10 * m,
                (450, 200, Some(400))
            ),
        ]);
        r
    }

    /// The text of section `title` (up to the next section).
    fn section_of<'a>(md: &'a str, title: &str) -> &'a str {
        let at = md
            .find(title)
            .unwrap_or_else(|| panic!("no {title} in:\n{md}"));
        let rest = &md[at + title.len()..];
        &md[at..at + title.len() + rest.find("\n## ").unwrap_or(rest.len())]
    }

    #[test]
    fn scaling_lists_every_family_with_its_ratio_and_cpu() {
        let (_, md) = render(&scaling_results());
        let scaling = section_of(&md, "## Scaling with data size\n");
        assert!(scaling.contains("memory budget of 1024 MiB (`--memory-mb 1024`)"));
        assert!(
            scaling.contains("| errors | server µs/op | vs smallest |"),
            "{scaling}"
        );
        // 1.5 s of server CPU over 3 s at 35,000 ops/s: 14.3 µs/op.
        for row in [
            "| links-resolve | Rush | 10,000,000 | 85,000 | 0.090 | 0.400 | 0.800 | 0 | 5.9 | 0.85× |",
            "| links-shorten | Rush | 1,000,000 | 50,000 | 0.090 | 0.400 | 0.800 | 0 | 10.0 | 1.00× |",
            "| links-shorten | Rush | 10,000,000 | 35,000 | 0.090 | 0.400 | 0.800 | 0 | 14.3 | 0.70× |",
            "| catalog-zipf | Rush | 10,000,000 | 90,000 | 0.090 | 0.400 | 0.800 | 0 | 5.6 | 1.00× |",
            "| links-shorten | Redis (AOF everysec) | 10,000,000 | 40,000 |",
        ] {
            assert!(scaling.contains(row), "{row} not in:\n{scaling}");
        }
        // By workload, then server, then size.
        let at = |row: &str| scaling.find(row).expect(row);
        assert!(at("| links-resolve | Rush | 10,000,000") < at("| links-resolve | Redis"));
        assert!(
            at("| links-resolve | Redis (AOF everysec) | 10,000,000")
                < at("| links-shorten | Rush | 1,000,000")
        );
    }

    #[test]
    fn footprint_covers_links_owners_and_users_and_projects_to_100m() {
        let (results, md) = render(&scaling_results());
        // A footprint without a workload is an older file's: links.
        assert_eq!(results.footprint[0].workload, "links-resolve");
        assert_eq!(results.footprint[2].items(), "owners");
        assert_eq!(results.scale_memory_mb, Some(1024));

        let fp = section_of(&md, "## Footprint per stored item\n");
        assert!(fp.contains("`--memory-mb 1024` (1024 MiB)"), "{fp}");
        assert!(fp.contains("| Server | Workload | Items | RSS |"), "{fp}");
        for row in [
            "| Rush | links | 1,000,000 | 291 MiB | 200 B / 305 B | – | 58 MiB | 60 B |",
            "| Rush | links | 10,000,000 | 863 MiB | 80 B / 90 B | – | 478 MiB | 50 B |",
            "| Redis (AOF everysec) | links | 10,400,000 | 2983 MiB | 300 B / 301 B | 241 B | 1488 MiB | 150 B |",
            "| Rush | owners | 10,000,000 | 1054 MiB | 100 B / 110 B | – | 1145 MiB | 120 B |",
            "| Redis (AOF everysec) | owners | 10,000,000 | 4300 MiB | 450 B / 451 B | 400 B | 1907 MiB | 200 B |",
        ] {
            assert!(fp.contains(row), "{row} not in:\n{fp}");
        }
        // Links first, then owners, then users (limits-held's books).
        assert_eq!(results.footprint[3].items(), "users");
        let users = "| Rush | users | 10,000,000 | 958 MiB | 90 B / 100 B | – |";
        assert!(fp.contains(users), "{users} not in:\n{fp}");
        assert!(
            fp.find("| Redis (AOF everysec) | links").unwrap()
                < fp.find("| Rush | owners").unwrap()
        );
        assert!(fp.find("| Redis (AOF everysec) | owners").unwrap() < fp.find(users).unwrap());

        // The projection starts from the largest size (80 B per link at
        // 10M, not the 200 B at 1M) and says the budget bounds Rush.
        let p = section_of(&md, "## Projection to 100M\n");
        assert!(p.contains("growth per item"), "{p}");
        for row in [
            "| Rush | links (from 10,000,000) | 80 B, 50 B | ≤ budget (1024 MiB) + what it does not size; linear 7.5 GiB | 4.7 GiB |",
            "| Redis (AOF everysec) | links (from 10,400,000) | 300 B, 150 B | 27.9 GiB | 14.0 GiB |",
            "| Rush | owners (from 10,000,000) | 100 B, 120 B | ≤ budget (1024 MiB) + what it does not size; linear 9.4 GiB | 11.2 GiB |",
            "| Redis (AOF everysec) | owners (from 10,000,000) | 450 B, 200 B | 41.9 GiB | 18.6 GiB |",
            "| Rush | users (from 10,000,000) | 90 B, 70 B |",
        ] {
            assert!(p.contains(row), "{row} not in:\n{p}");
        }
        assert!(
            md.find("## Footprint per stored item").unwrap()
                < md.find("## Projection to 100M").unwrap()
        );

        // Without a budget (an older file): no bound stated, the linear figure alone.
        let mut old = scaling_results();
        old.as_object_mut().unwrap().remove("scale_memory_mb");
        let (results, md) = render(&old);
        assert_eq!(results.scale_memory_mb, None);
        let p = section_of(&md, "## Projection to 100M\n");
        assert!(
            p.contains("| Rush | links (from 10,000,000) | 80 B, 50 B | 7.5 GiB | 4.7 GiB |"),
            "{p}"
        );
        assert!(!p.contains("budget"), "{p}");
        assert!(section_of(&md, "## Footprint per stored item\n").contains("bounded by config"));
    }

    #[test]
    fn issue_17_targets_are_checked() {
        let json = scaling_results();
        let results: SuiteResults = serde_json::from_value(json).unwrap();
        let checks = crate::goals::targets(&results, 16);
        let find = |t: &str| {
            checks
                .iter()
                .find(|c| c.target.starts_with(t))
                .unwrap_or_else(|| panic!("no target {t}"))
        };
        let c = find("(issue 17) catalog at the largest size ≥ 0.7×");
        assert_eq!(c.met, Some(true));
        assert!(c.measured.contains("(0.75×)"), "{}", c.measured);
        let c = find("(issue 17) links-resolve at the largest size ≥ 0.8×");
        assert_eq!(c.met, Some(true));
        assert!(c.measured.contains("(0.85×)"), "{}", c.measured);
        let c = find("(issue 17) links-shorten at the largest size ≥ 0.8×");
        assert_eq!(c.met, Some(false));
        assert!(c.measured.contains("(0.70×)"), "{}", c.measured);
        // Owners at 10M take 1054 MiB: over the 1024 MiB budget.
        let c = find("(issue 17) Rush RSS at the largest size within its memory budget");
        assert_eq!(c.met, Some(false));
        assert_eq!(
            c.measured,
            "budget 1024 MiB; links at 10,000,000: 863 MiB; owners at 10,000,000: 1054 MiB; \
             users at 10,000,000: 958 MiB"
        );
        // Links: 90 B against Redis's 241 B (0.38×, missed); owners: 110 B
        // against 400 B (0.28×, met).
        let c = find("(issue 17) Rush RSS per item ≤ 0.3× Redis's");
        assert_eq!(c.met, Some(false));
        assert!(c.measured.contains("links at 10,000,000 (Redis 10,400,000): Rush 90 B (whole RSS), Redis 241 B (used_memory growth; RSS 301 B): 0.38×"), "{}", c.measured);
        assert!(
            c.measured.contains("owners at 10,000,000: Rush 110 B"),
            "{}",
            c.measured
        );
        assert!(c.measured.contains("0.28×"), "{}", c.measured);
        // Issue 7's footprint target still measures links only.
        let c = find("(issue 7) footprint");
        assert!(
            c.measured
                .starts_with("at 10,000,000 (Redis 10,400,000) links: Rush 90 B/link (whole RSS), Redis 241 B/link"),
            "{}",
            c.measured
        );
        // Issue 7's scaling target reads the same runs as before.
        assert_eq!(
            find("(issue 7) links-resolve at the largest size").met,
            Some(true)
        );
        // The report lists them.
        let md = markdown(&results, &charts::Drawn::default());
        assert!(
            md.contains(
                "| (issue 17) links-shorten at the largest size ≥ 0.8× its smallest (Rush) |"
            ),
            "{md}"
        );

        // Without a budget, or without owners: said so.
        let mut json = scaling_results();
        json.as_object_mut().unwrap().remove("scale_memory_mb");
        json["footprint"]
            .as_array_mut()
            .unwrap()
            .retain(|f| f.get("workload") != Some(&json!("catalog")));
        let results: SuiteResults = serde_json::from_value(json).unwrap();
        let checks = crate::goals::targets(&results, 16);
        let find = |t: &str| checks.iter().find(|c| c.target.starts_with(t)).unwrap();
        let c = find("(issue 17) Rush RSS at the largest size within its memory budget");
        assert_eq!(
            (c.met, c.measured.as_str()),
            (None, "not measured (no memory budget)")
        );
        let c = find("(issue 17) Rush RSS per item ≤ 0.3× Redis's");
        assert_eq!(c.met, Some(false));
        assert!(
            c.measured.ends_with("owners: not measured"),
            "{}",
            c.measured
        );
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
