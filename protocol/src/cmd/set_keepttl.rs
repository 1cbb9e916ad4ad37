use super::set::{decode_cond, encode_cond};
use super::{key_target, read_key, SetCond};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_VALUE;
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `SET_KEEPTTL key value cond` → whether it was written: a SET that keeps
/// the TTL the key has (none if it is missing), as Redis's
/// `SET … KEEPTTL`. Like SET it replaces a value of any type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetKeepTtl {
    pub key: Bytes,
    pub value: Bytes,
    pub cond: SetCond,
}

impl SetKeepTtl {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for SetKeepTtl {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
        out.put_lp(&self.value);
        encode_cond(out, self.cond);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(SetKeepTtl {
            key: read_key(r)?,
            value: r.bytes("value", MAX_VALUE)?,
            cond: decode_cond(r)?,
        })
    }
}
