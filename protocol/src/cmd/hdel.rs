use super::{key_target, read_field, read_key};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_FIELDS_PER_REQUEST;
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `HDEL key field…` → how many fields were removed. A hash left empty is
/// removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HDel {
    pub key: Bytes,
    pub fields: Vec<Bytes>,
}

impl HDel {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        key_target(&self.key)
    }
}

impl Wire for HDel {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.key);
        out.put_count(self.fields.len());
        for f in &self.fields {
            out.put_lp(f);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let key = read_key(r)?;
        let fields = r.list("fields", MAX_FIELDS_PER_REQUEST, 4, read_field)?;
        if fields.is_empty() {
            return Err(DecodeError::invalid(
                "fields",
                "at least one field is needed",
            ));
        }
        Ok(HDel { key, fields })
    }
}
