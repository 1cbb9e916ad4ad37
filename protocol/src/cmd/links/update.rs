use super::{put_opt_u64, read_code, read_opt_u64, read_url};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// What LINK_UPDATE does to an app URL.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum AppLinkChange {
    #[default]
    Keep,
    Clear,
    Set(String),
}

impl AppLinkChange {
    fn encode(&self, out: &mut BytesMut) {
        match self {
            AppLinkChange::Keep => out.put_u8(0),
            AppLinkChange::Clear => out.put_u8(1),
            AppLinkChange::Set(url) => {
                out.put_u8(2);
                out.put_lp(url.as_bytes());
            }
        }
    }

    fn decode(r: &mut Reader, field: &'static str) -> Result<Self, DecodeError> {
        Ok(match r.u8(field)? {
            0 => AppLinkChange::Keep,
            1 => AppLinkChange::Clear,
            2 => AppLinkChange::Set(read_url(r, field)?),
            k => return Err(DecodeError::invalid(field, format!("change kind {k}"))),
        })
    }
}

/// `LINK_UPDATE code changes` → the link's new expiry (unix ms, 0 = never).
/// A new TTL restarts the expiry from now (`Some(0)` = never expires).
/// Durable like creation. At least one change is required.
///
/// `drop_query` came after version 1 shipped, as the body's last field: a
/// body that ends before it (an older sender) keeps the link's setting,
/// and the encoder leaves it out when it keeps the setting, so that an
/// update that doesn't touch it is one a node of the release before reads
/// (one that does is refused there: trailing bytes).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkUpdate {
    pub code: String,
    pub url: Option<String>,
    pub ttl_ms: Option<u64>,
    pub ios: AppLinkChange,
    pub android: AppLinkChange,
    pub permanent: Option<bool>,
    /// `Some(true)`: drop a visit's query string from now on;
    /// `Some(false)`: pass it on to the target (the default).
    pub drop_query: Option<bool>,
}

impl LinkUpdate {
    pub fn new(code: impl Into<String>) -> Self {
        LinkUpdate {
            code: code.into(),
            ..Default::default()
        }
    }

    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(super::link_slot(self.code.as_bytes())))
    }
}

impl Wire for LinkUpdate {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.code.as_bytes());
        match &self.url {
            None => out.put_u8(0),
            Some(u) => {
                out.put_u8(1);
                out.put_lp(u.as_bytes());
            }
        }
        put_opt_u64(out, self.ttl_ms);
        self.ios.encode(out);
        self.android.encode(out);
        let put_switch = |out: &mut BytesMut, switch: Option<bool>| match switch {
            None => out.put_u8(0),
            Some(on) => {
                out.put_u8(1);
                out.put_bool(on);
            }
        };
        put_switch(out, self.permanent);
        // Added later: absent means keep (see the type's docs).
        if self.drop_query.is_some() {
            put_switch(out, self.drop_query);
        }
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let u = LinkUpdate {
            code: read_code(r, "code")?,
            url: r.option("url", |r| read_url(r, "url"))?,
            ttl_ms: read_opt_u64(r, "ttl")?,
            ios: AppLinkChange::decode(r, "ios url")?,
            android: AppLinkChange::decode(r, "android url")?,
            permanent: r.option("permanent", |r| r.bool("permanent"))?,
            drop_query: r
                .added(|r| r.option("drop query", |r| r.bool("drop query")))?
                .flatten(),
        };
        if u.url.is_none()
            && u.ttl_ms.is_none()
            && u.ios == AppLinkChange::Keep
            && u.android == AppLinkChange::Keep
            && u.permanent.is_none()
            && u.drop_query.is_none()
        {
            return Err(DecodeError::invalid("changes", "nothing to update"));
        }
        Ok(u)
    }
}
