//! A walk over a shard's slots a slice at a time, for indexes rebuilt from
//! storage while the shard keeps serving (the catalog's Bloom filter and
//! the key filters).
//!
//! Each [`SlotWalk::step`] reads whole slots — a per-slot key range — until
//! a budget is spent, so a timer tick pauses the shard for a bounded time.
//! It reads through the shard's [`Txn`] between groups
//! ([`Txn::scan_committed`]): every committed key, including those not yet
//! written back to RocksDB (without waiting for the write-back), maybe a
//! deleted one or one twice, and nothing uncommitted — for indexes that
//! must hold every key and may hold more. An index being rebuilt must also
//! take every key written while the walk runs (a key added to a slot
//! already walked would be missed otherwise).

use super::txn::Txn;
use crate::storage::StorageError;

pub struct SlotWalk {
    /// The next slot to read (u32: one past the last slot is "done").
    next: u32,
    last: u16,
}

impl SlotWalk {
    /// A walk over `first..=last`.
    pub fn new(first: u16, last: u16) -> SlotWalk {
        SlotWalk {
            next: first as u32,
            last,
        }
    }

    /// Read whole slots — `range(slot)`, each key and value handed to `f`,
    /// which says what it cost — until the costs reach `budget`, or
    /// `slot_budget` slots were read (each is an iterator seek, even when
    /// empty), or every slot is done; true when done.
    pub fn step(
        &mut self,
        txn: &Txn,
        budget: usize,
        slot_budget: usize,
        range: impl Fn(u16) -> (Vec<u8>, Vec<u8>),
        mut f: impl FnMut(&[u8], &[u8]) -> usize,
    ) -> Result<bool, StorageError> {
        let mut spent = 0usize;
        let mut slots = 0usize;
        while self.next <= self.last as u32 {
            let (from, to) = range(self.next as u16);
            txn.scan_committed(&from, &to, |k, v| {
                spent = spent.saturating_add(f(k, v));
            })?;
            self.next += 1;
            slots += 1;
            if spent >= budget || slots >= slot_budget {
                break;
            }
        }
        Ok(self.done())
    }

    pub fn done(&self) -> bool {
        self.next > self.last as u32
    }
}
