use super::{alias_slot, read_alias};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `CATALOG_RESOLVE kind alias` → the owner the alias points at, if any.
/// The first half of a query by alias; answered through the same three
/// layers (Bloom filter, cache, storage) as a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogResolve {
    pub kind: Bytes,
    pub alias: Bytes,
}

impl CatalogResolve {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(alias_slot(&self.kind, &self.alias)))
    }
}

impl Wire for CatalogResolve {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.kind);
        out.put_lp(&self.alias);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let (kind, alias) = read_alias(r)?;
        Ok(CatalogResolve { kind, alias })
    }
}
