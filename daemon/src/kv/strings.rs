//! GET, SET, DEL, EXISTS, INCRBY, EXPIRE, TTL.

use super::{parse_int, Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::{Del, Exists, Expire, Get, IncrBy, Set, SetCond, Ttl, TtlReply};
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn get(&self, r: &Get, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        match self.load(&r.key, now, txn)? {
            Entry::Missing => Ok(Reply::Get(None)),
            Entry::String { value, .. } => Ok(Reply::Get(Some(value))),
            Entry::Hash { .. } => Err(RushError::wrong_type("GET on a hash; use HGET")),
        }
    }

    pub(super) fn set(&self, r: &Set, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        // An unconditional SET replaces whatever is there: no read needed.
        let write = match r.cond {
            SetCond::Always => true,
            SetCond::IfAbsent => matches!(self.load(&r.key, now, txn)?, Entry::Missing),
            SetCond::IfPresent => !matches!(self.load(&r.key, now, txn)?, Entry::Missing),
        };
        if write {
            let expires_at = if r.ttl_ms == 0 {
                0
            } else {
                now.saturating_add(r.ttl_ms)
            };
            self.store_string(&r.key, expires_at, &r.value, txn);
        }
        Ok(Reply::Set(write))
    }

    pub(super) fn del(&self, r: &Del, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let existed = !matches!(self.load(&r.key, now, txn)?, Entry::Missing);
        if existed {
            self.remove(&r.key, txn);
        }
        Ok(Reply::Del(existed))
    }

    pub(super) fn exists(&self, r: &Exists, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        Ok(Reply::Exists(!matches!(
            self.load(&r.key, now, txn)?,
            Entry::Missing
        )))
    }

    pub(super) fn incr_by(&self, r: &IncrBy, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let (current, expires_at) = match self.load(&r.key, now, txn)? {
            Entry::Missing => (0, 0),
            Entry::String { expires_at, value } => (parse_int(&value)?, expires_at),
            Entry::Hash { .. } => {
                return Err(RushError::wrong_type("INCRBY on a hash; use HINCRBY"))
            }
        };
        let next = current
            .checked_add(r.delta)
            .ok_or_else(|| RushError::bad_request("increment would overflow"))?;
        self.store_string(&r.key, expires_at, next.to_string().as_bytes(), txn);
        Ok(Reply::IncrBy(next))
    }

    pub(super) fn expire(&self, r: &Expire, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let expires_at = if r.ttl_ms == 0 {
            0
        } else {
            now.saturating_add(r.ttl_ms)
        };
        match self.load(&r.key, now, txn)? {
            Entry::Missing => return Ok(Reply::Expire(false)),
            Entry::String { value, .. } => self.store_string(&r.key, expires_at, &value, txn),
            Entry::Hash { fields, .. } => self.store_hash(&r.key, expires_at, &fields, txn)?,
        }
        Ok(Reply::Expire(true))
    }

    pub(super) fn ttl(&self, r: &Ttl, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let expires_at = match self.load(&r.key, now, txn)? {
            Entry::Missing => return Ok(Reply::Ttl(TtlReply::Missing)),
            Entry::String { expires_at, .. } | Entry::Hash { expires_at, .. } => expires_at,
        };
        Ok(Reply::Ttl(if expires_at == 0 {
            TtlReply::Persistent
        } else {
            TtlReply::Remaining(expires_at - now)
        }))
    }
}
