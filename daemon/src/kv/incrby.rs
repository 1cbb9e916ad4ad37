//! INCRBY: add to a string read as an integer (missing is 0); the key keeps
//! its TTL.

use super::{parse_int, Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::IncrBy;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn incr_by(&self, r: &IncrBy, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let (current, expires_at) = match self.load(&r.key, now, txn)? {
            Entry::Missing => (0, 0),
            Entry::String { expires_at, value } => (parse_int(&value)?, expires_at),
            Entry::Hash { .. } => {
                return Err(RushError::wrong_type("INCRBY on a hash; use HINCRBY"))
            }
        };
        let next = current
            .checked_add(r.delta)
            .ok_or_else(|| RushError::bad_request("increment would overflow"))?;
        self.store_string(&r.key, expires_at, next.to_string().as_bytes(), txn);
        Ok(Reply::IncrBy(next))
    }
}
