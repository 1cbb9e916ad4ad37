//! HGET: one field of a hash.

use super::Kv;
use crate::shard::txn::Txn;
use bytes::Bytes;
use rush_protocol::cmd::HGet;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn hget(&self, r: &HGet, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let (h, _) = self.load_hash(&r.key, now, txn)?;
        Ok(Reply::HGet(
            h.get(r.field.as_ref()).map(|v| Bytes::from(v.clone())),
        ))
    }
}
