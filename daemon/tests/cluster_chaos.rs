//! The cluster's done-when test: three `rushd` processes on loopback, a
//! mixed workload through the client library (short links, purchase limits,
//! catalog lookups, red envelopes), and meanwhile a rolling restart of every
//! node (SIGTERM, start again on the same port), a live move of 300 slots
//! from one node to another, and a SIGKILL of a node and its restart.
//! Afterwards every acknowledged write is there exactly once, every
//! envelope audit passes, and the client retried — never failed — its
//! (idempotent or idempotency-keyed) requests.

mod cluster_support;
mod common;

use cluster_support::{audit_clean, create, opts, Node};
use common::limit_policy;
use rush_client::protocol::cmd::{
    CatalogFilter, EnvelopeCreate, LinkShorten, OrderItem, Record, Scope, SlotRange,
};
use rush_client::protocol::ErrorCode;
use rush_client::{Client, ClientOptions};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the workload got acknowledged.
#[derive(Default)]
struct Acked {
    links: Vec<(String, String)>,
    /// user → orders counted.
    orders: HashMap<String, u64>,
    /// owner → record ids.
    records: HashMap<String, HashSet<String>>,
    envelopes: Vec<u64>,
    /// (envelope, user, amount).
    grabs: Vec<(u64, String, u64)>,
    failures: Vec<String>,
}

struct Shared {
    acked: Mutex<Acked>,
    stop: AtomicBool,
    ops: AtomicU64,
    empty: AtomicU64,
}

async fn worker(c: Client, w: usize, s: Arc<Shared>) {
    let mut i = 0u64;
    while !s.stop.load(Ordering::Relaxed) {
        i += 1;
        s.ops.fetch_add(1, Ordering::Relaxed);
        let fail = |what: &str, e: rush_client::ClientError| {
            s.acked
                .lock()
                .unwrap()
                .failures
                .push(format!("{what}: {e}"));
        };
        match i % 6 {
            0 => {
                let url = format!("https://w{w}.example/{i}");
                let req = LinkShorten {
                    account: "acct".into(),
                    reuse: true,
                    ..LinkShorten::new(url.clone())
                };
                match c.shorten_with(req).await {
                    Ok(r) => s.acked.lock().unwrap().links.push((r.code, url)),
                    Err(e) => fail("shorten", e),
                }
            }
            1 => {
                let pick = {
                    let a = s.acked.lock().unwrap();
                    (!a.links.is_empty())
                        .then(|| a.links[(i as usize * 7919) % a.links.len()].clone())
                };
                if let Some((code, url)) = pick {
                    match c.resolve(code.clone()).await {
                        Ok(r) if r.target == url => {}
                        Ok(r) => fail(
                            "resolve",
                            rush_client::ClientError::Protocol(format!(
                                "{code} → {} not {url}",
                                r.target
                            )),
                        ),
                        Err(e) => fail("resolve", e),
                    }
                }
                // And an owner's records, all of them acknowledged so far.
                let owner = format!("owner-{w}-{}", i % 60);
                let want = s
                    .acked
                    .lock()
                    .unwrap()
                    .records
                    .get(&owner)
                    .cloned()
                    .unwrap_or_default();
                match c
                    .catalog_query(owner.clone(), &CatalogFilter::default())
                    .await
                {
                    Ok(recs) => {
                        let got: HashSet<String> = recs
                            .iter()
                            .map(|r| String::from_utf8_lossy(&r.id).into_owned())
                            .collect();
                        if !want.is_subset(&got) {
                            fail(
                                "query",
                                rush_client::ClientError::Protocol(format!("{owner} lost records")),
                            );
                        }
                    }
                    Err(e) => fail("query", e),
                }
            }
            2 => {
                let user = format!("user-{w}-{}", i % 40);
                match c
                    .limit_acquire(
                        "sale",
                        user.clone(),
                        format!("w{w}-{i}"),
                        [OrderItem::new("sku", 1)],
                    )
                    .await
                {
                    Ok(_) => *s.acked.lock().unwrap().orders.entry(user).or_default() += 1,
                    Err(e) => fail("acquire", e),
                }
            }
            3 => {
                let owner = format!("owner-{w}-{}", i % 60);
                let id = format!("r{i}");
                match c
                    .catalog_put(owner.clone(), Record::new(id.clone()).attr("n", "1"))
                    .await
                {
                    Ok(_) => {
                        s.acked
                            .lock()
                            .unwrap()
                            .records
                            .entry(owner)
                            .or_default()
                            .insert(id);
                    }
                    Err(e) => fail("put", e),
                }
            }
            4 => {
                let create = EnvelopeCreate {
                    idempotency_key: Some(format!("w{w}-{i}").into()),
                    ..EnvelopeCreate::new(format!("sender-{w}-{i}"), 600, 3)
                };
                match c.envelope_create(create).await {
                    Ok(r) => s.acked.lock().unwrap().envelopes.push(r.id),
                    Err(e) => fail("create", e),
                }
            }
            _ => {
                let pick = {
                    let a = s.acked.lock().unwrap();
                    (!a.envelopes.is_empty())
                        .then(|| a.envelopes[(i as usize * 31) % a.envelopes.len()])
                };
                if let Some(id) = pick {
                    let user = format!("g{w}-{i}");
                    match c.envelope_grab(id, user.clone()).await {
                        Ok(g) => s
                            .acked
                            .lock()
                            .unwrap()
                            .grabs
                            .push((id, user, g.amount_cents)),
                        Err(e) if e.code() == Some(ErrorCode::Empty) => {
                            s.empty.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => fail("grab", e),
                    }
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_ride_through_restarts_a_move_and_a_kill() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let mut nodes: Vec<Node> = (0..3)
        .map(|i| Node::start(tmp.path(), &format!("n{i}"), None))
        .collect();
    let map = create(&nodes.iter().collect::<Vec<_>>()).await;
    assert_eq!(map.nodes.len(), 3);
    let c = Client::connect_with(&nodes[0].addr(), opts())
        .await
        .unwrap();
    // (A week: the counts checked at the end stay in one window.)
    let sale = limit_policy(
        "sale",
        &[("total", Scope::Total, 1_000_000, "fixed:604800")],
    );
    c.limit_policy_set(sale).await.unwrap();

    let shared = Arc::new(Shared {
        acked: Mutex::new(Acked::default()),
        stop: AtomicBool::new(false),
        ops: AtomicU64::new(0),
        empty: AtomicU64::new(0),
    });
    let workers: Vec<_> = (0..6)
        .map(|w| tokio::spawn(worker(c.clone(), w, shared.clone())))
        .collect();
    let settle = || tokio::time::sleep(Duration::from_millis(500));
    settle().await;

    // A rolling restart: one node at a time, each drained by SIGTERM.
    let t = Instant::now();
    for n in nodes.iter_mut() {
        n.terminate();
        n.restart(None);
        settle().await;
    }
    let rolling = t.elapsed();

    // A live move of 300 slots from n0 to n1.
    let admin = Client::connect_with(
        &nodes[0].addr(),
        ClientOptions {
            request_timeout: Duration::from_secs(300),
            ..opts()
        },
    )
    .await
    .unwrap();
    let t = Instant::now();
    let moved = admin
        .cluster_migrate(&[SlotRange { start: 0, end: 299 }], "n1")
        .await
        .expect("slots moved");
    let moving = t.elapsed();
    assert_eq!(moved.slots, 300);
    assert!(moved.unsynced.is_empty(), "{:?}", moved.unsynced);
    settle().await;

    // SIGKILL a node and start it again.
    nodes[2].kill9();
    nodes[2].restart(None);
    settle().await;
    settle().await;
    shared.stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    let stats = c.stats();

    // ── afterwards ──────────────────────────────────────────────────────
    let acked = std::mem::take(&mut *shared.acked.lock().unwrap());
    assert!(
        acked.failures.is_empty(),
        "requests failed: {:#?}",
        acked.failures
    );
    // Every node agrees on the map, which has the moved slots on n1.
    for n in &nodes {
        let m = c
            .call_on(&n.addr(), rush_client::protocol::cmd::ClusterSlots {})
            .await
            .unwrap();
        assert_eq!(m.epoch, map.epoch + 300);
        assert_eq!(m.node_for(0).unwrap().id, "n1");
        assert_eq!(m.node_for(299).unwrap().id, "n1");
        assert_eq!(m.node_for(300).unwrap().id, "n0");
    }
    // Every acknowledged link resolves to its URL; no code twice.
    let mut by_code: HashMap<&str, &str> = HashMap::new();
    for (code, url) in &acked.links {
        if let Some(other) = by_code.insert(code, url) {
            assert_eq!(other, url, "code {code} issued for two URLs");
        }
        assert_eq!(
            &c.resolve(code.clone()).await.unwrap().target,
            url,
            "code {code}"
        );
    }
    // Every limit count is exact.
    for (user, n) in &acked.orders {
        let s = c.limit_status("sale", user.clone()).await.unwrap();
        assert_eq!(s.count("total", ""), *n, "user {user}");
    }
    // Every record is there.
    for (owner, ids) in &acked.records {
        let got: HashSet<String> = c
            .catalog_query(owner.clone(), &CatalogFilter::default())
            .await
            .unwrap()
            .iter()
            .map(|r| String::from_utf8_lossy(&r.id).into_owned())
            .collect();
        assert_eq!(&got, ids, "owner {owner}");
    }
    // Every envelope's books: acknowledged grabs as answered, the money
    // adds up, ids unique.
    let ids: HashSet<u64> = acked.envelopes.iter().copied().collect();
    assert_eq!(
        ids.len(),
        acked.envelopes.len(),
        "an envelope id issued twice"
    );
    let mut grabs: HashMap<u64, Vec<(&str, u64)>> = HashMap::new();
    for (id, user, amount) in &acked.grabs {
        grabs.entry(*id).or_default().push((user, *amount));
    }
    for &id in &ids {
        let info = c.envelope_info(id).await.unwrap();
        let sum: u64 = info.grabs.iter().map(|g| g.amount_cents).sum();
        assert_eq!(
            sum + info.remaining_cents + info.refunded_cents,
            600,
            "envelope {id}"
        );
        for (user, amount) in grabs.get(&id).map(Vec::as_slice).unwrap_or_default() {
            let g = info
                .grabs
                .iter()
                .find(|g| g.user == user.as_bytes())
                .expect("acknowledged grab kept");
            assert_eq!(g.amount_cents, *amount);
        }
        assert_eq!(info.grabbed as usize, info.grabs.len());
    }
    let mut audited = 0;
    for n in &nodes {
        audited += audit_clean(&c, &n.addr()).await;
    }
    assert_eq!(
        audited,
        ids.len() as u64,
        "every envelope once in the cluster"
    );
    // The chaos was felt, and ridden through.
    assert!(stats.retries > 0 && stats.moved > 0, "{stats:?}");
    println!(
        "cluster chaos: {} ops ({} client calls) in {:.1}s; retried {}, redirected (MOVED) {}, map loads {}, failed 0; \
         rolling restart {:.1}s; moved {} slots ({} keys, {} bytes) in {:.1}s; \
         acknowledged: {} links, {} orders, {} records, {} envelopes, {} grabs ({} EMPTY)",
        shared.ops.load(Ordering::Relaxed),
        stats.requests,
        started.elapsed().as_secs_f64(),
        stats.retries,
        stats.moved,
        stats.refreshes,
        rolling.as_secs_f64(),
        moved.slots,
        moved.keys,
        moved.bytes,
        moving.as_secs_f64(),
        acked.links.len(),
        acked.orders.values().sum::<u64>(),
        acked.records.values().map(HashSet::len).sum::<usize>(),
        ids.len(),
        acked.grabs.len(),
        shared.empty.load(Ordering::Relaxed),
    );
    for n in nodes.iter_mut() {
        n.terminate();
    }
}
