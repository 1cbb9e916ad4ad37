//! Purchase-limit keys. A user's book and orders sit next to each other
//! (user first), all in the user's slot.

use super::{ks, split, take_part, KeyBuf};

/// The book of `user` under `policy`: every count of theirs, in one value.
pub fn limit_book(slot: u16, user: &[u8], policy: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(super::PREFIX_LEN + 4 + user.len() + policy.len());
    let made = limit_book_into(&mut out, slot, user, policy);
    debug_assert!(made, "a decoded user and policy fit their parts");
    out
}

/// [`limit_book`] written into `out` (emptied first): the one place its
/// layout is spelled out. Parts longer than a part can say (never a decoded
/// request's) make no key: false.
pub fn limit_book_into(out: &mut Vec<u8>, slot: u16, user: &[u8], policy: &[u8]) -> bool {
    user_policy_into(out, slot, ks::LIMIT_BOOK, user, policy)
}

/// A key of `keyspace` that starts with `user` and `policy` as parts,
/// written into `out` (emptied first); false (no key) when a part is
/// longer than a part can say.
fn user_policy_into(
    out: &mut Vec<u8>,
    slot: u16,
    keyspace: u8,
    user: &[u8],
    policy: &[u8],
) -> bool {
    let (Ok(user_len), Ok(policy_len)) = (u16::try_from(user.len()), u16::try_from(policy.len()))
    else {
        return false;
    };
    out.clear();
    out.extend_from_slice(&super::slot_prefix(slot));
    out.push(keyspace);
    out.extend_from_slice(&user_len.to_be_bytes());
    out.extend_from_slice(user);
    out.extend_from_slice(&policy_len.to_be_bytes());
    out.extend_from_slice(policy);
    true
}

/// `[start, end)` covering a slot's order records and books.
pub fn limits_range(slot: u16) -> (Vec<u8>, Vec<u8>) {
    let start = KeyBuf::new(slot, ks::LIMIT_ORDER).build();
    let end = KeyBuf::new(slot, ks::LIMIT_BOOK + 1).build();
    (start, end)
}

/// The prefix of every count of `user` under `policy` in the layout before
/// books (one count per key).
pub fn limit_counters(slot: u16, user: &[u8], policy: &str) -> Vec<u8> {
    KeyBuf::new(slot, ks::LIMIT_COUNTER)
        .part(user)
        .part(policy.as_bytes())
        .build()
}

/// One count of the layout before books: `prefix` from [`limit_counters`],
/// then the rule and the item (empty for a total rule).
pub fn limit_counter(prefix: &[u8], rule: &str, item: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 4 + rule.len() + item.len());
    k.extend_from_slice(prefix);
    k.extend_from_slice(&(rule.len() as u16).to_be_bytes());
    k.extend_from_slice(rule.as_bytes());
    k.extend_from_slice(item.as_bytes());
    k
}

/// A count key of the layout before books, taken apart.
#[derive(Debug, PartialEq, Eq)]
pub struct OldCount<'k> {
    pub user: &'k [u8],
    pub policy: &'k [u8],
    pub rule: &'k [u8],
    /// Empty for a total rule.
    pub item: &'k [u8],
}

/// A count key of the layout before books taken apart.
pub fn parse_limit_counter(raw: &[u8]) -> Option<OldCount<'_>> {
    let (_, keyspace, rest) = split(raw)?;
    if keyspace != ks::LIMIT_COUNTER {
        return None;
    }
    let (user, rest) = take_part(rest)?;
    let (policy, rest) = take_part(rest)?;
    let (rule, item) = take_part(rest)?;
    Some(OldCount {
        user,
        policy,
        rule,
        item,
    })
}

/// One order's record.
pub fn limit_order(slot: u16, user: &[u8], policy: &str, order_id: &str) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(super::PREFIX_LEN + 4 + user.len() + policy.len() + order_id.len());
    let made = limit_order_into(&mut out, slot, user, policy.as_bytes(), order_id.as_bytes());
    debug_assert!(made, "a decoded user and policy fit their parts");
    out
}

/// [`limit_order`] written into `out` (emptied first), as
/// [`limit_book_into`]: false (no key) for parts too long.
pub fn limit_order_into(
    out: &mut Vec<u8>,
    slot: u16,
    user: &[u8],
    policy: &[u8],
    order_id: &[u8],
) -> bool {
    if !user_policy_into(out, slot, ks::LIMIT_ORDER, user, policy) {
        return false;
    }
    out.extend_from_slice(order_id);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_keys_of_the_old_layout_parse_back() {
        let prefix = limit_counters(7, b"u1", "flash");
        let a = limit_counter(&prefix, "item", "sku-1");
        let b = limit_counter(&prefix, "total", "");
        let old = |rule: &'static [u8], item: &'static [u8]| OldCount {
            user: b"u1",
            policy: b"flash",
            rule,
            item,
        };
        assert_eq!(parse_limit_counter(&a), Some(old(b"item", b"sku-1")));
        assert_eq!(parse_limit_counter(&b), Some(old(b"total", b"")));
        // A key cut short, or of another keyspace, is not a counter.
        assert_eq!(parse_limit_counter(&a[..prefix.len() + 1]), None);
        assert_eq!(parse_limit_counter(&prefix), None);
        assert_eq!(parse_limit_counter(&limit_book(7, b"u1", b"flash")), None);
        // Books of another user or policy are other keys.
        assert_ne!(
            limit_book(7, b"u1", b"flash"),
            limit_book(7, b"u1", b"flash2")
        );
        assert_ne!(
            limit_book(7, b"u1", b"flash"),
            limit_book(7, b"u12", b"flash")
        );
    }
}
