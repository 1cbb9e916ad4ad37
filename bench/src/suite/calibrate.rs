//! Calibration: redis-benchmark (Redis's own C client) against the same
//! Redis with the suite's settings, to show how close rush-bench's Redis side
//! comes to it.

use super::{Calibration, ServerKind, SuiteOptions, SuiteResults};
use crate::target::Target;
use crate::workload::Entry;
use std::process::{Command, Stdio};

/// The command redis-benchmark runs for a workload, if it has one.
fn redis_benchmark_test(workload: &str) -> Option<&'static str> {
    match workload {
        "kv-set" => Some("SET"),
        "kv-get" => Some("GET"),
        "kv-incr" => Some("INCR"),
        _ => None,
    }
}

/// Run redis-benchmark (Redis's own C client: explicit pipelines, no
/// per-request bookkeeping) with the suite's connections, pipeline, value
/// size and key range, for the workloads it has a test for.
pub(super) fn calibrate(
    opts: &SuiteOptions,
    kind: ServerKind,
    target: &Target,
    pipeline: usize,
    entries: &[&Entry],
    results: &mut SuiteResults,
) {
    let bin = super::redis_benchmark::binary(&opts.redis_server);
    let tests: Vec<(&str, &str)> = entries
        .iter()
        .filter_map(|e| redis_benchmark_test(e.name).map(|t| (e.name, t)))
        .collect();
    if tests.is_empty() {
        return;
    }
    let Some((host, port)) = target.addr.rsplit_once(':') else {
        return;
    };
    // About as long as a closed-loop run at ~200k requests/s.
    let requests = (opts.duration.as_secs_f64() * 200_000.0) as u64;
    let names: Vec<&str> = tests.iter().map(|(_, t)| *t).collect();
    eprintln!("-- redis-benchmark · {} · {}", kind.key(), names.join(","));
    let out = Command::new(&bin)
        .args(["-h", host, "-p", port, "--csv"])
        .arg("-c")
        .arg(opts.connections.to_string())
        .arg("-P")
        .arg(pipeline.to_string())
        .arg("-d")
        .arg(opts.value_size.to_string())
        .arg("-r")
        .arg(opts.keys.to_string())
        .arg("-n")
        .arg(requests.to_string())
        .arg("-t")
        .arg(names.join(",").to_lowercase())
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            eprintln!("redis-benchmark failed: {}", o.status);
            return;
        }
        Err(e) => {
            eprintln!("redis-benchmark not run ({}): {e}", bin.display());
            return;
        }
    };
    let rows = match super::redis_benchmark::parse_csv(&String::from_utf8_lossy(&out.stdout)) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("redis-benchmark's output not understood: {e:#}");
            return;
        }
    };
    for row in rows {
        let Some((workload, _)) = tests.iter().find(|(_, t)| row.test == *t) else {
            continue;
        };
        if let (Some(p50), Some(p99)) = (row.p50_ms, row.p99_ms) {
            results.calibration.push(Calibration {
                server: kind,
                workload: workload.to_string(),
                connections: opts.connections,
                pipeline,
                throughput: row.rps,
                p50_ms: p50,
                p99_ms: p99,
            });
        }
    }
}
