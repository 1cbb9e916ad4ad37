use super::{put_opt_str, read_code, read_opt_url, read_url};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `LINK_RESOLVE code` → the link's target. Counts a visit and slides the
/// expiry (see PROTOCOL.md). Unknown, expired and deleted codes are
/// NOT_FOUND. Marked idempotent: a resend returns the same target; at worst
/// a visit is counted twice (visit counts are statistics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkResolve {
    pub code: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolveReply {
    pub target: String,
    pub ios: Option<String>,
    pub android: Option<String>,
    /// Redirect with 301 instead of 302.
    pub permanent: bool,
    /// Unix ms after this visit's slide; 0 = never.
    pub expires_at: u64,
    /// The link drops a visit's query string instead of passing it on.
    /// Added after version 1 shipped: an answer without it comes from a
    /// node of the release before, which drops every visit's query, and is
    /// read as `true`.
    pub drop_query: bool,
}

impl LinkResolve {
    pub fn new(code: impl Into<String>) -> Self {
        LinkResolve { code: code.into() }
    }

    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(super::link_slot(self.code.as_bytes())))
    }
}

impl Wire for LinkResolve {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.code.as_bytes());
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LinkResolve {
            code: read_code(r, "code")?,
        })
    }
}

impl Wire for ResolveReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.target.as_bytes());
        put_opt_str(out, &self.ios);
        put_opt_str(out, &self.android);
        out.put_bool(self.permanent);
        out.put_u64(self.expires_at);
        out.put_bool(self.drop_query);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ResolveReply {
            target: read_url(r, "target")?,
            ios: read_opt_url(r, "ios url")?,
            android: read_opt_url(r, "android url")?,
            permanent: r.bool("permanent")?,
            expires_at: r.u64("expires at")?,
            drop_query: r.added(|r| r.bool("drop query"))?.unwrap_or(true),
        })
    }
}
