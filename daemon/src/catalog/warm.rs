//! CATALOG_WARM: load this shard's share of a list of owners into the
//! cache (before a sale). Not shed: an operator asked for these reads.

use super::cache::Item;
use super::{hash_item, Catalog};
use crate::shard::txn::Txn;
use rush_protocol::cmd::{CatalogWarm, CatalogWarmReply};
use rush_protocol::{key_slot, Reply, RushError};

impl Catalog {
    pub(super) fn warm(
        &mut self,
        r: &CatalogWarm,
        now: u64,
        txn: &Txn,
    ) -> Result<Reply, RushError> {
        let mut reply = CatalogWarmReply::default();
        for owner in &r.owners {
            let slot = key_slot(owner);
            if crate::shard::route::shard_of_slot(slot, self.shards) != self.shard
                || !self.routing.owns(slot)
            {
                continue;
            }
            let item = Item::Owner(owner);
            let hash = hash_item(&self.hasher, item);
            let absent = if !self.bloom_maybe(hash) {
                true
            } else if let Some(i) = self.cache.lookup(hash, item, now) {
                self.cache.entry(i).value.is_absent()
            } else {
                let value = self.load(item, txn)?;
                let absent = value.is_absent();
                self.metrics.catalog.warmed.inc();
                self.cache.insert(hash, item, value, now, 0);
                absent
            };
            if absent {
                reply.absent += 1;
            } else {
                reply.loaded += 1;
            }
        }
        Ok(Reply::CatalogWarm(reply))
    }
}
