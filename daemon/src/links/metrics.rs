//! The short-link service's Prometheus metrics (registered on the node's
//! registry by `Metrics::new`). Label sets are fixed and resolved once; the
//! counters are per shard (`metrics::local`).

use crate::metrics::local::{self, Counter as IntCounter};
use prometheus::{IntCounterVec, Opts, Registry};

pub struct LinkMetrics {
    /// Codes handed out: fresh from a segment.
    pub issued_new: IntCounter,
    /// Codes handed out again after their link expired or was deleted.
    pub issued_recycled: IntCounter,
    /// Custom aliases created.
    pub issued_alias: IntCounter,
    /// Segments reserved for short codes (one synced HWM write each).
    pub segments_reserved: IntCounter,
    /// Issues that found no prefetched segment and reserved their own
    /// (the first code of a slot and length after a start; ~0 otherwise).
    pub segment_waits: IntCounter,
    pub resolve_hit: IntCounter,
    pub resolve_miss: IntCounter,
    /// Expiry rewrites caused by visits (sliding expiry).
    pub slides: IntCounter,
    /// Shortens answered EXHAUSTED (a slot's space full of live links).
    pub exhausted: IntCounter,
    /// HTTP redirect answers by status.
    redirects: IntCounterVec,
}

impl LinkMetrics {
    pub fn new(r: &Registry, writers: usize) -> LinkMetrics {
        let counter = |name: &str, help: &str| local::counter(r, name, help, writers);
        let issued = local::register(
            r,
            local::CounterVec::new(
                "links_codes_issued_total",
                "Short codes issued, by source",
                &["source"],
                writers,
            ),
        );
        let resolves = local::register(
            r,
            local::CounterVec::new(
                "links_resolves_total",
                "LINK_RESOLVE answers, by result",
                &["result"],
                writers,
            ),
        );
        let redirects = crate::metrics::reg(
            r,
            IntCounterVec::new(
                Opts::new(
                    "links_redirects_total",
                    "HTTP answers of the redirect listener, by status",
                ),
                &["status"],
            )
            .expect("valid"),
        );
        LinkMetrics {
            issued_new: issued.with_label_values(&["new"]),
            issued_recycled: issued.with_label_values(&["recycled"]),
            issued_alias: issued.with_label_values(&["alias"]),
            segments_reserved: counter(
                "links_segments_reserved_total",
                "ID segments reserved for short codes",
            ),
            segment_waits: counter(
                "links_segment_waits_total",
                "Short codes that waited for a segment reservation (no prefetch ready)",
            ),
            resolve_hit: resolves.with_label_values(&["hit"]),
            resolve_miss: resolves.with_label_values(&["miss"]),
            slides: counter(
                "links_sliding_expiry_rewrites_total",
                "Link expiries pushed out by a visit",
            ),
            exhausted: counter(
                "links_exhausted_total",
                "Shortens refused because the slot's code space had no free code",
            ),
            redirects,
        }
    }

    pub fn redirect(&self, status: u16) {
        self.redirects
            .with_label_values(&[&status.to_string()])
            .inc();
    }
}
