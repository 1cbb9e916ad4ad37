//! Red envelopes: create, grab, info, the refund stream and the audit.
//!
//! An envelope id is a `u64` that carries where the envelope lives, so every
//! request for it is routed without a lookup (DESIGN.md, "generated
//! identifiers carry their slot"):
//!
//! ```text
//! id = (seq × 32 + day) × 16384 + slot
//! ```
//!
//! - `slot` (0–16383) is the sender's slot, `key_slot(sender)`: [`envelope_slot`].
//! - `day` (1–31) is the UTC day of month the envelope was created on: the
//!   daemon stores envelopes under (slot, day, id) so a day is one key range.
//!   Carrying it in the id lets a grab find the envelope without an index.
//! - `seq` is a per-slot sequence, unique and increasing within the slot.

mod audit;
mod create;
mod grab;
mod info;
mod refunds;
mod refunds_ack;

pub use audit::{EnvelopeAudit, EnvelopeAuditReply};
pub use create::{EnvelopeCreate, EnvelopeCreateReply};
pub use grab::{EnvelopeGrab, EnvelopeGrabReply};
pub use info::{EnvelopeGrabbed, EnvelopeInfo, EnvelopeInfoReply, EnvelopeState};
pub use refunds::{EnvelopeRefunds, EnvelopeRefundsReply, Refund};
pub use refunds_ack::EnvelopeRefundsAck;

use crate::codec::{DecodeError, Reader, WriteExt};
use crate::limits::MAX_ENVELOPE_USER;
use crate::SLOTS;
use bytes::{BufMut, Bytes, BytesMut};
use std::fmt;
use std::str::FromStr;

/// Day-of-month values an id can carry.
const DAY_BITS: u64 = 32;

/// The slot an envelope lives in: the id modulo 16384.
pub fn envelope_slot(id: u64) -> u16 {
    (id % SLOTS as u64) as u16
}

/// The UTC day of month (1–31) the envelope was created on; 0 for an id no
/// server issued.
pub fn envelope_day(id: u64) -> u8 {
    ((id / SLOTS as u64) % DAY_BITS) as u8
}

/// The per-slot sequence number of an id.
pub fn envelope_seq(id: u64) -> u64 {
    id / SLOTS as u64 / DAY_BITS
}

/// The id of sequence number `seq` created on `day` in `slot`, or `None`
/// when `seq` is past the id space (2^45 per slot).
pub fn envelope_id(seq: u64, day: u8, slot: u16) -> Option<u64> {
    if seq >= MAX_ENVELOPE_SEQ || day == 0 || day > 31 || slot >= SLOTS {
        return None;
    }
    Some((seq * DAY_BITS + day as u64) * SLOTS as u64 + slot as u64)
}

/// Sequence numbers per slot: `seq × 32 × 16384` must fit in a `u64`.
pub const MAX_ENVELOPE_SEQ: u64 = 1 << 45;

/// How the total is split into shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum EnvelopeMode {
    /// Double average: each grab draws uniformly from
    /// `[1, 2 × remaining / remaining_count]`, capped so every later grab can
    /// still get 1 cent; the last grab takes the exact remainder.
    #[default]
    Random,
    /// Equal shares; the `total % count` spare cents go one each to the
    /// first grabs.
    Fixed,
}

impl EnvelopeMode {
    pub fn as_u8(self) -> u8 {
        match self {
            EnvelopeMode::Random => 0,
            EnvelopeMode::Fixed => 1,
        }
    }

    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(EnvelopeMode::Random),
            1 => Some(EnvelopeMode::Fixed),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EnvelopeMode::Random => "random",
            EnvelopeMode::Fixed => "fixed",
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let v = r.u8("mode")?;
        Self::from_u8(v).ok_or_else(|| DecodeError::invalid("mode", format!("{v}")))
    }
}

impl FromStr for EnvelopeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "random" => Ok(EnvelopeMode::Random),
            "fixed" => Ok(EnvelopeMode::Fixed),
            _ => Err(format!("{s:?} is not a mode (random or fixed)")),
        }
    }
}

/// A position in a node's refund stream: refunds are ordered by
/// `(stamp, envelope id)` and a cursor names the last one consumed.
/// `RefundCursor::START` is before every refund. Printed as `STAMP-ID`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RefundCursor {
    pub stamp: u64,
    pub id: u64,
}

impl RefundCursor {
    pub const START: RefundCursor = RefundCursor { stamp: 0, id: 0 };

    pub(crate) fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.stamp);
        out.put_u64(self.id);
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(RefundCursor {
            stamp: r.u64("cursor stamp")?,
            id: r.u64("cursor id")?,
        })
    }
}

impl fmt::Display for RefundCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.stamp, self.id)
    }
}

impl FromStr for RefundCursor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("{s:?} is not a refund cursor (STAMP-ID, e.g. 0-0)");
        let (stamp, id) = s.split_once('-').ok_or_else(bad)?;
        Ok(RefundCursor {
            stamp: stamp.parse().map_err(|_| bad())?,
            id: id.parse().map_err(|_| bad())?,
        })
    }
}

/// A user or sender name: 1 to [`MAX_ENVELOPE_USER`] bytes. An over-long one
/// is BAD_REQUEST (an invalid argument, not a frame-size problem); the bytes
/// are a slice of the frame, so reading them first allocates nothing.
pub(crate) fn read_name(r: &mut Reader, field: &'static str) -> Result<Bytes, DecodeError> {
    let b = r.bytes(field, usize::MAX)?;
    if b.is_empty() {
        return Err(DecodeError::invalid(field, "empty"));
    }
    if b.len() > MAX_ENVELOPE_USER {
        return Err(DecodeError::invalid(
            field,
            format!("{} bytes, over the limit of {MAX_ENVELOPE_USER}", b.len()),
        ));
    }
    Ok(b)
}

pub(crate) fn put_name(out: &mut BytesMut, b: &[u8]) {
    out.put_lp(b);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_slot_and_day() {
        for (seq, day, slot) in [(0, 1, 0), (7, 31, 16383), (MAX_ENVELOPE_SEQ - 1, 15, 99)] {
            let id = envelope_id(seq, day, slot).unwrap();
            assert_eq!(envelope_slot(id), slot);
            assert_eq!(envelope_day(id), day);
            assert_eq!(envelope_seq(id), seq);
        }
        assert_eq!(envelope_id(MAX_ENVELOPE_SEQ, 1, 0), None);
        assert_eq!(envelope_id(1, 0, 0), None);
        assert_eq!(envelope_id(1, 32, 0), None);
        // Within a slot and day, ids grow with the sequence.
        assert!(envelope_id(5, 3, 9).unwrap() < envelope_id(6, 3, 9).unwrap());
    }

    #[test]
    fn cursor_text_round_trips() {
        let c = RefundCursor { stamp: 17, id: 99 };
        assert_eq!(c.to_string().parse::<RefundCursor>().unwrap(), c);
        assert!("17".parse::<RefundCursor>().is_err());
        assert!("a-b".parse::<RefundCursor>().is_err());
        assert!(RefundCursor::START < c);
    }
}
