use super::read_owner;
use crate::cmd::catalog::Record;
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{key_slot, RushError, Target};
use bytes::{Bytes, BytesMut};

/// `CATALOG_PUT owner record` → whether the record id is new (false: an
/// existing record with that id was replaced). Durable when answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogPut {
    pub owner: Bytes,
    pub record: Record,
}

impl CatalogPut {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(key_slot(&self.owner)))
    }
}

impl Wire for CatalogPut {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.owner);
        self.record.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CatalogPut {
            owner: read_owner(r)?,
            record: Record::decode(r)?,
        })
    }
}
