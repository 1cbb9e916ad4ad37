//! HGETALL: every field of a hash, in field order.

use super::Kv;
use crate::shard::txn::Txn;
use bytes::Bytes;
use rush_protocol::cmd::{HGetAll, HGetAllReply};
use rush_protocol::{Reply, RushError};

impl Kv {
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
