use super::{key_target, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_FIELD, MAX_HASH_FIELDS, MAX_VALUE};
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `HGETALL key` → every (field, value), sorted by field; empty when missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HGetAll {
    pub key: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HGetAllReply {
    pub fields: Vec<(Bytes, Bytes)>,
}

impl HGetAll {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for HGetAll {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(HGetAll { key: read_key(r)? })
    }
}

impl Wire for HGetAllReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_count(self.fields.len());
        for (f, v) in &self.fields {
            out.put_lp(f);
            out.put_lp(v);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(HGetAllReply {
            fields: r.list("fields", MAX_HASH_FIELDS, 8, |r| {
                Ok((r.bytes("field", MAX_FIELD)?, r.bytes("value", MAX_VALUE)?))
            })?,
        })
    }
}
