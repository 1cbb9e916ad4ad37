//! CATALOG_ALIAS_SET: point an alias at an owner, durably.

use super::cache::Cached;
use super::Catalog;
use crate::shard::txn::Txn;
use crate::storage::keys::kind;
use crate::storage::value;
use bytes::Bytes;
use rush_protocol::cmd::CatalogAliasSet;
use rush_protocol::{Reply, RushError};

impl Catalog {
    pub(super) fn alias_set(
        &mut self,
        r: &CatalogAliasSet,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let (alias, existed) = self.alias_for_write(&r.kind, &r.alias, now, txn)?;
        let owner = Bytes::copy_from_slice(&r.owner);
        txn.put(alias.key(), value::encode(kind::CATALOG_ALIAS, 0, &owner));
        txn.require_sync();
        self.bloom_insert(alias.hash);
        self.cache
            .insert(alias.hash, alias.item(), Cached::Alias(Some(owner)), now, 0);
        Ok(Reply::CatalogAliasSet(!existed))
    }
}
