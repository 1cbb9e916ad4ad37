//! CATALOG_REBUILD, and building a shard's Bloom filter from storage.
//!
//! At start the whole filter is built before the shard serves anything. Later
//! rebuilds (too many deleted owners still in the filter, too many layers, an
//! admin's CATALOG_REBUILD) run in slices: each timer tick scans a few slots,
//! so the shard keeps answering in between. While a rebuild runs, every
//! insert goes to both the live filter and the one being built, so an owner
//! added to an already scanned slot is not missed; one added to a slot not
//! yet scanned is simply added twice (a no-op the second time). The scan runs
//! between groups, so it sees every committed write and nothing uncommitted.
//! When the last slot is done the new filter replaces the old one.

use super::cache::Item;
use super::{hash_item, Catalog};
use crate::bloom::ScalableBloom;
use crate::shard::txn::Txn;
use crate::shard::walk::SlotWalk;
use crate::storage::keys;
use crate::storage::{Storage, StorageError};
use rush_protocol::{Reply, RushError};

/// A filter with more layers than this is rebuilt into one (fewer probes).
const MAX_LAYERS: usize = 4;
/// Slots a background rebuild scans per tick at most: a seek per slot costs
/// a few microseconds even when the slot is empty, so this bounds a tick's
/// pause to a few milliseconds (a full pass over 16384 slots takes 16 ticks).
const REBUILD_SLOTS_PER_TICK: usize = 1024;

pub struct Rebuild {
    pub filter: ScalableBloom,
    walk: SlotWalk,
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
            walk: SlotWalk::new(first, last),
            stale_at_start,
            scanned: 0,
        }
    }

    /// Scan whole slots until at least `key_budget` keys were read, or
    /// `slot_budget` slots were scanned, or every slot is done; true when
    /// done.
    pub fn step(
        &mut self,
        txn: &Txn,
        key_budget: usize,
        slot_budget: usize,
        hash: impl Fn(Item) -> u64,
    ) -> Result<bool, StorageError> {
        let (filter, scanned) = (&mut self.filter, &mut self.scanned);
        self.walk
            .step(txn, key_budget, slot_budget, keys::catalog_range, |k, _| {
                let Some(key) = keys::parse_catalog(k) else {
                    return 0;
                };
                filter.insert(hash(key.into()));
                *scanned += 1;
                1
            })
    }
}

impl Catalog {
    /// CATALOG_REBUILD: start a background rebuild; 1 when one started, 0
    /// when one was running already.
    pub(super) fn rebuild(&mut self) -> Result<Reply, RushError> {
        Ok(Reply::CatalogRebuild(self.start_rebuild() as u64))
    }

    /// An empty filter sized for this shard's share of the expected items,
    /// or for 1.5 × what it holds now if that is more (room to grow before
    /// a second layer is needed).
    pub(super) fn new_filter(&self) -> ScalableBloom {
        let share = self.cfg.bloom_expected_items / self.shards.max(1) as u64;
        let live = self.bloom.items().saturating_sub(self.stale);
        ScalableBloom::new(
            share.max(live.saturating_add(live / 2)).max(1),
            self.cfg.bloom_fp_rate,
        )
    }

    /// Build the filter from storage before the shard serves anything.
    pub(super) fn build_filter(&mut self, storage: &Storage) {
        let started = std::time::Instant::now();
        match self.stored_hashes(storage) {
            Ok(hashes) => {
                // One layer sized for what is stored (and room to grow by
                // half), not the configured share grown layer by layer: an
                // absent owner then costs one layer's probes. (Built from the
                // share, 5M owners a shard made four layers, and
                // `Bloom::contains` was 6 % of a 10M-owner query profile:
                // bench/results/NOTES.md.)
                let n = hashes.len() as u64;
                let share = self.cfg.bloom_expected_items / self.shards.max(1) as u64;
                let mut filter = ScalableBloom::new(
                    share.max(n.saturating_add(n / 2)).max(1),
                    self.cfg.bloom_fp_rate,
                );
                for h in hashes {
                    filter.insert(h);
                }
                tracing::debug!(
                    shard = self.shard,
                    items = n,
                    ms = started.elapsed().as_millis() as u64,
                    "catalog Bloom filter built"
                );
                self.bloom = filter;
                self.bloom_ready = true;
            }
            Err(e) => tracing::error!(
                shard = self.shard,
                error = %e,
                "building the catalog Bloom filter failed; lookups skip it until a retry succeeds"
            ),
        }
        self.refresh_gauges();
    }

    /// The filter hash of every owner and alias this shard's slots store.
    fn stored_hashes(&self, storage: &Storage) -> Result<Vec<u64>, StorageError> {
        let mut hashes = Vec::new();
        let hasher = &self.hasher;
        SlotWalk::new(self.first_slot, self.last_slot).step(
            &Txn::new(storage, self.shard),
            usize::MAX,
            usize::MAX,
            keys::catalog_range,
            |k, _| match keys::parse_catalog(k) {
                Some(key) => {
                    hashes.push(hash_item(hasher, key.into()));
                    1
                }
                None => 0,
            },
        )?;
        Ok(hashes)
    }

    /// Timer: start a rebuild if one is due (or the filter was never
    /// built), and advance the one running by a slice.
    pub(super) fn rebuild_step(&mut self, txn: &Txn) {
        if self.rebuild.is_none() && (!self.bloom_ready || self.needs_rebuild()) {
            self.start_rebuild();
        }
        if let Some(rb) = self.rebuild.as_mut() {
            let hasher = &self.hasher;
            let budget = self.cfg.bloom_rebuild_keys_per_tick;
            match rb.step(txn, budget, REBUILD_SLOTS_PER_TICK, |i| {
                hash_item(hasher, i)
            }) {
                Ok(true) => self.finish_rebuild(),
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(shard = self.shard, error = %e, "catalog filter rebuild failed; retrying");
                    self.rebuild = None;
                }
            }
        }
    }

    fn needs_rebuild(&self) -> bool {
        let stale = self.stale >= self.cfg.bloom_rebuild_min_stale
            && self.stale as f64
                >= self.cfg.bloom_rebuild_stale_fraction * self.bloom.items() as f64;
        stale || self.bloom.layers() > MAX_LAYERS
    }

    /// Start a background rebuild unless one is running; true if started.
    fn start_rebuild(&mut self) -> bool {
        if self.rebuild.is_some() {
            return false;
        }
        tracing::info!(
            shard = self.shard,
            items = self.bloom.items(),
            stale = self.stale,
            layers = self.bloom.layers(),
            "rebuilding the catalog Bloom filter"
        );
        self.rebuild = Some(Rebuild::new(
            self.new_filter(),
            self.first_slot,
            self.last_slot,
            self.stale,
        ));
        true
    }

    fn finish_rebuild(&mut self) {
        let Some(rb) = self.rebuild.take() else {
            return;
        };
        self.stale = self.stale.saturating_sub(rb.stale_at_start);
        self.bloom = rb.filter;
        self.bloom_ready = true;
        self.metrics.catalog.bloom_rebuilds.inc();
        tracing::info!(
            shard = self.shard,
            items = self.bloom.items(),
            "catalog Bloom filter rebuilt"
        );
    }
}
