use super::{key_target, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `TTL key` → how long the key has left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ttl {
    pub key: Bytes,
}

/// On the wire an `i64`: -2 missing, -1 no expiry, else milliseconds left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TtlReply {
    Missing,
    Persistent,
    Remaining(u64),
}

impl Ttl {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for Ttl {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Ttl { key: read_key(r)? })
    }
}

impl Wire for TtlReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_i64(match self {
            TtlReply::Missing => -2,
            TtlReply::Persistent => -1,
            TtlReply::Remaining(ms) => (*ms).min(i64::MAX as u64) as i64,
        });
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        match r.i64("ttl")? {
            -2 => Ok(TtlReply::Missing),
            -1 => Ok(TtlReply::Persistent),
            ms if ms >= 0 => Ok(TtlReply::Remaining(ms as u64)),
            v => Err(DecodeError::invalid("ttl", format!("{v}"))),
        }
    }
}
