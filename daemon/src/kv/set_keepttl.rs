//! SET_KEEPTTL: SET that keeps the TTL the key has (Redis's `SET … KEEPTTL`).

use super::{Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::{SetCond, SetKeepTtl};
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn set_keep_ttl(
        &mut self,
        r: &SetKeepTtl,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let expires_at = match self.load(&r.key, now, txn)? {
            Entry::Missing => None,
            Entry::String { expires_at, .. } | Entry::Hash { expires_at, .. } => Some(expires_at),
        };
        let write = match r.cond {
            SetCond::Always => true,
            SetCond::IfAbsent => expires_at.is_none(),
            SetCond::IfPresent => expires_at.is_some(),
        };
        if write {
            self.store_string(&r.key, expires_at.unwrap_or(0), &r.value, txn);
        }
        Ok(Reply::SetKeepTtl(write))
    }
}
