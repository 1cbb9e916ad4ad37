//! CATALOG_PUT: add or replace one record of an owner, durably.

use super::cache::Item;
use super::{hash_item, too_large, Catalog};
use crate::shard::txn::Txn;
use rush_protocol::cmd::CatalogPut;
use rush_protocol::{Reply, RushError};

impl Catalog {
    pub(super) fn put(
        &mut self,
        r: &CatalogPut,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let hash = hash_item(&self.hasher, Item::Owner(&r.owner));
        let mut records = self.current_records(hash, &r.owner, now, txn)?;
        let mut record = r.record.clone();
        record.attributes.sort_by(|a, b| a.0.cmp(&b.0));
        let created = match records.binary_search_by(|x| x.id.cmp(&record.id)) {
            Ok(i) => {
                records[i] = record;
                false
            }
            Err(i) => {
                records.insert(i, record);
                true
            }
        };
        let max = self.cfg.max_records_per_owner;
        if records.len() > max {
            return Err(too_large(format!(
                "the owner already has {} records, the most one owner may hold",
                max
            )));
        }
        self.store_records(hash, &r.owner, records, now, txn)?;
        Ok(Reply::CatalogPut(created))
    }
}
