//! ENVELOPE_GRAB: one user's share of an envelope, exactly once; and the
//! admission control that answers a grab at intake when memory knows the
//! answer.

use super::record::{self, GrabRecord};
use super::split::next_share;
use super::{EnvelopeMetrics, Envelopes, Live};
use crate::shard::txn::Txn;
use crate::storage::keys;
use rush_protocol::cmd::{envelope_day, envelope_slot, EnvelopeGrab, EnvelopeGrabReply};
use rush_protocol::{ErrorCode, Reply, RushError};

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
        self.open(r.id, now, txn)?;
        let live = self.cache.get_mut(&r.id).expect("opened above");
        let (slot, day) = (envelope_slot(r.id), envelope_day(r.id));
        if !live.complete && !live.grabs.contains_key(r.user.as_ref()) {
            // Loaded from storage without its grabs: has this user grabbed?
            let key = keys::envelope::grab(slot, day, r.id, &r.user);
            if let Some(raw) = txn.get(&key).map_err(super::storage_error)? {
                let g = GrabRecord::decode(&raw).map_err(super::corrupt)?;
                live.grabs.insert(r.user.as_ref().into(), g);
            }
        }
        if let Some(answer) = known_outcome(live, &r.user, true, now, &self.metrics.envelopes) {
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

    /// Admission control, at intake (before queueing): answer a grab at once
    /// when memory already knows the answer — a repeat, an empty or an
    /// expired envelope — and BUSY when `queued` grabs already wait for this
    /// envelope. `None`: queue it. Never touches storage. What memory holds
    /// here is committed (groups commit before the next intake), so these
    /// answers are as durable as the ones they repeat.
    pub(super) fn admit_grab(
        &mut self,
        r: &EnvelopeGrab,
        queued: usize,
        now: u64,
    ) -> Option<Result<Reply, RushError>> {
        if let Some(live) = self.cache.get(&r.id) {
            let m = &self.metrics.envelopes;
            if let Some(answer) = known_outcome(live, &r.user, live.complete, now, m) {
                return Some(answer);
            }
        }
        if queued >= self.cfg.max_queued_grabs {
            self.m().grab_busy.inc();
            return Some(Err(RushError::busy(format!(
                "{queued} grabs are already queued for envelope {}; retry shortly",
                r.id
            ))));
        }
        None
    }
}

/// The answer to a grab that needs no write: a repeat, EMPTY, EXPIRED.
/// `user_known`: whether `user` grabbed is known from memory (the envelope
/// holds every grab, or this user's was looked up); if not, only a repeat
/// can be answered — an EMPTY could be a repeat of a grab not yet read.
fn known_outcome(
    live: &Live,
    user: &[u8],
    user_known: bool,
    now: u64,
    m: &EnvelopeMetrics,
) -> Option<Result<Reply, RushError>> {
    if let Some(g) = live.grabs.get(user) {
        m.grab_dup.inc();
        return Some(Ok(Reply::EnvelopeGrab(
            rush_protocol::cmd::EnvelopeGrabReply {
                amount_cents: g.amount,
                repeated: true,
            },
        )));
    }
    if !user_known {
        return None;
    }
    if live.rec.remaining_count == 0 {
        m.grab_empty.inc();
        return Some(Err(RushError::new(
            ErrorCode::Empty,
            "every share of this envelope has been grabbed",
        )));
    }
    if live.rec.refund_stamp != 0 || now >= live.rec.expires_at {
        m.grab_expired.inc();
        return Some(Err(RushError::new(
            ErrorCode::Expired,
            "this envelope has expired",
        )));
    }
    None
}
