//! Purchase-limit keys. A user's counters and orders sit next to each other
//! (user first), so one user's counts under one policy are one contiguous
//! range (LIMIT_STATUS).

use super::{ks, take_part, KeyBuf};

/// The prefix of every counter of `user` under `policy`.
pub fn limit_counters(slot: u16, user: &[u8], policy: &str) -> Vec<u8> {
    KeyBuf::new(slot, ks::LIMIT_COUNTER)
        .part(user)
        .part(policy.as_bytes())
        .build()
}

/// One counter: `prefix` from [`limit_counters`], then the rule and the item
/// (empty for a total rule).
pub fn limit_counter(prefix: &[u8], rule: &str, item: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 4 + rule.len() + item.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(&(rule.len() as u16).to_be_bytes());
    k.extend_from_slice(rule.as_bytes());
    k.extend_from_slice(item.as_bytes());
    k
}

/// The (rule, item) of a counter key that starts with `prefix`.
pub fn parse_limit_counter<'k>(prefix: &[u8], raw: &'k [u8]) -> Option<(&'k [u8], &'k [u8])> {
    take_part(raw.strip_prefix(prefix)?)
}

/// One order's record.
pub fn limit_order(slot: u16, user: &[u8], policy: &str, order_id: &str) -> Vec<u8> {
    KeyBuf::new(slot, ks::LIMIT_ORDER)
        .part(user)
        .part(policy.as_bytes())
        .tail(order_id.as_bytes())
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::keys::prefix_end;

    #[test]
    fn limit_counters_of_a_user_and_policy_are_one_range() {
        let prefix = limit_counters(7, b"u1", "flash");
        let end = prefix_end(&prefix);
        let a = limit_counter(&prefix, "item", "sku-1");
        let b = limit_counter(&prefix, "total", "");
        for k in [&a, &b] {
            assert!(prefix <= *k && *k < end);
        }
        assert_eq!(
            parse_limit_counter(&prefix, &a),
            Some((&b"item"[..], &b"sku-1"[..]))
        );
        assert_eq!(
            parse_limit_counter(&prefix, &b),
            Some((&b"total"[..], &b""[..]))
        );
        // Another user, or a policy whose name extends this one, is outside.
        let other = limit_counter(&limit_counters(7, b"u1", "flash2"), "item", "x");
        assert!(other >= end || other < prefix);
        let other = limit_counter(&limit_counters(7, b"u12", "flash"), "item", "x");
        assert!(other >= end || other < prefix);
        assert_eq!(prefix_end(&[1, 0xff]), vec![2]);
        // A counter key cut short is not a counter.
        assert_eq!(parse_limit_counter(&prefix, &a[..prefix.len() + 1]), None);
        assert_eq!(parse_limit_counter(&prefix, &a[..prefix.len() + 4]), None);
    }
}
