//! LINK_DELETE: the link, its statistics, its reuse entry and (for an
//! alias shaped like a generated code) its reserved index go, durably.

use super::record::{FLAG_ALIAS, FLAG_REUSE_INDEXED};
use super::Links;
use crate::shard::txn::Txn;
use crate::storage::keys;
use rush_protocol::cmd::links::code::generated_parts;
use rush_protocol::cmd::LinkDelete;
use rush_protocol::{Reply, RushError};

impl Links {
    pub(super) fn delete(
        &mut self,
        r: &LinkDelete,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let code = r.code.as_bytes();
        let Some(link) = self.find(&r.code, now, txn)? else {
            return Ok(Reply::LinkDelete(false));
        };
        let (slot, rec) = (link.slot, &link.record);
        txn.delete(keys::link(slot, code));
        txn.delete(keys::link_stats(slot, code));
        if rec.has(FLAG_REUSE_INDEXED) {
            let key = keys::link_reuse(slot, &rec.account, rec.target.as_bytes());
            if self.reuse_entry_points_to(&key, code, txn)? {
                txn.delete(key);
            }
        }
        txn.require_sync();
        self.visits.forget(code);
        if let Some((s, len, index)) = generated_parts(code) {
            if rec.has(FLAG_ALIAS) {
                self.issuer.release(s, len, index, txn)?;
            }
            self.issuer.freed(s, len, index);
        }
        Ok(Reply::LinkDelete(true))
    }
}
