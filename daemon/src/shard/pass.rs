//! The shard's event loop: one pass per wake-up (see the `shard` module's
//! documentation for what a pass does, and `conn` for a connection's
//! bounds).
//!
//! [`Shard::run`] polls and calls `pass`, which is the order of a pass, step
//! by step; each step is in the file of its part of the path:
//! - `read`: read what is ready, parse every complete frame in place, route
//!   it — run here, forward to its shard, or hand it to the node;
//! - `execute`: admission, lanes, and running a request through its service;
//! - `write`: after the group commit (`Shard::commit`), the answers that
//!   waited for it, answers for other shards in one batch each, and one
//!   write per connection;
//! - `conns`: connections arriving, moving to another shard (SHARD_BIND),
//!   timing out and leaving;
//! - `bookkeeping`: the loop's per-pass lists and budgets, and answers into
//!   a connection's buffers;
//! - `idle`: waiting for the next pass (yielding the core a little after a
//!   busy pass, before sleeping).
//!
//! All of it is inherent methods of [`Shard`] and [`Loop`] on the shard
//! thread: the split adds no indirection and no allocation to the hot path.

mod bookkeeping;
mod conns;
mod execute;
mod idle;
mod read;
mod write;

use super::conn::{Conn, ConnId};
use super::forward::{AnswersOut, Forwarded};
use super::{ReplyTo, Shard, ShardMsg, SlotOp};
use hashbrown::HashMap;
use rush_protocol::{Reply, Request, RushError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// The mailbox's wake-up; connection `i` is token `i + 1`.
pub const WAKER: mio::Token = mio::Token(0);
/// How often connections are checked for their timeouts.
const TIMER_SCAN: Duration = Duration::from_millis(250);
/// Mailbox messages taken per pass at most (the rest wait for the next
/// pass, which then doesn't sleep).
const MAILBOX_PER_PASS: usize = 4096;

/// Where a request came from, so its answer goes back there.
pub(crate) enum Origin {
    /// A connection of this shard.
    Local(ConnId),
    /// A connection of shard `from`, which forwarded it.
    Remote { from: usize, conn: ConnId },
    /// A node task (redirects, requests that run on every shard).
    Job(ReplyTo),
}

/// A request about to run (or waiting in the lanes to).
pub(crate) struct Work {
    origin: Origin,
    request_id: u64,
    opcode: u8,
    /// The slot it was routed by (checked again where it runs).
    slot: Option<u16>,
    /// Its frame's bytes, counted in flight while it waits.
    size: usize,
    /// Counted in its connection's in-flight requests (it waited).
    counted: bool,
    /// Its connection said READONLY: on a replica, a key read of the
    /// primary's slots runs here ([`replica_readable`]).
    replica_read: bool,
    received: Instant,
    request: Request,
}

/// What a connection may have outstanding before it is not read.
#[derive(Clone, Copy)]
struct Budget {
    max_output: usize,
    max_inflight_requests: usize,
    max_inflight_bytes: usize,
    /// The shard's own budget of request bytes in flight is spent.
    shard_full: bool,
}

impl Budget {
    fn blocks(&self, c: &Conn) -> bool {
        c.queued_output() > self.max_output / 2
            || c.inflight >= self.max_inflight_requests
            || c.inflight_bytes >= self.max_inflight_bytes
            || self.shard_full
    }
}

/// The event loop's connections and per-pass bookkeeping (the shard's
/// services live beside it in [`Shard`]).
pub(crate) struct Loop {
    conns: slab::Slab<Conn>,
    next_gen: u32,
    // Limits, from the config.
    max_frame: usize,
    /// RESP commands are held to the frame limit as a whole.
    resp_limits: rush_protocol::resp::Limits,
    max_inflight_requests: usize,
    max_inflight_bytes: usize,
    /// This shard's part of `server.global_inflight_bytes`.
    inflight_budget: usize,
    max_output: usize,
    max_batch: usize,
    queue_depth: usize,
    idle_timeout: Duration,
    frame_timeout: Duration,
    write_timeout: Duration,
    tick_every: Duration,
    /// Request bytes of this shard's connections in flight.
    inflight_bytes: usize,
    // Per pass; emptied as each pass ends, reused.
    ready: Vec<usize>,
    /// Connections to serve next pass without waiting for an event (a read
    /// filled its buffer, a connection just unblocked or arrived).
    pending: Vec<usize>,
    /// Connections not read because a budget is spent.
    blocked: Vec<usize>,
    /// Connections with answers to write this pass.
    touched: Vec<usize>,
    /// Connections with answers waiting for this pass's commit.
    held_conns: Vec<usize>,
    /// Connections to close at the end of the pass.
    closing: Vec<usize>,
    /// Connections whose peer closed: they close once answered.
    half_closed: Vec<usize>,
    forward: Vec<Vec<Forwarded>>,
    remote: Vec<AnswersOut>,
    jobs_held: Vec<(ReplyTo, Result<Reply, RushError>)>,
    group: Vec<Work>,
    /// Row hashes of the keys the frames in a read buffer will read, and
    /// the storage key being built (`Shard::prefetch_ahead`).
    ahead_hashes: Vec<u64>,
    ahead_key: Vec<u8>,
    /// A request's body as looked at ahead: a RESP command's first
    /// argument as its request's body begins, a forwarded request encoded.
    ahead_body: bytes::BytesMut,
    executed: usize,
    /// How the shard waits for its next pass.
    idle: idle::Idle,
    /// Requests run this pass per lane (they wait for its commit), for
    /// admission control.
    lane_counts: HashMap<u64, usize>,
    more_mail: bool,
    /// Messages taken off the mailbox while the shard waited for a
    /// replica ([`Shard::await_replica`]): the next pass's, first.
    pub(super) stashed: std::collections::VecDeque<ShardMsg>,
    // Between passes.
    tick_waiters: Vec<oneshot::Sender<()>>,
    slot_ops: Vec<SlotOp>,
    /// Pauses for replicas' snapshots, run between passes.
    pub(super) repl_pauses: Vec<crate::replication::source::Pause>,
    next_tick: Instant,
    next_scan: Instant,
    draining: Option<(Instant, Option<oneshot::Sender<()>>)>,
}

impl Shard {
    pub(super) fn run(mut self) {
        tracing::debug!(shard = self.id, "shard started");
        // This thread's metric updates go to this shard's cells.
        crate::metrics::local::enter_shard(self.id);
        // Before the first request (a catalog filter missing owners would
        // deny them).
        for s in &mut self.services {
            s.open(&self.ctx.storage);
        }
        let now = Instant::now();
        self.io.next_tick = now + self.io.tick_every;
        self.io.next_scan = now + TIMER_SCAN;
        let mut events = mio::Events::with_capacity(1024);
        loop {
            let timeout = self.poll_timeout();
            if let Err(e) = self.io.idle.wait(&mut self.poll, &mut events, timeout) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    tracing::error!(shard = self.id, error = %e, "polling failed");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            for ev in events.iter() {
                if ev.token() == WAKER {
                    continue;
                }
                let idx = ev.token().0 - 1;
                let Some(c) = self.io.conns.get_mut(idx) else {
                    continue;
                };
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    c.readable = true;
                    self.io.ready.push(idx);
                }
                if ev.is_writable() || ev.is_write_closed() {
                    c.writable = true;
                    if c.has_output() || c.io.wants_write() {
                        self.io.touch(idx);
                    }
                }
            }
            self.mailbox.rearm();
            let started = Instant::now();
            if self.pass() {
                break;
            }
            self.io.idle.after_pass(self.io.executed, started.elapsed());
        }
        tracing::debug!(shard = self.id, "shard stopped");
    }

    fn poll_timeout(&self) -> Duration {
        let io = &self.io;
        if !self.lanes.is_empty()
            || !io.pending.is_empty()
            || io.more_mail
            || !io.stashed.is_empty()
        {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let next = io.next_tick.min(io.next_scan);
        next.saturating_duration_since(now)
    }

    /// One pass. True when the shard stopped.
    fn pass(&mut self) -> bool {
        let now = Instant::now();
        let now_ms = self.ctx.clock.now_ms();
        let storage = self.ctx.storage.clone();
        let mut txn = self.txn(&storage);
        let backlog = self.lanes.len() + self.mailbox.queued();
        for s in &mut self.services {
            s.begin_group(backlog);
        }
        self.io.executed = 0;
        self.io.lane_counts.clear();

        // 1. The mailbox.
        let mut stop = false;
        let mut taken = 0;
        let mut messages = 0;
        self.io.more_mail = false;
        while let Some(msg) = self
            .io
            .stashed
            .pop_front()
            .or_else(|| self.mailbox.try_recv())
        {
            messages += 1;
            match msg {
                ShardMsg::Node(node) => self.node = Some(node),
                ShardMsg::Accept(stream, protocol) => self.accept(stream, protocol, now),
                ShardMsg::Adopt(conn) => self.adopt_conn(conn),
                ShardMsg::Job(job) => {
                    taken += 1;
                    self.take_job(job, now, now_ms, &mut txn);
                }
                ShardMsg::Forward(mut batch) => {
                    taken += batch.len();
                    let from = batch.from;
                    let mut items = batch.items.drain(..);
                    let mut looked = 0;
                    loop {
                        // Each stretch of the batch looked at before it
                        // runs, as a connection's read buffer is.
                        if looked == 0 {
                            self.prefetch_ahead(read::Looked::Forwarded(items.as_slice()), &txn);
                            looked = read::AHEAD;
                        }
                        looked -= 1;
                        let Some(f) = items.next() else {
                            break;
                        };
                        let w = Work {
                            origin: Origin::Remote { from, conn: f.conn },
                            request_id: f.request_id,
                            opcode: f.opcode,
                            slot: Some(f.slot),
                            size: f.size,
                            counted: false,
                            replica_read: f.replica_read,
                            received: f.received,
                            request: f.request,
                        };
                        self.take_work(w, now_ms, &mut txn);
                    }
                    txn.forget_expected();
                }
                ShardMsg::Answers(answers) => {
                    for (conn, size, frame) in answers.frames {
                        self.io.deliver(conn, size, &frame);
                    }
                    for conn in answers.overflowed {
                        if self.io.conn(conn).is_some() {
                            self.io.close_soon(conn.index as usize, "output over limit");
                        }
                    }
                }
                ShardMsg::Answer(conn, size, frame) => self.io.deliver(conn, size, &frame),
                ShardMsg::Tick(tx) => self.io.tick_waiters.push(tx),
                ShardMsg::Slots(op) => self.io.slot_ops.push(op),
                ShardMsg::ReplPause(p) => self.io.repl_pauses.push(p),
                ShardMsg::Drain(timeout, tx) => {
                    self.io.draining = Some((now + timeout, Some(tx)));
                    self.io.next_scan = now;
                }
                ShardMsg::Stop => stop = true,
            }
            if messages >= MAILBOX_PER_PASS {
                self.io.more_mail = true;
                break;
            }
        }
        self.mailbox.taken(taken);

        // 2. Requests that waited, first (they came first).
        self.run_queued(now_ms, &mut txn);

        // 3. The connections: read, parse, run.
        if self.io.draining.is_none() {
            let blocked = std::mem::take(&mut self.io.blocked);
            let budget = self.io.budget();
            for idx in blocked {
                match self.io.conns.get_mut(idx) {
                    Some(c) if budget.blocks(c) => self.io.blocked.push(idx),
                    Some(c) => {
                        c.in_blocked = false;
                        self.io.ready.push(idx);
                    }
                    None => {}
                }
            }
            let pending = std::mem::take(&mut self.io.pending);
            for &idx in &pending {
                if let Some(c) = self.io.conns.get_mut(idx) {
                    c.in_pending = false;
                }
            }
            self.io.ready.extend_from_slice(&pending);
            let mut ready = std::mem::take(&mut self.io.ready);
            for &idx in &ready {
                self.serve(idx, now, now_ms, &mut txn);
            }
            ready.clear();
            self.io.ready = ready;
        } else {
            self.io.ready.clear();
        }

        // 4. Requests for other shards, one batch each.
        self.send_forwards();

        // 5. The group commit, 6. then what waited for it may be told.
        if self.io.executed > 0 {
            self.ctx.metrics.batch_size.observe(self.io.executed as f64);
        }
        let outcome = self.commit(txn).and_then(|()| self.await_replica());
        self.release_held(outcome.err());

        // 7. Answers to other shards' connections; 8. our connections'.
        self.send_remote_answers();
        self.flush_touched(now);
        if self.io.executed > 0 {
            // A stall shows here (and in the write-back waits, when that
            // was it).
            self.ctx
                .metrics
                .pass_seconds
                .observe(now.elapsed().as_secs_f64());
        }

        // Between passes: slot moves, timers, writing back.
        if !self.io.slot_ops.is_empty() {
            // A slot's data moves outside the shard's groups: RocksDB must
            // hold all of it first (a failed write back fails the move).
            let _ = self.write_back();
            self.rows.clear();
            for op in std::mem::take(&mut self.io.slot_ops) {
                self.slot_op(op);
            }
        }
        for p in std::mem::take(&mut self.io.repl_pauses) {
            self.repl_pause(p);
        }
        let now = Instant::now();
        if !self.io.tick_waiters.is_empty() || now >= self.io.next_tick {
            self.tick(!self.io.tick_waiters.is_empty());
            self.io.next_tick = now + self.io.tick_every;
            for w in self.io.tick_waiters.drain(..) {
                let _ = w.send(());
            }
        }
        self.maybe_write_back();
        if now >= self.io.next_scan {
            self.scan_timeouts(now);
            self.io.next_scan = now + TIMER_SCAN;
        }
        self.check_half_closed();
        self.close_marked();
        if let Some((_, tx)) = &mut self.io.draining {
            if self.io.conns.is_empty() {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(());
                }
            }
        }
        if stop {
            self.finish();
            return true;
        }
        false
    }

    /// While a pass waits for a replica: write out the answers node tasks
    /// posted for connections that hold none of the pass's answers (which
    /// must not be overtaken); keep every other message for the next pass.
    pub(super) fn deliver_answers_while_waiting(&mut self) {
        while let Some(msg) = self.mailbox.try_recv() {
            match msg {
                ShardMsg::Answer(conn, size, frame)
                    if self.io.conn(conn).is_some_and(|c| c.held_reqs.is_empty()) =>
                {
                    self.io.deliver(conn, size, &frame)
                }
                other => self.io.stashed.push_back(other),
            }
        }
        self.flush_touched(Instant::now());
    }

    /// Stop: what still waits is run and answered, timers run once more
    /// (buffered state such as visit counts is written), connections close.
    fn finish(&mut self) {
        while !self.lanes.is_empty() {
            let storage = self.ctx.storage.clone();
            let mut txn = self.txn(&storage);
            self.io.executed = 0;
            self.io.lane_counts.clear();
            let now_ms = self.ctx.clock.now_ms();
            self.run_queued(now_ms, &mut txn);
            let outcome = self.commit(txn);
            self.release_held(outcome.err());
            self.send_remote_answers();
            self.flush_touched(Instant::now());
        }
        for op in std::mem::take(&mut self.io.slot_ops) {
            self.slot_op(op);
        }
        self.tick(true);
        for w in self.io.tick_waiters.drain(..) {
            let _ = w.send(());
        }
        let all: Vec<usize> = self.io.conns.iter().map(|(i, _)| i).collect();
        for idx in all {
            self.io.close_soon(idx, "shutdown");
        }
        self.close_marked();
    }
}
