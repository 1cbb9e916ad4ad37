//! CATALOG_RESOLVE: the owner an alias points at, through the three layers.

use super::cache::{Cached, Item};
use super::metrics::Op;
use super::Catalog;
use crate::shard::txn::Txn;
use rush_protocol::cmd::CatalogResolve;
use rush_protocol::{Reply, RushError};

impl Catalog {
    pub(super) fn resolve(
        &mut self,
        r: &CatalogResolve,
        now: u64,
        txn: &Txn,
    ) -> Result<Reply, RushError> {
        let item = Item::Alias {
            kind: &r.kind,
            alias: &r.alias,
        };
        let found = self.lookup(Op::Resolve, item, now, txn)?;
        let Cached::Alias(owner) = &*found else {
            return Err(RushError::internal("an alias's cache entry holds records"));
        };
        Ok(Reply::CatalogResolve(owner.clone()))
    }
}
