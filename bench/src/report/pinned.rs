//! "Pinned layout": the headline's closed-loop runs made again with the
//! server on one CPU and the client on another (`--pin`).

use super::headline::{cpu_measured, cpu_table, throughput_table};
use super::select::{pinned_run, pinned_runs, workload_order_of};
use crate::suite::{Layout, ServerKind, SuiteResults};
use std::fmt::Write as _;

/// The headline again in the pinned layout: throughput with the ratios, and
/// CPU per operation, at the deepest pipeline the pinned runs used.
pub(super) fn section(s: &mut String, results: &SuiteResults) {
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
