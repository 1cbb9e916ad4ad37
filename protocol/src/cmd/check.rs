use super::{key_target, read_field, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_VALUE;
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// What a CHECK asserts about a key (or one hash field).
///
/// Integer comparisons read the value as a decimal `i64`; a missing key or
/// field counts as 0, so "HGET k f < N" works before the first write. A value
/// that is not an integer is WRONG_TYPE.
///
/// The TTL conditions are about the key (a CHECK naming a field with one is
/// BAD_REQUEST) and hold only for a key that exists; a key without an expiry
/// counts as expiring never, later than any time. With them a BATCH gives a
/// TTL only when the current one allows it (Redis's `EXPIRE … NX|XX|GT|LT`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    Exists,
    Missing,
    Eq(Bytes),
    Ne(Bytes),
    Lt(i64),
    Le(i64),
    Gt(i64),
    Ge(i64),
    /// The key exists and has no expiry.
    NoTtl,
    /// The key exists and has an expiry.
    HasTtl,
    /// The key exists and expires sooner than this many ms from now (never,
    /// for a key without an expiry). Negative: a time already past.
    TtlBelow(i64),
    /// The key exists and expires later than this many ms from now, or
    /// never.
    TtlAbove(i64),
}

impl Cond {
    /// Whether the condition is about the key's TTL, not its value.
    pub fn is_ttl(&self) -> bool {
        matches!(
            self,
            Cond::NoTtl | Cond::HasTtl | Cond::TtlBelow(_) | Cond::TtlAbove(_)
        )
    }
}

/// `CHECK key [field] cond` → whether it holds. Inside a BATCH a false CHECK
/// aborts the batch with CONDITION_FAILED and nothing is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub key: Bytes,
    pub field: Option<Bytes>,
    pub cond: Cond,
}

impl Check {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for Cond {
    fn encode(&self, out: &mut BytesMut) {
        match self {
            Cond::Exists => out.put_u8(0),
            Cond::Missing => out.put_u8(1),
            Cond::Eq(b) => {
                out.put_u8(2);
                out.put_lp(b);
            }
            Cond::Ne(b) => {
                out.put_u8(3);
                out.put_lp(b);
            }
            Cond::Lt(v)
            | Cond::Le(v)
            | Cond::Gt(v)
            | Cond::Ge(v)
            | Cond::TtlBelow(v)
            | Cond::TtlAbove(v) => {
                out.put_u8(match self {
                    Cond::Lt(_) => 4,
                    Cond::Le(_) => 5,
                    Cond::Gt(_) => 6,
                    Cond::Ge(_) => 7,
                    Cond::TtlBelow(_) => 10,
                    _ => 11,
                });
                out.put_i64(*v);
            }
            Cond::NoTtl => out.put_u8(8),
            Cond::HasTtl => out.put_u8(9),
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(match r.u8("condition")? {
            0 => Cond::Exists,
            1 => Cond::Missing,
            2 => Cond::Eq(r.bytes("operand", MAX_VALUE)?),
            3 => Cond::Ne(r.bytes("operand", MAX_VALUE)?),
            4 => Cond::Lt(r.i64("operand")?),
            5 => Cond::Le(r.i64("operand")?),
            6 => Cond::Gt(r.i64("operand")?),
            7 => Cond::Ge(r.i64("operand")?),
            8 => Cond::NoTtl,
            9 => Cond::HasTtl,
            10 => Cond::TtlBelow(r.i64("operand")?),
            11 => Cond::TtlAbove(r.i64("operand")?),
            k => return Err(DecodeError::invalid("condition", format!("kind {k}"))),
        })
    }
}

impl Wire for Check {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
        match &self.field {
            None => out.put_u8(0),
            Some(f) => {
                out.put_u8(1);
                out.put_lp(f);
            }
        }
        self.cond.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Check {
            key: read_key(r)?,
            field: r.option("field", read_field)?,
            cond: Cond::decode(r)?,
        })
    }
}
