use super::{envelope_slot, put_name, read_name};
use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `ENVELOPE_GRAB id user` → the user's share in cents.
///
/// Exactly once per user per envelope: a repeated grab by the same user
/// answers the same amount (with `repeated` set), so a retry is harmless.
/// Errors: EMPTY (no shares left), EXPIRED, BUSY (too many grabs queued for
/// this envelope; nothing was done), NOT_FOUND.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeGrab {
    pub id: u64,
    pub user: Bytes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeGrabReply {
    pub amount_cents: u64,
    /// This user had already grabbed; `amount_cents` is that grab's amount.
    pub repeated: bool,
}

impl EnvelopeGrab {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(envelope_slot(self.id)))
    }
}

impl Wire for EnvelopeGrab {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.id);
        put_name(out, &self.user);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(EnvelopeGrab {
            id: r.u64("id")?,
            user: read_name(r, "user")?,
        })
    }
}

impl Wire for EnvelopeGrabReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.amount_cents);
        out.put_u8(self.repeated as u8);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(EnvelopeGrabReply {
            amount_cents: r.u64("amount_cents")?,
            repeated: r.bool("repeated")?,
        })
    }
}
