use super::{read_owner, read_text};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_ID;
use crate::{key_slot, RushError, Target};
use bytes::{Bytes, BytesMut};

/// `CATALOG_DELETE owner record_id` → whether the record existed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogDelete {
    pub owner: Bytes,
    pub record_id: Bytes,
}

impl CatalogDelete {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(key_slot(&self.owner)))
    }
}

impl Wire for CatalogDelete {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.owner);
        out.put_lp(&self.record_id);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let owner = read_owner(r)?;
        let record_id = read_text(r, "record id", MAX_ID)?;
        if record_id.is_empty() {
            return Err(DecodeError::invalid("record id", "must not be empty"));
        }
        Ok(CatalogDelete { owner, record_id })
    }
}
