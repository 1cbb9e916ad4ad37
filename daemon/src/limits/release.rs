//! LIMIT_RELEASE: give an order's counts back, once.

use super::counter::{corrupt, storage_error, Counter};
use super::order::{Lines, OrderRecord};
use super::Limits;
use crate::shard::txn::Txn;
use crate::storage::value;
use rush_protocol::cmd::{LimitRelease, ReleaseReply};
use rush_protocol::{Reply, RushError};

impl Limits {
    /// The order record says which counters were counted in which window;
    /// each still in that window gets its quantity back (a window that has
    /// ended has nothing to give back to). The record is then marked
    /// released, so a second release (or a replayed acquire) counts nothing.
    /// Works from the record alone, so a policy replaced since the order
    /// still releases exactly what the order counted.
    pub(super) fn release(
        &self,
        r: &LimitRelease,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let (policy, at) = self.order(&r.user, &r.policy, &r.order_id)?;
        let Some(mut order) = OrderRecord::load(txn, &at.record, now)? else {
            policy.metrics.release_not_found.inc();
            return Err(RushError::not_found(format!(
                "no order {:?} for this user under policy {:?} (never acquired, or no longer remembered)",
                r.order_id, r.policy
            )));
        };
        if order.released {
            policy.metrics.release_replayed.inc();
            return Ok(Reply::LimitRelease(ReleaseReply {
                replayed: true,
                items: order.items,
            }));
        }

        let lines = Lines::new(&order.items);
        for t in &order.touched {
            for (_, qty, key) in lines.counters(&at.counters, &t.rule, t.scope) {
                let Some(raw) = txn.get(&key).map_err(storage_error)? else {
                    continue;
                };
                let counter = Counter::decode(&raw, now).map_err(corrupt)?;
                if let Some(back) = counter.give_back(t.window, qty) {
                    // Keep the stored expiry: the window hasn't moved.
                    let expires_at = value::expiry_of(&raw).unwrap_or(1);
                    back.store(key, expires_at, txn);
                }
            }
        }
        order.released = true;
        txn.put(at.record, order.encode());
        if !policy.relaxed() {
            txn.require_sync();
        }
        policy.metrics.released.inc();
        Ok(Reply::LimitRelease(ReleaseReply {
            replayed: false,
            items: order.items,
        }))
    }
}
