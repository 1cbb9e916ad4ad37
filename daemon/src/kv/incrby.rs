//! INCRBY: add to a string read as an integer (missing is 0); the key keeps
//! its TTL.

use super::{parse_int, storage_key, Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::IncrBy;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn incr_by(
        &self,
        r: &IncrBy,
        routed: Option<u16>,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        // The storage key is built once, for the read and the write.
        let skey = storage_key(routed, &r.key);
        let (current, expires_at) = match self.load_at(&skey, now, txn)? {
            Entry::Missing => (0, 0),
            Entry::String { expires_at, value } => (parse_int(&value)?, expires_at),
            Entry::Hash { .. } => {
                return Err(RushError::wrong_type("INCRBY on a hash; use HINCRBY"))
            }
        };
        let next = current
            .checked_add(r.delta)
            .ok_or_else(|| RushError::bad_request("increment would overflow"))?;
        let mut digits = itoa::Buffer::new();
        self.store_string_at(skey, expires_at, digits.format(next).as_bytes(), txn);
        Ok(Reply::IncrBy(next))
    }
}
