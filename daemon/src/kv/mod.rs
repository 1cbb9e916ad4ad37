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
use crate::shard::service::{Ahead, Cx, ShardService};
use crate::shard::txn::Txn;
use crate::storage::keys;
use crate::storage::keys::kind;
use crate::storage::value::{self, Stored};
use bytes::Bytes;
use rush_protocol::{Opcode, Reply, Request, RushError, Service};

pub use hash::MAX_HASH_BYTES;

/// The generic key service of one shard. Stateless apart from its settings:
/// every read goes through the group's [`Txn`] to RocksDB.
pub struct Kv {
    /// Fsync KV writes before answering (`storage.kv_durability = "sync"`).
    pub durable: bool,
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
    build: |ctx, _shard| {
        Ok(Box::new(Kv {
            durable: ctx.config.storage.kv_durability == crate::config::Durability::Sync,
        }))
    },
    combine: no_broadcast,
};

/// The storage key of `key`, in `routed` — the slot the shard routed the
/// request by — when there is one: hashing the key again cost 1.2 % of an
/// INCR's CPU. Without one (a key of another request's making), hashed here.
fn storage_key(routed: Option<u16>, key: &[u8]) -> Vec<u8> {
    let slot = routed.unwrap_or_else(|| rush_protocol::key_slot(key));
    debug_assert_eq!(
        slot,
        rush_protocol::key_slot(key),
        "routed by another key's slot"
    );
    keys::kv(slot, key)
}

impl ShardService for Kv {
    fn apply(&mut self, req: &Request, cx: &mut Cx) -> Result<Reply, RushError> {
        match req {
            Request::Batch(b) => self.batch(b, cx.slot, cx.now, cx.txn),
            op => self.op(op, cx.slot, cx.now, cx.txn, false),
        }
    }

    /// GET and INCRBY read their key first (a SET only writes it; the
    /// commit prefetches its rows itself).
    fn prefetch_key(&self, opcode: Opcode, body: &[u8], key: &mut Vec<u8>) -> Ahead {
        // A counter's first INCR finds no key: read a pipeline's together.
        let ahead = match opcode {
            Opcode::Get => Ahead::Row,
            Opcode::IncrBy => Ahead::Read,
            _ => return Ahead::No,
        };
        match rush_protocol::codec::peek_lp(body) {
            Some(k) => {
                keys::kv_into(key, rush_protocol::key_slot(k), k);
                ahead
            }
            None => Ahead::No,
        }
    }
}

impl Kv {
    /// One operation, standalone or inside a batch; `routed` is the slot
    /// the shard routed it by (a batch's operations share one), if it did.
    pub(crate) fn op(
        &self,
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
        txn.read(skey, |raw| entry_of(raw, now, |v| v.slice(value::HEADER..)))
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

    pub(crate) fn store_string(&self, key: &[u8], expires_at: u64, v: &[u8], txn: &mut Txn) {
        self.store_string_at(storage_key(None, key), expires_at, v, txn);
    }

    /// [`Kv::store_string`] at storage key `skey`.
    pub(crate) fn store_string_at(&self, skey: Vec<u8>, expires_at: u64, v: &[u8], txn: &mut Txn) {
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
    raw: Option<&Bytes>,
    now: u64,
    string: impl FnOnce(&Bytes) -> S,
) -> Result<Entry<S>, RushError> {
    let Some(raw) = raw else {
        return Ok(Entry::Missing);
    };
    let stored = Stored::decode(raw).map_err(|e| RushError::internal(e.to_string()))?;
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
