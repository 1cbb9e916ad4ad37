//! HGETALL: every field of a hash, in field order.

use super::Kv;
use crate::shard::txn::Txn;
use rush_protocol::cmd::{HGetAll, HGetAllReply};
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn hgetall(&self, r: &HGetAll, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let fields = match self.load_hash(&r.key, now, txn)? {
            None => Vec::new(),
            Some(h) => self.hash_all(&r.key, h, txn)?,
        };
        Ok(Reply::HGetAll(HGetAllReply { fields }))
    }
}
