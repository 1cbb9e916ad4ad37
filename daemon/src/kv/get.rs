//! GET: a string's value.

use super::{storage_key, Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::Get;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn get(
        &self,
        r: &Get,
        routed: Option<u16>,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        match self.load_at(&storage_key(routed, &r.key), now, txn)? {
            Entry::Missing => Ok(Reply::Get(None)),
            Entry::String { value, .. } => Ok(Reply::Get(Some(value))),
            Entry::Hash { .. } => Err(RushError::wrong_type("GET on a hash; use HGET")),
        }
    }
}
