use super::{put_opt_str, put_opt_u64, read_length, read_opt_u64, read_opt_url, read_url};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_CODE, MAX_KEY, MAX_SHORTEN_BATCH, MAX_TEXT};
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `LINK_SHORTEN_BATCH slot account items` → one code per item, in order.
///
/// A batch runs on one shard like every request, so all its codes are issued
/// in the one slot the batch names (the CROSSSLOT rule): the client picks it
/// — the reference client uses the slot of (account, first URL), spreading
/// batches over all slots as single shortens spread. All or nothing: an
/// invalid item is BAD_REQUEST naming its index and nothing is issued. Items
/// have no alias and no reuse (the reuse index of a URL lives in that URL's
/// own slot, not the batch's).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkShortenBatch {
    pub slot: u16,
    pub account: Bytes,
    pub items: Vec<BatchShortenItem>,
}

/// One URL of a batch, with the options a single shorten has (no alias, no reuse).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BatchShortenItem {
    pub url: String,
    /// 0 = server default, else 5–8.
    pub length: u8,
    /// `None` = server default, `Some(0)` = never.
    pub ttl_ms: Option<u64>,
    pub ios: Option<String>,
    pub android: Option<String>,
    pub permanent: bool,
}

impl BatchShortenItem {
    pub fn new(url: impl Into<String>) -> Self {
        BatchShortenItem {
            url: url.into(),
            ..Default::default()
        }
    }
}

/// One issued link of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchLink {
    pub code: String,
    pub expires_at: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShortenBatchReply {
    /// Prefix of every short URL (`base_url + code`).
    pub base_url: String,
    pub links: Vec<BatchLink>,
}

impl LinkShortenBatch {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(self.slot))
    }
}

impl Wire for LinkShortenBatch {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u16(self.slot);
        out.put_lp(&self.account);
        out.put_count(self.items.len());
        for it in &self.items {
            out.put_lp(it.url.as_bytes());
            out.put_u8(it.length);
            put_opt_u64(out, it.ttl_ms);
            put_opt_str(out, &it.ios);
            put_opt_str(out, &it.android);
            out.put_bool(it.permanent);
        }
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let slot = r.slot("slot")?;
        let account = r.bytes("account", MAX_KEY)?;
        // url (4) + length (1) + 3 option tags + permanent (1).
        let items = r.list("items", MAX_SHORTEN_BATCH, 9, |r| {
            Ok(BatchShortenItem {
                url: read_url(r, "url")?,
                length: read_length(r)?,
                ttl_ms: read_opt_u64(r, "ttl")?,
                ios: read_opt_url(r, "ios url")?,
                android: read_opt_url(r, "android url")?,
                permanent: r.bool("permanent")?,
            })
        })?;
        if items.is_empty() {
            return Err(DecodeError::invalid("items", "a batch needs at least one"));
        }
        Ok(LinkShortenBatch {
            slot,
            account,
            items,
        })
    }
}

impl Wire for ShortenBatchReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.base_url.as_bytes());
        out.put_count(self.links.len());
        for l in &self.links {
            out.put_lp(l.code.as_bytes());
            out.put_u64(l.expires_at);
        }
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ShortenBatchReply {
            base_url: r.string("base url", MAX_TEXT)?,
            links: r.list("links", MAX_SHORTEN_BATCH, 12, |r| {
                Ok(BatchLink {
                    code: r.string("code", MAX_CODE)?,
                    expires_at: r.u64("expires at")?,
                })
            })?,
        })
    }
}
