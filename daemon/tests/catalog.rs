//! Catalog lookups through a real daemon and client: the three layers
//! (Bloom filter, hot cache, RocksDB), single flight, shedding, warm-up,
//! restarts, aliases, filters and bad input.

mod common;

use bytes::Bytes;
use common::TestNode;
use proptest::prelude::*;
use rush_client::protocol::cmd::{CatalogFilter, CatalogPut, CatalogQuery, Record, ShedMode};
use rush_client::protocol::{Command, ErrorCode};
use rush_client::{Client, ClientError, ClientOptions, Connection};
use rush_daemon::catalog::metrics::Path;
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

const T: Duration = Duration::from_secs(60);

fn reads(node: &TestNode) -> u64 {
    node.running().storage().stats.reads.get()
}

fn path(node: &TestNode, p: Path) -> u64 {
    node.running().metrics().catalog.total(p)
}

fn contract(id: &str, plan: &str) -> Record {
    Record::new(id.to_string()).attr("plan", plan.to_string())
}

fn ids(records: &[Record]) -> Vec<&str> {
    records.iter().map(|r| r.id_str()).collect()
}

/// Run `f` over `inputs` with up to `window` calls in flight; results in
/// input order.
async fn pipelined<I, F, Fut, R>(inputs: Vec<I>, window: usize, f: F) -> Vec<R>
where
    F: Fn(I) -> Fut,
    Fut: Future<Output = R> + Send + 'static,
    R: Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    let mut out: Vec<Option<R>> = (0..inputs.len()).map(|_| None).collect();
    for (i, input) in inputs.into_iter().enumerate() {
        if set.len() >= window {
            let (j, r) = set.join_next().await.expect("a task").expect("no panic");
            out[j] = Some(r);
        }
        let fut = f(input);
        set.spawn(async move { (i, fut.await) });
    }
    while let Some(done) = set.join_next().await {
        let (j, r) = done.expect("no panic");
        out[j] = Some(r);
    }
    out.into_iter()
        .map(|r| r.expect("every call answered"))
        .collect()
}

/// Run every shard's timers until `done` holds (a rebuild takes a few ticks).
async fn ticks_until(c: &Client, done: impl Fn() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        c.clock_advance(Duration::ZERO).await.unwrap();
    }
    panic!("still not done after 500 ticks");
}

async fn raw_conn(node: &TestNode) -> Connection {
    Connection::connect(&node.addr().to_string(), Duration::from_secs(5))
        .await
        .expect("connect")
}

/// CATALOG_QUERY (no filter) of every one of `owners` on `conn`, 4000 in
/// flight; the answers in the owners' order.
async fn query_all(
    conn: &Connection,
    owners: Vec<String>,
) -> Vec<Result<<CatalogQuery as Command>::Reply, ClientError>> {
    pipelined(owners, 4000, |owner| {
        let conn = conn.clone();
        async move {
            conn.call(
                &CatalogQuery {
                    owner: owner.into(),
                    filter: CatalogFilter::default(),
                },
                T,
            )
            .await
        }
    })
    .await
}

/// The layers of both shards' Bloom filters, as the gauges last showed.
fn bloom_layers(node: &TestNode) -> i64 {
    let m = &node.running().metrics().catalog;
    (0..2)
        .map(|s| m.bloom_layers.with_label_values(&[&s.to_string()]).get())
        .sum()
}

/// A client that reports UNAVAILABLE at once instead of retrying it.
async fn impatient(node: &TestNode) -> Client {
    Client::connect_with(
        &node.addr().to_string(),
        ClientOptions {
            retry_deadline: Duration::ZERO,
            ..ClientOptions::default()
        },
    )
    .await
    .expect("connect")
}

/// `prefix0`, `prefix1`, … for the numbers in `range`.
fn owners(prefix: &str, range: std::ops::Range<u32>) -> impl Iterator<Item = String> + '_ {
    range.map(move |i| format!("{prefix}{i}"))
}

/// Each of `owners` has exactly `n` records (asked without a filter).
async fn assert_records(c: &Client, owners: impl IntoIterator<Item = String>, n: usize) {
    let all = CatalogFilter::default();
    for owner in owners {
        let got = c.catalog_query(owner.clone(), &all).await.unwrap();
        assert_eq!(got.len(), n, "owner {owner}");
    }
}

/// Put one record for each owner, many in flight.
async fn put_owners(node: &TestNode, owners: Vec<String>) {
    let conn = raw_conn(node).await;
    let results = pipelined(owners, 2000, |owner| {
        let conn = conn.clone();
        async move {
            conn.call(
                &CatalogPut {
                    owner: owner.into(),
                    record: contract("c1", "basic"),
                },
                T,
            )
            .await
        }
    })
    .await;
    for r in results {
        r.expect("put");
    }
}

#[tokio::test]
async fn put_query_delete_and_the_cache_is_never_stale() {
    let mut node = TestNode::start().await;
    let c = &node.client;
    let all = CatalogFilter::default();
    assert!(c.catalog_query("M1", &all).await.unwrap().is_empty());

    assert!(c.catalog_put("M1", contract("c2", "gold")).await.unwrap());
    assert!(c.catalog_put("M1", contract("c1", "basic")).await.unwrap());
    let got = c.catalog_query("M1", &all).await.unwrap();
    assert_eq!(ids(&got), ["c1", "c2"], "records come back by id");
    assert_eq!(got[1].get("plan"), Some("gold"));

    // Replacing a record is visible on the very next query (the cache is
    // written through by the shard that writes storage).
    let hits = path(&node, Path::CacheHit);
    assert!(!c
        .catalog_put("M1", contract("c2", "platinum"))
        .await
        .unwrap());
    let got = c.catalog_query("M1", &all).await.unwrap();
    assert_eq!(got[1].get("plan"), Some("platinum"));
    assert!(
        path(&node, Path::CacheHit) > hits,
        "answered from the cache"
    );

    assert!(c.catalog_delete("M1", "c1").await.unwrap());
    assert!(!c.catalog_delete("M1", "c1").await.unwrap());
    assert_eq!(ids(&c.catalog_query("M1", &all).await.unwrap()), ["c2"]);
    assert!(c.catalog_delete("M1", "c2").await.unwrap());
    assert!(c.catalog_query("M1", &all).await.unwrap().is_empty());
    assert!(!c.catalog_delete("never", "c1").await.unwrap());

    // And the same holds in storage, not only in the cache.
    c.catalog_put("M1", contract("c3", "gold")).await.unwrap();
    node.restart().await;
    let got = node.client.catalog_query("M1", &all).await.unwrap();
    assert_eq!(ids(&got), ["c3"]);
    node.stop().await;
}

#[tokio::test]
async fn a_bloom_negative_reads_nothing() {
    let node = TestNode::start().await;
    let c = &node.client;
    put_owners(&node, (0..500).map(|i| format!("present-{i}")).collect()).await;
    let mut negatives = 0;
    for i in 0..300 {
        let (r0, n0) = (reads(&node), path(&node, Path::BloomNegative));
        let got = c
            .catalog_query(format!("absent-{i}"), &CatalogFilter::default())
            .await
            .unwrap();
        assert!(got.is_empty());
        if path(&node, Path::BloomNegative) > n0 {
            negatives += 1;
            assert_eq!(reads(&node), r0, "a Bloom negative touched storage");
        } else {
            // A false positive: one storage read, then a cached "absent".
            assert_eq!(reads(&node), r0 + 1);
        }
    }
    assert!(
        negatives >= 280,
        "only {negatives} of 300 were Bloom negatives"
    );
    // The same figures on /metrics.
    c.clock_advance(Duration::ZERO).await.unwrap();
    let http = node.running().http_addr().expect("http on");
    let (status, body) = common::http_get(http, "/metrics").await;
    assert_eq!(status, 200);
    let line =
        format!("rush_catalog_answers_total{{op=\"query\",path=\"bloom_negative\"}} {negatives}");
    assert!(body.contains(&line), "no {line:?} in /metrics");
    for name in [
        "rush_catalog_bloom_false_positive_rate",
        "rush_catalog_cache_bytes{shard=\"0\"}",
        "rush_catalog_cache_evictions_total",
        "rush_catalog_single_flight_joins_total",
        "rush_catalog_shed_total",
        "rush_catalog_bloom_items{shard=\"1\"}",
    ] {
        assert!(body.contains(name), "no {name} in /metrics");
    }
    node.stop().await;
}

/// A start builds each shard's filter as one layer sized for the owners it
/// stores, however many layers it had grown to before: an absent owner
/// costs one layer's probes, present owners still pass and absent ones
/// keep to the false-positive target.
#[tokio::test]
async fn a_restart_builds_one_filter_layer_sized_for_what_is_stored() {
    let target = 0.01;
    let mut node = TestNode::start_with(|c| {
        c.catalog.bloom_expected_items = 10_000;
        c.catalog.bloom_fp_rate = target;
    })
    .await;
    let owners: Vec<String> = (0..30_000).map(|i| format!("R{i:06}")).collect();
    put_owners(&node, owners.clone()).await;
    node.client.clock_advance(Duration::ZERO).await.unwrap(); // gauges
    assert!(
        bloom_layers(&node) >= 4,
        "filters grew ({} layers)",
        bloom_layers(&node)
    );

    node.restart().await;
    assert_eq!(bloom_layers(&node), 2, "one layer per shard after a start");
    // Every stored owner passes the filter and answers its record.
    let conn = raw_conn(&node).await;
    let found = query_all(&conn, owners).await;
    for f in found {
        assert_eq!(f.expect("answered").records.len(), 1);
    }
    // Absent owners: within the target.
    let miss0 = path(&node, Path::StorageMiss);
    let n = 20_000u64;
    let answers = query_all(&conn, (0..n).map(|i| format!("absent-{i}")).collect()).await;
    for a in answers {
        assert!(a.expect("answered").records.is_empty());
    }
    let rate = (path(&node, Path::StorageMiss) - miss0) as f64 / n as f64;
    assert!(rate <= 1.5 * target, "measured {rate} over 1.5 × {target}");
    node.stop().await;
}

#[tokio::test]
async fn false_positive_rate_on_100k_absent_owners_is_within_bound() {
    let target = 0.01;
    let node = TestNode::start_with(|c| {
        c.catalog.bloom_expected_items = 10_000;
        c.catalog.bloom_fp_rate = target;
    })
    .await;
    // Three times the expected items: each shard's filter has to grow.
    put_owners(&node, (0..30_000).map(|i| format!("M{i:06}")).collect()).await;
    node.client.clock_advance(Duration::ZERO).await.unwrap(); // gauges
    let layers = bloom_layers(&node);
    assert!(layers >= 4, "filters grew ({layers} layers over 2 shards)");

    let (r0, miss0, neg0) = (
        reads(&node),
        path(&node, Path::StorageMiss),
        path(&node, Path::BloomNegative),
    );
    let conn = raw_conn(&node).await;
    let n = 100_000u64;
    let answers = query_all(&conn, (0..n).map(|i| format!("absent-{i}")).collect()).await;
    for a in answers {
        assert!(a.expect("answered").records.is_empty());
    }
    let false_positives = path(&node, Path::StorageMiss) - miss0;
    let negatives = path(&node, Path::BloomNegative) - neg0;
    assert_eq!(false_positives + negatives, n);
    assert_eq!(
        reads(&node) - r0,
        false_positives,
        "one read per false positive, none otherwise"
    );
    let rate = false_positives as f64 / n as f64;
    println!("measured false-positive rate {rate:.5} (target {target}, {layers} layers)");
    assert!(rate <= 1.5 * target, "measured {rate} over 1.5 × {target}");
    node.client.clock_advance(Duration::ZERO).await.unwrap();
    let gauge = node.running().metrics().catalog.false_positive_rate.get();
    assert!(
        (gauge - rate).abs() < 0.002,
        "gauge {gauge} vs measured {rate}"
    );
    node.stop().await;
}

#[tokio::test]
async fn hundred_concurrent_queries_for_a_cold_owner_read_storage_once() {
    let mut node = TestNode::start().await;
    for id in ["c1", "c2", "c3"] {
        node.client
            .catalog_put("cold", contract(id, "gold"))
            .await
            .unwrap();
    }
    node.restart().await; // empty cache; filter rebuilt from storage
    let mut clients = Vec::new();
    for _ in 0..100 {
        clients.push(common::connect(node.addr()).await);
    }
    let (r0, hit0, join0, cache0) = (
        reads(&node),
        path(&node, Path::StorageHit),
        node.running().metrics().catalog.single_flight_joins.get(),
        path(&node, Path::CacheHit),
    );
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(100));
    let mut tasks = Vec::new();
    for c in clients {
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            c.catalog_query("cold", &CatalogFilter::default()).await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().len(), 3);
    }
    assert_eq!(
        reads(&node) - r0,
        1,
        "100 concurrent cold queries, one storage read"
    );
    assert_eq!(path(&node, Path::StorageHit) - hit0, 1);
    let joins = node.running().metrics().catalog.single_flight_joins.get() - join0;
    assert_eq!(path(&node, Path::CacheHit) - cache0, 99);
    println!("{joins} of the 99 others joined the read in its own group");
    node.stop().await;
}

#[tokio::test]
async fn shedding_on_fails_misses_and_keeps_hits_and_negatives() {
    let mut node = TestNode::start().await;
    node.client
        .catalog_put("hot", contract("c1", "gold"))
        .await
        .unwrap();
    node.client
        .catalog_put("cold", contract("c1", "gold"))
        .await
        .unwrap();
    node.client
        .catalog_put("warm", contract("c1", "gold"))
        .await
        .unwrap();
    node.restart().await;
    let c = impatient(&node).await;
    let all = CatalogFilter::default();
    assert_eq!(c.catalog_query("hot", &all).await.unwrap().len(), 1); // now cached

    c.catalog_shed(ShedMode::On).await.unwrap();
    let r0 = reads(&node);
    assert_eq!(
        c.catalog_query("hot", &all).await.unwrap().len(),
        1,
        "hits answer"
    );
    let e = c.catalog_query("cold", &all).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Unavailable), "{e}");
    assert!(
        c.catalog_query("nobody-here", &all)
            .await
            .unwrap()
            .is_empty(),
        "negatives answer"
    );
    assert_eq!(reads(&node), r0, "no storage reads while shed");
    assert!(node.running().metrics().catalog.shed.get() >= 1);

    // Warm-up is an operator's explicit read: it loads even while shed.
    let w = c.catalog_warm(["warm", "nobody-here"]).await.unwrap();
    assert_eq!((w.loaded, w.absent), (1, 1));
    assert_eq!(c.catalog_query("warm", &all).await.unwrap().len(), 1);
    // Writes are never shed, and write through to the cache.
    c.catalog_put("cold", contract("c2", "gold")).await.unwrap();
    assert_eq!(c.catalog_query("cold", &all).await.unwrap().len(), 2);

    c.catalog_shed(ShedMode::Off).await.unwrap();
    node.restart().await;
    let c = impatient(&node).await;
    assert_eq!(c.catalog_query("cold", &all).await.unwrap().len(), 2);
    node.stop().await;
}

#[tokio::test]
async fn auto_shedding_follows_queue_depth() {
    let mut node = TestNode::start().await;
    let owners: Vec<String> = (0..2000).map(|i| format!("auto-{i}")).collect();
    put_owners(&node, owners.clone()).await;
    node.restart_with(|c| {
        c.storage.max_batch = 1;
        c.catalog.shed = rush_daemon::catalog::config::Shed::Auto;
        c.catalog.shed_queue_depth = 0;
    })
    .await;
    // A lone query finds an empty queue: it reads storage.
    let c = impatient(&node).await;
    assert_eq!(
        c.catalog_query("auto-0", &CatalogFilter::default())
            .await
            .unwrap()
            .len(),
        1
    );
    // A flood of cold queries (plus absent owners) builds a queue.
    let conn = raw_conn(&node).await;
    let mut inputs: Vec<String> = owners[1..].to_vec();
    inputs.extend((0..2000).map(|i| format!("nobody-{i}")));
    let answers = query_all(&conn, inputs.clone()).await;
    let mut shed = 0;
    let mut shed_absent = 0;
    for (owner, a) in inputs.iter().zip(answers) {
        match a {
            Ok(r) => assert_eq!(r.records.len(), owner.starts_with("auto-") as usize),
            Err(e) => {
                assert_eq!(e.code(), Some(ErrorCode::Unavailable), "{e}");
                shed += 1;
                shed_absent += owner.starts_with("nobody-") as u64;
            }
        }
    }
    assert!(shed > 0, "a deep queue shed some storage reads");
    assert_eq!(node.running().metrics().catalog.shed.get(), shed);
    // Only absent owners the filter couldn't rule out (false positives)
    // needed storage; Bloom negatives are never shed.
    let negatives = path(&node, Path::BloomNegative);
    assert!(
        shed_absent <= 2000 - negatives,
        "{shed_absent} shed, {negatives} negatives"
    );
    assert!(negatives >= 1900);
    node.stop().await;
}

#[tokio::test]
async fn filter_and_data_survive_restart() {
    let mut node = TestNode::start().await;
    let c = &node.client;
    for i in 0..200 {
        c.catalog_put(format!("R{i}"), contract("c1", "gold"))
            .await
            .unwrap();
    }
    c.catalog_alias_set("name", "Acme", "R7").await.unwrap();
    c.catalog_delete("R0", "c1").await.unwrap();
    node.restart().await;
    let c = &node.client;
    let all = CatalogFilter::default();
    assert_records(c, owners("R", 1..200), 1).await;
    assert!(c.catalog_query("R0", &all).await.unwrap().is_empty());
    assert_eq!(
        ids(&c.catalog_query_alias("name", "Acme", &all).await.unwrap()),
        ["c1"]
    );
    // The rebuilt filter answers absent owners without storage.
    let (r0, n0) = (reads(&node), path(&node, Path::BloomNegative));
    for i in 0..100 {
        c.catalog_query(format!("gone-{i}"), &all).await.unwrap();
    }
    let negatives = path(&node, Path::BloomNegative) - n0;
    assert!(negatives >= 90, "{negatives}");
    assert_eq!(reads(&node) - r0, 100 - negatives);
    node.client.clock_advance(Duration::ZERO).await.unwrap();
    let m = &node.running().metrics().catalog;
    let items: i64 = (0..2)
        .map(|s| m.bloom_items.with_label_values(&[&s.to_string()]).get())
        .sum();
    assert_eq!(items, 200, "199 owners and one alias");
    node.stop().await;
}

#[tokio::test]
async fn aliases_and_filters() {
    let node = TestNode::start().await;
    let c = &node.client;
    let day = 86_400_000u64;
    c.catalog_put(
        "M9",
        Record::new("old")
            .attr("plan", "gold")
            .attr("region", "north")
            .valid(Some(0), Some(10 * day)),
    )
    .await
    .unwrap();
    c.catalog_put(
        "M9",
        Record::new("new")
            .attr("plan", "gold")
            .attr("region", "south")
            .valid(Some(10 * day), None),
    )
    .await
    .unwrap();
    c.catalog_put("M9", Record::new("misc").attr("plan", "basic"))
        .await
        .unwrap();

    let gold = CatalogFilter::default().attr("plan", "gold");
    assert_eq!(
        ids(&c.catalog_query("M9", &gold).await.unwrap()),
        ["new", "old"]
    );
    let at = |t| CatalogFilter::default().at(t);
    assert_eq!(
        ids(&c.catalog_query("M9", &at(5 * day)).await.unwrap()),
        ["misc", "old"]
    );
    assert_eq!(
        ids(&c.catalog_query("M9", &at(10 * day)).await.unwrap()),
        ["misc", "new"]
    );
    let both = gold.clone().attr("region", "south").at(11 * day);
    assert_eq!(ids(&c.catalog_query("M9", &both).await.unwrap()), ["new"]);
    let none = gold.clone().attr("region", "west");
    assert!(c.catalog_query("M9", &none).await.unwrap().is_empty());

    // Aliases: by name and by account; two round trips in one call.
    assert!(c.catalog_alias_set("name", "Nine Ltd", "M9").await.unwrap());
    assert!(c
        .catalog_alias_set("account", "6222-9", "M9")
        .await
        .unwrap());
    assert_eq!(
        c.catalog_resolve("name", "Nine Ltd").await.unwrap(),
        Some(Bytes::from("M9"))
    );
    assert_eq!(
        c.catalog_resolve("account", "Nine Ltd").await.unwrap(),
        None
    );
    assert_eq!(
        ids(&c
            .catalog_query_alias("account", "6222-9", &both)
            .await
            .unwrap()),
        ["new"]
    );
    assert!(c
        .catalog_query_alias("name", "Nobody", &gold)
        .await
        .unwrap()
        .is_empty());
    // Re-pointing and removing aliases take effect at once.
    c.catalog_put("M10", contract("x", "gold")).await.unwrap();
    assert!(!c
        .catalog_alias_set("name", "Nine Ltd", "M10")
        .await
        .unwrap());
    assert_eq!(
        ids(&c
            .catalog_query_alias("name", "Nine Ltd", &gold)
            .await
            .unwrap()),
        ["x"]
    );
    assert!(c.catalog_alias_del("name", "Nine Ltd").await.unwrap());
    assert!(!c.catalog_alias_del("name", "Nine Ltd").await.unwrap());
    assert_eq!(c.catalog_resolve("name", "Nine Ltd").await.unwrap(), None);
    node.stop().await;
}

#[tokio::test]
async fn bad_input_is_refused_and_changes_nothing() {
    let node = TestNode::start_with(|c| c.catalog.max_records_per_owner = 5).await;
    let c = &node.client;
    let all = CatalogFilter::default();
    c.catalog_put("B1", contract("c0", "gold")).await.unwrap();
    let code = |r: Result<bool, rush_client::ClientError>| r.unwrap_err().code();

    assert_eq!(
        code(c.catalog_put("", contract("c1", "x")).await),
        Some(ErrorCode::BadRequest)
    );
    assert_eq!(
        code(c.catalog_put("B1", Record::new("").attr("a", "b")).await),
        Some(ErrorCode::BadRequest)
    );
    assert_eq!(
        code(
            c.catalog_put("B1", Record::new("d").attr("a", "1").attr("a", "2"))
                .await
        ),
        Some(ErrorCode::BadRequest)
    );
    assert_eq!(
        code(
            c.catalog_put("B1", Record::new("d").valid(Some(9), Some(3)))
                .await
        ),
        Some(ErrorCode::BadRequest)
    );
    let mut many = Record::new("many");
    for i in 0..65 {
        many = many.attr(format!("k{i}"), "v");
    }
    assert_eq!(
        code(c.catalog_put("B1", many).await),
        Some(ErrorCode::TooLarge)
    );
    let long_value = Record::new("long").attr("k", "x".repeat(5000));
    assert_eq!(
        code(c.catalog_put("B1", long_value).await),
        Some(ErrorCode::TooLarge)
    );
    let mut huge = Record::new("huge");
    for i in 0..20 {
        huge = huge.attr(format!("k{i}"), "x".repeat(4000));
    }
    assert_eq!(
        code(c.catalog_put("B1", huge).await),
        Some(ErrorCode::TooLarge)
    );
    assert_eq!(
        code(c.catalog_alias_set("", "a", "B1").await),
        Some(ErrorCode::BadRequest)
    );
    assert_eq!(
        code(c.catalog_alias_set("name", "", "B1").await),
        Some(ErrorCode::BadRequest)
    );
    assert_eq!(
        code(c.catalog_alias_set("name", "a", "").await),
        Some(ErrorCode::BadRequest)
    );
    let e = c.catalog_query("", &all).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BadRequest));

    // Too many records per owner: the sixth is refused, the five stay.
    for i in 1..5 {
        c.catalog_put("B1", contract(&format!("c{i}"), "gold"))
            .await
            .unwrap();
    }
    assert_eq!(
        code(c.catalog_put("B1", contract("c5", "gold")).await),
        Some(ErrorCode::TooLarge)
    );
    // Replacing one of the five is fine.
    assert!(!c.catalog_put("B1", contract("c4", "basic")).await.unwrap());

    let got = c.catalog_query("B1", &all).await.unwrap();
    assert_eq!(ids(&got), ["c0", "c1", "c2", "c3", "c4"]);
    assert!(got.iter().all(|r| r.attributes.len() == 1));
    assert!(c
        .catalog_query("", &CatalogFilter::default())
        .await
        .is_err());
    c.ping().await.unwrap();
    node.stop().await;
}

#[tokio::test]
async fn an_owner_over_one_mebibyte_is_refused() {
    let node = TestNode::start().await;
    let c = &node.client;
    let big = |i: usize| {
        let mut r = Record::new(format!("r{i:02}"));
        for k in 0..15 {
            r = r.attr(format!("k{k}"), "y".repeat(4000));
        }
        r
    };
    let mut stored = 0;
    let mut refused = None;
    for i in 0..40 {
        match c.catalog_put("BIG", big(i)).await {
            Ok(_) => stored += 1,
            Err(e) => {
                refused = e.code();
                break;
            }
        }
    }
    assert_eq!(refused, Some(ErrorCode::TooLarge));
    assert!((15..20).contains(&stored), "{stored}");
    assert_eq!(
        c.catalog_query("BIG", &CatalogFilter::default())
            .await
            .unwrap()
            .len(),
        stored
    );
    node.stop().await;
}

#[tokio::test]
async fn deletes_drift_is_bounded_by_rebuilds() {
    let node = TestNode::start_with(|c| {
        // Timers run only when the test advances the clock.
        c.storage.tick_ms = 3_600_000;
        c.catalog.bloom_rebuild_min_stale = 10;
        c.catalog.bloom_rebuild_stale_fraction = 0.2;
    })
    .await;
    let c = &node.client;
    put_owners(&node, owners("D", 0..200).collect()).await;
    // Remove 100 owners: still in the filters, each costs a false positive.
    for i in 0..100 {
        assert!(c.catalog_delete(format!("D{i}"), "c1").await.unwrap());
    }
    let (neg0, cneg0) = (
        path(&node, Path::BloomNegative),
        path(&node, Path::CacheNegative),
    );
    assert_records(c, owners("D", 0..100), 0).await;
    assert_eq!(
        path(&node, Path::CacheNegative) - cneg0,
        100,
        "answered by cached absents"
    );
    assert_eq!(path(&node, Path::BloomNegative), neg0);
    let rebuilds0 = node.running().metrics().catalog.bloom_rebuilds.get();

    // The next ticks rebuild each shard's filter (~50 stale of ~100 items),
    // a slice of slots per tick.
    let m = &node.running().metrics().catalog;
    ticks_until(c, || m.bloom_rebuilds.get() - rebuilds0 == 2).await;
    for s in 0..2 {
        assert_eq!(m.bloom_stale.with_label_values(&[&s.to_string()]).get(), 0);
    }
    let neg1 = path(&node, Path::BloomNegative);
    assert_records(c, owners("D", 0..100), 0).await;
    assert!(
        path(&node, Path::BloomNegative) - neg1 >= 95,
        "deleted owners left the filter"
    );
    assert_records(c, owners("D", 100..200), 1).await;

    // An admin rebuild starts on every shard and keeps every owner.
    assert_eq!(c.catalog_rebuild().await.unwrap(), 2);
    ticks_until(c, || m.bloom_rebuilds.get() - rebuilds0 == 4).await;
    assert_records(c, owners("D", 100..200), 1).await;
    node.stop().await;
}

#[tokio::test]
async fn writes_during_a_background_rebuild_are_kept() {
    let node = TestNode::start_with(|c| {
        c.storage.shards = 1;
        c.catalog.bloom_rebuild_keys_per_tick = 1; // one slot per tick
    })
    .await;
    let c = &node.client;
    put_owners(&node, owners("W", 0..50).collect()).await;
    c.catalog_rebuild().await.unwrap();
    // Some ticks scan a few slots; writes land on slots scanned and not yet.
    for i in 0..30 {
        c.clock_advance(Duration::ZERO).await.unwrap();
        c.catalog_put(format!("late-{i}"), contract("c1", "x"))
            .await
            .unwrap();
    }
    // Finish the rebuild.
    let rebuilds = &node.running().metrics().catalog.bloom_rebuilds;
    ticks_until(c, || rebuilds.get() == 1).await;
    // Nothing written before or during the rebuild is missing from the new filter.
    assert_records(c, owners("W", 0..50), 1).await;
    assert_records(c, owners("late-", 0..30), 1).await;
    node.stop().await;
}

#[test]
fn no_false_negatives_through_the_daemon() {
    #[derive(Debug, Clone)]
    enum Op {
        Put(u8, u8, u8),
        Delete(u8, u8),
        Query(u8),
    }
    let op = prop_oneof![
        4 => (0u8..12, 0u8..4, 0u8..3).prop_map(|(o, r, v)| Op::Put(o, r, v)),
        2 => (0u8..12, 0u8..4).prop_map(|(o, r)| Op::Delete(o, r)),
        2 => (0u8..16).prop_map(Op::Query),
    ];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let node = rt.block_on(TestNode::start());
    let case = std::cell::Cell::new(0u32);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&proptest::collection::vec(op, 1..60), |ops| {
            case.set(case.get() + 1);
            let c = &node.client;
            let owner = |o: u8| format!("p{}-{o}", case.get());
            rt.block_on(async {
                let mut model: BTreeMap<u8, BTreeMap<u8, u8>> = BTreeMap::new();
                let check = |o: u8, got: Vec<Record>, model: &BTreeMap<u8, BTreeMap<u8, u8>>| {
                    let want: Vec<(String, String)> = model
                        .get(&o)
                        .map(|m| {
                            m.iter()
                                .map(|(r, v)| (format!("r{r}"), format!("v{v}")))
                                .collect()
                        })
                        .unwrap_or_default();
                    let got: Vec<(String, String)> = got
                        .iter()
                        .map(|r| (r.id_str().to_string(), r.get("a").unwrap().to_string()))
                        .collect();
                    assert_eq!(got, want, "owner {o}");
                };
                for op in &ops {
                    match *op {
                        Op::Put(o, r, v) => {
                            let rec = Record::new(format!("r{r}")).attr("a", format!("v{v}"));
                            c.catalog_put(owner(o), rec).await.unwrap();
                            model.entry(o).or_default().insert(r, v);
                        }
                        Op::Delete(o, r) => {
                            let existed = model.get_mut(&o).and_then(|m| m.remove(&r)).is_some();
                            let removed =
                                c.catalog_delete(owner(o), format!("r{r}")).await.unwrap();
                            assert_eq!(removed, existed);
                        }
                        Op::Query(o) => {
                            let got = c.catalog_query(owner(o), &CatalogFilter::default()).await;
                            check(o, got.unwrap(), &model);
                        }
                    }
                }
                for o in 0..16 {
                    let got = c.catalog_query(owner(o), &CatalogFilter::default()).await;
                    check(o, got.unwrap(), &model);
                }
            });
            Ok(())
        })
        .unwrap();
    rt.block_on(node.stop());
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = common::Spawned::start(dir.path(), &[]);
    let c = common::connect(first.addr).await;
    for i in 0..50 {
        c.catalog_put(format!("K{i}"), contract("c1", "gold"))
            .await
            .unwrap();
    }
    c.catalog_delete("K0", "c1").await.unwrap();
    c.catalog_alias_set("name", "Kay", "K7").await.unwrap();
    first.kill9();
    drop(c);

    let second = common::Spawned::start(dir.path(), &[]);
    let c = common::connect(second.addr).await;
    let all = CatalogFilter::default();
    assert!(c.catalog_query("K0", &all).await.unwrap().is_empty());
    assert_records(&c, owners("K", 1..50), 1).await;
    assert_eq!(
        c.catalog_resolve("name", "Kay").await.unwrap(),
        Some(Bytes::from("K7"))
    );
}
