use super::{key_target, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `HLEN key` → how many fields the hash has; 0 when missing. The count is
/// kept beside the hash, so the answer reads no field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HLen {
    pub key: Bytes,
}

impl HLen {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for HLen {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(HLen { key: read_key(r)? })
    }
}
