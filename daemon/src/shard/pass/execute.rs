//! Running requests: admission, waiting in the lanes, and applying a
//! request through its service; then its answer goes where it came from.

use super::{Origin, Work};
use crate::shard::service::Cx;
use crate::shard::txn::Txn;
use crate::shard::{encode_answer, Job, Shard};
use rush_protocol::{Reply, Request, RushError, Target};
use std::time::Instant;

/// What a replica answers from its copy (READONLY): key reads. Never
/// writes, short links (a visit counts), limits or envelopes.
fn replica_readable(r: &Request) -> bool {
    matches!(
        r,
        Request::Get(_)
            | Request::Exists(_)
            | Request::Ttl(_)
            | Request::HGet(_)
            | Request::HGetAll(_)
            | Request::HLen(_)
    )
}

impl Shard {
    /// A job from a node task.
    pub(super) fn take_job(&mut self, job: Job, now: Instant, now_ms: u64, txn: &mut Txn) {
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
            replica_read: false,
            received: now,
            request: job.request,
        };
        self.take_work(w, now_ms, txn);
    }

    /// Admission, then run now, or wait in the lanes (or BUSY past their
    /// depth).
    pub(super) fn take_work(&mut self, mut w: Work, now_ms: u64, txn: &mut Txn) {
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

    pub(super) fn run_queued(&mut self, now_ms: u64, txn: &mut Txn) {
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
    pub(super) fn execute(
        &mut self,
        i: usize,
        lane: Option<u64>,
        w: Work,
        now_ms: u64,
        txn: &mut Txn,
    ) {
        let abandoned = match &w.origin {
            Origin::Local(id) => self.io.conn(*id).is_none_or(|c| c.closing.is_some()),
            Origin::Job(reply) => reply.is_abandoned(),
            Origin::Remote { .. } => false,
        };
        if abandoned {
            return self.finish_work(w, Err(RushError::unavailable("gone")), false);
        }
        let routed = w.slot.filter(|_| !self.reads_replica(&w));
        let result = match routed.map(|s| self.ctx.routing.check(s)) {
            Some(Err(e)) => Err(e),
            _ => {
                let mut cx = Cx {
                    now: now_ms,
                    txn,
                    slot: w.slot,
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

    /// A READONLY connection's key read on a replica, of a slot of its
    /// primary's: answered from this replica's copy instead of MOVED.
    fn reads_replica(&self, w: &Work) -> bool {
        w.replica_read
            && self.ctx.standby
            && replica_readable(&w.request)
            && w.slot.is_some_and(|s| self.ctx.routing.replica_holds(s))
    }

    /// Send a request's answer where it came from. `held`: it waits for
    /// the pass's commit.
    pub(super) fn finish_work(&mut self, w: Work, result: Result<Reply, RushError>, held: bool) {
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
}
