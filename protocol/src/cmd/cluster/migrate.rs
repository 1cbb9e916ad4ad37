use crate::cmd::SlotRange;
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_LIST, MAX_TEXT};
use crate::slot::SLOTS;
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `CLUSTER_MIGRATE slots to` (admin) → what moved.
///
/// Sent to the node that owns `slots`; it moves them to the node with id
/// `to`, one slot at a time, while serving everything else: a slot answers
/// TRYAGAIN for the milliseconds its data is copied, then MOVED to the
/// target. The answer comes when every slot has moved (or the first one
/// that could not, which stays with the source: an error). Slots the target
/// already owns are skipped, so resending after an error is how to finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMigrate {
    pub slots: Vec<SlotRange>,
    /// The target's node id (as in the map).
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterMigrateReply {
    /// Slots moved by this request.
    pub slots: u32,
    /// Keys and bytes copied.
    pub keys: u64,
    pub bytes: u64,
    /// The map epoch after the last move.
    pub epoch: u64,
    /// Nodes that could not be sent the final map (addresses): run
    /// `rush cluster apply` or `CLUSTER_SETMAP` against them later. Until
    /// then they answer from an older map and clients are redirected once.
    pub unsynced: Vec<String>,
}

impl ClusterMigrate {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for ClusterMigrate {
    fn encode(&self, out: &mut BytesMut) {
        out.put_count(self.slots.len());
        for r in &self.slots {
            r.encode(out);
        }
        out.put_lp(self.to.as_bytes());
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ClusterMigrate {
            slots: r.list("slots", SLOTS as usize, 4, SlotRange::decode)?,
            to: r.string("to", MAX_TEXT)?,
        })
    }
}

impl Wire for ClusterMigrateReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u32(self.slots);
        out.put_u64(self.keys);
        out.put_u64(self.bytes);
        out.put_u64(self.epoch);
        out.put_count(self.unsynced.len());
        for a in &self.unsynced {
            out.put_lp(a.as_bytes());
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ClusterMigrateReply {
            slots: r.u32("slots")?,
            keys: r.u64("keys")?,
            bytes: r.u64("bytes")?,
            epoch: r.u64("epoch")?,
            unsynced: r.list("unsynced", MAX_LIST, 4, |r| r.string("addr", MAX_TEXT))?,
        })
    }
}
