//! HDEL: remove fields of a hash (the last one removes the hash).

use super::Kv;
use crate::shard::txn::Txn;
use rush_protocol::cmd::HDel;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn hdel(&mut self, r: &HDel, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let mut h = self.hash_for_write(&r.key, now, txn)?;
        let mut removed = 0;
        for f in &r.fields {
            if h.remove(&r.key, f, txn)? {
                removed += 1;
            }
        }
        if removed > 0 || h.converted() {
            h.finish(self, &r.key, txn);
        }
        Ok(Reply::HDel(removed))
    }
}
