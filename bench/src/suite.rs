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

use crate::dist::Dist;
use crate::driver::{RunOptions, Stop};
use crate::report;
use crate::stats::RunReport;
use crate::target::{Side, Target};
use crate::workload::{Entry, Params, WORKLOADS};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The server running now (pid and data directory), for the signal handler:
/// an interrupted suite kills it and removes its data before exiting.
static ACTIVE: Mutex<Option<(u32, PathBuf)>> = Mutex::new(None);

/// On SIGINT/SIGTERM: kill the running server, remove its data directory,
/// exit 130. (Drop would not run: the signal ends the process.)
fn install_signal_handler(rt: &tokio::runtime::Runtime) {
    rt.spawn(async {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        eprintln!("rush-bench suite: interrupted; stopping the server");
        if let Some((pid, dir)) = ACTIVE.lock().expect("not poisoned").take() {
            // SAFETY: kill/waitpid on our own child.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
                libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
            }
            let _ = std::fs::remove_dir_all(dir);
        }
        std::process::exit(130);
    });
}

/// The servers the suite compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerKind {
    /// rushd with its defaults: generic key writes synced before the answer.
    Rush,
    /// Redis, AOF, `appendfsync everysec`.
    RedisEverysec,
    /// Redis, AOF, `appendfsync always`.
    RedisAlways,
}

impl ServerKind {
    pub const ALL: [ServerKind; 3] = [
        ServerKind::Rush,
        ServerKind::RedisEverysec,
        ServerKind::RedisAlways,
    ];

    pub fn key(self) -> &'static str {
        match self {
            ServerKind::Rush => "rush",
            ServerKind::RedisEverysec => "redis-everysec",
            ServerKind::RedisAlways => "redis-always",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            ServerKind::Rush => "Rush",
            ServerKind::RedisEverysec => "Redis (AOF everysec)",
            ServerKind::RedisAlways => "Redis (AOF always)",
        }
    }

    /// What an acknowledged write means on this server.
    pub fn durability(self) -> &'static str {
        match self {
            ServerKind::Rush => "fsynced before the ack (group commit)",
            ServerKind::RedisEverysec => {
                "in the AOF, fsynced within ~1 s (the last second can be lost)"
            }
            ServerKind::RedisAlways => "fsynced before the ack (appendfsync always)",
        }
    }

    pub fn side(self) -> Side {
        match self {
            ServerKind::Rush => Side::Rush,
            _ => Side::Redis,
        }
    }
}

impl std::str::FromStr for ServerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ServerKind::ALL
            .into_iter()
            .find(|k| k.key() == s)
            .ok_or_else(|| format!("unknown server {s:?}: rush, redis-everysec or redis-always"))
    }
}

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
    /// One open-loop step at half the peak for workloads that are not swept
    /// (the latency target is stated at half the peak for every workload).
    pub half_peak: bool,
    /// Key counts of the scaling rows (links-resolve and lookups, with the
    /// footprint per link); empty: no scaling phase.
    pub scale_keys: Vec<u64>,
    /// Servers the scaling phase runs on.
    pub scale_servers: Vec<ServerKind>,
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
            one_shard: true,
            pin: false,
        }
    }
}

/// How the server under test and the client shared the machine's cores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// Client and server on every core, scheduled as the kernel likes (and
    /// the layout of results written before layouts were recorded).
    #[default]
    Shared,
    /// The server on one CPU, the client on another ([`Pinning`] says which).
    Pinned,
}

/// One measured run of the suite.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteRun {
    pub server: ServerKind,
    /// Open-loop step: the fraction of the closed-loop peak offered.
    pub fraction: Option<f64>,
    pub report: RunReport,
    /// `None`: the main matrix; [`VARIANT_SCALING`], [`VARIANT_ONE_SHARD`]
    /// or [`VARIANT_PINNED`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The cores' layout during the run (absent in older results: shared).
    #[serde(default)]
    pub layout: Layout,
    /// The machine's 1-minute load average when the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_average: Option<f64>,
}

impl SuiteRun {
    /// Part of the main matrix (phase 1, shared layout): the runs the
    /// headline, the per-workload tables and the charts are made of.
    pub fn main_matrix(&self) -> bool {
        self.variant.is_none() && self.layout == Layout::Shared
    }
}

/// The CPUs of the pinned layout (`--pin`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinning {
    /// The server under test ran on this CPU alone (`taskset -c`).
    pub server_cpu: usize,
    /// The bench client ran on this CPU alone.
    pub client_cpu: usize,
    /// The client's runtime threads in the pinned runs.
    pub client_threads: usize,
    /// rushd's `--shards` in the pinned runs.
    pub rush_shards: usize,
}

/// What a server holds in memory and on disk for a number of links.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Footprint {
    pub server: ServerKind,
    /// Links stored (0: the empty server).
    pub links: u64,
    /// Redis DBSIZE (the links plus a counter).
    pub keys: Option<u64>,
    /// Resident memory of the process (VmRSS).
    pub rss_bytes: u64,
    pub rss_empty_bytes: u64,
    /// Bytes in the data directory (Rush: after a full compaction; Redis: its AOF).
    pub disk_bytes: u64,
    pub disk_empty_bytes: u64,
    /// Redis `INFO memory` used_memory.
    pub used_memory: Option<u64>,
    pub used_memory_empty: Option<u64>,
}

/// The machine the suite ran on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    /// 1-minute load average when the suite started (others' work shows here).
    pub load_average: String,
    /// Filesystem type of the servers' data directories.
    pub data_fs: String,
}

/// Everything the suite knows; `results.json`, and the report's input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteResults {
    pub mode: String,
    pub generated: String,
    pub machine: Machine,
    pub rushd: String,
    /// `release` or `debug` (from the binary's path).
    pub rushd_profile: String,
    pub rush_shards: String,
    pub redis_version: String,
    pub connections: usize,
    pub client_threads: usize,
    pub duration_secs: f64,
    pub sweep_secs: f64,
    pub keys: u64,
    pub dist: String,
    pub value_size: usize,
    pub runs: Vec<SuiteRun>,
    /// Runs that could not be made at all.
    pub failures: Vec<String>,
    /// redis-benchmark on the same Redis servers, to show how close
    /// rush-bench's Redis side comes to Redis's own C client.
    #[serde(default)]
    pub calibration: Vec<Calibration>,
    /// Memory and disk per stored link (scaling phase).
    #[serde(default)]
    pub footprint: Vec<Footprint>,
    /// 1-minute load average when the suite ended.
    #[serde(default)]
    pub load_average_end: String,
    /// How long the whole suite ran.
    #[serde(default)]
    pub suite_secs: f64,
    /// The pinned layout's CPUs, when the suite ran it (`--pin`); its runs
    /// have [`Layout::Pinned`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Pinning>,
}

/// One redis-benchmark figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Calibration {
    pub server: ServerKind,
    /// The workload whose command redis-benchmark ran (`kv-set` → SET).
    pub workload: String,
    pub connections: usize,
    pub pipeline: usize,
    pub throughput: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl SuiteResults {
    /// Operations that failed, over all runs.
    pub fn error_count(&self) -> u64 {
        self.runs.iter().map(|r| r.report.errors).sum()
    }
}

/// Run the suite and write the report; returns the results (check
/// [`SuiteResults::error_count`] and `failures`).
///
/// 1. **Every workload on every server**: closed loop at each pipeline, then
///    open-loop steps (the sweep for sweep workloads; one step at half the
///    peak for the others, for the latency target).
/// 2. **Scaling and footprint** (fresh servers, `scale_servers`): links
///    preloaded to each of `scale_keys` with `links-resolve` run at each and
///    the memory and disk per link measured; then `lookups` at each size.
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
    let data_parent = data_parent(opts.data_dir.as_deref())?;
    install_signal_handler(rt);
    let started = Instant::now();
    let results = SuiteResults {
        mode: if opts.quick { "quick" } else { "full" }.into(),
        generated: report::utc_now(),
        machine: machine(&data_parent),
        rushd: opts.rushd.display().to_string(),
        rushd_profile: profile_of(&opts.rushd),
        rush_shards: match opts.shards {
            Some(n) => n.to_string(),
            None => format!(
                "{} (one per core)",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            ),
        },
        redis_version: if opts.servers.iter().any(|s| s.side() == Side::Redis) {
            redis_version(&opts.redis_server)?
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
        load_average_end: String::new(),
        suite_secs: 0.0,
        pinned: None,
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

/// Which part of the suite a run belongs to (`None`: the main matrix).
pub const VARIANT_SCALING: &str = "scaling";
pub const VARIANT_ONE_SHARD: &str = "1-shard";
/// Phase 4's runs (with [`Layout::Pinned`]).
pub const VARIANT_PINNED: &str = "pinned";

/// Client runtime threads in the pinned layout: the client has one core.
pub const PINNED_CLIENT_THREADS: usize = 1;

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

    fn start(
        &self,
        kind: ServerKind,
        shards: Option<usize>,
        pin: Option<&Pin>,
    ) -> anyhow::Result<Server> {
        let on = pin.map(|p| (p.taskset.as_path(), p.server_cpu));
        let server = Server::start(kind, self.opts, shards, &self.data_parent, on)
            .with_context(|| format!("starting {}", kind.label()))?;
        match pin {
            None => eprintln!("== {} on {} ==", kind.label(), server.target),
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

    /// Phase 1: every workload against `kind`.
    fn every_workload(&mut self, kind: ServerKind, entries: &[&Entry]) -> anyhow::Result<()> {
        let server = self.start(kind, self.opts.shards, None)?;
        let opts = self.opts;
        for entry in entries {
            let mut loaded = false;
            let mut peak: Option<f64> = None;
            for &pipeline in &opts.pipelines {
                let mut o = base_options(opts, kind, &server, pipeline);
                o.params.preload = entry.reads_preloaded;
                o.load = entry.reads_preloaded && !loaded;
                o.stop = Stop::Duration(opts.duration);
                eprintln!(
                    "-- {} · {} · {} in flight per connection",
                    entry.name,
                    kind.key(),
                    pipeline
                );
                if let Some(r) = self.run(entry, o, kind, None, None) {
                    loaded |= entry.reads_preloaded;
                    if pipeline == self.top {
                        peak = Some(r.throughput);
                    }
                }
            }
            let Some(peak) = peak else { continue };
            let steps: &[f64] = if entry.sweep {
                &opts.sweep
            } else if opts.half_peak {
                &[0.5]
            } else {
                &[]
            };
            for &f in steps {
                let rate = (peak * f).max(1.0);
                let mut o = base_options(opts, kind, &server, self.top);
                o.params.preload = entry.reads_preloaded;
                o.rate = Some(rate);
                o.stop = Stop::Duration(opts.sweep_duration);
                eprintln!(
                    "-- {} · {} · open loop at {:.0} ops/s ({:.0}% of peak)",
                    entry.name,
                    kind.key(),
                    rate,
                    f * 100.0
                );
                self.run(entry, o, kind, Some(f), None);
            }
        }
        if opts.calibrate && kind.side() == Side::Redis {
            calibrate(
                opts,
                kind,
                &server.target,
                self.top,
                entries,
                &mut self.results,
            );
        }
        server.stop()
    }

    /// Phase 2: links-resolve at each size (with the footprint per link),
    /// then lookups at each size, on a fresh `kind`.
    fn scaling(&mut self, kind: ServerKind, entries: &[&Entry]) -> anyhow::Result<()> {
        let opts = self.opts;
        let wanted = |name: &str| entries.iter().find(|e| e.name == name).copied();
        let resolve = wanted("links-resolve");
        let lookups = wanted("lookups");
        if resolve.is_none() && lookups.is_none() {
            return Ok(());
        }
        let server = self.start(kind, self.opts.shards, None)?;
        let empty = self.measure(&server, kind, 0, None)?;
        let mut sizes = opts.scale_keys.clone();
        sizes.sort_unstable();
        sizes.dedup();
        for (name, entry) in [("links-resolve", resolve), ("lookups", lookups)] {
            let Some(entry) = entry else { continue };
            for &keys in &sizes {
                let mut o = base_options(opts, kind, &server, self.top);
                o.params.keys = keys;
                o.params.preload = true;
                o.load = true;
                o.stop = Stop::Duration(opts.duration);
                eprintln!(
                    "-- {name} · {} · {} keys (scaling)",
                    kind.key(),
                    crate::driver::group(keys)
                );
                let ran = self.run(entry, o, kind, None, Some(VARIANT_SCALING));
                if ran.is_some() && name == "links-resolve" {
                    match self.measure(&server, kind, keys, Some(&empty)) {
                        Ok(f) => {
                            eprintln!(
                                "   footprint: {} links, RSS {:.0} MiB, disk {:.0} MiB{}",
                                keys,
                                f.rss_bytes as f64 / 1048576.0,
                                f.disk_bytes as f64 / 1048576.0,
                                f.used_memory.map_or(String::new(), |u| format!(
                                    ", used_memory {:.0} MiB",
                                    u as f64 / 1048576.0
                                ))
                            );
                            self.results.footprint.push(f);
                        }
                        Err(e) => self.results.failures.push(format!(
                            "footprint of {} at {keys} links: {e:#}",
                            kind.label()
                        )),
                    }
                }
            }
        }
        server.stop()
    }

    /// Memory and disk of `server` holding `links` links (after a
    /// compaction on Rush, so the disk figure is settled data, not WAL and
    /// memtables).
    fn measure(
        &self,
        server: &Server,
        kind: ServerKind,
        links: u64,
        empty: Option<&Footprint>,
    ) -> anyhow::Result<Footprint> {
        let rss_bytes = rss_of(server.child.id())?;
        let (used_memory, keys) = match kind.side() {
            Side::Redis => {
                let (used, keys) = self.rt.block_on(redis_memory(&server.target))?;
                (Some(used), Some(keys))
            }
            Side::Rush => {
                self.rt.block_on(async {
                    let c = rush_client::Client::connect(&server.target.addr).await?;
                    c.compact().await?;
                    anyhow::Ok(())
                })?;
                (None, None)
            }
        };
        Ok(Footprint {
            server: kind,
            links,
            keys,
            rss_bytes,
            rss_empty_bytes: empty.map_or(rss_bytes, |e| e.rss_bytes),
            disk_bytes: dir_bytes(server.dir.path()),
            disk_empty_bytes: empty.map_or(0, |e| e.disk_bytes),
            used_memory,
            used_memory_empty: empty.and_then(|e| e.used_memory).or(used_memory),
        })
    }

    /// Phase 3: every workload once on a one-shard rushd.
    fn one_shard(&mut self, entries: &[&Entry]) -> anyhow::Result<()> {
        let kind = ServerKind::Rush;
        let server = self.start(kind, Some(1), None)?;
        let opts = self.opts;
        for entry in entries {
            let mut o = base_options(opts, kind, &server, self.top);
            o.params.preload = entry.reads_preloaded;
            o.load = entry.reads_preloaded;
            o.stop = Stop::Duration(opts.duration);
            eprintln!("-- {} · rush · 1 shard", entry.name);
            self.run(entry, o, kind, None, Some(VARIANT_ONE_SHARD));
        }
        server.stop()
    }

    /// Phase 4: the headline closed-loop runs again in the pinned layout.
    /// This whole process (the client) is moved to the client's CPU for the
    /// phase and back to its allowed set after it.
    fn pinned(&mut self, entries: &[&Entry], pin: &Pin) -> anyhow::Result<()> {
        self.results.pinned = Some(Pinning {
            server_cpu: pin.server_cpu,
            client_cpu: pin.client_cpu,
            client_threads: PINNED_CLIENT_THREADS,
            rush_shards: 1,
        });
        affinity::set_process(&[pin.client_cpu])
            .with_context(|| format!("pinning the client to CPU {}", pin.client_cpu))?;
        let result = self.pinned_runs(entries, pin);
        // The runtime's threads end before the process is let go again.
        self.pinned_rt = None;
        if let Err(e) = affinity::set_process(&pin.allowed) {
            eprintln!("could not give the client back CPUs {:?}: {e}", pin.allowed);
        }
        self.checkpoint();
        result
    }

    fn pinned_runs(&mut self, entries: &[&Entry], pin: &Pin) -> anyhow::Result<()> {
        let here = affinity::allowed(0).context("reading the client's CPU affinity")?;
        anyhow::ensure!(
            here == [pin.client_cpu],
            "the client should run on CPU {} only, but may run on {here:?}",
            pin.client_cpu
        );
        // Built now, from a pinned thread: its threads inherit the CPU.
        self.pinned_rt = Some(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(PINNED_CLIENT_THREADS)
                .thread_name("rush-bench-pinned")
                .enable_all()
                .build()
                .context("starting the pinned client's runtime")?,
        );
        let opts = self.opts;
        for &kind in &opts.servers {
            // One shard per core, and the server has one.
            let shards = (kind == ServerKind::Rush).then_some(1);
            let server = self.start(kind, shards, Some(pin))?;
            let on = affinity::allowed(server.child.id() as i32)
                .with_context(|| format!("reading {}'s CPU affinity", server.name))?;
            anyhow::ensure!(
                on == [pin.server_cpu],
                "{} should run on CPU {} only, but may run on {on:?}",
                server.name,
                pin.server_cpu
            );
            for entry in entries {
                let mut o = base_options(opts, kind, &server, self.top);
                o.params.preload = entry.reads_preloaded;
                o.load = entry.reads_preloaded;
                o.stop = Stop::Duration(opts.duration);
                eprintln!(
                    "-- {} · {} · {} in flight per connection · pinned (server CPU {}, client CPU {})",
                    entry.name,
                    kind.key(),
                    self.top,
                    pin.server_cpu,
                    pin.client_cpu
                );
                self.run(entry, o, kind, None, Some(VARIANT_PINNED));
            }
            server.stop()?;
            self.checkpoint();
        }
        Ok(())
    }
}

/// The pinned layout's CPUs and the tool that puts a server on one.
#[derive(Debug, Clone)]
struct Pin {
    taskset: PathBuf,
    server_cpu: usize,
    client_cpu: usize,
    /// This process's allowed CPUs before phase 4 (given back after it).
    allowed: Vec<usize>,
}

impl Pin {
    /// The first two CPUs this process may run on, and `taskset`; an error
    /// saying what is missing when either is.
    fn resolve() -> anyhow::Result<Pin> {
        let allowed = affinity::allowed(0).context("reading this process's CPU affinity")?;
        let (server_cpu, client_cpu) = pin_cpus(&allowed)?;
        let taskset = find_in_path("taskset").context(
            "--pin needs taskset, which is not on PATH: it is in the util-linux package \
             (apt-get install util-linux)",
        )?;
        Ok(Pin {
            taskset,
            server_cpu,
            client_cpu,
            allowed,
        })
    }
}

/// The server's and the client's CPU: the first two of `allowed`.
fn pin_cpus(allowed: &[usize]) -> anyhow::Result<(usize, usize)> {
    let mut cpus = allowed.to_vec();
    cpus.sort_unstable();
    cpus.dedup();
    match cpus[..] {
        [server, client, ..] => Ok((server, client)),
        _ => bail!(
            "--pin needs two CPUs (one for the server, one for the client), but this process \
             may run on {} ({})",
            match cpus.len() {
                1 => "only one".to_string(),
                n => n.to_string(),
            },
            if cpus.is_empty() {
                "none".to_string()
            } else {
                format!(
                    "CPU {}",
                    cpus.iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ),
    }
}

/// `name` in a directory of `$PATH`.
fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// CPU affinity of threads (`sched_getaffinity`/`sched_setaffinity`).
mod affinity {
    use std::collections::HashSet;
    use std::io;
    use std::mem::size_of;

    /// CPUs a `cpu_set_t` can name.
    const CPUS: usize = 8 * size_of::<libc::cpu_set_t>();

    /// The CPUs thread `tid` may run on (0: the calling thread; a process
    /// id names its main thread), ascending.
    pub fn allowed(tid: i32) -> io::Result<Vec<usize>> {
        // SAFETY: an all-zero cpu_set_t is the empty set; the call writes
        // at most size_of::<cpu_set_t>() bytes into it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        if unsafe { libc::sched_getaffinity(tid, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: CPU_ISSET reads the set we own, `c` below its size.
        Ok((0..CPUS)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect())
    }

    /// Let thread `tid` (0: the calling thread) run on `cpus` only.
    pub fn set(tid: i32, cpus: &[usize]) -> io::Result<()> {
        // SAFETY: as in `allowed`; CPU_SET writes into the set we own.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            if c >= CPUS {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("CPU {c} is beyond what a cpu_set_t names"),
                ));
            }
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        if unsafe { libc::sched_setaffinity(tid, size_of::<libc::cpu_set_t>(), &set) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Every thread of this process onto `cpus`. A thread started meanwhile
    /// takes its creator's mask, which may be the old one, so passes repeat
    /// until one finds no thread it had not set; threads started after that
    /// are started by pinned threads.
    pub fn set_process(cpus: &[usize]) -> io::Result<()> {
        let mut done = HashSet::new();
        loop {
            let mut new = false;
            for entry in std::fs::read_dir("/proc/self/task")? {
                let name = entry?.file_name();
                let Some(tid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
                    continue;
                };
                if !done.insert(tid) {
                    continue;
                }
                new = true;
                match set(tid, cpus) {
                    // ESRCH: the thread ended meanwhile.
                    Err(e) if e.raw_os_error() != Some(libc::ESRCH) => return Err(e),
                    _ => {}
                }
            }
            if !new {
                return Ok(());
            }
        }
    }
}

fn base_options(
    opts: &SuiteOptions,
    kind: ServerKind,
    server: &Server,
    pipeline: usize,
) -> RunOptions {
    let mut o = RunOptions::new(server.target.clone());
    o.connections = opts.connections;
    o.pipeline = pipeline;
    o.params = Params {
        keys: opts.keys,
        dist: opts.dist,
        value_size: opts.value_size,
        preload: false,
        ..Params::default()
    };
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
fn calibrate(
    opts: &SuiteOptions,
    kind: ServerKind,
    target: &Target,
    pipeline: usize,
    entries: &[&crate::workload::Entry],
    results: &mut SuiteResults,
) {
    let bin = opts.redis_server.with_file_name("redis-benchmark");
    let bin = if bin.is_file() {
        bin
    } else {
        PathBuf::from("redis-benchmark")
    };
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
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let cols: Vec<&str> = line.split(',').map(|c| c.trim_matches('"')).collect();
        let Some((workload, _)) = tests.iter().find(|(_, t)| cols.first() == Some(t)) else {
            continue;
        };
        let num = |i: usize| cols.get(i).and_then(|v| v.parse::<f64>().ok());
        if let (Some(rps), Some(p50), Some(p99)) = (num(1), num(4), num(6)) {
            results.calibration.push(Calibration {
                server: kind,
                workload: workload.to_string(),
                connections: opts.connections,
                pipeline,
                throughput: rps,
                p50_ms: p50,
                p99_ms: p99,
            });
        }
    }
}

// ── servers ─────────────────────────────────────────────────────────────

/// A server process on loopback with its own temporary data directory.
/// Dropping it kills the process; [`Server::stop`] stops it gracefully.
struct Server {
    child: Child,
    target: Target,
    /// rushd's HTTP listener (`/metrics`).
    http: Option<String>,
    name: &'static str,
    /// Removed when the server is dropped (after the process is gone).
    dir: tempfile::TempDir,
}

impl Server {
    /// `on`: start it under `taskset -c CPU` (the taskset binary and the CPU).
    fn start(
        kind: ServerKind,
        opts: &SuiteOptions,
        shards: Option<usize>,
        data_parent: &Path,
        on: Option<(&Path, usize)>,
    ) -> anyhow::Result<Server> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("rush-bench-{}-", kind.key()))
            .tempdir_in(data_parent)
            .context("creating a data directory")?;
        let server = match kind {
            ServerKind::Rush => start_rushd(server_command(&opts.rushd, on), shards, dir),
            ServerKind::RedisEverysec => {
                start_redis(server_command(&opts.redis_server, on), "everysec", dir)
            }
            ServerKind::RedisAlways => {
                start_redis(server_command(&opts.redis_server, on), "always", dir)
            }
        }?;
        *ACTIVE.lock().expect("not poisoned") =
            Some((server.child.id(), server.dir.path().to_path_buf()));
        Ok(server)
    }

    /// SIGTERM, then wait (SIGKILL after 20 s).
    fn stop(mut self) -> anyhow::Result<()> {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    eprintln!("{} exited with {status}", self.name);
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                eprintln!("{} did not stop within 20 s: killing it", self.name);
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        ACTIVE.lock().expect("not poisoned").take();
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Spawn `cmd` so that it is killed if this process dies (PR_SET_PDEATHSIG):
/// no server outlives an interrupted suite.
fn spawn_tied(cmd: &mut Command) -> std::io::Result<Child> {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn()
}

/// The command that runs server binary `bin`: the binary itself, or
/// `taskset -c CPU bin` (taskset sets the mask and execs it: the same pid,
/// and every thread the server starts inherits the CPU).
fn server_command(bin: &Path, on: Option<(&Path, usize)>) -> Command {
    match on {
        None => Command::new(bin),
        Some((taskset, cpu)) => {
            let mut cmd = Command::new(taskset);
            cmd.arg("-c").arg(cpu.to_string()).arg(bin);
            cmd
        }
    }
}

/// The program a server command runs, for messages.
fn program(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .take_while(|a| !a.to_string_lossy().starts_with("--"))
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn start_rushd(
    mut cmd: Command,
    shards: Option<usize>,
    dir: tempfile::TempDir,
) -> anyhow::Result<Server> {
    cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--log",
        "warn",
        "--data",
    ])
    .arg(dir.path())
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    if let Some(n) = shards {
        cmd.arg("--shards").arg(n.to_string());
    }
    let mut child = spawn_tied(&mut cmd).with_context(|| format!("running {}", program(&cmd)))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    // The first line is "rushd serving ADDR http ADDR"; later ones (logs)
    // are passed on, so the pipe never fills.
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
        if let Some(first) = lines.next() {
            let _ = tx.send(first);
        }
        for line in lines {
            eprintln!("rushd: {line}");
        }
    });
    let line = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(l) => l,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("rushd did not print its serving line within 60 s");
        }
    };
    let parts: Vec<&str> = line.split_whitespace().collect();
    if parts.get(1) != Some(&"serving") || parts.len() < 3 {
        let _ = child.kill();
        let _ = child.wait();
        bail!("unexpected first line from rushd: {line:?}");
    }
    let target: Target = format!("rush://{}", parts[2])
        .parse()
        .map_err(|e: String| anyhow::anyhow!(e))?;
    let http = match (parts.get(3), parts.get(4)) {
        (Some(&"http"), Some(a)) if *a != "off" => Some(a.to_string()),
        _ => None,
    };
    Ok(Server {
        child,
        target,
        http,
        name: "rushd",
        dir,
    })
}

fn start_redis(mut cmd: Command, fsync: &str, dir: tempfile::TempDir) -> anyhow::Result<Server> {
    // A free loopback port (the small race with other processes is harmless:
    // the readiness check below would fail loudly).
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let log = dir.path().join("redis.log");
    cmd.arg("--port")
        .arg(port.to_string())
        .args([
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
        ])
        .args(["--appendonly", "yes", "--appendfsync", fsync])
        // RDB snapshots off: the AOF is the durability under test, and a
        // background save mid-run would only add noise.
        .args(["--save", ""])
        .arg("--dir")
        .arg(dir.path())
        .arg("--logfile")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let mut child = spawn_tied(&mut cmd).with_context(|| format!("running {}", program(&cmd)))?;
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if redis_ping(&addr) {
            break;
        }
        if let Some(status) = child.try_wait()? {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            bail!("redis-server exited with {status}:\n{tail}");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("redis-server did not answer PING on {addr} within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Server {
        child,
        target: format!("redis://{addr}")
            .parse()
            .map_err(|e: String| anyhow::anyhow!(e))?,
        http: None,
        name: "redis-server",
        dir,
    })
}

/// True when a Redis on `addr` answers PING (and has loaded its data).
fn redis_ping(addr: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

fn redis_version(bin: &Path) -> anyhow::Result<String> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .with_context(|| {
            format!(
                "running {} --version (is redis-server installed?)",
                bin.display()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or(text.trim())
        .to_string())
}

fn profile_of(bin: &Path) -> String {
    let parts: Vec<_> = bin
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    if parts.iter().any(|p| p == "release") {
        "release".into()
    } else if parts.iter().any(|p| p == "debug") {
        "debug".into()
    } else {
        "unknown".into()
    }
}

// ── footprint ───────────────────────────────────────────────────────────

/// Resident memory of process `pid` (VmRSS), bytes.
fn rss_of(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .context("no VmRSS line")
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Redis `INFO memory` used_memory and DBSIZE.
async fn redis_memory(target: &Target) -> anyhow::Result<(u64, u64)> {
    let client = redis::Client::open(format!("redis://{}/", target.addr))?;
    let mut c = client.get_multiplexed_async_connection().await?;
    let info: String = redis::cmd("INFO").arg("memory").query_async(&mut c).await?;
    let used = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")?;
    let keys: u64 = redis::cmd("DBSIZE").query_async(&mut c).await?;
    Ok((used, keys))
}

/// The 1-minute load average now.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

// ── the machine ─────────────────────────────────────────────────────────

/// Where the servers' data directories go: the given parent, else the
/// system temp directory unless it is in memory (tmpfs would make every
/// fsync free and the durability comparison meaningless), else `.`.
fn data_parent(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        std::fs::create_dir_all(p)?;
        return Ok(p.to_path_buf());
    }
    let tmp = std::env::temp_dir();
    if fs_type(&tmp) == "tmpfs" {
        eprintln!(
            "{} is tmpfs (fsync would be free): keeping server data in .",
            tmp.display()
        );
        return Ok(PathBuf::from("."));
    }
    Ok(tmp)
}

fn fs_type(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: statfs writes into the zeroed struct we own.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return "unknown".into();
    }
    match st.f_type as i64 {
        0xEF53 => "ext4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x794C_7630 => "overlayfs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        other => format!("0x{other:x}"),
    }
}

/// Facts about this machine for the top of the report.
pub fn machine(data_parent: &Path) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_gib: mem_kib / (1024.0 * 1024.0),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        load_average: load_average(),
        data_fs: fs_type(data_parent),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_kinds_round_trip() {
        for k in ServerKind::ALL {
            assert_eq!(k.key().parse::<ServerKind>(), Ok(k));
        }
        assert!("mysql".parse::<ServerKind>().is_err());
    }

    #[test]
    fn profile_from_path() {
        assert_eq!(profile_of(Path::new("target/release/rushd")), "release");
        assert_eq!(profile_of(Path::new("/x/target/debug/rushd")), "debug");
        assert_eq!(profile_of(Path::new("/usr/bin/rushd")), "unknown");
    }

    #[test]
    fn pinned_cpus_are_the_first_two_allowed() {
        assert_eq!(pin_cpus(&[0, 1]).unwrap(), (0, 1));
        // Not machine-specific: whatever the allowed set is, its first two.
        assert_eq!(pin_cpus(&[3, 5, 7]).unwrap(), (3, 5));
        assert_eq!(pin_cpus(&[9, 2, 4]).unwrap(), (2, 4));
        let one = pin_cpus(&[2]).unwrap_err().to_string();
        assert!(one.contains("needs two CPUs"), "{one}");
        assert!(one.contains("only one (CPU 2)"), "{one}");
        assert!(pin_cpus(&[]).is_err());
    }

    #[test]
    fn pinned_servers_start_under_taskset() {
        let plain = server_command(Path::new("/b/rushd"), None);
        assert_eq!(plain.get_program(), "/b/rushd");
        assert_eq!(plain.get_args().count(), 0);
        let mut pinned = server_command(Path::new("/b/rushd"), Some((Path::new("/t/taskset"), 3)));
        assert_eq!(pinned.get_program(), "/t/taskset");
        let args: Vec<_> = pinned.get_args().collect();
        assert_eq!(args, ["-c", "3", "/b/rushd"]);
        pinned.args(["--listen", "127.0.0.1:0"]);
        assert_eq!(program(&pinned), "/t/taskset -c 3 /b/rushd");
    }

    #[test]
    fn affinity_is_read_and_set_per_thread() {
        let all = affinity::allowed(0).expect("sched_getaffinity");
        assert!(!all.is_empty());
        assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
        // Pin a thread of our own; the others keep their mask.
        let first = all[0];
        let pinned = std::thread::spawn(move || {
            affinity::set(0, &[first]).expect("sched_setaffinity");
            affinity::allowed(0).expect("sched_getaffinity")
        })
        .join()
        .unwrap();
        assert_eq!(pinned, [first]);
        assert_eq!(affinity::allowed(0).unwrap(), all);
        assert!(affinity::set(0, &[1 << 20]).is_err());
        // The whole process onto the set it already has: a no-op that works.
        affinity::set_process(&all).expect("every thread");
        assert_eq!(affinity::allowed(0).unwrap(), all);
    }

    #[test]
    fn taskset_is_looked_up_on_path() {
        assert!(find_in_path("sh").is_some());
        assert!(find_in_path("no-such-tool-rush-bench").is_none());
    }

    #[test]
    fn runs_without_a_layout_are_shared() {
        let report = serde_json::to_value(RunReport {
            workload: "kv-set".into(),
            side: "rush".into(),
            target: "rush://127.0.0.1:1".into(),
            label: None,
            durability: None,
            mode: "closed".into(),
            connections: 1,
            pipeline: 1,
            rate: None,
            keys: 1,
            dist: "uniform".into(),
            value_size: 1,
            preloaded: 0,
            preload_secs: 0.0,
            ok: 1,
            misses: 0,
            denied: 0,
            errors: 0,
            error_types: Default::default(),
            elapsed_secs: 1.0,
            throughput: 1.0,
            latency: crate::stats::Latency {
                min_us: 1.0,
                mean_us: 1.0,
                p50_us: 1.0,
                p90_us: 1.0,
                p99_us: 1.0,
                p999_us: 1.0,
                max_us: 1.0,
            },
            server_metrics: Default::default(),
            server_cpu_secs: None,
            client_cpu_secs: None,
        })
        .unwrap();
        let old = serde_json::json!({"server": "rush", "fraction": null, "report": report});
        let run: SuiteRun = serde_json::from_value(old).unwrap();
        assert_eq!(run.layout, Layout::Shared);
        assert!(run.main_matrix());
        let mut pinned = run.clone();
        pinned.layout = Layout::Pinned;
        pinned.variant = Some(VARIANT_PINNED.into());
        let json = serde_json::to_value(&pinned).unwrap();
        assert_eq!(json["layout"], "pinned");
        assert_eq!(json["variant"], "pinned");
        let back: SuiteRun = serde_json::from_value(json).unwrap();
        assert_eq!(back.layout, Layout::Pinned);
        assert!(!back.main_matrix());
        // A shared run says so too.
        assert_eq!(serde_json::to_value(&run).unwrap()["layout"], "shared");
    }

    #[test]
    fn machine_facts_are_read() {
        let m = machine(&std::env::temp_dir());
        assert!(m.cores >= 1);
        assert!(!m.cpu.is_empty());
    }
}
