use super::read_owner;
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_WARM_OWNERS;
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `CATALOG_WARM owner…` (admin, every shard): load these owners' records
/// into the hot cache now (before a sale). Each shard takes the owners of
/// its slots; the reads happen even while storage reads are shed, because an
/// operator asked for them. Owners of slots this node doesn't serve are
/// ignored: send WARM to every node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CatalogWarm {
    pub owners: Vec<Bytes>,
}

/// How many owners were loaded into the cache, and how many have no records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CatalogWarmReply {
    pub loaded: u64,
    pub absent: u64,
}

impl CatalogWarm {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::AllShards)
    }
}

impl Wire for CatalogWarm {
    fn encode(&self, out: &mut BytesMut) {
        out.put_count(self.owners.len());
        for o in &self.owners {
            out.put_lp(o);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CatalogWarm {
            owners: r.list("owners", MAX_WARM_OWNERS, 5, read_owner)?,
        })
    }
}

impl Wire for CatalogWarmReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.loaded);
        out.put_u64(self.absent);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CatalogWarmReply {
            loaded: r.u64("loaded")?,
            absent: r.u64("absent")?,
        })
    }
}
