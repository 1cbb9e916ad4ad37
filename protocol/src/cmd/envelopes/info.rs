use super::{envelope_slot, put_name, read_name, EnvelopeMode};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_LIST;
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `ENVELOPE_INFO id` → the envelope's books and every grab, in grab order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeInfo {
    pub id: u64,
}

/// Where an envelope is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvelopeState {
    /// Shares left and not expired: grabs are granted.
    Open,
    /// Every share was grabbed.
    Empty,
    /// Past its expiry with money left; the refund is about to be written.
    Expired,
    /// Past its expiry; the rest went to the refund stream.
    Refunded,
}

impl EnvelopeState {
    pub fn name(self) -> &'static str {
        match self {
            EnvelopeState::Open => "open",
            EnvelopeState::Empty => "empty",
            EnvelopeState::Expired => "expired",
            EnvelopeState::Refunded => "refunded",
        }
    }
}

/// One grab: who, how much, when (unix ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeGrabbed {
    pub user: Bytes,
    pub amount_cents: u64,
    pub at_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeInfoReply {
    pub id: u64,
    pub sender: Bytes,
    pub mode: EnvelopeMode,
    pub state: EnvelopeState,
    pub total_cents: u64,
    pub remaining_cents: u64,
    pub refunded_cents: u64,
    pub count: u32,
    pub grabbed: u32,
    pub created_at_ms: u64,
    pub expires_at_ms: u64,
    pub grabs: Vec<EnvelopeGrabbed>,
}

impl EnvelopeInfo {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(envelope_slot(self.id)))
    }
}

impl Wire for EnvelopeInfo {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.id);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(EnvelopeInfo { id: r.u64("id")? })
    }
}

impl Wire for EnvelopeInfoReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.id);
        put_name(out, &self.sender);
        out.put_u8(self.mode.as_u8());
        out.put_u8(match self.state {
            EnvelopeState::Open => 0,
            EnvelopeState::Empty => 1,
            EnvelopeState::Expired => 2,
            EnvelopeState::Refunded => 3,
        });
        out.put_u64(self.total_cents);
        out.put_u64(self.remaining_cents);
        out.put_u64(self.refunded_cents);
        out.put_u32(self.count);
        out.put_u32(self.grabbed);
        out.put_u64(self.created_at_ms);
        out.put_u64(self.expires_at_ms);
        out.put_count(self.grabs.len());
        for g in &self.grabs {
            put_name(out, &g.user);
            out.put_u64(g.amount_cents);
            out.put_u64(g.at_ms);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(EnvelopeInfoReply {
            id: r.u64("id")?,
            sender: read_name(r, "sender")?,
            mode: EnvelopeMode::decode(r)?,
            state: match r.u8("state")? {
                0 => EnvelopeState::Open,
                1 => EnvelopeState::Empty,
                2 => EnvelopeState::Expired,
                3 => EnvelopeState::Refunded,
                s => return Err(DecodeError::invalid("state", format!("{s}"))),
            },
            total_cents: r.u64("total_cents")?,
            remaining_cents: r.u64("remaining_cents")?,
            refunded_cents: r.u64("refunded_cents")?,
            count: r.u32("count")?,
            grabbed: r.u32("grabbed")?,
            created_at_ms: r.u64("created_at_ms")?,
            expires_at_ms: r.u64("expires_at_ms")?,
            grabs: r.list("grabs", MAX_LIST, 21, |r| {
                Ok(EnvelopeGrabbed {
                    user: read_name(r, "user")?,
                    amount_cents: r.u64("amount_cents")?,
                    at_ms: r.u64("at_ms")?,
                })
            })?,
        })
    }
}
