//! Connections arriving (accepted, or moved here by another shard),
//! moving away (SHARD_BIND), timing out, and leaving.

use crate::shard::conn::{Conn, ConnId, ConnState, Io};
use crate::shard::{encode_answer, Shard};
use rush_protocol::{ErrorCode, Reply, RushError};
use std::sync::atomic::Ordering;
use std::time::Instant;

impl Shard {
    /// Connections whose peer closed its side close once everything they
    /// asked is answered and written.
    pub(super) fn check_half_closed(&mut self) {
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

    pub(super) fn scan_timeouts(&mut self, now: Instant) {
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
            } else if !c.readable
                && c.frame_started
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

    pub(super) fn close_marked(&mut self) {
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

    pub(super) fn accept(
        &mut self,
        stream: std::net::TcpStream,
        protocol: crate::resp::Protocol,
        now: Instant,
    ) {
        let fail = |shard: &mut Shard, why: &str| {
            tracing::warn!(shard = shard.id, why, "dropping an accepted connection");
            shard.connection_gone();
        };
        if stream.set_nonblocking(true).is_err() {
            return fail(self, "set_nonblocking");
        }
        let _ = stream.set_nodelay(true);
        let addrs = (stream.peer_addr().ok(), stream.local_addr().ok());
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
            replica_reads: false,
        };
        let mut conn = Conn::new(io, self.io.next_gen, state, now);
        if protocol == crate::resp::Protocol::Resp {
            let r = crate::resp::RespConn::new(self.node.clone(), addrs.0, addrs.1);
            conn.resp = Some(Box::new(r));
        }
        entry.insert(conn);
        if self.io.draining.is_some() {
            self.io.close_soon(idx, "shutdown");
        } else {
            self.io.schedule(idx);
        }
    }

    /// SHARD_BIND: move connection `idx` to shard `to`; the answer goes out
    /// from there. A connection with requests in flight can't move (their
    /// answers would come back here).
    pub(super) fn bind(
        &mut self,
        idx: usize,
        to: usize,
        request_id: u64,
        opcode: u8,
        now: Instant,
    ) {
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
    pub(super) fn connection_gone(&self) {
        self.ctx.metrics.connections.dec();
        if let Some(node) = &self.node {
            node.connections.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// A connection another shard moved here.
    pub(super) fn adopt_conn(&mut self, conn: Box<Conn>) {
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
}

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

/// The slots of shard `shard` of `shards`, as SHARD_BIND answers them.
fn shard_layout(shard: usize, shards: usize) -> rush_protocol::cmd::ShardBindReply {
    let range = crate::shard::route::slots_of_shard(shard, shards);
    rush_protocol::cmd::ShardBindReply {
        shard: shard as u16,
        shards: shards as u16,
        first_slot: *range.start(),
        last_slot: *range.end(),
    }
}
