//! Stored forms of envelope data (payloads after the 9-byte value header).
//! Envelope values never carry a TTL (expiry 0): an envelope's expiry is a
//! state of its books (EXPIRED, refund), not absence; whole days go by
//! retention instead. Only idempotency keys use the TTL header.

use crate::storage::keys::kind;
use crate::storage::value::{self, Corrupt, Cursor, Stored};
use rush_protocol::cmd::EnvelopeMode;

const FORMAT: u8 = 1;

/// An envelope's books, as stored under `keys::envelope::record` and
/// rewritten by every grab and by the refund.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeRecord {
    pub sender: Box<[u8]>,
    pub mode: EnvelopeMode,
    pub total: u64,
    pub count: u32,
    /// Cents not yet grabbed nor refunded.
    pub remaining: u64,
    /// Shares not yet grabbed.
    pub remaining_count: u32,
    pub created_at: u64,
    pub expires_at: u64,
    /// Cents refunded to the sender at expiry (0 until then).
    pub refunded: u64,
    /// The refund's stream stamp; 0 = no refund written (yet).
    pub refund_stamp: u64,
    /// When the refund was written (unix ms), 0 if none.
    pub refunded_at: u64,
}

impl EnvelopeRecord {
    pub fn grabbed(&self) -> u32 {
        self.count - self.remaining_count
    }

    /// Settled: nothing more will ever happen to its money.
    pub fn settled(&self) -> bool {
        self.remaining_count == 0 || self.refund_stamp != 0
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(64 + self.sender.len());
        p.push(FORMAT);
        p.push(self.mode.as_u8());
        p.extend_from_slice(&self.total.to_be_bytes());
        p.extend_from_slice(&self.count.to_be_bytes());
        p.extend_from_slice(&self.remaining.to_be_bytes());
        p.extend_from_slice(&self.remaining_count.to_be_bytes());
        p.extend_from_slice(&self.created_at.to_be_bytes());
        p.extend_from_slice(&self.expires_at.to_be_bytes());
        p.extend_from_slice(&self.refunded.to_be_bytes());
        p.extend_from_slice(&self.refund_stamp.to_be_bytes());
        p.extend_from_slice(&self.refunded_at.to_be_bytes());
        p.extend_from_slice(&self.sender);
        value::encode(kind::ENVELOPE, 0, &p)
    }

    pub fn decode(raw: &[u8]) -> Result<Self, Corrupt> {
        let p = payload(raw, kind::ENVELOPE)?;
        let mut c = Cursor::new(p, "an envelope value");
        if c.u8()? != FORMAT {
            return Err(Corrupt("envelope record of an unknown format".into()));
        }
        let mode = EnvelopeMode::from_u8(c.u8()?)
            .ok_or_else(|| Corrupt("envelope record with an unknown mode".into()))?;
        Ok(EnvelopeRecord {
            mode,
            total: c.u64()?,
            count: c.u32()?,
            remaining: c.u64()?,
            remaining_count: c.u32()?,
            created_at: c.u64()?,
            expires_at: c.u64()?,
            refunded: c.u64()?,
            refund_stamp: c.u64()?,
            refunded_at: c.u64()?,
            sender: c.rest().into(),
        })
    }
}

/// One grab as stored (the user is in the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrabRecord {
    pub amount: u64,
    pub at: u64,
    /// 0-based position among the envelope's grabs.
    pub seq: u32,
}

impl GrabRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut p = [0u8; 20];
        p[..8].copy_from_slice(&self.amount.to_be_bytes());
        p[8..16].copy_from_slice(&self.at.to_be_bytes());
        p[16..].copy_from_slice(&self.seq.to_be_bytes());
        value::encode(kind::ENVELOPE_GRAB, 0, &p)
    }

    pub fn decode(raw: &[u8]) -> Result<Self, Corrupt> {
        let mut c = Cursor::new(payload(raw, kind::ENVELOPE_GRAB)?, "an envelope value");
        let g = GrabRecord {
            amount: c.u64()?,
            at: c.u64()?,
            seq: c.u32()?,
        };
        c.end()?;
        Ok(g)
    }
}

/// One refund in the stream (its stamp and envelope id are in the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefundRecord {
    pub amount: u64,
    pub refunded_at: u64,
    pub sender: Box<[u8]>,
}

impl RefundRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(16 + self.sender.len());
        p.extend_from_slice(&self.amount.to_be_bytes());
        p.extend_from_slice(&self.refunded_at.to_be_bytes());
        p.extend_from_slice(&self.sender);
        value::encode(kind::ENVELOPE_REFUND, 0, &p)
    }

    pub fn decode(raw: &[u8]) -> Result<Self, Corrupt> {
        let mut c = Cursor::new(payload(raw, kind::ENVELOPE_REFUND)?, "an envelope value");
        Ok(RefundRecord {
            amount: c.u64()?,
            refunded_at: c.u64()?,
            sender: c.rest().into(),
        })
    }
}

/// An open envelope's expiry entry: its remaining cents (money in flight).
pub fn encode_pending(remaining: u64) -> Vec<u8> {
    value::encode(kind::ENVELOPE_PENDING, 0, &remaining.to_be_bytes())
}

pub fn decode_pending(raw: &[u8]) -> Result<u64, Corrupt> {
    let mut c = Cursor::new(payload(raw, kind::ENVELOPE_PENDING)?, "an envelope value");
    let v = c.u64()?;
    c.end()?;
    Ok(v)
}

/// A slot's day marker: the first envelope id created that day.
pub fn encode_day(first_id: u64) -> Vec<u8> {
    value::encode(kind::ENVELOPE_DAY, 0, &first_id.to_be_bytes())
}

pub fn decode_day(raw: &[u8]) -> Result<u64, Corrupt> {
    let mut c = Cursor::new(payload(raw, kind::ENVELOPE_DAY)?, "an envelope value");
    let v = c.u64()?;
    c.end()?;
    Ok(v)
}

/// What an idempotency key remembers: the envelope and the arguments that
/// made it, so a retry with other arguments is told CONFLICT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub id: u64,
    pub expires_at: u64,
    pub total: u64,
    pub count: u32,
    pub mode: EnvelopeMode,
    pub expires_in: u64,
}

impl IdempotencyRecord {
    pub fn encode(&self, keep_until: u64) -> Vec<u8> {
        let mut p = Vec::with_capacity(37);
        p.extend_from_slice(&self.id.to_be_bytes());
        p.extend_from_slice(&self.expires_at.to_be_bytes());
        p.extend_from_slice(&self.total.to_be_bytes());
        p.extend_from_slice(&self.count.to_be_bytes());
        p.push(self.mode.as_u8());
        p.extend_from_slice(&self.expires_in.to_be_bytes());
        value::encode(kind::ENVELOPE_IDEMPOTENCY, keep_until, &p)
    }

    /// `None` when the key has outlived its TTL (as if absent).
    pub fn decode(raw: &[u8], now: u64) -> Result<Option<Self>, Corrupt> {
        let stored = Stored::decode(raw)?;
        if !stored.is_live(now) {
            return Ok(None);
        }
        let mut c = Cursor::new(
            payload(raw, kind::ENVELOPE_IDEMPOTENCY)?,
            "an envelope value",
        );
        let r = IdempotencyRecord {
            id: c.u64()?,
            expires_at: c.u64()?,
            total: c.u64()?,
            count: c.u32()?,
            mode: EnvelopeMode::from_u8(c.u8()?)
                .ok_or_else(|| Corrupt("idempotency record with an unknown mode".into()))?,
            expires_in: c.u64()?,
        };
        c.end()?;
        Ok(Some(r))
    }
}

/// A key in an envelope keyspace that doesn't parse.
pub fn corrupt_key(what: &str, key: &[u8]) -> Corrupt {
    Corrupt(format!("malformed envelope {what} key {key:02x?}"))
}

fn payload(raw: &[u8], want: u8) -> Result<&[u8], Corrupt> {
    let stored = Stored::decode(raw)?;
    if stored.kind != want {
        return Err(Corrupt(format!(
            "value kind {} where kind {want} belongs",
            stored.kind
        )));
    }
    Ok(stored.payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let e = EnvelopeRecord {
            sender: b"alice".to_vec().into(),
            mode: EnvelopeMode::Fixed,
            total: 10_000,
            count: 10,
            remaining: 4_000,
            remaining_count: 4,
            created_at: 1,
            expires_at: 2,
            refunded: 0,
            refund_stamp: 0,
            refunded_at: 0,
        };
        assert_eq!(EnvelopeRecord::decode(&e.encode()).unwrap(), e);
        let g = GrabRecord {
            amount: 7,
            at: 8,
            seq: 9,
        };
        assert_eq!(GrabRecord::decode(&g.encode()).unwrap(), g);
        assert!(
            GrabRecord::decode(&e.encode()).is_err(),
            "kinds are checked"
        );
        let r = RefundRecord {
            amount: 5,
            refunded_at: 6,
            sender: b"bob".to_vec().into(),
        };
        assert_eq!(RefundRecord::decode(&r.encode()).unwrap(), r);
        assert_eq!(decode_pending(&encode_pending(42)).unwrap(), 42);
        assert_eq!(decode_day(&encode_day(43)).unwrap(), 43);
        let i = IdempotencyRecord {
            id: 1,
            expires_at: 2,
            total: 3,
            count: 4,
            mode: EnvelopeMode::Random,
            expires_in: 5,
        };
        assert_eq!(
            IdempotencyRecord::decode(&i.encode(100), 99).unwrap(),
            Some(i)
        );
        assert_eq!(
            IdempotencyRecord::decode(&i.encode(100), 100).unwrap(),
            None
        );
        assert!(EnvelopeRecord::decode(&e.encode()[..20]).is_err());
    }
}
