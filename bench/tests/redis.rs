//! Every workload's Redis side against a real redis-server, started here on
//! a free loopback port with a temporary directory and killed at the end.
//! Skipped, with a note, when `redis-server` is not installed.

mod common;

use common::{assert_sane, tiny, KEYS, REQUESTS};
use rush_bench::WORKLOADS;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct RedisServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
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
        eprintln!("NOTE: redis-server is not on PATH; skipping the Redis-side tests");
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
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_workload_runs_clean_against_redis() {
    let Some(server) = start_redis() else { return };
    let target = format!("redis://127.0.0.1:{}", server.port);
    for e in WORKLOADS {
        let r = rush_bench::run(e.name, tiny(&target, e.reads_preloaded))
            .await
            .unwrap_or_else(|err| panic!("{}: {err:#}", e.name));
        assert_sane(&r, REQUESTS);
        assert_eq!(r.side, "redis");
        if e.reads_preloaded {
            assert_eq!(r.preloaded, KEYS, "{}", e.name);
        }
    }

    // The same work landed in Redis: values and counter totals.
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
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
    let target = format!("redis://127.0.0.1:{}", server.port);
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/", server.port)).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
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
