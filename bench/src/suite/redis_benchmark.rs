//! The redis-benchmark phase: Redis's own benchmark client — an
//! independent client, not rush-bench — against rushd's RESP listener and
//! against each redis-server, one fresh server at a time, with the same
//! arguments for every server. Each test (SET, GET, INCR, HSET) at each
//! pipeline is one redis-benchmark run, so the server's CPU time can be read
//! from /proc/PID/stat before and after it: server CPU per request is the
//! figure this project decides on.
//!
//! redis-benchmark's HSET test writes field `element:__rand_int__` of the
//! one key `myhash`; SET and GET use `key:__rand_int__`, INCR
//! `counter:__rand_int__` (`-r` sets the range of `__rand_int__`). A Rush
//! hash holds at most `MAX_HASH_FIELDS` (10,000) fields, so HSET's `-r` is
//! the suite's key count capped there, for every server alike: past it rushd
//! refuses the write, and redis-benchmark stops at the first error.

use super::{RedisBenchmarkRow, ServerKind, SuiteOptions};
use crate::driver::cpu;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The tests, in redis-benchmark's own order (GET reads what SET wrote).
pub const TESTS: [&str; 4] = ["SET", "GET", "INCR", "HSET"];

/// The pipelines (`-P`) every test runs at.
pub const PIPELINES: [usize; 2] = [1, 16];

/// The redis-benchmark binary: beside redis-server when it is there (the
/// same Redis build), else the one on PATH.
pub(super) fn binary(redis_server: &Path) -> PathBuf {
    let beside = redis_server.with_file_name("redis-benchmark");
    if beside.is_file() {
        beside
    } else {
        PathBuf::from("redis-benchmark")
    }
}

/// True when `bin` runs (`--version`).
pub(super) fn installed(bin: &Path) -> bool {
    Command::new(bin)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What one redis-benchmark run is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Args {
    /// `HOST:PORT` of the server's RESP listener.
    pub addr: String,
    /// Lower-case test names for `-t`.
    pub tests: Vec<String>,
    pub pipeline: usize,
    pub clients: usize,
    pub requests: u64,
    pub keyspace: u64,
    pub value_size: usize,
}

impl Args {
    /// The command line (without the binary).
    pub fn to_vec(&self) -> Vec<String> {
        let (host, port) = self.addr.rsplit_once(':').unwrap_or((&self.addr, "6379"));
        let mut v: Vec<String> = vec!["-h".into(), host.into(), "-p".into(), port.into()];
        for (flag, value) in [
            ("-t", self.tests.join(",")),
            ("-P", self.pipeline.to_string()),
            ("-c", self.clients.to_string()),
            ("-n", self.requests.to_string()),
            ("-r", self.keyspace.to_string()),
            ("-d", self.value_size.to_string()),
        ] {
            v.push(flag.into());
            v.push(value);
        }
        v.push("--csv".into());
        v
    }
}

/// Run redis-benchmark with `args` and return its CSV text. redis-benchmark
/// (7.x) stops at the first error reply and exits 1 ("Error from server:
/// …" on stderr); that, a non-zero exit, or any error line is an error here.
pub(super) fn run(bin: &Path, args: &Args) -> anyhow::Result<String> {
    let out = Command::new(bin)
        .args(args.to_vec())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let complaint = stderr
        .lines()
        .chain(stdout.lines())
        .find(|l| l.contains("Error") || l.contains("error") || l.contains("Could not connect"));
    if !out.status.success() || complaint.is_some() {
        bail!(
            "redis-benchmark {} exited with {}: {}",
            args.to_vec().join(" "),
            out.status,
            stderr
                .trim()
                .lines()
                .take(3)
                .collect::<Vec<_>>()
                .join(" / ")
        );
    }
    Ok(stdout)
}

/// One line of redis-benchmark's `--csv` output.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CsvRow {
    pub test: String,
    pub rps: f64,
    pub avg_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// Parse redis-benchmark's `--csv` output: a header
/// (`"test","rps","avg_latency_ms",…`, Redis 6.2 and later) naming the
/// columns, then a line per test. Without a header the columns are taken to
/// be test and rps (older redis-benchmark). Lines that are not CSV are
/// skipped; a test line whose rps is not a number is an error.
pub(crate) fn parse_csv(text: &str) -> anyhow::Result<Vec<CsvRow>> {
    let mut columns: Vec<String> = vec!["test".into(), "rps".into()];
    let mut rows = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if !line.starts_with('"') {
            continue;
        }
        let cells: Vec<&str> = line
            .split(',')
            .map(|c| c.trim().trim_matches('"'))
            .collect();
        if cells.first() == Some(&"test") {
            columns = cells.iter().map(|c| c.to_string()).collect();
            continue;
        }
        let cell = |name: &str| {
            columns
                .iter()
                .position(|c| c == name)
                .and_then(|i| cells.get(i))
        };
        let num = |name: &str| cell(name).and_then(|v| v.parse::<f64>().ok());
        let test = cell("test").context("a CSV line without a test")?;
        let rps = num("rps").with_context(|| format!("no requests per second in {line:?}"))?;
        rows.push(CsvRow {
            test: test.to_string(),
            rps,
            avg_ms: num("avg_latency_ms"),
            p50_ms: num("p50_latency_ms"),
            p99_ms: num("p99_latency_ms"),
            max_ms: num("max_latency_ms"),
        });
    }
    Ok(rows)
}

/// `-r` of `test`: the suite's key count, HSET's capped at the fields a Rush
/// hash may hold (its fields are one key's).
pub(super) fn keyspace(test: &str, keys: u64) -> u64 {
    if test == "HSET" {
        keys.min(rush_protocol::limits::MAX_HASH_FIELDS as u64)
    } else {
        keys
    }
}

/// Every test at every pipeline against one running server (its pid for the
/// CPU time, `addr` its RESP listener), each row added to `rows` as it is
/// measured. Stops at the first failing run.
pub(super) fn rows_for(
    bin: &Path,
    opts: &SuiteOptions,
    kind: ServerKind,
    pid: u32,
    addr: &str,
    rows: &mut Vec<RedisBenchmarkRow>,
) -> anyhow::Result<()> {
    for pipeline in PIPELINES {
        for test in TESTS {
            let args = Args {
                addr: addr.to_string(),
                tests: vec![test.to_lowercase()],
                pipeline,
                clients: opts.redis_benchmark_clients,
                requests: opts.redis_benchmark_requests,
                keyspace: keyspace(test, opts.keys),
                value_size: opts.value_size,
            };
            eprintln!(
                "-- redis-benchmark · {} · {test} · pipeline {pipeline} · {} clients · {} requests",
                kind.key(),
                args.clients,
                args.requests
            );
            let cpu_from = cpu::process(Some(pid));
            let csv = run(bin, &args)?;
            let cpu_to = cpu::process(Some(pid));
            let parsed = parse_csv(&csv)?;
            let Some(r) = parsed.into_iter().find(|r| r.test == test) else {
                bail!("redis-benchmark printed no {test} line:\n{csv}");
            };
            let row = RedisBenchmarkRow {
                server: kind,
                test: test.to_string(),
                pipeline,
                clients: args.clients,
                requests: args.requests,
                keyspace: args.keyspace,
                value_size: args.value_size,
                throughput: r.rps,
                avg_ms: r.avg_ms,
                p50_ms: r.p50_ms,
                p99_ms: r.p99_ms,
                max_ms: r.max_ms,
                server_cpu_secs: cpu_from.zip(cpu_to).map(|(a, b)| b - a),
            };
            eprintln!(
                "   {:>10.0} req/s  avg {} ms  p99 {} ms  server {} µs/op",
                row.throughput,
                row.avg_ms.map_or("–".into(), |v| format!("{v:.3}")),
                row.p99_ms.map_or("–".into(), |v| format!("{v:.3}")),
                row.server_cpu_us_per_op()
                    .map_or("–".into(), |v| format!("{v:.1}")),
            );
            rows.push(row);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from a real run here: redis-benchmark 7.0.15 (Debian
    /// redis-tools), `-t set,get,incr,hset -P 16 -c 10 -n 20000 -r 1000
    /// --csv` against redis-server 7.0.15 on loopback.
    const CSV_7_0: &str = include_str!("testdata/redis-benchmark-7.0-p16.csv");

    /// Also captured here: the same at `-P 1 -c 10 -n 5000`.
    const CSV_7_0_P1: &str = include_str!("testdata/redis-benchmark-7.0-p1.csv");

    #[test]
    fn parses_redis_benchmark_csv() {
        let rows = parse_csv(CSV_7_0).unwrap();
        let tests: Vec<&str> = rows.iter().map(|r| r.test.as_str()).collect();
        assert_eq!(tests, TESTS);
        assert_eq!(
            rows[0],
            CsvRow {
                test: "SET".into(),
                rps: 259740.27,
                avg_ms: Some(0.532),
                p50_ms: Some(0.463),
                p99_ms: Some(1.143),
                max_ms: Some(5.959),
            }
        );
        assert_eq!(rows[3].rps, 392156.88);
        assert_eq!(rows[3].p99_ms, Some(0.783));
        let p1 = parse_csv(CSV_7_0_P1).unwrap();
        assert_eq!(p1.len(), 4);
        assert_eq!(p1[2].test, "INCR");
        assert_eq!(p1[2].rps, 15151.51);
        assert_eq!(p1[2].p50_ms, Some(0.127));
    }

    #[test]
    fn csv_without_a_header_or_latencies_still_gives_the_rate() {
        // Older redis-benchmark: no header, test and rps only; and text
        // that is not CSV (a warning) in between.
        let rows =
            parse_csv("WARNING: Could not fetch server CONFIG\n\"SET\",\"1000.50\"\n").unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].rps, 1000.5);
        assert_eq!(rows[0].avg_ms, None);
        assert!(parse_csv("\"SET\",\"fast\"\n").is_err());
        assert!(parse_csv("").unwrap().is_empty());
    }

    #[test]
    fn the_command_line_is_the_same_for_every_server() {
        let args = Args {
            addr: "127.0.0.1:6380".into(),
            tests: vec!["hset".into()],
            pipeline: 16,
            clients: 50,
            requests: 2000,
            keyspace: 10_000,
            value_size: 100,
        };
        assert_eq!(
            args.to_vec().join(" "),
            "-h 127.0.0.1 -p 6380 -t hset -P 16 -c 50 -n 2000 -r 10000 -d 100 --csv"
        );
    }

    #[test]
    fn hset_stays_within_a_rush_hash() {
        assert_eq!(keyspace("SET", 1_000_000), 1_000_000);
        assert_eq!(keyspace("HSET", 1_000_000), 10_000);
        assert_eq!(keyspace("HSET", 500), 500);
    }

    #[test]
    fn cpu_per_request() {
        let row = RedisBenchmarkRow {
            server: ServerKind::Rush,
            test: "SET".into(),
            pipeline: 1,
            clients: 50,
            requests: 10_000,
            keyspace: 100,
            value_size: 100,
            throughput: 5000.0,
            avg_ms: None,
            p50_ms: None,
            p99_ms: None,
            max_ms: None,
            server_cpu_secs: Some(0.25),
        };
        assert_eq!(row.server_cpu_us_per_op(), Some(25.0));
    }
}
