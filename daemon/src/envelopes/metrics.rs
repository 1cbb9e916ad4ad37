//! Envelope metrics, registered on the node's registry (`rush_envelope_*`).
//! Per-outcome handles are resolved once, so counting a grab is an atomic add.

use crate::metrics::local::{self, Counter as IntCounter};
use prometheus::{IntGaugeVec, Opts, Registry};

pub struct EnvelopeMetrics {
    pub creates: IntCounter,
    pub grab_ok: IntCounter,
    pub grab_empty: IntCounter,
    pub grab_dup: IntCounter,
    pub grab_busy: IntCounter,
    pub grab_expired: IntCounter,
    /// Grabs waiting on their shard, for envelopes with a deep queue
    /// (label: envelope id). Only hot envelopes get a series, and it is
    /// removed when they cool down, so the label set stays small.
    pub queue_depth: IntGaugeVec,
    pub refunds_written: IntCounter,
    pub refunded_cents: IntCounter,
    pub refunds_acked: IntCounter,
    /// Cents in open envelopes (created, not yet grabbed or refunded).
    pub in_flight_cents: local::Gauge,
    /// Refunds written and not yet acknowledged, per shard (the refund
    /// backlog the payment system still has to pay).
    pub refunds_pending: IntGaugeVec,
    /// Day buckets (a slot's envelopes of one calendar day) removed by
    /// retention. Not `…_days_…`: promtool reads "days" as a time unit.
    pub days_removed: IntCounter,
}

fn reg<T: prometheus::core::Collector + Clone + 'static>(r: &Registry, c: T) -> T {
    r.register(Box::new(c.clone()))
        .expect("metric names are unique");
    c
}

impl EnvelopeMetrics {
    pub fn new(r: &Registry, writers: usize) -> Self {
        let grabs = local::register(
            r,
            local::CounterVec::new(
                "envelope_grabs_total",
                "Envelope grabs, by outcome",
                &["outcome"],
                writers,
            ),
        );
        let counter = |name: &str, help: &str| local::counter(r, name, help, writers);
        EnvelopeMetrics {
            creates: counter("envelope_creates_total", "Envelopes created"),
            grab_ok: grabs.with_label_values(&["ok"]),
            grab_empty: grabs.with_label_values(&["empty"]),
            grab_dup: grabs.with_label_values(&["dup"]),
            grab_busy: grabs.with_label_values(&["busy"]),
            grab_expired: grabs.with_label_values(&["expired"]),
            queue_depth: reg(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "envelope_queue_depth",
                        "Grabs queued on the shard for a hot envelope (deepest since the last timer run)",
                    ),
                    &["envelope"],
                )
                .expect("valid"),
            ),
            refunds_written: counter(
                "envelope_refunds_written_total",
                "Refunds written to the refund stream",
            ),
            refunded_cents: counter(
                "envelope_refunded_cents_total",
                "Cents refunded to senders",
            ),
            refunds_acked: counter(
                "envelope_refunds_acked_total",
                "Refunds acknowledged as paid and removed from the stream",
            ),
            in_flight_cents: local::gauge(
                r,
                "envelope_in_flight_cents",
                "Cents in open envelopes, not yet grabbed or refunded",
                writers,
            ),
            refunds_pending: reg(
                r,
                IntGaugeVec::new(
                    Opts::new(
                        "envelope_refunds_pending",
                        "Refunds in the stream not yet acknowledged as paid",
                    ),
                    &["shard"],
                )
                .expect("valid"),
            ),
            days_removed: counter(
                "envelope_retention_day_buckets_removed_total",
                "Day buckets (one slot's envelopes of one calendar day) removed by retention",
            ),
        }
    }
}
