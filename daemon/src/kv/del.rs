//! DEL: remove a key, string or hash.

use super::{Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::Del;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn del(&self, r: &Del, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        let existed = !matches!(self.load(&r.key, now, txn)?, Entry::Missing);
        if existed {
            self.remove(&r.key, txn);
        }
        Ok(Reply::Del(existed))
    }
}
