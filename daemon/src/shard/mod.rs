//! Shards: one OS thread each, owning its slots' in-memory state, one
//! column family, and the client connections handed to it. Nothing here is
//! shared with other shards, so the request path takes no locks.
//!
//! **A shard serves its own connections.** Each shard thread runs an event
//! loop (mio: epoll) over its connections; a request for a slot it owns is
//! run inline, on the thread that read it, with no channel and no wake-up.
//! One turn of the loop is a *pass* ([`pass`]):
//!
//! 1. take what the mailbox holds (new connections, batches forwarded by
//!    other shards, answers to ours, jobs from the node's tasks);
//! 2. read what is ready on the shard's connections, parse every complete
//!    frame in place, and run the requests (up to `storage.max_batch` a
//!    pass; the rest wait in [`lanes::Lanes`], up to `storage.queue_depth`,
//!    beyond which they are answered BUSY at once);
//! 3. forward requests for another shard's slots, one batch per
//!    destination ([`forward`]);
//! 4. commit the pass's writes as one record of the shard's log — one
//!    append, one fsync when any request needs durability ([`txn::Txn`],
//!    `storage::log`): the pass *is* the group commit, as Redis's event
//!    loop is with `appendfsync always`. The writes stay [`pending`] until
//!    the shard's [`write_back`] thread writes them to RocksDB in a sorted
//!    run;
//! 5. write each connection's answers with one write call. An answer that
//!    wrote, or that ran after the pass's first write (it may have read
//!    it), waits for the commit; nothing is told before it is durable.
//!
//! Timers (expiry sweeps, refunds, visit counts) run between passes every
//! `storage.tick_ms`, slot moves between passes too, so each sees every
//! earlier request committed. With nothing ready a shard sleeps in
//! `epoll_wait`; after a busy pass it first yields its core for a moment
//! (`server.yield_before_sleep_pct`), which saves a sleep and a wake-up
//! where clients share the cores.

pub mod conn;
pub(crate) mod forward;
pub mod known;
pub mod lanes;
pub mod mailbox;
mod pass;
pub mod pending;
pub mod route;
pub mod rows;
pub mod service;
pub mod slots;
pub mod txn;
pub mod walk;
pub mod write_back;

use crate::clock::Clock;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::segments::Segments;
use crate::server::NodeShared;
use crate::storage::log::ShardLog;
use crate::storage::{Storage, StorageError};
use bytes::{Bytes, BytesMut};
use conn::ConnId;
use lanes::Lanes;
use mailbox::Mailbox;
pub use mailbox::ShardHandle;
use rush_protocol::frame;
use rush_protocol::limits::MAX_FRAME_CEILING;
use rush_protocol::{ErrorCode, Reply, Request, RushError, Service};
use service::{Cx, ShardService};
pub use slots::SlotOp;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use txn::Txn;

/// Where the answer of a request from outside the shard's connections goes.
pub enum ReplyTo {
    /// To a connection (of any shard), encoded.
    Conn(ReplySink),
    /// To a task that waits for it (requests that run on every shard,
    /// redirects, cluster operations).
    Once(oneshot::Sender<Result<Reply, RushError>>),
}

impl ReplyTo {
    /// True when nobody waits for the answer any more.
    pub fn is_abandoned(&self) -> bool {
        match self {
            ReplyTo::Conn(_) => false,
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

/// The answer of a request a node task runs (cluster operations, requests
/// that run on every shard) for a connection: encoded where it is produced
/// and posted to the connection's shard, which writes it.
pub struct ReplySink {
    pub(crate) shard: ShardHandle,
    pub(crate) conn: ConnId,
    pub(crate) request_id: u64,
    pub(crate) opcode: u8,
    /// Request bytes the connection counts in flight until this answer.
    pub(crate) size: usize,
    pub(crate) received: Instant,
    pub(crate) metrics: Arc<Metrics>,
}

impl ReplySink {
    pub fn send(self, result: Result<Reply, RushError>) {
        let mut buf = BytesMut::new();
        let outcome = encode_answer(&mut buf, self.opcode, self.request_id, &result);
        self.metrics
            .observe(self.opcode, outcome, self.received.elapsed().as_secs_f64());
        self.shard.answer(self.conn, self.size, buf.freeze());
    }
}

/// Encode one answer frame into `out`: the reply, or the error; an answer
/// too large for a frame becomes TOO_LARGE. Returns the outcome for metrics.
pub fn encode_answer(
    out: &mut BytesMut,
    opcode: u8,
    request_id: u64,
    result: &Result<Reply, RushError>,
) -> Result<(), ErrorCode> {
    let start = out.len();
    match result {
        Ok(reply) => {
            frame::encode_ok(out, opcode, request_id, |b| reply.encode_body(b));
            if out.len() - start > MAX_FRAME_CEILING {
                out.truncate(start);
                let e = RushError::new(
                    ErrorCode::TooLarge,
                    "the answer is larger than a frame may be; ask for less at once",
                );
                frame::encode_error(out, opcode, request_id, &e);
                return Err(e.code);
            }
            Ok(())
        }
        Err(e) => {
            frame::encode_error(out, opcode, request_id, e);
            Err(e.code)
        }
    }
}

/// A request from outside the shard's connections (the redirect listener,
/// requests that run on every shard).
pub struct Job {
    pub request: Request,
    pub reply: ReplyTo,
}

pub enum ShardMsg {
    /// The node the shard serves (sent once, before any connection).
    Node(Arc<NodeShared>),
    /// A freshly accepted connection, and the protocol its listener speaks.
    Accept(std::net::TcpStream, crate::resp::Protocol),
    /// A connection moved here from another shard (SHARD_BIND).
    Adopt(Box<conn::Conn>),
    Job(Job),
    /// Requests another shard read for this shard's slots.
    Forward(forward::Batch),
    /// Answers to requests this shard forwarded.
    Answers(forward::Answers),
    /// One answer from a node task: (connection, its request's size, frame).
    Answer(ConnId, usize, Bytes),
    /// Run timers now (after a clock advance) and say when done.
    Tick(oneshot::Sender<()>),
    /// A cluster operation (slot moves), run between passes.
    Slots(SlotOp),
    /// Stop reading, answer what is in flight, close the connections
    /// (within the timeout); say when done.
    Drain(Duration, oneshot::Sender<()>),
    /// Pause for a replica's snapshot (between passes).
    ReplPause(crate::replication::source::Pause),
    /// Finish what is queued, then exit.
    Stop,
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
    /// Which slots this node serves (checked where a request runs: a slot
    /// may start moving while a request waits).
    pub routing: Arc<crate::cluster::routing::Routing>,
    /// TLS for client connections, when configured.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Where each commit goes for replicas (once one follows).
    pub replication: Arc<crate::replication::Source>,
    /// This node is a replica: its shards serve no slot and run no timers
    /// (nothing but the follower writes its data).
    pub standby: bool,
}

pub struct Shard {
    id: usize,
    ctx: ShardContext,
    router: route::Router,
    /// Every registered service's instance for this shard, in
    /// `services::SERVICES` order (timers run in that order).
    services: Vec<Box<dyn ShardService>>,
    /// Index into `services` by `rush_protocol::Service` (see `service_index`).
    by_service: [Option<u8>; SERVICE_KINDS],
    /// ID segments of this shard's slots (short codes, envelope ids).
    segments: Segments,
    /// Hot storage values (see `rows`); lent to each pass's `Txn`.
    rows: rows::RowCache,
    /// The row cache's share of the node's memory; under a memory budget it
    /// yields what the shard's filters, hot state and replication backlog
    /// hold ([`Shard::publish_memory`]).
    row_share: usize,
    /// The keys a read buffer's frames will read; lent to each pass's `Txn`.
    ahead: txn::ReadAhead,
    /// The shard's own log (`storage.commit = "log"`); `None` when passes
    /// commit straight to RocksDB.
    log: Option<ShardLog>,
    /// Writes in the log that RocksDB doesn't hold yet (see `pending`); lent
    /// to each pass's `Txn`. `None` without a log (or while lent).
    pending: Option<pending::Pending>,
    /// The thread that writes runs of pending writes to RocksDB (with a log).
    writer: Option<Arc<write_back::Writer>>,
    /// After a failed write back, the next try waits until then.
    write_back_retry: Option<Instant>,
    /// What `storage.stats.write_backs_running` counts for this shard.
    owes_work: bool,
    /// Requests read beyond a pass's budget, waiting for the next passes:
    /// per-lane FIFOs drained round-robin (fairness, admission control).
    lanes: Lanes<pass::Work>,
    mailbox: Mailbox,
    poll: mio::Poll,
    /// The event loop's connections and per-pass state.
    io: pass::Loop,
    node: Option<Arc<NodeShared>>,
    /// A commit's replication record, built here (kept between commits).
    repl_record: Vec<u8>,
    /// The last commit's record a replica must hold before its answers go
    /// out (`replication.min_acks = 1`).
    awaiting_ack: Option<u64>,
}

/// How often a pass waiting for a replica's acknowledgement looks at its
/// mailbox for answers to write out.
const ACK_POLL: Duration = Duration::from_millis(1);

/// How long a failed write back waits before it is tried again.
const WRITE_BACK_RETRY: Duration = Duration::from_secs(1);

/// Kinds of `rush_protocol::Service`.
const SERVICE_KINDS: usize = 9;

fn service_index(s: Service) -> usize {
    match s {
        Service::Node => 0,
        Service::Kv => 1,
        Service::Links => 2,
        Service::Limits => 3,
        Service::Catalog => 4,
        Service::Envelopes => 5,
        Service::Cluster => 6,
        Service::Admin => 7,
        Service::Reserved => 8,
    }
}

/// Create shard `id` (its services are built here, on the caller's
/// thread); [`start`] runs it on a thread of its own.
pub fn create(id: usize, ctx: ShardContext) -> std::io::Result<(ShardHandle, Shard)> {
    let poll = mio::Poll::new()?;
    let (handle, mailbox) =
        mailbox::mailbox(id, &poll, pass::WAKER, ctx.config.storage.queue_depth)?;
    let mut services = Vec::with_capacity(crate::services::SERVICES.len());
    let mut by_service = [None; SERVICE_KINDS];
    for (i, r) in crate::services::SERVICES.iter().enumerate() {
        services.push((r.build)(&ctx, id).map_err(std::io::Error::other)?);
        by_service[service_index(r.service)] = Some(i as u8);
    }
    let shards = ctx.config.shard_count();
    let (log, pending, writer) = match ctx.config.storage.commit {
        crate::config::Commit::Log => {
            let through = ctx.storage.log_through(id);
            let budget = (ctx.config.storage.write_back_mb << 20) / shards.max(1);
            let writer = write_back::Writer::start(id, ctx.storage.clone(), handle.clone())?;
            (
                Some(ShardLog::create(&ctx.storage.log_dir(id), through + 1)?),
                Some(pending::Pending::new(budget, through)),
                Some(Arc::new(writer)),
            )
        }
        crate::config::Commit::Direct => (None, None, None),
    };
    // A replica's data is written by its follower, beside the shards: a
    // row cache would go stale. Its reads (READONLY) go to RocksDB.
    let row_share = if ctx.standby {
        0
    } else {
        (ctx.config.storage.row_cache_mb << 20) / shards.max(1)
    };
    let shard = Shard {
        id,
        log,
        pending,
        writer,
        write_back_retry: None,
        owes_work: false,
        router: route::Router::new(shards),
        services,
        by_service,
        segments: Segments::default(),
        rows: rows::RowCache::new(row_share),
        row_share,
        ahead: txn::ReadAhead::default(),
        lanes: Lanes::default(),
        mailbox,
        poll,
        io: pass::Loop::new(shards, &ctx.config),
        node: None,
        repl_record: Vec::new(),
        awaiting_ack: None,
        ctx,
    };
    Ok((handle, shard))
}

/// Run a shard on its own thread.
pub fn start(shard: Shard) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("rush-shard-{}", shard.id))
        .spawn(move || shard.run())
}

impl Shard {
    /// The index in `services` of the service that serves `req`.
    fn service_of(&self, req: &Request) -> Option<usize> {
        self.by_service[service_index(req.opcode().service())].map(usize::from)
    }

    /// A group's `Txn`, with the shard's row cache and pending writes lent
    /// to it (they come back in [`Shard::commit`]).
    fn txn<'s>(&mut self, storage: &'s Storage) -> Txn<'s> {
        Txn::new(storage, self.id)
            .with_rows(std::mem::take(&mut self.rows))
            .with_read_ahead(std::mem::take(&mut self.ahead))
            .with_pending(self.pending.take(), self.writer.clone())
    }

    /// Commit a pass's writes, if any: one record of the shard's log, or
    /// one WriteBatch, synced if any request needs it. On failure, in-memory
    /// state that may reflect the lost writes is dropped and the error to
    /// answer with is returned.
    fn commit(&mut self, txn: Txn) -> Result<(), RushError> {
        let mut finished = txn.finish();
        if let Some(p) = finished.pending.take() {
            self.pending = Some(p);
        }
        self.ahead = std::mem::take(&mut finished.ahead);
        let lent_rows = finished.rows.take();
        let has_rows = lent_rows.is_some();
        if let Some(rows) = lent_rows {
            self.rows = rows;
        }
        if !finished.has_writes {
            return Ok(());
        }
        let started = Instant::now();
        // Built before the commit takes the writes (the log's drains them).
        let replicate = self.ctx.replication.capturing(self.id);
        if replicate {
            crate::replication::record::encode(&finished, &mut self.repl_record);
        }
        let outcome = if self.log.is_some() && finished.loggable() {
            self.commit_log(&mut finished)
        } else {
            self.commit_direct(&mut finished, has_rows)
        };
        if replicate && outcome.is_ok() && !self.repl_record.is_empty() {
            let seq = self.ctx.replication.append(self.id, &self.repl_record);
            if finished.sync && self.ctx.config.replication.min_acks > 0 {
                self.awaiting_ack = Some(seq);
            }
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

    /// The group as one record of the shard's log; its writes join the
    /// pending ones.
    fn commit_log(&mut self, finished: &mut txn::Finished) -> Result<(), StorageError> {
        let pending = self
            .pending
            .as_mut()
            .expect("a shard with a log has pending writes");
        if pending.bytes() > pending.budget().saturating_mul(2) {
            // The write-back thread is behind (or failing): wait for its run
            // and hand it the next, so memory stays bounded.
            let writer = self
                .writer
                .as_ref()
                .expect("a shard with a log has a writer");
            if pending.in_flight() {
                let waited = Instant::now();
                let landed = writer.wait_landed();
                self.ctx
                    .metrics
                    .write_back_wait_seconds
                    .observe(waited.elapsed().as_secs_f64());
                self.landed(landed)?;
            }
            self.freeze();
        }
        let (Some(log), Some(pending)) = (self.log.as_mut(), self.pending.as_mut()) else {
            unreachable!("a shard with a log has pending writes");
        };
        log.begin();
        for (k, v) in &finished.applied {
            match v {
                Some(v) => log.put(k, v),
                None => log.delete(k),
            }
        }
        for (k, operand) in &finished.merges {
            log.merge(k, operand);
        }
        let stats = &self.ctx.storage.stats;
        let seq = log
            .commit(finished.sync)
            .inspect_err(|_| stats.write_errors.inc())?;
        stats.writes.inc();
        if finished.sync {
            stats.syncs.inc();
        }
        let before = pending.len();
        pending.absorb(finished.applied.drain(), seq, &mut self.rows);
        for (k, operand) in finished.merges.drain() {
            pending.merge(&k, &operand, &mut self.rows);
        }
        stats.pending_keys.add((pending.len() - before) as i64);
        Ok(())
    }

    /// The group as one RocksDB batch, after everything pending (RocksDB
    /// must hold what came before it).
    fn commit_direct(
        &mut self,
        finished: &mut txn::Finished,
        has_rows: bool,
    ) -> Result<(), StorageError> {
        if let Err(e) = self.write_back() {
            if has_rows {
                finished.settle_rows(&mut self.rows, false);
            }
            return Err(e);
        }
        let batch = finished
            .batch(&self.ctx.storage, self.id)
            .expect("a group with writes has a batch");
        let outcome = self.ctx.storage.write(batch, finished.sync);
        if has_rows {
            finished.settle_rows(&mut self.rows, outcome.is_ok());
        }
        outcome
    }

    /// With `replication.min_acks = 1`, after a pass's commit: wait until a
    /// replica holds it (the answers that waited for the commit wait for
    /// this too). One round trip per group commit, as the fsync is one per
    /// group; the shard waits as it waits for that fsync. Not acknowledged
    /// in time: UNAVAILABLE for them (the writes are on this node, and stay)
    /// unless `replication.degrade` lets them through as done.
    fn await_replica(&mut self) -> Result<(), RushError> {
        let Some(seq) = self.awaiting_ack.take() else {
            return Ok(());
        };
        use crate::replication::source::Ack;
        let timeout = Duration::from_millis(self.ctx.config.replication.ack_timeout_ms);
        let waited = Instant::now();
        let deadline = waited + timeout;
        let acked = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let step = left.min(ACK_POLL);
            match self.ctx.replication.wait_acked(self.id, seq, step) {
                Ack::NotYet if !left.is_zero() => {}
                other => break other == Ack::Held,
            }
            // The replica's fetch may be a connection of this shard: its
            // answer (posted by the node task that ran it) must go out, or
            // the acknowledgement never comes.
            self.deliver_answers_while_waiting();
        };
        let cfg = &self.ctx.config.replication;
        let m = &self.ctx.metrics;
        m.replication_ack_seconds
            .observe(waited.elapsed().as_secs_f64());
        if acked {
            return Ok(());
        }
        m.replication_ack_timeouts.inc();
        if cfg.degrade {
            m.replication_degraded.inc();
            return Ok(());
        }
        Err(RushError::unavailable(format!(
            "no replica acknowledged this write within {} ms (replication.min_acks = 1): it is \
             on this node only, and may be lost if this node is",
            cfg.ack_timeout_ms
        )))
    }

    /// Make RocksDB hold every committed write: wait for the run in flight,
    /// write what is pending as one more, wait for it; then let the log go.
    fn write_back(&mut self) -> Result<(), StorageError> {
        let (Some(pending), Some(writer)) = (self.pending.as_mut(), &self.writer) else {
            return Ok(());
        };
        let before = pending.len();
        let waited = (!pending.is_empty()).then(Instant::now);
        let settled = pending.settle(writer, &mut self.rows);
        if let Some(waited) = waited {
            self.ctx
                .metrics
                .write_back_wait_seconds
                .observe(waited.elapsed().as_secs_f64());
        }
        let after = pending.len();
        self.ctx
            .storage
            .stats
            .pending_keys
            .sub(before as i64 - after as i64);
        self.trim_log();
        self.publish_owed();
        settled.map(|_| ()).inspect_err(|e| {
            self.write_back_retry = Some(Instant::now() + WRITE_BACK_RETRY);
            tracing::error!(shard = self.id, error = %e, "writing pending writes back to RocksDB failed; they stay in the log and in memory");
        })
    }

    /// A run landed (or failed to).
    fn landed(&mut self, landed: write_back::Landed) -> Result<(), StorageError> {
        let (Some(pending), Some(writer)) = (self.pending.as_mut(), &self.writer) else {
            return Ok(());
        };
        let secs = landed.secs;
        // A failed run goes back to pending under newer writes of its keys:
        // what it held of those is gone either way.
        let before = pending.len();
        let outcome = pending.landed(landed, writer, &mut self.rows);
        let gone = before - pending.len();
        self.ctx.storage.stats.pending_keys.sub(gone as i64);
        match outcome {
            Ok(keys) => {
                tracing::debug!(shard = self.id, keys, secs, "run written back");
                self.write_back_retry = None;
                self.trim_log();
                Ok(())
            }
            Err(e) => {
                self.write_back_retry = Some(Instant::now() + WRITE_BACK_RETRY);
                tracing::error!(shard = self.id, error = %e, "writing a run back to RocksDB failed; its writes stay in the log and in memory");
                Err(e)
            }
        }
    }

    /// Hand what is pending to the write-back thread. The log starts a new
    /// segment first, so that once the run has landed every closed segment
    /// holds only records RocksDB has.
    fn freeze(&mut self) {
        let (Some(log), Some(pending), Some(writer)) =
            (self.log.as_mut(), self.pending.as_mut(), &self.writer)
        else {
            return;
        };
        if pending.in_flight() {
            return;
        }
        if let Err(e) = log.rotate() {
            tracing::warn!(shard = self.id, error = %e, "can't start a new log segment; the current one keeps growing");
        }
        pending.freeze(writer, false);
    }

    /// Between passes: take in the runs that landed; hand over a new one
    /// when the pending writes, or the log's current segment, are over
    /// budget.
    fn maybe_write_back(&mut self) {
        let Some(writer) = self.writer.clone() else {
            return;
        };
        while let Some(landed) = writer.try_landed() {
            let _ = self.landed(landed);
        }
        let (Some(log), Some(pending)) = (&self.log, &self.pending) else {
            return;
        };
        if !pending.in_flight()
            && (pending.full() || log.segment_bytes() > pending.budget() as u64)
            && self.write_back_retry.is_none_or(|at| Instant::now() >= at)
        {
            self.freeze();
        }
        self.publish_owed();
    }

    /// Say whether this shard owes background work (INFO's
    /// `write_backs_running`: a benchmark waits for it after a preload).
    fn publish_owed(&mut self) {
        let owes = self.pending.as_ref().is_some_and(|p| p.owes_work());
        if owes != self.owes_work {
            let g = &self.ctx.storage.stats.write_backs_running;
            if owes {
                g.add(1)
            } else {
                g.sub(1)
            }
            self.owes_work = owes;
        }
    }

    /// Delete the log segments RocksDB holds all of.
    fn trim_log(&mut self) {
        if let (Some(log), Some(pending)) = (self.log.as_mut(), &self.pending) {
            log.trim(pending.written_back());
        }
    }

    /// Periodic work (expiry sweeps, refunds): services' timers stage writes
    /// in one group that commits like requests do. `flush`: everything
    /// buffered is written now (see [`Cx::flush`]).
    fn tick(&mut self, flush: bool) {
        if self.ctx.standby {
            // A replica's data is written by its follower alone.
            self.publish_memory();
            return;
        }
        let storage = self.ctx.storage.clone();
        let now = self.ctx.clock.now_ms();
        let m = &self.ctx.metrics;
        m.row_cache_hits.inc_by(std::mem::take(&mut self.rows.hits));
        m.row_cache_misses
            .inc_by(std::mem::take(&mut self.rows.misses));
        let mut txn = self.txn(&storage);
        // Services' timers run here, each finishing its writes with
        // `txn.finish_request(ok)`.
        let peaks = self.lanes.take_peaks();
        let mut cx = Cx {
            now,
            txn: &mut txn,
            slot: None,
            segments: &mut self.segments,
            backlog: 0,
            flush,
        };
        for s in &mut self.services {
            s.tick(&mut cx);
            s.lane_peaks(&peaks);
        }
        if let Err(e) = self.commit(txn) {
            tracing::warn!(shard = self.id, error = %e, "timer writes failed; they run again next tick");
        }
        self.publish_memory();
        if flush {
            // RocksDB must hold everything committed (a slot is about to be
            // read by its mover, the node counts keys or stops).
            let _ = self.write_back();
        } else {
            self.maybe_write_back();
        }
    }

    /// What this shard keeps in memory, for INFO and /metrics. Under a
    /// memory budget, the row cache then yields what no share sizes — the
    /// shard's filters, hot state and replication backlog — down to a
    /// quarter of its share.
    fn publish_memory(&mut self) {
        use crate::memory::{Part, Use};
        let mut now = Use::default();
        if let Some(p) = &self.pending {
            now.add(Part::WriteBack, p.held_bytes());
        }
        for s in &self.services {
            s.memory(&mut now);
        }
        now.add(
            Part::ReplicationBacklog,
            self.ctx.replication.shard_bytes(self.id),
        );
        if self.ctx.config.memory.budget_mb > 0 {
            // What the parts no share sizes hold, given up by the row cache.
            let unsized_parts: u64 = crate::memory::UNSIZED.iter().map(|&p| now.get(p)).sum();
            let yielded = usize::try_from(unsized_parts).unwrap_or(usize::MAX);
            let cap = self
                .row_share
                .saturating_sub(yielded)
                .max(self.row_share / 4);
            self.rows.set_cap(cap);
            now.set_limit(Part::RowCache, cap);
        }
        now.add(Part::RowCache, self.rows.bytes());
        self.ctx.metrics.shard_memory.publish(self.id, &now);
    }

    /// Between passes, for a replica's snapshot: from now on keep every
    /// commit for replicas, make RocksDB hold every committed write, say
    /// the backlog's head, and wait while the snapshot is taken.
    fn repl_pause(&mut self, p: crate::replication::source::Pause) {
        let source = self.ctx.replication.clone();
        source.start_capture(self.id);
        let written = self.write_back();
        let held = written.is_ok() && self.pending.as_ref().is_none_or(|p| p.settled());
        if !held {
            let _ = p.paused.send(Err(RushError::unavailable(format!(
                "shard {}: pending writes could not be written to RocksDB for the snapshot",
                self.id
            ))));
            return;
        }
        if p.paused.send(Ok(source.head(self.id))).is_ok() {
            // Ends when the snapshot is taken (or the session is gone).
            let _ = p.resume.recv();
        }
    }

    /// A commit failed: forget in-memory state that may reflect it.
    fn on_commit_failure(&mut self) {
        self.segments.clear();
        for s in &mut self.services {
            s.on_commit_failure();
        }
    }
}
