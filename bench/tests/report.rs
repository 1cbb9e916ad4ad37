//! REPORT.md and the charts from a suite's results (made up here, so the
//! figures and ratios are known).

mod common;

use common::prerequisite_missing;
use rush_bench::stats::Latency;
use rush_bench::suite::{Layout, Machine, ServerKind, SuiteResults, SuiteRun};
use rush_bench::RunReport;
use std::collections::BTreeMap;

fn run(server: ServerKind, workload: &str, throughput: f64, rate: Option<f64>) -> SuiteRun {
    let p99 = 1_000_000.0 / throughput * 50.0;
    SuiteRun {
        server,
        fraction: rate.map(|r| r / throughput),
        report: RunReport {
            workload: workload.into(),
            side: server.side().name().into(),
            target: "rush://127.0.0.1:1".into(),
            label: Some(server.label().into()),
            durability: Some(server.durability().into()),
            mode: if rate.is_some() { "open" } else { "closed" }.into(),
            connections: 50,
            pipeline: 16,
            rate,
            keys: 1000,
            dist: "uniform".into(),
            value_size: 100,
            preloaded: 0,
            preload_secs: 0.0,
            settle_secs: 0.0,
            ok: throughput as u64 * 3,
            misses: 0,
            denied: 0,
            errors: 0,
            error_types: BTreeMap::new(),
            elapsed_secs: 3.0,
            throughput: rate.unwrap_or(throughput),
            latency: Latency {
                min_us: 10.0,
                mean_us: p99 / 4.0,
                p50_us: p99 / 5.0,
                p90_us: p99 / 2.0,
                p99_us: p99,
                p999_us: p99 * 2.0,
                max_us: p99 * 3.0,
            },
            server_metrics: BTreeMap::new(),
            server_cpu_secs: Some(1.5),
            server_background_secs: None,
            client_cpu_secs: Some(2.0),
        },
        variant: None,
        layout: Layout::Shared,
        load_average: Some(1.5),
    }
}

fn results() -> SuiteResults {
    let mut runs = Vec::new();
    for (k, t) in [
        (ServerKind::Rush, 100_000.0),
        (ServerKind::RedisEverysec, 50_000.0),
        (ServerKind::RedisAlways, 25_000.0),
    ] {
        runs.push(run(k, "kv-set", t, None));
        runs.push(run(k, "kv-get", t * 2.0, None));
        for f in [0.25, 0.5, 0.9] {
            runs.push(run(k, "kv-set", t, Some(t * f)));
        }
    }
    let mut failing = run(ServerKind::RedisAlways, "kv-incr", 1000.0, None);
    failing.report.errors = 3;
    failing.report.error_types.insert(
        "TIMEOUT".into(),
        rush_bench::stats::ErrorStat {
            count: 3,
            example: "no answer within 10s".into(),
        },
    );
    runs.push(failing);
    SuiteResults {
        mode: "quick".into(),
        generated: "2026-11-30 03:00 UTC".into(),
        machine: Machine {
            cpu: "Test CPU".into(),
            cores: 2,
            memory_gib: 24.0,
            kernel: "6.1".into(),
            load_average: "0.5".into(),
            data_fs: "ext4".into(),
        },
        rushd: "target/release/rushd".into(),
        rushd_profile: "release".into(),
        rush_shards: "2".into(),
        redis_version: "7.0.15".into(),
        connections: 50,
        client_threads: 2,
        duration_secs: 3.0,
        sweep_secs: 1.5,
        keys: 1000,
        dist: "uniform".into(),
        value_size: 100,
        runs,
        failures: vec!["kv-get on Redis (AOF always): connection refused".into()],
        calibration: vec![rush_bench::suite::Calibration {
            server: ServerKind::RedisEverysec,
            workload: "kv-set".into(),
            connections: 50,
            pipeline: 16,
            throughput: 100_000.0,
            p50_ms: 1.0,
            p99_ms: 2.0,
        }],
        footprint: Vec::new(),
        scale_memory_mb: None,
        load_average_end: "2.5".into(),
        suite_secs: 90.0,
        pinned: None,
        redis_benchmark: Vec::new(),
        redis_benchmark_skipped: None,
    }
}

#[test]
fn report_has_machine_tables_ratios_errors_and_charts() {
    let dir = tempfile::tempdir().unwrap();
    let r = results();
    assert_eq!(r.error_count(), 3);
    std::fs::write(dir.path().join("NOTES.md"), "Profiled: the memtable.\n").unwrap();
    rush_bench::report::write(&r, dir.path()).unwrap();
    let md = std::fs::read_to_string(dir.path().join("REPORT.md")).unwrap();

    // The machine comes first.
    let machine = md.find("Test CPU, **2 cores**").expect("CPU line");
    assert!(machine < md.find("## Headline").unwrap());
    // Headline: Rush 100k vs 50k and 25k → 2.00× and 4.00×.
    assert!(
        md.contains("| kv-set | 100,000 | 50,000 | 2.00× | 25,000 | 4.00× |"),
        "{md}"
    );
    // CPU per operation: 1.5 s of server and 2 s of client CPU over 3 s of
    // each run's throughput.
    assert!(
        md.contains("| kv-set | 5.0 | 6.7 | 10.0 | 13.3 | 20.0 | 26.7 |"),
        "{md}"
    );
    // Per-workload table states every row's durability.
    assert!(md.contains(
        "| Redis (AOF always) | fsynced before the ack (appendfsync always) | 16 | 25,000 |"
    ));
    // The open-loop table lists each step.
    assert!(md.contains("| Rush | 50,000 | 50% | 50,000 |"), "{md}");
    // Calibration: rush-bench's 50k against redis-benchmark's 100k.
    assert!(
        md.contains("| Redis (AOF everysec) | kv-set | 100,000 | 1.000 | 2.000 | 50,000 | 50% |"),
        "{md}"
    );
    // Errors and failed runs are listed.
    assert!(md.contains("**TIMEOUT** × 3"), "{md}");
    assert!(md.contains("run failed: kv-get on Redis (AOF always)"));

    // Hand-written notes are carried in.
    assert!(md.contains("## Analysis"));
    assert!(md.contains("Profiled: the memtable."));

    // results.json reads back as the same results.
    let back: SuiteResults =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("results.json")).unwrap())
            .unwrap();
    assert_eq!(back.runs.len(), r.runs.len());

    // Charts are PNGs when a font is available; otherwise the report says why.
    if md.contains("Charts were not drawn") {
        prerequisite_missing(
            "no font for the charts",
            "scripts/ensure-deps --font (Debian: apt-get install fonts-dejavu-core)",
        );
        return;
    }
    for f in ["throughput.png", "latency-kv-set.png"] {
        assert!(md.contains(&format!("]({f})")), "{f} linked");
        let bytes = std::fs::read(dir.path().join(f)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n"), "{f} is a PNG");
        assert!(bytes.len() > 10_000, "{f} has content");
    }
}
