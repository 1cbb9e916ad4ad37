//! LIMIT_STATUS: a user's counts and resets under a policy.

use super::book::Book;
use super::counter::{storage_error, Counter};
use super::Limits;
use crate::shard::txn::Txn;
use crate::storage::keys;
use rush_protocol::cmd::{Allowance, LimitStatus, Scope, StatusReply};
use rush_protocol::limits::MAX_STATUS_ENTRIES;
use rush_protocol::{key_slot, Reply, RushError};

impl Limits {
    pub(super) fn status(
        &self,
        r: &LimitStatus,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let policy = self.policy(&r.policy)?;
        let key = keys::limit_book(key_slot(&r.user), &r.user, r.policy.as_bytes());
        let positions = policy
            .rules
            .iter()
            .map(|rule| rule.pos(now))
            .collect::<Result<Vec<_>, _>>()?;
        // The book's entries are in (rule, item) order.
        let raw = txn.get(&key).map_err(storage_error)?;
        let book = Book::decode(raw.as_deref(), now)?;
        let mut truncated = false;
        let mut per_rule: Vec<Vec<Allowance>> = vec![Vec::new(); policy.rules.len()];
        let mut totals: Vec<Option<&Counter>> = vec![None; policy.rules.len()];
        let mut listed = 0;
        for e in book.entries() {
            // Counts of rules the policy no longer has are left to end.
            let Some(i) = policy.rules.iter().position(|r| r.name == e.rule) else {
                continue;
            };
            let (rule, pos) = (&policy.rules[i], &positions[i]);
            let count = e.counter.count_at(pos);
            match rule.scope {
                Scope::Total if e.item.is_empty() => totals[i] = Some(&e.counter),
                Scope::Item if count > 0 && !e.item.is_empty() => {
                    if listed == MAX_STATUS_ENTRIES {
                        truncated = true;
                        continue;
                    }
                    listed += 1;
                    per_rule[i].push(Allowance {
                        rule: rule.name.clone(),
                        item: e.item.to_string(),
                        count,
                        limit: rule.max,
                        resets_at_ms: e.counter.resets_at(pos),
                    });
                }
                _ => {}
            }
        }
        let mut allowances = Vec::with_capacity(listed + policy.rules.len());
        for (i, rule) in policy.rules.iter().enumerate() {
            match rule.scope {
                Scope::Item => allowances.append(&mut per_rule[i]),
                Scope::Total => {
                    let counter = totals[i].take().unwrap_or(&Counter::Empty);
                    allowances.push(Allowance {
                        rule: rule.name.clone(),
                        item: String::new(),
                        count: counter.count_at(&positions[i]),
                        limit: rule.max,
                        resets_at_ms: counter.resets_at(&positions[i]),
                    });
                }
            }
        }
        Ok(Reply::LimitStatus(StatusReply {
            allowances,
            truncated,
        }))
    }
}
