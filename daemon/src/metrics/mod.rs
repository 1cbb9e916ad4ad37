//! Prometheus metrics. What the request path counts — answers by opcode
//! and outcome, latency, group sizes, each service's counters — is kept per
//! shard ([`local`]): an update is a plain add on a cache line only that
//! shard's thread writes, with every label set resolved once (error answers
//! included: a storm of LIMITED or BUSY answers is hot traffic in a flash
//! sale). A scrape sums the shards. Gauges that can be read off live state
//! (queue depths) are filled in at scrape time; storage keeps its own
//! counters, exported as they are.
//!
//! Besides `rush_*`, a scrape carries `rush_build_info{version,commit}` and
//! the standard `process_*` metrics ([`process`]: the prometheus crate's
//! process collector, read from `/proc/self`, with CPU time to the
//! microsecond). Every family passes
//! `promtool check metrics` (daemon/tests/metrics.rs runs it on a live
//! node).

pub mod local;
mod process;

use prometheus::{
    Encoder, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use rush_protocol::{ErrorCode, Opcode};
use std::sync::{Arc, OnceLock};

/// Error codes counted per opcode without a lookup (codes are below this).
const CODES: usize = 64;

/// Outcomes whose `rush_requests_total` series exist from the start, at 0,
/// for every opcode: the ones alert rules select
/// (deploy/prometheus/rush-alerts.yml). A counter that appears only with
/// its first increment has no rate for that first burst, so the alert
/// would miss it. Other error outcomes appear when they first happen.
const PRESET_OUTCOMES: &[ErrorCode] = &[ErrorCode::Internal];

/// The commit rushd was built from (`build.rs`; "unknown" without git).
pub const BUILD_COMMIT: &str = env!("RUSH_BUILD_COMMIT");

/// Latency buckets in seconds: 25 µs to 2.5 s.
/// For what can stall a shard for seconds (a pass, a wait for the
/// write-back): the tail is the point, so it goes further than a request's.
const STALL_BUCKETS: &[f64] = &[
    0.000_1, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

const LATENCY_BUCKETS: &[f64] = &[
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 1.0, 2.5,
];

pub struct Metrics {
    pub registry: Registry,
    /// Unprefixed: `process_*` is named the same by every exporter.
    process: Registry,
    /// Writers of the per-shard cells: one per shard, one shared.
    writers: usize,
    requests: Arc<local::CounterVec>,
    /// Index into the per-opcode tables by opcode byte.
    opcode_index: Box<[u8; 256]>,
    ok_by_opcode: Vec<local::Counter>,
    /// `[opcode index * CODES + code]`, resolved on first use.
    errors: Box<[OnceLock<local::Counter>]>,
    latency_by_opcode: Vec<local::Histogram>,
    pub batch_size: local::Histogram,
    pub commit_seconds: local::Histogram,
    pub pass_seconds: local::Histogram,
    pub write_back_wait_seconds: local::Histogram,
    pub queue_depth: IntGaugeVec,
    /// What each shard's own memory parts hold (published at its ticks).
    pub shard_memory: crate::memory::ShardMemory,
    /// `rush_memory_bytes{part}`, `rush_memory_limit_bytes{part}` and
    /// `rush_memory_budget_bytes`, set at each scrape ([`Metrics::set_memory`]).
    memory_bytes: IntGaugeVec,
    memory_limit_bytes: IntGaugeVec,
    memory_budget_bytes: IntGauge,
    pub connections: IntGauge,
    pub connections_total: IntCounter,
    pub connections_rejected: IntCounter,
    pub connections_closed: IntCounterVec,
    pub frames_rejected: IntCounterVec,
    pub auth_failures: IntCounter,
    /// Replication (see `replication`): waits for a replica's
    /// acknowledgement, and the gauges set at each scrape
    /// (`Replication::publish`).
    pub replication_ack_seconds: local::Histogram,
    pub replication_ack_timeouts: IntCounter,
    pub replication_degraded: IntCounter,
    pub replication_is_replica: IntGauge,
    pub replication_acks_required: IntGauge,
    pub replication_replica_connected: IntGauge,
    pub replication_lag_records: IntGauge,
    pub replication_replica_lag_bytes: IntGauge,
    pub replication_lag_seconds: prometheus::Gauge,
    pub row_cache_hits: IntCounter,
    pub row_cache_misses: IntCounter,
    /// The key filters of each shard (`shard::known`), by filter: items,
    /// memory and builds finished.
    key_filter_items: IntGaugeVec,
    key_filter_bytes: IntGaugeVec,
    key_filter_builds: IntCounterVec,
    /// Requests a shard read for another shard's slot and forwarded (a
    /// client that isn't shard-aware; see SHARD_BIND).
    pub forwarded: local::Counter,
    pub limits: crate::limits::LimitsMetrics,
    pub catalog: crate::catalog::CatalogMetrics,
    pub envelopes: crate::envelopes::EnvelopeMetrics,
    /// Short links: codes issued, segments, resolves, redirects, slides.
    pub links: crate::links::LinkMetrics,
    /// Cluster: map epoch, redirects, slot moves.
    pub cluster: crate::cluster::ClusterMetrics,
}

pub(crate) fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, c: T) -> T {
    r.register(Box::new(c.clone()))
        .expect("metric names are unique");
    c
}

impl Metrics {
    /// The gauges of key filter `filter` of shard `shard`.
    pub fn key_filter(&self, filter: &str, shard: usize) -> crate::shard::known::Gauges {
        let shard = shard.to_string();
        crate::shard::known::Gauges {
            items: self.key_filter_items.with_label_values(&[filter, &shard]),
            bytes: self.key_filter_bytes.with_label_values(&[filter, &shard]),
            builds: self.key_filter_builds.with_label_values(&[filter]),
        }
    }
}

/// A gauge with one value per shard (label `shard`).
pub(crate) fn shard_gauge(r: &Registry, name: &str, help: &str) -> IntGaugeVec {
    reg(
        r,
        IntGaugeVec::new(Opts::new(name, help), &["shard"]).expect("valid"),
    )
}

impl Metrics {
    /// Metrics of a node running `shards` shards on `storage`.
    pub fn new(shards: usize, storage: &crate::storage::StorageStats) -> Metrics {
        let writers = shards + 1;
        let r = Registry::new_custom(Some("rush".into()), None).expect("valid prefix");
        let build = reg(
            &r,
            IntGaugeVec::new(
                Opts::new(
                    "build_info",
                    "Always 1: the version and commit this rushd was built from",
                ),
                &["version", "commit"],
            )
            .expect("valid"),
        );
        build
            .with_label_values(&[env!("CARGO_PKG_VERSION"), BUILD_COMMIT])
            .set(1);
        // Storage counts its writes and reads itself (it runs below the
        // shards); a scrape reads those counters directly.
        for (name, help, counter) in [
            (
                "storage_writes_total",
                "Group commits written: RocksDB write batches and shard-log records",
                &storage.writes,
            ),
            (
                "storage_syncs_total",
                "Group commits fsynced (RocksDB write batches and shard-log records)",
                &storage.syncs,
            ),
            (
                "storage_write_errors_total",
                "Writes that failed: group commits (RocksDB writes and shard-log appends) and write backs to RocksDB",
                &storage.write_errors,
            ),
            ("storage_reads_total", "RocksDB point reads", &storage.reads),
        ] {
            local::export_counter(&r, name, help, counter);
        }
        for gauge in [&storage.pending_keys, &storage.write_backs_running] {
            r.register(Box::new(gauge.clone()))
                .expect("metric names are unique");
        }
        let process = Registry::new();
        process
            .register(Box::new(process::Process::for_self()))
            .expect("one process collector");
        let requests = local::register(
            &r,
            local::CounterVec::new(
                "requests_total",
                "Requests answered, by opcode and outcome",
                &["op", "outcome"],
                writers,
            ),
        );
        let latency = local::register(
            &r,
            local::HistogramVec::new(
                "request_duration_seconds",
                "From a whole frame received to its answer ready to write",
                &["op"],
                LATENCY_BUCKETS,
                writers,
            ),
        );
        let mut opcode_index = Box::new([u8::MAX; 256]);
        let mut ok_by_opcode = Vec::new();
        let mut latency_by_opcode = Vec::new();
        for (i, op) in Opcode::ALL.iter().enumerate() {
            opcode_index[op.as_u8() as usize] = i as u8;
            ok_by_opcode.push(requests.with_label_values(&[op.name(), "ok"]));
            latency_by_opcode.push(latency.with_label_values(&[op.name()]));
        }
        let histogram = |name: &str, help: &str, buckets: &[f64]| {
            local::register(
                &r,
                local::HistogramVec::new(name, help, &[], buckets, writers),
            )
            .with_label_values(&[])
        };
        let errors: Box<[OnceLock<local::Counter>]> = (0..Opcode::ALL.len() * CODES)
            .map(|_| OnceLock::new())
            .collect();
        for (i, op) in Opcode::ALL.iter().enumerate() {
            for code in PRESET_OUTCOMES {
                let c = code.as_u8() as usize;
                let preset = requests.with_label_values(&[op.name(), code.name()]);
                // A code past the table is counted by label lookup instead
                // (`observe`), from the same family: the preset series is it.
                if c < CODES {
                    let _ = errors[i * CODES + c].set(preset);
                }
            }
        }
        Metrics {
            writers,
            opcode_index,
            errors,
            process,
            ok_by_opcode,
            latency_by_opcode,
            requests,
            batch_size: histogram(
                "shard_batch_size",
                "Requests per group commit",
                &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0],
            ),
            commit_seconds: histogram(
                "storage_commit_seconds",
                "Time of one group commit (WriteBatch + fsync when durable)",
                LATENCY_BUCKETS,
            ),
            pass_seconds: histogram(
                "shard_pass_seconds",
                "Time of one pass of a shard's loop that ran requests: read, execute, group commit, answers written",
                STALL_BUCKETS,
            ),
            write_back_wait_seconds: histogram(
                "storage_write_back_wait_seconds",
                "Time a shard waited for its write-back thread: pending writes over twice storage.write_back_mb, or RocksDB made to hold them all (a scan, a slot move, a stop)",
                STALL_BUCKETS,
            ),
            queue_depth: reg(
                &r,
                IntGaugeVec::new(
                    Opts::new("shard_queue_depth", "Requests waiting in a shard's queue"),
                    &["shard"],
                )
                .expect("valid"),
            ),
            shard_memory: crate::memory::ShardMemory::new(shards),
            memory_bytes: reg(
                &r,
                IntGaugeVec::new(
                    Opts::new(
                        "memory_bytes",
                        "Bytes each part of the node's memory holds (INFO's Memory section names them)",
                    ),
                    &["part"],
                )
                .expect("valid"),
            ),
            memory_limit_bytes: reg(
                &r,
                IntGaugeVec::new(
                    Opts::new(
                        "memory_limit_bytes",
                        "Bytes a part of the node's memory may hold (its setting, or its share of memory.budget_mb)",
                    ),
                    &["part"],
                )
                .expect("valid"),
            ),
            memory_budget_bytes: reg(
                &r,
                IntGauge::new(
                    "memory_budget_bytes",
                    "memory.budget_mb in bytes (0: no budget, each part sized by its own setting)",
                )
                .expect("valid"),
            ),
            connections: reg(
                &r,
                IntGauge::new("connections", "Open client connections").expect("valid"),
            ),
            connections_total: reg(
                &r,
                IntCounter::new("connections_accepted_total", "Client connections accepted")
                    .expect("valid"),
            ),
            connections_rejected: reg(
                &r,
                IntCounter::new(
                    "connections_rejected_total",
                    "Connections refused because max_connections was reached",
                )
                .expect("valid"),
            ),
            connections_closed: reg(
                &r,
                IntCounterVec::new(
                    Opts::new("connections_closed_total", "Connections closed, by reason"),
                    &["reason"],
                )
                .expect("valid"),
            ),
            frames_rejected: reg(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "frames_rejected_total",
                        "Frames rejected before decoding, by reason",
                    ),
                    &["reason"],
                )
                .expect("valid"),
            ),
            row_cache_hits: reg(
                &r,
                IntCounter::new(
                    "row_cache_hits_total",
                    "Storage reads answered by the row cache (pending writes included)",
                )
                .expect("valid"),
            ),
            row_cache_misses: reg(
                &r,
                IntCounter::new(
                    "row_cache_misses_total",
                    "Storage reads the row cache could not answer",
                )
                .expect("valid"),
            ),
            key_filter_items: reg(
                &r,
                IntGaugeVec::new(
                    Opts::new(
                        "key_filter_items",
                        "Keys in a shard's key filter (deleted and ended ones until a rebuild)",
                    ),
                    &["filter", "shard"],
                )
                .expect("valid"),
            ),
            key_filter_bytes: reg(
                &r,
                IntGaugeVec::new(
                    Opts::new("key_filter_bytes", "Memory of a shard's key filter"),
                    &["filter", "shard"],
                )
                .expect("valid"),
            ),
            key_filter_builds: reg(
                &r,
                IntCounterVec::new(
                    Opts::new(
                        "key_filter_builds_total",
                        "Key filter builds finished (at start, and rebuilds)",
                    ),
                    &["filter"],
                )
                .expect("valid"),
            ),
            forwarded: local::counter(
                &r,
                "shard_forwarded_total",
                "Requests forwarded to the shard that owns their slot (the connection was another shard's)",
                writers,
            ),
            auth_failures: reg(
                &r,
                IntCounter::new(
                    "auth_failures_total",
                    "HELLOs with a wrong or missing token",
                )
                .expect("valid"),
            ),
            replication_ack_seconds: histogram(
                "replication_ack_seconds",
                "Time a group commit waited for a replica to hold it (replication.min_acks = 1)",
                LATENCY_BUCKETS,
            ),
            replication_ack_timeouts: reg(
                &r,
                IntCounter::new(
                    "replication_ack_timeouts_total",
                    "Group commits no replica acknowledged within replication.ack_timeout_ms",
                )
                .expect("valid"),
            ),
            replication_degraded: reg(
                &r,
                IntCounter::new(
                    "replication_degraded_total",
                    "Of those, answered as done anyway (replication.degrade = true)",
                )
                .expect("valid"),
            ),
            replication_is_replica: reg(
                &r,
                IntGauge::new(
                    "replication_is_replica",
                    "1 on a replica (it serves no slot), 0 on a primary",
                )
                .expect("valid"),
            ),
            replication_acks_required: reg(
                &r,
                IntGauge::new(
                    "replication_acks_required",
                    "replication.min_acks of a primary: replicas that must hold a write before it is answered",
                )
                .expect("valid"),
            ),
            replication_replica_connected: reg(
                &r,
                IntGauge::new(
                    "replication_replica_connected",
                    "On a primary: 1 when a replica fetched within the last 6 s",
                )
                .expect("valid"),
            ),
            replication_replica_lag_bytes: reg(
                &r,
                IntGauge::new(
                    "replication_replica_lag_bytes",
                    "On a primary: bytes of committed records its replica had not fetched at its last fetch",
                )
                .expect("valid"),
            ),
            replication_lag_records: reg(
                &r,
                IntGauge::new(
                    "replication_lag_records",
                    "Group commits the replica lacks (on a replica: by its last fetch; on a primary: by its replica's last fetch)",
                )
                .expect("valid"),
            ),
            replication_lag_seconds: reg(
                &r,
                prometheus::Gauge::new(
                    "replication_lag_seconds",
                    "On a replica: how long it has been behind its primary (0 when caught up)",
                )
                .expect("valid"),
            ),
            limits: crate::limits::LimitsMetrics::new(&r, writers),
            catalog: crate::catalog::CatalogMetrics::new(&r, writers),
            envelopes: crate::envelopes::EnvelopeMetrics::new(&r, writers),
            links: crate::links::LinkMetrics::new(&r, writers),
            cluster: crate::cluster::ClusterMetrics::new(&r),
            registry: r,
        }
    }

    /// Writers of per-shard metrics (shards + 1), for services' families.
    pub fn writers(&self) -> usize {
        self.writers
    }

    /// Count an answered request and its latency.
    #[inline]
    pub fn observe(&self, opcode: u8, outcome: Result<(), ErrorCode>, seconds: f64) {
        let i = self.opcode_index[opcode as usize] as usize;
        if i == u8::MAX as usize {
            // An opcode this server doesn't know: counted, rarely.
            if let Err(code) = outcome {
                self.requests
                    .with_label_values(&["UNKNOWN", code.name()])
                    .inc();
            }
            return;
        }
        match outcome {
            Ok(()) => self.ok_by_opcode[i].inc(),
            Err(code) => {
                let c = code.as_u8() as usize;
                if c < CODES {
                    self.errors[i * CODES + c]
                        .get_or_init(|| {
                            self.requests
                                .with_label_values(&[Opcode::ALL[i].name(), code.name()])
                        })
                        .inc();
                } else {
                    self.requests
                        .with_label_values(&[Opcode::ALL[i].name(), code.name()])
                        .inc();
                }
            }
        }
        self.latency_by_opcode[i].observe(seconds);
    }

    /// The memory families, from a fresh report (before a scrape renders).
    pub fn set_memory(&self, report: &crate::memory::Report) {
        self.memory_budget_bytes.set(report.budget as i64);
        for r in &report.rows {
            self.memory_bytes
                .with_label_values(&[r.part.name()])
                .set(r.bytes as i64);
            if let Some(limit) = r.limit {
                self.memory_limit_bytes
                    .with_label_values(&[r.part.name()])
                    .set(limit as i64);
            }
        }
    }

    /// Prometheus text exposition: `rush_*`, then `process_*`.
    pub fn render(&self) -> String {
        let mut families = self.registry.gather();
        families.extend(self.process.gather());
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&families, &mut out)
            .expect("text encoding can't fail");
        String::from_utf8(out).expect("prometheus text is UTF-8")
    }
}
