//! The catalog: records grouped under an owner (a merchant code), looked up
//! by owner or through aliases, answered by three layers inside each shard:
//!
//! 1. a scalable Bloom filter over owners that have records and over aliases
//!    ([`crate::bloom`]): a negative answers "no records" without touching the cache
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
//!
//! One file per request, named as in `rush_protocol::cmd::catalog`; the
//! layers in `lookup`, the stored forms in `stored`.

pub mod cache;
pub mod config;
pub mod metrics;

mod alias_del;
mod alias_set;
mod delete;
mod lookup;
mod put;
mod query;
mod rebuild;
mod resolve;
mod shed;
mod slots;
mod stored;
mod warm;

pub use config::CatalogConfig;
pub use metrics::CatalogMetrics;

use crate::bloom::ScalableBloom;
use crate::metrics::Metrics;
use crate::services::Registration;
use crate::shard::service::{Ahead, Cx, ShardService};
use crate::shard::txn::Txn;
use crate::storage::Storage;
use cache::{Cached, HotCache, Item};
use prometheus::IntGauge;
use rebuild::Rebuild;
use rush_protocol::cmd::*;
use rush_protocol::{ErrorCode, Opcode, Reply, Request, RushError, Service};
use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::Arc;

/// Most queries noted between a look-ahead's start and its end (the shard
/// looks at fewer at a time; this only bounds the note).
const AHEAD: usize = 32;

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
    /// A query's owner: the filter's lines for it and the hot cache's
    /// index are loaded while the requests ahead of it run (its probes
    /// waited for memory otherwise; bench/results/NOTES.md), and its hash
    /// noted for [`ShardService::look_ahead_done`]. Catalog reads no row of
    /// the row cache.
    fn prefetch_key(&mut self, opcode: Opcode, body: &[u8], _key: &mut Vec<u8>) -> Ahead {
        if opcode != Opcode::CatalogQuery || self.ahead.len() >= AHEAD {
            return Ahead::No;
        }
        if let Some(owner) = rush_protocol::codec::peek_lp(body) {
            let hash = hash_item(&self.hasher, Item::Owner(owner));
            if self.bloom_ready {
                self.bloom.prefetch(hash);
            }
            self.cache.prefetch_index(hash);
            self.ahead.push(hash);
        }
        Ahead::No
    }

    /// With the filter and index lines of the queries noted on their way:
    /// the entries the filter lets through, then, with those on their way,
    /// the records they hold.
    fn look_ahead_done(&mut self) {
        if self.ahead.is_empty() {
            return;
        }
        let (bloom, ready) = (&self.bloom, self.bloom_ready);
        self.ahead.retain(|&h| !ready || bloom.contains(h));
        for &h in &self.ahead {
            self.cache.prefetch_entry(h);
        }
        for &h in &self.ahead {
            if let Some(Cached::Records(records)) = self.cache.likely(h) {
                stored::prefetch_records(records);
            }
        }
        self.ahead.clear();
    }

    fn open(&mut self, storage: &Storage) {
        self.build_filter(storage);
    }

    fn memory(&self, into: &mut crate::memory::Use) {
        use crate::memory::Part;
        into.add(Part::CatalogCache, self.cache.bytes());
        let rebuilding = self.rebuild.as_ref().map_or(0, |r| r.filter.bytes());
        into.add(Part::CatalogFilters, self.bloom.bytes() + rebuilding);
    }

    fn apply(&mut self, req: &Request, cx: &mut Cx) -> Result<Reply, RushError> {
        self.dispatch(req, cx.now, cx.txn)
    }

    fn begin_group(&mut self, backlog: usize) {
        self.start_group(backlog);
    }

    fn tick(&mut self, cx: &mut Cx) {
        self.timers(cx.txn);
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
    /// Hashes of the queries [`ShardService::prefetch_key`] looked at,
    /// until [`ShardService::look_ahead_done`].
    ahead: Vec<u64>,
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
            ahead: Vec::with_capacity(AHEAD),
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
            Request::CatalogShed(r) => self.shed(r),
            Request::CatalogRebuild(_) => self.rebuild(),
            other => Err(RushError::internal(format!(
                "{} is not a catalog request",
                other.opcode().name()
            ))),
        }
    }

    /// Timer: advance or start a background rebuild, refresh gauges.
    fn timers(&mut self, txn: &Txn) {
        self.rebuild_step(txn);
        self.refresh_gauges();
    }

    /// A group commit failed: the cache may hold writes that never landed.
    /// (Filter entries for them only cost a false positive.)
    fn forget_cache(&mut self) {
        self.cache.clear();
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
