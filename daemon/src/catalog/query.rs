//! CATALOG_QUERY: an owner's records, filtered, through the three layers.

use super::cache::{Cached, Item};
use super::metrics::Op;
use super::Catalog;
use crate::shard::txn::Txn;
use rush_protocol::cmd::{CatalogQuery, CatalogQueryReply};
use rush_protocol::{Reply, RushError};

impl Catalog {
    pub(super) fn query(
        &mut self,
        r: &CatalogQuery,
        now: u64,
        txn: &Txn,
    ) -> Result<Reply, RushError> {
        let found = self.lookup(Op::Query, Item::Owner(&r.owner), now, txn)?;
        let Cached::Records(records) = &*found else {
            return Err(RushError::internal("an owner's cache entry holds an alias"));
        };
        // Without a filter, or when every record passes it, the answer is
        // the cached set itself.
        let records = records.filtered(&r.filter);
        Ok(Reply::CatalogQuery(CatalogQueryReply { records }))
    }
}
