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
    /// Sequence kinds: 0x15–0x18 short codes of 5–8 characters.
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
    /// Red envelopes and their grabs, by creation day: see [`super::envelope`].
    pub const ENVELOPE: u8 = 0x40;
    /// The refund stream (refunds not yet acknowledged), by stream position.
    pub const ENVELOPE_REFUND: u8 = 0x41;
    /// Open envelopes by expiry: what the refund timer must look at.
    pub const ENVELOPE_PENDING: u8 = 0x42;
    /// Per slot and calendar day: the first envelope id of that day.
    pub const ENVELOPE_DAY: u8 = 0x43;
    /// Create idempotency keys: (sender, key) → envelope id.
    pub const ENVELOPE_IDEMPOTENCY: u8 = 0x44;
    // ── short links (0x10–0x1f) ─────────────────────────────────────────
    /// Links by code: `u8 code length | code` → link record. Aliases and
    /// generated codes share this keyspace, so a code string names at most
    /// one link. The length comes first so the codes of one length in a slot
    /// are one range, in index order (base62 digits sort like their values):
    /// recycling scans it.
    pub const LINK: u8 = 0x10;
    /// Reuse index: `u16 len | account | url` → code.
    pub const LINK_REUSE: u8 = 0x11;
    /// Generated-code indices taken by aliases of that shape:
    /// `u8 length | u64 index` → alias.
    pub const LINK_RESERVED: u8 = 0x12;
    /// Visit statistics: `code` → totals and per-day counts.
    pub const LINK_STATS: u8 = 0x13;
    /// The code-scrambling key this slot's codes were issued with, when it
    /// is not the node's own: written into a slot's data when the slot moves
    /// to another node, so the new owner keeps the permutation (see
    /// `links::issue`). Just the slot and keyspace; no further key.
    pub const LINK_CODE_KEY: u8 = 0x14;
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

    /// Prefix of the refund-stream stamp floor promised by shard N
    /// (`envelope-refund-floor/N`, `u64`): no refund is ever stamped below
    /// the highest of these, even if the wall clock steps back across a
    /// restart (see `envelopes::refunds`).
    pub const ENVELOPE_REFUND_FLOOR: &str = "envelope-refund-floor/";

    pub fn envelope_refund_floor(shard: usize) -> Vec<u8> {
        format!("{ENVELOPE_REFUND_FLOOR}{shard}").into_bytes()
    }
    /// The 128-bit key of the short-code scrambler. Generated on first start
    /// and never changed: the scrambler must map every slot's sequence the
    /// same way for the life of the data, or new codes could repeat old ones.
    pub const LINK_CODE_KEY: &[u8] = b"links-code-key";

    /// The cluster map this node accepted last (see `cluster::store`).
    pub const CLUSTER_MAP: &[u8] = b"cluster/map";
    /// The slot move this node is coordinating, while one is in progress.
    pub const CLUSTER_MIGRATION: &[u8] = b"cluster/migration";

    /// An import of `slot` in progress on this node (the target).
    pub fn cluster_import(slot: u16) -> Vec<u8> {
        format!("cluster/import/{slot}").into_bytes()
    }

    /// The last import of `slot` that committed on this node.
    pub fn cluster_imported(slot: u16) -> Vec<u8> {
        format!("cluster/imported/{slot}").into_bytes()
    }
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

// ── red envelopes ─────────────────────────────────────────────────────────
//
// Keys ordered (slot, day of month, id): one slot's envelopes of one day of
// month are one key range, and an envelope's grabs sit right behind it, so a
// load or an audit reads an envelope and its grabs in one forward scan.
// Within (slot, day) ids grow with creation time (they come from the slot's
// sequence), so the days of two months that share a day of month are two
// consecutive id ranges: retention cuts them apart at the first id of the
// later day (see `ENVELOPE_DAY`).
pub mod envelope {
    use super::{ks, slot_range, KeyBuf};

    /// After the id: the envelope record itself.
    pub const RECORD: u8 = 0x00;
    /// After the id: a grab, followed by the user.
    pub const GRAB: u8 = 0x01;

    /// `slot | ENVELOPE | day | id | RECORD`
    pub fn record(slot: u16, day: u8, id: u64) -> Vec<u8> {
        KeyBuf::new(slot, ks::ENVELOPE)
            .u8(day)
            .u64(id)
            .u8(RECORD)
            .build()
    }

    /// `slot | ENVELOPE | day | id | GRAB | user`
    pub fn grab(slot: u16, day: u8, id: u64, user: &[u8]) -> Vec<u8> {
        KeyBuf::new(slot, ks::ENVELOPE)
            .u8(day)
            .u64(id)
            .u8(GRAB)
            .tail(user)
            .build()
    }

    /// Bytes before the user in a grab key.
    pub const GRAB_USER_OFFSET: usize = 2 + 1 + 1 + 8 + 1;

    /// `[start, end)` of one envelope: its record, then its grabs.
    pub fn envelope_range(slot: u16, day: u8, id: u64) -> (Vec<u8>, Vec<u8>) {
        let start = KeyBuf::new(slot, ks::ENVELOPE).u8(day).u64(id).build();
        let end = match id.checked_add(1) {
            Some(next) => KeyBuf::new(slot, ks::ENVELOPE).u8(day).u64(next).build(),
            None => day_id_end(slot, day),
        };
        (start, end)
    }

    /// Where envelope `id` of `day` starts: everything of the day with a
    /// smaller id sorts before it.
    pub fn day_from_id(slot: u16, day: u8, id: u64) -> Vec<u8> {
        KeyBuf::new(slot, ks::ENVELOPE).u8(day).u64(id).build()
    }

    /// The start of `day`'s range in `slot`.
    pub fn day_start(slot: u16, day: u8) -> Vec<u8> {
        KeyBuf::new(slot, ks::ENVELOPE).u8(day).build()
    }

    /// The end (exclusive) of `day`'s range in `slot`.
    pub fn day_id_end(slot: u16, day: u8) -> Vec<u8> {
        match day.checked_add(1) {
            Some(next) => KeyBuf::new(slot, ks::ENVELOPE).u8(next).build(),
            None => KeyBuf::new(slot, ks::ENVELOPE + 1).build(),
        }
    }

    /// `slot | ENVELOPE_REFUND | stamp | id`: one unacknowledged refund.
    pub fn refund(slot: u16, stamp: u64, id: u64) -> Vec<u8> {
        KeyBuf::new(slot, ks::ENVELOPE_REFUND)
            .u64(stamp)
            .u64(id)
            .build()
    }

    /// `(stamp, id)` of a refund key.
    pub fn parse_refund(raw: &[u8]) -> Option<(u64, u64)> {
        let rest = raw.get(3..)?;
        (rest.len() == 16).then(|| {
            (
                u64::from_be_bytes(rest[..8].try_into().expect("8 bytes")),
                u64::from_be_bytes(rest[8..].try_into().expect("8 bytes")),
            )
        })
    }

    /// `slot | ENVELOPE_PENDING | expires_at | id`: an open envelope.
    pub fn pending(slot: u16, expires_at: u64, id: u64) -> Vec<u8> {
        KeyBuf::new(slot, ks::ENVELOPE_PENDING)
            .u64(expires_at)
            .u64(id)
            .build()
    }

    /// `(expires_at, id)` of a pending key.
    pub fn parse_pending(raw: &[u8]) -> Option<(u64, u64)> {
        parse_refund(raw)
    }

    /// `slot | ENVELOPE_DAY | days since the epoch (u32)`.
    pub fn day_marker(slot: u16, epoch_day: u32) -> Vec<u8> {
        KeyBuf::new(slot, ks::ENVELOPE_DAY)
            .tail(&epoch_day.to_be_bytes())
            .build()
    }

    pub fn parse_day_marker(raw: &[u8]) -> Option<u32> {
        let rest = raw.get(3..)?;
        (rest.len() == 4).then(|| u32::from_be_bytes(rest.try_into().expect("4 bytes")))
    }

    /// `slot | ENVELOPE_IDEMPOTENCY | sender (u16 length) | key`
    pub fn idempotency(slot: u16, sender: &[u8], key: &[u8]) -> Vec<u8> {
        KeyBuf::new(slot, ks::ENVELOPE_IDEMPOTENCY)
            .part(sender)
            .tail(key)
            .build()
    }

    /// Every envelope key of `slot`, all keyspaces (tests, migration).
    pub fn everything(slot: u16) -> (Vec<u8>, Vec<u8>) {
        let (start, _) = super::keyspace_range(slot, ks::ENVELOPE);
        let (_, end) = super::keyspace_range(slot, ks::ENVELOPE_IDEMPOTENCY);
        debug_assert!(end <= slot_range(slot).1);
        (start, end)
    }
}

// ── short links ─────────────────────────────────────────────────────────

/// A link (generated code or alias) by its code.
pub fn link(slot: u16, code: &[u8]) -> Vec<u8> {
    debug_assert!(code.len() <= u8::MAX as usize);
    KeyBuf::new(slot, ks::LINK)
        .u8(code.len() as u8)
        .tail(code)
        .build()
}

/// The code inside a [`link`] key.
pub fn link_code(raw: &[u8]) -> Option<&[u8]> {
    (raw.len() >= 4 && raw[2] == ks::LINK).then(|| &raw[4..])
}

/// `[start, end)` covering the links of one code length in a slot.
pub fn link_length_range(slot: u16, len: u8) -> (Vec<u8>, Vec<u8>) {
    (
        KeyBuf::new(slot, ks::LINK).u8(len).build(),
        KeyBuf::new(slot, ks::LINK).u8(len + 1).build(),
    )
}

/// The reuse index entry of (account, url).
pub fn link_reuse(slot: u16, account: &[u8], url: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::LINK_REUSE)
        .part(account)
        .tail(url)
        .build()
}

/// A generated-code index held by an alias of that shape.
pub fn link_reserved(slot: u16, len: u8, index: u64) -> Vec<u8> {
    KeyBuf::new(slot, ks::LINK_RESERVED)
        .u8(len)
        .u64(index)
        .build()
}

/// (length, index) of a [`link_reserved`] key.
pub fn link_reserved_parts(raw: &[u8]) -> Option<(u8, u64)> {
    if raw.len() != 12 || raw[2] != ks::LINK_RESERVED {
        return None;
    }
    Some((raw[3], u64::from_be_bytes(raw[4..12].try_into().ok()?)))
}

/// A link's visit statistics.
pub fn link_stats(slot: u16, code: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::LINK_STATS).tail(code).build()
}

/// The code key a moved slot's codes were issued with.
pub fn link_code_key(slot: u16) -> Vec<u8> {
    KeyBuf::new(slot, ks::LINK_CODE_KEY).build()
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
    fn envelope_keys_group_by_slot_day_then_id() {
        use envelope::*;
        let rec = record(7, 5, 1000);
        let g = grab(7, 5, 1000, b"zed");
        let next = record(7, 5, 1001);
        let (start, end) = envelope_range(7, 5, 1000);
        // An envelope's grabs follow its record, before the next envelope.
        assert!(start <= rec && rec < g && g < end && end <= next);
        assert_eq!(&g[GRAB_USER_OFFSET..], b"zed");
        // A day is one range; days of a slot in order; slots first.
        assert!(day_start(7, 5) <= rec && rec < day_id_end(7, 5));
        assert!(day_id_end(7, 5) <= day_start(7, 6));
        assert!(record(7, 31, u64::MAX) < day_id_end(7, 31));
        assert!(day_id_end(7, 31) <= refund(7, 0, 0));
        assert!(record(7, 31, 0) < record(8, 1, 0));
        // Cutting a day at an id splits older ids from newer ones.
        assert!(record(7, 5, 999) < day_from_id(7, 5, 1000));
        assert!(day_from_id(7, 5, 1000) <= record(7, 5, 1000));
        assert_eq!(parse_refund(&refund(3, 11, 22)), Some((11, 22)));
        assert_eq!(parse_pending(&pending(3, 11, 22)), Some((11, 22)));
        assert_eq!(parse_day_marker(&day_marker(3, 20_000)), Some(20_000));
        let (s, e) = everything(7);
        for k in [rec, refund(7, 1, 1), pending(7, 1, 1), day_marker(7, 1)] {
            assert!(s <= k && k < e);
        }
        assert!(idempotency(7, b"s", b"k") < e);
    }

    #[test]
    fn link_keys_group_by_length_in_code_order() {
        let (start, end) = link_length_range(9, 5);
        let a = link(9, b"0000A");
        let b = link(9, b"0000a");
        assert!(start <= a && a < b && b < end);
        assert!(link(9, b"zzzz") < start && link(9, b"000000") >= end);
        assert_eq!(link_code(&a), Some(&b"0000A"[..]));
        let r = link_reserved(9, 6, 1 << 33);
        assert_eq!(link_reserved_parts(&r), Some((6, 1 << 33)));
        assert_eq!(link_reserved_parts(&a), None);
    }
}
