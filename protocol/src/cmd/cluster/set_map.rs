use crate::cmd::ClusterSlotsReply;
use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::BytesMut;

/// `CLUSTER_SETMAP map` (admin) → the epoch the node now runs.
///
/// The body is exactly a `CLUSTER_SLOTS` reply. The node accepts the map
/// only if its epoch is newer than the node's (or it is the very map the node
/// already runs: a resend is harmless), checks it (every slot owned exactly
/// once, ranges within 0–16383, node ids unique), stores it durably and only
/// then answers. An older epoch, or the same epoch with other contents, is
/// CONFLICT; an invalid map BAD_REQUEST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSetMap {
    pub map: ClusterSlotsReply,
}

impl ClusterSetMap {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for ClusterSetMap {
    fn encode(&self, out: &mut BytesMut) {
        self.map.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ClusterSetMap {
            map: ClusterSlotsReply::decode(r)?,
        })
    }
}
