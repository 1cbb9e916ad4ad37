//! The shard's event loop: one pass per wake-up (see the `shard` module's
//! documentation for what a pass does, and `conn` for a connection's
//! bounds).

use super::conn::{Conn, ConnId, ConnState, Held, Io, ReadOutcome};
use super::forward::{AnswersOut, Batch, Forwarded};
use super::mailbox::ForwardRefused;
use super::service::Cx;
use super::txn::Txn;
use super::{encode_answer, Job, ReplySink, ReplyTo, Shard, ShardMsg, SlotOp};
use crate::config::Config;
use crate::server::node_cmds::{self, NodeAnswer};
use hashbrown::HashMap;
use rush_protocol::frame::{self, Frame, FrameError, Header, HEADER_LEN, VERSION};
use rush_protocol::{ErrorCode, Opcode, Reply, Request, RushError, Service, Target};
use std::sync::atomic::Ordering;
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
    executed: usize,
    /// Requests run this pass per lane (they wait for its commit), for
    /// admission control.
    lane_counts: HashMap<u64, usize>,
    more_mail: bool,
    // Between passes.
    tick_waiters: Vec<oneshot::Sender<()>>,
    slot_ops: Vec<SlotOp>,
    next_tick: Instant,
    next_scan: Instant,
    draining: Option<(Instant, Option<oneshot::Sender<()>>)>,
}

impl Loop {
    pub fn new(shards: usize, config: &Config) -> Loop {
        let s = &config.server;
        let now = Instant::now();
        Loop {
            conns: slab::Slab::new(),
            next_gen: 0,
            max_frame: s.max_frame_bytes,
            max_inflight_requests: s.max_inflight_requests,
            max_inflight_bytes: s.max_inflight_bytes,
            inflight_budget: (s.global_inflight_bytes / shards.max(1)).max(s.max_inflight_bytes),
            max_output: s.max_output_bytes,
            max_batch: config.storage.max_batch,
            queue_depth: config.storage.queue_depth,
            idle_timeout: Duration::from_secs(s.idle_timeout_secs),
            frame_timeout: Duration::from_secs(s.frame_timeout_secs),
            write_timeout: Duration::from_secs(s.write_timeout_secs),
            tick_every: Duration::from_millis(config.storage.tick_ms),
            inflight_bytes: 0,
            ready: Vec::new(),
            pending: Vec::new(),
            blocked: Vec::new(),
            touched: Vec::new(),
            held_conns: Vec::new(),
            closing: Vec::new(),
            half_closed: Vec::new(),
            forward: (0..shards).map(|_| Vec::new()).collect(),
            remote: (0..shards)
                .map(|_| AnswersOut::with_budget(s.max_output_bytes))
                .collect(),
            jobs_held: Vec::new(),
            group: Vec::new(),
            executed: 0,
            lane_counts: HashMap::new(),
            more_mail: false,
            tick_waiters: Vec::new(),
            slot_ops: Vec::new(),
            next_tick: now,
            next_scan: now,
            draining: None,
        }
    }

    fn conn(&mut self, id: ConnId) -> Option<&mut Conn> {
        self.conns
            .get_mut(id.index as usize)
            .filter(|c| c.gen == id.gen)
    }

    fn touch(&mut self, idx: usize) {
        if let Some(c) = self.conns.get_mut(idx) {
            if !c.in_touched {
                c.in_touched = true;
                self.touched.push(idx);
            }
        }
    }

    fn schedule(&mut self, idx: usize) {
        if let Some(c) = self.conns.get_mut(idx) {
            if !c.in_pending {
                c.in_pending = true;
                self.pending.push(idx);
            }
        }
    }

    fn close_soon(&mut self, idx: usize, reason: &'static str) {
        if let Some(c) = self.conns.get_mut(idx) {
            if c.closing.is_none() {
                c.closing = Some(reason);
                self.closing.push(idx);
            }
        }
    }

    /// A budget is spent: the connection's requests are not read for now.
    fn is_blocked(&self, c: &Conn) -> bool {
        self.budget().blocks(c)
    }

    fn budget(&self) -> Budget {
        Budget {
            max_output: self.max_output,
            max_inflight_requests: self.max_inflight_requests,
            max_inflight_bytes: self.max_inflight_bytes,
            shard_full: self.inflight_bytes >= self.inflight_budget,
        }
    }

    /// An answer for connection `id`. `release`: the request's size, when
    /// it was counted in flight.
    #[allow(clippy::too_many_arguments)]
    fn answer_local(
        &mut self,
        id: ConnId,
        request_id: u64,
        opcode: u8,
        received: Instant,
        result: &Result<Reply, RushError>,
        held: bool,
        release: Option<usize>,
        metrics: &crate::metrics::Metrics,
    ) {
        let idx = id.index as usize;
        let max_output = self.max_output;
        let Some(c) = self.conn(id) else {
            return;
        };
        let mut freed = 0;
        if let Some(size) = release {
            c.inflight = c.inflight.saturating_sub(1);
            c.inflight_bytes = c.inflight_bytes.saturating_sub(size);
            freed = size;
        }
        if c.closing.is_some() {
            self.inflight_bytes = self.inflight_bytes.saturating_sub(freed);
            return;
        }
        let before = c.queued_output();
        let buf = if held { &mut c.held } else { &mut c.out };
        let start = buf.len();
        let outcome = encode_answer(buf, opcode, request_id, result);
        if before > 0 && c.queued_output() > max_output {
            // The client isn't taking its answers: close rather than grow.
            let buf = if held { &mut c.held } else { &mut c.out };
            buf.truncate(start);
            self.inflight_bytes = self.inflight_bytes.saturating_sub(freed);
            self.close_soon(idx, "output over limit");
            return;
        }
        if held {
            c.held_reqs.push(Held {
                request_id,
                opcode,
                received,
                outcome,
            });
            if c.held_reqs.len() == 1 {
                self.held_conns.push(idx);
            }
        } else {
            metrics.observe(opcode, outcome, received.elapsed().as_secs_f64());
        }
        self.inflight_bytes = self.inflight_bytes.saturating_sub(freed);
        self.touch(idx);
    }

    /// An encoded answer from elsewhere (another shard, a node task) for
    /// one of this shard's connections.
    fn deliver(&mut self, id: ConnId, size: usize, frame: &[u8]) {
        let idx = id.index as usize;
        let max_output = self.max_output;
        let Some(c) = self.conn(id) else {
            // Closed meanwhile; its bytes were released when it closed.
            return;
        };
        c.inflight = c.inflight.saturating_sub(1);
        c.inflight_bytes = c.inflight_bytes.saturating_sub(size);
        self.inflight_bytes = self.inflight_bytes.saturating_sub(size);
        let c = self.conns.get_mut(idx).expect("looked up above");
        if c.closing.is_some() {
            return;
        }
        let before = c.queued_output();
        if before > 0 && before + frame.len() > max_output {
            self.close_soon(idx, "output over limit");
            return;
        }
        c.out.extend_from_slice(frame);
        self.touch(idx);
    }
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
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
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
                    if !c.out.is_empty() || c.io.wants_write() {
                        self.io.touch(idx);
                    }
                }
            }
            self.mailbox.rearm();
            if self.pass() {
                break;
            }
        }
        tracing::debug!(shard = self.id, "shard stopped");
    }

    fn poll_timeout(&self) -> Duration {
        let io = &self.io;
        if !self.lanes.is_empty() || !io.pending.is_empty() || io.more_mail {
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
        let mut txn = Txn::new(&storage, self.id).with_rows(std::mem::take(&mut self.rows));
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
        while let Some(msg) = self.mailbox.try_recv() {
            messages += 1;
            match msg {
                ShardMsg::Node(node) => self.node = Some(node),
                ShardMsg::Accept(stream) => self.accept(stream, now),
                ShardMsg::Adopt(conn) => self.adopt_conn(conn),
                ShardMsg::Job(job) => {
                    taken += 1;
                    self.take_job(job, now, now_ms, &mut txn);
                }
                ShardMsg::Forward(batch) => {
                    taken += batch.len();
                    let from = batch.from;
                    for f in batch.items {
                        let w = Work {
                            origin: Origin::Remote { from, conn: f.conn },
                            request_id: f.request_id,
                            opcode: f.opcode,
                            slot: Some(f.slot),
                            size: f.size,
                            counted: false,
                            received: f.received,
                            request: f.request,
                        };
                        self.take_work(w, now_ms, &mut txn);
                    }
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
        let outcome = self.commit(txn);
        self.release_held(outcome.err());

        // 7. Answers to other shards' connections; 8. our connections'.
        self.send_remote_answers();
        self.flush_touched(now);

        // Between passes: slot moves, timers.
        if !self.io.slot_ops.is_empty() {
            self.rows.clear();
            for op in std::mem::take(&mut self.io.slot_ops) {
                self.slot_op(op);
            }
        }
        let now = Instant::now();
        if !self.io.tick_waiters.is_empty() || now >= self.io.next_tick {
            self.tick(!self.io.tick_waiters.is_empty());
            self.io.next_tick = now + self.io.tick_every;
            for w in self.io.tick_waiters.drain(..) {
                let _ = w.send(());
            }
        }
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

    /// A job from a node task.
    fn take_job(&mut self, job: Job, now: Instant, now_ms: u64, txn: &mut Txn) {
        // A request whose asker is gone is not run: it can't learn the
        // outcome, so not applying it is as correct as applying it.
        if job.reply.is_abandoned() {
            return;
        }
        let slot = match job.request.target() {
            Ok(Target::Slot(s)) => Some(s),
            _ => None,
        };
        let w = Work {
            origin: Origin::Job(job.reply),
            request_id: 0,
            opcode: job.request.opcode().as_u8(),
            slot,
            size: 0,
            counted: false,
            received: now,
            request: job.request,
        };
        self.take_work(w, now_ms, txn);
    }

    /// Admission, then run now, or wait in the lanes (or BUSY past their
    /// depth).
    fn take_work(&mut self, mut w: Work, now_ms: u64, txn: &mut Txn) {
        let Some(i) = self.service_of(&w.request) else {
            let e = RushError::internal(format!(
                "{} reached a shard but is not a shard request",
                w.request.opcode().name()
            ));
            return self.finish_work(w, Err(e), txn.has_writes());
        };
        let lane = self.services[i].lane(&w.request);
        let queued = lane.map_or(0, |l| {
            self.lanes.depth(l) + self.io.lane_counts.get(&l).copied().unwrap_or(0)
        });
        if let Some(answer) = self.services[i].admit(&w.request, queued, now_ms) {
            return self.finish_work(w, answer, txn.has_writes());
        }
        if self.io.executed >= self.io.max_batch || !self.lanes.is_empty() {
            if self.lanes.len() >= self.io.queue_depth {
                let e = RushError::busy("shard queue is full; retry with backoff");
                return self.finish_work(w, Err(e), txn.has_writes());
            }
            if let Origin::Local(id) = &w.origin {
                if let Some(c) = self.io.conn(*id) {
                    c.inflight += 1;
                    c.inflight_bytes += w.size;
                    self.io.inflight_bytes += w.size;
                    w.counted = true;
                }
            }
            if let Some(l) = lane {
                self.lanes.note_depth(l, queued + 1);
            }
            self.lanes.push(lane, w);
            return;
        }
        self.execute(i, lane, w, now_ms, txn);
    }

    fn run_queued(&mut self, now_ms: u64, txn: &mut Txn) {
        if self.lanes.is_empty() {
            return;
        }
        let room = self.io.max_batch.saturating_sub(self.io.executed);
        let mut group = std::mem::take(&mut self.io.group);
        self.lanes.next_group(room, &mut group);
        for w in group.drain(..) {
            match self.service_of(&w.request) {
                Some(i) => {
                    let lane = self.services[i].lane(&w.request);
                    self.execute(i, lane, w, now_ms, txn);
                }
                None => self.finish_work(
                    w,
                    Err(RushError::internal("not a shard request")),
                    txn.has_writes(),
                ),
            }
        }
        self.io.group = group;
    }

    /// Run one request on this shard.
    fn execute(&mut self, i: usize, lane: Option<u64>, w: Work, now_ms: u64, txn: &mut Txn) {
        let abandoned = match &w.origin {
            Origin::Local(id) => self.io.conn(*id).is_none_or(|c| c.closing.is_some()),
            Origin::Job(reply) => reply.is_abandoned(),
            Origin::Remote { .. } => false,
        };
        if abandoned {
            return self.finish_work(w, Err(RushError::unavailable("gone")), false);
        }
        let result = match w.slot.map(|s| self.ctx.routing.check(s)) {
            Some(Err(e)) => Err(e),
            _ => {
                let mut cx = Cx {
                    now: now_ms,
                    txn,
                    segments: &mut self.segments,
                    backlog: self.lanes.len(),
                    flush: false,
                };
                self.services[i].apply(&w.request, &mut cx)
            }
        };
        txn.finish_request(result.is_ok());
        self.io.executed += 1;
        if let Some(l) = lane {
            let n = self.io.lane_counts.entry(l).or_default();
            *n += 1;
            let depth = *n + self.lanes.depth(l);
            self.lanes.note_depth(l, depth);
        }
        let held = txn.has_writes();
        self.finish_work(w, result, held);
    }

    /// Send a request's answer where it came from. `held`: it waits for
    /// the pass's commit.
    fn finish_work(&mut self, w: Work, result: Result<Reply, RushError>, held: bool) {
        let metrics = &self.ctx.metrics;
        match w.origin {
            Origin::Local(id) => self.io.answer_local(
                id,
                w.request_id,
                w.opcode,
                w.received,
                &result,
                held,
                w.counted.then_some(w.size),
                metrics,
            ),
            Origin::Remote { from, conn } => {
                let mut outcome = Ok(());
                self.io.remote[from].push(conn, w.request_id, w.opcode, w.size, held, |b| {
                    outcome = encode_answer(b, w.opcode, w.request_id, &result)
                });
                metrics.observe(w.opcode, outcome, w.received.elapsed().as_secs_f64());
            }
            Origin::Job(reply) => {
                if held {
                    self.io.jobs_held.push((reply, result));
                } else {
                    reply.send(result);
                }
            }
        }
    }

    /// Read what connection `idx` has, parse and run its frames.
    fn serve(&mut self, idx: usize, now: Instant, now_ms: u64, txn: &mut Txn) {
        let budget = self.io.budget();
        let Some(c) = self.io.conns.get_mut(idx) else {
            return;
        };
        if c.closing.is_some() {
            return;
        }
        if !budget.blocks(c) && c.readable && !c.peer_closed {
            let want = c.next_read_size();
            match c.io.read(&mut c.rbuf, want) {
                Ok(ReadOutcome::Data { full }) => {
                    c.last_read = now;
                    c.read_ahead = if full {
                        (c.read_ahead * 2).min(super::conn::MAX_READ_AHEAD)
                    } else {
                        super::conn::MIN_READ_AHEAD
                    };
                    c.readable = full;
                    if full {
                        self.io.schedule(idx);
                    }
                }
                Ok(ReadOutcome::WouldBlock) => c.readable = false,
                Ok(ReadOutcome::Eof) => {
                    c.readable = false;
                    c.peer_closed = true;
                    self.io.half_closed.push(idx);
                }
                Err(e) => {
                    tracing::debug!(error = %e, "read failed");
                    self.io.close_soon(idx, "read error");
                    return;
                }
            }
            let c = self.io.conns.get_mut(idx).expect("still open");
            if c.io.wants_write() {
                self.io.touch(idx);
            }
        }
        let gen = self.io.conns[idx].gen;
        loop {
            let budget = self.io.budget();
            // A frame may have moved the connection away (SHARD_BIND).
            let Some(c) = self.io.conns.get_mut(idx).filter(|c| c.gen == gen) else {
                return;
            };
            if c.closing.is_some() {
                break;
            }
            if budget.blocks(c) {
                if (!c.rbuf.is_empty() || c.readable) && !c.in_blocked {
                    c.in_blocked = true;
                    self.io.blocked.push(idx);
                }
                break;
            }
            match frame::parse(&mut c.rbuf, self.io.max_frame) {
                Ok(Some(f)) => self.on_frame(idx, gen, f, now, now_ms, txn),
                Ok(None) => break,
                Err(e) => {
                    self.bad_frame(idx, gen, e, now, txn.has_writes());
                    break;
                }
            }
        }
        if let Some(c) = self.io.conns.get_mut(idx) {
            c.frame_started = match (c.rbuf.is_empty(), c.frame_started) {
                (true, _) => None,
                (false, None) => Some(now),
                (false, started) => started,
            };
            c.trim_read_buffer();
        }
    }

    fn bad_frame(&mut self, idx: usize, gen: u32, e: FrameError, now: Instant, held: bool) {
        let reason = match &e {
            FrameError::TooLarge { .. } => "frame too large",
            _ => "malformed frame",
        };
        self.ctx
            .metrics
            .frames_rejected
            .with_label_values(&[reason])
            .inc();
        let (opcode, request_id) = match &e {
            FrameError::TooLarge {
                header: Some(h), ..
            } => (h.opcode, h.request_id),
            _ => (0, 0),
        };
        let code = match &e {
            FrameError::TooLarge { .. } => ErrorCode::TooLarge,
            _ => ErrorCode::BadRequest,
        };
        let err = RushError::new(code, format!("{e}; closing the connection"));
        self.io.answer_local(
            ConnId {
                index: idx as u32,
                gen,
            },
            request_id,
            opcode,
            now,
            &Err(err),
            held,
            None,
            &self.ctx.metrics,
        );
        self.io.close_soon(idx, reason);
    }

    /// One frame of connection `idx`.
    fn on_frame(
        &mut self,
        idx: usize,
        gen: u32,
        f: Frame,
        now: Instant,
        now_ms: u64,
        txn: &mut Txn,
    ) {
        let h: Header = f.header;
        let id = ConnId {
            index: idx as u32,
            gen,
        };
        let size = f.body.len() + HEADER_LEN;
        let state = self.io.conns[idx].state;
        let early = |shard: &mut Shard, err: RushError, held: bool| {
            let metrics = shard.ctx.metrics.clone();
            shard.io.answer_local(
                id,
                h.request_id,
                h.opcode,
                now,
                &Err(err),
                held,
                None,
                &metrics,
            );
        };
        let held = txn.has_writes();
        if h.version != VERSION {
            return early(
                self,
                RushError::new(
                    ErrorCode::UnsupportedVersion,
                    format!(
                        "protocol version {} is not supported; this server speaks {VERSION}",
                        h.version
                    ),
                ),
                held,
            );
        }
        if let Some(e) = h.request_flags_error() {
            return early(self, e, held);
        }
        if !state.authenticated && h.opcode != Opcode::Hello.as_u8() {
            return early(
                self,
                RushError::new(
                    ErrorCode::Unauthorized,
                    "authentication required: send HELLO with the token first",
                ),
                held,
            );
        }
        let request = match Request::decode(h.opcode, f.body) {
            Ok(r) => r,
            Err(e) => return early(self, e, held),
        };
        let target = match request.target() {
            Ok(t) => t,
            Err(e) => return early(self, e, held),
        };
        // Admin requests: whatever runs on every shard, and the admin and
        // cluster services (the cluster map itself is readable by anyone).
        let admin_only = target == Target::AllShards
            || matches!(
                request.opcode().service(),
                Service::Admin | Service::Cluster
            );
        if admin_only && !state.admin {
            return early(
                self,
                RushError::new(
                    ErrorCode::Forbidden,
                    format!("{} needs the admin token", request.opcode().name()),
                ),
                held,
            );
        }
        match target {
            Target::Slot(slot) => {
                let dest = self.router.shard(slot);
                if dest == self.id {
                    let w = Work {
                        origin: Origin::Local(id),
                        request_id: h.request_id,
                        opcode: h.opcode,
                        slot: Some(slot),
                        size,
                        counted: false,
                        received: now,
                        request,
                    };
                    self.take_work(w, now_ms, txn);
                } else {
                    let c = &mut self.io.conns[idx];
                    c.inflight += 1;
                    c.inflight_bytes += size;
                    self.io.inflight_bytes += size;
                    self.io.forward[dest].push(Forwarded {
                        conn: id,
                        request_id: h.request_id,
                        opcode: h.opcode,
                        slot,
                        size,
                        request,
                        received: now,
                    });
                }
            }
            Target::Node | Target::AllShards => {
                let Some(node) = self.node.clone() else {
                    return early(self, RushError::unavailable("the node is starting"), held);
                };
                let later = if target == Target::AllShards {
                    Some(request)
                } else {
                    let state = &mut self.io.conns[idx].state;
                    match node_cmds::handle(&node, state, request, self.id) {
                        NodeAnswer::Now(result) => {
                            // Node answers depend on nothing this pass wrote.
                            let metrics = self.ctx.metrics.clone();
                            self.io.answer_local(
                                id,
                                h.request_id,
                                h.opcode,
                                now,
                                &result,
                                false,
                                None,
                                &metrics,
                            );
                            None
                        }
                        NodeAnswer::Bind(shard) => {
                            self.bind(idx, shard, h.request_id, h.opcode, now);
                            None
                        }
                        NodeAnswer::Later(request) => Some(request),
                    }
                };
                if let Some(request) = later {
                    // Cluster operations and broadcasts wait on other
                    // shards, storage and peers: a node task answers.
                    let c = &mut self.io.conns[idx];
                    c.inflight += 1;
                    c.inflight_bytes += size;
                    self.io.inflight_bytes += size;
                    let sink = ReplySink {
                        shard: node.shards[self.id].clone(),
                        conn: id,
                        request_id: h.request_id,
                        opcode: h.opcode,
                        size,
                        received: now,
                        metrics: self.ctx.metrics.clone(),
                    };
                    node_cmds::spawn(&node, target, request, sink);
                }
            }
        }
    }

    fn send_forwards(&mut self) {
        for dest in 0..self.io.forward.len() {
            if self.io.forward[dest].is_empty() {
                continue;
            }
            let items = std::mem::take(&mut self.io.forward[dest]);
            let Some(node) = &self.node else {
                continue;
            };
            self.ctx.metrics.forwarded.inc_by(items.len() as u64);
            let batch = Batch {
                from: self.id,
                items,
            };
            let refused = match node.shards[dest].forward(batch) {
                Ok(()) => continue,
                Err(ForwardRefused::Busy(b)) => (
                    b,
                    RushError::busy("shard queue is full; retry with backoff"),
                ),
                Err(ForwardRefused::Gone(b)) => {
                    (b, RushError::unavailable("shard is shutting down"))
                }
            };
            let (batch, err) = refused;
            let metrics = self.ctx.metrics.clone();
            for f in batch.items {
                // Nothing was run: the answer depends on no write.
                self.io.answer_local(
                    f.conn,
                    f.request_id,
                    f.opcode,
                    f.received,
                    &Err(err.clone()),
                    false,
                    Some(f.size),
                    &metrics,
                );
            }
        }
    }

    /// The commit is done (`failed`: it failed with this error): answers
    /// that waited for it go out, or become that error.
    fn release_held(&mut self, failed: Option<RushError>) {
        let metrics = &self.ctx.metrics;
        let now = Instant::now();
        let held = std::mem::take(&mut self.io.held_conns);
        for &idx in &held {
            let Some(c) = self.io.conns.get_mut(idx) else {
                continue;
            };
            match &failed {
                None => {
                    for h in &c.held_reqs {
                        metrics.observe(
                            h.opcode,
                            h.outcome,
                            now.duration_since(h.received).as_secs_f64(),
                        );
                    }
                    c.release_held();
                }
                Some(err) => {
                    c.held.clear();
                    for h in c.held_reqs.drain(..) {
                        frame::encode_error(&mut c.out, h.opcode, h.request_id, err);
                        metrics.observe(
                            h.opcode,
                            Err(err.code),
                            now.duration_since(h.received).as_secs_f64(),
                        );
                    }
                }
            }
            self.io.touch(idx);
        }
        let mut held = held;
        held.clear();
        self.io.held_conns = held;
        if let Some(err) = &failed {
            for r in &mut self.io.remote {
                r.fail_held(err);
            }
        }
        for (reply, result) in self.io.jobs_held.drain(..) {
            match &failed {
                None => reply.send(result),
                Some(err) => reply.send(Err(err.clone())),
            }
        }
    }

    fn send_remote_answers(&mut self) {
        for from in 0..self.io.remote.len() {
            if self.io.remote[from].is_empty() {
                continue;
            }
            let answers = self.io.remote[from].take();
            if let Some(node) = &self.node {
                node.shards[from].answers(answers);
            }
        }
    }

    fn flush_touched(&mut self, now: Instant) {
        let mut touched = std::mem::take(&mut self.io.touched);
        for &idx in &touched {
            let budget = self.io.budget();
            let Some(c) = self.io.conns.get_mut(idx) else {
                continue;
            };
            c.in_touched = false;
            if matches!(
                c.closing,
                Some("output over limit" | "write error" | "write timeout")
            ) {
                continue;
            }
            if !c.writable && !c.out.is_empty() {
                // The socket is full; its writable event brings it back.
                c.write_stalled.get_or_insert(now);
                continue;
            }
            let was_blocked = budget.blocks(c);
            if let Err(e) = c.flush(now) {
                tracing::debug!(error = %e, "write failed");
                self.io.close_soon(idx, "write error");
                continue;
            }
            let c = &self.io.conns[idx];
            if was_blocked && !self.io.is_blocked(c) {
                self.io.schedule(idx);
            }
        }
        touched.clear();
        self.io.touched = touched;
    }

    /// Connections whose peer closed its side close once everything they
    /// asked is answered and written.
    fn check_half_closed(&mut self) {
        let list = std::mem::take(&mut self.io.half_closed);
        for idx in list {
            let Some(c) = self.io.conns.get(idx) else {
                continue;
            };
            if c.closing.is_some() {
                continue;
            }
            if c.inflight == 0 && c.queued_output() == 0 && !c.io.wants_write() {
                let reason = if c.rbuf.is_empty() {
                    "closed by client"
                } else {
                    "closed mid-frame"
                };
                self.io.close_soon(idx, reason);
            } else {
                self.io.half_closed.push(idx);
            }
        }
    }

    fn scan_timeouts(&mut self, now: Instant) {
        let io = &mut self.io;
        let draining_past = io.draining.as_ref().map(|(deadline, _)| now >= *deadline);
        let mut close = Vec::new();
        for (idx, c) in io.conns.iter() {
            if c.closing.is_some() {
                continue;
            }
            let reason = if let Some(past) = draining_past {
                (past || (c.inflight == 0 && c.queued_output() == 0)).then_some("shutdown")
            } else if c.io.handshaking() && now.duration_since(c.opened) > io.frame_timeout {
                Some("tls handshake timeout")
            } else if c
                .frame_started
                .is_some_and(|t| now.duration_since(t) > io.frame_timeout)
            {
                Some("frame timeout")
            } else if c
                .write_stalled
                .is_some_and(|t| now.duration_since(t) > io.write_timeout)
            {
                tracing::info!(
                    "client did not read its answers for {:?}; disconnecting",
                    io.write_timeout
                );
                Some("write timeout")
            } else if c.rbuf.is_empty()
                && c.inflight == 0
                && c.queued_output() == 0
                && now.duration_since(c.last_read) > io.idle_timeout
            {
                Some("idle timeout")
            } else {
                None
            };
            if let Some(r) = reason {
                close.push((idx, r));
            }
        }
        for (idx, r) in close {
            io.close_soon(idx, r);
        }
    }

    fn close_marked(&mut self) {
        let list = std::mem::take(&mut self.io.closing);
        let now = Instant::now();
        for idx in list {
            let Some(mut c) = self.io.conns.try_remove(idx) else {
                continue;
            };
            let reason = c.closing.unwrap_or("closed");
            if !matches!(
                reason,
                "output over limit" | "write error" | "write timeout"
            ) {
                // What it was told last (an error saying why) goes out if
                // the socket takes it now.
                let _ = c.flush(now);
            }
            c.io.close();
            let _ = self.poll.registry().deregister(c.io.socket());
            self.io.inflight_bytes = self.io.inflight_bytes.saturating_sub(c.inflight_bytes);
            self.ctx
                .metrics
                .connections_closed
                .with_label_values(&[reason])
                .inc();
            self.connection_gone();
            tracing::debug!(reason, "connection closed");
        }
    }

    fn accept(&mut self, stream: std::net::TcpStream, now: Instant) {
        let fail = |shard: &mut Shard, why: &str| {
            tracing::warn!(shard = shard.id, why, "dropping an accepted connection");
            shard.connection_gone();
        };
        if stream.set_nonblocking(true).is_err() {
            return fail(self, "set_nonblocking");
        }
        let _ = stream.set_nodelay(true);
        let mut sock = mio::net::TcpStream::from_std(stream);
        let entry = self.io.conns.vacant_entry();
        let idx = entry.key();
        if !register(&self.poll, &mut sock, idx) {
            return fail(self, "register");
        }
        let io = match &self.ctx.tls {
            None => Io::plain(sock),
            Some(config) => match Io::tls(sock, config.clone()) {
                Ok(io) => io,
                Err(_) => return fail(self, "tls"),
            },
        };
        let open = self.node.as_ref().is_none_or(|n| !n.auth.required());
        self.io.next_gen = self.io.next_gen.wrapping_add(1);
        let state = ConnState {
            authenticated: open,
            admin: open,
        };
        entry.insert(Conn::new(io, self.io.next_gen, state, now));
        if self.io.draining.is_some() {
            self.io.close_soon(idx, "shutdown");
        } else {
            self.io.schedule(idx);
        }
    }

    /// SHARD_BIND: move connection `idx` to shard `to`; the answer goes out
    /// from there. A connection with requests in flight can't move (their
    /// answers would come back here).
    fn bind(&mut self, idx: usize, to: usize, request_id: u64, opcode: u8, now: Instant) {
        let id = ConnId {
            index: idx as u32,
            gen: self.io.conns[idx].gen,
        };
        let metrics = self.ctx.metrics.clone();
        let shards = self.io.forward.len();
        let reply = |shard: usize| Ok(Reply::ShardBind(shard_layout(shard, shards)));
        if to == self.id {
            self.io.answer_local(
                id,
                request_id,
                opcode,
                now,
                &reply(to),
                false,
                None,
                &metrics,
            );
            return;
        }
        let c = &self.io.conns[idx];
        let busy = c.inflight > 0 || !c.held_reqs.is_empty() || !c.rbuf.is_empty();
        let Some(node) = self.node.clone() else {
            return;
        };
        if busy || to >= shards {
            let e = if to >= shards {
                RushError::bad_request(format!("shard {to} doesn't exist; this node runs {shards}"))
            } else {
                RushError::new(
                    ErrorCode::Conflict,
                    "SHARD_BIND must be sent with no other request in flight on the connection",
                )
            };
            self.io
                .answer_local(id, request_id, opcode, now, &Err(e), false, None, &metrics);
            return;
        }
        let mut c = self.io.conns.remove(idx);
        if self.poll.registry().deregister(c.io.socket()).is_err() {
            // Can't move it; it closes.
            self.ctx.metrics.connections.dec();
            node.connections.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        c.in_touched = false;
        c.in_pending = false;
        c.in_blocked = false;
        let _ = encode_answer(&mut c.out, opcode, request_id, &reply(to));
        metrics.observe(opcode, Ok(()), now.elapsed().as_secs_f64());
        node.shards[to].adopt(Box::new(c));
    }

    /// A connection of this shard is gone (closed, or dropped before it
    /// was served): the node's counts go down.
    fn connection_gone(&self) {
        self.ctx.metrics.connections.dec();
        if let Some(node) = &self.node {
            node.connections.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A connection another shard moved here.
    fn adopt_conn(&mut self, conn: Box<Conn>) {
        let mut c = *conn;
        let entry = self.io.conns.vacant_entry();
        let idx = entry.key();
        if !register(&self.poll, c.io.socket(), idx) {
            tracing::warn!(
                shard = self.id,
                "dropping a moved connection: register failed"
            );
            self.connection_gone();
            return;
        }
        self.io.next_gen = self.io.next_gen.wrapping_add(1);
        c.gen = self.io.next_gen;
        // Registration reports what is ready now; until then assume both.
        c.readable = true;
        c.writable = true;
        entry.insert(c);
        self.io.touch(idx);
        self.io.schedule(idx);
    }

    /// Stop: what still waits is run and answered, timers run once more
    /// (buffered state such as visit counts is written), connections close.
    fn finish(&mut self) {
        while !self.lanes.is_empty() {
            let storage = self.ctx.storage.clone();
            let mut txn = Txn::new(&storage, self.id).with_rows(std::mem::take(&mut self.rows));
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

/// The slots of shard `shard` of `shards`, as SHARD_BIND answers them.
/// Register connection `idx`'s socket for both readiness kinds (its token
/// is `idx + 1`; 0 is the waker's).
fn register(poll: &mio::Poll, sock: &mut mio::net::TcpStream, idx: usize) -> bool {
    poll.registry()
        .register(
            sock,
            mio::Token(idx + 1),
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        )
        .is_ok()
}

fn shard_layout(shard: usize, shards: usize) -> rush_protocol::cmd::ShardBindReply {
    let range = super::route::slots_of_shard(shard, shards);
    rush_protocol::cmd::ShardBindReply {
        shard: shard as u16,
        shards: shards as u16,
        first_slot: *range.start(),
        last_slot: *range.end(),
    }
}
