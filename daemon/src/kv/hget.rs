//! HGET: one field of a hash.

use super::Kv;
use crate::shard::txn::Txn;
use rush_protocol::cmd::HGet;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn hget(&self, r: &HGet, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let v = match self.load_hash(&r.key, now, txn)? {
            None => None,
            Some(h) => self.hash_field(&r.key, &h, &r.field, txn)?,
        };
        Ok(Reply::HGet(v))
    }
}
