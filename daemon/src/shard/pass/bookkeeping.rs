//! The loop's bookkeeping: its per-pass lists, the budgets that decide
//! whether a connection is read, and answers into a connection's buffers.

use super::{Budget, Loop};
use crate::config::Config;
use crate::shard::conn::{Conn, ConnId, Held};
use crate::shard::encode_answer;
use crate::shard::forward::AnswersOut;
use hashbrown::HashMap;
use rush_protocol::{Reply, RushError};
use std::time::{Duration, Instant};

impl Loop {
    pub fn new(shards: usize, config: &Config) -> Loop {
        let s = &config.server;
        let now = Instant::now();
        Loop {
            conns: slab::Slab::new(),
            next_gen: 0,
            max_frame: s.max_frame_bytes,
            resp_limits: rush_protocol::resp::Limits::with_max_command(s.max_frame_bytes),
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
            ahead_hashes: Vec::new(),
            ahead_key: Vec::new(),
            ahead_body: bytes::BytesMut::new(),
            executed: 0,
            idle: super::idle::Idle::new(s.yield_before_sleep_pct),
            lane_counts: HashMap::new(),
            more_mail: false,
            tick_waiters: Vec::new(),
            slot_ops: Vec::new(),
            repl_pauses: Vec::new(),
            stashed: Default::default(),
            next_tick: now,
            next_scan: now,
            draining: None,
        }
    }

    pub(super) fn conn(&mut self, id: ConnId) -> Option<&mut Conn> {
        self.conns
            .get_mut(id.index as usize)
            .filter(|c| c.gen == id.gen)
    }

    pub(super) fn touch(&mut self, idx: usize) {
        if let Some(c) = self.conns.get_mut(idx) {
            if !c.in_touched {
                c.in_touched = true;
                self.touched.push(idx);
            }
        }
    }

    pub(super) fn schedule(&mut self, idx: usize) {
        if let Some(c) = self.conns.get_mut(idx) {
            if !c.in_pending {
                c.in_pending = true;
                self.pending.push(idx);
            }
        }
    }

    pub(super) fn close_soon(&mut self, idx: usize, reason: &'static str) {
        if let Some(c) = self.conns.get_mut(idx) {
            if c.closing.is_none() {
                c.closing = Some(reason);
                self.closing.push(idx);
            }
        }
    }

    /// A budget is spent: the connection's requests are not read for now.
    pub(super) fn is_blocked(&self, c: &Conn) -> bool {
        self.budget().blocks(c)
    }

    pub(super) fn budget(&self) -> Budget {
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
    pub(super) fn answer_local(
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
    pub(super) fn deliver(&mut self, id: ConnId, size: usize, frame: &[u8]) {
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
