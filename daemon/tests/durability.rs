//! Acknowledged writes survive restarts, SIGKILL, and a change of shard count.

mod common;

use common::{connect, Spawned, TestNode};
use rush_client::{Client, ClientOptions};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `n` clients of `addr` that give up at once when the node is gone (a
/// write without an answer is then known as such).
async fn writer_clients(addr: std::net::SocketAddr, n: usize) -> Vec<Client> {
    let opts = ClientOptions {
        retry_deadline: Duration::ZERO,
        ..ClientOptions::default()
    };
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(
            Client::connect_with(&addr.to_string(), opts.clone())
                .await
                .unwrap(),
        );
    }
    clients
}

#[tokio::test]
async fn graceful_restart_keeps_every_acknowledged_write() {
    let mut node = TestNode::start().await;
    for i in 0..500 {
        node.client
            .set(format!("k{i}"), format!("v{i}"))
            .await
            .unwrap();
        node.client
            .hset(format!("h{}", i % 10), [(format!("f{i}"), "x")])
            .await
            .unwrap();
    }
    node.client.incr_by("counter", 42).await.unwrap();
    node.restart().await;
    for i in 0..500 {
        assert_eq!(
            node.client.get(format!("k{i}")).await.unwrap().unwrap(),
            format!("v{i}")
        );
    }
    for h in 0..10 {
        assert_eq!(
            node.client.hgetall(format!("h{h}")).await.unwrap().len(),
            50
        );
    }
    assert_eq!(node.client.incr_by("counter", 0).await.unwrap(), 42);
    node.stop().await;
}

#[tokio::test]
async fn changing_the_shard_count_rebalances_without_loss() {
    let mut node = TestNode::start_with(|c| c.storage.shards = 2).await;
    for i in 0..2_000 {
        node.client
            .set(format!("key:{i}"), format!("{i}"))
            .await
            .unwrap();
    }
    for shards in [3, 1, 4] {
        node.restart_with(|c| c.storage.shards = shards).await;
        let info = node.client.info().await.unwrap();
        assert_eq!(info.get("shards"), Some(shards.to_string().as_str()));
        for i in (0..2_000).step_by(7) {
            assert_eq!(
                node.client.get(format!("key:{i}")).await.unwrap().unwrap(),
                i.to_string(),
                "key {i} after moving to {shards} shards"
            );
        }
        // Every key is exactly once, in the column family of its shard.
        let storage = node.running().storage().clone();
        let total: usize = (0..shards)
            .map(|s| storage.count_raw(s, &[], &[0xff, 0xff, 0xff]).unwrap())
            .sum();
        assert_eq!(total, 2_000);
    }
    node.stop().await;
}

/// Writers run against a spawned rushd; it is SIGKILLed mid-load; after a
/// restart every write that was acknowledged before the kill is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_load_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Spawned::start(dir.path(), &[]);
    let acked: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let counter_acks = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let mut writers = Vec::new();
    for (w, client) in writer_clients(daemon.addr, 8).await.into_iter().enumerate() {
        let (acked, counter_acks) = (acked.clone(), counter_acks.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let (k, v) = (format!("w{w}:{i}"), format!("value {w} {i}"));
                match client.set(k.clone(), v.clone()).await {
                    Ok(_) => {
                        acked.lock().unwrap().insert(k, v);
                    }
                    Err(_) => break,
                }
                if client.incr_by("{shared}counter", 1).await.is_err() {
                    break;
                }
                counter_acks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }));
    }
    // Let the writers get going, then kill mid-flight.
    while acked.lock().unwrap().len() < 2_000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon.kill9();
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let counter_acked = counter_acks.load(std::sync::atomic::Ordering::SeqCst);

    let daemon = Spawned::start(dir.path(), &[]);
    let client = connect(daemon.addr).await;
    for (k, v) in &acked {
        assert_eq!(
            client.get(k.clone()).await.unwrap().as_deref(),
            Some(v.as_bytes()),
            "{k}"
        );
    }
    // An increment may have been applied without its answer arriving, never
    // the other way round.
    let counter = client.incr_by("{shared}counter", 0).await.unwrap();
    assert!(
        counter >= counter_acked,
        "counter {counter} < {counter_acked} acknowledged"
    );
    assert!(
        counter <= counter_acked + 8,
        "at most one unacknowledged increment per writer"
    );
    println!(
        "sigkill: {} acknowledged writes and {counter_acked} increments survived",
        acked.len()
    );
}

#[tokio::test]
async fn sigterm_drains_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Spawned::start(dir.path(), &[]);
    let client = connect(daemon.addr).await;
    client.set("before", "shutdown").await.unwrap();
    let (status, _) = common::http_get(daemon.http.unwrap(), "/ready").await;
    assert_eq!(status, 200);
    let exit = daemon.terminate();
    assert!(exit.success(), "rushd exits 0 on SIGTERM, got {exit:?}");
    let daemon = Spawned::start(dir.path(), &[]);
    let client = connect(daemon.addr).await;
    assert_eq!(
        client.get("before").await.unwrap().as_deref(),
        Some(&b"shutdown"[..])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_reconnects_and_retries_idempotent_requests() {
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = Spawned::start_fixed(dir.path(), &[]);
    let addr = daemon.addr.to_string();
    let client = Client::connect_with(
        &addr,
        ClientOptions {
            retry_deadline: Duration::from_secs(60),
            ..ClientOptions::default()
        },
    )
    .await
    .unwrap();
    client.set("k", "v").await.unwrap();
    daemon.kill9();
    // The node comes back on the same address (its start takes a while)
    // while the client finds the connection dead and keeps retrying.
    let restart = {
        let (dir, addr) = (dir.path().to_path_buf(), addr.clone());
        std::thread::spawn(move || Spawned::start_on(&dir, &addr, &[]))
    };
    assert_eq!(client.get("k").await.unwrap().as_deref(), Some(&b"v"[..]));
    let _daemon = restart.join().unwrap();
    // A non-idempotent request is never resent blindly, but works on the new
    // connection.
    assert_eq!(client.incr_by("n", 1).await.unwrap(), 1);
}

#[tokio::test]
async fn a_full_shard_queue_answers_busy_and_loses_nothing() {
    let node = TestNode::start_with(|c| {
        c.storage.queue_depth = 1;
        c.storage.max_batch = 1;
    })
    .await;
    let conn = rush_client::Connection::connect(&node.addr().to_string(), Duration::from_secs(5))
        .await
        .unwrap();
    let t = Duration::from_secs(30);
    let calls = (0..2_000).map(|i| {
        let conn = conn.clone();
        tokio::spawn(async move {
            let set = rush_client::protocol::cmd::Set::new(format!("{{q}}{i}"), "v");
            (i, conn.call(&set, t).await)
        })
    });
    let mut busy = 0;
    let mut written = Vec::new();
    for c in calls.collect::<Vec<_>>() {
        let (i, r) = c.await.unwrap();
        match r {
            Ok(true) => written.push(i),
            Err(e) if e.code() == Some(rush_client::protocol::ErrorCode::Busy) => busy += 1,
            other => panic!("request {i}: {other:?}"),
        }
    }
    assert!(
        busy > 0,
        "a queue of 1 under 2,000 pipelined writes must push back"
    );
    for i in &written {
        assert!(node.client.exists(format!("{{q}}{i}")).await.unwrap());
    }
    println!(
        "busy: {busy} of 2000 answered BUSY, {} written",
        written.len()
    );
    node.stop().await;
}

/// The shard log under SIGKILL: writes pass a tiny write-back budget many
/// times over (so runs are written back and log segments rotated and
/// deleted while the load runs), the node is killed mid-load, and it comes
/// back with another shard count (each log is replayed into the layout it
/// was written with, then rebalanced). Every acknowledged write is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_with_the_shard_log_loses_nothing_across_a_shard_change() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rushd.toml");
    std::fs::write(
        &config,
        "[storage]\ncommit = \"log\"\nwrite_back_mb = 1\nshards = 2\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let config_arg = config.to_str().unwrap();
    let mut daemon = Spawned::start(&data, &["--config", config_arg]);
    // Per key, what its last acknowledged write left: a value, or none
    // (deleted). A write without an answer may or may not have happened:
    // its key is not checked.
    let acked: Arc<Mutex<HashMap<String, Option<String>>>> = Arc::default();
    let mut writers = Vec::new();
    for (w, client) in writer_clients(daemon.addr, 8).await.into_iter().enumerate() {
        let acked = acked.clone();
        writers.push(tokio::spawn(async move {
            let note = |k: &str, answered: bool, v: Option<String>| {
                let mut acked = acked.lock().unwrap();
                if answered {
                    acked.insert(k.to_string(), v);
                } else {
                    acked.remove(k);
                }
            };
            for i in 0.. {
                // Keys rewritten over and over, and some deleted: a write
                // back holds each key once, the log every version.
                let k = format!("w{w}:{}", i % 3_000);
                let v = format!("value {w} {i} {}", "x".repeat(200));
                let set = client.set(k.clone(), v.clone()).await;
                note(&k, set.is_ok(), Some(v));
                if set.is_err() {
                    break;
                }
                if i % 10 == 0 {
                    let gone = format!("w{w}:{}", (i + 7) % 3_000);
                    let del = client.del(gone.clone()).await;
                    note(&gone, del.is_ok(), None);
                    if del.is_err() {
                        break;
                    }
                }
            }
        }));
    }
    // Enough for several write backs of the 1 MiB budget, then kill.
    while acked.lock().unwrap().len() < 12_000 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon.kill9();
    for w in writers {
        w.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    // Runs were written back while the load ran: the log rotated (a
    // segment is named after its first record) and dropped what RocksDB
    // held; and it still holds what is to replay.
    let firsts: Vec<u64> = std::fs::read_dir(data.join("rush-log/shard-0"))
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.trim_end_matches(".log").parse().unwrap()
        })
        .collect();
    assert!(!firsts.is_empty(), "the log is there to replay");
    assert!(
        firsts.iter().all(|&f| f > 1),
        "written back and trimmed while the load ran: {firsts:?}"
    );

    std::fs::write(&config, "[storage]\ncommit = \"log\"\nshards = 3\n").unwrap();
    let daemon = Spawned::start(&data, &["--config", config_arg]);
    let client = connect(daemon.addr).await;
    for (k, v) in &acked {
        assert_eq!(
            client.get(k.clone()).await.unwrap().as_deref(),
            v.as_deref().map(str::as_bytes),
            "{k}"
        );
    }
    let deleted = acked.values().filter(|v| v.is_none()).count();
    assert!(deleted > 0, "some keys were last deleted");
    println!(
        "shard log sigkill: {} acknowledged keys survived ({deleted} of them deleted)",
        acked.len()
    );
}

/// The shard log segment holding the most records after a SIGKILL.
fn largest_log_segment(data: &std::path::Path) -> std::path::PathBuf {
    let mut all = Vec::new();
    for shard in std::fs::read_dir(data.join("rush-log")).unwrap() {
        for seg in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let path = seg.unwrap().path();
            all.push((std::fs::metadata(&path).unwrap().len(), path));
        }
    }
    all.into_iter().max().expect("a log segment").1
}

/// Writes of one slot, each its own pass (so its own log record), then
/// SIGKILL: they are in the log only.
async fn write_then_kill(data: &std::path::Path, keys: std::ops::Range<u32>) {
    let mut daemon = Spawned::start(data, &[]);
    let client = connect(daemon.addr).await;
    for i in keys {
        client
            .set(format!("{{log}}k{i}"), format!("v{i}"))
            .await
            .unwrap();
    }
    daemon.kill9();
}

/// A damaged shard log, through the real daemon: a torn last record (a
/// crash in the middle of its write) is dropped and the node starts with
/// every acknowledged write; a damaged record with acknowledged records
/// after it stops the start with an error that names the file, and leaves
/// the log as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_log_tail_is_dropped_and_a_damaged_record_refuses_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");

    write_then_kill(&data, 0..5).await;
    let segment = largest_log_segment(&data);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    std::io::Write::write_all(&mut f, &[200, 0, 0, 0, 1, 2, 3, 4, 5]).unwrap();
    drop(f);
    let mut daemon = Spawned::start(&data, &[]);
    let client = connect(daemon.addr).await;
    for i in 0..5 {
        assert_eq!(
            client.get(format!("{{log}}k{i}")).await.unwrap().as_deref(),
            Some(format!("v{i}").as_bytes())
        );
    }
    daemon.kill9();

    write_then_kill(&data, 5..10).await;
    let segment = largest_log_segment(&data);
    let mut bytes = std::fs::read(&segment).unwrap();
    // Inside the first record's first entry: the records after it are
    // whole.
    bytes[18] ^= 0xff;
    std::fs::write(&segment, &bytes).unwrap();
    let log = dir.path().join("stderr");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rushd"))
        .args(["--listen", "127.0.0.1:0", "--http", "", "--resp", ""])
        .arg("--data")
        .arg(&data)
        .env("RUSH_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("rushd runs");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("rushd started on a damaged log");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(&segment.display().to_string()) && stderr.contains("byte 0"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&segment).unwrap(),
        bytes,
        "the log is left as it was"
    );
}
