//! EXISTS: whether a key holds a live value.

use super::{Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::Exists;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn exists(&self, r: &Exists, now: u64, txn: &mut Txn) -> Result<Reply, RushError> {
        Ok(Reply::Exists(!matches!(
            self.load(&r.key, now, txn)?,
            Entry::Missing
        )))
    }
}
