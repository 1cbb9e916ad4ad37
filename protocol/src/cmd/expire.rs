use super::{key_target, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `EXPIRE key ttl_ms` → whether the key exists. `ttl_ms` 0 removes the
/// expiry (PERSIST).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expire {
    pub key: Bytes,
    pub ttl_ms: u64,
}

impl Expire {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for Expire {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
        out.put_u64(self.ttl_ms);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Expire {
            key: read_key(r)?,
            ttl_ms: r.u64("ttl")?,
        })
    }
}
