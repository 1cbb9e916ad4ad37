//! Bloom-guarded catalog lookups: records grouped under an owner (a merchant
//! code), found by owner or through aliases, answered by three layers inside
//! each shard:
//!
//! 1. a scalable Bloom filter over owners that have records and over aliases
//!    ([`bloom`]): a negative answers "no records" without touching the cache
//!    or storage — that is where the ~40 % of queries for merchants without
//!    contracts end;
//! 2. a hot cache bounded in bytes ([`cache`]), owner → whole record set,
//!    written through by the same shard thread that writes storage, so it is
//!    never stale;
//! 3. RocksDB.
//!
//! **Cold reads are inline on the shard thread.** A cold owner is one point
//! read (its records are one value), usually served from RocksDB's block
//! cache or one SST block, so it holds the shard for microseconds. Because a
//! shard applies its requests one at a time, the first query for a cold owner
//! reads storage and fills the cache, and every other query for that owner —
//! however many connections they came on — finds the entry: concurrent
//! requests for one cold owner cause exactly one storage read, with no
//! single-flight table, no waiter lists and no race between a load and a
//! write (a blocking pool would need all three, plus versioning so a write
//! that lands while a load is in flight isn't overwritten by stale data).
//! Queries that find an entry filled earlier in their own group are counted
//! as single-flight joins. The cost — a genuinely slow disk read stalls the
//! shard — is what load shedding is for.
//!
//! **Storage.** An owner's whole record set is one value,
//! `keys::catalog_records(slot, owner)`, so a cold query is one point read
//! (not a range scan) and a write is a read-modify-write through the group's
//! [`Txn`], which sees earlier writes of the same group — a range scan would
//! not. Sets are small by contract (3–5 records; at most
//! `max_records_per_owner` and 1 MiB). Aliases are
//! `keys::catalog_alias(alias_slot, kind, alias)` → owner, on the alias's own
//! slot; a query by alias is resolved by the client (CATALOG_RESOLVE, then
//! CATALOG_QUERY), so no shard ever waits on another.
//!
//! **Deletes and the filter.** Nothing leaves a Bloom filter. Removing an
//! owner's last record or an alias counts one "stale" entry; when stale
//! entries exceed `bloom_rebuild_stale_fraction` of the filter's items (and
//! `bloom_rebuild_min_stale`), the shard rebuilds its filter from storage in
//! the background ([`rebuild`]). Until then a stale entry costs one storage
//! read, then is answered by a cached "absent" entry; both count as false
//! positives in the measured rate, so drift is visible and bounded.
//!
//! **Shedding.** With shedding on (or "auto" and the shard's queue deeper
//! than `shed_queue_depth`), a lookup that would read storage answers
//! UNAVAILABLE instead; Bloom negatives and cache hits keep answering.
//! Writes and warm-up are never shed.

pub mod bloom;
pub mod cache;
pub mod config;
pub mod metrics;
mod rebuild;

pub use config::CatalogConfig;
pub use metrics::CatalogMetrics;

use crate::metrics::Metrics;
use crate::services::Registration;
use crate::shard::service::{Cx, ShardService};
use crate::shard::txn::Txn;
use crate::storage::keys::kind;
use crate::storage::value::{self, Stored, HEADER};
use crate::storage::{keys, Storage};
use bloom::ScalableBloom;
use bytes::BufMut;
use bytes::Bytes;
use cache::{Cached, HotCache, Item};
use metrics::{Op, Path};
use prometheus::IntGauge;
use rebuild::Rebuild;
use rush_protocol::cmd::*;
use rush_protocol::limits::MAX_OWNER_BYTES;
use rush_protocol::{key_slot, ErrorCode, Reply, Request, RushError, Service, Wire, WriteExt};
use std::borrow::Cow;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::Arc;

pub const REGISTRATION: Registration = Registration {
    service: Service::Catalog,
    build: |ctx, shard| {
        Ok(Box::new(Catalog::new(
            shard,
            ctx.config.shard_count(),
            &ctx.config.catalog,
            ctx.metrics.clone(),
            ctx.routing.clone(),
        )))
    },
    combine,
};

impl ShardService for Catalog {
    fn open(&mut self, storage: &Storage) {
        self.build_filter(storage);
    }

    fn apply(&mut self, req: &Request, cx: &mut Cx) -> Result<Reply, RushError> {
        self.dispatch(req, cx.now, cx.txn)
    }

    fn begin_group(&mut self, backlog: usize) {
        self.start_group(backlog);
    }

    fn tick(&mut self, cx: &mut Cx) {
        let storage = cx.txn.storage();
        self.timers(storage);
    }

    fn on_commit_failure(&mut self) {
        self.forget_cache();
    }

    fn on_slots_imported(&mut self, slots: &[u16], storage: &Storage) {
        self.slots_imported(slots, storage);
    }

    fn on_slots_dropped(&mut self, slots: &[u16]) {
        self.slots_dropped(slots);
    }
}

/// Merge the per-shard answers of the catalog's admin broadcasts.
fn combine(req: &Request, replies: Vec<Reply>) -> Result<Reply, RushError> {
    match req {
        Request::CatalogShed(_) => Ok(Reply::CatalogShed(())),
        Request::CatalogWarm(_) => {
            let mut sum = CatalogWarmReply::default();
            for r in replies {
                if let Reply::CatalogWarm(w) = r {
                    sum.loaded += w.loaded;
                    sum.absent += w.absent;
                }
            }
            Ok(Reply::CatalogWarm(sum))
        }
        Request::CatalogRebuild(_) => Ok(Reply::CatalogRebuild(
            replies
                .iter()
                .map(|r| match r {
                    Reply::CatalogRebuild(n) => *n,
                    _ => 0,
                })
                .sum(),
        )),
        other => crate::services::no_broadcast(other, replies),
    }
}

/// Format byte after the value header of a stored record set.
const RECORDS_FORMAT: u8 = 1;
/// A filter with more layers than this is rebuilt into one (fewer probes).
const MAX_LAYERS: usize = 4;
/// Slots a background rebuild scans per tick at most: a seek per slot costs
/// a few microseconds even when the slot is empty, so this bounds a tick's
/// pause to a few milliseconds (a full pass over 16384 slots takes 16 ticks).
const REBUILD_SLOTS_PER_TICK: usize = 1024;

/// The catalog service of one shard. Lives on the shard thread.
pub struct Catalog {
    shard: usize,
    shards: usize,
    /// This shard's slots, `first..=last` (shards own contiguous ranges).
    first_slot: u16,
    last_slot: u16,
    cfg: CatalogConfig,
    /// Keyed SipHash with random keys chosen at start: nobody outside can
    /// compute which owners collide in the filter, so absent owners can't be
    /// crafted to pass it (cache penetration by design). The filter is
    /// rebuilt at every start, so the keys needn't persist.
    hasher: RandomState,
    bloom: ScalableBloom,
    /// False until the filter has been built from storage (or after a build
    /// failed): every lookup is then a "maybe", so nothing is ever missed.
    bloom_ready: bool,
    /// Owners and aliases removed since the filter was built (upper bound:
    /// a removed owner that comes back is still counted).
    stale: u64,
    rebuild: Option<Rebuild>,
    cache: HotCache,
    shed: ShedMode,
    /// Requests queued behind the current group (auto shedding).
    queue_depth: usize,
    /// Number of the group being applied (joins are hits within one group).
    group: u64,
    metrics: Arc<Metrics>,
    gauges: Gauges,
    /// Which slots this node owns: a warm-up skips owners of other nodes'
    /// slots (each node of a cluster warms its own).
    routing: Arc<crate::cluster::routing::Routing>,
}

/// This shard's gauges, resolved once.
struct Gauges {
    cache_bytes: IntGauge,
    cache_entries: IntGauge,
    bloom_items: IntGauge,
    bloom_bytes: IntGauge,
    bloom_layers: IntGauge,
    bloom_stale: IntGauge,
    shedding: IntGauge,
}

fn hash_item(hasher: &RandomState, item: Item) -> u64 {
    let mut h = hasher.build_hasher();
    match item {
        Item::Owner(owner) => {
            h.write_u8(0);
            h.write(owner);
        }
        Item::Alias { kind, alias } => {
            h.write_u8(1);
            h.write_u32(kind.len() as u32);
            h.write(kind);
            h.write(alias);
        }
    }
    h.finish()
}

fn storage_error(e: impl std::fmt::Display) -> RushError {
    RushError::unavailable(format!("storage: {e}"))
}

fn corrupt(e: impl std::fmt::Display) -> RushError {
    RushError::internal(format!("stored catalog value: {e}"))
}

fn too_large(message: String) -> RushError {
    RushError::new(ErrorCode::TooLarge, message)
}

/// A stored record set: header (kind CATALOG_RECORDS, no expiry), format
/// byte, then `list<record>` exactly as on the wire (PROTOCOL.md), sorted by
/// record id.
fn encode_records(records: &[Record]) -> Vec<u8> {
    let mut body = bytes::BytesMut::new();
    body.put_u8(RECORDS_FORMAT);
    // The same bytes as `CatalogQueryReply::encode`, without building one.
    body.put_count(records.len());
    for r in records {
        r.encode(&mut body);
    }
    value::encode(kind::CATALOG_RECORDS, 0, &body)
}

/// Decode a stored record set. The records are slices of one buffer, so a
/// cached set is one allocation, not one per string.
fn decode_records(raw: Bytes) -> Result<Vec<Record>, RushError> {
    let stored = Stored::decode(&raw).map_err(corrupt)?;
    if stored.kind != kind::CATALOG_RECORDS || stored.payload.first() != Some(&RECORDS_FORMAT) {
        return Err(corrupt(format!(
            "kind {} format {:?}",
            stored.kind,
            stored.payload.first()
        )));
    }
    let body = raw.slice(HEADER + 1..);
    CatalogQueryReply::decode_body(body)
        .map(|r| r.records)
        .map_err(corrupt)
}

/// Payload bytes of a stored set (what `MAX_OWNER_BYTES` bounds).
fn payload_len(value: &[u8]) -> usize {
    value.len() - HEADER - 1
}

impl Catalog {
    pub fn new(
        shard: usize,
        shards: usize,
        cfg: &CatalogConfig,
        metrics: Arc<Metrics>,
        routing: Arc<crate::cluster::routing::Routing>,
    ) -> Self {
        let slots: Vec<u16> = (0..rush_protocol::SLOTS)
            .filter(|&s| crate::shard::route::shard_of_slot(s, shards) == shard)
            .collect();
        let m = &metrics.catalog;
        let gauges = Gauges {
            cache_bytes: CatalogMetrics::shard(&m.cache_bytes, shard),
            cache_entries: CatalogMetrics::shard(&m.cache_entries, shard),
            bloom_items: CatalogMetrics::shard(&m.bloom_items, shard),
            bloom_bytes: CatalogMetrics::shard(&m.bloom_bytes, shard),
            bloom_layers: CatalogMetrics::shard(&m.bloom_layers, shard),
            bloom_stale: CatalogMetrics::shard(&m.bloom_stale, shard),
            shedding: CatalogMetrics::shard(&m.shedding, shard),
        };
        let cache = HotCache::new(
            (cfg.cache_mb << 20) / shards.max(1),
            cfg.cache_ttl_secs.saturating_mul(1000),
            cfg.cache_ttl_jitter,
            m.cache_evictions.clone(),
        );
        let mut catalog = Catalog {
            shard,
            shards,
            first_slot: slots.first().copied().unwrap_or(0),
            last_slot: slots.last().copied().unwrap_or(0),
            cfg: cfg.clone(),
            hasher: RandomState::new(),
            bloom: ScalableBloom::new(1, cfg.bloom_fp_rate),
            bloom_ready: false,
            stale: 0,
            rebuild: None,
            cache,
            shed: cfg.shed.into(),
            queue_depth: 0,
            group: 0,
            metrics,
            gauges,
            routing,
        };
        catalog.bloom = catalog.new_filter();
        catalog
    }

    /// An empty filter sized for this shard's share of the expected items,
    /// or for 1.5 × what it holds now if that is more (room to grow before
    /// a second layer is needed).
    fn new_filter(&self) -> ScalableBloom {
        let share = self.cfg.bloom_expected_items / self.shards.max(1) as u64;
        let live = self.bloom.items().saturating_sub(self.stale);
        ScalableBloom::new(
            share.max(live.saturating_add(live / 2)).max(1),
            self.cfg.bloom_fp_rate,
        )
    }

    /// Build the filter from storage before the shard serves anything.
    fn build_filter(&mut self, storage: &Storage) {
        let started = std::time::Instant::now();
        let mut rb = Rebuild::new(self.new_filter(), self.first_slot, self.last_slot, 0);
        let hasher = &self.hasher;
        match rb.step(storage, self.shard, usize::MAX, usize::MAX, |i| {
            hash_item(hasher, i)
        }) {
            Ok(_) => {
                tracing::debug!(
                    shard = self.shard,
                    items = rb.scanned,
                    ms = started.elapsed().as_millis() as u64,
                    "catalog Bloom filter built"
                );
                self.bloom = rb.filter;
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

    /// A group of requests starts; `queue_depth` requests wait behind it.
    fn start_group(&mut self, queue_depth: usize) {
        self.group += 1;
        self.queue_depth = queue_depth;
    }

    fn dispatch(&mut self, req: &Request, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        match req {
            Request::CatalogQuery(r) => self.query(r, now, txn),
            Request::CatalogResolve(r) => self.resolve(r, now, txn),
            Request::CatalogPut(r) => self.put(r, now, txn),
            Request::CatalogDelete(r) => self.delete(r, now, txn),
            Request::CatalogAliasSet(r) => self.alias_set(r, now, txn),
            Request::CatalogAliasDel(r) => self.alias_del(r, now, txn),
            Request::CatalogWarm(r) => self.warm(r, now, txn),
            Request::CatalogShed(r) => {
                self.shed = r.mode;
                tracing::info!(
                    shard = self.shard,
                    mode = r.mode.name(),
                    "catalog shedding switched"
                );
                self.gauges.shedding.set(self.shedding() as i64);
                Ok(Reply::CatalogShed(()))
            }
            Request::CatalogRebuild(_) => Ok(Reply::CatalogRebuild(self.start_rebuild() as u64)),
            other => Err(RushError::internal(format!(
                "{} is not a catalog request",
                other.opcode().name()
            ))),
        }
    }

    /// Timer: advance or start a background rebuild, refresh gauges.
    fn timers(&mut self, storage: &Storage) {
        if self.rebuild.is_none() && (!self.bloom_ready || self.needs_rebuild()) {
            self.start_rebuild();
        }
        if let Some(rb) = self.rebuild.as_mut() {
            let hasher = &self.hasher;
            let budget = self.cfg.bloom_rebuild_keys_per_tick;
            match rb.step(storage, self.shard, budget, REBUILD_SLOTS_PER_TICK, |i| {
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
        self.refresh_gauges();
    }

    /// Slots this shard serves from now on (moved in, or given to this node
    /// by a new map): their owners and aliases join the filter, so none of
    /// them is denied; cache entries left from an earlier ownership go.
    fn slots_imported(&mut self, slots: &[u16], storage: &Storage) {
        self.forget_slots(slots);
        for &slot in slots {
            let (from, to) = keys::catalog_range(slot);
            let mut hashes = Vec::new();
            let hasher = &self.hasher;
            let scanned = storage.scan(self.shard, &from, &to, |k, _| {
                let item = match keys::parse_catalog(k) {
                    Some(keys::CatalogKey::Records { owner }) => Item::Owner(owner),
                    Some(keys::CatalogKey::Alias { kind, alias }) => Item::Alias { kind, alias },
                    None => return true,
                };
                hashes.push(hash_item(hasher, item));
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
    fn slots_dropped(&mut self, slots: &[u16]) {
        self.forget_slots(slots);
        self.refresh_gauges();
    }

    fn forget_slots(&mut self, slots: &[u16]) {
        let slots = crate::cluster::routing::SlotSet::of(slots);
        self.cache.retain(|item| {
            let slot = match item {
                Item::Owner(owner) => key_slot(owner),
                Item::Alias { kind, alias } => alias_slot(kind, alias),
            };
            !slots.contains(slot)
        });
    }

    /// A group commit failed: the cache may hold writes that never landed.
    /// (Filter entries for them only cost a false positive.)
    fn forget_cache(&mut self) {
        self.cache.clear();
    }

    // ── layer 1 ───────────────────────────────────────────────────────────

    fn bloom_maybe(&self, hash: u64) -> bool {
        !self.bloom_ready || self.bloom.contains(hash)
    }

    fn bloom_insert(&mut self, hash: u64) {
        self.bloom.insert(hash);
        if let Some(rb) = self.rebuild.as_mut() {
            rb.filter.insert(hash);
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

    // ── layers 2 and 3 ────────────────────────────────────────────────────

    fn shedding(&self) -> bool {
        match self.shed {
            ShedMode::Off => false,
            ShedMode::On => true,
            ShedMode::Auto => self.queue_depth > self.cfg.shed_queue_depth,
        }
    }

    /// Read an item from storage (through the group, so earlier writes of
    /// this group are seen).
    fn load(&self, item: Item, txn: &Txn) -> Result<Cached, RushError> {
        match item {
            Item::Owner(owner) => {
                let key = keys::catalog_records(key_slot(owner), owner);
                match txn.get(&key).map_err(storage_error)? {
                    None => Ok(Cached::Records(Vec::new())),
                    Some(raw) => decode_records(raw).map(Cached::Records),
                }
            }
            Item::Alias { kind: k, alias } => {
                let key = keys::catalog_alias(alias_slot(k, alias), k, alias);
                match txn.get(&key).map_err(storage_error)? {
                    None => Ok(Cached::Alias(None)),
                    Some(raw) => {
                        let stored = Stored::decode(&raw).map_err(corrupt)?;
                        if stored.kind != kind::CATALOG_ALIAS {
                            return Err(corrupt(format!("alias of kind {}", stored.kind)));
                        }
                        Ok(Cached::Alias(Some(Bytes::copy_from_slice(stored.payload))))
                    }
                }
            }
        }
    }

    /// The three layers for one lookup.
    fn lookup(
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
            return Ok(Cow::Owned(match item {
                Item::Owner(_) => Cached::Records(Vec::new()),
                Item::Alias { .. } => Cached::Alias(None),
            }));
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

    fn query(&mut self, r: &CatalogQuery, now: u64, txn: &Txn) -> Result<Reply, RushError> {
        let found = self.lookup(Op::Query, Item::Owner(&r.owner), now, txn)?;
        let Cached::Records(records) = &*found else {
            return Err(RushError::internal("an owner's cache entry holds an alias"));
        };
        let records = records
            .iter()
            .filter(|rec| rec.matches(&r.filter))
            .cloned()
            .collect();
        Ok(Reply::CatalogQuery(CatalogQueryReply { records }))
    }

    fn resolve(&mut self, r: &CatalogResolve, now: u64, txn: &Txn) -> Result<Reply, RushError> {
        let item = Item::Alias {
            kind: &r.kind,
            alias: &r.alias,
        };
        let found = self.lookup(Op::Resolve, item, now, txn)?;
        let Cached::Alias(owner) = &*found else {
            return Err(RushError::internal("an alias's cache entry holds records"));
        };
        Ok(Reply::CatalogResolve(owner.clone()))
    }

    // ── writes ────────────────────────────────────────────────────────────

    /// The current value of an item for a write: filter, cache, storage —
    /// never shed, never counted as a query.
    fn current(&mut self, hash: u64, item: Item, now: u64, txn: &Txn) -> Result<Cached, RushError> {
        if !self.bloom_maybe(hash) {
            return Ok(match item {
                Item::Owner(_) => Cached::Records(Vec::new()),
                Item::Alias { .. } => Cached::Alias(None),
            });
        }
        if let Some(i) = self.cache.lookup(hash, item, now) {
            return Ok(self.cache.entry(i).value.clone());
        }
        self.load(item, txn)
    }

    fn current_records(
        &mut self,
        hash: u64,
        owner: &[u8],
        now: u64,
        txn: &Txn,
    ) -> Result<Vec<Record>, RushError> {
        match self.current(hash, Item::Owner(owner), now, txn)? {
            Cached::Records(r) => Ok(r),
            Cached::Alias(_) => Err(RushError::internal("an owner's cache entry holds an alias")),
        }
    }

    /// Stage an owner's new record set (all checks passed) and write it
    /// through to the filter and the cache.
    fn store_records(
        &mut self,
        hash: u64,
        owner: &[u8],
        records: Vec<Record>,
        now: u64,
        txn: &mut Txn,
    ) -> Result<(), RushError> {
        let key = keys::catalog_records(key_slot(owner), owner);
        let records = if records.is_empty() {
            txn.delete(key);
            self.stale += 1;
            records
        } else {
            let value = encode_records(&records);
            if payload_len(&value) > MAX_OWNER_BYTES {
                return Err(too_large(format!(
                    "the owner's records would take {} bytes, over the limit of {MAX_OWNER_BYTES}",
                    payload_len(&value)
                )));
            }
            // Cache a compact copy (one buffer) rather than records that
            // point into request frames and older sets.
            let value = Bytes::from(value);
            let compact = decode_records(value.clone())?;
            txn.put(key, value);
            self.bloom_insert(hash);
            compact
        };
        txn.require_sync();
        self.cache
            .insert(hash, Item::Owner(owner), Cached::Records(records), now, 0);
        Ok(())
    }

    fn put(&mut self, r: &CatalogPut, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let hash = hash_item(&self.hasher, Item::Owner(&r.owner));
        let mut records = self.current_records(hash, &r.owner, now, txn)?;
        let mut record = r.record.clone();
        record.attributes.sort_by(|a, b| a.0.cmp(&b.0));
        let created = match records.binary_search_by(|x| x.id.cmp(&record.id)) {
            Ok(i) => {
                records[i] = record;
                false
            }
            Err(i) => {
                records.insert(i, record);
                true
            }
        };
        let max = self.cfg.max_records_per_owner;
        if records.len() > max {
            return Err(too_large(format!(
                "the owner already has {} records, the most one owner may hold",
                max
            )));
        }
        self.store_records(hash, &r.owner, records, now, txn)?;
        Ok(Reply::CatalogPut(created))
    }

    fn delete(&mut self, r: &CatalogDelete, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let hash = hash_item(&self.hasher, Item::Owner(&r.owner));
        let mut records = self.current_records(hash, &r.owner, now, txn)?;
        let Ok(i) = records.binary_search_by(|x| x.id.as_ref().cmp(r.record_id.as_ref())) else {
            return Ok(Reply::CatalogDelete(false));
        };
        records.remove(i);
        self.store_records(hash, &r.owner, records, now, txn)?;
        Ok(Reply::CatalogDelete(true))
    }

    fn alias_set(
        &mut self,
        r: &CatalogAliasSet,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let item = Item::Alias {
            kind: &r.kind,
            alias: &r.alias,
        };
        let hash = hash_item(&self.hasher, item);
        let existed = !self.current(hash, item, now, txn)?.is_absent();
        let owner = Bytes::copy_from_slice(&r.owner);
        txn.put(
            keys::catalog_alias(alias_slot(&r.kind, &r.alias), &r.kind, &r.alias),
            value::encode(kind::CATALOG_ALIAS, 0, &owner),
        );
        txn.require_sync();
        self.bloom_insert(hash);
        self.cache
            .insert(hash, item, Cached::Alias(Some(owner)), now, 0);
        Ok(Reply::CatalogAliasSet(!existed))
    }

    fn alias_del(
        &mut self,
        r: &CatalogAliasDel,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let item = Item::Alias {
            kind: &r.kind,
            alias: &r.alias,
        };
        let hash = hash_item(&self.hasher, item);
        if self.current(hash, item, now, txn)?.is_absent() {
            return Ok(Reply::CatalogAliasDel(false));
        }
        txn.delete(keys::catalog_alias(
            alias_slot(&r.kind, &r.alias),
            &r.kind,
            &r.alias,
        ));
        txn.require_sync();
        self.stale += 1;
        self.cache.insert(hash, item, Cached::Alias(None), now, 0);
        Ok(Reply::CatalogAliasDel(true))
    }

    // ── admin ─────────────────────────────────────────────────────────────

    /// Load this shard's share of `owners` into the cache. Not shed: an
    /// operator asked for these reads.
    fn warm(&mut self, r: &CatalogWarm, now: u64, txn: &Txn) -> Result<Reply, RushError> {
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

    fn refresh_gauges(&self) {
        let g = &self.gauges;
        g.cache_bytes.set(self.cache.bytes() as i64);
        g.cache_entries.set(self.cache.len() as i64);
        g.bloom_items.set(self.bloom.items() as i64);
        g.bloom_bytes.set(self.bloom.bytes() as i64);
        g.bloom_layers.set(self.bloom.layers() as i64);
        g.bloom_stale.set(self.stale as i64);
        g.shedding.set(self.shedding() as i64);
        self.metrics.catalog.refresh_false_positive_rate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored form is pinned: a change to the wire form of records must
    /// not silently change what is on disk.
    #[test]
    fn stored_record_sets_are_pinned() {
        let records = vec![Record::new("c1").attr("k", "v").valid(Some(1), None)];
        let raw = encode_records(&records);
        let expected: &[u8] = &[
            0x30, 0, 0, 0, 0, 0, 0, 0, 0, // kind CATALOG_RECORDS, no expiry
            1, // format
            0, 0, 0, 1, // one record
            0, 0, 0, 2, b'c', b'1', // id
            0, 0, 0, 1, 0, 0, 0, 1, b'k', 0, 0, 0, 1, b'v', // k = v
            1, 0, 0, 0, 0, 0, 0, 0, 1, // valid_from 1
            0, // valid_to absent
        ];
        assert_eq!(raw, expected);
        assert_eq!(decode_records(raw.clone().into()).unwrap(), records);
        let mut wrong_format = raw.clone();
        wrong_format[HEADER] = 2;
        assert!(decode_records(wrong_format.into()).is_err());
        assert!(decode_records(raw[..raw.len() - 1].to_vec().into()).is_err());
        assert!(decode_records(value::encode(kind::STRING, 0, b"x").into()).is_err());
    }
}
