//! The cluster's Prometheus metrics (registered by `Metrics::new`).

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};

pub struct ClusterMetrics {
    /// The epoch of the map in force.
    pub epoch: IntGauge,
    /// Slots this node serves.
    pub slots_owned: IntGauge,
    /// Requests answered MOVED / TRYAGAIN by the routing check.
    pub moved: IntCounter,
    pub try_again: IntCounter,
    /// Slots moved away from this node, and what they carried.
    pub slots_migrated: IntCounter,
    pub keys_migrated: IntCounter,
    pub bytes_migrated: IntCounter,
    /// Slots taken over from another node.
    pub slots_imported: IntCounter,
    /// Slot moves that failed, by how they ended.
    pub migration_failures: IntCounterVec,
}

/// How a failed slot move ends: given back to the source ("rolled back"),
/// or unknown until the target answers ("unresolved": the slot stays
/// frozen, answering TRYAGAIN, while the source keeps asking).
pub const MIGRATION_OUTCOMES: [&str; 2] = ["rolled back", "unresolved"];

impl ClusterMetrics {
    pub fn new(r: &Registry) -> ClusterMetrics {
        let c = |name: &str, help: &str| {
            crate::metrics::reg(r, IntCounter::new(name, help).expect("valid"))
        };
        let routed = crate::metrics::reg(
            r,
            IntCounterVec::new(
                Opts::new(
                    "cluster_redirects_total",
                    "Requests for slots this node does not serve right now, by answer",
                ),
                &["answer"],
            )
            .expect("valid"),
        );
        let m = ClusterMetrics {
            epoch: crate::metrics::reg(
                r,
                IntGauge::new("cluster_epoch", "Epoch of the cluster map in force").expect("valid"),
            ),
            slots_owned: crate::metrics::reg(
                r,
                IntGauge::new("cluster_slots_owned", "Slots this node serves").expect("valid"),
            ),
            moved: routed.with_label_values(&["moved"]),
            try_again: routed.with_label_values(&["tryagain"]),
            slots_migrated: c(
                "cluster_slots_migrated_total",
                "Slots moved from this node to another",
            ),
            keys_migrated: c(
                "cluster_keys_migrated_total",
                "Storage keys copied to other nodes by slot moves",
            ),
            bytes_migrated: c(
                "cluster_bytes_migrated_total",
                "Bytes copied to other nodes by slot moves",
            ),
            slots_imported: c(
                "cluster_slots_imported_total",
                "Slots taken over from other nodes",
            ),
            migration_failures: crate::metrics::reg(
                r,
                IntCounterVec::new(
                    Opts::new(
                        "cluster_migration_failures_total",
                        "Slot moves that did not complete, by outcome",
                    ),
                    &["outcome"],
                )
                .expect("valid"),
            ),
        };
        // Every outcome exists from the start, at 0, so an alert's rate sees
        // the first failure (deploy/prometheus/rush-alerts.yml).
        for outcome in MIGRATION_OUTCOMES {
            m.migration_failures.with_label_values(&[outcome]);
        }
        m
    }
}
