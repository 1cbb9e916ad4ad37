//! `rush-bench suite`: start rushd and redis-server on loopback with
//! temporary data directories, run every workload against each, stop them,
//! and write the report.
//!
//! Redis runs twice — AOF with `appendfsync everysec` (its usual durable
//! setting, which may lose the last second on power failure) and with
//! `appendfsync always` (acknowledged = fsynced, like Rush's default) — so the
//! reader sees both the like-for-like comparison and Redis's fastest durable
//! mode. Servers are started and stopped from the calling thread (so their
//! parent-death signal stays armed: if the suite dies, they die too), one at
//! a time, so no two servers compete for the cores.
//!
//! Client and server share every core (the *shared* layout). With `--pin`
//! the headline closed-loop runs are made again in a *pinned* layout: the
//! server under test on the first CPU of this process's allowed set (started
//! under `taskset`, so its background threads are there too) and the client
//! on the second.
//!
//! This file holds the options and the runner every phase uses; the rest is
//! in parts of its own:
//! - `phases`: the four phases [`run_suite`] runs;
//! - `servers`: rushd and redis-server start-up and teardown;
//! - `probes`: memory, disk, load and the machine's facts;
//! - `pin`: the pinned layout's CPUs and affinity;
//! - `calibrate`: redis-benchmark beside rush-bench's Redis side;
//! - `redis_benchmark`: the redis-benchmark phase, redis-benchmark against
//!   every server (rushd's RESP listener too), with the server's CPU;
//! - `results`: what `results.json` holds.

mod calibrate;
mod phases;
mod pin;
mod probes;
mod redis_benchmark;
mod results;
mod servers;

pub use phases::{ScalingFamily, SCALING_FAMILIES};
pub use probes::{load_average, machine};
pub use results::{
    Calibration, Footprint, Layout, Machine, Pinning, RedisBenchmarkRow, ServerKind, SuiteResults,
    SuiteRun, ITEM_KINDS, VARIANT_ONE_SHARD, VARIANT_PINNED, VARIANT_SCALING,
};

use crate::dist::Dist;
use crate::driver::{RunOptions, Stop};
use crate::report;
use crate::stats::RunReport;
use crate::target::Side;
use crate::workload::{Entry, Params, WORKLOADS};
use anyhow::Context;
use pin::Pin;
use servers::Server;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How the suite runs.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    pub rushd: PathBuf,
    pub redis_server: PathBuf,
    pub quick: bool,
    /// Where REPORT.md, results.json and the charts go.
    pub out: PathBuf,
    /// rushd `--shards` (default: rushd's own, one per core).
    pub shards: Option<usize>,
    pub connections: usize,
    /// Closed-loop runs per workload, one per value (requests in flight per connection).
    pub pipelines: Vec<usize>,
    pub duration: Duration,
    pub keys: u64,
    /// `None`: each workload's own distribution.
    pub dist: Option<Dist>,
    pub value_size: usize,
    /// Open-loop steps for sweep workloads, as fractions of the closed-loop peak.
    pub sweep: Vec<f64>,
    pub sweep_duration: Duration,
    /// Workloads to run (empty: all).
    pub workloads: Vec<String>,
    pub servers: Vec<ServerKind>,
    /// Parent of the servers' temporary data directories.
    pub data_dir: Option<PathBuf>,
    /// Client runtime threads (reported).
    pub threads: usize,
    /// Also run redis-benchmark against each Redis (when it is installed).
    pub calibrate: bool,
    /// Run the redis-benchmark phase: redis-benchmark (an independent
    /// client) against every server, rushd's RESP listener included.
    pub redis_benchmark: bool,
    /// redis-benchmark's `-n` in that phase: requests per test and pipeline.
    pub redis_benchmark_requests: u64,
    /// redis-benchmark's `-c` in that phase.
    pub redis_benchmark_clients: usize,
    /// One open-loop step at half the peak for workloads that are not swept
    /// (the latency target is stated at half the peak for every workload).
    pub half_peak: bool,
    /// Item counts of the scaling rows (links: links-resolve, the footprint,
    /// links-shorten; owners: catalog, the footprint, catalog-zipf); empty:
    /// no scaling phase.
    pub scale_keys: Vec<u64>,
    /// Servers the scaling phase runs on.
    pub scale_servers: Vec<ServerKind>,
    /// rushd's `--memory-mb` in the scaling phase (`None`: rushd's own
    /// cache and buffer sizes).
    pub scale_memory_mb: Option<usize>,
    /// Also run every workload on a one-shard rushd.
    pub one_shard: bool,
    /// Also run the headline closed-loop runs in the pinned layout (server
    /// on one CPU, client on another).
    pub pin: bool,
}

impl SuiteOptions {
    /// The defaults of a full run, or of `--quick` (under 2 minutes: CI's smoke run).
    pub fn new(rushd: PathBuf, redis_server: PathBuf, quick: bool) -> SuiteOptions {
        SuiteOptions {
            rushd,
            redis_server,
            quick,
            out: PathBuf::from("bench/results"),
            shards: None,
            connections: 50,
            pipelines: if quick { vec![16] } else { vec![1, 16] },
            // Quick: every workload on every server (and the scaling and
            // one-shard phases) in under 2 minutes — a smoke run, not figures.
            duration: Duration::from_millis(if quick { 1000 } else { 10_000 }),
            keys: if quick { 10_000 } else { 1_000_000 },
            dist: None,
            value_size: 100,
            sweep: if quick {
                vec![0.5]
            } else {
                vec![0.1, 0.25, 0.5, 0.75, 0.9]
            },
            sweep_duration: Duration::from_millis(if quick { 500 } else { 5000 }),
            workloads: Vec::new(),
            servers: ServerKind::ALL.to_vec(),
            data_dir: None,
            threads: 0,
            calibrate: !quick,
            redis_benchmark: true,
            // Quick: a smoke run (a second or two per test even at pipeline
            // 1 with every write fsynced); full: long enough that the server
            // CPU, read in 10 ms ticks, is a figure.
            redis_benchmark_requests: if quick { 1_000 } else { 100_000 },
            redis_benchmark_clients: 50,
            half_peak: true,
            scale_keys: if quick {
                vec![10_000, 20_000]
            } else {
                vec![1_000_000, 10_000_000]
            },
            // Redis `always` differs from `everysec` by its fsyncs, which
            // neither the read figures nor the footprint depend on (GETEX
            // writes its TTL to the AOF, but the phase-1 rows show that
            // cost); one Redis keeps the 10M-key preloads affordable.
            scale_servers: vec![ServerKind::Rush, ServerKind::RedisEverysec],
            scale_memory_mb: Some(default_scale_memory_mb(quick, None)),
            one_shard: true,
            pin: false,
        }
    }
}

/// The smallest `rushd --memory-mb` a node of `shards` shards takes: its
/// memtable share (10 % of the budget) must hold two 4 MiB memtables per
/// shard (rushd's `DEFAULT_MEMTABLES_PCT`, `MEMTABLES_PER_SHARD` and
/// `MIN_WRITE_BUFFER_MB`; rushd refuses a smaller budget).
pub fn smallest_memory_mb(shards: usize) -> usize {
    shards.max(1) * 2 * 4 * 100 / 10
}

/// The scaling phase's memory budget for rushd unless one is given: 1024
/// MiB, 256 in quick runs (128 would not hold two shards' memtables),
/// raised to the smallest budget rushd takes with `shards` shards (`None`:
/// rushd's default, one per core).
pub fn default_scale_memory_mb(quick: bool, shards: Option<usize>) -> usize {
    let shards =
        shards.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let base = if quick { 256 } else { 1024 };
    base.max(smallest_memory_mb(shards))
}

/// Run the suite and write the report; returns the results (check
/// [`SuiteResults::error_count`] and `failures`).
///
/// 1. **Every workload on every server**: closed loop at each pipeline, then
///    open-loop steps (the sweep for sweep workloads; one step at half the
///    peak for the others, for the latency target).
///
///    Then **redis-benchmark** (`redis_benchmark`): redis-benchmark against a
///    fresh instance of every server (rushd's RESP listener), SET, GET, INCR
///    and HSET at pipelines 1 and 16, with the server's CPU per request.
/// 2. **Scaling and footprint** (`scale_servers`; rushd on the memory
///    budget `scale_memory_mb`): four families, each on a fresh server of
///    its own. Links: preloaded to each of `scale_keys` with `links-resolve`
///    run at each, the memory and disk per link measured, then
///    `links-shorten` at that size. Owners: the same with `catalog`, the
///    footprint per owner, then `catalog-zipf` on the same data. Users:
///    `limits-held` (orders reading stored books), the footprint per user,
///    then `limits`. Envelopes: `envelopes-held` (grabs of stored
///    envelopes), the footprint per envelope, then the `envelopes` storm.
/// 3. **One shard**: rushd restarted with `--shards 1`, every workload once
///    at the deepest pipeline, to compare with phase 1's rushd.
/// 4. **Pinned** (`pin`): every workload on every server again, closed loop
///    at the deepest pipeline (the headline's), each server alone on one
///    CPU (rushd with one shard) and this process on another.
pub fn run_suite(
    opts: &SuiteOptions,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<SuiteResults> {
    let entries: Vec<&'static Entry> = if opts.workloads.is_empty() {
        WORKLOADS.iter().collect()
    } else {
        opts.workloads
            .iter()
            .map(|n| crate::workload::find(n).with_context(|| format!("unknown workload {n:?}")))
            .collect::<anyhow::Result<_>>()?
    };
    // Before anything runs: --pin on a machine that cannot do it fails now,
    // not after the shared layout's hour.
    let pin = if opts.pin {
        Some(Pin::resolve()?)
    } else {
        None
    };
    let data_parent = probes::data_parent(opts.data_dir.as_deref())?;
    servers::install_signal_handler(rt);
    let started = Instant::now();
    let results = SuiteResults {
        mode: if opts.quick { "quick" } else { "full" }.into(),
        generated: report::utc_now(),
        machine: machine(&data_parent),
        rushd: opts.rushd.display().to_string(),
        rushd_profile: probes::profile_of(&opts.rushd),
        rush_shards: match opts.shards {
            Some(n) => n.to_string(),
            None => format!(
                "{} (one per core)",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            ),
        },
        redis_version: if opts.servers.iter().any(|s| s.side() == Side::Redis) {
            servers::redis_version(&opts.redis_server)?
        } else {
            String::new()
        },
        connections: opts.connections,
        client_threads: opts.threads,
        duration_secs: opts.duration.as_secs_f64(),
        sweep_secs: opts.sweep_duration.as_secs_f64(),
        keys: opts.keys,
        dist: match opts.dist {
            Some(d) => d.to_string(),
            None => "each workload's own".into(),
        },
        value_size: opts.value_size,
        runs: Vec::new(),
        failures: Vec::new(),
        calibration: Vec::new(),
        footprint: Vec::new(),
        scale_memory_mb: None,
        load_average_end: String::new(),
        suite_secs: 0.0,
        pinned: None,
        redis_benchmark: Vec::new(),
        redis_benchmark_skipped: (!opts.redis_benchmark)
            .then(|| "skipped (--no-redis-benchmark)".to_string()),
    };
    // Open-loop steps use the deepest pipeline, and its peak.
    let top = opts
        .pipelines
        .iter()
        .copied()
        .max()
        .context("no pipeline given")?;
    let mut suite = Suite {
        opts,
        rt,
        pinned_rt: None,
        data_parent,
        top,
        results,
    };
    for &kind in &opts.servers {
        suite.every_workload(kind, &entries)?;
        suite.checkpoint();
    }
    if opts.redis_benchmark {
        for &kind in &opts.servers {
            suite.redis_benchmark(kind)?;
            suite.checkpoint();
            if suite.results.redis_benchmark_skipped.is_some() {
                break;
            }
        }
    }
    if !opts.scale_keys.is_empty() {
        for &kind in &opts.scale_servers {
            if opts.servers.contains(&kind) {
                suite.scaling(kind, &entries)?;
                suite.checkpoint();
            }
        }
    }
    if opts.one_shard && opts.servers.contains(&ServerKind::Rush) && opts.shards != Some(1) {
        suite.one_shard(&entries)?;
        suite.checkpoint();
    }
    if let Some(pin) = &pin {
        // The shared layout's report is written even if this phase fails.
        if let Err(e) = suite.pinned(&entries, pin) {
            eprintln!("pinned layout failed: {e:#}");
            suite.results.failures.push(format!("pinned layout: {e:#}"));
        }
    }
    let mut results = suite.results;
    results.load_average_end = load_average();
    results.suite_secs = started.elapsed().as_secs_f64();
    eprintln!("suite ran for {:.0}s", results.suite_secs);
    report::write(&results, &opts.out)?;
    Ok(results)
}

/// Client runtime threads in the pinned layout: the client has one core.
pub const PINNED_CLIENT_THREADS: usize = 1;

/// A suite in progress: what it was asked to do, where its clients run,
/// and the results so far.
struct Suite<'a> {
    opts: &'a SuiteOptions,
    rt: &'a tokio::runtime::Runtime,
    /// During phase 4: the pinned client's runtime (its threads on the
    /// client's CPU). Runs made while it is set are [`Layout::Pinned`].
    pinned_rt: Option<tokio::runtime::Runtime>,
    data_parent: PathBuf,
    top: usize,
    results: SuiteResults,
}

impl Suite<'_> {
    /// Save the results so far as `results.json`, so that a suite cut short
    /// (a full disk, a crash) keeps what it measured: `rush-bench report`
    /// renders it.
    fn checkpoint(&self) {
        let saved = std::fs::create_dir_all(&self.opts.out).and_then(|()| {
            let json =
                serde_json::to_string_pretty(&self.results).map_err(std::io::Error::other)?;
            std::fs::write(self.opts.out.join("results.json"), json + "\n")
        });
        if let Err(e) = saved {
            eprintln!("could not save the results so far: {e}");
        }
    }

    /// Run `o` and keep the result (or the failure).
    fn run(
        &mut self,
        entry: &Entry,
        o: RunOptions,
        kind: ServerKind,
        fraction: Option<f64>,
        variant: Option<&str>,
    ) -> Option<RunReport> {
        let what = match (o.rate, variant) {
            (Some(rate), _) => format!("at {rate:.0}/s"),
            (None, Some(v)) => format!("({v}, {} keys, pipeline {})", o.params.keys, o.pipeline),
            (None, None) => format!("(pipeline {})", o.pipeline),
        };
        let (rt, layout) = match &self.pinned_rt {
            Some(rt) => (rt, Layout::Pinned),
            None => (self.rt, Layout::Shared),
        };
        match rt.block_on(entry.run(o)) {
            Ok(r) => {
                summarize(&r);
                self.results.runs.push(SuiteRun {
                    server: kind,
                    fraction,
                    report: r.clone(),
                    variant: variant.map(str::to_string),
                    layout,
                    load_average: load_average().parse().ok(),
                });
                Some(r)
            }
            Err(e) => {
                // A pipeline's failures list every command: keep the start.
                let mut e = format!("{e:#}");
                if e.len() > 600 {
                    let cut = (0..=600)
                        .rev()
                        .find(|&i| e.is_char_boundary(i))
                        .unwrap_or(0);
                    e.truncate(cut);
                    e.push_str(" …");
                }
                eprintln!("   failed: {e}");
                self.results.failures.push(format!(
                    "{} on {} {what}: {e}",
                    entry.name,
                    kind.label()
                ));
                None
            }
        }
    }

    /// Start a fresh `kind` with `shards` (rushd), `pin`ned or not.
    fn start(
        &self,
        kind: ServerKind,
        shards: Option<usize>,
        pin: Option<&Pin>,
    ) -> anyhow::Result<Server> {
        self.start_with(kind, shards, pin, &[])
    }

    /// [`Suite::start`], giving rushd `rushd_args` too (a phase's own
    /// settings, such as the scaling phase's memory budget).
    fn start_with(
        &self,
        kind: ServerKind,
        shards: Option<usize>,
        pin: Option<&Pin>,
        rushd_args: &[String],
    ) -> anyhow::Result<Server> {
        let on = pin.map(|p| (p.taskset.as_path(), p.server_cpu));
        let server = Server::start(kind, self.opts, shards, &self.data_parent, on, rushd_args)
            .with_context(|| format!("starting {}", kind.label()))?;
        let args = match kind {
            ServerKind::Rush if !rushd_args.is_empty() => format!(" ({})", rushd_args.join(" ")),
            _ => String::new(),
        };
        match pin {
            None => eprintln!("== {} on {}{args} ==", kind.label(), server.target),
            Some(p) => eprintln!(
                "== {} on {}, pinned to CPU {} (client on CPU {}) ==",
                kind.label(),
                server.target,
                p.server_cpu,
                p.client_cpu
            ),
        }
        Ok(server)
    }
}

/// A closed-loop run of `entry` against `server` at `pipeline` for the
/// suite's duration, with the suite's data options; a workload that reads
/// data reads the preloaded set, and loads what is missing first.
fn base_options(
    opts: &SuiteOptions,
    kind: ServerKind,
    server: &Server,
    entry: &Entry,
    pipeline: usize,
) -> RunOptions {
    let mut o = RunOptions::new(server.target.clone());
    o.connections = opts.connections;
    o.pipeline = pipeline;
    o.stop = Stop::Duration(opts.duration);
    o.params = Params::new(opts.keys, opts.dist, opts.value_size);
    o.preload(entry.reads_preloaded);
    o.progress = true;
    o.label = Some(kind.label().into());
    o.durability = Some(kind.durability().into());
    o.metrics = server.http.iter().cloned().collect();
    o.server_pid = Some(server.child.id());
    o
}

fn summarize(r: &RunReport) {
    let l = &r.latency;
    eprintln!(
        "   {:>10.0} ops/s  p50 {:.3} ms  p99 {:.3} ms  p99.9 {:.3} ms  errors {}",
        r.throughput,
        l.p50_us / 1000.0,
        l.p99_us / 1000.0,
        l.p999_us / 1000.0,
        r.errors
    );
    for (kind, stat) in &r.error_types {
        eprintln!("   error {kind} × {}: {}", stat.count, stat.example);
    }
}
