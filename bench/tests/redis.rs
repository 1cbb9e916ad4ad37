//! Every workload's Redis side against a real redis-server, started here on
//! a free loopback port with a temporary directory and killed at the end.
//! Skipped, with a note, when `redis-server` is not installed.

mod common;

use common::{assert_sane, run_every_workload, tiny, KEYS, REQUESTS};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct RedisServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// The bench's target for this server.
    fn target(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// A connection of our own, to check what the workloads left.
    async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_redis() -> Option<RedisServer> {
    if Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        common::prerequisite_missing(
            "redis-server is not on PATH",
            "scripts/ensure-deps --redis (Debian: apt-get install redis-server)",
        );
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn redis-server");
    let server = RedisServer {
        child,
        port,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !answers_ping(port) {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(server)
}

/// Redis answers PING on `port`. A connection alone proves nothing: with
/// no listener there yet, a connect to a loopback port can pick that same
/// port as its own and connect to itself (a CI run saw the workloads
/// refused after such a "start").
fn answers_ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut reply = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_runs_clean_against_redis() {
    let Some(server) = start_redis() else { return };
    for r in run_every_workload(&server.target(), |_| {}).await {
        assert_eq!(r.side, "redis");
    }

    // The same work landed in Redis: values and counter totals.
    let mut c = server.connection().await;
    let v: Vec<u8> = redis::cmd("GET")
        .arg("key:000000000007")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(v, vec![b'x'; 100]);
    let mut sum = 0i64;
    for i in 0..KEYS {
        let n: Option<i64> = redis::cmd("GET")
            .arg(format!("counter:{i:012}"))
            .query_async(&mut c)
            .await
            .unwrap();
        sum += n.unwrap_or(0);
    }
    assert_eq!(sum, REQUESTS as i64, "kv-incr increments");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_errors_are_counted_by_type() {
    let Some(server) = start_redis() else { return };
    let target = server.target();
    let mut c = server.connection().await;
    redis::cmd("SET")
        .arg("counter:000000000000")
        .arg("word")
        .query_async::<()>(&mut c)
        .await
        .unwrap();
    let mut o = tiny(&target, false);
    o.params.keys = 1;
    o.stop = rush_bench::Stop::Requests(40);
    let r = rush_bench::run("kv-incr", o).await.unwrap();
    assert_eq!(r.errors, 40);
    assert_eq!(r.error_types.len(), 1, "{:?}", r.error_types);
    let (kind, stat) = r.error_types.iter().next().unwrap();
    assert!(kind.starts_with("REDIS_"), "{kind}");
    assert_eq!(stat.count, 40);
}

/// Keys matching `pattern` (KEYS is fine on a test's small Redis).
async fn keys(c: &mut redis::aio::MultiplexedConnection, pattern: &str) -> Vec<String> {
    redis::cmd("KEYS")
        .arg(pattern)
        .query_async(c)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_workloads_reach_redis() {
    use rush_bench::workloads::{catalog, envelopes, links_resolve, links_shorten};
    let Some(server) = start_redis() else { return };
    let target = server.target();
    let mut c = server.connection().await;
    let run = |name: &'static str, preload: bool| {
        let target = target.clone();
        async move {
            let r = rush_bench::run(name, tiny(&target, preload))
                .await
                .unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_sane(&r, REQUESTS);
            r
        }
    };

    // links-shorten: 600 links under client-reserved IDs (a segment of
    // 1000 per lane that shortened).
    run("links-shorten", false).await;
    assert_eq!(keys(&mut c, "l:*").await.len() as u64, REQUESTS);
    let seq: u64 = redis::cmd("GET")
        .arg(links_shorten::REDIS_SEQ)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(seq % links_shorten::REDIS_SEGMENT, 0);
    assert!(seq >= REQUESTS);

    // links-resolve: the preloaded links are there, with their URLs and
    // a 30-day TTL, under IDs reserved after the shortens'.
    let r = run("links-resolve", true).await;
    assert_eq!(r.preloaded, KEYS);
    assert_eq!(keys(&mut c, "l:*").await.len() as u64, REQUESTS + KEYS);
    let ids = rush_bench::workload::recall::<links_resolve::RedisIds>(&format!(
        "links-resolve:redis:{target}"
    ))
    .expect("ids kept");
    assert!(ids.id(0) >= seq, "the preload reserved its own IDs");
    let mut key = Vec::new();
    links_shorten::redis_link_key(&mut key, ids.id(KEYS - 1));
    let url: String = redis::cmd("GET")
        .arg(&key[..])
        .query_async(&mut c)
        .await
        .unwrap();
    let mut want = String::new();
    links_shorten::url(&mut want, "p", KEYS - 1, 100);
    assert_eq!(url, want);
    let ttl: i64 = redis::cmd("TTL")
        .arg(&key[..])
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(ttl > 29 * 86_400, "GETEX slid the expiry: {ttl}");

    // limits: one remembered order id per allowed order.
    let r = run("limits", false).await;
    assert!(r.ok > r.denied, "most orders are allowed: {r:?}");
    assert_eq!(
        keys(&mut c, "lim:*:o:*").await.len() as u64,
        r.ok - r.denied
    );

    // catalog: every owner's records, one field each.
    let r = run("catalog", true).await;
    assert_eq!(r.preloaded, KEYS);
    assert!(r.misses > 0 && r.misses < r.ok);
    let n: u64 = redis::cmd("HLEN")
        .arg("owner:000000000007")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(n, catalog::records_of(7));
    let r = run("catalog-zipf", true).await;
    assert_eq!(r.preloaded, 0, "the marker says the owners are loaded");

    // envelopes: every granted grab is in a grabs hash, and the books add up.
    let r = run("envelopes", false).await;
    let granted = r.ok - r.denied;
    let mut grabs = 0u64;
    let mut taken = 0u64;
    for k in keys(&mut c, "env:*").await {
        if k.ends_with(":g") {
            let n: u64 = redis::cmd("HLEN")
                .arg(&k)
                .query_async(&mut c)
                .await
                .unwrap();
            grabs += n;
        } else {
            let left: u64 = redis::cmd("HGET")
                .arg(&k)
                .arg("left")
                .query_async(&mut c)
                .await
                .unwrap();
            taken += envelopes::SHARES as u64 - left;
        }
    }
    assert_eq!(grabs, granted);
    assert_eq!(taken, granted);

    // envelopes-held: the preload's envelopes, each grab in one of them.
    let r = run("envelopes-held", true).await;
    assert_eq!(r.preloaded, KEYS);
    assert_eq!(r.denied, 0, "600 grabs can't empty 150 envelopes of 100");
    let mut grabs = 0u64;
    for n in 0..KEYS {
        let g: u64 = redis::cmd("HLEN")
            .arg(format!("env:{{held.{n}}}:g"))
            .query_async(&mut c)
            .await
            .unwrap();
        grabs += g;
    }
    assert_eq!(grabs, r.ok);
    let r = run("envelopes-held", true).await;
    assert_eq!(r.preloaded, 0, "the marker says the envelopes are there");

    let r = run("mixed", true).await;
    assert_eq!(r.preloaded, 0);
}
