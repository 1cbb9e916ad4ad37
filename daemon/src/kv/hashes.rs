//! HSET, HGET, HDEL, HINCRBY, HGETALL. A hash keeps its key's TTL.

use super::{parse_int, Entry, Kv};
use crate::shard::txn::Txn;
use crate::storage::value::Hash;
use bytes::Bytes;
use rush_protocol::cmd::{HDel, HGet, HGetAll, HGetAllReply, HIncrBy, HSet};
use rush_protocol::limits::MAX_HASH_FIELDS;
use rush_protocol::{ErrorCode, Reply, RushError};

impl Kv {
    /// The hash at `key` (empty when missing) and its expiry.
    fn load_hash(&self, key: &[u8], now: u64, txn: &Txn) -> Result<(Hash, u64), RushError> {
        match self.load(key, now, txn)? {
            Entry::Missing => Ok((Hash::new(), 0)),
            Entry::Hash { expires_at, fields } => Ok((fields, expires_at)),
            Entry::String { .. } => Err(RushError::wrong_type("hash operation on a string")),
        }
    }

    pub(super) fn hset(&self, r: &HSet, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let (mut h, expires_at) = self.load_hash(&r.key, now, txn)?;
        let mut added = 0;
        for (f, v) in &r.fields {
            if h.insert(f.to_vec(), v.to_vec()).is_none() {
                added += 1;
            }
        }
        if h.len() > MAX_HASH_FIELDS {
            return Err(RushError::new(
                ErrorCode::TooLarge,
                format!(
                    "hash would have {} fields, over the limit of {MAX_HASH_FIELDS}",
                    h.len()
                ),
            ));
        }
        self.store_hash(&r.key, expires_at, &h, txn)?;
        Ok(Reply::HSet(added))
    }

    pub(super) fn hget(&self, r: &HGet, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let (h, _) = self.load_hash(&r.key, now, txn)?;
        Ok(Reply::HGet(
            h.get(r.field.as_ref()).map(|v| Bytes::from(v.clone())),
        ))
    }

    pub(super) fn hdel(&self, r: &HDel, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let (mut h, expires_at) = self.load_hash(&r.key, now, txn)?;
        let removed = r
            .fields
            .iter()
            .filter(|f| h.remove(f.as_ref()).is_some())
            .count() as u64;
        if removed > 0 {
            self.store_hash(&r.key, expires_at, &h, txn)?;
        }
        Ok(Reply::HDel(removed))
    }

    pub(super) fn hincr_by(
        &self,
        r: &HIncrBy,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let (mut h, expires_at) = self.load_hash(&r.key, now, txn)?;
        let current = match h.get(r.field.as_ref()) {
            Some(v) => parse_int(v)?,
            None => 0,
        };
        let next = current
            .checked_add(r.delta)
            .ok_or_else(|| RushError::bad_request("increment would overflow"))?;
        h.insert(r.field.to_vec(), next.to_string().into_bytes());
        if h.len() > MAX_HASH_FIELDS {
            return Err(RushError::new(
                ErrorCode::TooLarge,
                "hash has too many fields",
            ));
        }
        self.store_hash(&r.key, expires_at, &h, txn)?;
        Ok(Reply::HIncrBy(next))
    }

    pub(super) fn hgetall(&self, r: &HGetAll, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let (h, _) = self.load_hash(&r.key, now, txn)?;
        Ok(Reply::HGetAll(HGetAllReply {
            fields: h
                .into_iter()
                .map(|(f, v)| (Bytes::from(f), Bytes::from(v)))
                .collect(),
        }))
    }
}
