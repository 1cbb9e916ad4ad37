//! LIMIT_ACQUIRE: check every rule for every item, then count all or nothing.

use super::book::{Book, MAX_BOOK_ENTRIES};
use super::counter::Counter;
use super::order::{encode_record, sorted_items, Lines};
use super::policy::{CompiledRule, Pos};
use super::Limits;
use crate::shard::txn::Txn;
use rush_protocol::cmd::{AcquireReply, Allowance, LimitAcquire, OrderItem, Scope};
use rush_protocol::{ErrorCode, ErrorDetail, LimitDenial, Reply, RushError, Wire};
use smallvec::SmallVec;

/// One counter the order touches, read and checked before anything is
/// written.
struct Step<'a> {
    rule: &'a CompiledRule,
    pos: Pos,
    /// The item, or "" for a total rule.
    item: &'a str,
    qty: u64,
    counter: Counter,
}

impl Limits {
    pub(super) fn acquire(
        &mut self,
        r: &LimitAcquire,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let (policy, at) = self.order(&r.user, &r.policy, &r.order_id)?;

        // A known order id: nothing counted, the counts as they are now.
        if let Some(order) = at.load_record(&self.known, txn, now)? {
            if order.items != sorted_items(&r.items) {
                policy.metrics.conflict.inc();
                return Err(RushError::new(
                    ErrorCode::Conflict,
                    format!(
                        "order {:?} was acquired with other items; an order id names one order",
                        r.order_id
                    ),
                ));
            }
            policy.metrics.replayed.inc();
            let mut reply = order.first_reply()?;
            reply.replayed = true;
            reply.released = order.released;
            let raw = at.load_book(&self.known, txn)?;
            let book = Book::decode(raw.as_deref(), now)?;
            for a in &mut reply.allowances {
                // A rule the policy no longer has keeps its first answer.
                let Some(rule) = policy.rules.iter().find(|rule| rule.name == a.rule) else {
                    continue;
                };
                let pos = rule.pos(now)?;
                let counter = book.counter(&rule.name, &a.item);
                a.count = counter.count_at(&pos);
                a.limit = rule.max;
                a.resets_at_ms = counter.resets_at(&pos);
            }
            return Ok(Reply::LimitAcquire(reply));
        }

        // Read and check every count first; write only if all pass.
        let raw = at.load_book(&self.known, txn)?;
        let mut book = Book::decode(raw.as_deref(), now)?;
        let lines = Lines::new(&r.items);
        let mut steps: Vec<Step> = Vec::with_capacity(policy.rules.len() * r.items.len());
        let mut windows: SmallVec<[u64; 4]> = SmallVec::with_capacity(policy.rules.len());
        for rule in &policy.rules {
            let pos = rule.pos(now)?;
            windows.push(pos.id());
            for (item, qty) in lines.counts(rule.scope) {
                let counter = book.counter(&rule.name, item).clone();
                let current = counter.count_at(&pos);
                if current
                    .checked_add(qty)
                    .is_none_or(|after| after > rule.max)
                {
                    policy.metrics.limited.inc();
                    rule.denials.inc();
                    return Err(denied(rule, item, current, qty));
                }
                steps.push(Step {
                    rule,
                    pos,
                    item,
                    qty,
                    counter,
                });
            }
        }

        let mut allowances = Vec::with_capacity(steps.len());
        for s in steps {
            let counter = s.counter.add(&s.pos, s.qty);
            allowances.push(Allowance {
                rule: s.rule.name.clone(),
                item: s.item.to_string(),
                count: counter.count_at(&s.pos),
                limit: s.rule.max,
                resets_at_ms: counter.resets_at(&s.pos),
            });
            let expires_at = counter.expiry(&s.pos);
            book.set(s.rule.name.as_str(), s.item, counter, expires_at);
        }
        if book.len() > MAX_BOOK_ENTRIES {
            return Err(RushError::new(
                ErrorCode::TooLarge,
                format!(
                    "the order would give user {:?} {} live counts under policy {:?}, over the most one user can hold ({MAX_BOOK_ENTRIES}); nothing was counted",
                    String::from_utf8_lossy(&r.user),
                    book.len(),
                    r.policy
                ),
            ));
        }
        let hashes = at.hashes;
        book.store(at.book, txn);
        let reply = AcquireReply {
            replayed: false,
            released: false,
            allowances,
        };
        let mut items: SmallVec<[&OrderItem; 4]> = r.items.iter().collect();
        items.sort_unstable_by(|a, b| a.item.cmp(&b.item));
        let record = encode_record(
            false,
            now.saturating_add(policy.order_ttl_ms),
            &items,
            policy
                .rules
                .iter()
                .zip(windows)
                .map(|(rule, window)| (rule.name.as_str(), rule.scope, window)),
            |out| reply.encode(out),
        );
        txn.put(at.record, record);
        if !policy.relaxed() {
            txn.require_sync();
        }
        policy.metrics.allowed.inc();
        hashes.written(&mut self.known);
        Ok(Reply::LimitAcquire(reply))
    }
}

/// LIMITED, naming the rule and item (empty for a total rule).
fn denied(rule: &CompiledRule, item: &str, current: u64, requested: u64) -> RushError {
    use std::fmt::Write;
    let mut message = String::with_capacity(rule.denial.len() + item.len() + 64);
    message.push_str(&rule.denial);
    // Writing to a String can't fail.
    let _ = match rule.scope {
        Scope::Item => write!(message, "item {item:?} has"),
        Scope::Total => write!(message, "the user has"),
    };
    let _ = write!(
        message,
        " {current} of {}, the order asks for {requested}",
        rule.max
    );
    RushError::new(ErrorCode::Limited, message).with_detail(ErrorDetail::Limit(LimitDenial {
        rule: rule.name.clone(),
        item: item.to_string(),
        current,
        limit: rule.max,
        requested,
    }))
}
