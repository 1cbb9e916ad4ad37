//! Every workload against an in-process rushd (port 0, temporary RocksDB),
//! through the library entry point, as the command line runs them.

mod common;

use common::{assert_sane, run_every_workload, tiny, KEYS, REQUESTS};
use rush_bench::Stop;
use rush_client::Client;
use rush_daemon::{Clock, Config, Running};
use std::time::Duration;

async fn start() -> (tempfile::TempDir, Running, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let running = rush_daemon::start(Config::small(dir.path()), Clock::system())
        .await
        .expect("daemon starts");
    let target = format!("rush://{}", running.addr());
    (dir, running, target)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_runs_clean_against_rush() {
    let (_dir, node, target) = start().await;
    for r in run_every_workload(&target, |_| {}).await {
        assert_eq!(r.side, "rush");
        assert_eq!(r.mode, "closed");
    }

    // The work really reached the daemon: every preloaded key holds its
    // 100-byte value, and the counters add up to the increments sent.
    let client = Client::connect(&node.addr().to_string()).await.unwrap();
    for i in [0u64, 7, KEYS - 1] {
        let v = client.get(format!("key:{i:012}")).await.unwrap();
        assert_eq!(v.as_deref(), Some(&[b'x'; 100][..]), "key {i}");
    }
    let mut sum = 0i64;
    for i in 0..KEYS {
        if let Some(v) = client.get(format!("counter:{i:012}")).await.unwrap() {
            sum += std::str::from_utf8(&v).unwrap().parse::<i64>().unwrap();
        }
    }
    assert_eq!(sum, REQUESTS as i64, "kv-incr increments");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_keeps_its_rate() {
    let (_dir, node, target) = start().await;
    let mut o = tiny(&target, false);
    o.rate = Some(2000.0);
    o.stop = Stop::Duration(Duration::from_millis(500));
    let r = rush_bench::run("kv-set", o).await.unwrap();
    // Due times 0, 0.5 ms, … < 500 ms: exactly 1000 requests are scheduled.
    assert_sane(&r, 1000);
    assert_eq!(r.mode, "open");
    assert!(
        r.elapsed_secs >= 0.49 && r.elapsed_secs < 10.0,
        "{}",
        r.elapsed_secs
    );
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_counted_by_type_and_misses_are_not_errors() {
    let (_dir, node, target) = start().await;
    let client = Client::connect(&node.addr().to_string()).await.unwrap();
    // One counter key, holding a word: every INCR is WRONG_TYPE.
    client.set("counter:000000000000", "word").await.unwrap();
    let mut o = tiny(&target, false);
    o.params.keys = 1;
    o.stop = Stop::Requests(50);
    let r = rush_bench::run("kv-incr", o).await.unwrap();
    assert_eq!(r.ok, 0);
    assert_eq!(r.errors, 50);
    assert_eq!(r.error_types["WRONG_TYPE"].count, 50);
    assert!(!r.error_types["WRONG_TYPE"].example.is_empty());

    // Reads of keys nobody wrote, without --preload: misses, not errors.
    let mut o = tiny(&target, false);
    o.stop = Stop::Requests(100);
    let r = rush_bench::run("kv-get", o).await.unwrap();
    assert_sane(&r, 100);
    assert_eq!(r.misses, 100);

    // The same reads claiming the data was preloaded: each one is an error.
    let mut o = tiny(&target, false);
    o.params.preload = true;
    o.stop = Stop::Requests(100);
    let r = rush_bench::run("kv-get", o).await.unwrap();
    assert_eq!(r.error_types["MISSING"].count, 100);
    node.shutdown().await.unwrap();
}

#[tokio::test]
async fn unknown_workload_and_bad_options_are_refused() {
    let o = tiny("rush://127.0.0.1:1", false);
    let e = rush_bench::run("kv-nope", o.clone()).await.unwrap_err();
    assert!(e.to_string().contains("unknown workload"), "{e}");
    let mut bad = o.clone();
    bad.pipeline = 0;
    assert!(rush_bench::run("kv-set", bad).await.is_err());
    let mut bad = o;
    bad.rate = Some(-1.0);
    assert!(rush_bench::run("kv-set", bad).await.is_err());
}
