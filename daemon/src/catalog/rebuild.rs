//! Building a shard's Bloom filter from storage.
//!
//! At start the whole filter is built before the shard serves anything. Later
//! rebuilds (too many deleted owners still in the filter, an admin request)
//! run in slices: each timer tick scans a few slots, so the shard keeps
//! answering in between. While a rebuild runs, every insert goes to both the
//! live filter and the one being built, so an owner added to an already
//! scanned slot is not missed; one added to a slot not yet scanned is simply
//! added twice (a no-op the second time). The scan runs between groups, so
//! it sees every committed write and nothing uncommitted. When the last slot
//! is done the new filter replaces the old one.

use super::bloom::ScalableBloom;
use super::cache::Item;
use crate::storage::keys::{self, CatalogKey};
use crate::storage::{Storage, StorageError};

pub struct Rebuild {
    pub filter: ScalableBloom,
    /// The next slot to scan (u32: one past the last slot is "done").
    next: u32,
    last: u16,
    /// Removals counted before this rebuild began: those entries are not in
    /// the new filter. Removals during the rebuild may be (their slot may
    /// have been scanned before), so they stay counted.
    pub stale_at_start: u64,
    /// Keys added so far.
    pub scanned: u64,
}

impl Rebuild {
    pub fn new(filter: ScalableBloom, first: u16, last: u16, stale_at_start: u64) -> Rebuild {
        Rebuild {
            filter,
            next: first as u32,
            last,
            stale_at_start,
            scanned: 0,
        }
    }

    /// Scan whole slots until at least `key_budget` keys were read, or
    /// `slot_budget` slots were scanned (each scan is an iterator seek, even
    /// on an empty slot), or every slot is done; true when done.
    pub fn step(
        &mut self,
        storage: &Storage,
        shard: usize,
        key_budget: usize,
        slot_budget: usize,
        hash: impl Fn(Item) -> u64,
    ) -> Result<bool, StorageError> {
        let mut read = 0usize;
        let mut slots = 0usize;
        while self.next <= self.last as u32 {
            let slot = self.next as u16;
            let (from, to) = keys::catalog_range(slot);
            let filter = &mut self.filter;
            storage.scan(shard, &from, &to, |k, _| {
                let item = match keys::parse_catalog(k) {
                    Some(CatalogKey::Records { owner }) => Item::Owner(owner),
                    Some(CatalogKey::Alias { kind, alias }) => Item::Alias { kind, alias },
                    None => return true,
                };
                filter.insert(hash(item));
                read += 1;
                true
            })?;
            self.next += 1;
            slots += 1;
            if read >= key_budget || slots >= slot_budget {
                break;
            }
        }
        self.scanned += read as u64;
        Ok(self.next > self.last as u32)
    }
}
