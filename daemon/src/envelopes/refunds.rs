//! Refunds: written exactly once per expired envelope with money left, and
//! read as one durable, ordered stream per node.
//!
//! **Exactly once.** The timer writes an envelope's refund record and its
//! books marked "refunded" (and removes its pending entry) as one request of
//! one atomic, synced batch. A crash before the commit leaves neither (the
//! pending entry brings it back at startup); after it, the mark makes any
//! later look a no-op. So a refund is never lost and never doubled.
//!
//! **The stream.** Refund records are keyed `(slot, stamp, id)` — slot first,
//! so a slot's unpaid refunds move with the slot — and the stream orders
//! them by position `(stamp, id)` across all shards of the node. A cursor is
//! one position, fixed-size and independent of the shard layout.
//!
//! A read must never hand out a cursor that a refund written later sorts
//! before, or that refund would be skipped. Stamps are the node's clock in
//! ms, made monotonic per shard by a floor: a refund is stamped
//! `max(now, floor)`. A shard answering a read says its part is complete up
//! to `W = max(now, floor, H + 1)`, where `H` is the highest stamp any shard
//! of the node has written (one shared atomic): every refund written so far
//! is below `W`, and the shard raises its floor to `W`, so every refund it
//! writes later is at or above it. The node merges the shards' answers and
//! returns refunds only up to the lowest `W` (or the last refund a shard
//! had to leave out of a full page), and that bound is the next cursor:
//! complete, so acknowledging it removes exactly what was delivered. A
//! refund is readable from the first read that starts after it was written.
//!
//! The floor survives restarts, even a wall clock that steps back: each
//! shard persists a promise a minute ahead of its floor in the meta column
//! family before it answers with a bound above the last promise, and
//! startup takes the highest promise of any shard (and the highest stored
//! stamp). Stamps then run ahead of the wall clock until it catches up —
//! by at most one ms per read that found a new refund. A cursor at or
//! beyond the stream's current `W` was never handed out and is BAD_REQUEST,
//! so a bad cursor can't push the floor to the end of time.
//!
//! A slot that moves in (or that a new map gives this node) has its refund
//! records re-stamped at this shard's `max(now, floor)` before it is served
//! (`slots::restamp_gained`): a consumer of this node may already be past
//! their old stamps. A refund a consumer read on the old node but had not
//! acknowledged is delivered again by the new one — at least once, as
//! always; the envelope id is the payment's idempotency key.
//!
//! Delivery is at least once (a consumer that crashes before acknowledging
//! reads its page again): the envelope id is the refund's identity, to use
//! as the payment's idempotency key. ENVELOPE_REFUNDS_ACK deletes refunds up
//! to a cursor (synced), so a restarted consumer resumes from `START`.

use super::record::RefundRecord;
use super::{corrupt, storage_error, Envelopes};
use crate::shard::txn::Txn;
use crate::storage::keys;
use bytes::Bytes;
use rush_protocol::cmd::{
    envelope_day, envelope_slot, EnvelopeRefunds, EnvelopeRefundsAck, EnvelopeRefundsReply, Refund,
    RefundCursor,
};
use rush_protocol::{Reply, RushError};
use std::sync::atomic::Ordering;

/// How far ahead of the floor a persisted promise reaches: at most one meta
/// write per shard per minute of stream time while the stream is read.
const PROMISE_AHEAD_MS: u64 = 60_000;

/// One unacknowledged refund of this shard, held in memory (the stream is
/// what the payment system hasn't paid yet, so it stays small).
#[derive(Debug, Clone)]
pub(super) struct StreamEntry {
    pub amount: u64,
    pub refunded_at: u64,
    pub sender: Box<[u8]>,
}

impl Envelopes {
    /// Write the refunds of envelopes that expired with money left (at most
    /// `refunds_per_tick`; the rest next time).
    pub(super) fn refund_due(&mut self, now: u64, txn: &mut Txn) {
        // Memory holds the earliest expiries only: when they are used up,
        // the next ones are read back.
        if self.expiries.needs_refill() {
            if let Err(e) = self.refill_expiries(txn) {
                tracing::warn!(shard = self.shard, error = %e, "pending expiries not read back; retrying next tick");
                return;
            }
        }
        // A slot being handed to another node is left alone: its data must
        // not change while it is copied (its refunds are written by
        // whichever node owns it afterwards).
        let routing = &self.routing;
        let due = self
            .expiries
            .due(now, self.cfg.refunds_per_tick, |(_, id)| {
                routing.serving(envelope_slot(*id))
            });
        for (expires_at, id) in due {
            match self.refund_one(expires_at, id, now, txn) {
                Ok(()) => {
                    self.expiries.remove(&(expires_at, id));
                }
                Err(e) => {
                    // Storage trouble: keep the entry, try again next tick.
                    tracing::warn!(shard = self.shard, envelope = id, error = %e, "refund not written; retrying");
                    txn.finish_request(false);
                    break;
                }
            }
        }
    }

    fn refund_one(
        &mut self,
        expires_at: u64,
        id: u64,
        now: u64,
        txn: &mut Txn,
    ) -> Result<(), RushError> {
        if !self.ensure_cached(id, None, txn)? {
            // Gone (retention) or never committed: nothing to refund.
            let slot = envelope_slot(id);
            txn.delete(keys::envelope::pending(slot, expires_at, id));
            txn.finish_request(true);
            return Ok(());
        }
        let stamp = self.next_stamp(now);
        let live = self.cache.get_mut(&id).expect("cached above");
        let rec = &mut live.rec;
        if rec.settled() || rec.expires_at != expires_at {
            return Ok(());
        }
        let amount = rec.remaining;
        rec.refunded = amount;
        rec.remaining = 0;
        rec.refund_stamp = stamp;
        rec.refunded_at = now;
        let (slot, day) = (envelope_slot(id), envelope_day(id));
        let refund = RefundRecord {
            amount,
            refunded_at: now,
            sender: rec.sender.clone(),
        };
        txn.put(keys::envelope::refund(slot, stamp, id), refund.encode());
        txn.put(keys::envelope::record(slot, day, id), rec.encode());
        txn.delete(keys::envelope::pending(slot, expires_at, id));
        txn.require_sync();
        txn.finish_request(true);
        self.stamp_floor = stamp;
        self.shared.highest_stamp.fetch_max(stamp, Ordering::SeqCst);
        self.stream.insert(
            RefundCursor { stamp, id },
            StreamEntry {
                amount,
                refunded_at: now,
                sender: refund.sender,
            },
        );
        self.money_out(amount);
        let m = &self.metrics.envelopes;
        m.refunds_written.inc();
        m.refunded_cents.inc_by(amount);
        Ok(())
    }

    /// The stamp of a refund written now.
    pub(super) fn next_stamp(&self, now: u64) -> u64 {
        self.stamp_floor.max(now)
    }

    /// Every future stamp is at least `to`; made durable (a promise a
    /// minute ahead) before anything relying on it is answered.
    fn raise_floor(&mut self, to: u64) -> Result<(), RushError> {
        self.stamp_floor = self.stamp_floor.max(to);
        if self.stamp_floor > self.floor_promise {
            let promise = self.stamp_floor.saturating_add(PROMISE_AHEAD_MS);
            self.storage
                .meta_put(
                    &keys::meta::envelope_refund_floor(self.shard),
                    &promise.to_be_bytes(),
                )
                .map_err(storage_error)?;
            self.floor_promise = promise;
        }
        Ok(())
    }

    /// The stamp below which this shard's part of the stream is final:
    /// every refund written so far, by any shard, is below it (including one
    /// stamped this very millisecond), and once the floor is raised to it,
    /// every later one of this shard is at or above it.
    fn complete_to(&self, now: u64) -> u64 {
        let highest = self.shared.highest_stamp.load(Ordering::SeqCst);
        self.next_stamp(now).max(highest.saturating_add(1))
    }

    /// A cursor must be one the stream could have handed out.
    fn check_cursor(&self, c: &RefundCursor, now: u64) -> Result<(), RushError> {
        let complete_to = self.complete_to(now);
        if c.stamp >= complete_to {
            return Err(RushError::bad_request(format!(
                "cursor {c} is ahead of the refund stream"
            )));
        }
        Ok(())
    }

    /// This shard's part of a read: its refunds after the cursor that are
    /// final (stamped below its bound), and the bound in `next`.
    pub(super) fn read_stream(
        &mut self,
        r: &EnvelopeRefunds,
        now: u64,
    ) -> Result<Reply, RushError> {
        self.check_cursor(&r.after, now)?;
        let complete_to = self.complete_to(now);
        self.raise_floor(complete_to)?;
        let limit = r.limit as usize;
        let mut refunds = Vec::with_capacity(limit.min(self.stream.len()));
        let mut more = false;
        for (cursor, e) in self
            .stream
            .range((
                std::ops::Bound::Excluded(r.after),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(c, _)| c.stamp < complete_to)
        {
            if refunds.len() == limit {
                more = true;
                break;
            }
            refunds.push(Refund {
                cursor: *cursor,
                sender: Bytes::copy_from_slice(&e.sender),
                amount_cents: e.amount,
                refunded_at_ms: e.refunded_at,
            });
        }
        let next = match (more, refunds.last()) {
            (true, Some(last)) => last.cursor,
            _ => RefundCursor {
                stamp: complete_to - 1,
                id: u64::MAX,
            },
        };
        Ok(Reply::EnvelopeRefunds(EnvelopeRefundsReply {
            refunds,
            next,
            more,
        }))
    }

    /// Remove this shard's refunds up to the cursor: paid.
    pub(super) fn ack(
        &mut self,
        r: &EnvelopeRefundsAck,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        self.check_cursor(&r.cursor, now)?;
        // Acknowledged positions are behind every future refund.
        self.raise_floor(r.cursor.stamp.saturating_add(1))?;
        let paid: Vec<RefundCursor> = self.stream.range(..=r.cursor).map(|(c, _)| *c).collect();
        for c in &paid {
            txn.delete(keys::envelope::refund(envelope_slot(c.id), c.stamp, c.id));
            self.stream.remove(c);
        }
        if !paid.is_empty() {
            txn.require_sync();
        }
        self.metrics
            .envelopes
            .refunds_acked
            .inc_by(paid.len() as u64);
        Ok(Reply::EnvelopeRefundsAck(paid.len() as u64))
    }
}

/// Merge the shards' answers to one ENVELOPE_REFUNDS: refunds up to the
/// lowest bound any shard is complete to, in stream order, at most `limit`.
pub fn merge_refunds(replies: Vec<Reply>, limit: usize) -> Result<Reply, RushError> {
    let mut parts = Vec::with_capacity(replies.len());
    for r in replies {
        match r {
            Reply::EnvelopeRefunds(p) => parts.push(p),
            _ => return Err(corrupt("unexpected shard answer to ENVELOPE_REFUNDS")),
        }
    }
    EnvelopeRefundsReply::merge(parts, limit)
        .map(Reply::EnvelopeRefunds)
        .ok_or_else(|| RushError::internal("no shard answered ENVELOPE_REFUNDS"))
}
