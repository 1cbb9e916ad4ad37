//! The catalog: records grouped under an owner, found by owner or alias.
//!
//! ```no_run
//! # async fn demo(c: rush_client::Client) -> Result<(), rush_client::ClientError> {
//! use rush_client::protocol::cmd::{CatalogFilter, Record};
//! c.catalog_put("M001", Record::new("contract-7").attr("plan", "gold")).await?;
//! c.catalog_alias_set("account", "6222-0001", "M001").await?;
//! let gold = CatalogFilter::default().attr("plan", "gold");
//! let by_owner = c.catalog_query("M001", &gold).await?;
//! let by_alias = c.catalog_query_alias("account", "6222-0001", &gold).await?;
//! assert_eq!(by_owner, by_alias);
//! # Ok(()) }
//! ```
//!
//! A query by alias is two round trips made by this client:
//! CATALOG_RESOLVE on the alias's slot, then CATALOG_QUERY on the owner's
//! slot (usually another shard, possibly another node). The daemon never
//! follows aliases itself, so no shard waits on another. The two steps are
//! not atomic: an alias re-pointed between them answers with the owner it
//! pointed at when resolved.
//!
//! Queries may answer UNAVAILABLE while the node sheds storage reads (cache
//! misses only); like any idempotent request they are retried with backoff
//! until `ClientOptions::retry_deadline`. Set it to zero to fail fast and
//! fall back instead.

use crate::{Client, ClientError};
use bytes::Bytes;
use rush_protocol::cmd::{
    CatalogAliasDel, CatalogAliasSet, CatalogDelete, CatalogFilter, CatalogPut, CatalogQuery,
    CatalogRebuild, CatalogResolve, CatalogShed, CatalogWarm, CatalogWarmReply, Record, ShedMode,
};

impl Client {
    /// Add or replace a record of `owner`; true when its id is new.
    pub async fn catalog_put(
        &self,
        owner: impl Into<Bytes>,
        record: Record,
    ) -> Result<bool, ClientError> {
        self.call(CatalogPut {
            owner: owner.into(),
            record,
        })
        .await
    }

    /// Remove a record; true when it existed.
    pub async fn catalog_delete(
        &self,
        owner: impl Into<Bytes>,
        record_id: impl Into<Bytes>,
    ) -> Result<bool, ClientError> {
        self.call(CatalogDelete {
            owner: owner.into(),
            record_id: record_id.into(),
        })
        .await
    }

    /// Point alias (`kind`, `alias`) at `owner`; true when the alias is new.
    pub async fn catalog_alias_set(
        &self,
        kind: impl Into<Bytes>,
        alias: impl Into<Bytes>,
        owner: impl Into<Bytes>,
    ) -> Result<bool, ClientError> {
        self.call(CatalogAliasSet {
            kind: kind.into(),
            alias: alias.into(),
            owner: owner.into(),
        })
        .await
    }

    /// Remove an alias; true when it existed.
    pub async fn catalog_alias_del(
        &self,
        kind: impl Into<Bytes>,
        alias: impl Into<Bytes>,
    ) -> Result<bool, ClientError> {
        self.call(CatalogAliasDel {
            kind: kind.into(),
            alias: alias.into(),
        })
        .await
    }

    /// The owner an alias points at.
    pub async fn catalog_resolve(
        &self,
        kind: impl Into<Bytes>,
        alias: impl Into<Bytes>,
    ) -> Result<Option<Bytes>, ClientError> {
        self.call(CatalogResolve {
            kind: kind.into(),
            alias: alias.into(),
        })
        .await
    }

    /// An owner's records that pass `filter`, by id (empty when none).
    pub async fn catalog_query(
        &self,
        owner: impl Into<Bytes>,
        filter: &CatalogFilter,
    ) -> Result<Vec<Record>, ClientError> {
        self.call(CatalogQuery {
            owner: owner.into(),
            filter: filter.clone(),
        })
        .await
        .map(|r| r.records.to_vec())
    }

    /// The records of the owner an alias points at: resolve, then query.
    pub async fn catalog_query_alias(
        &self,
        kind: impl Into<Bytes>,
        alias: impl Into<Bytes>,
        filter: &CatalogFilter,
    ) -> Result<Vec<Record>, ClientError> {
        match self.catalog_resolve(kind, alias).await? {
            Some(owner) => self.catalog_query(owner, filter).await,
            None => Ok(Vec::new()),
        }
    }

    /// Switch shedding of catalog storage reads on every shard (admin).
    pub async fn catalog_shed(&self, mode: ShedMode) -> Result<(), ClientError> {
        self.call(CatalogShed { mode }).await
    }

    /// Preload owners into the hot cache (admin).
    pub async fn catalog_warm<O: Into<Bytes>>(
        &self,
        owners: impl IntoIterator<Item = O>,
    ) -> Result<CatalogWarmReply, ClientError> {
        self.call(CatalogWarm {
            owners: owners.into_iter().map(Into::into).collect(),
        })
        .await
    }

    /// Start rebuilding every shard's Bloom filter from storage (admin);
    /// returns how many shards started.
    pub async fn catalog_rebuild(&self) -> Result<u64, ClientError> {
        self.call(CatalogRebuild {}).await
    }
}
