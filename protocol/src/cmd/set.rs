use super::{key_target, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_VALUE;
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// When SET writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SetCond {
    #[default]
    Always,
    /// NX: only when the key is missing (or expired).
    IfAbsent,
    /// XX: only when the key exists.
    IfPresent,
}

/// `SET key value ttl_ms cond` → whether it was written. `ttl_ms` 0 means no
/// expiry. A SET replaces a value of any type (as in Redis).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    pub key: Bytes,
    pub value: Bytes,
    pub ttl_ms: u64,
    pub cond: SetCond,
}

impl Set {
    pub fn new(key: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        Set {
            key: key.into(),
            value: value.into(),
            ttl_ms: 0,
            cond: SetCond::Always,
        }
    }

    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for Set {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
        out.put_lp(&self.value);
        out.put_u64(self.ttl_ms);
        encode_cond(out, self.cond);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let key = read_key(r)?;
        let value = r.bytes("value", MAX_VALUE)?;
        let ttl_ms = r.u64("ttl")?;
        let cond = decode_cond(r)?;
        Ok(Set {
            key,
            value,
            ttl_ms,
            cond,
        })
    }
}

/// SET's and SET_KEEPTTL's `u8 cond`.
pub(super) fn encode_cond(out: &mut BytesMut, cond: SetCond) {
    out.put_u8(match cond {
        SetCond::Always => 0,
        SetCond::IfAbsent => 1,
        SetCond::IfPresent => 2,
    });
}

pub(super) fn decode_cond(r: &mut Reader) -> Result<SetCond, DecodeError> {
    match r.u8("condition")? {
        0 => Ok(SetCond::Always),
        1 => Ok(SetCond::IfAbsent),
        2 => Ok(SetCond::IfPresent),
        c => Err(DecodeError::invalid("condition", format!("{c}"))),
    }
}
