//! Slot → shard: the one place that decides which shard of a node owns a
//! slot. Everything else (the listener, forwarding, storage's rebalancing,
//! services that sweep their own slots, the layout told to clients) asks
//! here.
//!
//! Shards own contiguous, equal ranges of the 16384 slots, so a shard's
//! slots are one key range of its column family (keys start with their
//! big-endian slot): audits, rebuilds and migrations scan one range.

use rush_protocol::SLOTS;
use std::ops::RangeInclusive;

/// The shard that owns `slot` when a node runs `shards` shards.
#[inline]
pub fn shard_of_slot(slot: u16, shards: usize) -> usize {
    slot as usize * shards / SLOTS as usize
}

/// The slots shard `shard` of `shards` owns: first..=last (empty when there
/// are more shards than slots and this one got none).
pub fn slots_of_shard(shard: usize, shards: usize) -> RangeInclusive<u16> {
    // The first slot s with s * shards / SLOTS == shard is
    // ceil(shard * SLOTS / shards).
    let first = (shard * SLOTS as usize).div_ceil(shards);
    let next = ((shard + 1) * SLOTS as usize).div_ceil(shards);
    if next <= first {
        #[allow(clippy::reversed_empty_ranges)]
        return 1..=0;
    }
    first as u16..=(next - 1) as u16
}

/// A node's slot → shard table (a pure function of the shard count; kept as
/// a value so callers don't pass the count around).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Router {
    shards: usize,
}

impl Router {
    pub fn new(shards: usize) -> Router {
        assert!(shards > 0, "a node runs at least one shard");
        Router { shards }
    }

    pub fn shards(&self) -> usize {
        self.shards
    }

    #[inline]
    pub fn shard(&self, slot: u16) -> usize {
        shard_of_slot(slot, self.shards)
    }

    pub fn slots(&self, shard: usize) -> RangeInclusive<u16> {
        slots_of_shard(shard, self.shards)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_slot_once_and_agree_with_the_function() {
        for shards in [1, 2, 3, 4, 7, 16, 1024] {
            let mut next = 0u32;
            for shard in 0..shards {
                let range = slots_of_shard(shard, shards);
                if range.is_empty() {
                    continue;
                }
                assert_eq!(
                    *range.start() as u32,
                    next,
                    "{shards} shards, shard {shard}"
                );
                for slot in range.clone() {
                    assert_eq!(shard_of_slot(slot, shards), shard);
                }
                next = *range.end() as u32 + 1;
            }
            assert_eq!(next, SLOTS as u32, "{shards} shards cover every slot");
        }
        assert_eq!(slots_of_shard(0, 2), 0..=8191);
        assert_eq!(slots_of_shard(1, 2), 8192..=16383);
        assert_eq!(Router::new(2).shard(8192), 1);
    }
}
