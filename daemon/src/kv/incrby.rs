//! INCRBY: add to a string read as an integer (missing is 0); the key keeps
//! its TTL.

use super::{entry_of, parse_int, storage_error, storage_key, Entry, Kv};
use crate::shard::txn::Txn;
use crate::storage::value;
use rush_protocol::cmd::IncrBy;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn incr_by(
        &mut self,
        r: &IncrBy,
        routed: Option<u16>,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        // The storage key is built once, for the read and the write.
        let skey = storage_key(routed, &r.key);
        // Read in place: only the number is needed, not the value. A
        // counter the shard never held (its first INCR) is not read.
        let hash = self.known.hash(&skey);
        let found = if self.known.may_hold(hash) {
            txn.read(&skey, |raw| {
                entry_of(raw, now, |v| parse_int(&v[value::HEADER..]))
            })
            .map_err(storage_error)??
        } else {
            Entry::Missing
        };
        let (current, expires_at) = match found {
            Entry::Missing => (0, 0),
            Entry::String { expires_at, value } => (value?, expires_at),
            Entry::Hash { .. } => {
                return Err(RushError::wrong_type("INCRBY on a hash; use HINCRBY"))
            }
        };
        let next = current
            .checked_add(r.delta)
            .ok_or_else(|| RushError::bad_request("increment would overflow"))?;
        let mut digits = itoa::Buffer::new();
        self.store_string_hashed(skey, hash, expires_at, digits.format(next).as_bytes(), txn);
        Ok(Reply::IncrBy(next))
    }
}
