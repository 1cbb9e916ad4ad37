//! Slots that start or stop being this shard's (moved between nodes, or a
//! new cluster map): the filter and the cache follow.

use super::cache::Item;
use super::{hash_item, Catalog};
use crate::cluster::routing::SlotSet;
use crate::storage::{keys, Storage};
use rush_protocol::cmd::alias_slot;
use rush_protocol::key_slot;

impl Catalog {
    /// Slots this shard serves from now on (moved in, or given to this node
    /// by a new map): their owners and aliases join the filter, so none of
    /// them is denied; cache entries left from an earlier ownership go.
    pub(super) fn slots_imported(&mut self, slots: &[u16], storage: &Storage) {
        self.forget_slots(slots);
        for &slot in slots {
            let (from, to) = keys::catalog_range(slot);
            let mut hashes = Vec::new();
            let hasher = &self.hasher;
            let scanned = storage.scan(self.shard, &from, &to, |k, _| {
                if let Some(key) = keys::parse_catalog(k) {
                    hashes.push(hash_item(hasher, key.into()));
                }
                true
            });
            if let Err(e) = scanned {
                // Without the slot's items the filter could deny them: treat
                // every lookup as "maybe" until a rebuild succeeds.
                tracing::error!(shard = self.shard, slot, error = %e, "reading an imported slot's catalog keys failed; filter off until rebuilt");
                self.bloom_ready = false;
                return;
            }
            for h in hashes {
                self.bloom_insert(h);
            }
        }
        self.refresh_gauges();
    }

    /// Slots this shard no longer serves: their cache entries go. (Filter
    /// entries stay: a request for them is answered MOVED before it looks.)
    pub(super) fn slots_dropped(&mut self, slots: &[u16]) {
        self.forget_slots(slots);
        self.refresh_gauges();
    }

    fn forget_slots(&mut self, slots: &[u16]) {
        let slots = SlotSet::of(slots);
        self.cache.retain(|item| {
            let slot = match item {
                Item::Owner(owner) => key_slot(owner),
                Item::Alias { kind, alias } => alias_slot(kind, alias),
            };
            !slots.contains(slot)
        });
    }
}
