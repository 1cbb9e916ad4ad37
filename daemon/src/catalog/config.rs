//! The `[catalog]` config section.

use rush_protocol::cmd::ShedMode;
use rush_protocol::limits::MAX_RECORDS_PER_OWNER;
use serde::Deserialize;

pub const DEFAULT_BLOOM_EXPECTED_ITEMS: u64 = 1_000_000;
pub const DEFAULT_BLOOM_FP_RATE: f64 = 0.01;
pub const DEFAULT_BLOOM_REBUILD_STALE_FRACTION: f64 = 0.2;
pub const DEFAULT_BLOOM_REBUILD_MIN_STALE: u64 = 1_000;
pub const DEFAULT_BLOOM_REBUILD_KEYS_PER_TICK: usize = 20_000;
pub const DEFAULT_CACHE_MB: usize = 256;
pub const DEFAULT_CACHE_TTL_SECS: u64 = 300;
pub const DEFAULT_CACHE_TTL_JITTER: f64 = 0.2;
pub const DEFAULT_SHED_QUEUE_DEPTH: usize = 2048;

/// Shedding mode as written in the config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Shed {
    #[default]
    Off,
    On,
    Auto,
}

impl From<Shed> for ShedMode {
    fn from(s: Shed) -> ShedMode {
        match s {
            Shed::Off => ShedMode::Off,
            Shed::On => ShedMode::On,
            Shed::Auto => ShedMode::Auto,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogConfig {
    /// Owners with records plus aliases the node is expected to hold; each
    /// shard's Bloom filter starts sized for its share. More is fine: the
    /// filter adds layers and keeps the false-positive rate under target.
    pub bloom_expected_items: u64,
    /// Target false-positive rate of the Bloom filters (0 < rate ≤ 0.5).
    pub bloom_fp_rate: f64,
    /// Rebuild a shard's filter in the background when removed entries
    /// still in it exceed this fraction of its items…
    pub bloom_rebuild_stale_fraction: f64,
    /// …and this many (no churn of rebuilds for a few deletes).
    pub bloom_rebuild_min_stale: u64,
    /// Storage keys a background rebuild scans per shard tick, so a rebuild
    /// never stalls a shard for long.
    pub bloom_rebuild_keys_per_tick: usize,
    /// Hot cache of the whole node (split evenly over shards).
    pub cache_mb: usize,
    /// Longest life of a cache entry.
    pub cache_ttl_secs: u64,
    /// Entries live `ttl·(1 − jitter·u)`, `u` uniform in [0, 1): spreads
    /// expiry of entries cached together (0 ≤ jitter < 1).
    pub cache_ttl_jitter: f64,
    /// Shed storage reads: "off", "on", or "auto" (by queue depth). The
    /// CATALOG_SHED admin request switches it at run time.
    pub shed: Shed,
    /// In "auto", a shard with more requests queued than this sheds.
    pub shed_queue_depth: usize,
    /// Most records one owner may hold (at most 1000).
    pub max_records_per_owner: usize,
}

impl Default for CatalogConfig {
    fn default() -> Self {
        CatalogConfig {
            bloom_expected_items: DEFAULT_BLOOM_EXPECTED_ITEMS,
            bloom_fp_rate: DEFAULT_BLOOM_FP_RATE,
            bloom_rebuild_stale_fraction: DEFAULT_BLOOM_REBUILD_STALE_FRACTION,
            bloom_rebuild_min_stale: DEFAULT_BLOOM_REBUILD_MIN_STALE,
            bloom_rebuild_keys_per_tick: DEFAULT_BLOOM_REBUILD_KEYS_PER_TICK,
            cache_mb: DEFAULT_CACHE_MB,
            cache_ttl_secs: DEFAULT_CACHE_TTL_SECS,
            cache_ttl_jitter: DEFAULT_CACHE_TTL_JITTER,
            shed: Shed::Off,
            shed_queue_depth: DEFAULT_SHED_QUEUE_DEPTH,
            max_records_per_owner: MAX_RECORDS_PER_OWNER,
        }
    }
}

impl CatalogConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(self.bloom_fp_rate > 0.0 && self.bloom_fp_rate <= 0.5) {
            return Err("catalog.bloom_fp_rate must be within (0, 0.5]".into());
        }
        if self.bloom_expected_items == 0 || self.bloom_expected_items > 1_000_000_000 {
            return Err("catalog.bloom_expected_items must be within 1..=1000000000".into());
        }
        if !(self.bloom_rebuild_stale_fraction > 0.0 && self.bloom_rebuild_stale_fraction <= 1.0) {
            return Err("catalog.bloom_rebuild_stale_fraction must be within (0, 1]".into());
        }
        if self.bloom_rebuild_keys_per_tick == 0 {
            return Err("catalog.bloom_rebuild_keys_per_tick must be positive".into());
        }
        if self.cache_mb == 0 {
            return Err("catalog.cache_mb must be positive: the cache is what answers hot owners and coalesces concurrent cold reads".into());
        }
        if self.cache_ttl_secs == 0 {
            return Err("catalog.cache_ttl_secs must be positive".into());
        }
        if !(0.0..1.0).contains(&self.cache_ttl_jitter) {
            return Err("catalog.cache_ttl_jitter must be within [0, 1)".into());
        }
        if self.max_records_per_owner == 0 || self.max_records_per_owner > MAX_RECORDS_PER_OWNER {
            return Err(format!(
                "catalog.max_records_per_owner must be within 1..={MAX_RECORDS_PER_OWNER}"
            ));
        }
        Ok(())
    }
}
