//! The Rush wire protocol: frames, every request and reply body, typed error
//! codes and key → slot hashing. No runtime, no storage: clients in any setting
//! build on this crate alone. PROTOCOL.md documents the same bytes.
//!
//! Each request lives in its own file under [`cmd`] with its reply and wire
//! form; [`Request`], [`Reply`] and [`Opcode`] are generated from the one table
//! in this file.

// The decoders face untrusted bytes; safe Rust keeps a bad frame an error,
// never memory corruption (and lets the quick fuzz smoke run without ASan).
#![forbid(unsafe_code)]

pub mod cmd;
pub mod codec;
pub mod error;
pub mod frame;
pub mod limits;
pub mod resp;
pub mod slot;

pub use cmd::links::code::{link_slot, Code};
pub use codec::{DecodeError, Reader, Wire, WriteExt};
pub use error::{ErrorCode, ErrorDetail, LimitDenial, RushError};
pub use frame::{Frame, FrameError, Header};
pub use slot::{key_slot, parts_slot, SLOTS};

use bytes::{Bytes, BytesMut};

/// Where a request must run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// On the node, outside any shard (PING, HELLO, INFO, cluster map).
    Node,
    /// On the shard that owns this slot.
    Slot(u16),
    /// On every shard of the node (audits, clock control, compaction).
    AllShards,
}

/// Which part of the daemon serves an opcode: by range, so a new request
/// type lands in its service by its number alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// 0x00–0x0f: connection and node (answered outside shards).
    Node,
    /// 0x10–0x2f: generic keys.
    Kv,
    /// 0x30–0x3f: short links.
    Links,
    /// 0x40–0x4f: purchase limits.
    Limits,
    /// 0x50–0x5f: the catalog (Bloom-guarded lookups).
    Catalog,
    /// 0x60–0x6f: red envelopes.
    Envelopes,
    /// 0x70–0x7f: cluster map and slot migration.
    Cluster,
    /// 0xf0–0xff: admin and test support.
    Admin,
    /// Unassigned ranges.
    Reserved,
}

impl Opcode {
    pub fn service(self) -> Service {
        match self.as_u8() {
            0x00..=0x0f => Service::Node,
            0x10..=0x2f => Service::Kv,
            0x30..=0x3f => Service::Links,
            0x40..=0x4f => Service::Limits,
            0x50..=0x5f => Service::Catalog,
            0x60..=0x6f => Service::Envelopes,
            0x70..=0x7f => Service::Cluster,
            0xf0..=0xff => Service::Admin,
            _ => Service::Reserved,
        }
    }
}

/// A request type: its opcode, its reply type, whether a retry is harmless.
pub trait Command: Wire + Clone + Into<Request> {
    const OPCODE: Opcode;
    /// Safe to resend after a lost connection without changing the outcome.
    const IDEMPOTENT: bool;
    type Reply: Wire;

    /// Where this request runs. A request naming keys of different slots
    /// answers CROSSSLOT.
    fn target(&self) -> Result<Target, RushError>;
}

macro_rules! commands {
    ($($(#[$doc:meta])* $opcode:literal $name:literal => $variant:ident($ty:ty) -> $reply:ty, idempotent = $idem:literal;)*) => {
        /// One byte per request type; responses echo their request's opcode.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum Opcode {
            $($(#[$doc])* $variant = $opcode,)*
        }

        impl Opcode {
            pub const ALL: &'static [Opcode] = &[$(Opcode::$variant,)*];

            pub fn from_u8(v: u8) -> Option<Opcode> {
                match v {
                    $($opcode => Some(Opcode::$variant),)*
                    _ => None,
                }
            }

            pub fn as_u8(self) -> u8 {
                self as u8
            }

            /// The name used in PROTOCOL.md, logs and metric labels.
            pub fn name(self) -> &'static str {
                match self {
                    $(Opcode::$variant => $name,)*
                }
            }

            pub fn idempotent(self) -> bool {
                match self {
                    $(Opcode::$variant => $idem,)*
                }
            }
        }

        /// Any request, as decoded by a server.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request {
            $($variant($ty),)*
        }

        /// Any reply, as produced by a server.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Reply {
            $($variant($reply),)*
        }

        $(
            impl Command for $ty {
                const OPCODE: Opcode = Opcode::$variant;
                const IDEMPOTENT: bool = $idem;
                type Reply = $reply;

                fn target(&self) -> Result<Target, RushError> {
                    self.route()
                }
            }

            impl From<$ty> for Request {
                fn from(v: $ty) -> Request {
                    Request::$variant(v)
                }
            }
        )*

        impl Request {
            pub fn opcode(&self) -> Opcode {
                match self {
                    $(Request::$variant(_) => Opcode::$variant,)*
                }
            }

            /// Decode a request body. An unknown opcode is UNKNOWN_OPCODE; a
            /// malformed body BAD_REQUEST or TOO_LARGE.
            pub fn decode(opcode: u8, body: Bytes) -> Result<Request, RushError> {
                match Opcode::from_u8(opcode) {
                    Some(op) => Ok(Request::decode_as(op, body)?),
                    None => Err(RushError::new(
                        ErrorCode::UnknownOpcode,
                        format!("unknown opcode 0x{opcode:02x}"),
                    )),
                }
            }

            /// Decode the body of a request of a known opcode.
            pub fn decode_as(opcode: Opcode, body: Bytes) -> Result<Request, DecodeError> {
                match opcode {
                    $(Opcode::$variant => Ok(Request::$variant(<$ty as Wire>::decode_body(body)?)),)*
                }
            }

            pub fn encode_body(&self, out: &mut BytesMut) {
                match self {
                    $(Request::$variant(v) => v.encode(out),)*
                }
            }

            pub fn target(&self) -> Result<Target, RushError> {
                match self {
                    $(Request::$variant(v) => v.route(),)*
                }
            }
        }

        impl Reply {
            pub fn opcode(&self) -> Opcode {
                match self {
                    $(Reply::$variant(_) => Opcode::$variant,)*
                }
            }

            /// Decode a reply body of `opcode` (what follows the fields
            /// this release knows is ignored: see [`Wire::decode_reply_body`]).
            pub fn decode(opcode: Opcode, body: Bytes) -> Result<Reply, DecodeError> {
                match opcode {
                    $(Opcode::$variant => Ok(Reply::$variant(<$reply as Wire>::decode_reply_body(body)?)),)*
                }
            }

            pub fn encode_body(&self, out: &mut BytesMut) {
                match self {
                    $(Reply::$variant(v) => v.encode(out),)*
                }
            }
        }
    };
}

use cmd::*;

commands! {
    // ── connection and node ─────────────────────────────────────────────
    /// Liveness; echoes its payload.
    0x01 "PING" => Ping(Ping) -> Pong, idempotent = true;
    /// Protocol version and optional auth token; first request on a connection.
    0x02 "HELLO" => Hello(Hello) -> HelloReply, idempotent = true;
    /// Node facts as name/value rows.
    0x03 "INFO" => Info(Info) -> InfoReply, idempotent = true;
    /// Which node serves which slot ranges.
    0x04 "CLUSTER_SLOTS" => ClusterSlots(ClusterSlots) -> ClusterSlotsReply, idempotent = true;
    /// The node's shards and each one's slots.
    0x05 "SHARDS" => Shards(Shards) -> ShardsReply, idempotent = true;
    /// Have this connection served by one shard of the node.
    0x06 "SHARD_BIND" => ShardBind(ShardBind) -> ShardBindReply, idempotent = true;
    /// Generic keys held in the node's slots (Redis's DBSIZE).
    0x07 "DBSIZE" => DbSize(DbSize) -> u64, idempotent = true;
    /// Let this connection read from a replica (Redis's READONLY).
    0x08 "READONLY" => ReadOnly(ReadOnly) -> bool, idempotent = true;

    // ── generic keys ─────────────────────────────────────────────────────
    0x10 "GET" => Get(Get) -> Option<Bytes>, idempotent = true;
    0x11 "SET" => Set(Set) -> bool, idempotent = true;
    0x12 "DEL" => Del(Del) -> bool, idempotent = true;
    0x13 "EXISTS" => Exists(Exists) -> bool, idempotent = true;
    0x14 "INCRBY" => IncrBy(IncrBy) -> i64, idempotent = false;
    0x15 "EXPIRE" => Expire(Expire) -> bool, idempotent = true;
    0x16 "TTL" => Ttl(Ttl) -> TtlReply, idempotent = true;
    /// SET that keeps the key's TTL (Redis's SET … KEEPTTL).
    0x17 "SET_KEEPTTL" => SetKeepTtl(SetKeepTtl) -> bool, idempotent = true;
    0x18 "HSET" => HSet(HSet) -> u64, idempotent = true;
    0x19 "HGET" => HGet(HGet) -> Option<Bytes>, idempotent = true;
    0x1a "HDEL" => HDel(HDel) -> u64, idempotent = true;
    0x1b "HINCRBY" => HIncrBy(HIncrBy) -> i64, idempotent = false;
    0x1c "HGETALL" => HGetAll(HGetAll) -> HGetAllReply, idempotent = true;
    /// A hash's field count, without reading its fields.
    0x1d "HLEN" => HLen(HLen) -> u64, idempotent = true;
    /// A condition; inside BATCH a false one aborts the batch.
    0x1e "CHECK" => Check(Check) -> bool, idempotent = true;
    /// Operations on keys of one slot, applied atomically.
    0x1f "BATCH" => Batch(Batch) -> BatchReply, idempotent = false;

    // ── short links (0x30–0x3f) ──────────────────────────────────────────
    /// Shorten a URL: a generated code in the slot of (account, url), or an alias.
    0x30 "LINK_SHORTEN" => LinkShorten(LinkShorten) -> ShortenReply, idempotent = false;
    /// Shorten many URLs; every code is issued in the slot the batch names.
    0x31 "LINK_SHORTEN_BATCH" => LinkShortenBatch(LinkShortenBatch) -> ShortenBatchReply, idempotent = false;
    /// A code's target; counts a visit and slides the expiry.
    0x32 "LINK_RESOLVE" => LinkResolve(LinkResolve) -> ResolveReply, idempotent = true;
    /// Everything about a link, with visit statistics.
    0x33 "LINK_INFO" => LinkInfo(LinkInfo) -> LinkInfoReply, idempotent = true;
    /// New target, TTL, app URLs or redirect kind.
    0x34 "LINK_UPDATE" => LinkUpdate(LinkUpdate) -> u64, idempotent = true;
    /// Remove a link.
    0x35 "LINK_DELETE" => LinkDelete(LinkDelete) -> bool, idempotent = true;

    // ── purchase limits (0x40–0x4f) ──────────────────────────────────────
    /// Check every rule for every item of an order; record all counts or none.
    /// Idempotent by order id.
    0x40 "LIMIT_ACQUIRE" => LimitAcquire(LimitAcquire) -> AcquireReply, idempotent = true;
    /// Give an order's counts back, once.
    0x41 "LIMIT_RELEASE" => LimitRelease(LimitRelease) -> ReleaseReply, idempotent = true;
    /// A user's counts and resets under a policy.
    0x42 "LIMIT_STATUS" => LimitStatus(LimitStatus) -> StatusReply, idempotent = true;
    /// Create or replace a policy on every shard, durably (admin).
    0x43 "LIMIT_POLICY_SET" => LimitPolicySet(LimitPolicySet) -> PolicySetReply, idempotent = true;
    0x44 "LIMIT_POLICY_GET" => LimitPolicyGet(LimitPolicyGet) -> PolicyDef, idempotent = true;
    0x45 "LIMIT_POLICY_LIST" => LimitPolicyList(LimitPolicyList) -> PolicyListReply, idempotent = true;

    // ── catalog (0x50–0x5f) ──────────────────────────────────────────────
    /// Add or replace one record of an owner.
    0x50 "CATALOG_PUT" => CatalogPut(CatalogPut) -> bool, idempotent = true;
    /// Remove one record of an owner.
    0x51 "CATALOG_DELETE" => CatalogDelete(CatalogDelete) -> bool, idempotent = true;
    /// Point an alias (kind, alias) at an owner.
    0x52 "CATALOG_ALIAS_SET" => CatalogAliasSet(CatalogAliasSet) -> bool, idempotent = true;
    /// Remove an alias.
    0x53 "CATALOG_ALIAS_DEL" => CatalogAliasDel(CatalogAliasDel) -> bool, idempotent = true;
    /// An owner's records matching a filter: Bloom filter, cache, storage.
    0x54 "CATALOG_QUERY" => CatalogQuery(CatalogQuery) -> CatalogQueryReply, idempotent = true;
    /// The owner an alias points at (first step of a query by alias).
    0x55 "CATALOG_RESOLVE" => CatalogResolve(CatalogResolve) -> Option<Bytes>, idempotent = true;
    /// Admin: shed storage reads on, off or by queue depth.
    0x58 "CATALOG_SHED" => CatalogShed(CatalogShed) -> (), idempotent = true;
    /// Admin: preload owners into the hot cache.
    0x59 "CATALOG_WARM" => CatalogWarm(CatalogWarm) -> CatalogWarmReply, idempotent = true;
    /// Admin: rebuild every shard's Bloom filter from storage.
    0x5a "CATALOG_REBUILD" => CatalogRebuild(CatalogRebuild) -> u64, idempotent = true;

    // ── red envelopes (0x60–0x6f) ────────────────────────────────────────
    /// Create an envelope in the sender's slot; the id carries slot and day.
    0x60 "ENVELOPE_CREATE" => EnvelopeCreate(EnvelopeCreate) -> EnvelopeCreateReply, idempotent = false;
    /// Grab a share: once per user; a repeat answers the same amount.
    0x61 "ENVELOPE_GRAB" => EnvelopeGrab(EnvelopeGrab) -> EnvelopeGrabReply, idempotent = true;
    /// An envelope's books and grabs.
    0x62 "ENVELOPE_INFO" => EnvelopeInfo(EnvelopeInfo) -> EnvelopeInfoReply, idempotent = true;
    /// Read the node's refund stream after a cursor (admin).
    0x63 "ENVELOPE_REFUNDS" => EnvelopeRefunds(EnvelopeRefunds) -> EnvelopeRefundsReply, idempotent = true;
    /// Acknowledge paid refunds up to a cursor; they leave the stream (admin).
    0x64 "ENVELOPE_REFUNDS_ACK" => EnvelopeRefundsAck(EnvelopeRefundsAck) -> u64, idempotent = true;
    /// Check every stored envelope's books (admin).
    0x65 "ENVELOPE_AUDIT" => EnvelopeAudit(EnvelopeAudit) -> EnvelopeAuditReply, idempotent = true;

    // ── cluster (0x70–0x7f) ──────────────────────────────────────────────
    /// Install a newer cluster map (admin).
    0x70 "CLUSTER_SETMAP" => ClusterSetMap(ClusterSetMap) -> u64, idempotent = true;
    /// Move slots from this node to another, live (admin).
    0x71 "CLUSTER_MIGRATE" => ClusterMigrate(ClusterMigrate) -> ClusterMigrateReply, idempotent = true;
    /// Node to node: one chunk of a slot's raw data.
    0x72 "MIGRATE_IMPORT" => MigrateImport(MigrateImport) -> u64, idempotent = false;
    /// Node to node: the target takes the slot.
    0x73 "MIGRATE_COMMIT" => MigrateCommit(MigrateCommit) -> u64, idempotent = true;
    /// Node to node: the target drops an uncommitted import.
    0x74 "MIGRATE_ABORT" => MigrateAbort(MigrateAbort) -> bool, idempotent = true;
    /// Node to node: did an import commit?
    0x75 "MIGRATE_STATUS" => MigrateStatus(MigrateStatus) -> MigrationState, idempotent = true;
    /// Replica to primary: start or continue reading a consistent snapshot.
    0x78 "REPL_SNAPSHOT" => ReplSnapshot(ReplSnapshot) -> ReplSnapshotReply, idempotent = true;
    /// Replica to primary: the committed writes after the replica's positions.
    0x79 "REPL_FETCH" => ReplFetch(ReplFetch) -> ReplFetchReply, idempotent = true;
    /// Role, primary, positions and lag.
    0x7a "REPL_STATUS" => ReplStatus(ReplStatus) -> InfoReply, idempotent = true;
    /// Make a replica a primary that takes writes.
    0x7b "REPL_PROMOTE" => ReplPromote(ReplPromote) -> InfoReply, idempotent = true;

    // ── admin and test support ───────────────────────────────────────────
    /// Compact every shard's storage now (drops expired values).
    0xf0 "COMPACT" => Compact(Compact) -> (), idempotent = true;
    /// Move the node's clock forward (only when `debug.clock_control` is on).
    0xf1 "CLOCK_ADVANCE" => ClockAdvance(ClockAdvance) -> u64, idempotent = false;
}
