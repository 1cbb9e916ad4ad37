use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::BytesMut;

/// `CATALOG_REBUILD` (admin, every shard) → how many shards started
/// rebuilding their Bloom filter from storage (a shard already rebuilding
/// doesn't count). The rebuild runs in the background, a slice per timer
/// tick, and drops entries of deleted owners and aliases.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogRebuild {}

impl CatalogRebuild {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::AllShards)
    }
}

impl Wire for CatalogRebuild {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CatalogRebuild {})
    }
}
