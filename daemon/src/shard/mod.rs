//! Shards: one OS thread each, owning its slots' in-memory state and one
//! column family. Nothing here is shared with other shards, so the request
//! path takes no locks.
//!
//! A shard drains its queue in groups: it applies up to `max_batch` requests
//! in memory (see [`txn::Txn`]), commits their writes as one WriteBatch (one
//! fsync if any needs durability), and only then answers them. That group
//! commit is what makes durable writes cheap.
//!
//! Between the channel and the groups, jobs wait in [`lanes::Lanes`]: one
//! FIFO per envelope and one for everything else, drained round-robin, so a
//! hot envelope can't starve the rest of the shard; grabs beyond an
//! envelope's queue cap, or that memory can answer, are answered at intake.

pub mod lanes;
pub mod rows;
pub mod slots;
pub mod txn;

use crate::catalog::Catalog;
use crate::clock::Clock;
use crate::config::{Config, Durability};
use crate::envelopes::Envelopes;
use crate::kv::Kv;
use crate::limits::Limits;
use crate::links::Links;
use crate::metrics::Metrics;
use crate::segments::Segments;
use crate::storage::Storage;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use lanes::Lanes;
use rush_protocol::{Reply, Request, RushError, Service, Target};
pub use slots::SlotOp;
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
    /// True when nobody waits for the answer any more.
    pub fn is_abandoned(&self) -> bool {
        match self {
            ReplyTo::Conn(sink) => sink.is_abandoned(),
            ReplyTo::Once(tx) => tx.is_closed(),
        }
    }

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

// Jobs are nearly every message: boxing them to shrink the rare others would
// allocate per request.
#[allow(clippy::large_enum_variant)]
pub enum ShardMsg {
    Job(Job),
    /// Run timers now (after a clock advance) and say when done.
    Tick(oneshot::Sender<()>),
    /// A cluster operation (slot moves), run between groups.
    Slots(SlotOp),
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
    // The job comes back by value (not boxed) so the BUSY path allocates nothing.
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

    /// Queue a cluster operation; a full queue hands it back.
    pub fn slot_op(&self, op: SlotOp) -> Result<(), Option<SlotOp>> {
        match self.tx.try_send(ShardMsg::Slots(op)) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(ShardMsg::Slots(op))) => Err(Some(op)),
            Err(_) => Err(None),
        }
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
    /// Envelope state the node's shards share (the refund stream's clock).
    pub envelopes: Arc<crate::envelopes::Shared>,
    /// Which slots this node serves (checked again at apply: a slot may
    /// start moving while a request waits in the queue).
    pub routing: Arc<crate::cluster::routing::Routing>,
}

pub struct Shard {
    id: usize,
    rx: Receiver<ShardMsg>,
    ctx: ShardContext,
    kv: Kv,
    limits: Limits,
    /// Bloom-guarded catalog lookups: filter, hot cache, storage.
    catalog: Catalog,
    links: Links,
    /// ID segments of this shard's slots (short codes, envelope ids).
    segments: Segments,
    /// Hot storage values (see `rows`); lent to each group's `Txn`.
    rows: rows::RowCache,
    /// Jobs taken off the channel, waiting for a group: per-envelope lanes
    /// drained round-robin (fairness, admission control; see `lanes`).
    lanes: Lanes,
    envelopes: Envelopes,
}

/// Start shard `id`'s thread.
pub fn spawn(
    id: usize,
    ctx: ShardContext,
) -> std::io::Result<(ShardHandle, std::thread::JoinHandle<()>)> {
    let (tx, rx) = crossbeam_channel::bounded(ctx.config.storage.queue_depth);
    let limits =
        Limits::load(&ctx.config, &ctx.storage, &ctx.metrics).map_err(std::io::Error::other)?;
    let links = Links::new(&ctx).map_err(std::io::Error::other)?;
    let shard = Shard {
        id,
        rx,
        kv: Kv {
            durable: ctx.config.storage.kv_durability == Durability::Sync,
        },
        limits,
        links,
        segments: Segments::default(),
        rows: rows::RowCache::new(
            (ctx.config.storage.row_cache_mb << 20) / ctx.config.shard_count().max(1),
        ),
        catalog: Catalog::new(
            id,
            ctx.config.shard_count(),
            &ctx.config.catalog,
            ctx.metrics.clone(),
            ctx.routing.clone(),
        ),
        lanes: Lanes::default(),
        envelopes: Envelopes::new(
            id,
            ctx.config.shard_count(),
            ctx.config.envelopes.clone(),
            ctx.storage.clone(),
            ctx.metrics.clone(),
            ctx.envelopes.clone(),
            ctx.routing.clone(),
        ),
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
        // Jobs held in the lanes, on top of the channel's own bound: enough
        // to see (and admit or refuse) a storm of grabs at once, bounded so
        // the channel still pushes back when the shard can't keep up.
        let max_held = self.ctx.config.storage.queue_depth;
        let mut next_tick = Instant::now() + tick_every;
        let mut jobs: Vec<Job> = Vec::with_capacity(max_batch);
        let mut tick_waiters = Vec::new();
        let mut stopping = false;
        tracing::debug!(shard = self.id, "shard started");
        // Before the first request: a filter missing owners would deny them.
        self.catalog.open(&self.ctx.storage);
        while !stopping {
            // Wait for work only when none is held already.
            if self.lanes.is_empty() {
                let wait = next_tick.saturating_duration_since(Instant::now());
                match self.rx.recv_timeout(wait) {
                    Ok(msg) => self.intake(msg, &mut tick_waiters, &mut stopping),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => stopping = true,
                }
            }
            // Take in everything queued (up to `max_held`), so admission
            // control sees each envelope's whole queue, then run one group.
            while self.lanes.len() < max_held && !stopping {
                match self.rx.try_recv() {
                    Ok(msg) => self.intake(msg, &mut tick_waiters, &mut stopping),
                    Err(_) => break,
                }
            }
            self.lanes.next_group(max_batch, &mut jobs);
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
                self.lanes.push(job);
            }
        }
        while !self.lanes.is_empty() {
            self.lanes.next_group(max_batch, &mut jobs);
            self.execute(&mut jobs);
        }
        // Timers run once more so buffered state (link visit counts) is written.
        self.tick();
        tracing::debug!(shard = self.id, "shard stopped");
    }

    fn intake(
        &mut self,
        msg: ShardMsg,
        tick_waiters: &mut Vec<oneshot::Sender<()>>,
        stopping: &mut bool,
    ) {
        match msg {
            // A request whose connection is gone is not run: its client
            // can't learn the outcome, so not applying it is as correct as
            // applying it, and a flood from a dead connection costs nothing.
            ShardMsg::Job(job) if job.reply.is_abandoned() => {}
            ShardMsg::Job(job) => {
                // Envelope admission control: a grab memory can answer (a
                // repeat, EMPTY, EXPIRED) or one beyond the envelope's queue
                // cap (BUSY) is answered now, without queueing or storage.
                if let Request::EnvelopeGrab(g) = &job.request {
                    let queued = self.lanes.depth(g.id);
                    let now = self.ctx.clock.now_ms();
                    if let Some(answer) = self.envelopes.admit(g, queued, now) {
                        job.reply.send(answer);
                        return;
                    }
                }
                self.lanes.push(job);
            }
            ShardMsg::Tick(tx) => tick_waiters.push(tx),
            // Between groups: everything applied so far is committed.
            // Slot moves change stored data outside groups: forget hot rows.
            ShardMsg::Slots(op) => {
                self.rows.clear();
                self.slot_op(op)
            }
            ShardMsg::Stop => *stopping = true,
        }
    }

    /// Apply a group of requests, commit their writes once, answer them all.
    fn execute(&mut self, jobs: &mut Vec<Job>) {
        let storage = self.ctx.storage.clone();
        let now = self.ctx.clock.now_ms();
        self.catalog.begin_group(self.rx.len() + self.lanes.len());
        let mut txn = Txn::new(&storage, self.id).with_rows(std::mem::take(&mut self.rows));
        let group = jobs.len();
        // Answers that must wait for the commit: those of requests applied
        // after the group's first write (they may have read it). Answers of
        // requests before it saw only committed data and go out at once,
        // which also keeps a flood of large reads from piling up here.
        let mut waiting = Vec::with_capacity(group);
        for job in jobs.drain(..) {
            if job.reply.is_abandoned() {
                continue;
            }
            let result = match self.route(&job.request) {
                Ok(()) => self.apply(&job.request, now, &mut txn),
                Err(e) => Err(e),
            };
            txn.finish_request(result.is_ok());
            if txn.has_writes() {
                waiting.push((job, result));
            } else {
                job.reply.send(result);
            }
        }
        if let Err(err) = self.commit(txn) {
            // Nothing of this group's writes is on disk, and the requests
            // after the first write may have read them: all become errors.
            for (_, r) in waiting.iter_mut() {
                *r = Err(err.clone());
            }
        }
        self.ctx.metrics.batch_size.observe(group as f64);
        for (job, result) in waiting {
            job.reply.send(result);
        }
    }

    /// The routing check again, at apply: the slot may have started moving
    /// (TRYAGAIN) or moved (MOVED) since the connection routed the request.
    fn route(&self, req: &Request) -> Result<(), RushError> {
        match req.target() {
            Ok(Target::Slot(slot)) => self.ctx.routing.check(slot),
            _ => Ok(()),
        }
    }

    fn apply(&mut self, req: &Request, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        match req.opcode().service() {
            Service::Kv => self.kv.apply(req, now, txn),
            Service::Limits => self.limits.apply(req, now, txn),
            Service::Catalog => self.catalog.apply(req, now, txn),
            Service::Envelopes => self.envelopes.apply(req, now, txn, &mut self.segments),
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
        let mut finished = txn.finish();
        let Some((batch, sync)) = finished.commit.take() else {
            if let Some(rows) = finished.rows_after(true) {
                self.rows = rows;
            }
            return Ok(());
        };
        let started = Instant::now();
        let outcome = self.ctx.storage.write(batch, sync);
        if let Some(rows) = finished.rows_after(outcome.is_ok()) {
            self.rows = rows;
        }
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
        let m = &self.ctx.metrics;
        m.row_cache_hits.inc_by(std::mem::take(&mut self.rows.hits));
        m.row_cache_misses
            .inc_by(std::mem::take(&mut self.rows.misses));
        let mut txn = Txn::new(&storage, self.id).with_rows(std::mem::take(&mut self.rows));
        // Services' timers run here, each finishing its writes with
        // `txn.finish_request(ok)`.
        self.catalog.tick(&storage);
        self.envelopes.tick(now, &mut txn);
        self.envelopes.publish_queue_depths(self.lanes.take_peaks());
        self.links.tick(now, &mut txn);
        if let Err(e) = self.commit(txn) {
            tracing::warn!(shard = self.id, error = %e, "timer writes failed; they run again next tick");
        }
    }

    /// A commit failed: forget in-memory state that may reflect it.
    fn on_commit_failure(&mut self) {
        // (Limits keeps no state derived from writes: its policy table
        // changes only through requests that write no shard data.)
        self.segments.clear();
        self.catalog.on_commit_failure();
        self.envelopes.on_commit_failure();
        self.links.on_commit_failure();
    }
}
