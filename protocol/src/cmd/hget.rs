use super::{key_target, read_field, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `HGET key field` → the field's value, or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HGet {
    pub key: Bytes,
    pub field: Bytes,
}

impl HGet {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for HGet {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
        out.put_lp(&self.field);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(HGet {
            key: read_key(r)?,
            field: read_field(r)?,
        })
    }
}
