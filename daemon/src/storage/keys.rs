//! Every storage key, in one module (STYLE 4).
//!
//! Shard column families: `slot: u16 BE | keyspace: u8 | rest`. The slot comes
//! first so one slot's data is one contiguous range (migration, audits,
//! rebalancing); integers are big-endian so byte order is numeric order.
//! The meta column family holds node-wide records under fixed names.

/// Keyspace bytes. Each service owns its own; values never mix across them.
/// Ranges: 0x01–0x0f core, 0x10–0x1f short links, 0x20–0x2f purchase limits,
/// 0x30–0x3f catalog, 0x40–0x4f red envelopes.
pub mod ks {
    /// Generic keys: strings and hashes (GET/SET/HSET…).
    pub const KV: u8 = 0x01;
    /// ID segment high-water marks: `kind: u8` → `u64` (see `segments`).
    pub const SEQUENCE: u8 = 0x02;

    // ── purchase limits (0x20–0x2f) ──────────────────────────────────────
    /// One count of one rule for one user: `part(user) | part(policy) |
    /// part(rule) | item` (item empty for a total rule). See `limits::counter`.
    pub const LIMIT_COUNTER: u8 = 0x20;
    /// One order's record (idempotency, release): `part(user) | part(policy)
    /// | order id`. See `limits::order`.
    pub const LIMIT_ORDER: u8 = 0x21;
    /// Catalog: an owner's whole record set, `owner` (to the end) → records.
    pub const CATALOG_RECORDS: u8 = 0x30;
    /// Catalog: `kind` (part), `alias` (to the end) → owner.
    /// Adjacent to `CATALOG_RECORDS` so one scan per slot covers both.
    pub const CATALOG_ALIAS: u8 = 0x31;
}

/// Meta column family record names.
pub mod meta {
    /// The data directory's layout: format and shard count.
    pub const LAYOUT: &[u8] = b"layout";
    /// This node's id.
    pub const NODE_ID: &[u8] = b"node-id";
    /// Purchase-limit policies set at run time (LIMIT_POLICY_SET): one
    /// record holding them all, see `limits::admin`.
    pub const LIMIT_POLICIES: &[u8] = b"limits/policies";
}

/// A key under construction: slot, keyspace, then parts.
#[derive(Debug, Clone)]
pub struct KeyBuf(Vec<u8>);

impl KeyBuf {
    pub fn new(slot: u16, keyspace: u8) -> Self {
        let mut v = Vec::with_capacity(32);
        v.extend_from_slice(&slot.to_be_bytes());
        v.push(keyspace);
        KeyBuf(v)
    }

    /// A part with a `u16` length in front, so parts can follow it.
    pub fn part(mut self, bytes: &[u8]) -> Self {
        debug_assert!(bytes.len() <= u16::MAX as usize);
        self.0
            .extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        self.0.extend_from_slice(bytes);
        self
    }

    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }

    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// The last part, without a length (it runs to the end of the key).
    pub fn tail(mut self, bytes: &[u8]) -> Self {
        self.0.extend_from_slice(bytes);
        self
    }

    pub fn build(self) -> Vec<u8> {
        self.0
    }
}

/// A generic key's storage key.
pub fn kv(slot: u16, key: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::KV).tail(key).build()
}

/// The high-water mark of one ID sequence of a slot.
pub fn sequence(slot: u16, kind: u8) -> Vec<u8> {
    KeyBuf::new(slot, ks::SEQUENCE).u8(kind).build()
}

// ── purchase limits ─────────────────────────────────────────────────────
// A user's counters and orders sit next to each other (user first), so one
// user's counts under one policy are one contiguous range (LIMIT_STATUS).

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
    let rest = raw.strip_prefix(prefix)?;
    let len = u16::from_be_bytes([*rest.first()?, *rest.get(1)?]) as usize;
    let rest = &rest[2..];
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// One order's record.
pub fn limit_order(slot: u16, user: &[u8], policy: &str, order_id: &str) -> Vec<u8> {
    KeyBuf::new(slot, ks::LIMIT_ORDER)
        .part(user)
        .part(policy.as_bytes())
        .tail(order_id.as_bytes())
        .build()
}

/// The first key after every key that starts with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff: nothing sorts after the prefix but longer 0xff runs.
    vec![0xff; prefix.len() + 1]
}

// ── catalog ────────────────────────────────────────────────────────────────

/// The record set of a catalog owner (in the owner's slot).
pub fn catalog_records(slot: u16, owner: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::CATALOG_RECORDS).tail(owner).build()
}

/// A catalog alias (in the alias's slot).
pub fn catalog_alias(slot: u16, kind: &[u8], alias: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::CATALOG_ALIAS)
        .part(kind)
        .tail(alias)
        .build()
}

/// What a catalog storage key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogKey<'a> {
    Records { owner: &'a [u8] },
    Alias { kind: &'a [u8], alias: &'a [u8] },
}

/// Decode a catalog key (the inverse of [`catalog_records`] and
/// [`catalog_alias`]); `None` for any other key.
pub fn parse_catalog(raw: &[u8]) -> Option<CatalogKey<'_>> {
    let (&keyspace, rest) = raw.get(2..)?.split_first()?;
    match keyspace {
        ks::CATALOG_RECORDS => Some(CatalogKey::Records { owner: rest }),
        ks::CATALOG_ALIAS => {
            let len = u16::from_be_bytes([*rest.first()?, *rest.get(1)?]) as usize;
            let kind = rest.get(2..2 + len)?;
            Some(CatalogKey::Alias {
                kind,
                alias: &rest[2 + len..],
            })
        }
        _ => None,
    }
}

/// `[start, end)` covering a slot's catalog records and aliases.
pub fn catalog_range(slot: u16) -> (Vec<u8>, Vec<u8>) {
    let start = KeyBuf::new(slot, ks::CATALOG_RECORDS).build();
    let end = KeyBuf::new(slot, ks::CATALOG_ALIAS + 1).build();
    (start, end)
}

/// The slot a storage key belongs to.
pub fn slot_of(raw: &[u8]) -> Option<u16> {
    (raw.len() >= 2).then(|| u16::from_be_bytes([raw[0], raw[1]]))
}

/// `[start, end)` covering every key of `slot`.
pub fn slot_range(slot: u16) -> (Vec<u8>, Vec<u8>) {
    let start = slot.to_be_bytes().to_vec();
    let end = match slot.checked_add(1) {
        Some(next) => next.to_be_bytes().to_vec(),
        None => vec![0xff, 0xff, 0xff],
    };
    (start, end)
}

/// `[start, end)` covering one keyspace of one slot.
pub fn keyspace_range(slot: u16, keyspace: u8) -> (Vec<u8>, Vec<u8>) {
    let start = KeyBuf::new(slot, keyspace).build();
    let end = match keyspace.checked_add(1) {
        Some(next) => KeyBuf::new(slot, next).build(),
        None => slot_range(slot).1,
    };
    (start, end)
}

/// The shard that owns `slot` when a node runs `shards` shards: contiguous,
/// equal ranges, so a shard's slots are one key range of its column family.
pub fn shard_of_slot(slot: u16, shards: usize) -> usize {
    slot as usize * shards / rush_protocol::SLOTS as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use rush_protocol::SLOTS;

    #[test]
    fn slot_prefix_round_trips_and_orders() {
        let a = kv(5, b"zzz");
        let b = kv(6, b"aaa");
        assert!(a < b, "slot order comes before key order");
        assert_eq!(slot_of(&a), Some(5));
        let (start, end) = slot_range(5);
        assert!(start <= a && a < end && b >= end);
        let (start, end) = slot_range(SLOTS - 1);
        assert!(start <= kv(SLOTS - 1, &[0xff; 8]) && kv(SLOTS - 1, &[0xff; 8]) < end);
    }

    #[test]
    fn parts_do_not_run_together() {
        let x = KeyBuf::new(1, 9).part(b"ab").part(b"c").build();
        let y = KeyBuf::new(1, 9).part(b"a").part(b"bc").build();
        assert_ne!(x, y);
    }

    #[test]
    fn big_endian_integers_sort_numerically() {
        let k = |n| KeyBuf::new(1, 2).u64(n).build();
        assert!(k(255) < k(256) && k(256) < k(1 << 40));
    }

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
    }

    #[test]
    fn catalog_keys_round_trip_and_share_one_range() {
        let r = catalog_records(9, b"m1");
        let a = catalog_alias(9, b"name", b"Acme Ltd");
        assert_eq!(
            parse_catalog(&r),
            Some(CatalogKey::Records { owner: b"m1" })
        );
        assert_eq!(
            parse_catalog(&a),
            Some(CatalogKey::Alias {
                kind: b"name",
                alias: b"Acme Ltd"
            })
        );
        assert_eq!(parse_catalog(&kv(9, b"m1")), None);
        let (start, end) = catalog_range(9);
        assert!(start <= r && r < end && start <= a && a < end);
        assert!(catalog_records(8, &[0xff; 4]) < start && catalog_records(10, b"") >= end);
        assert!(parse_catalog(&[0, 9, ks::CATALOG_ALIAS, 0]).is_none());
    }

    #[test]
    fn shards_cover_all_slots_contiguously() {
        for shards in [1, 2, 3, 7, 16] {
            let mut last = 0;
            for slot in 0..SLOTS {
                let s = shard_of_slot(slot, shards);
                assert!(s == last || s == last + 1);
                last = s;
            }
            assert_eq!(last, shards - 1);
        }
    }
}
