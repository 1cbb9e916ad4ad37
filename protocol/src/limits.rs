//! Input limits, in one place. Decoders enforce these before allocating; the
//! daemon may configure tighter ones (never looser). PROTOCOL.md and the README
//! list the same numbers; a test in `tests/golden.rs` keeps the document honest.

/// Most shards a node runs (and a SHARDS answer may list).
pub const MAX_SHARDS: usize = 1024;
/// Default largest frame (bytes after the length prefix) a daemon accepts.
pub const DEFAULT_MAX_FRAME: usize = 4 << 20;
/// Hard ceiling for `max_frame` in any configuration.
pub const MAX_FRAME_CEILING: usize = 64 << 20;
/// Largest key (KV keys, owners, users, aliases, senders).
pub const MAX_KEY: usize = 1024;
/// Largest stored value (SET value, one hash field value).
pub const MAX_VALUE: usize = 1 << 20;
/// Largest hash field name.
pub const MAX_FIELD: usize = 1024;
/// Most fields one hash may hold (hashes are stored as one value).
pub const MAX_HASH_FIELDS: usize = 10_000;
/// Most fields one HSET/HDEL may name.
pub const MAX_FIELDS_PER_REQUEST: usize = 1_000;
/// Most operations in one BATCH.
pub const MAX_BATCH_OPS: usize = 1_000;
/// Longest short-link target URL.
pub const MAX_URL: usize = 4096;
/// Most URLs in one batch shorten.
pub const MAX_SHORTEN_BATCH: usize = 1_000;
/// Longest short-link code or alias.
pub const MAX_CODE: usize = 64;
/// Most items in one purchase order.
pub const MAX_ORDER_ITEMS: usize = 100;
/// Longest policy name, order id or item id.
pub const MAX_ID: usize = 256;
/// Most records one catalog owner may hold.
pub const MAX_RECORDS_PER_OWNER: usize = 1_000;
/// Most attributes on one catalog record.
pub const MAX_ATTRIBUTES: usize = 64;
/// Longest attribute name or value.
pub const MAX_ATTRIBUTE: usize = 4096;
/// Largest catalog record, encoded (id, attributes, validity).
pub const MAX_RECORD_BYTES: usize = 64 << 10;
/// Largest record set of one catalog owner, encoded: an owner's records are
/// stored and cached as one value and answered in one frame.
pub const MAX_OWNER_BYTES: usize = 1 << 20;
/// Longest catalog alias kind ("name", "account", …).
pub const MAX_ALIAS_KIND: usize = 64;
/// Most owners one CATALOG_WARM names.
pub const MAX_WARM_OWNERS: usize = 10_000;
/// Most shares in one red envelope (protocol ceiling; config sets the real cap).
pub const MAX_ENVELOPE_COUNT: u32 = 100_000;
/// Longest envelope user or sender name (longer is BAD_REQUEST).
pub const MAX_ENVELOPE_USER: usize = 256;
/// Most refunds one ENVELOPE_REFUNDS page may ask for.
pub const MAX_REFUNDS_PAGE: usize = 10_000;
/// Most problems an ENVELOPE_AUDIT answer describes (all are counted).
pub const MAX_AUDIT_PROBLEMS: usize = 1_000;
/// Most key/value pairs in one MIGRATE_IMPORT chunk.
pub const MAX_MIGRATE_PAIRS: usize = 100_000;
/// Longest storage key a MIGRATE_IMPORT may carry (slot, keyspace and the
/// parts of the longest keys the services build).
pub const MAX_RAW_KEY: usize = 8192;
/// Longest free-form text (client names, messages, tokens).
pub const MAX_TEXT: usize = 4096;
/// Most entries a list-style reply (refunds, info rows) carries in one frame.
pub const MAX_LIST: usize = 100_000;

// ── purchase limits ───────────────────────────────────────────────────────
// Arguments of the purchase-limit requests over these limits are answered
// BAD_REQUEST (not TOO_LARGE): an order with 500 items or a 300-byte order id
// is an invalid order, and the contract names one code for every
// invalid order. The checks still run before anything is allocated.

/// Longest policy or rule name. Names are limited to `[A-Za-z0-9_.-]` because
/// they become metric labels.
pub const MAX_POLICY_NAME: usize = 64;
/// Most rules in one policy.
pub const MAX_POLICY_RULES: usize = 16;
/// Most policies a node holds (config and run-time together). Bounds the
/// label cardinality of the limit metrics.
pub const MAX_POLICIES: usize = 256;
/// Largest quantity of one item in one order.
pub const MAX_ORDER_QTY: u64 = 1_000_000;
/// Longest fixed or sliding window (400 days).
pub const MAX_WINDOW_SECS: u64 = 400 * 86_400;
/// Most sub-buckets of a sliding window (bounds a counter's stored size).
pub const MAX_SLIDING_BUCKETS: u32 = 1_000;
/// Longest time zone name in a daily window.
pub const MAX_TIME_ZONE: usize = 64;
/// Most per-item entries one LIMIT_STATUS answer lists.
pub const MAX_STATUS_ENTRIES: usize = 1_000;
