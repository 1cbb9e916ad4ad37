//! A walk over a shard's slots a slice at a time, for indexes rebuilt from
//! storage while the shard keeps serving (the catalog's and the limits'
//! Bloom filters).
//!
//! Each [`SlotWalk::step`] reads whole slots — a per-slot key range — until
//! a budget of keys or of slots is spent, so a timer tick pauses the shard
//! for a bounded time. It reads through the shard's [`Txn`] between groups:
//! every committed write, including those not yet written back to RocksDB,
//! and nothing uncommitted. An index being rebuilt must also take every key
//! written while the walk runs (a key added to a slot already walked would
//! be missed otherwise).

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
    /// which says whether it counted against `key_budget` — until at least
    /// `key_budget` keys counted, or `slot_budget` slots were read (each is
    /// an iterator seek, even when empty), or every slot is done; true when
    /// done.
    pub fn step(
        &mut self,
        txn: &Txn,
        key_budget: usize,
        slot_budget: usize,
        range: impl Fn(u16) -> (Vec<u8>, Vec<u8>),
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool, StorageError> {
        let mut counted = 0usize;
        let mut slots = 0usize;
        while self.next <= self.last as u32 {
            let (from, to) = range(self.next as u16);
            txn.scan_stored(&from, &to, |k, v| {
                if f(k, v) {
                    counted += 1;
                }
                true
            })?;
            self.next += 1;
            slots += 1;
            if counted >= key_budget || slots >= slot_budget {
                break;
            }
        }
        Ok(self.done())
    }

    pub fn done(&self) -> bool {
        self.next > self.last as u32
    }
}
