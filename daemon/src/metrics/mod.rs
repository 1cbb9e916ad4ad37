//! Prometheus metrics. Handles for the hot path (per-opcode "ok" counters and
//! latency histograms) are resolved once at start-up, so a request costs an
//! atomic add, not a label lookup. Gauges that can be read off live state
//! (queue depths, storage counters) are filled in at scrape time.

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};
use rush_protocol::{ErrorCode, Opcode};

/// Latency buckets in seconds: 25 µs to 2.5 s.
const LATENCY_BUCKETS: &[f64] = &[
    0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 1.0, 2.5,
];

pub struct Metrics {
    pub registry: Registry,
    requests: IntCounterVec,
    ok_by_opcode: Vec<Option<IntCounter>>,
    latency_by_opcode: Vec<Option<Histogram>>,
    pub batch_size: Histogram,
    pub commit_seconds: Histogram,
    pub queue_depth: IntGaugeVec,
    pub connections: IntGauge,
    pub connections_total: IntCounter,
    pub connections_rejected: IntCounter,
    pub connections_closed: IntCounterVec,
    pub frames_rejected: IntCounterVec,
    pub storage_writes: IntGauge,
    pub storage_syncs: IntGauge,
    pub storage_write_errors: IntGauge,
    pub storage_reads: IntGauge,
    pub auth_failures: IntCounter,
    pub row_cache_hits: IntCounter,
    pub row_cache_misses: IntCounter,
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
    pub fn new() -> Metrics {
        let r = Registry::new_custom(Some("rush".into()), None).expect("valid prefix");
        let requests = reg(
            &r,
            IntCounterVec::new(
                Opts::new("requests_total", "Requests answered, by opcode and outcome"),
                &["op", "outcome"],
            )
            .expect("valid"),
        );
        let latency = reg(
            &r,
            HistogramVec::new(
                HistogramOpts::new(
                    "request_duration_seconds",
                    "From a whole frame received to its answer encoded",
                )
                .buckets(LATENCY_BUCKETS.to_vec()),
                &["op"],
            )
            .expect("valid"),
        );
        let mut ok_by_opcode = vec![None; 256];
        let mut latency_by_opcode = vec![None; 256];
        for op in Opcode::ALL {
            ok_by_opcode[op.as_u8() as usize] =
                Some(requests.with_label_values(&[op.name(), "ok"]));
            latency_by_opcode[op.as_u8() as usize] = Some(latency.with_label_values(&[op.name()]));
        }
        Metrics {
            ok_by_opcode,
            latency_by_opcode,
            requests,
            batch_size: reg(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new("shard_batch_size", "Requests per group commit").buckets(
                        vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0],
                    ),
                )
                .expect("valid"),
            ),
            commit_seconds: reg(
                &r,
                Histogram::with_opts(
                    HistogramOpts::new(
                        "storage_commit_seconds",
                        "Time of one group commit (WriteBatch + fsync when durable)",
                    )
                    .buckets(LATENCY_BUCKETS.to_vec()),
                )
                .expect("valid"),
            ),
            queue_depth: reg(
                &r,
                IntGaugeVec::new(
                    Opts::new("shard_queue_depth", "Requests waiting in a shard's queue"),
                    &["shard"],
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
            storage_writes: reg(
                &r,
                IntGauge::new("storage_writes_total", "RocksDB write batches").expect("valid"),
            ),
            storage_syncs: reg(
                &r,
                IntGauge::new("storage_syncs_total", "RocksDB write batches fsynced")
                    .expect("valid"),
            ),
            storage_write_errors: reg(
                &r,
                IntGauge::new("storage_write_errors_total", "RocksDB writes that failed")
                    .expect("valid"),
            ),
            storage_reads: reg(
                &r,
                IntGauge::new("storage_reads_total", "RocksDB point reads").expect("valid"),
            ),
            row_cache_hits: reg(
                &r,
                IntCounter::new(
                    "row_cache_hits_total",
                    "Storage reads answered by the row cache",
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
            auth_failures: reg(
                &r,
                IntCounter::new(
                    "auth_failures_total",
                    "HELLOs with a wrong or missing token",
                )
                .expect("valid"),
            ),
            limits: crate::limits::LimitsMetrics::new(&r),
            catalog: crate::catalog::CatalogMetrics::new(&r),
            envelopes: crate::envelopes::EnvelopeMetrics::new(&r),
            links: crate::links::LinkMetrics::new(&r),
            cluster: crate::cluster::ClusterMetrics::new(&r),
            registry: r,
        }
    }

    /// Count an answered request and its latency.
    pub fn observe(&self, opcode: u8, outcome: Result<(), ErrorCode>, seconds: f64) {
        match outcome {
            Ok(()) => {
                if let Some(c) = &self.ok_by_opcode[opcode as usize] {
                    c.inc();
                }
            }
            Err(code) => {
                let op = Opcode::from_u8(opcode)
                    .map(|o| o.name())
                    .unwrap_or("UNKNOWN");
                self.requests.with_label_values(&[op, code.name()]).inc();
            }
        }
        if let Some(h) = &self.latency_by_opcode[opcode as usize] {
            h.observe(seconds);
        }
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding can't fail");
        String::from_utf8(out).expect("prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
