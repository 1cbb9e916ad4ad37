//! ENVELOPE_INFO: an envelope's books, state and grabs.

use super::Envelopes;
use crate::shard::txn::Txn;
use rush_protocol::cmd::{
    envelope_day, envelope_slot, EnvelopeGrabbed, EnvelopeInfo, EnvelopeInfoReply, EnvelopeState,
};
use rush_protocol::{Reply, RushError};

impl Envelopes {
    pub(super) fn info(
        &mut self,
        r: &EnvelopeInfo,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        self.open(r.id, now, txn)?;
        let (slot, day) = (envelope_slot(r.id), envelope_day(r.id));
        let live = &self.cache[&r.id];
        if !live.complete {
            let grabs = self.load_grabs(slot, day, r.id, &live.rec, txn)?;
            let live = self.cache.get_mut(&r.id).expect("opened above");
            live.grabs = grabs;
            live.complete = true;
        }
        let live = &self.cache[&r.id];
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
