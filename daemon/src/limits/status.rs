//! LIMIT_STATUS: a user's counts and resets under a policy.

use super::counter::{corrupt, Counter};
use super::Limits;
use crate::shard::txn::Txn;
use crate::storage::keys;
use rush_protocol::cmd::{Allowance, LimitStatus, Scope, StatusReply};
use rush_protocol::limits::MAX_STATUS_ENTRIES;
use rush_protocol::{key_slot, Reply, RushError};

/// Stored counters read at most per status, live or not (expired ones linger
/// until compaction): bounds the work of one request.
const MAX_SCANNED: usize = 4 * MAX_STATUS_ENTRIES;

impl Limits {
    pub(super) fn status(
        &self,
        r: &LimitStatus,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let policy = self.policy(&r.policy)?;
        let prefix = keys::limit_counters(key_slot(&r.user), &r.user, &r.policy);
        let positions = policy
            .rules
            .iter()
            .map(|rule| rule.pos(now))
            .collect::<Result<Vec<_>, _>>()?;
        // The user's counters of this policy are one key range, in (rule,
        // item) order.
        let (entries, mut truncated) = txn
            .scan(&prefix, &keys::prefix_end(&prefix), MAX_SCANNED)
            .map_err(super::counter::storage_error)?;
        let mut per_rule: Vec<Vec<Allowance>> = vec![Vec::new(); policy.rules.len()];
        let mut totals: Vec<Option<Counter>> = vec![None; policy.rules.len()];
        let mut listed = 0;
        for (key, raw) in &entries {
            let Some((rule_name, item)) = keys::parse_limit_counter(&prefix, key) else {
                continue;
            };
            // Counters of rules the policy no longer has are left to expire.
            let Some(i) = policy
                .rules
                .iter()
                .position(|r| r.name.as_bytes() == rule_name)
            else {
                continue;
            };
            let (rule, pos) = (&policy.rules[i], &positions[i]);
            let counter = Counter::decode(raw, now).map_err(corrupt)?;
            let count = counter.count_at(pos);
            match rule.scope {
                Scope::Total if item.is_empty() => totals[i] = Some(counter),
                Scope::Item if count > 0 && !item.is_empty() => {
                    if listed == MAX_STATUS_ENTRIES {
                        truncated = true;
                        continue;
                    }
                    listed += 1;
                    per_rule[i].push(Allowance {
                        rule: rule.name.clone(),
                        item: String::from_utf8_lossy(item).into_owned(),
                        count,
                        limit: rule.max,
                        resets_at_ms: counter.resets_at(pos),
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
                    let counter = totals[i].take().unwrap_or(Counter::Empty);
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
