//! Short links through a real daemon and client: issuing, aliases,
//! validation, sliding expiry, recycling, statistics, durability and the
//! HTTP redirect listener.

mod common;

use bytes::Bytes;
use common::{http, Spawned, TestNode, ANDROID, DESKTOP, IPHONE};
use rush_client::protocol::cmd::links::code::{codes_per_slot, generated_parts};
use rush_client::protocol::cmd::{AppLinkChange, BatchShortenItem, LinkShorten, LinkUpdate};
use rush_client::protocol::{link_slot, parts_slot, Code, ErrorCode, ErrorDetail};
use rush_client::{Client, ClientError};
use rush_daemon::storage::keys;
use std::collections::HashSet;
use std::time::Duration;

const DAY: Duration = Duration::from_secs(86_400);
const HOUR_MS: u64 = 3_600_000;

fn code_of(e: &ClientError) -> Option<ErrorCode> {
    e.code()
}

/// A URL whose (account, url) pair lands in `slot`.
fn url_in_slot(slot: u16, account: &str, seed: &str) -> String {
    (0u64..)
        .map(|i| format!("https://example.com/{seed}/{i}"))
        .find(|u| parts_slot(&[account.as_bytes(), u.as_bytes()]) == slot)
        .expect("some URL hashes to every slot")
}

/// Raw link entries (live or expired, not yet compacted) under `code`, once
/// RocksDB holds every committed write.
async fn stored_link_entries(node: &TestNode, code: &str) -> usize {
    node.running().write_back().await;
    let storage = node.running().storage();
    let slot = link_slot(code.as_bytes());
    let key = keys::link(slot, code.as_bytes());
    let mut end = key.clone();
    end.push(0);
    let shard = rush_daemon::shard::route::shard_of_slot(slot, storage.shards());
    storage.count_raw(shard, &key, &end).unwrap()
}

#[tokio::test]
async fn shorten_resolve_info_update_delete() {
    let node = TestNode::start_with(|c| c.links.app_schemes = vec!["myapp".into()]).await;
    let c = &node.client;
    let r = c.shorten("https://example.com/a?b=c").await.unwrap();
    assert_eq!(r.code.len(), 7, "default length");
    assert_eq!(r.short_url, format!("http://127.0.0.1:7381/{}", r.code));
    assert!(!r.reused);
    let now = node.clock.now_ms();
    assert!(r.expires_at > now + 29 * 86_400_000 && r.expires_at <= now + 30 * 86_400_000);

    let got = c.resolve(r.code.clone()).await.unwrap();
    assert_eq!(got.target, "https://example.com/a?b=c");
    assert!(!got.permanent);
    c.resolve(r.code.clone()).await.unwrap();

    let info = c.link_info(r.code.clone()).await.unwrap();
    assert_eq!(info.target, "https://example.com/a?b=c");
    assert_eq!(info.visits, 2);
    assert!(info.last_visit >= now);
    assert_eq!(info.daily, vec![((now / 86_400_000) as u32, 2)]);
    assert!(!info.alias);
    assert_eq!(info.ttl_ms, 30 * 86_400_000);

    // Options: length, TTL, app links, account, permanent.
    let o = c
        .shorten_with(LinkShorten {
            url: "https://example.com/app".into(),
            account: Bytes::from("acme"),
            length: 5,
            ttl_ms: Some(0),
            ios: Some("myapp://item/1".into()),
            android: Some("https://app.example.com/item/1".into()),
            permanent: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(o.code.len(), 5);
    assert_eq!(o.expires_at, 0, "ttl none");
    let info = c.link_info(o.code.clone()).await.unwrap();
    assert_eq!(info.account, Bytes::from("acme"));
    assert_eq!(info.ios.as_deref(), Some("myapp://item/1"));
    assert!(info.permanent);
    assert_eq!(
        link_slot(o.code.as_bytes()),
        parts_slot(&[b"acme", b"https://example.com/app"])
    );

    // Update: target, TTL, app links.
    let exp = c
        .link_update(LinkUpdate {
            url: Some("https://example.com/new".into()),
            ttl_ms: Some(3_600_000),
            ios: AppLinkChange::Clear,
            permanent: Some(false),
            ..LinkUpdate::new(o.code.clone())
        })
        .await
        .unwrap();
    assert!(exp > node.clock.now_ms() && exp <= node.clock.now_ms() + 3_600_000);
    let got = c.resolve(o.code.clone()).await.unwrap();
    assert_eq!(got.target, "https://example.com/new");
    assert_eq!(got.ios, None);
    assert_eq!(
        got.android.as_deref(),
        Some("https://app.example.com/item/1")
    );
    assert!(!got.permanent);
    assert_eq!(got.expires_at, exp);
    // A bad update changes nothing.
    let e = c
        .link_update(LinkUpdate {
            url: Some("javascript:alert(1)".into()),
            ..LinkUpdate::new(o.code.clone())
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), Some(ErrorCode::BadRequest));
    assert_eq!(
        c.resolve(o.code.clone()).await.unwrap().target,
        "https://example.com/new"
    );

    // Delete.
    assert!(c.link_delete(r.code.clone()).await.unwrap());
    assert!(!c.link_delete(r.code.clone()).await.unwrap());
    for e in [
        c.resolve(r.code.clone()).await.unwrap_err(),
        c.link_info(r.code.clone()).await.unwrap_err(),
        c.link_update(LinkUpdate {
            ttl_ms: Some(0),
            ..LinkUpdate::new(r.code.clone())
        })
        .await
        .unwrap_err(),
    ] {
        assert_eq!(code_of(&e), Some(ErrorCode::NotFound), "{e}");
    }
    assert_eq!(
        c.resolve("Zz9Zz9Z").await.unwrap_err().code(),
        Some(ErrorCode::NotFound)
    );
    // Durable: a restart keeps the link and its statistics.
    c.resolve(o.code.clone()).await.unwrap();
    let before = c.link_info(o.code.clone()).await.unwrap();
    let mut node = node;
    node.restart().await;
    let after = node.client.link_info(o.code.clone()).await.unwrap();
    assert_eq!(after, before);
    assert_eq!(after.visits, 3);
    node.stop().await;
}

#[tokio::test]
async fn every_validation_rule_rejects_a_bad_url() {
    let node = TestNode::start_with(|c| c.links.app_schemes = vec!["myapp".into()]).await;
    let c = &node.client;
    // Exactly 4 KiB is fine.
    let max = format!("https://example.com/{}", "a".repeat(4096 - 20));
    assert_eq!(max.len(), 4096);
    let ok = c.shorten(max.clone()).await.unwrap();
    assert_eq!(c.resolve(ok.code.clone()).await.unwrap().target, max);
    assert!(c.link_delete(ok.code).await.unwrap());

    let before = node.stored_keys().await;
    let cases: Vec<(String, ErrorCode)> = vec![
        ("".into(), ErrorCode::BadRequest),
        ("example.com/no-scheme".into(), ErrorCode::BadRequest),
        ("ftp://example.com/file".into(), ErrorCode::BadRequest),
        (
            "javascript:alert(document.cookie)".into(),
            ErrorCode::BadRequest,
        ),
        ("JavaScript:alert(1)".into(), ErrorCode::BadRequest),
        (
            "data:text/html;base64,PHNjcmlwdD4=".into(),
            ErrorCode::BadRequest,
        ),
        ("myapp://only-for-app-links".into(), ErrorCode::BadRequest),
        ("https://".into(), ErrorCode::BadRequest),
        ("https:example.com".into(), ErrorCode::BadRequest),
        ("https://example.com/a b".into(), ErrorCode::BadRequest),
        (" https://example.com/".into(), ErrorCode::BadRequest),
        ("https://example.com/\n".into(), ErrorCode::BadRequest),
        ("https://example.com/\u{0}x".into(), ErrorCode::BadRequest),
        ("https://example.com/\u{7f}".into(), ErrorCode::BadRequest),
        ("https://example.com/\u{2003}".into(), ErrorCode::BadRequest),
        ("https://example.com/%".into(), ErrorCode::BadRequest),
        ("https://example.com/%2".into(), ErrorCode::BadRequest),
        ("https://example.com/%G0".into(), ErrorCode::BadRequest),
        (
            format!("https://example.com/{}", "a".repeat(4096)),
            ErrorCode::TooLarge,
        ),
    ];
    for (url, want) in &cases {
        let e = c.shorten(url.clone()).await.unwrap_err();
        assert_eq!(e.code(), Some(*want), "{url:?}: {e}");
        // The same rules hold inside a batch, naming the item.
        let items = vec![
            BatchShortenItem::new("https://ok.example/"),
            BatchShortenItem::new(url.clone()),
        ];
        let e = c.shorten_batch("", items).await.unwrap_err();
        assert_eq!(e.code(), Some(*want), "{url:?}: {e}");
        if *want == ErrorCode::BadRequest {
            match e {
                ClientError::Server(e) => {
                    assert_eq!(e.detail, ErrorDetail::BatchIndex { index: 1 })
                }
                other => panic!("{other}"),
            }
        }
    }
    // App links: configured schemes and http(s) only, never javascript:/data:.
    let app = |ios: &str| LinkShorten {
        ios: Some(ios.to_string()),
        ..LinkShorten::new("https://example.com/")
    };
    for bad in [
        "javascript:alert(1)",
        "data:,x",
        "otherapp://x",
        "myapp:",
        "myapp://a b",
    ] {
        let e = c.shorten_with(app(bad)).await.unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::BadRequest), "{bad}: {e}");
    }
    // Aliases, lengths and option combinations.
    for (req, want) in [
        (
            LinkShorten {
                alias: Some("has space".into()),
                ..LinkShorten::new("https://e.com/")
            },
            ErrorCode::BadRequest,
        ),
        (
            LinkShorten {
                alias: Some("a/b".into()),
                ..LinkShorten::new("https://e.com/")
            },
            ErrorCode::BadRequest,
        ),
        (
            LinkShorten {
                alias: Some("x".repeat(65)),
                ..LinkShorten::new("https://e.com/")
            },
            ErrorCode::TooLarge,
        ),
        (
            LinkShorten {
                length: 4,
                ..LinkShorten::new("https://e.com/")
            },
            ErrorCode::BadRequest,
        ),
        (
            LinkShorten {
                length: 9,
                ..LinkShorten::new("https://e.com/")
            },
            ErrorCode::BadRequest,
        ),
        (
            LinkShorten {
                alias: Some("both".into()),
                reuse: true,
                ..LinkShorten::new("https://e.com/")
            },
            ErrorCode::BadRequest,
        ),
    ] {
        let e = c.shorten_with(req.clone()).await.unwrap_err();
        assert_eq!(e.code(), Some(want), "{req:?}: {e}");
    }
    assert_eq!(
        node.stored_keys().await,
        before,
        "no rejected request wrote anything"
    );
    // A bad code in a lookup is a BAD_REQUEST, not a crash.
    assert_eq!(
        c.resolve("a/b").await.unwrap_err().code(),
        Some(ErrorCode::BadRequest)
    );
    c.ping().await.unwrap();
    node.stop().await;
}

#[tokio::test]
async fn codes_are_not_sequential() {
    let node = TestNode::start().await;
    let c = &node.client;
    // Consecutive single shortens (spread over slots).
    let mut singles = Vec::new();
    for i in 0..200 {
        singles.push(
            c.shorten(format!("https://example.com/s/{i}"))
                .await
                .unwrap()
                .code,
        );
    }
    for w in singles.windows(2) {
        assert_ne!(
            w[0][..6],
            w[1][..6],
            "{} then {} differ only in the last character",
            w[0],
            w[1]
        );
    }
    // Consecutive codes of one slot: their indices within the slot are not
    // a sequence (a plain counter would give 0, 1, 2, …).
    let slot = 4321;
    let items = (0..1000)
        .map(|i| BatchShortenItem::new(format!("https://example.com/b/{i}")))
        .collect();
    let batch = c.shorten_batch_in(slot, "", items).await.unwrap();
    let idx: Vec<u64> = batch
        .links
        .iter()
        .map(|l| {
            let (s, len, i) = generated_parts(l.code.as_bytes()).expect("generated shape");
            assert_eq!((s, len), (slot, 7));
            i
        })
        .collect();
    let distinct: HashSet<_> = idx.iter().collect();
    assert_eq!(distinct.len(), idx.len(), "a code was issued twice");
    // For a keyed permutation of the slot's ~2·10⁸ indices, a neighbour
    // among 999 pairs has odds of ~10⁻⁵: one is worth its numbers.
    let neighbours: Vec<_> = idx
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1].abs_diff(w[0]) <= 1)
        .map(|(at, w)| {
            (
                at,
                w[0],
                w[1],
                &batch.links[at].code,
                &batch.links[at + 1].code,
            )
        })
        .collect();
    assert!(
        neighbours.is_empty(),
        "consecutive codes are neighbours (position, indices, codes): {neighbours:?}"
    );
    let rising = idx.windows(2).filter(|w| w[1] > w[0]).count();
    assert!(
        (350..=650).contains(&rising),
        "rising pairs {rising} of 999: not a random order"
    );
    // Spread over the slot's whole space, not a prefix of it.
    let n = codes_per_slot(7, slot);
    assert!(*idx.iter().max().unwrap() > n / 2 && *idx.iter().min().unwrap() < n / 2);
    node.stop().await;
}

#[tokio::test]
async fn aliases_never_collide_with_generated_codes() {
    let node = TestNode::start().await;
    let c = &node.client;
    let alias = |a: &str, url: &str| LinkShorten {
        alias: Some(a.to_string()),
        ..LinkShorten::new(url)
    };
    let r = c
        .shorten_with(alias("spring-sale", "https://example.com/sale"))
        .await
        .unwrap();
    assert_eq!(r.code, "spring-sale");
    assert_eq!(r.short_url, "http://127.0.0.1:7381/spring-sale");
    assert_eq!(
        c.resolve("spring-sale").await.unwrap().target,
        "https://example.com/sale"
    );
    assert!(c.link_info("spring-sale").await.unwrap().alias);
    // Taken, as alias or as generated code: CONFLICT, and the link is untouched.
    let e = c
        .shorten_with(alias("spring-sale", "https://evil.example/"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Conflict));
    let generated = c.shorten("https://example.com/gen").await.unwrap().code;
    let e = c
        .shorten_with(alias(&generated, "https://evil.example/"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Conflict));
    assert_eq!(
        c.resolve(generated.clone()).await.unwrap().target,
        "https://example.com/gen"
    );
    // Deleted, the alias can be taken again.
    assert!(c.link_delete("spring-sale").await.unwrap());
    c.shorten_with(alias("spring-sale", "https://example.com/sale2"))
        .await
        .unwrap();
    assert_eq!(
        c.resolve("spring-sale").await.unwrap().target,
        "https://example.com/sale2"
    );

    // Aliases shaped like generated codes, taken BEFORE the issuer reaches
    // them: fill a real 5-character slot completely and check the issuer
    // skipped every one of them.
    let slot = 777;
    let n = codes_per_slot(5, slot);
    let taken: Vec<String> = (0..40u64)
        .map(|i| Code::generated(slot, 5, i * (n / 40)).as_str().to_string())
        .collect();
    for a in &taken {
        c.shorten_with(alias(a, &format!("https://example.com/alias/{a}")))
            .await
            .unwrap();
    }
    let issued = fill_slot(c, slot, n, |_| None).await;
    assert_eq!(
        issued.len() as u64,
        n - taken.len() as u64,
        "every other code was issued"
    );
    for a in &taken {
        assert!(!issued.contains(a), "alias {a} was issued as a code");
        assert_eq!(
            c.resolve(a.clone()).await.unwrap().target,
            format!("https://example.com/alias/{a}")
        );
    }
    let e = c
        .shorten_batch_in(slot, "", vec![five("https://example.com/x")])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Exhausted), "{e}");
    node.stop().await;
}

fn five(url: &str) -> BatchShortenItem {
    BatchShortenItem {
        length: 5,
        ..BatchShortenItem::new(url)
    }
}

/// Issue 5-character codes in `slot` until it is exhausted (`limit` bounds
/// the attempt); `ttl(i)` gives item i's TTL. Returns the codes issued.
async fn fill_slot(
    c: &Client,
    slot: u16,
    limit: u64,
    ttl: impl Fn(u64) -> Option<u64>,
) -> HashSet<String> {
    let mut issued = HashSet::new();
    let mut i = 0u64;
    let mut chunk = 1000u64;
    while i < limit {
        let items: Vec<_> = (i..(i + chunk).min(limit))
            .map(|k| BatchShortenItem {
                ttl_ms: ttl(k),
                ..five(&format!("https://example.com/fill/{k}"))
            })
            .collect();
        match c.shorten_batch_in(slot, "", items.clone()).await {
            Ok(r) => {
                for l in r.links {
                    assert_eq!(link_slot(l.code.as_bytes()), slot);
                    assert!(issued.insert(l.code), "a code was issued twice");
                }
                i += items.len() as u64;
            }
            // The last batch crossed the end: finish one by one.
            Err(e) if e.code() == Some(ErrorCode::Exhausted) && chunk > 1 => chunk = 1,
            Err(e) if e.code() == Some(ErrorCode::Exhausted) => break,
            Err(e) => panic!("{e}"),
        }
    }
    issued
}

#[tokio::test]
async fn wrapped_five_char_slot_recycles_only_dead_codes() {
    let node = TestNode::start().await;
    let c = &node.client;
    let slot = 1234;
    let n = codes_per_slot(5, slot);
    // Every 100th link lives one hour; the rest never expire.
    let short_lived = |k: u64| k.is_multiple_of(100);
    let issued = fill_slot(c, slot, n, |k| {
        Some(if short_lived(k) { HOUR_MS } else { 0 })
    })
    .await;
    assert_eq!(issued.len() as u64, n, "the whole space was issued once");
    fn exhausted<T>(r: Result<T, ClientError>) -> bool {
        matches!(r, Err(e) if e.code() == Some(ErrorCode::Exhausted))
    }
    assert!(exhausted(
        c.shorten_batch_in(slot, "", vec![five("https://example.com/more")])
            .await
    ));
    // A single shorten landing in the slot is refused the same way.
    let single = LinkShorten {
        length: 5,
        ..LinkShorten::new(url_in_slot(slot, "", "single"))
    };
    assert!(exhausted(c.shorten_with(single.clone()).await));

    // Which codes expire: read their TTLs back.
    let mut expiring = HashSet::new();
    let mut live_sample = Vec::new();
    for code in &issued {
        let info = c.link_info(code.clone()).await.unwrap();
        if info.expires_at != 0 {
            expiring.insert(code.clone());
        } else if live_sample.len() < 500 {
            live_sample.push((code.clone(), info.target));
        }
    }
    assert_eq!(expiring.len() as u64, n.div_ceil(100));

    // Deleted codes come back, and only they.
    let deleted: HashSet<String> = live_sample.drain(..10).map(|(c, _)| c).collect();
    for d in &deleted {
        assert!(c.link_delete(d.clone()).await.unwrap());
    }
    let mut again = HashSet::new();
    for i in 0..deleted.len() {
        let r = c
            .shorten_batch_in(slot, "", vec![five(&format!("https://example.com/re/{i}"))])
            .await
            .unwrap();
        again.insert(r.links[0].code.clone());
    }
    assert_eq!(again, deleted);
    assert!(exhausted(
        c.shorten_batch_in(slot, "", vec![five("https://example.com/more")])
            .await
    ));

    // Two hours later the short-lived links are dead: exactly their codes
    // are recycled, each pointing to its new target.
    c.clock_advance(Duration::from_millis(2 * HOUR_MS))
        .await
        .unwrap();
    let mut recycled = HashSet::new();
    let items: Vec<_> = (0..expiring.len())
        .map(|i| five(&format!("https://example.com/new/{i}")))
        .collect();
    let r = c.shorten_batch_in(slot, "", items).await.unwrap();
    for (i, l) in r.links.iter().enumerate() {
        assert_eq!(
            c.resolve(l.code.clone()).await.unwrap().target,
            format!("https://example.com/new/{i}")
        );
        let info = c.link_info(l.code.clone()).await.unwrap();
        assert_eq!(
            info.visits, 1,
            "no statistics carried over from the old link"
        );
        recycled.insert(l.code.clone());
    }
    assert_eq!(recycled, expiring);
    assert!(exhausted(c.shorten_with(single).await));
    // Live links were never touched.
    for (code, target) in &live_sample {
        assert_eq!(&c.resolve(code.clone()).await.unwrap().target, target);
    }
    let m = &node.running().metrics().links;
    assert_eq!(
        m.issued_recycled.get(),
        (deleted.len() + expiring.len()) as u64
    );
    node.stop().await;
}

/// A flush of visit counts adds to each link's stored statistics without
/// reading them (RocksDB merges what is added into what it holds), and the
/// statistics read back whole: added over stored ones, over a link
/// rewritten in between, with visits still in memory, and after a restart.
/// (`shard::pending`'s tests cover operands still held for write-back.)
#[tokio::test]
async fn visit_counts_are_added_to_stored_statistics_without_reading_them() {
    let mut node = TestNode::start().await;
    let mut codes = Vec::new();
    for i in 0..40 {
        let url = format!("https://example.com/counted/{i}");
        codes.push(node.client.shorten(&url).await.unwrap().code);
    }
    let visit = |c: &Client, codes: Vec<String>, times: usize| {
        let c = c.clone();
        async move {
            for code in codes {
                for _ in 0..times {
                    c.resolve(code.clone()).await.unwrap();
                }
            }
        }
    };
    // Stored statistics first; then, after a restart (nothing cached), more
    // visits.
    visit(&node.client, codes.clone(), 2).await;
    node.running().write_back().await;
    node.restart().await;
    visit(&node.client, codes.clone(), 3).await;
    let storage = node.running().storage().clone();
    let reads = storage.stats.reads.get();
    node.running().write_back().await;
    assert_eq!(
        storage.stats.reads.get(),
        reads,
        "the flush read no statistics"
    );
    drop(storage);
    // Flushed again (the clock's advance runs the timers and writes
    // back), one link rewritten after it, and visits still counted in
    // memory.
    visit(&node.client, codes[..10].to_vec(), 1).await;
    node.client
        .clock_advance(Duration::from_secs(10))
        .await
        .unwrap();
    node.client
        .link_update(LinkUpdate {
            ttl_ms: Some(7 * DAY.as_millis() as u64),
            ..LinkUpdate::new(codes[0].clone())
        })
        .await
        .unwrap();
    visit(&node.client, codes[..10].to_vec(), 1).await;
    let expect = |i: usize| if i < 10 { 7 } else { 5 };
    for (i, code) in codes.iter().enumerate() {
        let info = node.client.link_info(code.clone()).await.unwrap();
        assert_eq!(info.visits, expect(i), "{code}");
    }
    node.restart().await;
    for (i, code) in codes.iter().enumerate() {
        let info = node.client.link_info(code.clone()).await.unwrap();
        assert_eq!(info.visits, expect(i), "{code} after a restart");
        let today = (node.clock.now_ms() / 86_400_000) as u32;
        assert_eq!(info.daily, vec![(today, expect(i))]);
    }
    node.stop().await;
}

#[tokio::test]
async fn sliding_expiry_keeps_visited_links_alive() {
    let node = TestNode::start().await;
    let c = &node.client;
    let ttl = LinkShorten {
        ttl_ms: Some(10 * DAY.as_millis() as u64),
        ..LinkShorten::default()
    };
    let visited = c
        .shorten_with(LinkShorten {
            url: "https://example.com/visited".into(),
            ..ttl.clone()
        })
        .await
        .unwrap()
        .code;
    let idle = c
        .shorten_with(LinkShorten {
            url: "https://example.com/idle".into(),
            ..ttl.clone()
        })
        .await
        .unwrap()
        .code;
    let m = &node.running().metrics().links;
    let storage = node.running().storage().clone();
    let syncs = || storage.stats.syncs.get();

    // A hot link: a hundred visits cost no synced write and, this early in
    // its life, no rewrite at all.
    let (slides0, syncs0) = (m.slides.get(), syncs());
    for _ in 0..100 {
        c.resolve(visited.clone()).await.unwrap();
    }
    assert_eq!(m.slides.get(), slides0);
    assert_eq!(syncs(), syncs0, "visits are never synced");

    // 35 days, three visits a day: at most one rewrite a day, and the
    // visited link outlives its 10-day TTL while the idle one expires.
    for day in 1..=35u32 {
        c.clock_advance(DAY).await.unwrap();
        let before = m.slides.get();
        for _ in 0..3 {
            let asked = node.clock.now_ms();
            let r = c.resolve(visited.clone()).await.unwrap();
            assert!(r.expires_at >= asked + 9 * DAY.as_millis() as u64);
        }
        assert!(
            m.slides.get() - before <= 1,
            "day {day}: one rewrite at most"
        );
        match day {
            9 => assert!(
                c.link_info(idle.clone()).await.is_ok(),
                "alive before its TTL"
            ),
            11 => {
                let e = c.link_info(idle.clone()).await.unwrap_err();
                assert_eq!(e.code(), Some(ErrorCode::NotFound));
                let e = c.resolve(idle.clone()).await.unwrap_err();
                assert_eq!(e.code(), Some(ErrorCode::NotFound));
            }
            _ => {}
        }
    }
    // A rewrite needs strictly more than an interval since the last one, so
    // with visits exactly a day apart (to the millisecond) some days skip.
    let rewrites = m.slides.get() - slides0;
    assert!(
        (17..=35).contains(&rewrites),
        "{rewrites} rewrites in 35 days"
    );

    let info = c.link_info(visited.clone()).await.unwrap();
    assert_eq!(info.visits, 100 + 35 * 3);
    let today = (node.clock.now_ms() / 86_400_000) as u32;
    assert_eq!(info.daily.len(), 30, "the last 30 days");
    assert_eq!(info.daily.first(), Some(&(today - 29, 3)));
    assert_eq!(info.daily.last(), Some(&(today, 3)));

    // The expired link lingers on disk until compaction drops it.
    assert_eq!(stored_link_entries(&node, &idle).await, 1);
    c.compact().await.unwrap();
    assert_eq!(
        stored_link_entries(&node, &idle).await,
        0,
        "compaction removed the expired link"
    );
    assert_eq!(stored_link_entries(&node, &visited).await, 1);
    assert_eq!(
        c.resolve(visited).await.unwrap().target,
        "https://example.com/visited"
    );
    node.stop().await;
}

#[tokio::test]
async fn reuse_returns_the_live_link_of_the_same_url_and_account() {
    let node = TestNode::start().await;
    let c = &node.client;
    let reuse = |account: &str, url: &str| LinkShorten {
        account: Bytes::from(account.to_string()),
        reuse: true,
        ..LinkShorten::new(url)
    };
    let u = "https://example.com/reused";
    let a = c.shorten_with(reuse("acme", u)).await.unwrap();
    assert!(!a.reused);
    let b = c.shorten_with(reuse("acme", u)).await.unwrap();
    assert!(b.reused);
    assert_eq!(b.code, a.code);
    assert_ne!(
        c.shorten_with(reuse("other", u)).await.unwrap().code,
        a.code
    );
    // Without the flag a new code is issued; reuse still finds the first.
    let plain = c
        .shorten_with(LinkShorten {
            account: Bytes::from("acme"),
            ..LinkShorten::new(u)
        })
        .await
        .unwrap();
    assert_ne!(plain.code, a.code);
    assert_eq!(c.shorten_with(reuse("acme", u)).await.unwrap().code, a.code);

    // An updated target no longer matches: a new link.
    c.link_update(LinkUpdate {
        url: Some("https://example.com/moved".into()),
        ..LinkUpdate::new(a.code.clone())
    })
    .await
    .unwrap();
    let d = c.shorten_with(reuse("acme", u)).await.unwrap();
    assert!(!d.reused);
    assert_ne!(d.code, a.code);
    // A deleted link is not reused.
    assert!(c.link_delete(d.code.clone()).await.unwrap());
    let e = c.shorten_with(reuse("acme", u)).await.unwrap();
    assert!(!e.reused);
    assert_ne!(e.code, d.code);
    // An expired one neither; a visited one slides and stays reusable.
    let short = |url: &str| LinkShorten {
        ttl_ms: Some(2 * HOUR_MS),
        ..reuse("acme", url)
    };
    let f = c
        .shorten_with(short("https://example.com/f"))
        .await
        .unwrap();
    let g = c
        .shorten_with(short("https://example.com/g"))
        .await
        .unwrap();
    c.clock_advance(Duration::from_millis(HOUR_MS + 60_000))
        .await
        .unwrap();
    c.resolve(g.code.clone()).await.unwrap();
    c.clock_advance(Duration::from_millis(HOUR_MS))
        .await
        .unwrap();
    let f2 = c
        .shorten_with(short("https://example.com/f"))
        .await
        .unwrap();
    assert!(!f2.reused);
    assert_ne!(f2.code, f.code);
    let g2 = c
        .shorten_with(short("https://example.com/g"))
        .await
        .unwrap();
    assert!(g2.reused, "the visit slid the link and its reuse entry");
    assert_eq!(g2.code, g.code);
    node.stop().await;
}

#[tokio::test]
async fn prefetch_means_no_waits_in_steady_state() {
    let node = TestNode::start_with(|c| c.links.segment_step_5 = 100).await;
    let c = &node.client;
    let m = &node.running().metrics().links;
    let slot = 99;
    // The first code of a slot after a start has nothing prefetched.
    c.shorten_batch_in(slot, "", vec![five("https://example.com/first")])
        .await
        .unwrap();
    assert_eq!(m.segment_waits.get(), 1);
    // Then 5,000 codes cross 50 segment boundaries without waiting once.
    let reserved = m.segments_reserved.get();
    for b in 0..10 {
        let items = (0..500)
            .map(|i| five(&format!("https://example.com/{b}/{i}")))
            .collect();
        c.shorten_batch_in(slot, "", items).await.unwrap();
        for i in 0..5 {
            let single = LinkShorten {
                length: 5,
                ..LinkShorten::new(url_in_slot(slot, "", &format!("{b}-{i}")))
            };
            c.shorten_with(single).await.unwrap();
        }
    }
    assert!(
        m.segments_reserved.get() - reserved >= 50,
        "{}",
        m.segments_reserved.get()
    );
    assert_eq!(
        m.segment_waits.get(),
        1,
        "no request waited on a reservation"
    );
    let text = node.metrics().await;
    assert!(
        text.contains("rush_links_segment_waits_total 1\n"),
        "{text}"
    );
    assert!(text.contains("rush_links_codes_issued_total{source=\"new\"} 5051\n"));
    node.stop().await;
}

#[tokio::test]
async fn sigkill_never_makes_a_code_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let slot = 555;
    async fn issue(c: &Client, slot: u16, round: &str) -> Vec<String> {
        let mut codes = Vec::new();
        // A dense 5-character slot: a changed scrambler key or a reused
        // segment would repeat codes here almost surely.
        for b in 0..3 {
            let items = (0..1000)
                .map(|i| five(&format!("https://example.com/{round}/{b}/{i}")))
                .collect();
            codes.extend(
                c.shorten_batch_in(slot, "", items)
                    .await
                    .unwrap()
                    .links
                    .into_iter()
                    .map(|l| l.code),
            );
        }
        // Default-length codes over many slots, and single shortens.
        for b in 0..20 {
            let items = (0..100)
                .map(|i| BatchShortenItem::new(format!("https://example.com/{round}/m{b}/{i}")))
                .collect();
            codes.extend(
                c.shorten_batch("", items)
                    .await
                    .unwrap()
                    .links
                    .into_iter()
                    .map(|l| l.code),
            );
        }
        for i in 0..200 {
            codes.push(
                c.shorten(format!("https://example.com/{round}/s/{i}"))
                    .await
                    .unwrap()
                    .code,
            );
        }
        codes
    }
    let mut d = Spawned::start(dir.path(), &[]);
    let c = common::connect(d.addr).await;
    let before = issue(&c, slot, "before").await;
    d.kill9();
    drop(c);
    let d2 = Spawned::start(dir.path(), &[]);
    let c = common::connect(d2.addr).await;
    // Every acknowledged link survived.
    for code in &before {
        c.resolve(code.clone()).await.unwrap();
    }
    let after = issue(&c, slot, "after").await;
    let before: HashSet<String> = before.into_iter().collect();
    let after: HashSet<String> = after.into_iter().collect();
    assert_eq!(before.len(), 5200);
    assert_eq!(after.len(), 5200);
    let again: Vec<_> = before.intersection(&after).collect();
    assert!(
        again.is_empty(),
        "codes issued before the crash came back: {again:?}"
    );
}

#[tokio::test]
async fn http_redirects_deep_links_and_qr_codes() {
    let node = TestNode::start_with(|c| {
        c.links.redirect_listen = "127.0.0.1:0".into();
        c.links.base_url = "https://s.example/".into();
        c.links.app_schemes = vec!["myapp".into()];
    })
    .await;
    let c = &node.client;
    let addr = node
        .running()
        .redirect_addr()
        .expect("redirect listener on");
    let plain = c.shorten("https://example.com/landing?x=1").await.unwrap();
    assert_eq!(plain.short_url, format!("https://s.example/{}", plain.code));
    let permanent = c
        .shorten_with(LinkShorten {
            permanent: true,
            ..LinkShorten::new("https://example.com/forever")
        })
        .await
        .unwrap()
        .code;
    let app = c
        .shorten_with(LinkShorten {
            ios: Some("myapp://item/7?ref=\"q\"".into()),
            android: Some("https://app.example.com/item/7".into()),
            ..LinkShorten::new("https://example.com/item/7")
        })
        .await
        .unwrap()
        .code;

    let location = |h: &hyper::HeaderMap| {
        h.get(hyper::header::LOCATION)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    };
    let (status, h, _) = http(addr, &format!("/{}", plain.code), Some(DESKTOP)).await;
    assert_eq!(status, 302);
    assert_eq!(location(&h), "https://example.com/landing?x=1");
    assert_eq!(
        h.get(hyper::header::CACHE_CONTROL).unwrap(),
        "private, no-store"
    );
    let (status, h, _) = http(addr, &format!("/{permanent}"), None).await;
    assert_eq!(status, 301);
    assert_eq!(location(&h), "https://example.com/forever");

    // Unknown, malformed, deleted: the 404 page.
    for path in ["/Zz9Zz9Z", "/no-such-alias", "/bad.code", "/", "/a/b/c"] {
        let (status, h, body) = http(addr, path, None).await;
        assert_eq!(status, 404, "{path}");
        assert!(h
            .get(hyper::header::CONTENT_TYPE)
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("text/html"));
        assert!(
            String::from_utf8_lossy(&body).contains("Link not found"),
            "{path}"
        );
    }

    // Deep links: a custom scheme gets a page that opens the app (and falls
    // back to the target); an https app link is a plain redirect.
    let (status, _, body) = http(addr, &format!("/{app}"), Some(IPHONE)).await;
    assert_eq!(status, 200);
    let page = String::from_utf8(body).unwrap();
    assert!(
        page.contains("myapp://item/7?ref=\\u0022q\\u0022"),
        "{page}"
    );
    assert!(
        page.contains("href=\"myapp://item/7?ref=&quot;q&quot;\""),
        "{page}"
    );
    assert!(
        page.contains("https://example.com/item/7"),
        "fallback to the web target"
    );
    let (status, h, _) = http(addr, &format!("/{app}"), Some(ANDROID)).await;
    assert_eq!(status, 302);
    assert_eq!(location(&h), "https://app.example.com/item/7");
    let (status, h, _) = http(addr, &format!("/{app}"), Some(DESKTOP)).await;
    assert_eq!(status, 302);
    assert_eq!(location(&h), "https://example.com/item/7");
    // A link without app URLs sends phones to the target.
    let (status, h, _) = http(addr, &format!("/{}", plain.code), Some(IPHONE)).await;
    assert_eq!(
        (status, location(&h)),
        (302, "https://example.com/landing?x=1".to_string())
    );

    // QR codes: a PNG that decodes back to the short URL, or an SVG.
    let (status, h, png) = http(addr, &format!("/{}/qr", plain.code), None).await;
    assert_eq!(status, 200);
    assert_eq!(h.get(hyper::header::CONTENT_TYPE).unwrap(), "image/png");
    let img = image::load_from_memory(&png).unwrap().to_luma8();
    let mut prepared = rqrr::PreparedImage::prepare(img);
    let grids = prepared.detect_grids();
    assert_eq!(grids.len(), 1);
    let (_, text) = grids[0].decode().unwrap();
    assert_eq!(text, plain.short_url);
    let (status, h, svg) = http(addr, &format!("/{}/qr?format=svg", plain.code), None).await;
    assert_eq!(status, 200);
    assert_eq!(h.get(hyper::header::CONTENT_TYPE).unwrap(), "image/svg+xml");
    assert!(String::from_utf8_lossy(&svg).contains("<svg"));
    assert_eq!(
        http(addr, &format!("/{}/qr?format=gif", plain.code), None)
            .await
            .0,
        400
    );
    assert_eq!(http(addr, "/Zz9Zz9Z/qr", None).await.0, 404);

    // Redirects count visits (QR codes don't); deleted links are gone.
    assert_eq!(c.link_info(plain.code.clone()).await.unwrap().visits, 2);
    assert!(c.link_delete(plain.code.clone()).await.unwrap());
    assert_eq!(http(addr, &format!("/{}", plain.code), None).await.0, 404);

    let text = node.metrics().await;
    for line in [
        "rush_links_redirects_total{status=\"302\"} 4",
        "rush_links_redirects_total{status=\"301\"} 1",
        "rush_links_redirects_total{status=\"200\"} 1",
        "rush_links_redirects_total{status=\"404\"} 6",
        "rush_links_resolves_total{result=\"miss\"} 3",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    node.stop().await;
}
