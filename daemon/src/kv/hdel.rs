//! HDEL: remove fields of a hash (the last one removes the hash).

use super::Kv;
use crate::shard::txn::Txn;
use rush_protocol::cmd::HDel;
use rush_protocol::{Reply, RushError};

impl Kv {
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
}
