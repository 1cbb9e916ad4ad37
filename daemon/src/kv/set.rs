//! SET: store a string, with a TTL and a condition (always, if absent, if
//! present).

use super::{expiry, storage_key, Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::{Set, SetCond};
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn set(
        &mut self,
        r: &Set,
        routed: Option<u16>,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let skey = storage_key(routed, &r.key);
        // An unconditional SET replaces whatever is there: no read needed.
        let write = match r.cond {
            SetCond::Always => true,
            SetCond::IfAbsent => matches!(self.load_for_write(&skey, now, txn)?, Entry::Missing),
            SetCond::IfPresent => !matches!(self.load_for_write(&skey, now, txn)?, Entry::Missing),
        };
        if write {
            self.store_string_at(skey, expiry(now, r.ttl_ms), &r.value, txn);
        }
        Ok(Reply::Set(write))
    }
}
