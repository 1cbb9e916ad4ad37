use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_LIST, MAX_TEXT};
use crate::slot::SLOTS;
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `CLUSTER_SLOTS` → the cluster map: its epoch and each node's slot ranges.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterSlots {}

/// An inclusive range of slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
}

impl SlotRange {
    pub fn contains(&self, slot: u16) -> bool {
        self.start <= slot && slot <= self.end
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    pub id: String,
    pub addr: String,
    pub ranges: Vec<SlotRange>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterSlotsReply {
    pub epoch: u64,
    pub nodes: Vec<ClusterNode>,
}

impl ClusterSlotsReply {
    /// The node serving `slot`, if any.
    pub fn node_for(&self, slot: u16) -> Option<&ClusterNode> {
        self.nodes
            .iter()
            .find(|n| n.ranges.iter().any(|r| r.contains(slot)))
    }
}

impl ClusterSlots {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for ClusterSlots {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ClusterSlots {})
    }
}

impl Wire for SlotRange {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u16(self.start);
        out.put_u16(self.end);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let start = r.u16("range start")?;
        let end = r.u16("range end")?;
        if start > end || end >= SLOTS {
            return Err(DecodeError::invalid(
                "slot range",
                format!("{start}-{end} is not within 0-{}", SLOTS - 1),
            ));
        }
        Ok(SlotRange { start, end })
    }
}

impl Wire for ClusterNode {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.id.as_bytes());
        out.put_lp(self.addr.as_bytes());
        out.put_count(self.ranges.len());
        for range in &self.ranges {
            range.encode(out);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ClusterNode {
            id: r.string("node id", MAX_TEXT)?,
            addr: r.string("node addr", MAX_TEXT)?,
            ranges: r.list("ranges", SLOTS as usize, 4, SlotRange::decode)?,
        })
    }
}

impl Wire for ClusterSlotsReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.epoch);
        out.put_count(self.nodes.len());
        for node in &self.nodes {
            node.encode(out);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ClusterSlotsReply {
            epoch: r.u64("epoch")?,
            nodes: r.list("nodes", MAX_LIST, 12, ClusterNode::decode)?,
        })
    }
}
