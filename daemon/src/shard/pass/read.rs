//! Reading: what a connection has, parsed in place frame by frame, each
//! request checked (version, authentication, admin) and routed — run on
//! this shard, forwarded to its own, or handed to a node task.

use super::{Origin, Work};
use crate::resp::command::{Decoded, Now};
use crate::server::node_cmds::{self, NodeAnswer};
use crate::shard::conn::{ConnId, ReadOutcome};
use crate::shard::forward::Forwarded;
use crate::shard::service::Ahead;
use crate::shard::txn::Txn;
use crate::shard::{ReplySink, Shard};
use rush_protocol::frame::{self, Frame, FrameError, Header, HEADER_LEN, VERSION};
use rush_protocol::resp;
use rush_protocol::{ErrorCode, Opcode, Request, RushError, Service, Target};
use std::time::Instant;

/// What [`Shard::prefetch_ahead`] looks at: the requests waiting in a
/// connection's read buffer, or a batch another shard forwarded.
pub(super) enum Looked<'a> {
    Conn(usize),
    Forwarded(&'a [Forwarded]),
}

/// Most requests looked at ahead at once: what fits the first-level
/// cache's outstanding misses, give or take.
pub(super) const AHEAD: usize = 16;

/// Forwarded requests larger than this are not looked at ahead.
const FORWARDED_AHEAD_BYTES: usize = 512;

impl Shard {
    /// Read what connection `idx` has, parse and run its frames.
    pub(super) fn serve(&mut self, idx: usize, now: Instant, now_ms: u64, txn: &mut Txn) {
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
                        (c.read_ahead * 2).min(crate::shard::conn::MAX_READ_AHEAD)
                    } else {
                        crate::shard::conn::MIN_READ_AHEAD
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
        self.prefetch_ahead(Looked::Conn(idx), txn);
        let gen = self.io.conns[idx].gen;
        // Whether the server stopped reading (its answers are not out yet):
        // the rest of a frame then waits on the server, not the client.
        let mut held = false;
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
                held = true;
                if (!c.rbuf.is_empty() || c.readable) && !c.in_blocked {
                    c.in_blocked = true;
                    self.io.blocked.push(idx);
                }
                break;
            }
            if c.resp.is_some() {
                match rush_protocol::resp::parse(&mut c.rbuf, &self.io.resp_limits) {
                    Ok(Some(args)) => self.on_resp(idx, gen, args, now, now_ms, txn),
                    Ok(None) => break,
                    Err(e) => {
                        self.resp_protocol_error(idx, e);
                        break;
                    }
                }
                continue;
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
            // The frame timeout runs while part of a frame waits for the
            // client's next bytes, and starts again after a hold.
            c.frame_started = match (c.rbuf.is_empty() || held, c.frame_started) {
                (true, _) => None,
                (false, None) => Some(now),
                (false, started) => started,
            };
            c.trim_read_buffer();
        }
        txn.forget_expected();
    }

    /// Start loading the row-cache rows the whole requests waiting in
    /// connection `idx`'s read buffer will read (each service names its
    /// requests' keys: [`ShardService::prefetch_key`]), so that a pipeline
    /// of GETs over a table far larger than the CPU's caches waits for
    /// memory once, not once per request. Only worth it for two or more,
    /// and only for keys in slots this shard serves. Keys to read when
    /// lacking ([`Ahead::Read`]) are noted too: the first of them that
    /// misses the row cache reads the others the cache lacks with it, in
    /// one batch ([`Txn::expect_read`]).
    ///
    /// Binary frames are looked at as they are; a RESP command whose
    /// request reads its first argument first
    /// ([`crate::resp::command::ahead_opcode`]) is looked at as that
    /// request's body would begin (the key, length-prefixed); a request
    /// another shard forwarded (decoded) is encoded again, when small.
    ///
    /// [`ShardService::prefetch_key`]: crate::shard::service::ShardService::prefetch_key
    pub(super) fn prefetch_ahead(&mut self, what: Looked<'_>, txn: &Txn) {
        let Shard {
            io,
            services,
            by_service,
            router,
            ctx,
            id,
            ..
        } = self;
        io.ahead_hashes.clear();
        txn.forget_expected();
        let mut note = |op: Opcode, body: &[u8], key: &mut Vec<u8>, hashes: &mut Vec<u64>| {
            let Some(i) = by_service[crate::shard::service_index(op.service())] else {
                return;
            };
            let ahead = services[usize::from(i)].prefetch_key(op, body, key);
            if ahead == Ahead::No {
                return;
            }
            // Only what this shard serves: the others' requests are
            // forwarded (a client that knows no shards: RESP's) or refused,
            // and this shard's rows don't hold their keys.
            let slot = crate::shard::pending::slot_of(key) as u16;
            if router.shard(slot) != *id || !ctx.routing.serving(slot) {
                return;
            }
            let Some(hash) = txn.row_hash(key) else {
                return;
            };
            hashes.push(hash);
            if ahead == Ahead::Read {
                txn.expect_read(key, hash);
            }
        };
        match what {
            Looked::Conn(idx) if io.conns[idx].resp.is_some() => {
                let c = &io.conns[idx];
                let commands = resp::peek_commands(&c.rbuf, &io.resp_limits).take(AHEAD);
                for (name, first) in commands {
                    let (Some(op), Some(arg)) = (crate::resp::command::ahead_opcode(name), first)
                    else {
                        continue;
                    };
                    let Ok(len) = u32::try_from(arg.len()) else {
                        continue;
                    };
                    io.ahead_body.clear();
                    io.ahead_body.extend_from_slice(&len.to_be_bytes());
                    io.ahead_body.extend_from_slice(arg);
                    note(op, &io.ahead_body, &mut io.ahead_key, &mut io.ahead_hashes);
                }
            }
            Looked::Conn(idx) => {
                let c = &io.conns[idx];
                for (opcode, body) in frame::peek_frames(&c.rbuf, io.max_frame).take(AHEAD) {
                    if let Some(op) = Opcode::from_u8(opcode) {
                        note(op, body, &mut io.ahead_key, &mut io.ahead_hashes);
                    }
                }
            }
            Looked::Forwarded(items) => {
                for f in items.iter().take(AHEAD) {
                    // Encoded again to be looked at: not worth it for a
                    // large request (its value would be copied).
                    if f.size > FORWARDED_AHEAD_BYTES {
                        continue;
                    }
                    let Some(op) = Opcode::from_u8(f.opcode) else {
                        continue;
                    };
                    io.ahead_body.clear();
                    f.request.encode_body(&mut io.ahead_body);
                    note(op, &io.ahead_body, &mut io.ahead_key, &mut io.ahead_hashes);
                }
            }
        }
        if io.ahead_hashes.len() >= 2 {
            txn.prefetch_rows(&io.ahead_hashes);
        }
        for s in services.iter_mut() {
            s.look_ahead_done();
        }
    }

    pub(super) fn bad_frame(
        &mut self,
        idx: usize,
        gen: u32,
        e: FrameError,
        now: Instant,
        held: bool,
    ) {
        let reason = self.count_rejected(matches!(e, FrameError::TooLarge { .. }));
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
    pub(super) fn on_frame(
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
            shard.refuse(id, (h.request_id, h.opcode), now, err, held)
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
        self.on_request(idx, gen, h.request_id, request, size, now, now_ms, txn);
    }

    /// One decoded request of connection `idx` (either protocol): checked
    /// for admin, then run here, forwarded, or handed to the node.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn on_request(
        &mut self,
        idx: usize,
        gen: u32,
        request_id: u64,
        request: Request,
        size: usize,
        now: Instant,
        now_ms: u64,
        txn: &mut Txn,
    ) {
        let id = ConnId {
            index: idx as u32,
            gen,
        };
        let opcode = request.opcode().as_u8();
        let h = Header::request(opcode, request_id);
        let state = self.io.conns[idx].state;
        let early = |shard: &mut Shard, err: RushError, held: bool| {
            shard.refuse(id, (h.request_id, h.opcode), now, err, held)
        };
        let held = txn.has_writes();
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
                        replica_read: state.replica_reads,
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
                        replica_read: state.replica_reads,
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
}

impl Shard {
    /// One RESP command of connection `idx`: answered here, or run as the
    /// request it maps onto (its answer is written in RESP, in order, when
    /// the connection is written).
    fn on_resp(
        &mut self,
        idx: usize,
        gen: u32,
        args: Vec<bytes::Bytes>,
        now: Instant,
        now_ms: u64,
        txn: &mut Txn,
    ) {
        // What the command holds in flight: its arguments and their headers.
        let size = args.iter().map(|a| a.len() + 16).sum::<usize>();
        let auth_required = self.node.as_ref().is_some_and(|n| n.auth.required());
        let c = &mut self.io.conns[idx];
        let Some(r) = c.resp.as_deref_mut() else {
            return;
        };
        // READONLY / READWRITE (answered OK by the decoder): whether key
        // reads may be answered from a replica's copy.
        if let [word] = args.as_slice() {
            if word.eq_ignore_ascii_case(b"readonly") {
                c.state.replica_reads = true;
            } else if word.eq_ignore_ascii_case(b"readwrite") {
                c.state.replica_reads = false;
            }
        }
        match r.decode(args, c.state.authenticated, auth_required, now_ms) {
            Decoded::Now(answer) => {
                r.answer(answer);
                self.io.touch(idx);
            }
            Decoded::Quit => {
                r.answer(Now::Simple("OK"));
                self.stop_reading(idx);
            }
            Decoded::Run(request, shape) => {
                let request_id = r.wait(shape);
                // The same validation a binary request gets (key and value
                // limits, field counts): through its wire form.
                let mut body = bytes::BytesMut::new();
                request.encode_body(&mut body);
                let opcode = request.opcode().as_u8();
                match Request::decode(opcode, body.freeze()) {
                    Ok(request) => {
                        self.on_request(idx, gen, request_id, request, size, now, now_ms, txn)
                    }
                    Err(e) => {
                        let metrics = self.ctx.metrics.clone();
                        let id = ConnId {
                            index: idx as u32,
                            gen,
                        };
                        self.io.answer_local(
                            id,
                            request_id,
                            opcode,
                            now,
                            &Err(e),
                            txn.has_writes(),
                            None,
                            &metrics,
                        );
                    }
                }
            }
        }
    }

    /// Bytes that are no RESP: say why (`-ERR Protocol error: ...`), as
    /// Redis does, and close once what came before is answered.
    fn resp_protocol_error(&mut self, idx: usize, e: resp::RespError) {
        self.count_rejected(matches!(e, resp::RespError::TooLarge { .. }));
        if let Some(r) = self.io.conns[idx].resp.as_deref_mut() {
            r.answer(Now::Error(format!("ERR Protocol error: {e}")));
        }
        self.stop_reading(idx);
    }

    /// Read nothing more from connection `idx`; it closes once everything
    /// read so far is answered and written.
    fn stop_reading(&mut self, idx: usize) {
        let c = &mut self.io.conns[idx];
        c.rbuf.clear();
        c.readable = false;
        if !c.peer_closed {
            c.peer_closed = true;
            self.io.half_closed.push(idx);
        }
        self.io.touch(idx);
    }
}

impl Shard {
    /// Answer a request with an error before it runs (bad header, wrong
    /// slot, admission): `held` when earlier writes of the pass hold the
    /// answer until their commit.
    fn refuse(
        &mut self,
        id: ConnId,
        (request_id, opcode): (u64, u8),
        received: Instant,
        err: RushError,
        held: bool,
    ) {
        let metrics = self.ctx.metrics.clone();
        self.io.answer_local(
            id,
            request_id,
            opcode,
            received,
            &Err(err),
            held,
            None,
            &metrics,
        );
    }

    /// Count a frame (or RESP command) refused before it was parsed; the
    /// reason, as the metric names it.
    fn count_rejected(&self, too_large: bool) -> &'static str {
        let reason = if too_large {
            "frame too large"
        } else {
            "malformed frame"
        };
        self.ctx
            .metrics
            .frames_rejected
            .with_label_values(&[reason])
            .inc();
        reason
    }
}
