//! Short links over real HTTP against a real rushd: the short URL names the
//! redirect listener the node actually runs (and says so when a configured
//! one can't be right), caches get a deliberate policy and `Vary:
//! User-Agent` whenever the answer depends on it, and URLs a browser would
//! refuse are refused at shorten time.

mod common;

use common::{http, Spawned, TestNode, ANDROID, DESKTOP, IPHONE};
use rush_client::protocol::cmd::{AppLinkChange, BatchShortenItem, LinkShorten, LinkUpdate};
use rush_client::protocol::ErrorCode;
use rush_client::{Client, ClientError};
use std::net::SocketAddr;

fn header(h: &hyper::HeaderMap, name: hyper::header::HeaderName) -> Option<String> {
    h.get(name).map(|v| v.to_str().unwrap().to_string())
}

/// A node whose redirect listener runs on a port of its own, with the app
/// scheme `myapp` allowed.
async fn redirecting_node() -> TestNode {
    TestNode::start_with(|c| {
        c.links.redirect_listen = "127.0.0.1:0".into();
        c.links.app_schemes = vec!["myapp".into()];
    })
    .await
}

fn redirects(node: &TestNode) -> SocketAddr {
    node.running().redirect_addr().expect("redirects on")
}

/// A new link's code.
async fn shorten(c: &Client, req: LinkShorten) -> String {
    c.shorten_with(req).await.unwrap().code
}

/// A GET of `path` from the redirect listener at `addr`: the status and
/// where it sends the visitor (`Location`).
async fn location(addr: SocketAddr, path: &str, ua: Option<&str>) -> (u16, Option<String>) {
    let (status, h, _) = http(addr, path, ua).await;
    (status, header(&h, hyper::header::LOCATION))
}

/// What [`location`] answers for a redirect to `to`.
fn moved(status: u16, to: &str) -> (u16, Option<String>) {
    (status, Some(to.to_string()))
}

/// A visit to link `code` as `ua`: the status, `Cache-Control` and `Vary`.
async fn caching(addr: SocketAddr, code: &str, ua: &str) -> (u16, String, Option<String>) {
    let (status, h, _) = http(addr, &format!("/{code}"), Some(ua)).await;
    (
        status,
        header(&h, hyper::header::CACHE_CONTROL).expect("Cache-Control on every answer"),
        header(&h, hyper::header::VARY),
    )
}

/// The text of the QR code a PNG holds.
fn qr_text(png: &[u8]) -> String {
    let img = image::load_from_memory(png).unwrap().to_luma8();
    let mut prepared = rqrr::PreparedImage::prepare(img);
    let grids = prepared.detect_grids();
    assert_eq!(grids.len(), 1, "one QR code");
    grids[0].decode().unwrap().1
}

#[tokio::test]
async fn short_urls_and_qr_codes_name_the_redirect_listener_as_bound() {
    // links.base_url not set, the redirect listener on a port the kernel
    // picks: the short URL must carry that port, not 7381.
    let node = TestNode::start_with(|c| c.links.redirect_listen = "127.0.0.1:0".into()).await;
    let redirect = redirects(&node);
    assert_ne!(redirect.port(), 7381);
    let base = format!("http://{redirect}/");
    assert_eq!(node.running().base_url(), base);

    let link = node
        .client
        .shorten("https://example.com/sale")
        .await
        .unwrap();
    assert_eq!(link.short_url, format!("{base}{}", link.code));
    let batch = node
        .client
        .shorten_batch("", vec![BatchShortenItem::new("https://example.com/b")])
        .await
        .unwrap();
    assert_eq!(batch.base_url, base);
    let info = node.client.link_info(link.code.clone()).await.unwrap();
    assert_eq!(info.short_url, link.short_url);

    // The short URL, followed as printed, is answered by this node.
    let path = link.short_url.strip_prefix(&base).unwrap();
    assert_eq!(
        location(redirect, &format!("/{path}"), None).await,
        moved(302, "https://example.com/sale")
    );
    // And the QR code encodes the same URL.
    let (status, _, png) = http(redirect, &format!("/{}/qr", link.code), None).await;
    assert_eq!(status, 200);
    assert_eq!(qr_text(&png), link.short_url);
    node.stop().await;

    // A configured prefix is used as given.
    let node = TestNode::start_with(|c| {
        c.links.redirect_listen = "127.0.0.1:0".into();
        c.links.base_url = "https://s.example/".into();
    })
    .await;
    let link = node.client.shorten("https://example.com/x").await.unwrap();
    assert_eq!(link.short_url, format!("https://s.example/{}", link.code));
    node.stop().await;
}

/// `rushd` with a `[links]` section and `extra` flags, logging into a file:
/// the node and what it logged by the time it serves.
fn spawn_with_links(links: &str, extra: &[&str]) -> (tempfile::TempDir, Spawned, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rushd.toml");
    std::fs::write(&config, format!("[links]\n{links}\n")).unwrap();
    let log = dir.path().join("rushd.log");
    let mut args = vec!["--config", config.to_str().unwrap()];
    args.extend_from_slice(extra);
    let node = Spawned::start_logging(&dir.path().join("data"), &args, &log);
    // The start-up checks are logged before the serving line is printed.
    let text = std::fs::read_to_string(&log).unwrap();
    (dir, node, text)
}

fn warnings(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("WARN") && l.contains("base_url"))
        .collect()
}

#[test]
fn a_base_url_no_listener_answers_is_warned_about_at_start() {
    // The port names no listener of the node.
    let (_dir, mut node, log) = spawn_with_links(
        "base_url = \"http://127.0.0.1:1/\"",
        &["--redirect", "127.0.0.1:0"],
    );
    let w = warnings(&log);
    assert_eq!(w.len(), 1, "one warning:\n{log}");
    assert!(
        w[0].contains("port 1 matches no listener of this node"),
        "{}",
        w[0]
    );
    node.terminate();

    // The redirect listener is off.
    let (_dir, mut node, log) = spawn_with_links("base_url = \"http://127.0.0.1:7381/\"", &[]);
    let w = warnings(&log);
    assert_eq!(w.len(), 1, "one warning:\n{log}");
    assert!(w[0].contains("redirect listener is off"), "{}", w[0]);
    node.terminate();

    // Derived from the listener, or behind a TLS proxy: nothing to say.
    for (links, extra) in [
        ("", &["--redirect", "127.0.0.1:0"][..]),
        (
            "base_url = \"https://s.example/\"",
            &["--redirect", "127.0.0.1:0"][..],
        ),
    ] {
        let (_dir, mut node, log) = spawn_with_links(links, extra);
        assert!(
            warnings(&log).is_empty(),
            "{links:?} {extra:?}: no warning expected:\n{log}"
        );
        assert!(log.contains("rushd ready"), "the log is the node's:\n{log}");
        node.terminate();
    }
}

#[tokio::test]
async fn caches_get_a_deliberate_policy_and_vary_on_the_user_agent() {
    let node = redirecting_node().await;
    let c = &node.client;
    let addr = redirects(&node);
    let shorten = |req| shorten(c, req);
    let never = Some(0);
    let temporary = shorten(LinkShorten {
        ttl_ms: never,
        ..LinkShorten::new("https://example.com/t")
    })
    .await;
    let permanent = shorten(LinkShorten {
        permanent: true,
        ttl_ms: never,
        ..LinkShorten::new("https://example.com/p")
    })
    .await;
    let permanent_app = shorten(LinkShorten {
        permanent: true,
        ttl_ms: never,
        ios: Some("myapp://item/1".into()),
        android: Some("https://app.example.com/item/1".into()),
        ..LinkShorten::new("https://example.com/item/1")
    })
    .await;
    let temporary_app = shorten(LinkShorten {
        ttl_ms: never,
        ios: Some("https://app.example.com/item/2".into()),
        ..LinkShorten::new("https://example.com/item/2")
    })
    .await;

    let no_store = "private, no-store".to_string();
    let vary = Some("User-Agent".to_string());
    // A 302 is never stored: every visit is counted and may see an update.
    for ua in [DESKTOP, IPHONE] {
        assert_eq!(
            caching(addr, &temporary, ua).await,
            (302, no_store.clone(), None)
        );
    }
    // A 301 the same for everyone: any cache, for links.permanent_cache_secs.
    for ua in [DESKTOP, IPHONE, ANDROID] {
        assert_eq!(
            caching(addr, &permanent, ua).await,
            (301, "public, max-age=3600".to_string(), None)
        );
    }
    // A permanent link with app links: each platform's answer varies on the
    // User-Agent, the desktop's 301 too, and no shared cache keeps it.
    assert_eq!(
        caching(addr, &permanent_app, DESKTOP).await,
        (301, "private, max-age=3600".to_string(), vary.clone())
    );
    assert_eq!(
        caching(addr, &permanent_app, IPHONE).await,
        (200, no_store.clone(), vary.clone())
    );
    assert_eq!(
        caching(addr, &permanent_app, ANDROID).await,
        (302, no_store.clone(), vary.clone())
    );
    for ua in [DESKTOP, IPHONE, ANDROID] {
        assert_eq!(
            caching(addr, &temporary_app, ua).await,
            (302, no_store.clone(), vary.clone()),
            "{ua}"
        );
    }

    // Never cached past the link's expiry, as the node's clock runs.
    let expiring = shorten(LinkShorten {
        permanent: true,
        ttl_ms: Some(600_000),
        ..LinkShorten::new("https://example.com/soon")
    })
    .await;
    let max_age = |cc: String| -> u64 {
        cc.strip_prefix("public, max-age=")
            .unwrap_or_else(|| panic!("{cc}"))
            .parse()
            .unwrap()
    };
    let (status, cc, _) = caching(addr, &expiring, DESKTOP).await;
    assert_eq!(status, 301);
    assert!((598..=600).contains(&max_age(cc.clone())), "{cc}");
    // 200 s on (less than the slide interval of half the TTL): 400 s left.
    node.clock.advance_ms(200_000);
    let (_, cc, _) = caching(addr, &expiring, DESKTOP).await;
    assert!((398..=400).contains(&max_age(cc.clone())), "{cc}");

    // Removing the app links removes the Vary.
    c.link_update(LinkUpdate {
        ios: AppLinkChange::Clear,
        android: AppLinkChange::Clear,
        ..LinkUpdate::new(permanent_app.clone())
    })
    .await
    .unwrap();
    assert_eq!(
        caching(addr, &permanent_app, IPHONE).await,
        (301, "public, max-age=3600".to_string(), None)
    );

    // permanent_cache_secs = 0: a 301 is no more cacheable than a 302.
    let mut node = node;
    node.restart_with(|c| c.links.permanent_cache_secs = 0)
        .await;
    let (status, cc, _) = caching(redirects(&node), &permanent, DESKTOP).await;
    assert_eq!((status, cc.as_str()), (301, "private, no-store"));
    node.stop().await;
}

#[tokio::test]
async fn urls_a_browser_would_refuse_are_refused() {
    let node = redirecting_node().await;
    let c = &node.client;
    let server_message = |e: ClientError| match e {
        ClientError::Server(e) => {
            assert_eq!(e.code, ErrorCode::BadRequest, "{e}");
            e.message
        }
        other => panic!("not a server answer: {other}"),
    };
    let ok = c.shorten("https://example.com/ok").await.unwrap().code;
    for (url, says) in [
        (
            "https://example.com:99999/",
            "url: invalid port (ports are 1-65535)",
        ),
        ("https://example.com:0/", "url: port 0 is not a port"),
        ("https://[::1/x", "url: invalid IPv6 address"),
        ("http://300.1.1.1/", "url: invalid IPv4 address"),
        (
            "https://exa<mple.com/",
            "url: the host is not a valid domain name",
        ),
    ] {
        let m = server_message(c.shorten(url).await.unwrap_err());
        assert!(m.starts_with(says), "{url}: {m}");
        // In a batch, in an update and as an app link, the same.
        let m = server_message(
            c.shorten_batch("", vec![BatchShortenItem::new(url)])
                .await
                .unwrap_err(),
        );
        assert!(m.contains(&says["url: ".len()..]), "{url}: {m}");
        let update = LinkUpdate {
            url: Some(url.to_string()),
            ..LinkUpdate::new(ok.clone())
        };
        let m = server_message(c.link_update(update).await.unwrap_err());
        assert!(m.contains(&says["url: ".len()..]), "{url}: {m}");
        let app = LinkShorten {
            android: Some(url.to_string()),
            ..LinkShorten::new("https://example.com/")
        };
        let m = server_message(c.shorten_with(app).await.unwrap_err());
        assert!(m.starts_with("android url: "), "{url}: {m}");
    }
    // A custom scheme's URL is parsed too.
    let app = LinkShorten {
        ios: Some("myapp://a<b".to_string()),
        ..LinkShorten::new("https://example.com/")
    };
    server_message(c.shorten_with(app).await.unwrap_err());
    // Nothing was stored: the link still leads where it did.
    assert_eq!(
        location(redirects(&node), &format!("/{ok}"), None).await,
        moved(302, "https://example.com/ok")
    );
    node.stop().await;
}

#[tokio::test]
async fn a_visits_query_string_reaches_the_target_unless_the_link_drops_it() {
    let node = redirecting_node().await;
    let c = &node.client;
    let addr = redirects(&node);
    let shorten = |req| shorten(c, req);
    let at = |path: String| async move { location(addr, &path, None).await };

    // The target's own parameters first, then the visit's, escapes as sent.
    let own = shorten(LinkShorten::new("https://example.com/p?id=1")).await;
    assert_eq!(
        at(format!("/{own}?utm_source=news&q=a%20b%26c")).await,
        moved(
            302,
            "https://example.com/p?id=1&utm_source=news&q=a%20b%26c"
        )
    );
    // Without a query of its own, the target gets the visit's.
    let plain = shorten(LinkShorten::new("https://example.com/plain")).await;
    assert_eq!(
        at(format!("/{plain}?utm_source=x")).await,
        moved(302, "https://example.com/plain?utm_source=x")
    );
    // No query, or an empty one: the target exactly as stored.
    assert_eq!(
        at(format!("/{own}")).await,
        moved(302, "https://example.com/p?id=1")
    );
    assert_eq!(
        at(format!("/{own}?")).await,
        moved(302, "https://example.com/p?id=1")
    );
    // A fragment stays last.
    let fragment = shorten(LinkShorten::new("https://example.com/doc?id=2#part")).await;
    assert_eq!(
        at(format!("/{fragment}?utm_source=x")).await,
        moved(302, "https://example.com/doc?id=2&utm_source=x#part")
    );
    // A 301 passes it on too (a cache keys on the whole short URL).
    let permanent = shorten(LinkShorten {
        permanent: true,
        ..LinkShorten::new("https://example.com/perm")
    })
    .await;
    assert_eq!(
        at(format!("/{permanent}?ref=qr")).await,
        moved(301, "https://example.com/perm?ref=qr")
    );

    // The switch off: the visit's query is dropped, and LINK_INFO says so.
    let dropping = shorten(LinkShorten {
        drop_query: true,
        ..LinkShorten::new("https://example.com/d?id=3")
    })
    .await;
    assert_eq!(
        at(format!("/{dropping}?utm_source=x")).await,
        moved(302, "https://example.com/d?id=3")
    );
    assert!(c.link_info(dropping.clone()).await.unwrap().drop_query);
    assert!(!c.link_info(own.clone()).await.unwrap().drop_query);
    // LINK_UPDATE turns it on and off; other updates leave it be.
    let update = |code: &str, drop_query: Option<bool>| LinkUpdate {
        drop_query,
        ..LinkUpdate::new(code)
    };
    c.link_update(update(&dropping, Some(false))).await.unwrap();
    assert_eq!(
        at(format!("/{dropping}?utm_source=x")).await,
        moved(302, "https://example.com/d?id=3&utm_source=x")
    );
    c.link_update(update(&own, Some(true))).await.unwrap();
    c.link_update(LinkUpdate {
        url: Some("https://example.com/p2?id=1".into()),
        ..LinkUpdate::new(own.clone())
    })
    .await
    .unwrap();
    assert_eq!(
        at(format!("/{own}?utm_source=x")).await,
        moved(302, "https://example.com/p2?id=1")
    );
    assert!(c.link_info(own.clone()).await.unwrap().drop_query);

    // App links are left as they are; the app page's fall-back to the
    // website carries the query.
    let app = shorten(LinkShorten {
        ios: Some("https://app.example.com/item/1".into()),
        android: Some("myapp://item/1".into()),
        ..LinkShorten::new("https://example.com/item/1")
    })
    .await;
    let path = format!("/{app}?utm_source=x");
    assert_eq!(
        location(addr, &path, Some(IPHONE)).await,
        moved(302, "https://app.example.com/item/1")
    );
    let (status, _, page) = http(addr, &path, Some(ANDROID)).await;
    assert_eq!(status, 200);
    let page = String::from_utf8(page).unwrap();
    assert!(page.contains("href=\"myapp://item/1\""), "{page}");
    assert!(
        page.contains("href=\"https://example.com/item/1?utm_source=x\""),
        "{page}"
    );
    assert_eq!(
        location(addr, &path, Some(DESKTOP)).await.1.as_deref(),
        Some("https://example.com/item/1?utm_source=x")
    );

    // The QR path is not a redirect: its own query still picks the format,
    // other parameters are ignored, and the code shows the bare short URL.
    let short_url = c.link_info(plain.clone()).await.unwrap().short_url;
    let (status, h, svg) = http(addr, &format!("/{plain}/qr?format=svg"), None).await;
    assert_eq!(status, 200);
    assert_eq!(
        header(&h, hyper::header::CONTENT_TYPE).as_deref(),
        Some("image/svg+xml")
    );
    assert!(String::from_utf8(svg).unwrap().contains("<svg"));
    let (status, _, png) = http(addr, &format!("/{plain}/qr?utm_source=x"), None).await;
    assert_eq!(status, 200);
    assert_eq!(qr_text(&png), short_url);
    node.stop().await;
}
