//! HINCRBY: add to a hash field read as an integer (missing is 0).

use super::{parse_int, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::HIncrBy;
use rush_protocol::limits::MAX_HASH_FIELDS;
use rush_protocol::{ErrorCode, Reply, RushError};

impl Kv {
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
}
