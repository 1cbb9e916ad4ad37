//! Shards: one OS thread each, owning its slots' in-memory state and one
//! column family. Nothing here is shared with other shards, so the request
//! path takes no locks.
//!
//! A shard drains its queue in groups: it applies up to `max_batch` requests
//! in memory (see [`txn::Txn`]), commits their writes as one WriteBatch (one
//! fsync if any needs durability), and only then answers them. That group
//! commit is what makes durable writes cheap.

pub mod txn;

use crate::clock::Clock;
use crate::config::{Config, Durability};
use crate::kv::Kv;
use crate::links::Links;
use crate::metrics::Metrics;
use crate::segments::Segments;
use crate::storage::Storage;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use rush_protocol::{Reply, Request, RushError, Service};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use txn::Txn;

/// Where a shard sends an answer.
pub enum ReplyTo {
    /// Back to a connection's writer, which encodes it.
    Conn(crate::server::conn::ReplySink),
    /// To a task that combines answers (requests that run on every shard).
    Once(oneshot::Sender<Result<Reply, RushError>>),
}

impl ReplyTo {
    pub fn send(self, result: Result<Reply, RushError>) {
        match self {
            ReplyTo::Conn(sink) => sink.send(result),
            // The waiting task may have given up (connection closed): fine.
            ReplyTo::Once(tx) => {
                let _ = tx.send(result);
            }
        }
    }
}

pub struct Job {
    pub request: Request,
    pub reply: ReplyTo,
}

// Nearly every message is a Job, so boxing it would cost an allocation per
// request to save queue slots on messages that hardly ever occur.
#[allow(clippy::large_enum_variant)]
pub enum ShardMsg {
    Job(Job),
    /// Run timers now (after a clock advance) and say when done.
    Tick(oneshot::Sender<()>),
    /// Finish what is queued, then exit.
    Stop,
}

/// The sending side of a shard's queue.
#[derive(Clone)]
pub struct ShardHandle {
    tx: Sender<ShardMsg>,
}

impl ShardHandle {
    /// Queue a job. A full queue hands the job back with BUSY already chosen,
    /// so the caller answers at once instead of waiting (backpressure).
    // The job comes back by value on the (rare) refusal path, as STYLE 9 asks.
    #[allow(clippy::result_large_err)]
    pub fn submit(&self, job: Job) -> Result<(), (Job, RushError)> {
        match self.tx.try_send(ShardMsg::Job(job)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(ShardMsg::Job(job))) => Err((
                job,
                RushError::busy("shard queue is full; retry with backoff"),
            )),
            Err(TrySendError::Disconnected(ShardMsg::Job(job))) => {
                Err((job, RushError::unavailable("shard is shutting down")))
            }
            Err(_) => unreachable!("only jobs are sent here"),
        }
    }

    /// Ask the shard to run its timers; resolves when it has.
    pub fn tick(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        // A stopped shard drops the sender, which the receiver sees as an error.
        let _ = self.tx.send(ShardMsg::Tick(tx));
        rx
    }

    pub fn stop(&self) {
        let _ = self.tx.send(ShardMsg::Stop);
    }

    pub fn queue_len(&self) -> usize {
        self.tx.len()
    }
}

/// What a shard thread needs from the node.
#[derive(Clone)]
pub struct ShardContext {
    pub config: Arc<Config>,
    pub storage: Arc<Storage>,
    pub clock: Clock,
    pub metrics: Arc<Metrics>,
}

pub struct Shard {
    id: usize,
    rx: Receiver<ShardMsg>,
    ctx: ShardContext,
    kv: Kv,
    links: Links,
    /// ID segments of this shard's slots (short codes, envelope ids).
    segments: Segments,
}

/// Start shard `id`'s thread.
pub fn spawn(
    id: usize,
    ctx: ShardContext,
) -> std::io::Result<(ShardHandle, std::thread::JoinHandle<()>)> {
    let (tx, rx) = crossbeam_channel::bounded(ctx.config.storage.queue_depth);
    let links = Links::new(&ctx).map_err(std::io::Error::other)?;
    let shard = Shard {
        id,
        rx,
        kv: Kv {
            durable: ctx.config.storage.kv_durability == Durability::Sync,
        },
        links,
        segments: Segments::default(),
        ctx,
    };
    let thread = std::thread::Builder::new()
        .name(format!("rush-shard-{id}"))
        .spawn(move || shard.run())?;
    Ok((ShardHandle { tx }, thread))
}

impl Shard {
    fn run(mut self) {
        let tick_every = Duration::from_millis(self.ctx.config.storage.tick_ms);
        let max_batch = self.ctx.config.storage.max_batch;
        let mut next_tick = Instant::now() + tick_every;
        let mut jobs: Vec<Job> = Vec::with_capacity(max_batch);
        let mut tick_waiters = Vec::new();
        let mut stopping = false;
        tracing::debug!(shard = self.id, "shard started");
        while !stopping {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait) {
                Ok(msg) => self.intake(msg, &mut jobs, &mut tick_waiters, &mut stopping),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => stopping = true,
            }
            while jobs.len() < max_batch && !stopping {
                match self.rx.try_recv() {
                    Ok(msg) => self.intake(msg, &mut jobs, &mut tick_waiters, &mut stopping),
                    Err(_) => break,
                }
            }
            if !jobs.is_empty() {
                self.execute(&mut jobs);
            }
            if !tick_waiters.is_empty() || Instant::now() >= next_tick {
                self.tick();
                next_tick = Instant::now() + tick_every;
                for w in tick_waiters.drain(..) {
                    let _ = w.send(());
                }
            }
        }
        // Anything still queued behind Stop is answered, not dropped.
        while let Ok(msg) = self.rx.try_recv() {
            if let ShardMsg::Job(job) = msg {
                jobs.push(job);
                if jobs.len() == max_batch {
                    self.execute(&mut jobs);
                }
            }
        }
        if !jobs.is_empty() {
            self.execute(&mut jobs);
        }
        // Timers run once more so buffered state (link visit counts) is written.
        self.tick();
        tracing::debug!(shard = self.id, "shard stopped");
    }

    fn intake(
        &mut self,
        msg: ShardMsg,
        jobs: &mut Vec<Job>,
        tick_waiters: &mut Vec<oneshot::Sender<()>>,
        stopping: &mut bool,
    ) {
        match msg {
            ShardMsg::Job(job) => jobs.push(job),
            ShardMsg::Tick(tx) => tick_waiters.push(tx),
            ShardMsg::Stop => *stopping = true,
        }
    }

    /// Apply a group of requests, commit their writes once, answer them all.
    fn execute(&mut self, jobs: &mut Vec<Job>) {
        let storage = self.ctx.storage.clone();
        let now = self.ctx.clock.now_ms();
        let mut txn = Txn::new(&storage, self.id);
        let mut results = Vec::with_capacity(jobs.len());
        for job in jobs.iter() {
            let result = self.apply(&job.request, now, &mut txn);
            txn.finish_request(result.is_ok());
            results.push(result);
        }
        if let Err(err) = self.commit(txn) {
            // Nothing of this group is on disk. Reads in it may have seen
            // writes that never happened, so every answer becomes an error.
            for r in results.iter_mut() {
                *r = Err(err.clone());
            }
        }
        self.ctx.metrics.batch_size.observe(jobs.len() as f64);
        for (job, result) in jobs.drain(..).zip(results) {
            job.reply.send(result);
        }
    }

    fn apply(&mut self, req: &Request, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        match req.opcode().service() {
            Service::Kv => self.kv.apply(req, now, txn),
            Service::Links => self.links.apply(req, now, txn, &mut self.segments),
            _ => Err(RushError::internal(format!(
                "{} reached a shard but is not a shard request",
                req.opcode().name()
            ))),
        }
    }

    /// Commit a group's writes, if any: one WriteBatch, synced if any
    /// request needs it. On failure, in-memory state that may reflect the
    /// lost writes is dropped and the error to answer with is returned.
    fn commit(&mut self, txn: Txn) -> Result<(), RushError> {
        let Some((batch, sync)) = txn.into_commit() else {
            return Ok(());
        };
        let started = Instant::now();
        let outcome = self.ctx.storage.write(batch, sync);
        self.ctx
            .metrics
            .commit_seconds
            .observe(started.elapsed().as_secs_f64());
        outcome.map_err(|e| {
            tracing::error!(shard = self.id, error = %e, "group commit failed; answering UNAVAILABLE");
            self.on_commit_failure();
            RushError::unavailable(format!("storage write failed: {e}"))
        })
    }

    /// Periodic work (expiry sweeps, refunds): services' timers stage writes
    /// in one group that commits like requests do.
    fn tick(&mut self) {
        let storage = self.ctx.storage.clone();
        let now = self.ctx.clock.now_ms();
        let mut txn = Txn::new(&storage, self.id);
        // Services' timers run here, each finishing its writes with
        // `txn.finish_request(ok)`.
        self.links.tick(now, &mut txn);
        if let Err(e) = self.commit(txn) {
            tracing::warn!(shard = self.id, error = %e, "timer writes failed; they run again next tick");
        }
    }

    /// A commit failed: forget in-memory state that may reflect it.
    fn on_commit_failure(&mut self) {
        self.segments.clear();
        self.links.on_commit_failure();
    }
}
