//! Writing out: requests for other shards in one batch per destination,
//! the answers held for the group commit, answers to other shards'
//! connections, and one write per connection.

use crate::shard::forward::Batch;
use crate::shard::mailbox::ForwardRefused;
use crate::shard::Shard;
use rush_protocol::frame;
use rush_protocol::RushError;
use std::time::Instant;

impl Shard {
    pub(super) fn send_forwards(&mut self) {
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
    pub(super) fn release_held(&mut self, failed: Option<RushError>) {
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

    pub(super) fn send_remote_answers(&mut self) {
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

    pub(super) fn flush_touched(&mut self, now: Instant) {
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
            if !c.writable && c.has_output() {
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
}
