use crate::cmd::ClusterSlotsReply;
use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `MIGRATE_COMMIT id slot chunks keys map` (admin, node to node) → the
/// target's new epoch.
///
/// Ends an import: the target checks it received exactly `chunks` chunks
/// holding `keys` pairs of import `id`, then, in one synced write, takes the
/// slot (it stores `map`, which must be newer than its own and give it the
/// slot) and remembers that `id` committed; only then does it serve the slot
/// and answer. Resending after success answers the same epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateCommit {
    pub id: u64,
    pub slot: u16,
    pub chunks: u32,
    pub keys: u64,
    pub map: ClusterSlotsReply,
}

impl MigrateCommit {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for MigrateCommit {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.id);
        out.put_u16(self.slot);
        out.put_u32(self.chunks);
        out.put_u64(self.keys);
        self.map.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let id = r.u64("id")?;
        let slot = r.slot("slot")?;
        Ok(MigrateCommit {
            id,
            slot,
            chunks: r.u32("chunks")?,
            keys: r.u64("keys")?,
            map: ClusterSlotsReply::decode(r)?,
        })
    }
}
