//! LIMIT_RELEASE: give an order's counts back, once.

use super::book::Book;
use super::order::Lines;
use super::Limits;
use crate::shard::txn::Txn;
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
        &mut self,
        r: &LimitRelease,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let (policy, at) = self.order(&r.user, &r.policy, &r.order_id)?;
        let Some(mut order) = at.load_record(&self.known, txn, now)? else {
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
        let raw = at.load_book(&self.known, txn)?;
        let mut book = Book::decode(raw.as_deref(), now)?;
        let mut changed = false;
        for t in &order.touched {
            for (item, qty) in lines.counts(t.scope) {
                let Some(expires_at) = book.expiry(&t.rule, item) else {
                    continue;
                };
                if let Some(back) = book.counter(&t.rule, item).give_back(t.window, qty) {
                    // Keep the entry's end: the window hasn't moved.
                    book.set(t.rule.as_str(), item, back, expires_at);
                    changed = true;
                }
            }
        }
        let hashes = at.hashes;
        if changed {
            book.store(at.book, txn);
        }
        order.released = true;
        txn.put(at.record, order.encode());
        if !policy.relaxed() {
            txn.require_sync();
        }
        policy.metrics.released.inc();
        hashes.written(&mut self.known);
        Ok(Reply::LimitRelease(ReleaseReply {
            replayed: false,
            items: order.items,
        }))
    }
}
