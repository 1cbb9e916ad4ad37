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
//! 4. commit the pass's writes as one WriteBatch — one WAL append, one
//!    fsync when any request needs durability ([`txn::Txn`]): the pass *is*
//!    the group commit, as Redis's event loop is with `appendfsync always`;
//! 5. write each connection's answers with one write call. An answer that
//!    wrote, or that ran after the pass's first write (it may have read
//!    it), waits for the commit; nothing is told before it is durable.
//!
//! Timers (expiry sweeps, refunds, visit counts) run between passes every
//! `storage.tick_ms`, slot moves between passes too, so each sees every
//! earlier request committed.

pub mod conn;
pub(crate) mod forward;
pub mod lanes;
pub mod mailbox;
mod pass;
pub mod route;
pub mod rows;
pub mod service;
pub mod slots;
pub mod txn;

use crate::clock::Clock;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::segments::Segments;
use crate::server::NodeShared;
use crate::storage::Storage;
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
    /// Requests read beyond a pass's budget, waiting for the next passes:
    /// per-lane FIFOs drained round-robin (fairness, admission control).
    lanes: Lanes<pass::Work>,
    mailbox: Mailbox,
    poll: mio::Poll,
    /// The event loop's connections and per-pass state.
    io: pass::Loop,
    node: Option<Arc<NodeShared>>,
}

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
    let shard = Shard {
        id,
        router: route::Router::new(shards),
        services,
        by_service,
        segments: Segments::default(),
        rows: rows::RowCache::new((ctx.config.storage.row_cache_mb << 20) / shards.max(1)),
        lanes: Lanes::default(),
        mailbox,
        poll,
        io: pass::Loop::new(shards, &ctx.config),
        node: None,
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

    /// Commit a pass's writes, if any: one WriteBatch, synced if any
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
    /// in one group that commits like requests do. `flush`: everything
    /// buffered is written now (see [`Cx::flush`]).
    fn tick(&mut self, flush: bool) {
        let storage = self.ctx.storage.clone();
        let now = self.ctx.clock.now_ms();
        let m = &self.ctx.metrics;
        m.row_cache_hits.inc_by(std::mem::take(&mut self.rows.hits));
        m.row_cache_misses
            .inc_by(std::mem::take(&mut self.rows.misses));
        let mut txn = Txn::new(&storage, self.id).with_rows(std::mem::take(&mut self.rows));
        // Services' timers run here, each finishing its writes with
        // `txn.finish_request(ok)`.
        let peaks = self.lanes.take_peaks();
        let mut cx = Cx {
            now,
            txn: &mut txn,
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
    }

    /// A commit failed: forget in-memory state that may reflect it.
    fn on_commit_failure(&mut self) {
        self.segments.clear();
        for s in &mut self.services {
            s.on_commit_failure();
        }
    }
}
