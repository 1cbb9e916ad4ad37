use super::{key_target, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `EXISTS key` → whether a live key of any type is there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exists {
    pub key: Bytes,
}

impl Exists {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for Exists {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Exists { key: read_key(r)? })
    }
}
