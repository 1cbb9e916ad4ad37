//! ENVELOPE_GRAB and ENVELOPE_INFO.

use super::record::{self, GrabRecord};
use super::split::next_share;
use super::{known_outcome, Envelopes};
use crate::shard::txn::Txn;
use crate::storage::keys;
use rush_protocol::cmd::{
    envelope_day, envelope_slot, EnvelopeGrab, EnvelopeGrabReply, EnvelopeGrabbed, EnvelopeInfo,
    EnvelopeInfoReply, EnvelopeState,
};
use rush_protocol::{Reply, RushError};

fn not_found(id: u64) -> RushError {
    RushError::not_found(format!("no envelope {id}"))
}

impl Envelopes {
    /// One grab, in the envelope's turn on its shard. The grab record, the
    /// new books and the pending entry are one request's writes (so one
    /// atomic batch), synced before the answer.
    pub(super) fn grab(
        &mut self,
        r: &EnvelopeGrab,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        if !self.ensure_cached(r.id, txn)? {
            return Err(not_found(r.id));
        }
        let live = self.cache.get_mut(&r.id).expect("cached above");
        live.touched = now;
        if let Some(answer) = known_outcome(live, &r.user, now, &self.metrics.envelopes) {
            return answer;
        }
        let rec = &mut live.rec;
        let amount = next_share(
            rec.mode,
            rec.total,
            rec.count,
            rec.remaining,
            rec.remaining_count,
            &mut self.rng,
        );
        let grab = GrabRecord {
            amount,
            at: now,
            seq: rec.grabbed(),
        };
        rec.remaining -= amount;
        rec.remaining_count -= 1;

        let (slot, day) = (envelope_slot(r.id), envelope_day(r.id));
        txn.put(
            keys::envelope::grab(slot, day, r.id, &r.user),
            grab.encode(),
        );
        txn.put(keys::envelope::record(slot, day, r.id), rec.encode());
        let pending = keys::envelope::pending(slot, rec.expires_at, r.id);
        if rec.remaining_count == 0 {
            // Settled: nothing left to refund. The expiry index entry stays
            // until the timer sees it settled (see `expiries`).
            txn.delete(pending);
        } else {
            txn.put(pending, record::encode_pending(rec.remaining));
        }
        txn.require_sync();
        live.grabs.insert(r.user.as_ref().into(), grab);
        self.money_out(amount);
        self.metrics.envelopes.grab_ok.inc();
        Ok(Reply::EnvelopeGrab(EnvelopeGrabReply {
            amount_cents: amount,
            repeated: false,
        }))
    }

    pub(super) fn info(
        &mut self,
        r: &EnvelopeInfo,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        if !self.ensure_cached(r.id, txn)? {
            return Err(not_found(r.id));
        }
        let live = self.cache.get_mut(&r.id).expect("cached above");
        live.touched = now;
        let rec = &live.rec;
        let state = if rec.remaining_count == 0 {
            EnvelopeState::Empty
        } else if rec.refund_stamp != 0 {
            EnvelopeState::Refunded
        } else if now >= rec.expires_at {
            EnvelopeState::Expired
        } else {
            EnvelopeState::Open
        };
        let mut grabs: Vec<_> = live.grabs.iter().collect();
        grabs.sort_unstable_by_key(|(_, g)| g.seq);
        Ok(Reply::EnvelopeInfo(EnvelopeInfoReply {
            id: r.id,
            sender: bytes::Bytes::copy_from_slice(&rec.sender),
            mode: rec.mode,
            state,
            total_cents: rec.total,
            remaining_cents: rec.remaining,
            refunded_cents: rec.refunded,
            count: rec.count,
            grabbed: rec.grabbed(),
            created_at_ms: rec.created_at,
            expires_at_ms: rec.expires_at,
            grabs: grabs
                .into_iter()
                .map(|(user, g)| EnvelopeGrabbed {
                    user: bytes::Bytes::copy_from_slice(user),
                    amount_cents: g.amount,
                    at_ms: g.at,
                })
                .collect(),
        }))
    }
}
