//! EXPIRE: set (or, with 0, clear) a key's TTL, string or hash. A hash's
//! TTL is in its header: its fields are not rewritten.

use super::{expiry, Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::Expire;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn expire(
        &mut self,
        r: &Expire,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let expires_at = expiry(now, r.ttl_ms);
        match self.load(&r.key, now, txn)? {
            Entry::Missing => return Ok(Reply::Expire(false)),
            Entry::String { value, .. } => self.store_string(&r.key, expires_at, &value, txn),
            Entry::Hash { .. } => {
                let mut h = self.hash_for_write(&r.key, now, txn)?;
                h.expires_at = expires_at;
                h.finish(self, &r.key, txn);
            }
        }
        Ok(Reply::Expire(true))
    }
}
