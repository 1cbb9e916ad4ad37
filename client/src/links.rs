//! Short links: typed methods over LINK_* requests.

use crate::{Client, ClientError};
use bytes::Bytes;
use rush_protocol::cmd::{
    BatchShortenItem, LinkDelete, LinkInfo, LinkInfoReply, LinkResolve, LinkShorten,
    LinkShortenBatch, LinkUpdate, ResolveReply, ShortenBatchReply, ShortenReply,
};
use rush_protocol::parts_slot;

impl Client {
    /// Shorten a URL with the server's defaults (length, TTL).
    pub async fn shorten(&self, url: impl Into<String>) -> Result<ShortenReply, ClientError> {
        self.call(LinkShorten::new(url)).await
    }

    /// Shorten with options (length, TTL, alias, app links, account, reuse,
    /// `drop_query` to keep visits' query strings off the target…).
    pub async fn shorten_with(&self, req: LinkShorten) -> Result<ShortenReply, ClientError> {
        self.call(req).await
    }

    /// Shorten many URLs in one request. All codes are issued in one slot —
    /// that of (account, first URL), so batches spread over slots like
    /// single shortens do.
    pub async fn shorten_batch(
        &self,
        account: impl Into<Bytes>,
        items: Vec<BatchShortenItem>,
    ) -> Result<ShortenBatchReply, ClientError> {
        let account = account.into();
        let first = items.first().map(|i| i.url.as_bytes()).unwrap_or_default();
        let slot = parts_slot(&[&account, first]);
        self.shorten_batch_in(slot, account, items).await
    }

    /// Shorten many URLs with their codes issued in `slot` (0–16383).
    pub async fn shorten_batch_in(
        &self,
        slot: u16,
        account: impl Into<Bytes>,
        items: Vec<BatchShortenItem>,
    ) -> Result<ShortenBatchReply, ClientError> {
        self.call(LinkShortenBatch {
            slot,
            account: account.into(),
            items,
        })
        .await
    }

    /// A code's target (and app links). Counts a visit; NOT_FOUND when the
    /// link is unknown, expired or deleted.
    pub async fn resolve(&self, code: impl Into<String>) -> Result<ResolveReply, ClientError> {
        self.call(LinkResolve::new(code)).await
    }

    /// Everything about a link, with its visit statistics.
    pub async fn link_info(&self, code: impl Into<String>) -> Result<LinkInfoReply, ClientError> {
        self.call(LinkInfo::new(code)).await
    }

    /// Change a link; returns its expiry (unix ms, 0 = never).
    pub async fn link_update(&self, update: LinkUpdate) -> Result<u64, ClientError> {
        self.call(update).await
    }

    /// Delete a link; false when there was no live link.
    pub async fn link_delete(&self, code: impl Into<String>) -> Result<bool, ClientError> {
        self.call(LinkDelete::new(code)).await
    }
}
