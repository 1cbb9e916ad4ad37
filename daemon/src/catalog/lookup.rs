//! The three layers an item goes through (see the module doc): the filter,
//! the hot cache, storage. A query or resolve takes them in order, counted
//! by the path that answered and shed under load; a write reads the current
//! value through them, never shed and never counted as a query.

use super::cache::{Cached, Item};
use super::metrics::{Op, Path};
use super::stored::alias_key;
use super::{hash_item, Catalog};
use crate::shard::txn::Txn;
use rush_protocol::cmd::{Record, RecordSet};
use rush_protocol::RushError;
use std::borrow::Cow;

/// An alias that a write names: the cache item and its filter hash.
pub(super) struct AliasAt<'a> {
    kind: &'a [u8],
    alias: &'a [u8],
    pub hash: u64,
}

impl<'a> AliasAt<'a> {
    pub fn item(&self) -> Item<'a> {
        Item::Alias {
            kind: self.kind,
            alias: self.alias,
        }
    }

    /// Its storage key.
    pub fn key(&self) -> Vec<u8> {
        alias_key(self.kind, self.alias)
    }
}

impl Catalog {
    /// The answer for an item the filter rules out.
    fn absent(&self, item: Item) -> Cached {
        match item {
            Item::Owner(_) => Cached::Records(RecordSet::default()),
            Item::Alias { .. } => Cached::Alias(None),
        }
    }

    /// Layer 1: false only when the item is certainly absent.
    pub(super) fn bloom_maybe(&self, hash: u64) -> bool {
        !self.bloom_ready || self.bloom.contains(hash)
    }

    /// Add an item to the filter, and to the one a rebuild is building.
    pub(super) fn bloom_insert(&mut self, hash: u64) {
        self.bloom.insert(hash);
        if let Some(rb) = self.rebuild.as_mut() {
            rb.filter.insert(hash);
        }
    }

    /// The three layers for one lookup.
    pub(super) fn lookup(
        &mut self,
        op: Op,
        item: Item,
        now: u64,
        txn: &Txn,
    ) -> Result<Cow<'_, Cached>, RushError> {
        let hash = hash_item(&self.hasher, item);
        let m = &self.metrics.catalog;
        if !self.bloom_maybe(hash) {
            m.answer(op, Path::BloomNegative);
            return Ok(Cow::Owned(self.absent(item)));
        }
        if let Some(i) = self.cache.lookup(hash, item, now) {
            let e = self.cache.entry(i);
            m.answer(
                op,
                if e.value.is_absent() {
                    Path::CacheNegative
                } else {
                    Path::CacheHit
                },
            );
            if e.loaded_group == self.group {
                m.single_flight_joins.inc();
            }
            return Ok(Cow::Borrowed(&e.value));
        }
        if self.shedding() {
            m.shed.inc();
            return Err(RushError::unavailable(
                "catalog storage reads are shed (load shedding); cached and absent owners still answer",
            ));
        }
        let value = self.load(item, txn)?;
        m.answer(
            op,
            if value.is_absent() {
                Path::StorageMiss
            } else {
                Path::StorageHit
            },
        );
        self.cache
            .insert(hash, item, value.clone(), now, self.group);
        Ok(Cow::Owned(value))
    }

    /// The current value of an item for a write: filter, cache, storage —
    /// never shed, never counted as a query.
    fn current(&mut self, hash: u64, item: Item, now: u64, txn: &Txn) -> Result<Cached, RushError> {
        if !self.bloom_maybe(hash) {
            return Ok(self.absent(item));
        }
        if let Some(i) = self.cache.lookup(hash, item, now) {
            return Ok(self.cache.entry(i).value.clone());
        }
        self.load(item, txn)
    }

    /// An owner's current records, for a write.
    pub(super) fn current_records(
        &mut self,
        hash: u64,
        owner: &[u8],
        now: u64,
        txn: &Txn,
    ) -> Result<Vec<Record>, RushError> {
        match self.current(hash, Item::Owner(owner), now, txn)? {
            Cached::Records(r) => Ok(r.to_vec()),
            Cached::Alias(_) => Err(RushError::internal("an owner's cache entry holds an alias")),
        }
    }

    /// The alias `(kind, alias)` a write names, and whether it exists now.
    pub(super) fn alias_for_write<'a>(
        &mut self,
        kind: &'a [u8],
        alias: &'a [u8],
        now: u64,
        txn: &Txn,
    ) -> Result<(AliasAt<'a>, bool), RushError> {
        let mut at = AliasAt {
            kind,
            alias,
            hash: 0,
        };
        at.hash = hash_item(&self.hasher, at.item());
        let exists = !self.current(at.hash, at.item(), now, txn)?.is_absent();
        Ok((at, exists))
    }
}
