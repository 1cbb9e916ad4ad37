//! `LINK.SHORTEN`, `LINK.ALIAS`, `LINK.RESOLVE`, `LINK.INFO`, `LINK.UPDATE`,
//! `LINK.DELETE`: short links (`daemon/src/links/`).
//!
//! No command declares a key: a generated code carries its slot in its
//! digits, an alias shaped like one (5–8 base62 characters) is routed the
//! same way, and a new link without an alias lives in the slot of
//! (account, url). None of them is the CRC16 of one argument, so a cluster
//! client is sent on by `MOVED`.

use super::{once, ArgError, Args, Parsed, Value, Writer};
use rush_protocol::cmd::{
    AppLinkChange, LinkDelete, LinkInfo, LinkInfoReply, LinkResolve, LinkShorten, LinkUpdate,
    ResolveReply, ShortenReply,
};
use rush_protocol::{ErrorCode, Reply, RushError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// LINK.SHORTEN: the new (or reused) code.
    Shortened,
    /// LINK.ALIAS: the new link, or null when the alias is taken.
    Aliased,
    Resolved,
    Info,
    Updated,
    Deleted,
}

pub(super) fn decode(name: &str, a: &mut Args) -> Option<Parsed<Shape>> {
    Some(match name {
        "link.shorten" => shorten(a, false),
        "link.alias" => shorten(a, true),
        "link.resolve" => one_code(a).map(|code| (LinkResolve { code }.into(), Shape::Resolved)),
        "link.info" => one_code(a).map(|code| (LinkInfo { code }.into(), Shape::Info)),
        "link.update" => update(a),
        "link.delete" => one_code(a).map(|code| (LinkDelete { code }.into(), Shape::Deleted)),
        _ => return None,
    })
}

fn one_code(a: &mut Args) -> Result<String, ArgError> {
    let code = a.text("the code")?;
    a.end()?;
    Ok(code)
}

/// `LINK.SHORTEN url [options]`, `LINK.ALIAS alias url [options]`.
/// Options: `ACCOUNT a`, `LEN n` (shorten only), `EX s` | `PX ms` |
/// `PERSIST`, `IOS url`, `ANDROID url`, `REUSE` (shorten only), `PERMANENT`,
/// `DROPQUERY`.
fn shorten(a: &mut Args, alias: bool) -> Parsed<Shape> {
    let alias = if alias {
        Some(a.text("the alias")?)
    } else {
        None
    };
    let mut s = LinkShorten::new(a.text("the URL")?);
    let (mut account, mut length, mut ttl, mut ios, mut android) = (None, None, None, None, None);
    let (mut reuse, mut permanent, mut drop_query) = (false, false, false);
    while !a.is_empty() {
        match a.keyword()?.as_slice() {
            b"LEN" | b"REUSE" if alias.is_some() => {
                return Err(ArgError::Invalid(
                    "LINK.ALIAS takes no LEN or REUSE: an alias names a new link of its own".into(),
                ))
            }
            b"ACCOUNT" => once(&mut account, a.bytes()?)?,
            b"LEN" => {
                let n = a.u64()?;
                let n = u8::try_from(n).map_err(|_| ArgError::NotInteger)?;
                once(&mut length, n)?
            }
            b"EX" => once(&mut ttl, a.ttl_ms(true)?)?,
            b"PX" => once(&mut ttl, a.ttl_ms(false)?)?,
            b"PERSIST" => once(&mut ttl, 0)?,
            b"IOS" => once(&mut ios, a.text("the iOS URL")?)?,
            b"ANDROID" => once(&mut android, a.text("the Android URL")?)?,
            b"REUSE" if !reuse => reuse = true,
            b"PERMANENT" if !permanent => permanent = true,
            b"DROPQUERY" if !drop_query => drop_query = true,
            _ => return Err(ArgError::Syntax),
        }
    }
    s.account = account.unwrap_or_default();
    s.length = length.unwrap_or(0);
    s.ttl_ms = ttl;
    s.ios = ios;
    s.android = android;
    s.reuse = reuse;
    s.permanent = permanent;
    s.drop_query = drop_query;
    let shape = if alias.is_some() {
        Shape::Aliased
    } else {
        Shape::Shortened
    };
    s.alias = alias;
    Ok((s.into(), shape))
}

/// `LINK.UPDATE code [URL u] [EX s|PX ms|PERSIST] [IOS u|NOIOS]
/// [ANDROID u|NOANDROID] [PERMANENT|TEMPORARY] [DROPQUERY|PASSQUERY]`.
fn update(a: &mut Args) -> Parsed<Shape> {
    let mut u = LinkUpdate::new(a.text("the code")?);
    let (mut ios, mut android) = (None, None);
    while !a.is_empty() {
        match a.keyword()?.as_slice() {
            b"URL" => once(&mut u.url, a.text("the URL")?)?,
            b"EX" => once(&mut u.ttl_ms, a.ttl_ms(true)?)?,
            b"PX" => once(&mut u.ttl_ms, a.ttl_ms(false)?)?,
            b"PERSIST" => once(&mut u.ttl_ms, 0)?,
            b"IOS" => once(&mut ios, AppLinkChange::Set(a.text("the iOS URL")?))?,
            b"NOIOS" => once(&mut ios, AppLinkChange::Clear)?,
            b"ANDROID" => once(&mut android, AppLinkChange::Set(a.text("the Android URL")?))?,
            b"NOANDROID" => once(&mut android, AppLinkChange::Clear)?,
            b"PERMANENT" => once(&mut u.permanent, true)?,
            b"TEMPORARY" => once(&mut u.permanent, false)?,
            b"DROPQUERY" => once(&mut u.drop_query, true)?,
            b"PASSQUERY" => once(&mut u.drop_query, false)?,
            _ => return Err(ArgError::Syntax),
        }
    }
    // At least one option follows the code (the table's arity), and every
    // option is a change.
    u.ios = ios.unwrap_or_default();
    u.android = android.unwrap_or_default();
    Ok((u.into(), Shape::Updated))
}

pub(super) fn render(w: &mut Writer, shape: &Shape, result: Result<Reply, RushError>) {
    match (shape, result) {
        (Shape::Shortened | Shape::Aliased, Ok(Reply::LinkShorten(r))) => shortened(w, &r),
        // An alias that is taken: null, as SET NX answers.
        (Shape::Aliased, Err(e)) if e.code == ErrorCode::Conflict => w.null(),
        (Shape::Resolved, Ok(Reply::LinkResolve(r))) => resolved(w, &r),
        (Shape::Info, Ok(Reply::LinkInfo(i))) => info(w, &i),
        (Shape::Updated, Ok(Reply::LinkUpdate(expires_at))) => w.u64(expires_at),
        (Shape::Deleted, Ok(Reply::LinkDelete(deleted))) => w.flag(deleted),
        // No live link of that code.
        (Shape::Resolved | Shape::Info | Shape::Updated, Err(e))
            if e.code == ErrorCode::NotFound =>
        {
            w.null()
        }
        (_, Err(e)) => w.error(&e),
        (_, Ok(_)) => w.unexpected(),
    }
}

fn shortened(w: &mut Writer, r: &ShortenReply) {
    w.record(&[
        ("code", Value::Bulk(r.code.as_bytes())),
        ("short_url", Value::Bulk(r.short_url.as_bytes())),
        ("reused", Value::Flag(r.reused)),
        ("expires_at_ms", Value::U64(r.expires_at)),
    ]);
}

fn resolved(w: &mut Writer, r: &ResolveReply) {
    w.record(&[
        ("target", Value::Bulk(r.target.as_bytes())),
        ("ios", Value::OptBulk(r.ios.as_deref().map(str::as_bytes))),
        (
            "android",
            Value::OptBulk(r.android.as_deref().map(str::as_bytes)),
        ),
        ("redirect", Value::Int(redirect(r.permanent))),
        ("query_passthrough", Value::Flag(!r.drop_query)),
        ("expires_at_ms", Value::U64(r.expires_at)),
    ]);
}

fn info(w: &mut Writer, i: &LinkInfoReply) {
    let fields = [
        ("code", Value::Bulk(i.code.as_bytes())),
        ("short_url", Value::Bulk(i.short_url.as_bytes())),
        ("target", Value::Bulk(i.target.as_bytes())),
        ("account", Value::Bulk(&i.account)),
        ("ios", Value::OptBulk(i.ios.as_deref().map(str::as_bytes))),
        (
            "android",
            Value::OptBulk(i.android.as_deref().map(str::as_bytes)),
        ),
        ("redirect", Value::Int(redirect(i.permanent))),
        ("query_passthrough", Value::Flag(!i.drop_query)),
        ("alias", Value::Flag(i.alias)),
        ("created_at_ms", Value::U64(i.created_at)),
        ("expires_at_ms", Value::U64(i.expires_at)),
        ("ttl_ms", Value::U64(i.ttl_ms)),
        ("visits", Value::U64(i.visits)),
        ("last_visit_ms", Value::U64(i.last_visit)),
    ];
    w.map(fields.len() + 1);
    w.fields(&fields);
    // Unix day (ms / 86,400,000) → visits, oldest first.
    w.field("daily");
    w.map(i.daily.len());
    for (day, visits) in &i.daily {
        w.int(i64::from(*day));
        w.u64(*visits);
    }
}

fn redirect(permanent: bool) -> i64 {
    if permanent {
        301
    } else {
        302
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{refused, run};
    use super::super::ServiceShape;
    use super::*;
    use bytes::Bytes;
    use rush_protocol::Request;

    fn shorten_of(line: &str) -> LinkShorten {
        match run(line) {
            Ok((Request::LinkShorten(s), _)) => s,
            other => panic!("{line}: {other:?}"),
        }
    }

    fn update_of(line: &str) -> LinkUpdate {
        match run(line) {
            Ok((Request::LinkUpdate(u), ServiceShape::Link(Shape::Updated))) => u,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn shorten_options_map_onto_the_request() {
        let s = shorten_of(
            "LINK.SHORTEN https://e.com/x account acme LEN 7 EX 60 IOS app://x ANDROID app://y REUSE PERMANENT DROPQUERY",
        );
        assert_eq!(
            s,
            LinkShorten {
                url: "https://e.com/x".into(),
                account: Bytes::from_static(b"acme"),
                length: 7,
                ttl_ms: Some(60_000),
                alias: None,
                ios: Some("app://x".into()),
                android: Some("app://y".into()),
                reuse: true,
                permanent: true,
                drop_query: true,
            }
        );
        assert_eq!(shorten_of("link.shorten https://e.com/").ttl_ms, None);
        assert_eq!(shorten_of("LINK.SHORTEN u PERSIST").ttl_ms, Some(0));
        assert_eq!(shorten_of("LINK.SHORTEN u PX 1500").ttl_ms, Some(1500));
        let a = shorten_of("LINK.ALIAS promo_1 https://e.com/ EX 5");
        assert_eq!(
            (a.alias.as_deref(), a.url.as_str(), a.ttl_ms),
            (Some("promo_1"), "https://e.com/", Some(5000))
        );
    }

    #[test]
    fn shorten_refuses_bad_options() {
        assert_eq!(
            refused("LINK.SHORTEN u EX 0"),
            "ERR invalid expire time in 'link.shorten' command"
        );
        assert_eq!(
            refused("LINK.SHORTEN u EX -5"),
            "ERR invalid expire time in 'link.shorten' command"
        );
        assert_eq!(
            refused("LINK.SHORTEN u EX soon"),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            refused("LINK.SHORTEN u LEN 300"),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(refused("LINK.SHORTEN u EX 5 PX 5"), "ERR syntax error");
        assert_eq!(
            refused("LINK.SHORTEN u PERMANENT PERMANENT"),
            "ERR syntax error"
        );
        assert_eq!(refused("LINK.SHORTEN u FAST"), "ERR syntax error");
        assert_eq!(
            refused("LINK.SHORTEN u ACCOUNT"),
            "ERR wrong number of arguments for 'link.shorten' command"
        );
        assert!(refused("LINK.ALIAS a u REUSE").contains("takes no LEN or REUSE"));
        assert_eq!(
            refused("LINK.ALIAS a"),
            "ERR wrong number of arguments for 'link.alias' command"
        );
    }

    #[test]
    fn update_options_map_onto_changes() {
        let u = update_of("LINK.UPDATE abcde URL https://e.com/2 PERSIST NOIOS ANDROID app://a TEMPORARY PASSQUERY");
        assert_eq!(
            u,
            LinkUpdate {
                code: "abcde".into(),
                url: Some("https://e.com/2".into()),
                ttl_ms: Some(0),
                ios: AppLinkChange::Clear,
                android: AppLinkChange::Set("app://a".into()),
                permanent: Some(false),
                drop_query: Some(false),
            }
        );
        assert_eq!(update_of("LINK.UPDATE c EX 2").ttl_ms, Some(2000));
        assert_eq!(update_of("LINK.UPDATE c DROPQUERY").drop_query, Some(true));
        assert_eq!(refused("LINK.UPDATE c IOS x NOIOS"), "ERR syntax error");
        assert_eq!(
            refused("LINK.UPDATE c PERMANENT TEMPORARY"),
            "ERR syntax error"
        );
        assert!(refused("LINK.UPDATE c").starts_with("ERR wrong number of arguments"));
    }

    #[test]
    fn one_code_commands() {
        assert!(matches!(
            run("LINK.RESOLVE abcde"),
            Ok((Request::LinkResolve(r), ServiceShape::Link(Shape::Resolved))) if r.code == "abcde"
        ));
        assert!(matches!(
            run("link.info abcde"),
            Ok((Request::LinkInfo(_), ServiceShape::Link(Shape::Info)))
        ));
        assert!(matches!(
            run("LINK.DELETE abcde"),
            Ok((Request::LinkDelete(_), ServiceShape::Link(Shape::Deleted)))
        ));
        assert!(refused("LINK.RESOLVE a b").starts_with("ERR wrong number of arguments"));
    }
}
