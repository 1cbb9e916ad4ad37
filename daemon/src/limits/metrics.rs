//! Purchase-limit metrics. Label values are policy and rule names, which
//! operators define (at most `MAX_POLICIES` policies of at most
//! `MAX_POLICY_RULES` rules, names of `[A-Za-z0-9_.-]`), so cardinality is
//! bounded. Handles are resolved when a policy is compiled, so the request
//! path costs an atomic add. A request naming an unknown policy is counted
//! without its name (client-chosen strings never become labels).

use crate::metrics::local::{self, Counter as IntCounter, CounterVec};
use prometheus::Registry;
use std::sync::Arc;

#[derive(Clone)]
pub struct LimitsMetrics {
    /// Acquisitions by policy and outcome: allowed, limited, replayed, conflict.
    pub acquires: Arc<CounterVec>,
    /// Denials by policy and the rule that denied.
    pub denials: Arc<CounterVec>,
    /// Releases by policy and outcome: released, replayed, not_found.
    pub releases: Arc<CounterVec>,
    /// Requests naming a policy the node doesn't have.
    pub unknown_policy: IntCounter,
}

impl LimitsMetrics {
    pub fn new(r: &Registry, writers: usize) -> LimitsMetrics {
        let vec = |name: &str, help: &str, labels: &[&str]| {
            local::register(r, CounterVec::new(name, help, labels, writers))
        };
        LimitsMetrics {
            acquires: vec(
                "limit_acquires_total",
                "LIMIT_ACQUIRE answers by policy and outcome",
                &["policy", "outcome"],
            ),
            denials: vec(
                "limit_denials_total",
                "Orders denied, by policy and the rule that denied them",
                &["policy", "rule"],
            ),
            releases: vec(
                "limit_releases_total",
                "LIMIT_RELEASE answers by policy and outcome",
                &["policy", "outcome"],
            ),
            unknown_policy: local::counter(
                r,
                "limit_unknown_policy_total",
                "Purchase-limit requests naming a policy the node doesn't have",
                writers,
            ),
        }
    }
}

/// One policy's handles.
#[derive(Debug)]
pub struct PolicyMetrics {
    pub allowed: IntCounter,
    pub limited: IntCounter,
    pub replayed: IntCounter,
    pub conflict: IntCounter,
    pub released: IntCounter,
    pub release_replayed: IntCounter,
    pub release_not_found: IntCounter,
}

impl PolicyMetrics {
    pub fn new(m: &LimitsMetrics, policy: &str) -> PolicyMetrics {
        let acq = |o: &str| m.acquires.with_label_values(&[policy, o]);
        let rel = |o: &str| m.releases.with_label_values(&[policy, o]);
        PolicyMetrics {
            allowed: acq("allowed"),
            limited: acq("limited"),
            replayed: acq("replayed"),
            conflict: acq("conflict"),
            released: rel("released"),
            release_replayed: rel("replayed"),
            release_not_found: rel("not_found"),
        }
    }
}
