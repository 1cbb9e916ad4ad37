//! HINCRBY: add to a hash field read as an integer (missing is 0).

use super::{parse_int, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::HIncrBy;
use rush_protocol::{Reply, RushError};

impl Kv {
    pub(super) fn hincr_by(
        &mut self,
        r: &HIncrBy,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let mut h = self.hash_for_write(&r.key, now, txn)?;
        let old = h.get(&r.key, &r.field, txn)?;
        let current = match &old {
            Some(v) => parse_int(v)?,
            None => 0,
        };
        let next = current
            .checked_add(r.delta)
            .ok_or_else(|| RushError::bad_request("increment would overflow"))?;
        h.put(
            &r.key,
            &r.field,
            next.to_string().as_bytes(),
            Some(old),
            txn,
        )?;
        h.finish(self, &r.key, txn);
        Ok(Reply::HIncrBy(next))
    }
}
