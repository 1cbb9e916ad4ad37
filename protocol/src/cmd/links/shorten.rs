use super::{
    code, put_opt_str, put_opt_u64, read_code, read_length, read_opt_u64, read_opt_url, read_url,
};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_CODE, MAX_KEY, MAX_TEXT};
use crate::slot::parts_slot;
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

const FLAG_REUSE: u8 = 0x01;
const FLAG_PERMANENT: u8 = 0x02;
/// Added after version 1 shipped: a sender that doesn't know it sends 0,
/// which keeps the default (the visitor's query passes through).
const FLAG_DROP_QUERY: u8 = 0x04;

/// `LINK_SHORTEN url options` → a code.
///
/// Without an alias the request runs in the slot of `(account, url)` and the
/// code is issued there, so load spreads over all slots and the reuse index
/// (account, url) → code is in the same slot. With an alias it runs in the
/// alias's slot; asking for `reuse` and an alias together is BAD_REQUEST (an
/// alias names a new link; reuse returns an old one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkShorten {
    pub url: String,
    /// Tenant tag (may be empty). Part of the routing and of the reuse index.
    pub account: Bytes,
    /// 0 = the server's default (`links.default_length`), else 5–8.
    pub length: u8,
    /// `None` = the server's default TTL, `Some(0)` = never expires.
    pub ttl_ms: Option<u64>,
    /// A custom code instead of a generated one.
    pub alias: Option<String>,
    /// App URL opened instead of the target on iOS devices.
    pub ios: Option<String>,
    /// App URL opened instead of the target on Android devices.
    pub android: Option<String>,
    /// Return the live code of an earlier reuse-shorten of the same
    /// (account, url) instead of issuing a new one.
    pub reuse: bool,
    /// Redirect with 301 instead of 302.
    pub permanent: bool,
    /// Drop the query string of a visit (`/CODE?utm_source=x`) instead of
    /// passing it on to the target after the target's own parameters.
    pub drop_query: bool,
}

/// The issued (or reused) code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortenReply {
    pub code: String,
    /// The server's base URL followed by the code.
    pub short_url: String,
    /// True when an existing link was returned (reuse).
    pub reused: bool,
    /// Unix ms; 0 = never.
    pub expires_at: u64,
}

impl LinkShorten {
    pub fn new(url: impl Into<String>) -> Self {
        LinkShorten {
            url: url.into(),
            ..LinkShorten::default()
        }
    }

    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(match &self.alias {
            Some(alias) => code::link_slot(alias.as_bytes()),
            None => parts_slot(&[&self.account, self.url.as_bytes()]),
        }))
    }
}

impl Wire for LinkShorten {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.url.as_bytes());
        out.put_lp(&self.account);
        out.put_u8(self.length);
        put_opt_u64(out, self.ttl_ms);
        put_opt_str(out, &self.alias);
        put_opt_str(out, &self.ios);
        put_opt_str(out, &self.android);
        let mut flags = 0;
        if self.reuse {
            flags |= FLAG_REUSE;
        }
        if self.permanent {
            flags |= FLAG_PERMANENT;
        }
        if self.drop_query {
            flags |= FLAG_DROP_QUERY;
        }
        out.put_u8(flags);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let url = read_url(r, "url")?;
        let account = r.bytes("account", MAX_KEY)?;
        let length = read_length(r)?;
        let ttl_ms = read_opt_u64(r, "ttl")?;
        let alias = r.option("alias", |r| read_code(r, "alias"))?;
        let ios = read_opt_url(r, "ios url")?;
        let android = read_opt_url(r, "android url")?;
        let flags = r.u8("flags")?;
        if flags & !(FLAG_REUSE | FLAG_PERMANENT | FLAG_DROP_QUERY) != 0 {
            return Err(DecodeError::invalid("flags", format!("0x{flags:02x}")));
        }
        let reuse = flags & FLAG_REUSE != 0;
        if reuse && alias.is_some() {
            return Err(DecodeError::invalid(
                "flags",
                "reuse and an alias exclude each other (an alias names a new link)",
            ));
        }
        Ok(LinkShorten {
            url,
            account,
            length,
            ttl_ms,
            alias,
            ios,
            android,
            reuse,
            permanent: flags & FLAG_PERMANENT != 0,
            drop_query: flags & FLAG_DROP_QUERY != 0,
        })
    }
}

impl Wire for ShortenReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.code.as_bytes());
        out.put_lp(self.short_url.as_bytes());
        out.put_bool(self.reused);
        out.put_u64(self.expires_at);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ShortenReply {
            code: r.string("code", MAX_CODE)?,
            short_url: r.string("short url", MAX_TEXT)?,
            reused: r.bool("reused")?,
            expires_at: r.u64("expires at")?,
        })
    }
}
