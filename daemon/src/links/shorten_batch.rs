//! LINK_SHORTEN_BATCH: many URLs, every code issued in the batch's slot.

use super::record::{LinkRecord, FLAG_PERMANENT};
use super::{expiry, Links};
use crate::segments::Segments;
use crate::shard::txn::Txn;
use rush_protocol::cmd::{BatchLink, LinkShortenBatch, ShortenBatchReply};
use rush_protocol::{ErrorDetail, Reply, RushError};

impl Links {
    pub(super) fn shorten_batch(
        &mut self,
        r: &LinkShortenBatch,
        now: u64,
        txn: &mut Txn,
        segments: &mut Segments,
    ) -> Result<Reply, RushError> {
        // Validate everything first: a bad item issues nothing.
        for (i, it) in r.items.iter().enumerate() {
            let checked = self.rules.check_target("url", &it.url).and_then(|_| {
                for (field, app) in [("ios url", &it.ios), ("android url", &it.android)] {
                    if let Some(u) = app {
                        self.rules.check_app(field, u)?;
                    }
                }
                Ok(())
            });
            if let Err(e) = checked {
                return Err(RushError::new(e.code, format!("item {i}: {}", e.message))
                    .with_detail(ErrorDetail::BatchIndex { index: i as u32 }));
            }
        }
        let mut links = Vec::with_capacity(r.items.len());
        for (i, it) in r.items.iter().enumerate() {
            let len = match it.length {
                0 => self.cfg.default_length,
                n => n,
            };
            let ttl_ms = self.ttl(it.ttl_ms);
            let expires_at = expiry(now, ttl_ms);
            let issued = self
                .issuer
                .issue(r.slot, len, now, txn, segments, &self.metrics.links)
                .map_err(|e| e.with_detail(ErrorDetail::BatchIndex { index: i as u32 }))?;
            let record = LinkRecord {
                flags: if it.permanent { FLAG_PERMANENT } else { 0 },
                created_at: now,
                ttl_ms,
                account: r.account.to_vec(),
                target: it.url.clone(),
                ios: it.ios.clone(),
                android: it.android.clone(),
            };
            self.store_new(r.slot, &issued, &record, expires_at, txn);
            links.push(BatchLink {
                code: issued.code.as_str().to_string(),
                expires_at,
            });
        }
        Ok(Reply::LinkShortenBatch(ShortenBatchReply {
            base_url: self.cfg.base_url.clone(),
            links,
        }))
    }
}
