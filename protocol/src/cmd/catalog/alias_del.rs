use super::{alias_slot, read_alias};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `CATALOG_ALIAS_DEL kind alias` → whether the alias existed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogAliasDel {
    pub kind: Bytes,
    pub alias: Bytes,
}

impl CatalogAliasDel {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(alias_slot(&self.kind, &self.alias)))
    }
}

impl Wire for CatalogAliasDel {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.kind);
        out.put_lp(&self.alias);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let (kind, alias) = read_alias(r)?;
        Ok(CatalogAliasDel { kind, alias })
    }
}
