//! Every storage key, in one module (STYLE 4): the column families, the
//! keyspaces, the value kinds, the ID sequence kinds and the meta records —
//! one table each, here — and the functions that build and parse keys (each
//! service's in its own file under `keys/`).
//!
//! Shard column families: `slot: u16 BE | keyspace: u8 | rest`. The slot comes
//! first so one slot's data is one contiguous range (migration, audits,
//! rebalancing); integers are big-endian so byte order is numeric order.
//! The meta column family holds node-wide records under fixed names.
//!
//! Every byte in these tables is on disk: changing one orphans existing
//! data. Each service owns one range in the keyspace, value kind and
//! sequence tables alike ([`SERVICES`]); the tests check that no two
//! services' keys can overlap and that every value kind decodes.

pub mod envelope;

mod catalog;
mod limits;
mod links;

pub use catalog::*;
pub use limits::*;
pub use links::*;

/// Declares a table of named bytes: the constants, and `ALL`, every one of
/// them with its name, so the tests walk the whole table (an entry can't be
/// left out of it).
macro_rules! byte_table {
    (
        $(#[$doc:meta])* $name:ident { $($(#[$entry_doc:meta])* $c:ident = $v:literal,)* }
        $($extra:item)*
    ) => {
        $(#[$doc])*
        pub mod $name {
            $($(#[$entry_doc])* pub const $c: u8 = $v;)*
            $($extra)*

            /// Every entry and its name, in the order declared.
            pub const ALL: &[(&str, u8)] = &[$((stringify!($c), $c)),*];
        }
    };
}

/// Which service owns which range of the keyspace, value kind and sequence
/// kind tables: the high nibble names the service.
pub const SERVICES: &[(&str, std::ops::RangeInclusive<u8>)] = &[
    ("core", 0x01..=0x0f),
    ("short links", 0x10..=0x1f),
    ("purchase limits", 0x20..=0x2f),
    ("catalog", 0x30..=0x3f),
    ("red envelopes", 0x40..=0x4f),
];

/// Column families: RocksDB's default, `meta`, and one per shard.
pub mod cf {
    /// RocksDB's own, always present; Rush writes nothing to it.
    pub const DEFAULT: &str = "default";
    /// Node-wide records under fixed names ([`super::meta`]).
    pub const META: &str = "meta";
    /// Shard `i`'s column family is `shard-{i}`; its keys are laid out as
    /// the module doc says.
    pub const SHARD_PREFIX: &str = "shard-";

    /// The column family of shard `i`.
    pub fn shard(i: usize) -> String {
        format!("{SHARD_PREFIX}{i}")
    }

    /// The shard a column family name belongs to, if it is a shard's.
    pub fn parse_shard(name: &str) -> Option<usize> {
        name.strip_prefix(SHARD_PREFIX)?.parse().ok()
    }
}

byte_table! {
    /// Keyspace bytes: the third byte of every shard key. Each service owns
    /// its own ([`SERVICES`]); values never mix across them.
    ks {
        /// Generic keys: strings and hashes (GET/SET/HSET…). A hash's value
        /// here is its header (`kind::HASH_HEAD`); its fields are in
        /// `HASH_FIELD`.
        KV = 0x01,
        /// ID segment high-water marks: `kind: u8` ([`super::seq`]) → `u64`
        /// (see `segments`).
        SEQUENCE = 0x02,
        /// One value per hash field: `part(key) | u64 version | field` (see
        /// [`super::hash_field`]). The header under the key is the truth: a
        /// field whose header is gone, expired or of another version is
        /// dead, and the compaction filter drops it (`storage::ttl`).
        HASH_FIELD = 0x03,

        // ── short links (0x10–0x1f) ─────────────────────────────────────
        /// Links by code: `u8 code length | code` → link record. Aliases and
        /// generated codes share this keyspace, so a code string names at
        /// most one link. The length comes first so the codes of one length
        /// in a slot are one range, in index order (base62 digits sort like
        /// their values): recycling scans it.
        LINK = 0x10,
        /// Reuse index: `u16 len | account | url` → code.
        LINK_REUSE = 0x11,
        /// Generated-code indices taken by aliases of that shape:
        /// `u8 length | u64 index` → alias.
        LINK_RESERVED = 0x12,
        /// Visit statistics: `code` → totals and per-day counts.
        LINK_STATS = 0x13,
        /// The code-scrambling key this slot's codes were issued with, when
        /// it is not the node's own: written into a slot's data when the slot
        /// moves to another node, so the new owner keeps the permutation (see
        /// `links::issue`). Just the slot and keyspace; no further key.
        LINK_CODE_KEY = 0x14,

        // ── purchase limits (0x20–0x2f) ─────────────────────────────────
        /// The layout before books, one count per key: `part(user) |
        /// part(policy) | part(rule) | item` (item empty for a total rule).
        /// Nothing writes it now; what a data directory or an imported slot
        /// still holds is folded into books (`limits::legacy`).
        LIMIT_COUNTER = 0x20,
        /// One order's record (idempotency, release): `part(user) |
        /// part(policy) | order id`. See `limits::order`.
        LIMIT_ORDER = 0x21,
        /// All of a user's counts under one policy: `part(user) |
        /// part(policy)`. See `limits::book`.
        LIMIT_BOOK = 0x22,

        // ── catalog (0x30–0x3f) ─────────────────────────────────────────
        /// An owner's whole record set, `owner` (to the end) → records.
        CATALOG_RECORDS = 0x30,
        /// `kind` (part), `alias` (to the end) → owner. Adjacent to
        /// `CATALOG_RECORDS` so one scan per slot covers both.
        CATALOG_ALIAS = 0x31,

        // ── red envelopes (0x40–0x4f) ───────────────────────────────────
        /// Red envelopes and their grabs, by creation day: see
        /// [`super::envelope`].
        ENVELOPE = 0x40,
        /// The refund stream (refunds not yet acknowledged), by stream
        /// position.
        ENVELOPE_REFUND = 0x41,
        /// Open envelopes by expiry: what the refund timer must look at.
        ENVELOPE_PENDING = 0x42,
        /// Per slot and calendar day: the first envelope id of that day.
        ENVELOPE_DAY = 0x43,
        /// Create idempotency keys: (sender, key) → envelope id.
        ENVELOPE_IDEMPOTENCY = 0x44,
    }
}

/// Value kinds: the first byte of every stored value (the header, see
/// `storage::value`). A read of the wrong kind is WRONG_TYPE (generic keys)
/// or a corruption (service keyspaces).
///
/// A kind and the keyspace it is stored in are two bytes, both on disk. For
/// links, limits and the catalog they are the same number. Red envelopes
/// have one more kind than keyspaces (a grab is stored in the `ENVELOPE`
/// keyspace, behind its envelope, under a kind of its own), so from
/// `ENVELOPE_REFUND` on an envelope kind is its keyspace plus one; [`kind::ALL`]
/// names each kind's keyspace.
pub mod kind {
    use super::ks;

    pub const STRING: u8 = 0x01;
    /// A whole hash in one value, the layout before per-field storage
    /// (`value::decode_hash`). Nothing writes it now: one is read as it is,
    /// and stored field by field on its first write (`kv::hash`).
    pub const HASH: u8 = 0x02;
    /// An ID sequence's high-water mark (`u64`).
    pub const SEQUENCE: u8 = 0x03;
    /// A hash's header: `u64 version | u32 fields | u64 bytes` (see
    /// `kv::hash`); the header's expiry is the hash's.
    pub const HASH_HEAD: u8 = 0x04;
    /// One field's value (no expiry: it lives as long as its header).
    pub const HASH_FIELD: u8 = 0x05;

    // Short links (see `links::record`).
    /// A link record; the header's expiry is the link's.
    pub const LINK: u8 = 0x10;
    /// A reuse index entry (the code); expires with its link.
    pub const LINK_REUSE: u8 = 0x11;
    /// A generated-code index reserved by an alias (the alias); no expiry.
    pub const LINK_RESERVED: u8 = 0x12;
    /// A link's visit statistics; expires with its link.
    pub const LINK_STATS: u8 = 0x13;
    /// A moved slot's code-scrambling key (16 bytes); no expiry.
    pub const LINK_CODE_KEY: u8 = 0x14;

    /// A purchase-limit count of the layout before books (see
    /// `limits::counter`).
    pub const LIMIT_COUNTER: u8 = 0x20;
    /// A purchase-limit order record (see `limits::order`).
    pub const LIMIT_ORDER: u8 = 0x21;
    /// A user's counts under one policy (see `limits::book`).
    pub const LIMIT_BOOK: u8 = 0x22;

    /// A catalog owner's record set (see `catalog::stored`).
    pub const CATALOG_RECORDS: u8 = 0x30;
    /// A catalog alias: the owner's bytes.
    pub const CATALOG_ALIAS: u8 = 0x31;

    /// A red envelope's books (see `envelopes::record`).
    pub const ENVELOPE: u8 = 0x40;
    /// One grab of an envelope (in the `ENVELOPE` keyspace).
    pub const ENVELOPE_GRAB: u8 = 0x41;
    /// One refund in the refund stream.
    pub const ENVELOPE_REFUND: u8 = 0x42;
    /// An open envelope's expiry entry (payload: remaining cents).
    pub const ENVELOPE_PENDING: u8 = 0x43;
    /// The first envelope id of a slot's calendar day.
    pub const ENVELOPE_DAY: u8 = 0x44;
    /// A create idempotency key's envelope and arguments.
    pub const ENVELOPE_IDEMPOTENCY: u8 = 0x45;

    /// Every value kind: its name, its byte, and the keyspace its values are
    /// stored in.
    pub const ALL: &[(&str, u8, u8)] = &[
        ("STRING", STRING, ks::KV),
        ("HASH", HASH, ks::KV),
        ("SEQUENCE", SEQUENCE, ks::SEQUENCE),
        ("HASH_HEAD", HASH_HEAD, ks::KV),
        ("HASH_FIELD", HASH_FIELD, ks::HASH_FIELD),
        ("LINK", LINK, ks::LINK),
        ("LINK_REUSE", LINK_REUSE, ks::LINK_REUSE),
        ("LINK_RESERVED", LINK_RESERVED, ks::LINK_RESERVED),
        ("LINK_STATS", LINK_STATS, ks::LINK_STATS),
        ("LINK_CODE_KEY", LINK_CODE_KEY, ks::LINK_CODE_KEY),
        ("LIMIT_COUNTER", LIMIT_COUNTER, ks::LIMIT_COUNTER),
        ("LIMIT_ORDER", LIMIT_ORDER, ks::LIMIT_ORDER),
        ("LIMIT_BOOK", LIMIT_BOOK, ks::LIMIT_BOOK),
        ("CATALOG_RECORDS", CATALOG_RECORDS, ks::CATALOG_RECORDS),
        ("CATALOG_ALIAS", CATALOG_ALIAS, ks::CATALOG_ALIAS),
        ("ENVELOPE", ENVELOPE, ks::ENVELOPE),
        ("ENVELOPE_GRAB", ENVELOPE_GRAB, ks::ENVELOPE),
        ("ENVELOPE_REFUND", ENVELOPE_REFUND, ks::ENVELOPE_REFUND),
        ("ENVELOPE_PENDING", ENVELOPE_PENDING, ks::ENVELOPE_PENDING),
        ("ENVELOPE_DAY", ENVELOPE_DAY, ks::ENVELOPE_DAY),
        (
            "ENVELOPE_IDEMPOTENCY",
            ENVELOPE_IDEMPOTENCY,
            ks::ENVELOPE_IDEMPOTENCY,
        ),
    ];

    /// The name of a value kind, `None` for a byte that is none.
    pub fn name(kind: u8) -> Option<&'static str> {
        ALL.iter().find(|k| k.1 == kind).map(|k| k.0)
    }
}

byte_table! {
    /// ID sequence kinds: which sequence of a slot a high-water mark under
    /// [`sequence`] belongs to (see `segments`).
    seq {
        /// Generated short codes of 5 characters (`links::issue`); 6, 7 and
        /// 8 follow: see [`link_code`].
        LINK_CODE_5 = 0x15,
        LINK_CODE_6 = 0x16,
        LINK_CODE_7 = 0x17,
        LINK_CODE_8 = 0x18,
        /// Envelope ids (`envelopes::create`).
        ENVELOPE_ID = 0x40,
    }

    /// The sequence of generated short codes of `len` characters (5 to 8).
    pub const fn link_code(len: u8) -> u8 {
        LINK_CODE_5 - 5 + len
    }
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

    /// Prefix of the imports in progress on this node (the target), one per
    /// slot: `cluster/import/{slot}`.
    pub const CLUSTER_IMPORT: &str = "cluster/import/";
    /// Prefix of the last import of each slot that committed on this node:
    /// `cluster/imported/{slot}`.
    pub const CLUSTER_IMPORTED: &str = "cluster/imported/";

    /// An import of `slot` in progress on this node (the target).
    pub fn cluster_import(slot: u16) -> Vec<u8> {
        format!("{CLUSTER_IMPORT}{slot}").into_bytes()
    }

    /// The last import of `slot` that committed on this node.
    pub fn cluster_imported(slot: u16) -> Vec<u8> {
        format!("{CLUSTER_IMPORTED}{slot}").into_bytes()
    }

    /// Prefix of the last shard-log record each shard's column family holds
    /// (`shard-log/N`, `u64` BE): records after it are replayed at open
    /// (see `storage::log`).
    pub const SHARD_LOG: &str = "shard-log/";

    pub fn shard_log(shard: usize) -> Vec<u8> {
        format!("{SHARD_LOG}{shard}").into_bytes()
    }

    /// A replica's progress (see `replication::follow`): the primary's run,
    /// whether its bootstrap finished, the node records' version and each
    /// shard's last applied record. Written with every applied batch.
    pub const REPLICATION_STATE: &[u8] = b"replication/state";
    /// Set (unix ms) when a replica was promoted: it is a primary from then
    /// on, whatever `replication.replica_of` says.
    pub const REPLICATION_PROMOTED: &[u8] = b"replication/promoted";

    /// The node records a replica copies from its primary (names, or
    /// prefixes of families of names): what its data needs to be served the
    /// same way after a promotion. The rest (layout, node id, cluster map,
    /// shard logs, its own replication state) is each node's own.
    pub const REPLICATED: &[&[u8]] = &[
        LINK_CODE_KEY,
        LIMIT_POLICIES,
        ENVELOPE_REFUND_FLOOR.as_bytes(),
    ];

    /// Every fixed record name and every prefix of a family of names.
    pub const ALL: &[&[u8]] = &[
        LAYOUT,
        NODE_ID,
        LIMIT_POLICIES,
        ENVELOPE_REFUND_FLOOR.as_bytes(),
        LINK_CODE_KEY,
        CLUSTER_MAP,
        CLUSTER_MIGRATION,
        CLUSTER_IMPORT.as_bytes(),
        CLUSTER_IMPORTED.as_bytes(),
        SHARD_LOG.as_bytes(),
        REPLICATION_STATE,
        REPLICATION_PROMOTED,
    ];
}

/// A key under construction: slot, keyspace, then parts.
#[derive(Debug, Clone)]
pub struct KeyBuf(Vec<u8>);

impl KeyBuf {
    pub fn new(slot: u16, keyspace: u8) -> Self {
        let mut v = Vec::with_capacity(32);
        v.extend_from_slice(&slot_prefix(slot));
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

/// Bytes before a key's own parts: the slot and the keyspace.
pub const PREFIX_LEN: usize = 3;

/// Keys up to this long are held without a heap allocation: kv keys of up
/// to 29 bytes (slot and keyspace come first), link codes and limit
/// counters.
pub const INLINE_KEY: usize = 32;

/// A storage key, inline when short ([`INLINE_KEY`]): what a request
/// writes ([`crate::shard::txn::Txn::put`]) and what the row cache holds,
/// so that an INCR or a SET of a short key allocates nothing for its key
/// (bench/results/NOTES.md).
pub type Key = smallvec::SmallVec<[u8; INLINE_KEY]>;

/// A shard key taken apart: its slot, its keyspace and the rest; `None`
/// for anything shorter than a slot and a keyspace.
pub fn split(raw: &[u8]) -> Option<(u16, u8, &[u8])> {
    match raw {
        [a, b, keyspace, rest @ ..] => Some((u16::from_be_bytes([*a, *b]), *keyspace, rest)),
        _ => None,
    }
}

/// What follows the slot and keyspace of a key in keyspace `keyspace`.
fn rest_in(raw: &[u8], keyspace: u8) -> Option<&[u8]> {
    split(raw).and_then(|(_, ks, rest)| (ks == keyspace).then_some(rest))
}

/// A `u16`-length-prefixed part at the front of `raw`, and what follows it.
fn take_part(raw: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = raw.split_first_chunk::<2>()?;
    let len = u16::from_be_bytes(*len) as usize;
    (rest.len() >= len).then(|| rest.split_at(len))
}

/// The first two bytes of every key of `slot`.
pub fn slot_prefix(slot: u16) -> [u8; 2] {
    slot.to_be_bytes()
}

/// The slot a storage key belongs to.
pub fn slot_of(raw: &[u8]) -> Option<u16> {
    raw.first_chunk::<2>().map(|s| u16::from_be_bytes(*s))
}

/// The slot a range bound falls in: its slot if it has one; a one-byte
/// bound is the start of the slot that byte begins; an empty one, slot 0.
pub fn slot_of_bound(bound: &[u8]) -> u32 {
    match bound {
        [a, b, ..] => u32::from(u16::from_be_bytes([*a, *b])),
        [a] => u32::from(*a) << 8,
        [] => 0,
    }
}

/// `[start, end)` covering every key of `slot`.
pub fn slot_range(slot: u16) -> (Vec<u8>, Vec<u8>) {
    let start = slot_prefix(slot).to_vec();
    let end = match slot.checked_add(1) {
        Some(next) => slot_prefix(next).to_vec(),
        None => vec![0xff, 0xff, 0xff],
    };
    (start, end)
}

/// Keys written once and seldom read back: an order's record is read
/// only by a replay or a release of that order. The row cache keeps such a
/// write as one of its oldest rows, the first to go once it has landed,
/// so that records don't push out rows that are read (a hot user's book).
pub fn written_cold(key: &[u8]) -> bool {
    key.get(PREFIX_LEN - 1) == Some(&ks::LIMIT_ORDER)
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

// ── core ────────────────────────────────────────────────────────────────

/// A generic key's storage key.
pub fn kv(slot: u16, key: &[u8]) -> Key {
    let mut out = Key::from_slice(&kv_prefix(slot));
    out.extend_from_slice(key);
    out
}

/// [`kv`] written into `out` (emptied first).
pub fn kv_into(out: &mut Vec<u8>, slot: u16, key: &[u8]) {
    out.clear();
    out.extend_from_slice(&kv_prefix(slot));
    out.extend_from_slice(key);
}

/// What every generic key of `slot` starts with: the one place its layout
/// is spelled out.
fn kv_prefix(slot: u16) -> [u8; PREFIX_LEN] {
    let [a, b] = slot_prefix(slot);
    [a, b, ks::KV]
}

/// The storage key of field `field` of version `version` of the hash at
/// `key` (the version is in the hash's header: a new hash on the same key
/// gets a new one, so the fields of an old one never show through).
pub fn hash_field(slot: u16, key: &[u8], version: u64, field: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::HASH_FIELD)
        .part(key)
        .u64(version)
        .tail(field)
        .build()
}

/// `[start, end)` covering every field of one version of the hash at `key`,
/// in field order.
pub fn hash_fields(slot: u16, key: &[u8], version: u64) -> (Vec<u8>, Vec<u8>) {
    let start = KeyBuf::new(slot, ks::HASH_FIELD)
        .part(key)
        .u64(version)
        .build();
    let end = prefix_end(&start);
    (start, end)
}

/// A hash field's storage key taken apart: the slot, the hash's key, the
/// version and the field.
pub fn parse_hash_field(raw: &[u8]) -> Option<(u16, &[u8], u64, &[u8])> {
    let slot = slot_of(raw)?;
    let (key, rest) = take_part(rest_in(raw, ks::HASH_FIELD)?)?;
    let (version, field) = rest.split_first_chunk::<8>()?;
    Some((slot, key, u64::from_be_bytes(*version), field))
}

/// The high-water mark of one ID sequence of a slot.
pub fn sequence(slot: u16, kind: u8) -> Vec<u8> {
    KeyBuf::new(slot, ks::SEQUENCE).u8(kind).build()
}

#[cfg(test)]
mod tests;
