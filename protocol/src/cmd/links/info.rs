use super::{put_opt_str, read_code, read_opt_url, read_url};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_CODE, MAX_KEY, MAX_TEXT};
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// Days of per-day visit counts a link keeps (today and the 29 before).
pub const STATS_DAYS: u32 = 30;

/// `LINK_INFO code` → everything about a live link. Does not count a visit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    pub code: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkInfoReply {
    pub code: String,
    pub short_url: String,
    pub target: String,
    pub account: Bytes,
    pub ios: Option<String>,
    pub android: Option<String>,
    pub permanent: bool,
    /// A custom alias rather than a generated code.
    pub alias: bool,
    /// Unix ms.
    pub created_at: u64,
    /// Unix ms; 0 = never.
    pub expires_at: u64,
    /// The sliding TTL each visit renews; 0 = none.
    pub ttl_ms: u64,
    pub visits: u64,
    /// Unix ms of the last visit; 0 = never visited.
    pub last_visit: u64,
    /// (unix day = ms / 86,400,000, visits) for the days of the last
    /// [`STATS_DAYS`] that had visits, oldest first.
    pub daily: Vec<(u32, u64)>,
    /// The link drops a visit's query string instead of passing it on.
    /// Added after version 1 shipped: read as `true` from a node of the
    /// release before, which drops every visit's query (as in
    /// [`ResolveReply`](super::ResolveReply)).
    pub drop_query: bool,
}

impl LinkInfo {
    pub fn new(code: impl Into<String>) -> Self {
        LinkInfo { code: code.into() }
    }

    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(super::link_slot(self.code.as_bytes())))
    }
}

impl Wire for LinkInfo {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.code.as_bytes());
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LinkInfo {
            code: read_code(r, "code")?,
        })
    }
}

impl Wire for LinkInfoReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.code.as_bytes());
        out.put_lp(self.short_url.as_bytes());
        out.put_lp(self.target.as_bytes());
        out.put_lp(&self.account);
        put_opt_str(out, &self.ios);
        put_opt_str(out, &self.android);
        out.put_bool(self.permanent);
        out.put_bool(self.alias);
        out.put_u64(self.created_at);
        out.put_u64(self.expires_at);
        out.put_u64(self.ttl_ms);
        out.put_u64(self.visits);
        out.put_u64(self.last_visit);
        out.put_count(self.daily.len());
        for (day, n) in &self.daily {
            out.put_u32(*day);
            out.put_u64(*n);
        }
        out.put_bool(self.drop_query);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LinkInfoReply {
            code: r.string("code", MAX_CODE)?,
            short_url: r.string("short url", MAX_TEXT)?,
            target: read_url(r, "target")?,
            account: r.bytes("account", MAX_KEY)?,
            ios: read_opt_url(r, "ios url")?,
            android: read_opt_url(r, "android url")?,
            permanent: r.bool("permanent")?,
            alias: r.bool("alias")?,
            created_at: r.u64("created at")?,
            expires_at: r.u64("expires at")?,
            ttl_ms: r.u64("ttl")?,
            visits: r.u64("visits")?,
            last_visit: r.u64("last visit")?,
            daily: r.list("daily visits", STATS_DAYS as usize, 12, |r| {
                Ok((r.u32("day")?, r.u64("visits")?))
            })?,
            drop_query: r.added(|r| r.bool("drop query"))?.unwrap_or(true),
        })
    }
}
