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
}

/// Meta column family record names.
pub mod meta {
    /// The data directory's layout: format and shard count.
    pub const LAYOUT: &[u8] = b"layout";
    /// This node's id.
    pub const NODE_ID: &[u8] = b"node-id";
    /// The 128-bit key of the short-code scrambler. Generated on first start
    /// and never changed: the scrambler must map every slot's sequence the
    /// same way for the life of the data, or new codes could repeat old ones.
    pub const LINK_CODE_KEY: &[u8] = b"links-code-key";
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
