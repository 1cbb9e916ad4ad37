//! HLEN: how many fields a hash has, from its header.

use super::Kv;
use crate::shard::txn::Txn;
use rush_protocol::cmd::HLen;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn hlen(&self, r: &HLen, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let n = self.load_hash(&r.key, now, txn)?.map_or(0, |h| h.len());
        Ok(Reply::HLen(n))
    }
}
