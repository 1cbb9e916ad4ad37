use super::cluster_slots::SlotRange;
use crate::codec::{DecodeError, Reader, Wire};
use crate::limits::MAX_SHARDS;
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `SHARDS` → the node's shards and the slots each owns, so a client can
/// keep one connection per shard (see SHARD_BIND) and send every request
/// to the shard that runs it. Shard `i`'s slots are `ranges[i]`; every slot
/// is in exactly one range.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Shards {}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShardsReply {
    /// One range per shard, in shard order (empty ranges are `start > end`).
    pub ranges: Vec<SlotRange>,
}

impl ShardsReply {
    /// The shard that owns `slot`, if the layout covers it.
    pub fn shard_of(&self, slot: u16) -> Option<usize> {
        self.ranges.iter().position(|r| r.contains(slot))
    }
}

impl Shards {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for Shards {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Shards {})
    }
}

impl Wire for ShardsReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u16(self.ranges.len() as u16);
        for r in &self.ranges {
            r.encode(out);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let n = r.u16("shards")? as usize;
        if n == 0 || n > MAX_SHARDS {
            return Err(DecodeError::invalid("shards", format!("{n} shards")));
        }
        let mut ranges = Vec::with_capacity(n);
        for _ in 0..n {
            ranges.push(SlotRange::decode(r)?);
        }
        in_slot_order(&ranges)?;
        Ok(ShardsReply { ranges })
    }
}

/// Ranges must be in slot order (empty ones aside).
fn in_slot_order(ranges: &[SlotRange]) -> Result<(), DecodeError> {
    let mut next = 0u32;
    for r in ranges.iter().filter(|r| r.start <= r.end) {
        if u32::from(r.start) < next {
            return Err(DecodeError::invalid(
                "shards",
                "ranges overlap or are out of order",
            ));
        }
        next = u32::from(r.end) + 1;
    }
    Ok(())
}
