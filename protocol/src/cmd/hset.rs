use super::{key_target, read_field, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_FIELDS_PER_REQUEST, MAX_VALUE};
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `HSET key (field value)…` → how many fields were new. At least one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HSet {
    pub key: Bytes,
    pub fields: Vec<(Bytes, Bytes)>,
}

impl HSet {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for HSet {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
        out.put_count(self.fields.len());
        for (f, v) in &self.fields {
            out.put_lp(f);
            out.put_lp(v);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let key = read_key(r)?;
        let fields = r.list("fields", MAX_FIELDS_PER_REQUEST, 8, |r| {
            Ok((read_field(r)?, r.bytes("value", MAX_VALUE)?))
        })?;
        if fields.is_empty() {
            return Err(DecodeError::invalid(
                "fields",
                "at least one field is needed",
            ));
        }
        Ok(HSet { key, fields })
    }
}
