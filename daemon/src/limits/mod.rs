//! Purchase limits: a user's whole order checked against every rule of a
//! policy and counted atomically in the user's slot, or not at all.
//! Idempotent by order id; releasable once.
//!
//! - Storage: one book per (user, policy) under `keys::limit_book` holding
//!   every count of the user under the policy, by rule and item (item empty
//!   for a total rule), each ending with its window; the book expires with
//!   its last count (TTL compaction removes it). One record per (user,
//!   policy, order) under `keys::limit_order`, kept for the policy's order
//!   retention. All of a user's keys are in the user's slot, so an order is
//!   one read and two writes of one shard's group commit. Counts of the
//!   layout before books (one per key) are folded into books on open and on
//!   slot import (`legacy`).
//! - A Bloom filter over the shard's record and book keys
//!   ([`KeyFilter`]) answers
//!   "absent" for a new order's record and a new user's book without a
//!   read.
//! - Policies: every shard holds the whole table (config, then the stored
//!   run-time policies over it). LIMIT_POLICY_SET is stored in the meta
//!   column family and then broadcast to every shard (`admin`).
//! - Time: `now` from the node clock, given to `apply`; tests move it.

mod acquire;
pub mod admin;
mod book;
pub mod config;
mod counter;
mod legacy;
pub mod metrics;
mod order;
mod policy;
mod release;
mod status;

pub use config::LimitsConfig;
pub use metrics::LimitsMetrics;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::services::Registration;
use crate::shard::known::KeyFilter;
use crate::shard::service::{Ahead, Cx, ShardService};
use crate::storage::keys;
use crate::storage::Storage;
use hashbrown::HashMap;
use order::OrderKeys;
use policy::Policy;
use rush_protocol::cmd::{LimitPolicySet, PolicyDef, PolicyListReply, PolicySetReply};
use rush_protocol::limits::MAX_POLICIES;
use rush_protocol::{Opcode, Reply, Request, RushError, Service};

/// The purchase-limit service of one shard.
pub struct Limits {
    /// Every policy by name. A plain map owned by the shard thread: policy
    /// changes arrive as requests in the shard's queue, so no lock.
    policies: HashMap<String, Policy>,
    config: LimitsConfig,
    metrics: LimitsMetrics,
    /// The shard this service serves (its column family).
    shard: usize,
    /// Which record and book keys the shard may hold.
    known: KeyFilter,
}

impl Limits {
    /// The table at start: the config's policies, then the stored run-time
    /// ones (which win: they were set later, on purpose).
    pub fn load(
        config: &Config,
        storage: &Storage,
        metrics: &Metrics,
        shard: usize,
    ) -> Result<Limits, String> {
        let mut limits = Limits {
            policies: HashMap::new(),
            config: config.limits.clone(),
            metrics: metrics.limits.clone(),
            shard,
            known: KeyFilter::new(
                "purchase-limit",
                keys::limits_range,
                shard,
                config.shard_count(),
                metrics.key_filter("limits", shard),
            ),
        };
        for def in config.limits.policy_defs()? {
            limits.insert(def)?;
        }
        for def in admin::load_stored(storage)? {
            let name = def.name.clone();
            if let Some(old) = limits.policies.get(&name) {
                if old.def != def {
                    tracing::warn!(
                        policy = %name,
                        "a policy set at run time overrides the config file's policy of the same name"
                    );
                }
            }
            limits
                .insert(def)
                .map_err(|e| format!("stored limit policy {name:?}: {e}"))?;
        }
        Ok(limits)
    }

    /// Compile and add or replace a policy; true when it is new.
    fn insert(&mut self, def: PolicyDef) -> Result<bool, String> {
        let new = !self.policies.contains_key(&def.name);
        if new && self.policies.len() >= MAX_POLICIES {
            return Err(format!("a node holds at most {MAX_POLICIES} policies"));
        }
        let policy = Policy::compile(def, &self.config, &self.metrics)?;
        self.policies.insert(policy.def.name.clone(), policy);
        Ok(new)
    }
}

pub const REGISTRATION: Registration = Registration {
    service: Service::Limits,
    build: |ctx, shard| {
        Ok(Box::new(Limits::load(
            &ctx.config,
            &ctx.storage,
            &ctx.metrics,
            shard,
        )?))
    },
    combine: admin::combine,
};

impl Limits {
    /// Fold old-layout counts of `slots` into books (see `legacy`).
    fn fold_legacy(&self, storage: &Storage, slots: impl IntoIterator<Item = u16>) {
        match legacy::fold(storage, self.shard, slots) {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                shard = self.shard,
                counts = n,
                "limit counts of the layout before books folded into books"
            ),
            Err(e) => tracing::error!(
                shard = self.shard,
                error = %e,
                "folding old-layout limit counts into books failed; they are not counted until a later start folds them"
            ),
        }
    }
}

impl ShardService for Limits {
    /// An acquire reads the user's book under the policy first.
    fn prefetch_key(&mut self, opcode: Opcode, body: &[u8], key: &mut Vec<u8>) -> Ahead {
        use rush_protocol::codec::split_lp;
        if opcode != Opcode::LimitAcquire {
            return Ahead::No;
        }
        let Some((policy, rest)) = split_lp(body) else {
            return Ahead::No;
        };
        let Some((user, rest)) = split_lp(rest) else {
            return Ahead::No;
        };
        let slot = rush_protocol::key_slot(user);
        // The acquire asks the filter of keys the shard holds about its
        // order's record and the user's book: their lines are loaded here
        // (a probe waited for memory otherwise, bench/results/NOTES.md).
        let filtered = self.known.ready();
        if filtered {
            if let Some((order_id, _)) = split_lp(rest) {
                if keys::limit_order_into(key, slot, user, policy, order_id) {
                    self.known.prefetch(self.known.hash(key));
                }
            }
        }
        if !keys::limit_book_into(key, slot, user, policy) {
            return Ahead::No;
        }
        if filtered {
            self.known.prefetch(self.known.hash(key));
        }
        Ahead::Row
    }

    fn open(&mut self, storage: &Storage) {
        self.fold_legacy(storage, 0..rush_protocol::SLOTS);
        self.known.open(storage);
    }

    fn on_slots_imported(&mut self, slots: &[u16], storage: &Storage) {
        self.fold_legacy(storage, slots.iter().copied());
        self.known.import(storage, slots);
    }

    fn tick(&mut self, cx: &mut Cx) {
        self.known.tick(cx.txn, cx.now);
    }

    fn memory(&self, into: &mut crate::memory::Use) {
        into.add(crate::memory::Part::KeyFilters, self.known.bytes());
    }

    fn apply(&mut self, req: &Request, cx: &mut Cx) -> Result<Reply, RushError> {
        let (now, txn) = (cx.now, &mut *cx.txn);
        match req {
            Request::LimitAcquire(r) => self.acquire(r, now, txn),
            Request::LimitRelease(r) => self.release(r, now, txn),
            Request::LimitStatus(r) => self.status(r, now, txn),
            Request::LimitPolicySet(r) => self.policy_set(r),
            Request::LimitPolicyGet(r) => match self.policies.get(r.name.as_str()) {
                Some(p) => Ok(Reply::LimitPolicyGet(p.def.clone())),
                None => Err(RushError::not_found(format!(
                    "no limit policy {:?}",
                    r.name
                ))),
            },
            Request::LimitPolicyList(_) => {
                let mut policies: Vec<PolicyDef> =
                    self.policies.values().map(|p| p.def.clone()).collect();
                policies.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(Reply::LimitPolicyList(PolicyListReply { policies }))
            }
            other => Err(RushError::internal(format!(
                "{} is not a purchase-limit request",
                other.opcode().name()
            ))),
        }
    }
}

impl Limits {
    /// A policy broadcast by `admin::policy_set` (already stored).
    fn policy_set(&mut self, r: &LimitPolicySet) -> Result<Reply, RushError> {
        let created = self
            .insert(r.policy.clone())
            .map_err(RushError::bad_request)?;
        let policy = self.policies[r.policy.name.as_str()].def.clone();
        Ok(Reply::LimitPolicySet(PolicySetReply { created, policy }))
    }

    /// The policy an order names, and where the order is kept.
    fn order(
        &self,
        user: &[u8],
        policy: &str,
        order_id: &str,
    ) -> Result<(&Policy, OrderKeys), RushError> {
        Ok((
            self.policy(policy)?,
            OrderKeys::of(user, policy, order_id, &self.known),
        ))
    }

    /// The policy a request names; an unknown one is BAD_REQUEST (the request
    /// can't be valid on this node; NOT_FOUND is kept for missing orders).
    fn policy(&self, name: &str) -> Result<&Policy, RushError> {
        self.policies.get(name).ok_or_else(|| {
            self.metrics.unknown_policy.inc();
            RushError::bad_request(format!("unknown limit policy {name:?}"))
        })
    }
}
