use super::{key_target, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `GET key` → the string value, or none when missing or expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Get {
    pub key: Bytes,
}

impl Get {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for Get {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Get { key: read_key(r)? })
    }
}
