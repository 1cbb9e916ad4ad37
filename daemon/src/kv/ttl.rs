//! TTL: what is left of a key's time to live.

use super::{Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::{Ttl, TtlReply};
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn ttl(&self, r: &Ttl, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let expires_at = match self.load(&r.key, now, txn)? {
            Entry::Missing => return Ok(Reply::Ttl(TtlReply::Missing)),
            Entry::String { expires_at, .. } | Entry::Hash { expires_at, .. } => expires_at,
        };
        Ok(Reply::Ttl(if expires_at == 0 {
            TtlReply::Persistent
        } else {
            TtlReply::Remaining(expires_at - now)
        }))
    }
}
