use super::{alias_slot, read_alias, read_owner};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `CATALOG_ALIAS_SET kind alias owner` → whether the alias is new (false:
/// it existed and now points at `owner`). Runs on the alias's slot; the owner
/// need not have records yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogAliasSet {
    pub kind: Bytes,
    pub alias: Bytes,
    pub owner: Bytes,
}

impl CatalogAliasSet {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(alias_slot(&self.kind, &self.alias)))
    }
}

impl Wire for CatalogAliasSet {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.kind);
        out.put_lp(&self.alias);
        out.put_lp(&self.owner);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let (kind, alias) = read_alias(r)?;
        Ok(CatalogAliasSet {
            kind,
            alias,
            owner: read_owner(r)?,
        })
    }
}
