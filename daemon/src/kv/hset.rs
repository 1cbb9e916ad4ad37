//! HSET: set fields of a hash (created if missing); it keeps its TTL.

use super::Kv;
use crate::shard::txn::Txn;
use rush_protocol::cmd::HSet;
use rush_protocol::limits::MAX_HASH_FIELDS;
use rush_protocol::{ErrorCode, Reply, RushError};

impl Kv {
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
}
