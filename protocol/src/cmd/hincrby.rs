use super::{key_target, read_field, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `HINCRBY key field delta` → the field's new value (a missing field is 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HIncrBy {
    pub key: Bytes,
    pub field: Bytes,
    pub delta: i64,
}

impl HIncrBy {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for HIncrBy {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
        out.put_lp(&self.field);
        out.put_i64(self.delta);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(HIncrBy {
            key: read_key(r)?,
            field: read_field(r)?,
            delta: r.i64("delta")?,
        })
    }
}
