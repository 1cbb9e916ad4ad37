//! CATALOG_DELETE: remove one record of an owner, durably.

use super::cache::Item;
use super::{hash_item, Catalog};
use crate::shard::txn::Txn;
use rush_protocol::cmd::CatalogDelete;
use rush_protocol::{Reply, RushError};

impl Catalog {
    pub(super) fn delete(
        &mut self,
        r: &CatalogDelete,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let hash = hash_item(&self.hasher, Item::Owner(&r.owner));
        let mut records = self.current_records(hash, &r.owner, now, txn)?;
        let Ok(i) = records.binary_search_by(|x| x.id.as_ref().cmp(r.record_id.as_ref())) else {
            return Ok(Reply::CatalogDelete(false));
        };
        records.remove(i);
        self.store_records(hash, &r.owner, records, now, txn)?;
        Ok(Reply::CatalogDelete(true))
    }
}
