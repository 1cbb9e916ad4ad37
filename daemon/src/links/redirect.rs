//! The redirect listener (`links.redirect_listen`, `--redirect ADDR`; off by
//! default): `GET /{code}` answers 302 (301 for permanent links) with the
//! target, a deep link for iOS/Android visitors when the link has an app URL
//! for their platform, or a small 404 page; `GET /{code}/qr` is a QR code of
//! the short URL (PNG, or SVG with `?format=svg`).
//!
//! A visit's query string (`/CODE?utm_source=x`) is passed on to the target,
//! after the target's own parameters (`https://e.com/p?id=1&utm_source=x`,
//! a fragment stays last), as Shlink, Dub and Bitly do — unless the link
//! drops queries (`drop_query`, `rush shorten --no-query-passthrough`). Keys
//! are not de-duplicated: both values reach the target, which decides. App
//! URLs are not touched (an app's deep link has its own grammar); the app
//! page's fall-back to the website is the target with the query.
//!
//! Each request becomes a LINK_RESOLVE (or LINK_INFO for QR codes) job on
//! the shard of the code's slot, answered through a oneshot channel — the
//! same path as a protocol request, so visits are counted and expiry slides.
//!
//! Caching, deliberately:
//!
//! - **302** (a link that may change: LINK_UPDATE, delete, expiry) is
//!   `Cache-Control: private, no-store`: every visit reaches rushd, is
//!   counted and slides the expiry.
//! - **301** (`--permanent`) is `public, max-age=N`, N =
//!   `links.permanent_cache_secs` (an hour by default) but never past the
//!   link's expiry, so a cache stops answering before the link could be
//!   gone (or before its expiry would have slid). Visits a cache answers
//!   are not counted; an update or delete reaches them up to N later.
//!   `permanent_cache_secs = 0` makes it `private, no-store` like a 302.
//! - **Answers that depend on the visitor's platform** (the link has an
//!   iOS or Android URL) carry `Vary: User-Agent`, whichever platform asked,
//!   and are never stored by shared caches: a 301 is `private, max-age=N`,
//!   everything else `private, no-store`. Many CDNs ignore `Vary:
//!   User-Agent` or normalise the header, and would hand the iPhone answer
//!   to desktops; a browser's own cache is safe, its user agent is fixed.
//! - The app-opening page, 404 and error pages are `private, no-store`;
//!   QR codes are `public, max-age=300` (they show the short URL, which
//!   never changes for a code).

mod pages;

use crate::server::NodeShared;
use crate::shard::route::shard_of_slot;
use crate::shard::{Job, ReplyTo};
use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use pages::{app_page, error_page, not_found};
#[cfg(test)]
use pages::{html_escape, js_string};
use rush_protocol::cmd::links::code::check_code;
use rush_protocol::cmd::{LinkInfo, LinkResolve, ResolveReply};
use rush_protocol::{ErrorCode, Reply, Request, RushError, Target};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

/// Serve until `shutdown` turns true, then finish requests in flight.
pub async fn serve(
    listener: TcpListener,
    node: Arc<NodeShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let app = Router::new()
        .route("/{code}", get(redirect))
        .route("/{code}/qr", get(qr))
        .fallback(fallback)
        .with_state(node);
    let stop = async move {
        let _ = shutdown.wait_for(|stop| *stop).await;
    };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
    {
        tracing::error!(error = %e, "redirect listener failed");
    }
}

/// How long a redirect waits for a code's slot to finish moving between
/// nodes (a slot is frozen for milliseconds) before answering 503.
const MOVING_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Run a link request where its code lives: on the shard that owns it, or,
/// in a cluster, on the node that does (forwarded over a pooled peer
/// connection, so a load balancer may send any visit to any node).
async fn call(node: &NodeShared, request: Request) -> Result<Reply, RushError> {
    let Target::Slot(slot) = request.target()? else {
        return Err(RushError::internal("a link request without a slot"));
    };
    let until = std::time::Instant::now() + MOVING_WAIT;
    loop {
        let routed = match node.cluster.routing.check(slot) {
            Ok(()) => call_local(node, slot, request.clone()).await,
            Err(e) => Err(e),
        };
        match routed {
            Err(e) if e.code == ErrorCode::Moved => return forward(node, e, request).await,
            Err(e) if e.code == ErrorCode::TryAgain && std::time::Instant::now() < until => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            other => return other,
        }
    }
}

/// Ask the node a MOVED answer names.
async fn forward(
    node: &NodeShared,
    moved: RushError,
    request: Request,
) -> Result<Reply, RushError> {
    let rush_protocol::ErrorDetail::Redirect { addr, .. } = &moved.detail else {
        return Err(moved);
    };
    let peers = &node.cluster.peers;
    match request {
        Request::LinkResolve(r) => peers.call_pooled(addr, &r).await.map(Reply::LinkResolve),
        Request::LinkInfo(r) => peers.call_pooled(addr, &r).await.map(Reply::LinkInfo),
        other => {
            return Err(RushError::internal(format!(
                "{} is not forwarded",
                other.opcode().name()
            )))
        }
    }
    .map_err(RushError::from)
}

async fn call_local(node: &NodeShared, slot: u16, request: Request) -> Result<Reply, RushError> {
    let (tx, rx) = oneshot::channel();
    let shard = &node.shards[shard_of_slot(slot, node.shards.len())];
    shard
        .submit(Job {
            request,
            reply: ReplyTo::Once(tx),
        })
        .map_err(|(_, e)| e)?;
    rx.await
        .map_err(|_| RushError::unavailable("the shard stopped before answering"))?
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Platform {
    Ios,
    Android,
    Other,
}

fn platform(headers: &HeaderMap) -> Platform {
    let ua = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if ua.contains("iPhone") || ua.contains("iPad") || ua.contains("iPod") {
        Platform::Ios
    } else if ua.contains("Android") {
        Platform::Android
    } else {
        Platform::Other
    }
}

async fn redirect(
    State(node): State<Arc<NodeShared>>,
    Path(code): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let response = match check_code("code", &code) {
        Err(_) => not_found(),
        Ok(()) => match call(&node, LinkResolve::new(code).into()).await {
            Ok(Reply::LinkResolve(mut link)) => {
                let permanent = node.config.links.permanent_cache_secs;
                let cache = Cache::for_link(&link, node.clock.now_ms(), permanent);
                // Only a visit with a query costs anything here.
                if let Some(query) = query.as_deref().filter(|q| !q.is_empty()) {
                    if !link.drop_query {
                        link.target = with_query(&link.target, query);
                    }
                }
                visit(link, platform(&headers), cache)
            }
            Ok(_) => error_page(StatusCode::INTERNAL_SERVER_ERROR, "unexpected answer"),
            Err(e) => from_error(&e),
        },
    };
    node.metrics.links.redirect(response.status().as_u16());
    response
}

/// What caches may do with one link's answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cache {
    /// The answer depends on the User-Agent (the link has an app link).
    by_platform: bool,
    /// How long a 301 may be kept, in seconds (0: not at all).
    permanent_secs: u64,
}

impl Cache {
    /// `now` and the link's `expires_at` in Unix ms; `configured` is
    /// `links.permanent_cache_secs`.
    fn for_link(link: &ResolveReply, now: u64, configured: u64) -> Cache {
        let left = match link.expires_at {
            0 => u64::MAX,
            at => at.saturating_sub(now) / 1000,
        };
        Cache {
            by_platform: link.ios.is_some() || link.android.is_some(),
            permanent_secs: configured.min(left),
        }
    }

    fn headers(self, status: StatusCode, h: &mut HeaderMap) {
        let secs = self.permanent_secs;
        let control = if status != StatusCode::MOVED_PERMANENTLY || secs == 0 {
            HeaderValue::from_static(NO_STORE)
        } else if self.by_platform {
            header_value(format!("private, max-age={secs}"))
        } else {
            header_value(format!("public, max-age={secs}"))
        };
        h.insert(header::CACHE_CONTROL, control);
        if self.by_platform {
            h.insert(header::VARY, HeaderValue::from_static("User-Agent"));
        }
    }
}

pub(super) const NO_STORE: &str = "private, no-store";

fn header_value(s: String) -> HeaderValue {
    HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static(NO_STORE))
}

/// Where a visitor goes: the app link of their platform, else the target.
fn visit(link: ResolveReply, platform: Platform, cache: Cache) -> Response {
    let app = match platform {
        Platform::Ios => link.ios.as_deref(),
        Platform::Android => link.android.as_deref(),
        Platform::Other => None,
    };
    let mut r = match app {
        // Universal links / App Links are web URLs the OS hands to the app.
        Some(app) if is_web(app) => redirect_to(app, StatusCode::FOUND),
        // A custom scheme: a page that opens the app and falls back to the
        // target when the app isn't installed.
        Some(app) => app_page(app, &link.target),
        None if link.permanent => redirect_to(&link.target, StatusCode::MOVED_PERMANENTLY),
        None => redirect_to(&link.target, StatusCode::FOUND),
    };
    let status = r.status();
    cache.headers(status, r.headers_mut());
    r
}

/// `target` with a visit's raw `query` after its own parameters (and
/// before its fragment). The query's percent-escapes are kept as sent;
/// bytes a query can't hold are escaped. A target that doesn't parse (only
/// possible for records older than today's validation) is left as it is:
/// the visitor still reaches it, without the parameters.
fn with_query(target: &str, query: &str) -> String {
    let query = query.trim_start_matches('&');
    let Ok(mut url) = url::Url::parse(target) else {
        return target.to_string();
    };
    if query.is_empty() {
        return target.to_string();
    }
    let merged = match url.query().filter(|own| !own.is_empty()) {
        None => query.to_string(),
        Some(own) if own.ends_with('&') => format!("{own}{query}"),
        Some(own) => format!("{own}&{query}"),
    };
    url.set_query(Some(&merged));
    url.into()
}

fn is_web(url: &str) -> bool {
    let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

fn redirect_to(url: &str, status: StatusCode) -> Response {
    let mut r = status.into_response();
    r.headers_mut().insert(header::LOCATION, location(url));
    r
}

/// A header value for a validated URL: ASCII is kept as is (validation
/// already refused controls and whitespace); other bytes are percent-encoded.
fn location(url: &str) -> HeaderValue {
    let mut s = String::with_capacity(url.len());
    for b in url.bytes() {
        if b.is_ascii_graphic() {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static("/"))
}

fn from_error(e: &RushError) -> Response {
    match e.code {
        ErrorCode::NotFound => not_found(),
        ErrorCode::Busy | ErrorCode::Unavailable | ErrorCode::TryAgain => {
            let mut r = error_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Busy; try again in a moment.",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            r
        }
        _ => {
            tracing::warn!(error = %e, "redirect failed");
            error_page(StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong.")
        }
    }
}

#[derive(serde::Deserialize)]
struct QrQuery {
    format: Option<String>,
}

async fn qr(
    State(node): State<Arc<NodeShared>>,
    Path(code): Path<String>,
    Query(q): Query<QrQuery>,
) -> Response {
    let svg = match q.format.as_deref() {
        None | Some("png") => false,
        Some("svg") => true,
        Some(_) => {
            return error_page(StatusCode::BAD_REQUEST, "format must be png or svg");
        }
    };
    if check_code("code", &code).is_err() {
        return not_found();
    }
    // LINK_INFO, not RESOLVE: showing a QR code is not a visit.
    let short_url = match call(&node, LinkInfo::new(code).into()).await {
        Ok(Reply::LinkInfo(info)) => info.short_url,
        Ok(_) => return error_page(StatusCode::INTERNAL_SERVER_ERROR, "unexpected answer"),
        Err(e) => return from_error(&e),
    };
    let rendered = if svg {
        super::qr::svg(&short_url).map(|s| ("image/svg+xml", s.into_bytes()))
    } else {
        super::qr::png(&short_url).map(|p| ("image/png", p))
    };
    match rendered {
        Ok((ctype, body)) => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, HeaderValue::from_static(ctype)),
                (
                    header::CACHE_CONTROL,
                    HeaderValue::from_static("public, max-age=300"),
                ),
            ],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "QR rendering failed");
            error_page(StatusCode::INTERNAL_SERVER_ERROR, "QR rendering failed")
        }
    }
}

async fn fallback(State(node): State<Arc<NodeShared>>) -> Response {
    node.metrics.links.redirect(404);
    not_found()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(
            js_string("a\"</script>"),
            "\"a\\u0022\\u003c/script\\u003e\""
        );
        assert_eq!(html_escape("a\"<b>&"), "a&quot;&lt;b&gt;&amp;");
        assert_eq!(
            location("https://e.com/ä").to_str().unwrap(),
            "https://e.com/%C3%A4"
        );
    }

    #[test]
    fn cache_policy() {
        let link = |ios: Option<&str>, expires_at| ResolveReply {
            target: "https://e.com/".into(),
            ios: ios.map(str::to_string),
            android: None,
            permanent: true,
            expires_at,
            drop_query: false,
        };
        let now = 1_000_000_000;
        let answer = |cache: Cache, status| {
            let mut h = HeaderMap::new();
            cache.headers(status, &mut h);
            let get = |k| {
                h.get(k)
                    .map(|v: &HeaderValue| v.to_str().unwrap().to_string())
            };
            (get(header::CACHE_CONTROL).unwrap(), get(header::VARY))
        };
        let moved = StatusCode::MOVED_PERMANENTLY;
        let plain = Cache::for_link(&link(None, 0), now, 3600);
        assert_eq!(answer(plain, moved), ("public, max-age=3600".into(), None));
        assert_eq!(answer(plain, StatusCode::FOUND), (NO_STORE.into(), None));
        // Never cached past the link's expiry.
        let soon = Cache::for_link(&link(None, now + 90_500), now, 3600);
        assert_eq!(answer(soon, moved).0, "public, max-age=90");
        let gone = Cache::for_link(&link(None, now + 500), now, 3600);
        assert_eq!(answer(gone, moved).0, NO_STORE);
        let off = Cache::for_link(&link(None, 0), now, 0);
        assert_eq!(answer(off, moved).0, NO_STORE);
        // Platform-dependent: Vary, and out of shared caches.
        let app = Cache::for_link(&link(Some("myapp://x"), 0), now, 3600);
        let vary = Some("User-Agent".to_string());
        assert_eq!(
            answer(app, moved),
            ("private, max-age=3600".into(), vary.clone())
        );
        assert_eq!(
            answer(app, StatusCode::FOUND),
            (NO_STORE.into(), vary.clone())
        );
        assert_eq!(answer(app, StatusCode::OK), (NO_STORE.into(), vary));
    }

    #[test]
    fn queries_merge_after_the_targets_own() {
        let merge = with_query;
        assert_eq!(merge("https://e.com/p", "utm=x"), "https://e.com/p?utm=x");
        assert_eq!(
            merge("https://e.com/p?id=1", "utm=x&b=%20y"),
            "https://e.com/p?id=1&utm=x&b=%20y"
        );
        assert_eq!(
            merge("https://e.com/p?id=1#top", "utm=x"),
            "https://e.com/p?id=1&utm=x#top"
        );
        assert_eq!(merge("https://e.com/p?", "utm=x"), "https://e.com/p?utm=x");
        assert_eq!(
            merge("https://e.com/p?id=1&", "&utm=x"),
            "https://e.com/p?id=1&utm=x"
        );
        // Escaped, not passed raw; an existing escape is not escaped again.
        assert_eq!(
            merge("https://e.com/", "q=a\"b%41"),
            "https://e.com/?q=a%22b%41"
        );
        // Nothing to add: the target exactly as stored.
        assert_eq!(merge("https://E.com/p?id=1", "&"), "https://E.com/p?id=1");
    }

    #[test]
    fn platforms() {
        let ua = |s: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::USER_AGENT, HeaderValue::from_static(s));
            platform(&h)
        };
        assert_eq!(
            ua("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X)"),
            Platform::Ios
        );
        assert_eq!(
            ua("Mozilla/5.0 (Linux; Android 14; Pixel 8)"),
            Platform::Android
        );
        assert_eq!(ua("curl/8.0"), Platform::Other);
    }
}
