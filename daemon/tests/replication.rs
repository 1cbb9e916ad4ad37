//! Replicas, with real `rushd` processes: a replica bootstraps from its
//! primary, follows it through `kill -9` of itself and restarts of the
//! primary, ends byte for byte equal to it, and takes over after the
//! primary is killed and it is promoted.

mod common;

use common::{connect, limit_policy, Spawned};
use rush_client::protocol::cmd::{
    ClusterNode, ClusterSlotsReply, EnvelopeCreate, OrderItem, ReplPromote, ReplStatus, Scope,
    SetCond, SlotRange,
};
use rush_client::protocol::ErrorCode;
use rush_client::{Client, ClientOptions};
use rush_daemon::storage::keys::{self, meta};
use rush_daemon::storage::Storage;
use rush_daemon::Clock;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HOUR: Duration = Duration::from_secs(3600);

/// A `rushd` on fixed ports that serves replicas on `repl` (so it can
/// restart where its replica looks, and be followed once promoted).
struct Node {
    s: Spawned,
    repl: String,
}

impl std::ops::Deref for Node {
    type Target = Spawned;
    fn deref(&self) -> &Spawned {
        &self.s
    }
}

impl std::ops::DerefMut for Node {
    fn deref_mut(&mut self) -> &mut Spawned {
        &mut self.s
    }
}

fn node(dir: &Path, extra: &[&str]) -> Node {
    let repl = common::fixed_listen_addr();
    let mut args = vec!["--replication-listen", repl.as_str()];
    args.extend_from_slice(extra);
    Node {
        s: Spawned::start_fixed(dir, &args),
        repl,
    }
}

/// The same node again, on the same addresses.
fn restart(dir: &Path, was: &Node, extra: &[&str]) -> Node {
    let mut args = vec!["--replication-listen", was.repl.as_str()];
    args.extend_from_slice(extra);
    Node {
        s: Spawned::start_on(dir, &was.addr.to_string(), &args),
        repl: was.repl.clone(),
    }
}

fn primary(dir: &Path, extra: &[&str]) -> Node {
    node(dir, extra)
}

fn replica(dir: &Path, of: &Node) -> Node {
    node(dir, &["--replica-of", &of.repl])
}

/// A client that gives up at once (a killed node is an error, not a wait).
async fn impatient(addr: SocketAddr) -> Client {
    let opts = ClientOptions {
        retry_deadline: Duration::ZERO,
        ..ClientOptions::default()
    };
    Client::connect_with(&addr.to_string(), opts).await.unwrap()
}

/// REPL_STATUS of the node at `addr` itself.
async fn status(addr: SocketAddr) -> HashMap<String, String> {
    let c = connect(addr).await;
    c.call_on(&addr.to_string(), ReplStatus {})
        .await
        .unwrap()
        .rows
        .into_iter()
        .collect()
}

/// Wait until the replica has applied every record the primary holds.
async fn caught_up(primary: SocketAddr, replica: SocketAddr) -> HashMap<String, String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = status(primary).await;
        let r = status(replica).await;
        if r["replication_state"] == "following"
            && r["replication_positions"] == p["replication_heads"]
        {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "the replica did not catch up: primary {p:?}, replica {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The purchase-limit policy the workloads order under: each item at most
/// `max` a day.
async fn flash_policy(c: &Client, max: u64) {
    c.limit_policy_set(limit_policy(
        "flash",
        &[("per-item", Scope::Item, max, "day")],
    ))
    .await
    .unwrap();
}

/// Keys, links, limit orders and envelope grabs on the primary, round `r`.
async fn mixed_round(c: &Client, r: usize) -> Vec<String> {
    let mut codes = Vec::new();
    for i in 0..20 {
        c.set(format!("k{r}-{i}"), format!("v{r}-{i}"))
            .await
            .unwrap();
        c.incr_by(format!("counter-{}", i % 5), 1).await.unwrap();
    }
    c.set_with(format!("ttl-{r}"), "x", HOUR, SetCond::Always)
        .await
        .unwrap();
    c.hset(format!("h-{}", r % 3), [(format!("f{r}"), "1")])
        .await
        .unwrap();
    for i in 0..5 {
        codes.push(
            c.shorten(format!("https://example.com/{r}/{i}"))
                .await
                .unwrap()
                .code,
        );
    }
    c.limit_acquire(
        "flash",
        format!("user-{}", r % 7),
        format!("order-{r}"),
        [OrderItem::new("sku-1", 1)],
    )
    .await
    .unwrap();
    let mut create = EnvelopeCreate::new(format!("boss-{r}"), 10_000, 10);
    create.expires_in_ms = HOUR.as_millis() as u64;
    let id = c.envelope_create(create).await.unwrap().id;
    for u in 0..3 {
        c.envelope_grab(id, format!("u{u}")).await.unwrap();
    }
    codes
}

type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// Every shard's keys and the copied node records of a stopped node.
fn dump(dir: &Path) -> (Vec<Pairs>, Pairs) {
    let mut cfg = common::test_config(dir).storage;
    cfg.data_dir = dir.to_path_buf();
    let storage = Storage::open(&cfg, 2, Clock::system()).unwrap();
    let (from, _) = keys::slot_range(0);
    let (_, to) = keys::slot_range(rush_client::protocol::SLOTS - 1);
    let shards = (0..2)
        .map(|i| {
            let mut pairs = Vec::new();
            storage
                .scan(i, &from, &to, |k, v| {
                    pairs.push((k.to_vec(), v.to_vec()));
                    true
                })
                .unwrap();
            pairs
        })
        .collect();
    let mut records = Vec::new();
    for name in meta::REPLICATED {
        records.extend(storage.meta_scan(name).unwrap());
    }
    (shards, records)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_survives_kill9_and_primary_restarts_and_ends_equal() {
    let tmp = tempfile::tempdir().unwrap();
    let (pdir, rdir) = (tmp.path().join("primary"), tmp.path().join("replica"));
    let config = tmp.path().join("primary.toml");
    std::fs::write(&config, "[debug]\nclock_control = true\n").unwrap();
    let config = ["--config", config.to_str().unwrap()];
    let mut p = primary(&pdir, &config);
    let c = connect(p.addr).await;
    flash_policy(&c, 1000).await;
    for r in 0..5 {
        mixed_round(&c, r).await;
    }
    // The replica bootstraps from what is there, then follows.
    let mut rep = replica(&rdir, &p);
    let r = caught_up(p.addr, rep.addr).await;
    assert_eq!(r["replication_bootstrapped"], "true");
    assert_eq!(r["role"], "replica");
    // A replica serves no slot: keyed requests go to its primary.
    let direct = connect(rep.addr).await;
    let moved = direct
        .call_on(
            &rep.addr.to_string(),
            rush_client::protocol::cmd::Get { key: "k0-0".into() },
        )
        .await
        .unwrap_err();
    assert_eq!(moved.code(), Some(ErrorCode::Moved), "{moved}");
    assert!(
        moved.to_string().contains(&p.addr.to_string()),
        "MOVED names the primary's protocol address {}: {moved}",
        p.addr
    );

    // Writes keep coming while the replica is killed and restarted.
    let writing = Arc::new(AtomicBool::new(true));
    let writer = {
        let (c, writing) = (connect(p.addr).await, writing.clone());
        tokio::spawn(async move {
            let mut r = 100;
            while writing.load(Ordering::Relaxed) {
                mixed_round(&c, r).await;
                r += 1;
            }
            r - 100
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    rep.kill9();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut rep = replica(&rdir, &p);
    tokio::time::sleep(Duration::from_millis(300)).await;
    writing.store(false, Ordering::Relaxed);
    let rounds = writer.await.unwrap();
    assert!(rounds > 0, "no writes while the replica restarted");
    let r = caught_up(p.addr, rep.addr).await;
    assert_eq!(
        r["replication_bootstraps"], "0",
        "a restarted replica goes on from what it applied: {r:?}"
    );

    // The primary restarts: another run, whose backlog holds none of the
    // replica's positions; it bootstraps again by itself.
    assert!(p.terminate().success());
    let mut p = restart(&pdir, &p, &config);
    let c = connect(p.addr).await;
    mixed_round(&c, 1000).await;
    let r = caught_up(p.addr, rep.addr).await;
    assert_eq!(r["replication_bootstraps"], "1", "{r:?}");
    // Timers' writes (buffered counters) are committed and followed too.
    c.clock_advance(Duration::ZERO).await.unwrap();
    caught_up(p.addr, rep.addr).await;

    assert!(rep.terminate().success());
    assert!(p.terminate().success());
    let (pd, rd) = (dump(&pdir), dump(&rdir));
    assert!(pd.0.iter().all(|s| !s.is_empty()), "both shards hold data");
    for (i, (a, b)) in pd.0.iter().zip(&rd.0).enumerate() {
        assert_eq!(a.len(), b.len(), "shard {i}: key counts differ");
        assert!(
            a == b,
            "shard {i}: the replica's keys differ from the primary's"
        );
    }
    assert_eq!(pd.1, rd.1, "node records (code key, policies, floors)");
    assert!(pd.1.iter().any(|(k, _)| k == meta::LIMIT_POLICIES));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_left_behind_by_the_backlog_bootstraps_again() {
    let tmp = tempfile::tempdir().unwrap();
    let (pdir, rdir) = (tmp.path().join("primary"), tmp.path().join("replica"));
    let config = tmp.path().join("primary.toml");
    std::fs::write(&config, "[replication]\nbacklog_mb = 0\n").unwrap();
    let p = primary(&pdir, &["--config", config.to_str().unwrap()]);
    let c = connect(p.addr).await;
    c.set("first", "1").await.unwrap();
    let mut rep = replica(&rdir, &p);
    caught_up(p.addr, rep.addr).await;
    rep.kill9();
    // Far more than the smallest backlog (64 KiB a shard) holds.
    let value = "x".repeat(4096);
    for i in 0..200 {
        c.set(format!("big-{i}"), value.clone()).await.unwrap();
    }
    let rep = replica(&rdir, &p);
    let r = caught_up(p.addr, rep.addr).await;
    assert_eq!(r["replication_bootstraps"], "1", "{r:?}");
    let p_status = status(p.addr).await;
    assert!(
        p_status["replication_backlog_bytes"]
            .parse::<u64>()
            .unwrap()
            <= 2 * (64 << 10) + 8192,
        "{p_status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn promoted_after_kill9_of_the_primary_it_takes_over() {
    let tmp = tempfile::tempdir().unwrap();
    let (pdir, rdir) = (tmp.path().join("primary"), tmp.path().join("replica"));
    let mut p = primary(&pdir, &[]);
    let c = connect(p.addr).await;
    flash_policy(&c, 1_000_000).await;
    mixed_round(&c, 0).await;
    let rep = replica(&rdir, &p);
    caught_up(p.addr, rep.addr).await;
    // A primary can't be promoted, a replica can't be followed.
    let e = connect(p.addr)
        .await
        .call_on(&p.addr.to_string(), ReplPromote {})
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BadRequest), "{e}");

    // Writers on the primary, each write recorded once acknowledged.
    let acked_keys: Arc<Mutex<Vec<String>>> = Arc::default();
    let acked_codes: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut tasks = Vec::new();
    for t in 0..4 {
        let c = impatient(p.addr).await;
        let (keys, codes) = (acked_keys.clone(), acked_codes.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0.. {
                let key = format!("w{t}-{n}");
                if c.set(key.clone(), "1").await.is_err() {
                    return;
                }
                keys.lock().unwrap().push(key);
                match c.shorten(format!("https://example.com/w{t}/{n}")).await {
                    Ok(s) => codes.lock().unwrap().push(s.code),
                    Err(_) => return,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    p.kill9();
    for t in tasks {
        t.await.unwrap();
    }
    let keys = acked_keys.lock().unwrap().clone();
    let codes = acked_codes.lock().unwrap().clone();
    assert!(!keys.is_empty() && !codes.is_empty());

    let promoted = connect(rep.addr)
        .await
        .call_on(&rep.addr.to_string(), ReplPromote {})
        .await
        .unwrap();
    assert!(promoted.get("role") == Some("replica"), "{promoted:?}");
    // It restarts its serving on the same address and takes writes.
    let c = connect(rep.addr).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match c.set("after", "1").await {
            Ok(_) => break,
            Err(e) => assert!(Instant::now() < deadline, "no writes after promotion: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status(rep.addr).await["role"], "primary");
    // Counters it followed count on from their values (mixed_round
    // added 1 to each four times): its shards were rebuilt from what it
    // applied, with what they know they hold.
    for i in 0..5 {
        assert_eq!(c.incr_by(format!("counter-{i}"), 1).await.unwrap(), 5);
    }

    // Asynchronous replication: writes acknowledged in the last moments may
    // be gone. The figure, not a pass/fail.
    let mut lost = 0;
    for k in &keys {
        if c.get(k.clone()).await.unwrap().is_none() {
            lost += 1;
        }
    }
    let mut lost_set = HashSet::new();
    let mut old = HashSet::new();
    for code in &codes {
        old.insert(code.clone());
        if c.resolve(code.clone()).await.is_err() {
            lost_set.insert(code.clone());
        }
    }
    let lost_codes = lost_set.len();
    eprintln!(
        "async failover: {lost} of {} acknowledged keys and {lost_codes} of {} acknowledged links lost",
        keys.len(),
        codes.len()
    );
    // Whatever the old primary issued, the new one never issues again: the
    // ID reservations it followed are ahead of every code it handed out.
    for i in 0..500 {
        let code = c
            .shorten(format!("https://example.com/after/{i}"))
            .await
            .unwrap()
            .code;
        assert!(
            !old.contains(&code),
            "code {code} issued twice (it was {} on the replica when promoted)",
            if lost_set.contains(&code) {
                "missing"
            } else {
                "present"
            }
        );
    }
    let audit = c.envelope_audit().await.unwrap();
    assert!(audit.ok(), "{:?}", audit.problems);
    // The old primary comes back as the new one's replica: what it holds is
    // replaced by the new primary's copy (its unreplicated writes too).
    let old = restart(&pdir, &p, &["--replica-of", &rep.repl]);
    let r = caught_up(rep.addr, old.addr).await;
    assert_eq!(r["replication_bootstrapped"], "true", "{r:?}");
    drop(old);
    // The promotion is durable: a restart with --replica-of still set
    // leaves it a primary.
    let addr = rep.addr;
    drop(rep);
    let again = Spawned::start_on(
        &rdir,
        &addr.to_string(),
        &["--replica-of", &addr.to_string()],
    );
    assert_eq!(status(again.addr).await["role"], "primary");
    assert_eq!(
        connect(again.addr)
            .await
            .get("after")
            .await
            .unwrap()
            .as_deref(),
        Some(&b"1"[..])
    );
}

/// A config file in `dir` with `replication.min_acks = 1`: its path.
fn sync_config(dir: &Path) -> String {
    let config = dir.join("sync.toml");
    std::fs::write(
        &config,
        "[replication]\nmin_acks = 1\nack_timeout_ms = 2000\n",
    )
    .unwrap();
    config.to_str().unwrap().to_string()
}

/// A node of a cluster map, by id: a primary owning `ranges`, or a
/// replica of `replica_of`.
fn map_node(n: &Node, id: &str, ranges: &[(u16, u16)], replica_of: Option<&str>) -> ClusterNode {
    ClusterNode {
        id: id.into(),
        addr: n.addr.to_string(),
        ranges: ranges
            .iter()
            .map(|&(start, end)| SlotRange { start, end })
            .collect(),
        resp_addr: None,
        replica_of: replica_of.map(Into::into),
    }
}

/// A cluster of two primaries, "a" with a replica "a2", `min_acks = 1`:
/// a slot moved into "a" reaches "a2" (its import travels as records);
/// "a" is SIGKILLed under load and `rush cluster failover a2` (the
/// client's `cluster_failover`) gives a2 a's slots at the next epoch.
/// Every acknowledged write is read back through a cluster client, "b"
/// sends a's slots to a2, and the old "a" rejoins as a2's replica.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_fails_over_to_the_replica_in_its_map() {
    let tmp = tempfile::tempdir().unwrap();
    let config = sync_config(tmp.path());
    let adir = tmp.path().join("a");
    let mut a = node(&adir, &["--node-id", "a", "--config", &config]);
    let b = node(&tmp.path().join("b"), &["--node-id", "b"]);
    let a2 = node(
        &tmp.path().join("a2"),
        &[
            "--node-id",
            "a2",
            "--config",
            &config,
            "--replica-of",
            &a.repl,
        ],
    );
    let map = ClusterSlotsReply {
        epoch: 1,
        nodes: vec![
            map_node(&a, "a", &[(0, 8191)], None),
            map_node(&b, "b", &[(8192, 16383)], None),
            map_node(&a2, "a2", &[], Some("a")),
        ],
    };
    let c = connect(b.addr).await;
    for (node, r) in c.cluster_apply(&map).await {
        assert_eq!(r.unwrap(), 1, "{node}");
    }
    // A replica refuses a map that gives it slots.
    let mut wrong = map.clone();
    wrong.epoch = 2;
    wrong.nodes[2].ranges = std::mem::take(&mut wrong.nodes[0].ranges);
    wrong.nodes[2].replica_of = None;
    wrong.nodes[0].replica_of = Some("a2".into());
    let e = c
        .cluster_setmap_on(&a2.addr.to_string(), wrong)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BadRequest), "{e}");
    // Any node refuses a map whose replica follows a node not in it, or a
    // replica; each keeps the map it runs.
    for bad_primary in ["zz", "a2"] {
        let mut bad = map.clone();
        bad.epoch = 2;
        bad.nodes[2].replica_of = Some(bad_primary.into());
        for n in [&a, &b, &a2] {
            let e = c
                .cluster_setmap_on(&n.addr.to_string(), bad.clone())
                .await
                .unwrap_err();
            assert_eq!(e.code(), Some(ErrorCode::BadRequest), "{bad_primary}: {e}");
            let now = connect(n.addr).await.cluster_slots().await.unwrap();
            assert!(now.same_as(&map), "{bad_primary}: {now:?}");
        }
    }

    // Keys of one slot of b's, moved to a afterwards, while a2 follows.
    caught_up(a.addr, a2.addr).await;
    let moved_slot = rush_client::protocol::slot::key_slot(b"{moving}");
    assert!(moved_slot >= 8192, "{moved_slot}");
    let c = connect(b.addr).await;
    for i in 0..50 {
        c.set(format!("{{moving}}{i}"), format!("m{i}"))
            .await
            .unwrap();
    }
    c.cluster_migrate(
        &[SlotRange {
            start: moved_slot,
            end: moved_slot,
        }],
        "a",
    )
    .await
    .unwrap();
    caught_up(a.addr, a2.addr).await;

    // Writers through cluster clients; what is acknowledged is recorded.
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut tasks = Vec::new();
    for t in 0..4 {
        let c = impatient(b.addr).await;
        let acked = acked.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0.. {
                let key = format!("w{t}-{n}");
                if c.set(key.clone(), "1").await.is_err() {
                    return;
                }
                acked.lock().unwrap().push(key);
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.kill9();
    for t in tasks {
        t.await.unwrap();
    }
    let keys = acked.lock().unwrap().clone();
    assert!(keys.len() > 10, "{}", keys.len());

    let c = connect(b.addr).await;
    // (The move was epoch 2.)
    assert_eq!(c.cluster_slots().await.unwrap().epoch, 2);
    let f = c
        .cluster_failover("a2", Duration::from_secs(30))
        .await
        .unwrap();
    assert!(f.promoted);
    assert_eq!(f.map.epoch, 3);
    let took: HashMap<String, bool> = f
        .nodes
        .iter()
        .map(|(n, r)| (n.clone(), r.is_ok()))
        .collect();
    assert_eq!(
        took,
        HashMap::from([("a2".into(), true), ("b".into(), true), ("a".into(), false)])
    );
    assert_eq!(f.map.node("a").unwrap().replica_of.as_deref(), Some("a2"));
    assert!(f
        .map
        .node("a2")
        .unwrap()
        .ranges
        .iter()
        .any(|r| r.contains(moved_slot)));

    // A new client of b finds every acknowledged write, the moved slot's
    // keys too, at a2.
    let c = connect(b.addr).await;
    for k in &keys {
        assert_eq!(
            c.get(k.clone()).await.unwrap().as_deref(),
            Some(&b"1"[..]),
            "{k} lost"
        );
    }
    for i in 0..50 {
        let v = c.get(format!("{{moving}}{i}")).await.unwrap();
        assert_eq!(v, Some(format!("m{i}").into()), "moved key {i}");
    }
    assert_eq!(
        connect(a2.addr).await.cluster_slots().await.unwrap().epoch,
        3
    );
    // Running it again is a no-op that says so.
    let again = c.cluster_failover("a2", Duration::from_secs(5)).await;
    assert!(again.is_err(), "a2 is a primary in the map now: {again:?}");

    // The old primary, restarted as it was (no --replica-of), learns the
    // newer map from the other nodes before it serves, finds itself a2's
    // replica in it and follows a2 (its own unreplicated state replaced).
    let old = restart(&adir, &a, &["--node-id", "a", "--config", &config]);
    assert_eq!(
        connect(old.addr).await.cluster_slots().await.unwrap().epoch,
        3
    );
    let r = caught_up(a2.addr, old.addr).await;
    assert_eq!(r["role"], "replica", "{r:?}");
    assert_eq!(r["replica_of"], "a2", "{r:?}");
    let via_old = connect(old.addr).await;
    assert_eq!(
        via_old.get(keys[0].clone()).await.unwrap().as_deref(),
        Some(&b"1"[..])
    );

    // And back, with the `rush` CLI: a is promoted; a2, running, takes the
    // map that makes it a's replica, restarts in place and follows a.
    let rush = Path::new(env!("CARGO_BIN_EXE_rushd")).with_file_name("rush");
    if !rush.exists() {
        common::prerequisite_missing(
            &format!("{} is not built", rush.display()),
            "build the workspace (cargo test --workspace, or cargo build -p rush-client)",
        );
        return;
    }
    let b_addr = b.addr.to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(rush)
            .args(["--addr", &b_addr, "--json", "cluster", "failover", "a"])
            .output()
            .expect("rush runs")
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(back["epoch"], 4, "{back}");
    assert_eq!(back["promoted"], true, "{back}");
    let nodes = back["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{back}");
    assert!(nodes.iter().all(|n| n["epoch"] == 4), "{back}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let r = loop {
        let r = status(a2.addr).await;
        if r["role"] == "replica" && r["replication_state"] == "following" {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "a2 did not become a's replica: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(r["replica_of"], "a", "{r:?}");
    caught_up(old.addr, a2.addr).await;
    let c = connect(b.addr).await;
    for k in &keys {
        assert_eq!(
            c.get(k.clone()).await.unwrap().as_deref(),
            Some(&b"1"[..]),
            "{k} lost failing back"
        );
    }
    c.set("after-failback", "1").await.unwrap();
}

/// READONLY: a replica answers key reads of its primary's slots from its
/// copy on a connection that asked (binary READONLY, RESP READONLY through
/// redis-cli), fresh as its copy (no stale cache); writes, short links and
/// connections that didn't ask are MOVED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readonly_connections_read_the_replicas_copy() {
    use bytes::Bytes;
    use rush_client::protocol::cmd::{Get, HGet, Info, LinkResolve, ReadOnly, Set, Ttl};
    let tmp = tempfile::tempdir().unwrap();
    let p = primary(&tmp.path().join("primary"), &[]);
    let c = connect(p.addr).await;
    c.set_with("k", "v0", HOUR, SetCond::Always).await.unwrap();
    c.hset("h", [("f", "x")]).await.unwrap();
    let code = c.shorten("https://example.com/ro").await.unwrap().code;
    let mut r = replica(&tmp.path().join("replica"), &p);
    caught_up(p.addr, r.addr).await;

    let raw = connect_to(&r.addr.to_string()).await;
    let at = r.addr.to_string();
    let get = |k: &str| Get {
        key: Bytes::from(k.to_string()),
    };
    let moved = |e: rush_client::ClientError| assert_eq!(e.code(), Some(ErrorCode::Moved), "{e}");
    moved(raw.call_on(&at, get("k")).await.unwrap_err());
    assert!(raw.call_on(&at, ReadOnly { on: true }).await.unwrap());
    for i in 0..3 {
        let v = raw.call_on(&at, get("k")).await.unwrap();
        assert_eq!(v.as_deref(), Some(format!("v{i}").as_bytes()), "read {i}");
        // The next value, once the replica applied it, is what it reads:
        // nothing it read before is kept past its follower's writes.
        c.set_with("k", format!("v{}", i + 1), HOUR, SetCond::Always)
            .await
            .unwrap();
        caught_up(p.addr, r.addr).await;
    }
    let hv = raw
        .call_on(
            &at,
            HGet {
                key: Bytes::from_static(b"h"),
                field: Bytes::from_static(b"f"),
            },
        )
        .await
        .unwrap();
    assert_eq!(hv.as_deref(), Some(&b"x"[..]));
    let ttl = raw
        .call_on(
            &at,
            Ttl {
                key: Bytes::from_static(b"k"),
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(ttl, rush_client::protocol::cmd::TtlReply::Remaining(ms) if ms > 0 && ms <= 3_600_000),
        "{ttl:?}"
    );
    // Writes and short links stay the primary's.
    moved(
        raw.call_on(
            &at,
            Set {
                key: Bytes::from_static(b"k"),
                value: Bytes::from_static(b"no"),
                ttl_ms: 0,
                cond: SetCond::Always,
            },
        )
        .await
        .unwrap_err(),
    );
    moved(
        raw.call_on(&at, LinkResolve { code: code.clone() })
            .await
            .unwrap_err(),
    );
    assert!(!raw.call_on(&at, ReadOnly { on: false }).await.unwrap());
    moved(raw.call_on(&at, get("k")).await.unwrap_err());

    // The same through redis-cli on the replica's RESP listener.
    let info = connect(r.addr).await.call_on(&at, Info {}).await.unwrap();
    let resp: SocketAddr = info
        .get("resp_advertise")
        .expect("a RESP listener")
        .parse()
        .unwrap();
    let Some(out) = common::redis_cli_session(
        resp,
        false,
        false,
        &[],
        "GET k\nREADONLY\nGET k\nREADWRITE\nGET k\n",
    ) else {
        return;
    };
    // (redis-cli puts an empty line after an error.)
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    assert!(lines[0].starts_with("MOVED"), "{out}");
    assert_eq!(lines[1..3], ["OK", "v3"], "{out}");
    assert_eq!(lines[3], "OK", "{out}");
    assert!(lines[4].starts_with("MOVED"), "{out}");

    // The primary's backlog is counted in its memory (published at the
    // shards' ticks), within its limit.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = c.call_on(&p.addr.to_string(), Info {}).await.unwrap();
        let n = |row: &str| -> u64 { info.get(row).unwrap_or_default().parse().unwrap_or(0) };
        let held = n("memory_replication_backlog_bytes");
        if held > 0 {
            assert!(
                held <= n("memory_replication_backlog_limit_bytes"),
                "{info:?}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the backlog is not counted: {info:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A replica that stops fetching is behind by what was written since,
    // in records and bytes.
    // (Caught up: 0 bytes behind, once a tick's writes, if any, were
    // fetched.)
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = c.call_on(&p.addr.to_string(), Info {}).await.unwrap();
        if info.get("replication_replica_lag_bytes") == Some("0") {
            break;
        }
        assert!(Instant::now() < deadline, "never caught up: {info:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    r.kill9();
    for i in 0..50 {
        c.set(format!("behind-{i}"), "x".repeat(100)).await.unwrap();
    }
    let info = c.call_on(&p.addr.to_string(), Info {}).await.unwrap();
    let n = |row: &str| -> u64 { info.get(row).unwrap_or_default().parse().unwrap_or(0) };
    assert!(n("replication_replica_lag_records") > 0, "{info:?}");
    assert!(n("replication_replica_lag_bytes") >= 50 * 100, "{info:?}");
}

/// `replication.min_acks = 1`: a write is answered only once the replica
/// holds it, so a failover loses nothing that was acknowledged. Ten times
/// over (`RUSH_FAILOVERS`, or `scripts/failover-soak`, for more): a fresh
/// replica follows the current primary, writers load it, it is SIGKILLed
/// at a random moment, the replica is promoted and checked, and becomes
/// the primary of the next round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sync_failovers_lose_no_acknowledged_write() {
    let tmp = tempfile::tempdir().unwrap();
    let config = sync_config(tmp.path());
    let mut p = node(&tmp.path().join("node-0"), &["--config", &config]);
    // Without a replica, a durable write is refused at once.
    let c = connect(p.addr).await;
    let e = c.set("lonely", "1").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Unavailable), "{e}");
    flash_policy(&c, 1_000_000).await;

    let mut orders: Vec<(String, String)> = Vec::new();
    let (mut total_keys, mut total_codes) = (0, 0);
    let failovers: usize = std::env::var("RUSH_FAILOVERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    for round in 1..=failovers {
        let rep = node(
            &tmp.path().join(format!("node-{round}")),
            &["--config", &config, "--replica-of", &p.repl],
        );
        caught_up(p.addr, rep.addr).await;
        // Orders acknowledged by the primaries before: each counted once
        // (a retry is a replay), wherever it was taken.
        let c = connect(p.addr).await;
        for (user, order) in orders.drain(..) {
            let again = c
                .limit_acquire("flash", user, order.clone(), [OrderItem::new("sku-1", 1)])
                .await
                .unwrap();
            assert!(again.replayed, "order {order} was lost or counted twice");
        }
        let audit = c.envelope_audit().await.unwrap();
        assert!(audit.ok(), "round {round}: {:?}", audit.problems);
        let mut create = EnvelopeCreate::new(format!("boss-{round}"), 100_000, 1_000);
        create.expires_in_ms = HOUR.as_millis() as u64;
        let envelope = c.envelope_create(create).await.unwrap().id;

        let keys: Arc<Mutex<Vec<String>>> = Arc::default();
        let codes: Arc<Mutex<Vec<String>>> = Arc::default();
        let acked_orders: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let grabs: Arc<Mutex<Vec<(String, u64)>>> = Arc::default();
        let mut tasks = Vec::new();
        for t in 0..4 {
            let c = impatient(p.addr).await;
            let (keys, codes, acked_orders, grabs) = (
                keys.clone(),
                codes.clone(),
                acked_orders.clone(),
                grabs.clone(),
            );
            tasks.push(tokio::spawn(async move {
                for n in 0.. {
                    let key = format!("r{round}-w{t}-{n}");
                    if c.set(key.clone(), "1").await.is_err() {
                        return;
                    }
                    keys.lock().unwrap().push(key);
                    match c
                        .shorten(format!("https://example.com/{round}/{t}/{n}"))
                        .await
                    {
                        Ok(s) => codes.lock().unwrap().push(s.code),
                        Err(_) => return,
                    }
                    let (user, order) = (format!("u{t}-{}", n % 3), format!("o{round}-{t}-{n}"));
                    match c
                        .limit_acquire(
                            "flash",
                            user.clone(),
                            order.clone(),
                            [OrderItem::new("sku-1", 1)],
                        )
                        .await
                    {
                        Ok(_) => acked_orders.lock().unwrap().push((user, order)),
                        Err(_) => return,
                    }
                    let who = format!("g{t}-{n}");
                    match c.envelope_grab(envelope, who.clone()).await {
                        Ok(g) => grabs.lock().unwrap().push((who, g.amount_cents)),
                        Err(e) if e.code() == Some(ErrorCode::Empty) => {}
                        Err(_) => return,
                    }
                }
            }));
        }
        let pause = 100 + rand::random::<u64>() % 300;
        tokio::time::sleep(Duration::from_millis(pause)).await;
        p.kill9();
        for t in tasks {
            t.await.unwrap();
        }
        let promoted = connect(rep.addr)
            .await
            .call_on(&rep.addr.to_string(), ReplPromote {})
            .await
            .unwrap();
        assert_eq!(promoted.get("role"), Some("replica"));
        // Reads need no replica: every acknowledged write is there.
        let c = connect(rep.addr).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while status(rep.addr).await["role"] != "primary" {
            assert!(Instant::now() < deadline, "not restarted as a primary");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let keys = keys.lock().unwrap().clone();
        let codes = codes.lock().unwrap().clone();
        assert!(!keys.is_empty(), "round {round}: nothing was acknowledged");
        for k in &keys {
            assert!(
                c.get(k.clone()).await.unwrap().is_some(),
                "round {round}: acknowledged key {k} lost"
            );
        }
        for code in &codes {
            assert!(
                c.link_info(code.clone()).await.is_ok(),
                "round {round}: acknowledged link {code} lost"
            );
        }
        let info = c.envelope_info(envelope).await.unwrap();
        for (who, cents) in grabs.lock().unwrap().iter() {
            let found = info.grabs.iter().find(|g| g.user == who.as_bytes());
            assert_eq!(
                found.map(|g| g.amount_cents),
                Some(*cents),
                "round {round}: acknowledged grab of {who} lost"
            );
        }
        total_keys += keys.len();
        total_codes += codes.len();
        orders = acked_orders.lock().unwrap().clone();
        p = rep;
    }
    eprintln!(
        "{failovers} synchronous failovers: {total_keys} acknowledged keys and {total_codes} links, none lost"
    );
}

/// The replication listener holds a bounded number of connections: one
/// past the bound is closed at once, and a replica still follows once the
/// others are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replication_listener_holds_a_bounded_number_of_connections() {
    use rush_daemon::replication::listen::MAX_CONNECTIONS;
    use tokio::io::AsyncReadExt;
    let tmp = tempfile::tempdir().unwrap();
    let p = primary(&tmp.path().join("primary"), &[]);
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        held.push(tokio::net::TcpStream::connect(&p.repl).await.unwrap());
    }
    let mut extra = tokio::net::TcpStream::connect(&p.repl).await.unwrap();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(10), extra.read(&mut byte))
        .await
        .expect("the connection past the bound is closed");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    drop(held);
    connect(p.addr).await.set("k", "v").await.unwrap();
    let rep = replica(&tmp.path().join("replica"), &p);
    caught_up(p.addr, rep.addr).await;
}

/// Nonsense sent to the replication requests gets a typed error and
/// changes nothing: fetches and snapshots only on the replication
/// listener, positions of another run or shard count refused, a session
/// that was never started unknown, and the listener serves nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_requests_refuse_nonsense() {
    use rush_client::protocol::cmd::{Get, ReplFetch, ReplSnapshot};
    let tmp = tempfile::tempdir().unwrap();
    let p = primary(&tmp.path().join("primary"), &[]);
    let c = connect(p.addr).await;
    c.set("k", "v").await.unwrap();
    let on_main = c
        .call_on(
            &p.addr.to_string(),
            ReplSnapshot {
                session: 0,
                max_bytes: 1 << 20,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(on_main.code(), Some(ErrorCode::BadRequest), "{on_main}");

    let repl = connect_to(&p.repl).await;
    let fetch = |run_id, positions: Vec<u64>| ReplFetch {
        run_id,
        positions,
        meta_version: 0,
        max_bytes: 1 << 20,
        wait_ms: 0,
    };
    let run = u64::from_str_radix(&status(p.addr).await["replication_run"], 16).unwrap();
    let e = repl
        .call_on(&p.repl, fetch(run, vec![0]))
        .await
        .unwrap_err();
    assert_eq!(
        e.code(),
        Some(ErrorCode::BadRequest),
        "one position for two shards: {e}"
    );
    let e = repl
        .call_on(&p.repl, fetch(run ^ 1, vec![0, 0]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotFound), "another run: {e}");
    let e = repl
        .call_on(&p.repl, fetch(run, vec![u64::MAX, 0]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotFound), "past the head: {e}");
    let e = repl
        .call_on(
            &p.repl,
            ReplSnapshot {
                session: 42,
                max_bytes: 1 << 20,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::NotFound), "no such session: {e}");
    let e = repl
        .call_on(&p.repl, Get { key: "k".into() })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BadRequest), "{e}");
    // A fetch from the start of this run is still answered, and the data
    // is untouched.
    let ok = repl.call_on(&p.repl, fetch(run, vec![0, 0])).await.unwrap();
    assert_eq!(ok.heads.len(), 2);
    assert_eq!(c.get("k").await.unwrap().as_deref(), Some(&b"v"[..]));
}

/// One plain connection to `addr` (the replication listener answers no
/// map and no shard layout, which a `Client` asks for).
struct Raw(rush_client::Connection);

impl Raw {
    async fn call_on<C: rush_client::protocol::Command>(
        &self,
        _addr: &str,
        cmd: C,
    ) -> Result<C::Reply, rush_client::ClientError> {
        self.0.call(&cmd, Duration::from_secs(10)).await
    }
}

async fn connect_to(addr: &str) -> Raw {
    Raw(
        rush_client::Connection::connect(addr, Duration::from_secs(5))
            .await
            .unwrap(),
    )
}
