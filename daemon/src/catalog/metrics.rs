//! Catalog metrics. Per-answer counters are resolved once, so a query costs
//! one atomic add; per-shard gauges are refreshed by each shard's timer.

use crate::metrics::local::{self, Counter as IntCounter};
use crate::metrics::{reg, shard_gauge};
use prometheus::{Gauge, IntGauge, IntGaugeVec, Registry};

/// How a query (or alias resolution) was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// The Bloom filter said "certainly absent": no cache, no storage.
    BloomNegative,
    /// Answered from the hot cache with records (or an owner, for aliases).
    CacheHit,
    /// Answered from a cached "absent" entry: a Bloom false positive (or a
    /// stale entry of a deleted owner) caught without a storage read.
    CacheNegative,
    /// Read from storage, found.
    StorageHit,
    /// Read from storage, absent: a Bloom false positive that cost a read.
    StorageMiss,
}

impl Path {
    const ALL: [Path; 5] = [
        Path::BloomNegative,
        Path::CacheHit,
        Path::CacheNegative,
        Path::StorageHit,
        Path::StorageMiss,
    ];

    fn label(self) -> &'static str {
        match self {
            Path::BloomNegative => "bloom_negative",
            Path::CacheHit => "cache_hit",
            Path::CacheNegative => "cache_negative",
            Path::StorageHit => "storage_hit",
            Path::StorageMiss => "storage_miss",
        }
    }
}

/// Which request was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Query,
    Resolve,
}

pub struct CatalogMetrics {
    /// `[op][path]`, resolved from `answers`.
    by_path: [[IntCounter; 5]; 2],
    /// Bloom false positives over all absent lookups (cache_negative +
    /// storage_miss) / (those + bloom_negative), since start.
    pub false_positive_rate: Gauge,
    pub cache_bytes: IntGaugeVec,
    pub cache_entries: IntGaugeVec,
    pub cache_evictions: IntCounter,
    /// Lookups answered from an entry a storage read filled earlier in the
    /// same group: they queued behind that read instead of making their own.
    pub single_flight_joins: IntCounter,
    /// Cache misses answered UNAVAILABLE because storage reads were shed.
    pub shed: IntCounter,
    pub warmed: IntCounter,
    pub bloom_items: IntGaugeVec,
    pub bloom_bytes: IntGaugeVec,
    pub bloom_layers: IntGaugeVec,
    pub bloom_stale: IntGaugeVec,
    pub bloom_rebuilds: IntCounter,
    pub shedding: IntGaugeVec,
}

impl CatalogMetrics {
    pub fn new(r: &Registry, writers: usize) -> CatalogMetrics {
        let answers = local::register(
            r,
            local::CounterVec::new(
                "catalog_answers_total",
                "Catalog queries and alias resolutions, by the layer that answered",
                &["op", "path"],
                writers,
            ),
        );
        let counter = |name: &str, help: &str| local::counter(r, name, help, writers);
        let by_op = |op: &str| Path::ALL.map(|p| answers.with_label_values(&[op, p.label()]));
        CatalogMetrics {
            by_path: [by_op("query"), by_op("resolve")],
            false_positive_rate: reg(
                r,
                Gauge::new(
                    "catalog_bloom_false_positive_rate",
                    "Measured: Bloom positives for absent owners/aliases over all absent lookups",
                )
                .expect("valid"),
            ),
            cache_bytes: shard_gauge(r, "catalog_cache_bytes", "Hot cache size (approximate bytes)"),
            cache_entries: shard_gauge(r, "catalog_cache_entries", "Hot cache entries"),
            cache_evictions: counter("catalog_cache_evictions_total", "Hot cache entries evicted"),
            single_flight_joins: counter("catalog_single_flight_joins_total", "Lookups answered by a storage read another request made in the same group"),
            shed: counter("catalog_shed_total", "Cache misses answered UNAVAILABLE because storage reads were shed"),
            warmed: counter("catalog_warmed_total", "Owners loaded by CATALOG_WARM"),
            bloom_items: shard_gauge(r, "catalog_bloom_items", "Items in the Bloom filter"),
            bloom_bytes: shard_gauge(r, "catalog_bloom_bytes", "Bloom filter memory"),
            bloom_layers: shard_gauge(r, "catalog_bloom_layers", "Bloom filter layers (grows past capacity)"),
            bloom_stale: shard_gauge(
                r,
                "catalog_bloom_stale",
                "Removed owners/aliases still in the Bloom filter (upper bound) until its next rebuild",
            ),
            bloom_rebuilds: counter("catalog_bloom_rebuilds_total", "Bloom filter rebuilds finished"),
            shedding: shard_gauge(r, "catalog_shedding", "1 while a shard sheds storage reads"),
        }
    }

    pub fn answer(&self, op: Op, path: Path) {
        self.counter(op, path).inc();
    }

    pub fn counter(&self, op: Op, path: Path) -> &IntCounter {
        // Declaration order is `Path::ALL` order.
        &self.by_path[op as usize][path as usize]
    }

    /// Sum of a path over both ops.
    pub fn total(&self, path: Path) -> u64 {
        self.counter(Op::Query, path).get() + self.counter(Op::Resolve, path).get()
    }

    /// Recompute the measured false-positive rate from the counters.
    pub fn refresh_false_positive_rate(&self) {
        let fp = self.total(Path::StorageMiss) + self.total(Path::CacheNegative);
        let negatives = self.total(Path::BloomNegative);
        if fp + negatives > 0 {
            self.false_positive_rate
                .set(fp as f64 / (fp + negatives) as f64);
        }
    }

    /// A shard's gauge (`shard` label).
    pub fn shard(v: &IntGaugeVec, shard: usize) -> IntGauge {
        v.with_label_values(&[&shard.to_string()])
    }
}
