//! Short links (opcodes 0x30–0x3f): one file per request, and the code
//! format every client needs to route (see [`code`]).

pub mod code;
mod delete;
mod info;
mod resolve;
mod shorten;
mod shorten_batch;
mod update;

pub use code::{link_slot, Code};
pub use delete::LinkDelete;
pub use info::{LinkInfo, LinkInfoReply, STATS_DAYS};
pub use resolve::{LinkResolve, ResolveReply};
pub use shorten::{LinkShorten, ShortenReply};
pub use shorten_batch::{BatchLink, BatchShortenItem, LinkShortenBatch, ShortenBatchReply};
pub use update::{AppLinkChange, LinkUpdate};

use crate::codec::{DecodeError, Reader, WriteExt};
use crate::limits::{MAX_CODE, MAX_URL};
use bytes::{BufMut, BytesMut};

/// A target or app URL (≤ [`MAX_URL`] bytes, UTF-8). Its content (scheme,
/// characters, percent-encoding) is checked by the server, which knows the
/// configured app schemes.
pub(crate) fn read_url(r: &mut Reader, field: &'static str) -> Result<String, DecodeError> {
    r.string(field, MAX_URL)
}

pub(crate) fn read_opt_url(
    r: &mut Reader,
    field: &'static str,
) -> Result<Option<String>, DecodeError> {
    r.option(field, |r| read_url(r, field))
}

/// A code or alias, checked for shape (see [`code::check_code`]).
pub(crate) fn read_code(r: &mut Reader, field: &'static str) -> Result<String, DecodeError> {
    let code = r.string(field, MAX_CODE)?;
    code::check_code(field, &code)?;
    Ok(code)
}

/// Code length: 0 = the server's default, else 5–8.
pub(crate) fn read_length(r: &mut Reader) -> Result<u8, DecodeError> {
    let len = r.u8("code length")?;
    if len != 0 && !(code::MIN_CODE_LEN..=code::MAX_CODE_LEN).contains(&len) {
        return Err(DecodeError::invalid(
            "code length",
            format!("{len} (use 5-8, or 0 for the server default)"),
        ));
    }
    Ok(len)
}

pub(crate) fn put_opt_str(out: &mut BytesMut, v: &Option<String>) {
    match v {
        None => out.put_u8(0),
        Some(s) => {
            out.put_u8(1);
            out.put_lp(s.as_bytes());
        }
    }
}

pub(crate) fn put_opt_u64(out: &mut BytesMut, v: Option<u64>) {
    match v {
        None => out.put_u8(0),
        Some(n) => {
            out.put_u8(1);
            out.put_u64(n);
        }
    }
}

pub(crate) fn read_opt_u64(
    r: &mut Reader,
    field: &'static str,
) -> Result<Option<u64>, DecodeError> {
    r.option(field, |r| r.u64(field))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::Wire;
    use crate::limits::MAX_URL;
    use crate::{Command, Target};
    use bytes::Bytes;

    fn round_trip<C: Command + std::fmt::Debug + PartialEq>(c: C) {
        assert_eq!(C::decode_body(c.to_bytes()).unwrap(), c);
    }

    #[test]
    fn requests_round_trip() {
        round_trip(LinkShorten {
            url: "https://e.com/x".into(),
            account: Bytes::from_static(b"t"),
            length: 8,
            ttl_ms: Some(0),
            alias: Some("promo_1".into()),
            ios: Some("app://x".into()),
            android: Some("https://a.e.com/x".into()),
            reuse: false,
            permanent: true,
            drop_query: true,
        });
        round_trip(LinkShortenBatch {
            slot: 16383,
            account: Bytes::new(),
            items: vec![BatchShortenItem::new("https://e.com/1"); 3],
        });
        round_trip(LinkUpdate {
            url: Some("https://e.com/2".into()),
            ios: AppLinkChange::Clear,
            android: AppLinkChange::Set("app://y".into()),
            permanent: Some(false),
            ..LinkUpdate::new("abc")
        });
        round_trip(LinkUpdate {
            drop_query: Some(true),
            ..LinkUpdate::new("abc")
        });
        round_trip(LinkDelete::new("abcde"));
        round_trip(LinkInfo::new("abcde"));
    }

    #[test]
    fn bad_bodies_are_refused_at_decode() {
        let alias_and_reuse = LinkShorten {
            alias: Some("x".into()),
            reuse: true,
            ..LinkShorten::new("https://e.com/")
        };
        assert!(LinkShorten::decode_body(alias_and_reuse.to_bytes()).is_err());
        let long = LinkShorten::new("h".repeat(MAX_URL + 1));
        assert!(matches!(
            LinkShorten::decode_body(long.to_bytes()),
            Err(DecodeError::TooLarge { .. })
        ));
        let bad_slot = LinkShortenBatch {
            slot: 16384,
            account: Bytes::new(),
            items: vec![BatchShortenItem::new("https://e.com/")],
        };
        assert!(LinkShortenBatch::decode_body(bad_slot.to_bytes()).is_err());
        let empty = LinkShortenBatch::default();
        assert!(LinkShortenBatch::decode_body(empty.to_bytes()).is_err());
        assert!(LinkUpdate::decode_body(LinkUpdate::new("abc").to_bytes()).is_err());
        assert!(LinkResolve::decode_body(LinkResolve::new("a b").to_bytes()).is_err());
        let mut flags = LinkShorten::new("https://e.com/").to_bytes().to_vec();
        *flags.last_mut().unwrap() = 0x80;
        assert!(LinkShorten::decode_body(Bytes::from(flags)).is_err());
    }

    /// A LINK_UPDATE from a sender that predates `drop_query` ends after
    /// `permanent`: it still decodes, and keeps the link's setting. One
    /// that keeps it is sent that way, so the release before reads it.
    #[test]
    fn update_without_drop_query_decodes() {
        let u = LinkUpdate {
            permanent: Some(true),
            ..LinkUpdate::new("abcde")
        };
        let body = u.to_bytes();
        assert_eq!(&body[body.len() - 2..], [1, 1], "ends with permanent");
        assert_eq!(LinkUpdate::decode_body(body).unwrap(), u);
        // An explicit "keep" (a sender of this release's first builds).
        let mut keep = u.to_bytes().to_vec();
        keep.push(0);
        assert_eq!(LinkUpdate::decode_body(Bytes::from(keep)).unwrap(), u);
        // Only drop_query, from a new sender.
        let only = LinkUpdate {
            drop_query: Some(false),
            ..LinkUpdate::new("abcde")
        };
        assert_eq!(LinkUpdate::decode_body(only.to_bytes()).unwrap(), only);
        // A body cut inside the field is still truncated, not "keep".
        let cut = only.to_bytes();
        assert!(LinkUpdate::decode_body(cut.slice(..cut.len() - 1)).is_err());
    }

    /// LINK_RESOLVE and LINK_INFO answers of a node of the release before
    /// end before `drop_query`: it dropped every visit's query string, and
    /// that is how they read.
    #[test]
    fn replies_without_drop_query_read_as_dropping() {
        let resolve = ResolveReply {
            target: "https://e.com/".into(),
            ios: None,
            android: None,
            permanent: false,
            expires_at: 0,
            drop_query: false,
        };
        let body = resolve.to_bytes();
        let old = ResolveReply::decode_reply_body(body.slice(..body.len() - 1)).unwrap();
        assert_eq!(
            old,
            ResolveReply {
                drop_query: true,
                ..resolve.clone()
            }
        );
        assert_eq!(ResolveReply::decode_reply_body(body).unwrap(), resolve);
        let info = LinkInfoReply {
            code: "abcde".into(),
            target: "https://e.com/".into(),
            daily: vec![(20_453, 3)],
            ..LinkInfoReply::default()
        };
        let body = info.to_bytes();
        let old = LinkInfoReply::decode_reply_body(body.slice(..body.len() - 1)).unwrap();
        assert!(old.drop_query);
        assert_eq!(old.daily, info.daily);
        assert_eq!(LinkInfoReply::decode_reply_body(body).unwrap(), info);
    }

    #[test]
    fn routing() {
        let s = LinkShorten {
            account: Bytes::from_static(b"acme"),
            ..LinkShorten::new("https://e.com/")
        };
        assert_eq!(
            s.target().unwrap(),
            Target::Slot(crate::parts_slot(&[b"acme", b"https://e.com/"]))
        );
        let a = LinkShorten {
            alias: Some("Promo".into()),
            ..s
        };
        assert_eq!(a.target().unwrap(), Target::Slot(link_slot(b"Promo")));
        let code = Code::generated(99, 7, 12345);
        assert_eq!(
            LinkResolve::new(code.as_str()).target().unwrap(),
            Target::Slot(99)
        );
    }
}
