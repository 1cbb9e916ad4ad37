use super::{key_target, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `INCRBY key delta` → the new value. A missing key counts as 0; the TTL of
/// an existing key is kept; a non-integer value is WRONG_TYPE; overflow is
/// BAD_REQUEST and changes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncrBy {
    pub key: Bytes,
    pub delta: i64,
}

impl IncrBy {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for IncrBy {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
        out.put_i64(self.delta);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(IncrBy {
            key: read_key(r)?,
            delta: r.i64("delta")?,
        })
    }
}
