//! The service workloads against an in-process rushd (2 shards, HTTP on):
//! each runs clean, and what it did really reached the daemon — counted by
//! the daemon's own request counters and read back through the client.
//! Then every workload through the routing client against a 2-node cluster.

mod common;

use common::{assert_sane, run_every_workload, tiny, KEYS, REQUESTS};
use rush_bench::scrape::{self, Samples};
use rush_bench::workloads::{catalog, envelopes, limits, links_resolve};
use rush_bench::{workload, RunReport};
use rush_client::protocol::cmd::CatalogFilter;
use rush_client::Client;
use rush_daemon::{Clock, Config, Running};

async fn start() -> (tempfile::TempDir, Running) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut c = Config::small(dir.path());
    c.server.http = "127.0.0.1:0".into();
    c.catalog.cache_mb = 16;
    let running = rush_daemon::start(c, Clock::system())
        .await
        .expect("daemon starts");
    (dir, running)
}

/// The daemon's request counters.
fn requests(node: &Running) -> Samples {
    scrape::parse(&node.metrics().render(), &["rush_requests_total"])
}

/// How many `op` requests were answered `outcome` between two snapshots.
fn answered(before: &Samples, after: &Samples, op: &str, outcome: &str) -> f64 {
    let k = format!("rush_requests_total{{op=\"{op}\",outcome=\"{outcome}\"}}");
    after.get(&k).copied().unwrap_or(0.0) - before.get(&k).copied().unwrap_or(0.0)
}

async fn run(node: &Running, name: &str, preload: bool) -> (RunReport, Samples, Samples) {
    let before = requests(node);
    let mut o = tiny(&format!("rush://{}", node.addr()), preload);
    o.metrics = vec![node.http_addr().expect("http on").to_string()];
    let r = rush_bench::run(name, o)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    assert_sane(&r, REQUESTS);
    (r, before, requests(node))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_workloads_reach_the_daemon() {
    let (_dir, node) = start().await;
    let target = format!("rush://{}", node.addr());
    let client = Client::connect(&node.addr().to_string()).await.unwrap();

    // links-shorten: one LINK_SHORTEN per operation, each issued a code.
    let (_, b, a) = run(&node, "links-shorten", false).await;
    assert_eq!(answered(&b, &a, "LINK_SHORTEN", "ok"), REQUESTS as f64);

    // links-resolve: the preload's codes resolve to the preloaded URLs.
    let (r, b, a) = run(&node, "links-resolve", true).await;
    assert_eq!(r.preloaded, KEYS);
    // 150 links in batches of 2: at least 64 batches, spread over slots.
    assert_eq!(answered(&b, &a, "LINK_SHORTEN_BATCH", "ok"), 75.0);
    assert_eq!(answered(&b, &a, "LINK_RESOLVE", "ok"), REQUESTS as f64);
    assert_eq!(r.dist, "zipf:0.99", "its own popularity by default");
    let codes =
        workload::recall::<links_resolve::RushCodes>(&format!("links-resolve:rush:{target}"))
            .expect("codes kept");
    assert_eq!(codes.len(), KEYS);
    for k in [0, KEYS - 1] {
        let code = std::str::from_utf8(codes.get(k)).unwrap();
        let mut want = String::new();
        rush_bench::workloads::links_shorten::url(&mut want, "p", k, 100);
        assert_eq!(client.resolve(code).await.unwrap().target, want, "link {k}");
    }
    // A second preload of the same links adds nothing.
    let (r, b, a) = run(&node, "links-resolve", true).await;
    assert_eq!(r.preloaded, 0);
    assert_eq!(answered(&b, &a, "LINK_SHORTEN_BATCH", "ok"), 0.0);

    // limits: every order answered, allowed or LIMITED; the policy is set.
    let (r, b, a) = run(&node, "limits", false).await;
    assert_eq!(
        answered(&b, &a, "LIMIT_ACQUIRE", "ok"),
        (r.ok - r.denied) as f64
    );
    assert_eq!(
        answered(&b, &a, "LIMIT_ACQUIRE", "LIMITED"),
        r.denied as f64
    );
    assert!(r.ok > r.denied, "most orders are allowed: {r:?}");
    let p = client.limit_policy_get(limits::POLICY).await.unwrap();
    let maxes: Vec<u64> = p.rules.iter().map(|r| r.max).collect();
    assert_eq!(maxes, vec![limits::ITEM_MAX, limits::TOTAL_MAX]);

    // catalog: the preloaded records are there; absent owners are Bloom
    // negatives; the run read rushd's metrics.
    let (r, b, a) = run(&node, "catalog", true).await;
    assert_eq!(r.preloaded, KEYS);
    assert_eq!(answered(&b, &a, "CATALOG_QUERY", "ok"), REQUESTS as f64);
    assert!(r.misses > 0 && r.misses < r.ok, "{r:?}");
    let recs = client
        .catalog_query("owner:000000000007", &CatalogFilter::default())
        .await
        .unwrap();
    assert_eq!(recs.len() as u64, catalog::records_of(7));
    assert_eq!(recs[0].get("status"), Some("active"));
    let q = rush_bench::report::reads_per_query(&r).expect("storage reads measured");
    assert_eq!(q.queries, REQUESTS as f64);
    assert!(
        q.reads_per_query <= rush_bench::report::reads_goal(&q),
        "{} reads/query",
        q.reads_per_query
    );
    // Absent owners never reached storage unless the filter said maybe.
    assert!(q.bloom_negative > 0.2, "{}", q.bloom_negative);
    // catalog-zipf finds the data loaded (the marker) and loads nothing.
    let (r, b, a) = run(&node, "catalog-zipf", true).await;
    assert_eq!(r.preloaded, 0);
    assert_eq!(answered(&b, &a, "CATALOG_PUT", "ok"), 0.0);
    // The old names run the same workloads and report the new ones.
    for (old, new) in [("lookups", "catalog"), ("lookups-zipf", "catalog-zipf")] {
        let (r, b, a) = run(&node, old, true).await;
        assert_eq!(r.workload, new);
        assert_eq!(r.preloaded, 0, "{old}: the same data set");
        assert_eq!(answered(&b, &a, "CATALOG_QUERY", "ok"), REQUESTS as f64);
    }

    // envelopes: grabs granted and recorded; the books balance.
    let (r, b, a) = run(&node, "envelopes", false).await;
    assert_eq!(
        answered(&b, &a, "ENVELOPE_CREATE", "ok"),
        (envelopes::HOT * 2) as f64,
        "two envelopes per hot stream for 600 grabs"
    );
    assert_eq!(
        answered(&b, &a, "ENVELOPE_GRAB", "ok"),
        (r.ok - r.denied) as f64
    );
    let audit = client.envelope_audit().await.unwrap();
    assert!(audit.ok(), "{audit:?}");
    assert_eq!(audit.grabs, r.ok - r.denied);

    // envelopes-held: the preload's envelopes take every grab; a second
    // run creates none.
    let (r, b, a) = run(&node, "envelopes-held", true).await;
    assert_eq!(r.preloaded, KEYS);
    assert_eq!(answered(&b, &a, "ENVELOPE_CREATE", "ok"), KEYS as f64);
    assert_eq!(r.denied, 0, "600 grabs can't empty 150 envelopes of 100");
    assert_eq!(answered(&b, &a, "ENVELOPE_GRAB", "ok"), r.ok as f64);
    let (r, b, a) = run(&node, "envelopes-held", true).await;
    assert_eq!(r.preloaded, 0);
    assert_eq!(answered(&b, &a, "ENVELOPE_CREATE", "ok"), 0.0);
    let before = audit;
    let audit = client.envelope_audit().await.unwrap();
    assert!(audit.ok(), "{audit:?}");
    assert_eq!(audit.grabs, before.grabs + 2 * REQUESTS);
    assert_eq!(audit.envelopes, before.envelopes + KEYS);

    // mixed: all of it at once, nothing loaded again.
    let (r, b, a) = run(&node, "mixed", true).await;
    assert_eq!(r.preloaded, 0);
    for op in [
        "LINK_RESOLVE",
        "CATALOG_QUERY",
        "LIMIT_ACQUIRE",
        "ENVELOPE_GRAB",
    ] {
        assert!(answered(&b, &a, op, "ok") > 0.0, "mixed sent {op}");
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_runs_against_a_cluster() {
    let (_d1, a) = start().await;
    let (_d2, b) = start().await;
    let addrs = vec![a.addr().to_string(), b.addr().to_string()];
    let map = rush_client::cluster::create(&addrs, false, Default::default())
        .await
        .expect("cluster created");
    assert_eq!(map.nodes.len(), 2);
    let target = format!("rush://{},{}", addrs[0], addrs[1]);
    let (before_a, before_b) = (requests(&a), requests(&b));
    let metrics = vec![
        a.http_addr().unwrap().to_string(),
        b.http_addr().unwrap().to_string(),
    ];
    let reports = run_every_workload(&target, |o| o.metrics = metrics.clone()).await;
    for r in &reports {
        assert_eq!(r.target, target);
    }
    let catalog = reports.iter().find(|r| r.workload == "catalog");
    let q = rush_bench::report::reads_per_query(catalog.expect("catalog ran"))
        .expect("both nodes read");
    assert_eq!(q.queries, REQUESTS as f64, "summed over the nodes");
    // Both nodes served every service: the client routed by slot.
    let (after_a, after_b) = (requests(&a), requests(&b));
    for op in [
        "SET",
        "LINK_SHORTEN",
        "LINK_RESOLVE",
        "LIMIT_ACQUIRE",
        "CATALOG_QUERY",
        "ENVELOPE_GRAB",
    ] {
        let on_a = answered(&before_a, &after_a, op, "ok");
        let on_b = answered(&before_b, &after_b, op, "ok");
        assert!(on_a > 0.0 && on_b > 0.0, "{op}: {on_a} on A, {on_b} on B");
    }
    // Nothing was refused as sent to the wrong node.
    for (before, after) in [(&before_a, &after_a), (&before_b, &after_b)] {
        let moved: f64 = after
            .iter()
            .filter(|(k, _)| k.contains("outcome=\"MOVED\""))
            .map(|(k, v)| v - before.get(k).copied().unwrap_or(0.0))
            .sum();
        assert_eq!(moved, 0.0, "the client knew the map");
    }
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
}
