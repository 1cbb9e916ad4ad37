//! The RESP listener's node and cluster commands through tools nobody here
//! wrote: `redis-cli` runs each of them in RESP2 and RESP3 against a real
//! rushd; `redis-cli -c` follows MOVED across a three-node cluster to the
//! RESP addresses the map advertises; redis-py's `RedisCluster` writes,
//! counts and reads while slots move live between the nodes, and loses
//! nothing it was told was done.

mod common;

use common::{redis_cli_cases, redis_cli_session, venv_python, TestNode};
use rush_client::protocol::cmd::{ClusterNode, ClusterSlotsReply, SlotRange};
use rush_client::protocol::key_slot;
use rush_daemon::resp::table::SPECS;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn resp_addr(node: &TestNode) -> SocketAddr {
    node.running().resp_addr().expect("RESP listener on")
}

/// One command's reply lines (redis-cli prints replies raw, a line per
/// element, when its output is not a terminal).
fn run(addr: SocketAddr, resp3: bool, args: &[&str]) -> Option<String> {
    redis_cli_session(addr, resp3, false, args, "")
}

fn lines(s: &str) -> Vec<&str> {
    s.lines().collect()
}

async fn node_id(n: &TestNode) -> String {
    let info = n.client.info().await.unwrap();
    info.get("node_id").expect("INFO has node_id").to_string()
}

/// Read from `s` until `lines` reply lines came.
async fn read_lines(s: &mut TcpStream, lines: usize) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.windows(2).filter(|w| w == b"\r\n").count() < lines {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("an answer within 10 s")
            .unwrap();
        assert!(n > 0, "closed; got {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(got).unwrap()
}

// redis-cli blocks its thread; the node's accept loop needs another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_runs_the_node_commands_in_resp2_and_resp3() {
    let node = TestNode::start().await;
    let addr = resp_addr(&node);
    let (port, bus) = (addr.port(), node.addr().port());
    let id = node_id(&node).await;
    // A second client with a name, for CLIENT LIST.
    let mut bystander = TcpStream::connect(addr).await.unwrap();
    bystander
        .write_all(b"CLIENT SETNAME bystander\r\nCLIENT ID\r\n")
        .await
        .unwrap();
    let got = read_lines(&mut bystander, 2).await;
    assert!(got.starts_with("+OK\r\n:"), "{got:?}");

    // HELLO names the connection (SETNAME) and says who it is: its
    // CLIENT ID, and standalone mode on a node without a cluster map.
    let mut greeted = TcpStream::connect(addr).await.unwrap();
    greeted
        .write_all(b"HELLO 2 SETNAME greeted\r\nCLIENT GETNAME\r\nCLIENT ID\r\n")
        .await
        .unwrap();
    // The 7 pairs of HELLO's map: 26 lines in RESP2; then 2 and 1.
    let got = read_lines(&mut greeted, 29).await;
    let l: Vec<&str> = got.split("\r\n").collect();
    let after = |key: &str| {
        l[l.iter()
            .position(|x| *x == key)
            .unwrap_or_else(|| panic!("{key}: {got:?}"))
            + 1]
    };
    assert!(
        got.contains("$4\r\nmode\r\n$10\r\nstandalone\r\n"),
        "{got:?}"
    );
    assert!(got.contains("$7\r\nversion\r\n$5\r\n7.2.0\r\n"), "{got:?}");
    assert!(
        got.contains("$7\r\ngreeted\r\n"),
        "CLIENT GETNAME after HELLO SETNAME: {got:?}"
    );
    assert_eq!(
        after("id"),
        l[l.len() - 2],
        "HELLO's id is CLIENT ID: {got:?}"
    );
    assert_ne!(after("id"), ":0", "{got:?}");
    // A name HELLO refuses, as CLIENT SETNAME does, and the old one stays.
    greeted
        .write_all(b"*4\r\n$5\r\nHELLO\r\n$1\r\n3\r\n$7\r\nSETNAME\r\n$9\r\ntwo words\r\nCLIENT GETNAME\r\n")
        .await
        .unwrap();
    let got = read_lines(&mut greeted, 3).await;
    assert!(
        got.starts_with("-ERR Client names cannot contain spaces")
            && got.ends_with("$7\r\ngreeted\r\n"),
        "{got:?}"
    );
    drop(greeted);
    for resp3 in [false, true] {
        // A map is a line per key and value in RESP2, a line per pair in RESP3.
        let pair = |k: &str, v: &str| {
            if resp3 {
                format!("{k} {v}")
            } else {
                format!("{k}\n{v}")
            }
        };
        let cases: Vec<(Vec<&str>, String)> = vec![
            (vec!["CLUSTER", "KEYSLOT", "somekey"], "11058".into()),
            (vec!["CLUSTER", "KEYSLOT", "foo{hash_tag}"], "2515".into()),
            (vec!["CLUSTER", "MYID"], id.clone()),
            // A lone node: every slot, at its RESP listener's address.
            (
                vec!["CLUSTER", "SLOTS"],
                format!("0\n16383\n127.0.0.1\n{port}\n{id}"),
            ),
            (
                vec!["CLUSTER", "NODES"],
                format!("{id} 127.0.0.1:{port}@{bus} myself,master - 0 0 0 connected 0-16383"),
            ),
            (vec!["READONLY"], "OK".into()),
            (vec!["READWRITE"], "OK".into()),
            (vec!["COMMAND", "COUNT"], SPECS.len().to_string()),
            (
                vec!["COMMAND", "INFO", "mget", "nosuch"],
                "mget\n-2\nreadonly\nfast\n1\n-1\n1\n@read\n@string\n@fast".into(),
            ),
            (
                vec!["COMMAND", "GETKEYS", "MGET", "a", "b"],
                "a\nb".into(),
            ),
            (vec!["CONFIG", "GET", "maxmemory"], pair("maxmemory", "0")),
            (vec!["CONFIG", "GET", "DATA*"], pair("databases", "1")),
            (
                vec!["CONFIG", "GET", "cluster-enabled", "appendonly"],
                format!("{}\n{}", pair("appendonly", "no"), pair("cluster-enabled", "no")),
            ),
            (vec!["CONFIG", "GET", "port"], pair("port", &port.to_string())),
            (
                vec!["CONFIG", "SET", "maxmemory", "1"],
                "ERR CONFIG SET is not supported by Rush: settings come from rushd.toml, read at start"
                    .into(),
            ),
            (vec!["CLIENT", "SETINFO", "LIB-NAME", "rush-test"], "OK".into()),
            (
                vec!["CLIENT", "KILL", "x"],
                "ERR unknown subcommand 'KILL'. Try CLIENT HELP.".into(),
            ),
            (
                vec!["CLUSTER", "GETKEYSINSLOT", "1", "10"],
                "ERR CLUSTER GETKEYSINSLOT is not supported by Rush (it would scan the slot's keys)"
                    .into(),
            ),
        ];
        if !redis_cli_cases(addr, resp3, &cases) {
            return;
        }
        let run = |args: &[&str]| run(addr, resp3, args).unwrap();

        // INFO: Redis's sections and fields, what Rush knows.
        let info = run(&["INFO"]);
        let version = format!("rush_version:{}", env!("CARGO_PKG_VERSION"));
        let tcp_port = format!("tcp_port:{port}");
        for want in [
            "# Server",
            "redis_version:7.2.0",
            version.as_str(),
            "redis_mode:standalone",
            tcp_port.as_str(),
            "# Clients",
            "# Memory",
            "maxmemory:0",
            "# Persistence",
            "rush_kv_durability:sync",
            "# Stats",
            "# Replication",
            "role:master",
            "connected_slaves:0",
            "# Cluster",
            "cluster_enabled:0",
            "# Keyspace",
        ] {
            assert!(lines(&info).contains(&want), "INFO lacks {want:?}:\n{info}");
        }
        let some = run(&["INFO", "server", "CLUSTER"]);
        assert!(some.starts_with("# Server\r\n"), "{some}");
        assert!(
            some.contains("\r\n\r\n# Cluster\r\ncluster_enabled:0"),
            "{some}"
        );
        assert!(!some.contains("# Clients"), "{some}");
        assert_eq!(run(&["INFO", "nosuch"]), "");

        // CLUSTER INFO and SHARDS.
        let ci = run(&["CLUSTER", "INFO"]);
        for want in [
            "cluster_state:ok",
            "cluster_slots_assigned:16384",
            "cluster_known_nodes:1",
            "cluster_size:1",
            "cluster_current_epoch:0",
        ] {
            assert!(
                lines(&ci).contains(&want),
                "CLUSTER INFO lacks {want:?}:\n{ci}"
            );
        }
        let shards = run(&["CLUSTER", "SHARDS"]);
        let port_text = port.to_string();
        for want in [id.as_str(), "master", "online", port_text.as_str(), "16383"] {
            assert!(
                shards.contains(want),
                "CLUSTER SHARDS lacks {want:?}:\n{shards}"
            );
        }

        // COMMAND: every row, with its arity and key positions.
        let all = run(&["COMMAND"]);
        for s in SPECS {
            let entry = format!("{}\n{}\n", s.name, s.arity);
            assert!(all.contains(&entry), "COMMAND lacks {entry:?}");
        }
        let docs = run(&["COMMAND", "DOCS", "get"]);
        assert!(
            docs.contains("Returns the string value of a key.") && docs.contains("string"),
            "{docs}"
        );

        // CLIENT, in command order on one connection, and the node's list.
        let out = redis_cli_session(
            addr,
            resp3,
            false,
            &[],
            "CLIENT GETNAME\nCLIENT SETNAME first\nCLIENT GETNAME\nCLIENT ID\nCLIENT INFO\nCLIENT LIST\n",
        )
        .unwrap();
        let l = lines(&out);
        assert_eq!(&l[..3], ["", "OK", "first"], "{out}");
        let my_id: u64 = l[3].parse().expect("CLIENT ID is an integer");
        let me = format!("id={my_id} ");
        let resp = format!(" resp={} ", if resp3 { 3 } else { 2 });
        assert!(
            l[4].starts_with(&me) && l[4].contains(" name=first ") && l[4].contains(&resp),
            "CLIENT INFO {:?}",
            l[4]
        );
        assert!(l[4].contains(&format!(" laddr={addr} ")), "{:?}", l[4]);
        let listed: Vec<&&str> = l[5..].iter().filter(|l| l.starts_with("id=")).collect();
        assert!(
            listed
                .iter()
                .any(|l| l.starts_with(&me) && l.contains(" name=first ")),
            "{out}"
        );
        assert!(
            listed.iter().any(|l| l.contains(" name=bystander ")),
            "{out}"
        );
    }
    // A client that left is no longer listed.
    drop(bystander);
    let mut gone = false;
    for _ in 0..500 {
        if !run(addr, false, &["CLIENT", "LIST"])
            .unwrap()
            .contains("name=bystander")
        {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(gone, "a closed client stays in CLIENT LIST");

    // TIME is the daemon's clock, which moves when the tests move it.
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    node.client
        .clock_advance(Duration::from_secs(86_400))
        .await
        .unwrap();
    let t = run(addr, true, &["TIME"]).unwrap();
    let [secs, micros] = lines(&t)[..] else {
        panic!("TIME: {t:?}")
    };
    let (secs, micros): (u64, u64) = (secs.parse().unwrap(), micros.parse().unwrap());
    assert!(
        (before + 86_400..before + 86_400 + 60).contains(&secs) && micros < 1_000_000,
        "TIME {secs} {micros}, system {before}"
    );
    node.stop().await;
}

/// Three nodes sharing the slots evenly, their map made by `rush cluster
/// create`. Two have their RESP listener at the default place (the
/// protocol port + 2), which the map leaves unsaid; the third's is
/// elsewhere, which the map carries.
async fn three_nodes() -> (Vec<TestNode>, ClusterSlotsReply) {
    // The first two on fixed ports, their RESP listeners where the default
    // puts them (protocol port + 2, reserved with it); the third's set
    // elsewhere.
    let default_at = |base: u16| {
        move |c: &mut rush_daemon::Config| {
            c.server.listen = format!("127.0.0.1:{base}");
            c.server.resp_listen = None;
        }
    };
    let nodes = vec![
        TestNode::start_with(default_at(common::fixed_ports(3))).await,
        TestNode::start_with(default_at(common::fixed_ports(3))).await,
        // A fixed port, below the ephemeral range: never where the default
        // would put it (a port 0 landed on the protocol port + 2 once).
        TestNode::start_with(|c| c.server.resp_listen = Some(common::fixed_listen_addr())).await,
    ];
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr().to_string()).collect();
    let map = rush_client::cluster::create(&addrs, false, Default::default())
        .await
        .expect("cluster created");
    for (n, m) in nodes.iter().zip(&map.nodes) {
        assert_eq!(
            m.resp_addr(),
            resp_addr(n).to_string(),
            "{}'s RESP listener",
            m.id
        );
    }
    let default = |n: &TestNode| resp_addr(n).port() == n.addr().port() + 2;
    assert!(default(&nodes[0]) && default(&nodes[1]) && !default(&nodes[2]));
    assert_eq!(map.nodes[0].resp_addr, None);
    assert_eq!(
        map.nodes[2].resp_addr,
        Some(resp_addr(&nodes[2]).to_string())
    );
    (nodes, map)
}

/// A key whose slot is in `r`.
fn key_in(prefix: &str, r: &SlotRange) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| r.contains(key_slot(k.as_bytes())))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_c_follows_moved_to_each_nodes_resp_listener() {
    let (nodes, map) = three_nodes().await;
    let entry = resp_addr(&nodes[0]);
    for (i, (n, m)) in nodes.iter().zip(&map.nodes).enumerate() {
        let key = key_in(&format!("n{i}:"), &m.ranges[0]);
        let slot = key_slot(key.as_bytes());
        let value = format!("v{i}");
        // Through node 0, following MOVED to the owner.
        let Some(set) = redis_cli_session(entry, false, true, &["SET", &key, &value], "") else {
            return;
        };
        assert_eq!(set, "OK");
        let get = redis_cli_session(
            resp_addr(&nodes[(i + 1) % 3]),
            true,
            true,
            &["GET", &key],
            "",
        )
        .unwrap();
        assert_eq!(get, value);
        // Not following: the redirect names the owner's RESP listener.
        if i != 0 {
            let moved = run(entry, false, &["GET", &key]).unwrap();
            assert_eq!(moved, format!("MOVED {slot} {}", resp_addr(n)));
        }
        assert_eq!(run(resp_addr(n), false, &["GET", &key]).unwrap(), value);
    }
    // Each node counts the keys of its own slots: one each.
    for n in &nodes {
        assert_eq!(run(resp_addr(n), false, &["DBSIZE"]).unwrap(), "1");
    }
    // HELLO says a node of a cluster map is in cluster mode.
    let hello = run(resp_addr(&nodes[2]), true, &["HELLO", "3"]).unwrap();
    assert!(lines(&hello).contains(&"mode cluster"), "{hello}");
    // Every node tells the same map, by RESP addresses.
    let slots = run(resp_addr(&nodes[1]), false, &["CLUSTER", "SLOTS"]).unwrap();
    let want: Vec<String> = map
        .nodes
        .iter()
        .zip(&nodes)
        .map(|(m, n)| {
            let r = m.ranges[0];
            format!(
                "{}\n{}\n127.0.0.1\n{}\n{}",
                r.start,
                r.end,
                resp_addr(n).port(),
                m.id
            )
        })
        .collect();
    assert_eq!(slots, want.join("\n"));
    let text = run(resp_addr(&nodes[1]), true, &["CLUSTER", "NODES"]).unwrap();
    let mine: Vec<&str> = text.lines().filter(|l| l.contains("myself")).collect();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert_eq!(mine.len(), 1, "{text}");
    assert!(
        mine[0].starts_with(&format!(
            "{} 127.0.0.1:{}@{} myself,master - 0 0 {} connected {}",
            map.nodes[1].id,
            resp_addr(&nodes[1]).port(),
            nodes[1].addr().port(),
            map.epoch,
            map.nodes[1].ranges[0]
        )),
        "{text}"
    );
    let info = run(entry, false, &["INFO", "cluster"]).unwrap();
    assert_eq!(info, "# Cluster\r\ncluster_enabled:1");
    let ci = run(entry, false, &["CLUSTER", "INFO"]).unwrap();
    assert!(
        lines(&ci).contains(&"cluster_known_nodes:3") && lines(&ci).contains(&"cluster_size:3"),
        "{ci}"
    );
    // A map with a replica of node 0 shows it as Redis shows replicas:
    // after its primary in SLOTS, `slave` of it in NODES, in its shard.
    let mut with_replica = map.clone();
    with_replica.epoch += 1;
    with_replica.nodes.push(ClusterNode {
        id: "r0".into(),
        addr: "127.0.0.1:1".into(),
        ranges: Vec::new(),
        resp_addr: Some("127.0.0.1:9".into()),
        replica_of: Some(map.nodes[0].id.clone()),
    });
    for n in &nodes {
        let c = common::connect(n.addr()).await;
        c.cluster_setmap_on(&n.addr().to_string(), with_replica.clone())
            .await
            .unwrap();
    }
    let slots = run(resp_addr(&nodes[1]), false, &["CLUSTER", "SLOTS"]).unwrap();
    let first: Vec<&str> = slots.lines().take(8).collect();
    assert_eq!(first[5..], ["127.0.0.1", "9", "r0"], "{slots}");
    assert_eq!(slots.lines().count(), 5 * 3 + 3, "{slots}");
    let text = run(resp_addr(&nodes[1]), false, &["CLUSTER", "NODES"]).unwrap();
    let line = format!(
        "r0 127.0.0.1:9@1 slave {} 0 0 {} connected",
        map.nodes[0].id, with_replica.epoch
    );
    assert!(text.lines().any(|l| l == line), "{text}");
    let shards = run(resp_addr(&nodes[1]), false, &["CLUSTER", "SHARDS"]).unwrap();
    assert_eq!(
        shards.lines().filter(|l| *l == "replica").count(),
        1,
        "{shards}"
    );
    assert_eq!(
        shards.lines().filter(|l| *l == "slots").count(),
        3,
        "{shards}"
    );
    for n in nodes {
        n.stop().await;
    }
}

/// redis-py's `RedisCluster`, started from node 0: SETs, INCRs and GETs
/// (each checked) on keys of `SLOTS` and elsewhere until the file `STOP`
/// appears, then reads back every acknowledged write and counter. Prints
/// `writing` once it is under way, then `ok <keys> <port>`: the port of the
/// node it routes `SLOTS` to at the end.
const CLUSTER_SCRIPT: &str = r#"
import os, redis
from redis.cluster import RedisCluster
from redis.crc import key_slot
lo, hi = map(int, os.environ["SLOTS"].split("-"))
rc = RedisCluster(host="127.0.0.1", port=int(os.environ["PORT"]), decode_responses=True)
tags, t = [], 0
while len(tags) < 16:
    if lo <= key_slot(f"t{t}".encode()) <= hi:
        tags.append(f"t{t}")
    t += 1
written, counts, i, prev = {}, {}, 0, None
while True:
    tag = tags[i % len(tags)] if i % 4 else f"o{i % 32}"
    k, c = f"{{{tag}}}:{i}", f"{{{tag}}}:n"
    assert rc.set(k, str(i)) is True, k
    written[k] = str(i)
    counts[c] = counts.get(c, 0) + 1
    n = rc.incr(c)
    assert n == counts[c], (c, n, counts[c])
    if prev is not None:
        assert rc.get(prev) == written[prev], prev
    prev = k
    i += 1
    if i == 100:
        print("writing", flush=True)
    if i >= 100 and os.path.exists(os.environ["STOP"]):
        break
for k, v in written.items():
    assert rc.get(k) == v, k
for c, n in counts.items():
    assert int(rc.get(c)) == n, c
node = rc.nodes_manager.get_node_from_slot(key_slot(tags[0].encode()))
print(f"ok {len(written)} {node.port}", flush=True)
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_cluster_loses_nothing_while_slots_move() {
    let Some(python) = venv_python() else {
        return;
    };
    let (nodes, map) = three_nodes().await;
    // Slots of node 0 that move to node 1 while redis-py writes to them.
    let moving = SlotRange { start: 0, end: 47 };
    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop");
    let mut child = Command::new(python)
        .args(["-c", CLUSTER_SCRIPT])
        .env("PORT", resp_addr(&nodes[0]).port().to_string())
        .env("SLOTS", format!("{}-{}", moving.start, moving.end))
        .env("STOP", &stop)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = tokio::task::spawn_blocking(move || {
        let line = rx.recv_timeout(Duration::from_secs(60));
        (line, rx)
    })
    .await
    .unwrap();
    let (line, rx) = first;
    if line.as_deref() != Ok("writing") {
        let out = child.wait_with_output().unwrap();
        panic!(
            "redis-py did not start writing ({line:?}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let moved = common::connect_patient(nodes[0].addr())
        .await
        .cluster_migrate(&[moving], &map.nodes[1].id)
        .await
        .expect("slots moved");
    assert_eq!(moved.slots, u32::from(moving.end - moving.start) + 1);
    std::fs::write(&stop, b"").unwrap();
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let last = rx.recv_timeout(Duration::from_secs(5)).unwrap_or_default();
    assert!(
        out.status.success() && last.starts_with("ok "),
        "redis-py: {last:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // It wrote on, and learned where the slots went (MOVED from node 0).
    let parts: Vec<&str> = last.split(' ').collect();
    let keys: usize = parts[1].parse().unwrap();
    assert!(keys > 100, "{last}");
    assert_eq!(parts[2], resp_addr(&nodes[1]).port().to_string(), "{last}");
    let stats = run(resp_addr(&nodes[0]), false, &["INFO", "stats"]).unwrap();
    let moved_answers: u64 = stats
        .lines()
        .find_map(|l| l.strip_prefix("rush_moved_total:"))
        .expect("INFO stats has rush_moved_total")
        .parse()
        .unwrap();
    assert!(moved_answers > 0, "{stats}");
    for n in nodes {
        n.stop().await;
    }
}

/// Reads every key from a cluster whose only primary has a replica, with
/// `read_from_replicas`: what it reads must be what it wrote (a read the
/// replica is behind on comes back empty and is tried again).
const REPLICA_READS_SCRIPT: &str = r#"
import os, sys, time
from redis.cluster import RedisCluster
rc = RedisCluster(host="127.0.0.1", port=int(os.environ["PORT"]), read_from_replicas=True)
keys = ["rk%d" % i for i in range(200)]
for k in keys:
    rc.set(k, k)
deadline = time.time() + 30
for _ in range(3):
    for k in keys:
        while True:
            v = rc.get(k)
            if v == k.encode():
                break
            if v is not None:
                sys.exit("%s read back as %r" % (k, v))
            if time.time() > deadline:
                sys.exit("%s never read back" % k)
            time.sleep(0.01)
print("ok")
"#;

/// redis-py's `RedisCluster(read_from_replicas=True)` finds the replica in
/// CLUSTER SLOTS, sends it READONLY and reads from it: every value read is
/// the one written, and the replica answered some of the reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_py_reads_from_a_replica() {
    let Some(python) = venv_python() else {
        return;
    };
    let primary = TestNode::start_with(|c| {
        c.replication.listen = "127.0.0.1:0".into();
        c.server.resp_listen = Some("127.0.0.1:0".into());
    })
    .await;
    let follow = primary
        .running()
        .replication_addr()
        .expect("a replication listener")
        .to_string();
    let replica = TestNode::start_with(move |c| {
        c.replication.replica_of = follow;
        c.server.resp_listen = Some("127.0.0.1:0".into());
    })
    .await;
    let (pid, rid) = (node_id(&primary).await, node_id(&replica).await);
    let map = ClusterSlotsReply {
        epoch: 1,
        nodes: vec![
            ClusterNode {
                id: pid.clone(),
                addr: primary.addr().to_string(),
                ranges: vec![SlotRange {
                    start: 0,
                    end: 16383,
                }],
                resp_addr: Some(resp_addr(&primary).to_string()),
                replica_of: None,
            },
            ClusterNode {
                id: rid,
                addr: replica.addr().to_string(),
                ranges: Vec::new(),
                resp_addr: Some(resp_addr(&replica).to_string()),
                replica_of: Some(pid),
            },
        ],
    };
    for n in [&primary, &replica] {
        n.client
            .cluster_setmap_on(&n.addr().to_string(), map.clone())
            .await
            .unwrap();
    }
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args(["-c", REPLICA_READS_SCRIPT])
            .env("PORT", resp_addr(&primary).port().to_string())
            .output()
            .expect("python runs")
    });
    let out = out.await.unwrap();
    assert!(
        out.status.success(),
        "redis-py: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = replica.metrics().await;
    let served: f64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("rush_requests_total{op=\"GET\",outcome=\"ok\"} ")?
                .parse()
                .ok()
        })
        .unwrap_or(0.0);
    assert!(served > 0.0, "the replica answered no GET:\n{text}");
}
