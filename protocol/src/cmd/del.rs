use super::{key_target, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `DEL key` → whether a live key was removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Del {
    pub key: Bytes,
}

impl Del {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for Del {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Del { key: read_key(r)? })
    }
}
