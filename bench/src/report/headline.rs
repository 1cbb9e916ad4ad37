//! The headline: throughput of every workload on every server at the
//! deepest pipeline, the CPU each side spent per operation, and how close
//! rush-bench's Redis side comes to redis-benchmark. The pinned layout's
//! section uses the same tables.

use super::format::{ops, ratio};
use super::select::peak_run;
use super::Matrix;
use crate::suite::{ServerKind, SuiteResults, SuiteRun};
use std::fmt::Write as _;

/// The headline run of a workload on a server (shared or pinned layout).
pub(super) type RunOf<'a> = &'a dyn Fn(&str, ServerKind) -> Option<&'a SuiteRun>;

/// "## Headline": throughput at the deepest pipeline, and its chart.
pub(super) fn section(s: &mut String, m: &Matrix) {
    let top = m.top;
    let _ = writeln!(
        s,
        "## Headline (closed loop, {top} in flight per connection)\n"
    );
    throughput_table(s, &m.names, &m.redis, &|w, k| {
        peak_run(m.results, w, k, top)
    });
    if let Some(f) = &m.charts.throughput {
        let _ = writeln!(s, "![Throughput per workload]({f})\n");
    }
}

/// A row per workload, and for Rush then each Redis the columns `columns`
/// names (the first after the server's label): the cells `cells` gives.
fn per_server_table(
    s: &mut String,
    names: &[String],
    columns: &[(ServerKind, &[&str])],
    cells: impl Fn(&str, ServerKind) -> Vec<String>,
) {
    let mut head = String::from("| Workload |");
    let mut rule = String::from("|---|");
    for (k, cols) in columns {
        for (i, c) in cols.iter().enumerate() {
            if i == 0 {
                let _ = write!(head, " {} {c} |", k.label());
            } else {
                let _ = write!(head, " {c} |");
            }
            rule.push_str("---:|");
        }
    }
    let _ = writeln!(s, "{head}\n{rule}");
    for w in names {
        let mut row = format!("| {w} |");
        for (k, _) in columns {
            for c in cells(w, *k) {
                let _ = write!(row, " {c} |");
            }
        }
        let _ = writeln!(s, "{row}");
    }
    let _ = writeln!(s);
}

/// Rush's columns, then each of `redis`'s, with the same `redis_cols`
/// after Rush's `rush_cols`.
fn columns<'c>(
    redis: &[ServerKind],
    rush_cols: &'c [&'c str],
    redis_cols: &'c [&'c str],
) -> Vec<(ServerKind, &'c [&'c str])> {
    std::iter::once((ServerKind::Rush, rush_cols))
        .chain(redis.iter().map(|k| (*k, redis_cols)))
        .collect()
}

/// Throughput of every workload on Rush and on each Redis, with the ratios.
pub(super) fn throughput_table(s: &mut String, names: &[String], redis: &[ServerKind], run: RunOf) {
    let throughput = |w: &str, k| run(w, k).map(|r| r.report.throughput);
    per_server_table(
        s,
        names,
        &columns(redis, &["ops/s"], &["ops/s", "Rush/Redis"]),
        |w, k| {
            let this = throughput(w, k);
            let mut cells = vec![this.map_or("–".into(), ops)];
            if k != ServerKind::Rush {
                cells.push(match (throughput(w, ServerKind::Rush), this) {
                    (Some(a), Some(b)) => ratio(a, b),
                    _ => "–".into(),
                });
            }
            cells
        },
    );
}

/// True when the headline runs on one of `servers` measured the server's
/// CPU time.
pub(super) fn cpu_measured(names: &[String], servers: &[ServerKind], run: RunOf) -> bool {
    names.iter().any(|w| {
        servers
            .iter()
            .any(|k| run(w, *k).is_some_and(|r| r.report.server_cpu_secs.is_some()))
    })
}

/// Server and client CPU time per answered operation in the headline runs:
/// what each side costs, apart from how the two shared the cores.
pub(super) fn cpu_section(s: &mut String, m: &Matrix) {
    let top = m.top;
    let run = |w: &str, k| peak_run(m.results, w, k, top);
    if !cpu_measured(&m.names, &[ServerKind::Rush], &run) {
        return;
    }
    let _ = writeln!(
        s,
        "### CPU per operation ({top} in flight per connection)\n"
    );
    let _ = writeln!(
        s,
        "CPU time (user + system) of the server process, and of the bench client, over the \
         measured run, divided by the operations answered. A server's time includes the \
         processes it forks (Redis rewrites its AOF in a child, as rushd compacts on its own \
         threads). On two shared cores a side that \
         needs more CPU per operation is slower no matter how the cores are shared; the \
         client column is the same harness driving each server.\n"
    );
    cpu_table(s, &m.names, &m.redis, &run);
}

/// Server and client µs per operation of every workload on each server,
/// and how much of the server's was background work when that was
/// measured (results before it have no such column).
pub(super) fn cpu_table(s: &mut String, names: &[String], redis: &[ServerKind], run: RunOf) {
    let us = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.1}"));
    let servers: Vec<ServerKind> = std::iter::once(ServerKind::Rush)
        .chain(redis.iter().copied())
        .collect();
    let background = names.iter().any(|w| {
        servers
            .iter()
            .any(|k| run(w, *k).is_some_and(|r| r.report.server_background_secs.is_some()))
    });
    let cols: &[&str] = if background {
        &["server µs/op", "of it background", "client µs/op"]
    } else {
        &["server µs/op", "client µs/op"]
    };
    per_server_table(s, names, &columns(redis, cols, cols), |w, k| {
        let r = run(w, k);
        let mut cells = vec![us(r.and_then(|r| r.report.server_cpu_us_per_op()))];
        if background {
            cells.push(us(r.and_then(|r| r.report.server_background_us_per_op())));
        }
        cells.push(us(r.and_then(|r| r.report.client_cpu_us_per_op())));
        cells
    });
    if background {
        let _ = writeln!(
            s,
            "*Of it background*: the server's time on work that was not the requests' own — \
             rushd's RocksDB threads (flushes, compactions), Redis's forked children (AOF \
             rewrites). One server runs every workload in turn, so a row's background time \
             may be paying for the writes of the workloads before it.\n"
        );
    }
}

/// "### How much of Redis's speed does the client get?": redis-benchmark
/// beside rush-bench on the same Redis.
pub(super) fn calibration_section(s: &mut String, results: &SuiteResults) {
    if results.calibration.is_empty() {
        return;
    }
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
