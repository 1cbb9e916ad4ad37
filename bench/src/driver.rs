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

use crate::scrape;
use crate::stats::{Latency, RunReport, Tally};
use crate::target::{Conn, Side, Target};
use crate::workload::{Params, RedisConn, RushConn, Workload};
use anyhow::{bail, Context};
use futures_util::stream::{FuturesUnordered, StreamExt};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
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
    /// before and after the run for the workload's `RUSH_METRICS`.
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
}

/// Most connections one run opens (each holds a ~200 KB histogram).
pub const MAX_CONNECTIONS: usize = 10_000;
/// Most requests in flight per connection.
pub const MAX_PIPELINE: usize = 4096;
/// Connections used to preload (more would only contend).
const PRELOAD_CONNECTIONS: usize = 8;
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
    let mut params = opts.params.clone();
    params.dist = Some(params.dist.unwrap_or(W::DIST));
    params.target = opts.target.to_string();
    params.max_ops = max_ops(&opts);
    let workload = Arc::new(W::new(&params).context("setting up the workload")?);

    // The preload's connections first; the rest after it, so that none
    // sits idle through a long preload (a server closes idle connections).
    let mut conns = futures_util::future::try_join_all(
        (0..opts.connections.min(PRELOAD_CONNECTIONS)).map(|_| opts.target.connect(opts.timeout)),
    )
    .await?;

    // The preload and the setup run on these (one side's connections).
    let rush: Vec<RushConn> = conns.iter().filter_map(Conn::rush).collect();
    let redis: Vec<RedisConn> = conns.iter().filter_map(Conn::redis).collect();
    let preload_started = Instant::now();
    let preloaded = if opts.load {
        let n = match opts.target.side {
            Side::Rush => workload.preload_rush(&rush).await,
            Side::Redis => workload.preload_redis(&redis).await,
        }
        .context("preloading")?;
        if opts.progress {
            eprintln!(
                "{}: preloaded {n} items in {:.1}s",
                W::NAME,
                preload_started.elapsed().as_secs_f64()
            );
        }
        n
    } else {
        0
    };
    let preload_secs = if opts.load {
        preload_started.elapsed().as_secs_f64()
    } else {
        0.0
    };
    match opts.target.side {
        Side::Rush => workload.setup_rush(&rush).await,
        Side::Redis => workload.setup_redis(&redis).await,
    }
    .context("preparing the run")?;
    // A shard-aware Rush connection is one socket per shard of the node:
    // open only as many as make `--connections` sockets in all, and share
    // them among the C connections' lanes, so both sides run the same
    // number of sockets with the same requests in flight on each.
    let sockets = conns.first().map_or(1, Conn::sockets).max(1);
    let distinct = opts.connections.div_ceil(sockets);
    conns.truncate(distinct.max(1).min(conns.len()));
    conns.extend(
        futures_util::future::try_join_all(
            (conns.len()..distinct).map(|_| opts.target.connect(opts.timeout)),
        )
        .await?,
    );
    let distinct = conns.len();
    let conns: Vec<Conn> = (0..opts.connections)
        .map(|i| conns[i % distinct].clone())
        .collect();
    let watch = opts.target.side == Side::Rush && !W::RUSH_METRICS.is_empty();
    let watch_from = if watch && !opts.metrics.is_empty() {
        Some(scrape_all(&opts.metrics, W::RUSH_METRICS).await?)
    } else {
        None
    };

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

    let schedule = Arc::new(Schedule {
        t0: Instant::now(),
        next: AtomicU64::new(0),
        rate: opts.rate,
        stop: opts.stop,
    });
    let cpu_from = (cpu::process(opts.server_pid), cpu::this_process());
    let (done_tx, done_rx) = tokio::sync::watch::channel(false);
    let progress = opts.progress.then(|| {
        tokio::spawn(progress_loop(
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

    let server_metrics = match &watch_from {
        Some(before) => {
            let after = scrape_all(&opts.metrics, W::RUSH_METRICS).await?;
            scrape::change(before, &after)
        }
        None => Default::default(),
    };

    let elapsed = last.duration_since(schedule.t0).as_secs_f64().max(1e-9);
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
        ok: total.ok,
        misses: total.misses,
        denied: total.denied,
        errors: total.error_count(),
        error_types: total.errors.clone(),
        elapsed_secs: elapsed,
        throughput: total.ok as f64 / elapsed,
        latency: Latency::from_histogram(&total.hist),
        server_metrics,
        server_cpu_secs: match (cpu_from.0, cpu_to.0) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        },
        client_cpu_secs: match (cpu_from.1, cpu_to.1) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        },
    })
}

/// CPU time (user + system) of processes, in seconds.
mod cpu {
    /// Process `pid`'s CPU time so far, from `/proc/PID/stat`.
    pub fn process(pid: Option<u32>) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
        // The command name (field 2) may hold spaces: count from after ')'.
        let rest = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        // Fields 14 and 15 (utime, stime) are the 12th and 13th after ')'.
        let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        Some(ticks / if hz > 0 { hz as f64 } else { 100.0 })
    }

    /// This process's CPU time so far (the bench client).
    pub fn this_process() -> Option<f64> {
        // SAFETY: getrusage writes into the zeroed struct we own.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
            return None;
        }
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        Some(t(u.ru_utime) + t(u.ru_stime))
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn reads_cpu_times() {
            let me = super::process(Some(std::process::id())).expect("own stat");
            assert!(me >= 0.0);
            assert!(super::this_process().expect("rusage") >= 0.0);
            assert!(super::process(None).is_none());
        }
    }
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

/// The run's shared request schedule: tickets handed out in order.
struct Schedule {
    t0: Instant,
    next: AtomicU64,
    rate: Option<f64>,
    stop: Stop,
}

/// One request to send.
struct Ticket {
    /// When it is due (open loop only).
    due: Option<Instant>,
    /// When it was taken (one clock read serves the stop check and, in a
    /// closed loop, the send time).
    taken: Instant,
}

impl Schedule {
    /// The next request, or `None` when the run is over.
    fn take(&self) -> Option<Ticket> {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        if let Stop::Requests(n) = self.stop {
            if k >= n {
                return None;
            }
        }
        let taken = Instant::now();
        let due = self.rate.map(|r| self.due(k, r));
        if let Stop::Duration(d) = self.stop {
            if due.unwrap_or(taken) >= self.t0 + d {
                return None;
            }
        }
        Some(Ticket { due, taken })
    }

    fn due(&self, k: u64, rate: f64) -> Instant {
        self.t0 + Duration::from_secs_f64(k as f64 / rate)
    }

    /// How far the open-loop schedule is ahead of the sends (zero when on time).
    fn lag(&self) -> Duration {
        match self.rate {
            Some(r) => Instant::now()
                .saturating_duration_since(self.due(self.next.load(Ordering::Relaxed), r)),
            None => Duration::ZERO,
        }
    }
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

async fn progress_loop(
    name: &'static str,
    target: String,
    schedule: Arc<Schedule>,
    tallies: Vec<Arc<ConnTally>>,
    mut done: tokio::sync::watch::Receiver<bool>,
) {
    let tty = std::io::stderr().is_terminal();
    let mut tick = tokio::time::interval_at(
        (schedule.t0 + Duration::from_secs(1)).into(),
        Duration::from_secs(1),
    );
    let mut prev = 0u64;
    let mut secs = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = done.changed() => break,
        }
        secs += 1;
        let (mut ok, mut errors, mut denied) = (0, 0, 0);
        for t in &tallies {
            let t = t.inner.lock().expect("not poisoned");
            ok += t.tally.ok;
            errors += t.tally.error_count();
            denied += t.tally.denied;
        }
        let denied = if denied > 0 {
            format!("  denied {denied}")
        } else {
            String::new()
        };
        let lag = schedule.lag();
        let behind = if lag > Duration::from_millis(10) {
            format!("  behind schedule {:.0} ms", lag.as_secs_f64() * 1000.0)
        } else {
            String::new()
        };
        let line = format!(
            "{name} {target} [{secs:>3}s] {:>10} ops/s  total {ok}{denied}  errors {errors}{behind}",
            group(ok - prev)
        );
        prev = ok;
        let mut err = std::io::stderr().lock();
        let _ = if tty {
            write!(err, "\r{line}\x1b[K")
        } else {
            writeln!(err, "{line}")
        };
    }
    if tty {
        let _ = writeln!(std::io::stderr());
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

    #[test]
    fn schedule_stops_after_requests() {
        let s = Schedule {
            t0: Instant::now(),
            next: AtomicU64::new(0),
            rate: None,
            stop: Stop::Requests(3),
        };
        assert!((0..3).all(|_| s.take().is_some()));
        assert!(s.take().is_none());
    }

    #[test]
    fn open_loop_tickets_are_due_at_the_rate() {
        let t0 = Instant::now();
        let s = Schedule {
            t0,
            next: AtomicU64::new(0),
            rate: Some(1000.0),
            stop: Stop::Duration(Duration::from_millis(10)),
        };
        let dues: Vec<Instant> = std::iter::from_fn(|| s.take().map(|t| t.due.unwrap())).collect();
        assert_eq!(dues.len(), 10);
        assert_eq!(dues[0], t0);
        assert_eq!(dues[5] - t0, Duration::from_millis(5));
    }
}
