//! Generic keys: strings, integers-as-strings and hashes, with TTLs, and
//! BATCH/CHECK for atomic check-then-write in one slot. Every key lives under
//! `keys::kv(slot, key)`; a value's kind (string or hash header) is in its
//! header. A hash's fields are values of their own (see `hash`).
//!
//! One file per request, named as in `rush_protocol::cmd`.

mod batch;
mod check;
pub mod dbsize;
mod del;
mod exists;
mod expire;
mod get;
mod hash;
mod hdel;
mod hget;
mod hgetall;
mod hincrby;
mod hlen;
mod hset;
mod incrby;
mod set;
mod set_keepttl;
mod ttl;

use crate::services::{no_broadcast, Registration};
use crate::shard::known::KeyFilter;
use crate::shard::service::{Ahead, Cx, ShardService};
use crate::shard::txn::Txn;
use crate::storage::inline::ValueRef;
use crate::storage::keys::{self, kind, ks};
use crate::storage::value::{self, Stored};
use crate::storage::Storage;
use bytes::Bytes;
use rush_protocol::{Opcode, Reply, Request, RushError, Service};

pub use hash::MAX_HASH_BYTES;

/// The generic key service of one shard: every read goes through the
/// group's [`Txn`] to RocksDB.
pub struct Kv {
    /// Fsync KV writes before answering (`storage.kv_durability = "sync"`).
    pub durable: bool,
    /// Which generic keys (strings, hash headers) the shard may hold, so a
    /// write that reads its key first — INCRBY of a new counter, SET NX —
    /// skips the read of a key it certainly doesn't hold. Only writes ask
    /// it: a replica serves reads, and its filter doesn't follow the
    /// records it applies (a promotion restarts the shards, which builds
    /// it again from storage).
    known: KeyFilter,
}

/// What a generic key holds right now; a string's value as `S` (its bytes,
/// or what a request made of them in place).
pub(crate) enum Entry<S = Bytes> {
    Missing,
    String { expires_at: u64, value: S },
    Hash { expires_at: u64, hash: hash::Layout },
}

pub(crate) fn storage_error(e: impl std::fmt::Display) -> RushError {
    RushError::unavailable(format!("storage: {e}"))
}

pub const REGISTRATION: Registration = Registration {
    service: Service::Kv,
    build: |ctx, shard| {
        Ok(Box::new(Kv {
            durable: ctx.config.storage.kv_durability == crate::config::Durability::Sync,
            known: KeyFilter::new(
                "generic-key",
                kv_range,
                shard,
                ctx.config.shard_count(),
                ctx.metrics.key_filter("kv", shard),
            ),
        }))
    },
    combine: no_broadcast,
};

/// The storage key of `key`, in `routed` — the slot the shard routed the
/// request by — when there is one: hashing the key again cost 1.2 % of an
/// INCR's CPU. Without one (a key of another request's making), hashed here.
fn storage_key(routed: Option<u16>, key: &[u8]) -> keys::Key {
    let slot = routed.unwrap_or_else(|| rush_protocol::key_slot(key));
    debug_assert_eq!(
        slot,
        rush_protocol::key_slot(key),
        "routed by another key's slot"
    );
    keys::kv(slot, key)
}

/// Every generic key (string or hash header) of one slot.
fn kv_range(slot: u16) -> (Vec<u8>, Vec<u8>) {
    keys::keyspace_range(slot, ks::KV)
}

impl ShardService for Kv {
    fn open(&mut self, storage: &Storage) {
        self.known.open(storage);
    }

    fn on_slots_imported(&mut self, slots: &[u16], storage: &Storage) {
        self.known.import(storage, slots);
    }

    fn tick(&mut self, cx: &mut Cx) {
        self.known.tick(cx.txn, cx.now);
    }

    fn memory(&self, into: &mut crate::memory::Use) {
        into.add(crate::memory::Part::KeyFilters, self.known.bytes());
    }

    fn apply(&mut self, req: &Request, cx: &mut Cx) -> Result<Reply, RushError> {
        match req {
            Request::Batch(b) => self.batch(b, cx.slot, cx.now, cx.txn),
            op => self.op(op, cx.slot, cx.now, cx.txn, false),
        }
    }

    /// GET and INCRBY read their key first (a SET only writes it; the
    /// commit prefetches its rows itself). INCRBY and SET look their key
    /// up in the filter of keys the shard holds: its lines are loaded here.
    fn prefetch_key(&mut self, opcode: Opcode, body: &[u8], key: &mut Vec<u8>) -> Ahead {
        if !matches!(opcode, Opcode::Get | Opcode::IncrBy | Opcode::Set) {
            return Ahead::No;
        }
        let Some(k) = rush_protocol::codec::peek_lp(body) else {
            return Ahead::No;
        };
        keys::kv_into(key, rush_protocol::key_slot(k), k);
        match opcode {
            Opcode::Get => Ahead::Row,
            Opcode::IncrBy => {
                self.known.prefetch(self.known.hash(key));
                // Once the filter is built it answers a new counter's
                // INCR, which then reads nothing; until then, a
                // pipeline's new counters are read together.
                if self.known.ready() {
                    Ahead::Row
                } else {
                    Ahead::Read
                }
            }
            _ => {
                self.known.prefetch(self.known.hash(key));
                Ahead::No
            }
        }
    }
}

impl Kv {
    /// One operation, standalone or inside a batch; `routed` is the slot
    /// the shard routed it by (a batch's operations share one), if it did.
    pub(crate) fn op(
        &mut self,
        req: &Request,
        routed: Option<u16>,
        now: u64,
        txn: &mut Txn,
        in_batch: bool,
    ) -> Result<Reply, RushError> {
        match req {
            Request::Get(r) => self.get(r, routed, now, txn),
            Request::Set(r) => self.set(r, routed, now, txn),
            Request::SetKeepTtl(r) => self.set_keep_ttl(r, now, txn),
            Request::Del(r) => self.del(r, now, txn),
            Request::Exists(r) => self.exists(r, now, txn),
            Request::IncrBy(r) => self.incr_by(r, routed, now, txn),
            Request::Expire(r) => self.expire(r, now, txn),
            Request::Ttl(r) => self.ttl(r, now, txn),
            Request::HSet(r) => self.hset(r, now, txn),
            Request::HGet(r) => self.hget(r, now, txn),
            Request::HDel(r) => self.hdel(r, now, txn),
            Request::HIncrBy(r) => self.hincr_by(r, now, txn),
            Request::HGetAll(r) => self.hgetall(r, now, txn),
            Request::HLen(r) => self.hlen(r, now, txn),
            Request::Check(r) => self.check(r, now, txn, in_batch),
            other => Err(RushError::bad_request(format!(
                "{} is not a key operation",
                other.opcode().name()
            ))),
        }
    }

    pub(crate) fn load(&self, key: &[u8], now: u64, txn: &Txn) -> Result<Entry, RushError> {
        self.load_at(&storage_key(None, key), now, txn)
    }

    /// [`Kv::load`] of the key whose storage key is `skey`.
    pub(crate) fn load_at(&self, skey: &[u8], now: u64, txn: &Txn) -> Result<Entry, RushError> {
        txn.read(skey, |raw| {
            entry_of(raw, now, |v| v.slice_from(value::HEADER))
        })
        .map_err(storage_error)?
    }

    /// The live hash at `key`, if there is one; WRONG_TYPE on a string.
    fn load_hash(
        &self,
        key: &[u8],
        now: u64,
        txn: &Txn,
    ) -> Result<Option<hash::Layout>, RushError> {
        match self.load(key, now, txn)? {
            Entry::Missing => Ok(None),
            Entry::Hash { hash, .. } => Ok(Some(hash)),
            Entry::String { .. } => Err(RushError::wrong_type("hash operation on a string")),
        }
    }

    /// [`Kv::load_at`] for a write: `Missing` without a read when the
    /// shard certainly doesn't hold the key (see [`Kv::known`]).
    fn load_for_write(&self, skey: &[u8], now: u64, txn: &Txn) -> Result<Entry, RushError> {
        if self.may_hold(skey) {
            self.load_at(skey, now, txn)
        } else {
            Ok(Entry::Missing)
        }
    }

    /// Might the shard hold the generic key whose storage key is `skey`?
    /// False means certainly not. For writes only ([`Kv::known`]).
    fn may_hold(&self, skey: &[u8]) -> bool {
        self.known.may_hold(self.known.hash(skey))
    }

    /// Generic key `skey` is being written (staged): the filter holds it
    /// from now on.
    fn written(&mut self, skey: &[u8]) {
        self.known.add(self.known.hash(skey));
    }

    pub(crate) fn store_string(&mut self, key: &[u8], expires_at: u64, v: &[u8], txn: &mut Txn) {
        self.store_string_at(storage_key(None, key), expires_at, v, txn);
    }

    /// [`Kv::store_string`] at storage key `skey`.
    pub(crate) fn store_string_at(
        &mut self,
        skey: keys::Key,
        expires_at: u64,
        v: &[u8],
        txn: &mut Txn,
    ) {
        let hash = self.known.hash(&skey);
        self.store_string_hashed(skey, hash, expires_at, v, txn);
    }

    /// [`Kv::store_string_at`] of a key whose filter hash is `hash`.
    fn store_string_hashed(
        &mut self,
        skey: keys::Key,
        hash: u64,
        expires_at: u64,
        v: &[u8],
        txn: &mut Txn,
    ) {
        self.known.add(hash);
        txn.put(skey, value::encode_shared(kind::STRING, expires_at, v));
        self.mark_durable(txn);
    }

    pub(crate) fn remove(&self, key: &[u8], txn: &mut Txn) {
        txn.delete(keys::kv(rush_protocol::key_slot(key), key));
        self.mark_durable(txn);
    }

    fn mark_durable(&self, txn: &mut Txn) {
        if self.durable {
            txn.require_sync();
        }
    }
}

/// What the stored value `raw` (`None`: absent) holds at `now`, read in
/// place; a string's value is `string` of the whole stored value (its
/// bytes start at `value::HEADER`).
pub(crate) fn entry_of<S>(
    raw: Option<ValueRef<'_>>,
    now: u64,
    string: impl FnOnce(ValueRef<'_>) -> S,
) -> Result<Entry<S>, RushError> {
    let Some(raw) = raw else {
        return Ok(Entry::Missing);
    };
    let stored = Stored::decode(&raw).map_err(|e| RushError::internal(e.to_string()))?;
    if !stored.is_live(now) {
        return Ok(Entry::Missing);
    }
    match stored.kind {
        kind::STRING => Ok(Entry::String {
            expires_at: stored.expires_at,
            value: string(raw),
        }),
        kind::HASH_HEAD => Ok(Entry::Hash {
            expires_at: stored.expires_at,
            hash: hash::Layout::Fields(
                hash::Head::decode(stored.payload)
                    .map_err(|e| RushError::internal(e.to_string()))?,
            ),
        }),
        kind::HASH => Ok(Entry::Hash {
            expires_at: stored.expires_at,
            hash: hash::Layout::Whole(
                value::decode_hash(stored.payload)
                    .map_err(|e| RushError::internal(e.to_string()))?,
            ),
        }),
        k => Err(RushError::internal(format!(
            "generic key holds value kind {k}"
        ))),
    }
}

/// Absolute expiry `ttl_ms` after `now` (0 = never).
fn expiry(now: u64, ttl_ms: u64) -> u64 {
    if ttl_ms == 0 {
        0
    } else {
        now.saturating_add(ttl_ms)
    }
}

/// A stored string read as an integer counter.
pub(crate) fn parse_int(v: &[u8]) -> Result<i64, RushError> {
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| RushError::wrong_type("value is not an integer"))
}
