//! Cluster map and slot moves, in-process: MOVED routing, CLUSTER_SETMAP's
//! epoch rule and persistence, map files, and a live move of a slot range
//! that carries every service's data (links, limits, catalog, envelopes
//! with a pending refund, generic keys).

mod common;

use bytes::Bytes;
use common::{connect, connect_patient, limit_policy, test_config, TestNode};
use rush_client::protocol::cmd::{
    BatchShortenItem, CatalogFilter, ClusterMigrate, ClusterMigrateReply, ClusterNode,
    ClusterSlotsReply, EnvelopeCreate, EnvelopeState, Get, ImportPair, MigrateCommit,
    MigrateImport, MigrateStatus, MigrationState, OrderItem, Record, RefundCursor, Scope,
    SlotRange,
};
use rush_client::protocol::{key_slot, ErrorCode, ErrorDetail};
use rush_client::{Client, ClientError, ClientOptions, Connection};
use rush_daemon::storage::keys;
use std::collections::HashSet;
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

/// `n` keys (with `prefix`) whose slots are in `slots`.
fn keys_in(prefix: &str, slots: std::ops::Range<u16>, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|k| slots.contains(&key_slot(k.as_bytes())))
        .take(n)
        .collect()
}

/// Slots `start` to `end`, both included.
fn range(start: u16, end: u16) -> SlotRange {
    SlotRange { start, end }
}

fn addrs(nodes: &[&TestNode]) -> Vec<String> {
    nodes.iter().map(|n| n.addr().to_string()).collect()
}

/// `rush cluster create` of the nodes at `addrs`, the slots shared evenly.
async fn create(addrs: &[String]) -> Result<ClusterSlotsReply, ClientError> {
    rush_client::cluster::create(addrs, false, ClientOptions::default()).await
}

async fn two_node_cluster() -> (TestNode, TestNode, ClusterSlotsReply) {
    let a = TestNode::start().await;
    let b = TestNode::start().await;
    let map = create(&addrs(&[&a, &b])).await.expect("cluster created");
    (a, b, map)
}

async fn node_id(n: &TestNode) -> String {
    let info = n.client.info().await.unwrap();
    info.get("node_id").expect("INFO has node_id").to_string()
}

/// A GET sent to the node at `addr` itself, on a connection of its own: no
/// routing, no following MOVED.
async fn get_on(addr: &str, key: &str) -> Result<Option<Bytes>, ClientError> {
    let conn = Connection::connect(addr, T).await.unwrap();
    conn.call(
        &Get {
            key: key.to_string().into(),
        },
        T,
    )
    .await
}

/// Moves `slots` from node `from` to node `to` (an id), which must succeed.
async fn migrate(from: &TestNode, slots: SlotRange, to: &str) -> ClusterMigrateReply {
    connect_patient(from.addr())
        .await
        .cluster_migrate(&[slots], to)
        .await
        .expect("slots moved")
}

fn code<T: std::fmt::Debug>(r: Result<T, ClientError>) -> ErrorCode {
    r.expect_err("an error").code().expect("a server error")
}

#[tokio::test]
async fn moved_for_slots_elsewhere_and_clients_follow() {
    let a = TestNode::start().await;
    let b = TestNode::start().await;
    // A client that knew node A alone (epoch 0) before the cluster existed.
    let stale = connect(a.addr()).await;
    assert_eq!(stale.cluster_map(), None);
    let addrs = addrs(&[&a, &b]);
    let map = create(&addrs).await.unwrap();
    assert_eq!(map.epoch, 1);
    assert_eq!(map.nodes[0].ranges, [range(0, 8191)]);
    assert_eq!(map.nodes[1].ranges, [range(8192, 16383)]);
    // Creating again is refused without --replace.
    let again = create(&addrs).await;
    assert!(matches!(again, Err(ClientError::Cluster(_))), "{again:?}");

    let on_a = keys_in("a", 0..8192, 1).remove(0);
    let on_b = keys_in("b", 8192..16384, 1).remove(0);
    // Raw requests: the node that doesn't own the slot says who does.
    let e = get_on(&addrs[0], &on_b).await.unwrap_err();
    let ClientError::Server(e) = e else {
        panic!("{e:?}")
    };
    assert_eq!(e.code, ErrorCode::Moved);
    assert_eq!(
        e.detail,
        ErrorDetail::Redirect {
            slot: key_slot(on_b.as_bytes()),
            addr: b.addr().to_string()
        }
    );
    assert_eq!(get_on(&addrs[0], &on_a).await.unwrap(), None);
    // Both nodes report the same map; INFO shows the epoch.
    for n in [&a, &b] {
        let m = n.client.cluster_slots().await.unwrap();
        assert!(m.same_as(&map));
        let info = n.client.info().await.unwrap();
        assert_eq!(info.get("cluster_epoch"), Some("1"));
        assert_eq!(info.get("cluster_slots_owned"), Some("8192"));
    }

    // A routing client reaches both halves through node A, no redirects.
    let c = connect(a.addr()).await;
    c.set(on_a.clone(), "1").await.unwrap();
    c.set(on_b.clone(), "2").await.unwrap();
    assert_eq!(c.stats().moved, 0);
    assert_eq!(
        get_on(&addrs[1], &on_b).await.unwrap(),
        Some(Bytes::from("2"))
    );
    // The stale client follows MOVED once and then knows the map.
    assert_eq!(
        stale.get(on_b.clone()).await.unwrap(),
        Some(Bytes::from("2"))
    );
    assert!(stale.stats().moved >= 1);
    // The refresh runs in the background: soon no request hops any more.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for i in 0.. {
        let before = stale.stats().moved;
        let k = keys_in(&format!("s{i}-"), 8192..16384, 1).remove(0);
        stale.set(k, "x").await.unwrap();
        if stale.stats().moved == before {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the map was never refreshed: {:?}",
            stale.stats()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let settled = stale.stats().moved;
    for i in 0..20 {
        let k = keys_in(&format!("t{i}-"), 8192..16384, 1).remove(0);
        stale.set(k, "x").await.unwrap();
    }
    assert_eq!(
        stale.stats().moved,
        settled,
        "no hops once the map is known"
    );
    // Admin broadcasts reach every node: the audit sums both.
    let audit = c.envelope_audit().await.unwrap();
    assert_eq!(audit.problem_count, 0);
    a.stop().await;
    b.stop().await;
}

fn ghost_map(epoch: u64, me: &str, addr: &str) -> ClusterSlotsReply {
    ClusterSlotsReply {
        epoch,
        nodes: vec![
            ClusterNode {
                id: me.into(),
                addr: addr.into(),
                ranges: vec![range(0, 8191)],
                resp_addr: None,
                replica_of: None,
            },
            ClusterNode {
                id: "ghost".into(),
                addr: "127.0.0.1:1".into(),
                ranges: vec![range(8192, 16383)],
                resp_addr: None,
                replica_of: None,
            },
        ],
    }
}

#[tokio::test]
async fn setmap_takes_only_newer_epochs_and_is_kept() {
    let mut a = TestNode::start().await;
    let id = node_id(&a).await;
    let addr = a.addr().to_string();
    let c = a.client.clone();
    let m5 = ghost_map(5, &id, &addr);
    assert_eq!(c.cluster_setmap_on(&addr, m5.clone()).await.unwrap(), 5);
    // The same map again is fine (a resend); anything not newer is not.
    assert_eq!(c.cluster_setmap_on(&addr, m5.clone()).await.unwrap(), 5);
    assert_eq!(
        code(c.cluster_setmap_on(&addr, ghost_map(4, &id, &addr)).await),
        ErrorCode::Conflict
    );
    let mut other = m5.clone();
    other.nodes[1].addr = "127.0.0.1:2".into();
    assert_eq!(
        code(c.cluster_setmap_on(&addr, other).await),
        ErrorCode::Conflict
    );
    // Invalid maps: a slot nobody owns, epoch 0.
    let mut partial = ghost_map(6, &id, &addr);
    partial.nodes[1].ranges[0].end = 16000;
    let e = c.cluster_setmap_on(&addr, partial).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BadRequest));
    assert!(e.to_string().contains("owned by no node"), "{e}");
    assert_eq!(
        code(c.cluster_setmap_on(&addr, ghost_map(0, &id, &addr)).await),
        ErrorCode::BadRequest
    );
    assert!(c.cluster_slots().await.unwrap().same_as(&m5));

    // Kept across a restart (on a new port: the map still names the old one).
    a.restart().await;
    assert!(a.client.cluster_slots().await.unwrap().same_as(&m5));
    // A map file older than the stored map loses; a newer one wins.
    let file = a.dir.path().join("cluster.toml");
    let write = |m: &ClusterSlotsReply| {
        std::fs::write(&file, rush_client::protocol::cmd::cluster::file::to_toml(m)).unwrap()
    };
    write(&ghost_map(3, &id, &addr));
    let path = file.clone();
    a.restart_with(|cfg| cfg.cluster.map_file = Some(path))
        .await;
    assert_eq!(a.client.cluster_slots().await.unwrap().epoch, 5);
    write(&ghost_map(9, &id, &addr));
    a.restart().await;
    assert_eq!(a.client.cluster_slots().await.unwrap().epoch, 9);
    // And the file's map was stored: without the file it stays.
    a.restart_with(|cfg| cfg.cluster.map_file = None).await;
    assert_eq!(a.client.cluster_slots().await.unwrap().epoch, 9);
    // A map that gives the node the ghost's slots too: it serves them.
    let addr = a.addr().to_string();
    let mut all = ghost_map(10, &id, &addr);
    all.nodes[0].ranges = vec![range(0, 16383)];
    all.nodes[1].ranges = vec![];
    let c = a.client.clone();
    assert_eq!(c.cluster_setmap_on(&addr, all).await.unwrap(), 10);
    let k = keys_in("g", 9000..9001, 1).remove(0);
    assert_eq!(get_on(&addr, &k).await.unwrap(), None);
    a.stop().await;
}

#[tokio::test]
async fn partial_map_files_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    std::fs::write(
        &file,
        "epoch = 1\n[[nodes]]\nid = \"rush-0\"\naddr = \"127.0.0.1:7379\"\nslots = [\"0-5460\"]\n",
    )
    .unwrap();
    let mut cfg = test_config(&dir.path().join("data"));
    cfg.cluster.map_file = Some(file);
    let Err(e) = rush_daemon::start(cfg, rush_daemon::Clock::system()).await else {
        panic!("a partial map must not start");
    };
    let e = format!("{e:#}");
    assert!(
        e.contains("owned by no node") && e.contains("5461-16383"),
        "{e}"
    );
}

#[tokio::test]
async fn a_slot_range_moves_with_all_its_data() {
    let (a, b, map) = two_node_cluster().await;
    let b_id = map.nodes[1].id.clone();
    let c = connect(a.addr()).await;
    let sale = limit_policy("sale", &[("total", Scope::Total, 1_000_000, "day")]);
    c.limit_policy_set(sale).await.unwrap();
    const MOVING: std::ops::Range<u16> = 100..200;

    // Data of every service in the slots that move.
    let kv = keys_in("kv", MOVING, 50);
    for k in &kv {
        c.set(k.clone(), k.clone()).await.unwrap();
    }
    let counters = keys_in("counter", MOVING, 20);
    for (i, k) in counters.iter().enumerate() {
        c.incr_by(k.clone(), i as i64 + 1).await.unwrap();
    }
    // Hashes, stored field by field: every field moves with its header.
    let hashes = keys_in("hash", MOVING, 10);
    for h in &hashes {
        let fields: Vec<_> = (0..30)
            .map(|f| (format!("f{f}"), format!("{h}/{f}")))
            .collect();
        c.hset(h.clone(), fields).await.unwrap();
    }
    let mut codes = Vec::new();
    for slot in MOVING.step_by(10) {
        let items = (0..5)
            .map(|i| BatchShortenItem::new(format!("https://e.com/{slot}/{i}")))
            .collect();
        let r = c.shorten_batch_in(slot, "acct", items).await.unwrap();
        codes.extend(r.links.into_iter().map(|l| l.code));
    }
    let users = keys_in("user", MOVING, 20);
    for (i, u) in users.iter().enumerate() {
        for o in 0..=i % 3 {
            c.limit_acquire(
                "sale",
                u.clone(),
                format!("o{o}"),
                [OrderItem::new("sku", 2)],
            )
            .await
            .unwrap();
        }
    }
    let owners = keys_in("owner", MOVING, 20);
    for o in &owners {
        c.catalog_put(o.clone(), Record::new("r1").attr("plan", "gold"))
            .await
            .unwrap();
    }
    let senders = keys_in("sender", MOVING, 10);
    let mut envelopes = Vec::new();
    for s in &senders {
        let e = c
            .envelope_create(EnvelopeCreate::new(s.clone(), 1_000, 10))
            .await
            .unwrap();
        for u in 0..3 {
            c.envelope_grab(e.id, format!("g{u}")).await.unwrap();
        }
        envelopes.push(e.id);
    }
    // One that expires before the move: its refund is in A's stream,
    // read but not acknowledged when the slot moves.
    let expiring = c
        .envelope_create(EnvelopeCreate {
            expires_in_ms: 60_000,
            ..EnvelopeCreate::new(senders[0].clone(), 500, 5)
        })
        .await
        .unwrap();
    c.envelope_grab(expiring.id, "early").await.unwrap();
    // (Both clocks: the moved state keeps its times on B.)
    for n in [&a, &b] {
        n.client
            .clock_advance(Duration::from_secs(61))
            .await
            .unwrap();
    }
    let page = c.envelope_refunds(RefundCursor::START, 100).await.unwrap();
    assert_eq!(page.refunds.len(), 1);
    assert_eq!(page.refunds[0].cursor.id, expiring.id);
    let read_up_to = page.next;

    let moved = migrate(&a, range(100, 199), &b_id).await;
    assert_eq!(moved.slots, 100);
    assert!(moved.keys > 300, "{moved:?}");
    assert!(moved.unsynced.is_empty());
    assert_eq!(moved.epoch, 101);
    println!(
        "moved {} slots: {} keys, {} bytes, epoch {}",
        moved.slots, moved.keys, moved.bytes, moved.epoch
    );
    for n in [&a, &b] {
        let m = n.client.cluster_slots().await.unwrap();
        assert_eq!(m.epoch, 101);
        assert_eq!(m.node_for(150).unwrap().id, b_id);
        assert_eq!(m.node_for(99).unwrap().id, map.nodes[0].id);
    }
    // Nothing of the moved slots is left on A.
    let storage = a.running().storage();
    for shard in 0..storage.shards() {
        let from = keys::slot_range(MOVING.start).0;
        let to = keys::slot_range(MOVING.end - 1).1;
        assert_eq!(storage.count_raw(shard, &from, &to).unwrap(), 0);
    }
    // A raw request to A for a moved key is redirected to B.
    let e = get_on(&a.addr().to_string(), &kv[0]).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Moved));

    // Everything reads back through the routing client.
    for k in &kv {
        assert_eq!(
            c.get(k.clone()).await.unwrap(),
            Some(Bytes::from(k.clone()))
        );
    }
    // Counters count on from what they held on A (B's shards take the
    // slots' keys into what they know they hold).
    for (i, k) in counters.iter().enumerate() {
        assert_eq!(c.incr_by(k.clone(), 1000).await.unwrap(), i as i64 + 1001);
    }
    for h in &hashes {
        assert_eq!(c.hlen(h.clone()).await.unwrap(), 30);
        let all = c.hgetall(h.clone()).await.unwrap();
        assert_eq!(all.len(), 30);
        for (f, v) in &all {
            let f = std::str::from_utf8(f).unwrap();
            assert_eq!(v, &format!("{h}/{}", &f[1..]));
        }
        assert_eq!(c.hset(h.clone(), [("after-move", "x")]).await.unwrap(), 1);
        assert_eq!(c.hlen(h.clone()).await.unwrap(), 31);
    }
    for code in &codes {
        assert!(c
            .resolve(code.clone())
            .await
            .unwrap()
            .target
            .starts_with("https://e.com/"));
    }
    for (i, u) in users.iter().enumerate() {
        let s = c.limit_status("sale", u.clone()).await.unwrap();
        assert_eq!(s.count("total", ""), 2 * (i as u64 % 3 + 1));
        // An order counted before the move is still known after it.
        let again = c
            .limit_acquire("sale", u.clone(), "o0", [OrderItem::new("sku", 2)])
            .await
            .unwrap();
        assert!(again.replayed);
    }
    let gold = CatalogFilter::default().attr("plan", "gold");
    for o in &owners {
        // B's Bloom filter took the moved owners in: none is denied.
        assert_eq!(c.catalog_query(o.clone(), &gold).await.unwrap().len(), 1);
    }
    for &id in &envelopes {
        let info = c.envelope_info(id).await.unwrap();
        assert_eq!(info.grabbed, 3);
        let grabbed: u64 = info.grabs.iter().map(|g| g.amount_cents).sum();
        assert_eq!(grabbed + info.remaining_cents, 1_000);
        // A repeat grab answers the same amount; a new one works on B.
        let r = c.envelope_grab(id, "g0").await.unwrap();
        assert!(r.repeated);
        c.envelope_grab(id, "after-move").await.unwrap();
    }

    // No code or envelope id is issued twice: B goes on from the moved
    // high-water marks, with the code key the slots came with.
    let old: HashSet<String> = codes.iter().cloned().collect();
    for slot in MOVING.step_by(10) {
        let items = (0..50)
            .map(|i| BatchShortenItem::new(format!("https://new.com/{slot}/{i}")))
            .collect();
        for l in c.shorten_batch_in(slot, "acct", items).await.unwrap().links {
            assert!(!old.contains(&l.code), "code {} issued twice", l.code);
        }
    }
    let old_ids: HashSet<u64> = envelopes.iter().copied().chain([expiring.id]).collect();
    for s in &senders {
        let e = c
            .envelope_create(EnvelopeCreate::new(s.clone(), 100, 1))
            .await
            .unwrap();
        assert!(!old_ids.contains(&e.id));
    }

    // The refund read on A but not acknowledged is delivered again by B
    // (re-stamped after the cursor), once; acknowledging clears it.
    let page = c.envelope_refunds(read_up_to, 100).await.unwrap();
    let ids: Vec<u64> = page.refunds.iter().map(|r| r.cursor.id).collect();
    assert_eq!(ids, vec![expiring.id]);
    assert_eq!(c.envelope_refunds_ack(page.next).await.unwrap(), 1);
    let page = c.envelope_refunds(page.next, 100).await.unwrap();
    assert!(page.refunds.is_empty());
    let info = c.envelope_info(expiring.id).await.unwrap();
    assert_eq!(info.state, EnvelopeState::Refunded);
    assert_eq!(info.refunded_cents + info.grabs[0].amount_cents, 500);
    // Every node's books are right.
    for n in [&a, &b] {
        let audit = n
            .client
            .call_on(
                &n.addr().to_string(),
                rush_client::protocol::cmd::EnvelopeAudit {},
            )
            .await
            .unwrap();
        assert_eq!(audit.problem_count, 0, "{:?}", audit.problems);
    }
    let total = c.envelope_audit().await.unwrap();
    assert_eq!(total.envelopes, (envelopes.len() * 2 + 1) as u64);
    let metrics = a.metrics().await;
    assert!(
        metrics.contains("rush_cluster_slots_migrated_total 100"),
        "{metrics}"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn migrate_refuses_what_it_cannot_do() {
    let (a, b, map) = two_node_cluster().await;
    let c: Client = connect(a.addr()).await;
    let a_id = map.nodes[0].id.clone();
    let (a_addr, b_addr) = (a.addr().to_string(), b.addr().to_string());
    // Slots of B, asked of A: refused before anything happens.
    let b_slots_to_a = ClusterMigrate {
        slots: vec![range(9000, 9000)],
        to: a_id.clone(),
    };
    assert_eq!(
        code(c.call_on(&a_addr, b_slots_to_a).await),
        ErrorCode::BadRequest
    );
    // An unknown target.
    let e = c
        .cluster_migrate(&[range(1, 1)], "nobody")
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Cluster(_)), "{e:?}");
    // Slots the target has already: nothing to do.
    let r = c.cluster_migrate(&[range(10, 10)], &a_id).await.unwrap();
    assert_eq!(r.slots, 0);
    // Imports are only for nodes that don't own the slot.
    let import = |pairs| MigrateImport {
        id: 1,
        slot: 10,
        seq: 0,
        from: "x".into(),
        pairs,
    };
    assert_eq!(
        code(c.call_on(&a_addr, import(vec![])).await),
        ErrorCode::Conflict
    );
    // Keys outside the slot are refused; a commit without an import too.
    let bad = ImportPair {
        key: Bytes::copy_from_slice(&keys::kv(11, b"k")),
        value: Bytes::from(vec![1u8; 9]),
        append: false,
    };
    assert_eq!(
        code(c.call_on(&b_addr, import(vec![bad])).await),
        ErrorCode::BadRequest
    );
    let commit = MigrateCommit {
        id: 7,
        slot: 10,
        chunks: 1,
        keys: 0,
        map: map.with_slot_moved(10, &map.nodes[1].id, 2).unwrap(),
    };
    assert_eq!(code(c.call_on(&b_addr, commit).await), ErrorCode::Conflict);
    let status = MigrateStatus { id: 7, slot: 10 };
    assert_eq!(
        c.call_on(&b_addr, status).await.unwrap(),
        MigrationState::Unknown
    );
    // Nothing changed.
    assert_eq!(c.cluster_slots().await.unwrap().epoch, 1);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn redirects_of_codes_another_node_serves_are_forwarded() {
    let redirect = |c: &mut rush_daemon::Config| c.links.redirect_listen = "127.0.0.1:0".into();
    let a = TestNode::start_with(redirect).await;
    let b = TestNode::start_with(redirect).await;
    create(&addrs(&[&a, &b])).await.unwrap();
    let c = connect(a.addr()).await;
    // A code issued in a slot of B.
    let r = c
        .shorten_batch_in(
            9000,
            "acct",
            vec![BatchShortenItem::new("https://target.example/x")],
        )
        .await
        .unwrap();
    let code = &r.links[0].code;
    for n in [&a, &b] {
        let http = n.running().redirect_addr().unwrap();
        let (status, _) = common::http_get(http, &format!("/{code}")).await;
        assert_eq!(status, 302, "asked at {http}");
    }
    // Both visits were counted where the link lives.
    assert_eq!(c.link_info(code.clone()).await.unwrap().visits, 2);
    // An unknown code of B's slots is a 404 at A too.
    let unknown = format!("{}x", &code[..code.len() - 1]);
    let (status, _) =
        common::http_get(a.running().redirect_addr().unwrap(), &format!("/{unknown}")).await;
    assert_eq!(status, 404);
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn a_lone_node_with_data_grows_into_a_cluster_by_moving_slots() {
    let a = TestNode::start().await;
    let b = TestNode::start().await;
    let keys: Vec<String> = keys_in("k", 16000..16384, 30);
    for k in &keys {
        a.client.set(k.clone(), "v").await.unwrap();
    }
    let addrs = addrs(&[&a, &b]);
    // A new map would hide half of A's keys: refused.
    let e = create(&addrs).await.unwrap_err();
    assert!(e.to_string().contains("already holds data"), "{e}");
    // Instead: B joins owning nothing, then slots move to it.
    let b_id = node_id(&b).await;
    let map = ClusterSlotsReply {
        epoch: 1,
        nodes: vec![
            ClusterNode {
                id: node_id(&a).await,
                addr: addrs[0].clone(),
                ranges: vec![range(0, 16383)],
                resp_addr: None,
                replica_of: None,
            },
            ClusterNode {
                id: b_id.clone(),
                addr: addrs[1].clone(),
                ranges: vec![],
                resp_addr: None,
                replica_of: None,
            },
        ],
    };
    let c = connect(a.addr()).await;
    for (addr, r) in c.cluster_apply(&map).await {
        assert_eq!(r.unwrap(), 1, "{addr}");
    }
    let moved = migrate(&a, range(16000, 16383), &b_id).await;
    assert_eq!(moved.slots, 384);
    let m = c.cluster_slots().await.unwrap();
    assert_eq!(m.node(&b_id).unwrap().ranges, [range(16000, 16383)]);
    for k in &keys {
        assert_eq!(c.get(k.clone()).await.unwrap(), Some(Bytes::from("v")));
        assert_eq!(get_on(&addrs[1], k).await.unwrap(), Some(Bytes::from("v")));
    }
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn nodes_with_tokens_move_slots_with_their_admin_token() {
    let tokens = tempfile::tempdir().unwrap();
    let admin = tokens.path().join("admin.tokens");
    let clients = tokens.path().join("clients.tokens");
    std::fs::write(&admin, "ops:s3cret-admin\n").unwrap();
    std::fs::write(&clients, "app:s3cret-app\n").unwrap();
    let (a_tok, c_tok) = (admin.clone(), clients.clone());
    let auth = move |c: &mut rush_daemon::Config| {
        c.auth.admin_token_file = Some(a_tok.clone());
        c.auth.token_file = Some(c_tok.clone());
    };
    let a = TestNode::start_with(auth.clone()).await;
    let b = TestNode::start_with(auth).await;
    let addrs = addrs(&[&a, &b]);
    let as_app = ClientOptions {
        token: Some("s3cret-app".into()),
        ..ClientOptions::default()
    };
    // A client token can't change the map...
    let e = rush_client::cluster::create(&addrs, false, as_app.clone())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Forbidden), "{e}");
    let as_admin = ClientOptions {
        token: Some("s3cret-admin".into()),
        ..ClientOptions::default()
    };
    let map = rush_client::cluster::create(&addrs, false, as_admin.clone())
        .await
        .unwrap();
    // ...but reads the map and routes; the source reaches the target with
    // its own admin token.
    let app = Client::connect_with(&addrs[0], as_app).await.unwrap();
    assert_eq!(app.cluster_map().unwrap().epoch, 1);
    let k = keys_in("k", 10..11, 1).remove(0);
    app.set(k.clone(), "v").await.unwrap();
    let ops = Client::connect_with(&addrs[0], as_admin).await.unwrap();
    let moved = ops
        .cluster_migrate(&[range(10, 10)], &map.nodes[1].id)
        .await
        .unwrap();
    assert_eq!(moved.slots, 1);
    assert_eq!(app.get(k).await.unwrap(), Some(Bytes::from("v")));
    a.stop().await;
    b.stop().await;
}
