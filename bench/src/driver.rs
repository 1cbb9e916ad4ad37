//! The load driver, shared by every workload and both sides.
//!
//! **Closed loop** (no `--rate`): C connections, each with P lanes; a lane
//! sends its next request as soon as its previous answer arrives, so C × P
//! requests are always in flight. Latency is send → answer.
//!
//! **Open loop** (`--rate R`): request k is *due* at `t0 + k/R`, whatever
//! the answers do (one schedule for the whole run, handed out in order to
//! whichever lane is free). A lane that takes a due request that is already
//! late — every lane was busy waiting for answers when it fell due — sends it
//! at once and its latency counts from the due time, not from the late send:
//! the time it spent queued behind a slow server is latency a real client
//! would have seen. This is the coordinated-omission correction (as in
//! wrk2). A lane that takes a request due in the future sleeps until then and
//! measures from its actual wake-up, so the timer's ~1 ms granularity is not
//! charged to the server. C × P bounds what is in flight; a server that can't
//! keep up falls behind the schedule, which the progress line shows.
//!
//! Each connection is driven by one task holding its lanes' futures in a
//! `FuturesUnordered`, so each connection has one histogram and no locks;
//! the connections' tallies are merged at the end.

pub(crate) mod cpu;
mod progress;
mod schedule;
mod settle;

use crate::scrape;
use crate::stats::{Latency, RunReport, Tally};
use crate::target::{Conn, Side, Target};
use crate::workload::{Params, RedisConn, RushConn, Workload};
use anyhow::{bail, Context};
use futures_util::stream::{FuturesUnordered, StreamExt};
use schedule::Schedule;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// When a run stops issuing requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After this long (requests in flight then still finish and count).
    Duration(Duration),
    /// After this many requests in all.
    Requests(u64),
}

/// How to run one workload against one target.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub target: Target,
    pub connections: usize,
    /// Requests in flight per connection.
    pub pipeline: usize,
    pub stop: Stop,
    /// Offered load in requests per second for the whole run (open loop).
    pub rate: Option<f64>,
    pub params: Params,
    /// Write what the workload reads before measuring (`--preload`; the
    /// suite loads once per server and sets only `params.preload` after).
    pub load: bool,
    /// Per-request timeout (the same on both sides).
    pub timeout: Duration,
    /// Print a progress line to stderr once a second.
    pub progress: bool,
    /// Carried into the report: what the server is, what an ack means.
    pub label: Option<String>,
    pub durability: Option<String>,
    /// HTTP addresses (`host:port`) of the Rush nodes' `/metrics`: read
    /// before and after the run for the workload's `RUSH_METRICS` and
    /// [`scrape::STALL_METRICS`].
    pub metrics: Vec<String>,
    /// The server's process id (on this machine): its CPU time over the
    /// measured run is reported, so the report can show CPU per operation.
    pub server_pid: Option<u32>,
}

impl RunOptions {
    /// Defaults for `target`: 50 connections (as redis-benchmark), no
    /// pipelining, 10 s, 100k uniform keys, 100-byte values.
    pub fn new(target: Target) -> RunOptions {
        RunOptions {
            target,
            connections: 50,
            pipeline: 1,
            stop: Stop::Duration(Duration::from_secs(10)),
            rate: None,
            params: Params::default(),
            load: false,
            timeout: Duration::from_secs(10),
            progress: false,
            label: None,
            durability: None,
            metrics: Vec::new(),
            server_pid: None,
        }
    }

    /// `--preload`: load what the workload reads before measuring (what is
    /// not there yet), and count a missing item as an error, not a miss.
    pub fn preload(&mut self, on: bool) {
        self.params.preload = on;
        self.load = on;
    }
}

/// Most connections one run opens (each holds a ~200 KB histogram).
pub const MAX_CONNECTIONS: usize = 10_000;
/// Most requests in flight per connection.
pub const MAX_PIPELINE: usize = 4096;
/// Connections used to preload (more would only contend).
const PRELOAD_CONNECTIONS: usize = 8;
/// A preload and settle longer than this opens the preload's connections
/// again for the run: well under rushd's default idle timeout (300 s).
const REOPEN_AFTER_SECS: f64 = 60.0;
/// Most operations per second a run is assumed able to reach when it has no
/// request count or rate: bounds what a workload that uses data up (shares
/// of envelopes) prepares. Far above what 2 cores do; a run that still
/// outran it would see refusals, counted and shown, not errors.
const MAX_RATE_GUESS: f64 = 1_000_000.0;

/// At most how many operations a run with these options sends.
fn max_ops(opts: &RunOptions) -> u64 {
    match (opts.stop, opts.rate) {
        (Stop::Requests(n), _) => n,
        (Stop::Duration(d), Some(r)) => (d.as_secs_f64() * r).ceil() as u64 + 1,
        (Stop::Duration(d), None) => (d.as_secs_f64() * MAX_RATE_GUESS).ceil() as u64,
    }
}

/// Run workload `W` as `opts` say and measure it.
pub async fn run<W: Workload>(opts: RunOptions) -> anyhow::Result<RunReport> {
    check(&opts)?;
    let mut params = opts.params.clone();
    params.dist = Some(params.dist.unwrap_or(W::DIST));
    params.target = opts.target.to_string();
    params.max_ops = max_ops(&opts);
    let workload = Arc::new(W::new(&params).context("setting up the workload")?);

    // The preload's connections first; the rest after it, so that none
    // sits idle through a long preload (a server closes idle connections).
    let mut conns = connect(&opts, opts.connections.min(PRELOAD_CONNECTIONS)).await?;
    let (preloaded, preload_secs, settle_secs) = prepare(&*workload, &opts, &conns).await?;
    // A long preload or settle left most of them idle a while (the settle
    // polls on one): open them again rather than find one closed mid-run.
    if preload_secs + settle_secs > REOPEN_AFTER_SECS {
        conns = connect(&opts, conns.len()).await?;
    }
    let conns = share_sockets(&opts, conns).await?;
    // The workload's series, and where a stall was (every Rush run).
    let names: Vec<&str> = W::RUSH_METRICS
        .iter()
        .chain(scrape::STALL_METRICS)
        .copied()
        .collect();
    let watch_from = if opts.target.side == Side::Rush && !opts.metrics.is_empty() {
        Some(scrape_all(&opts.metrics, &names).await?)
    } else {
        None
    };

    let m = measure(workload, &opts, conns).await?;

    let server_metrics = match &watch_from {
        Some(before) => {
            let after = scrape_all(&opts.metrics, &names).await?;
            scrape::change(before, &after)
        }
        None => Default::default(),
    };
    let total = m.total;
    Ok(RunReport {
        workload: W::NAME.to_string(),
        side: opts.target.side.name().to_string(),
        target: opts.target.to_string(),
        label: opts.label.clone(),
        durability: opts.durability.clone(),
        mode: if opts.rate.is_some() {
            "open"
        } else {
            "closed"
        }
        .to_string(),
        connections: opts.connections,
        pipeline: opts.pipeline,
        rate: opts.rate,
        keys: params.keys,
        dist: params.dist().to_string(),
        value_size: opts.params.value_size,
        preloaded,
        preload_secs,
        settle_secs,
        ok: total.ok,
        misses: total.misses,
        denied: total.denied,
        errors: total.error_count(),
        error_types: total.errors.clone(),
        elapsed_secs: m.elapsed_secs,
        throughput: total.ok as f64 / m.elapsed_secs,
        latency: Latency::from_histogram(&total.hist),
        server_metrics,
        server_cpu_secs: m.server_cpu_secs,
        server_background_secs: m.server_background_secs,
        client_cpu_secs: m.client_cpu_secs,
    })
}

/// Options a run cannot be made with, refused with the flag to fix.
fn check(opts: &RunOptions) -> anyhow::Result<()> {
    if opts.connections == 0 || opts.connections > MAX_CONNECTIONS {
        bail!("--connections must be within 1..={MAX_CONNECTIONS}");
    }
    if opts.pipeline == 0 || opts.pipeline > MAX_PIPELINE {
        bail!("--pipeline must be within 1..={MAX_PIPELINE}");
    }
    if let Some(r) = opts.rate {
        if !(r.is_finite() && r > 0.0) {
            bail!("--rate must be a positive number of requests per second");
        }
    }
    if opts.params.keys == 0 {
        bail!("--keys must be positive");
    }
    Ok(())
}

/// `n` new connections to the target.
async fn connect(opts: &RunOptions, n: usize) -> anyhow::Result<Vec<Conn>> {
    futures_util::future::try_join_all((0..n).map(|_| opts.target.connect(opts.timeout))).await
}

/// The preload (when `opts.load`) and the run's setup, on `conns`; returns
/// the items preloaded and how long that took.
async fn prepare<W: Workload>(
    workload: &W,
    opts: &RunOptions,
    conns: &[Conn],
) -> anyhow::Result<(u64, f64, f64)> {
    // The preload and the setup run on these (one side's connections).
    let rush: Vec<RushConn> = conns.iter().filter_map(Conn::rush).collect();
    let redis: Vec<RedisConn> = conns.iter().filter_map(Conn::redis).collect();
    let mut preloaded = (0, 0.0, 0.0);
    if opts.load {
        let started = Instant::now();
        let n = match opts.target.side {
            Side::Rush => workload.preload_rush(&rush).await,
            Side::Redis => workload.preload_redis(&redis).await,
        }
        .context("preloading")?;
        let secs = started.elapsed().as_secs_f64();
        if opts.progress {
            eprintln!("{}: preloaded {n} items in {secs:.1}s", W::NAME);
        }
        preloaded = (n, secs, 0.0);
    }
    if opts.load || opts.params.preload {
        // Reads are measured on a settled server, whether this run or an
        // earlier one of the suite preloaded (the suite loads once per
        // server and its later runs still owe that load's compactions).
        let waited = match (opts.target.side, rush.first(), redis.first()) {
            (Side::Rush, Some(c), _) => settle::rush(c).await,
            (Side::Redis, _, Some(c)) => settle::redis(c).await,
            _ => Ok(0.0),
        }
        .context("waiting for the server to settle after the preload")?;
        if opts.progress && waited >= 0.5 {
            eprintln!("{}: server settled in {waited:.1}s", W::NAME);
        }
        preloaded.2 = waited;
    }
    match opts.target.side {
        Side::Rush => workload.setup_rush(&rush).await,
        Side::Redis => workload.setup_redis(&redis).await,
    }
    .context("preparing the run")?;
    Ok(preloaded)
}

/// The run's `--connections` connections, from the preload's `conns` and
/// new ones. A shard-aware Rush connection is one socket per shard of the
/// node: open only as many as make `--connections` sockets in all, and
/// share them among the C connections' lanes, so both sides run the same
/// number of sockets with the same requests in flight on each.
async fn share_sockets(opts: &RunOptions, mut conns: Vec<Conn>) -> anyhow::Result<Vec<Conn>> {
    let sockets = conns.first().map_or(1, Conn::sockets).max(1);
    let distinct = opts.connections.div_ceil(sockets);
    conns.truncate(distinct.max(1).min(conns.len()));
    let more = distinct.saturating_sub(conns.len());
    conns.extend(connect(opts, more).await?);
    let distinct = conns.len();
    Ok((0..opts.connections)
        .map(|i| conns[i % distinct].clone())
        .collect())
}

/// What the measured part of a run saw.
struct Measured {
    /// Every connection's tally, merged.
    total: Tally,
    /// From the schedule's start to the last answer.
    elapsed_secs: f64,
    server_cpu_secs: Option<f64>,
    server_background_secs: Option<f64>,
    client_cpu_secs: Option<f64>,
}

/// The measured run: `opts.pipeline` lanes on each of `conns`, driven by one
/// schedule until it stops, with the progress line and both sides' CPU time.
async fn measure<W: Workload>(
    workload: Arc<W>,
    opts: &RunOptions,
    conns: Vec<Conn>,
) -> anyhow::Result<Measured> {
    // Everything a connection needs is built before the clock starts.
    let t_setup = Instant::now();
    let lanes: Vec<Vec<LaneState<W::Lane>>> = conns
        .into_iter()
        .enumerate()
        .map(|(i, conn)| {
            (0..opts.pipeline)
                .map(|j| LaneState {
                    conn: conn.clone(),
                    state: workload.lane((i * opts.pipeline + j) as u64),
                })
                .collect()
        })
        .collect();
    let tallies: Vec<Arc<ConnTally>> = lanes
        .iter()
        .map(|_| Arc::new(ConnTally::new(t_setup)))
        .collect();

    let schedule = Arc::new(Schedule::new(opts.rate, opts.stop));
    let cpu_from = (cpu::process(opts.server_pid), cpu::this_process());
    let background_from = cpu::background(opts.server_pid);
    let (done_tx, done_rx) = tokio::sync::watch::channel(false);
    let progress = opts.progress.then(|| {
        tokio::spawn(progress::progress_loop(
            W::NAME,
            opts.target.to_string(),
            schedule.clone(),
            tallies.clone(),
            done_rx,
        ))
    });
    let mut tasks = Vec::with_capacity(lanes.len());
    for (lanes, tally) in lanes.into_iter().zip(&tallies) {
        tasks.push(tokio::spawn(drive_connection(
            workload.clone(),
            lanes,
            tally.clone(),
            schedule.clone(),
        )));
    }
    for t in tasks {
        t.await.context("a connection task panicked")?;
    }
    let cpu_to = (cpu::process(opts.server_pid), cpu::this_process());
    let background_to = cpu::background(opts.server_pid);
    let _ = done_tx.send(true);
    if let Some(p) = progress {
        let _ = p.await;
    }
    let mut total = Tally::default();
    let mut last = schedule.t0;
    for t in tallies {
        let c = Arc::into_inner(t)
            .expect("connection tasks are done")
            .inner
            .into_inner()
            .expect("not poisoned");
        total.merge(c.tally);
        last = last.max(c.last);
    }
    let spent = |from: Option<f64>, to: Option<f64>| Some(to? - from?);
    Ok(Measured {
        total,
        elapsed_secs: last.duration_since(schedule.t0).as_secs_f64().max(1e-9),
        server_cpu_secs: spent(cpu_from.0, cpu_to.0),
        server_background_secs: spent(background_from, background_to),
        client_cpu_secs: spent(cpu_from.1, cpu_to.1),
    })
}

/// Every node's `names` series, added up.
async fn scrape_all(addrs: &[String], names: &[&str]) -> anyhow::Result<scrape::Samples> {
    let all = futures_util::future::try_join_all(
        addrs
            .iter()
            .map(|a| scrape::scrape(a, names, Duration::from_secs(10))),
    )
    .await?;
    Ok(scrape::sum(&all))
}

/// One connection's measurements. Only that connection's task records
/// into it (so the lock is never contended); the progress line reads it once
/// a second.
struct ConnTally {
    inner: Mutex<ConnTallyInner>,
}

struct ConnTallyInner {
    tally: Tally,
    /// When the last answer arrived.
    last: Instant,
}

impl ConnTally {
    fn new(now: Instant) -> ConnTally {
        ConnTally {
            inner: Mutex::new(ConnTallyInner {
                tally: Tally::default(),
                last: now,
            }),
        }
    }
}

struct LaneState<L> {
    /// The lane's clone of its connection (clones share the socket).
    conn: Conn,
    state: L,
}

/// Run one connection's lanes until the schedule is exhausted. Each lane is
/// one long-lived future (no allocation or state moved per request).
async fn drive_connection<W: Workload>(
    workload: Arc<W>,
    lanes: Vec<LaneState<W::Lane>>,
    tally: Arc<ConnTally>,
    schedule: Arc<Schedule>,
) {
    let w = &*workload;
    let mut all: FuturesUnordered<_> = lanes
        .into_iter()
        .map(|lane| run_lane(w, lane, &schedule, &tally))
        .collect();
    while all.next().await.is_some() {}
}

/// One lane: take the next request from the schedule, send it when due,
/// record its latency and outcome; until the schedule says stop.
async fn run_lane<W: Workload>(
    w: &W,
    mut lane: LaneState<W::Lane>,
    schedule: &Schedule,
    tally: &ConnTally,
) {
    while let Some(ticket) = schedule.take() {
        let start = match ticket.due {
            None => ticket.taken,
            Some(due) if due > ticket.taken => {
                tokio::time::sleep_until(due.into()).await;
                Instant::now()
            }
            // Late: it waited for a free lane; that wait is latency.
            Some(due) => due,
        };
        let outcome = match &mut lane.conn {
            Conn::Rush(c) => w.rush(&mut lane.state, c).await,
            Conn::Redis(c) => w.redis(&mut lane.state, c).await,
        };
        let end = Instant::now();
        // A lost connection fails every later request at once: the lane
        // stops after counting it, rather than spin on instant failures.
        let lost = matches!(&outcome, Err(e) if e.kind == "CONNECTION_LOST");
        let mut t = tally.inner.lock().expect("not poisoned");
        t.tally
            .record(end.saturating_duration_since(start), &outcome);
        t.last = end;
        if lost {
            break;
        }
    }
}

/// 1234567 → "1,234,567".
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_digits() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(1234567), "1,234,567");
    }
}
