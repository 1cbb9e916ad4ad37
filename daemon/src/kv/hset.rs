//! HSET: set fields of a hash (created if missing); it keeps its TTL.

use super::Kv;
use crate::shard::txn::Txn;
use rush_protocol::cmd::HSet;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn hset(&mut self, r: &HSet, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let mut h = self.hash_for_write(&r.key, now, txn)?;
        let mut added = 0;
        for (f, v) in &r.fields {
            if h.put(&r.key, f, v, None, txn)? {
                added += 1;
            }
        }
        h.finish(self, &r.key, txn);
        Ok(Reply::HSet(added))
    }
}
