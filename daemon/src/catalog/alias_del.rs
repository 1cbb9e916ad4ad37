//! CATALOG_ALIAS_DEL: remove an alias, durably.

use super::cache::Cached;
use super::Catalog;
use crate::shard::txn::Txn;
use rush_protocol::cmd::CatalogAliasDel;
use rush_protocol::{Reply, RushError};

impl Catalog {
    pub(super) fn alias_del(
        &mut self,
        r: &CatalogAliasDel,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let (alias, existed) = self.alias_for_write(&r.kind, &r.alias, now, txn)?;
        if !existed {
            return Ok(Reply::CatalogAliasDel(false));
        }
        txn.delete(alias.key());
        txn.require_sync();
        self.stale += 1;
        self.cache
            .insert(alias.hash, alias.item(), Cached::Alias(None), now, 0);
        Ok(Reply::CatalogAliasDel(true))
    }
}
