//! Reaching the node `--addr` names follows `--timeout` as every other
//! retry does: `rush` waits for a node that isn't listening yet, says on
//! stderr what it waits for, and gives up at the deadline — 5 s when no
//! `--timeout` is given, so a mistyped port is an error within seconds.
//! The library under it: `Client::connect_with` retries until
//! `seed_deadline`, tells `on_retry`, and doesn't retry what waiting can't
//! cure.
//!
//! Nodes here are real (in-process, RocksDB in a temporary directory) and
//! the CLI is the real binary. The ports of nodes that "appear later" are
//! reserved below the kernel's ephemeral range: a client retrying against
//! an ephemeral port can connect to itself (TCP simultaneous open), and a
//! port of the ephemeral range could be taken by someone's outgoing
//! connection in between.

mod common;

use rush_client::{Client, ClientError, ClientOptions, RetryHook};
use rush_daemon::{Clock, Config};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `rush args…`, with none of the caller's `RUSH_*` variables.
fn rush(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rush"));
    cmd.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("RUSH_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Run to the end, off the runtime's threads.
async fn run(mut cmd: Command) -> Ran {
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let out = cmd.output().expect("rush runs");
        Ran {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            took: started.elapsed(),
        }
    })
    .await
    .unwrap()
}

/// A node listening on `addr`.
async fn node_on(addr: &str, dir: &std::path::Path) -> rush_daemon::Running {
    let mut c = Config::small(dir);
    c.server.listen = addr.to_string();
    rush_daemon::start(c, Clock::system()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_bounds_the_wait_for_a_node_that_is_not_there() {
    let addr = common::fixed_listen_addr();
    let ran = run(rush(&["--addr", &addr, "--timeout", "1", "get", "k"])).await;
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
    // It waited the whole second (it used to fail at once), and not much
    // more.
    let took = ran.took.as_secs_f64();
    assert!(took >= 0.9, "gave up after {took:.2}s");
    assert!(took < 2.5, "took {took:.2}s");
    assert!(
        ran.stderr.contains(&format!(
            "rush: waiting for {addr} (HELLO): connecting to {addr}: "
        )),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("(--timeout 1)"), "{}", ran.stderr);
    // Said once (the reason didn't change), then the error.
    assert_eq!(
        ran.stderr.matches("rush: waiting for").count(),
        1,
        "{}",
        ran.stderr
    );
    let last = ran.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with(&format!("error: connecting to {addr}: ")),
        "{last}"
    );
    assert!(ran.stdout.is_empty(), "{}", ran.stdout);
}

/// No --timeout: a mistyped port is an error after 5 s, not after the 30 s
/// an answer may take, and stderr says how to wait longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_default_a_node_that_is_not_there_fails_within_seconds() {
    let addr = common::fixed_listen_addr();
    let ran = run(rush(&["--addr", &addr, "ping"])).await;
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
    let took = ran.took.as_secs_f64();
    assert!((4.5..8.0).contains(&took), "gave up after {took:.2}s");
    assert!(
        ran.stderr.contains(&format!(
            "rush: waiting for {addr} (HELLO): connecting to {addr}: "
        )) && ran
            .stderr
            .contains("(give --timeout SECONDS to wait longer)"),
        "{}",
        ran.stderr
    );
}

/// A node that comes up while `rush` waits: the command goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_appears_within_the_timeout_is_used() {
    let addr = common::fixed_listen_addr();
    let mut child = rush(&["--addr", &addr, "--timeout", "30", "set", "seed", "up"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Start the node once rush says it is waiting for it (no sleep: the
    // retry path is certainly taken).
    let stderr = child.stderr.take().unwrap();
    let (said_tx, said_rx) = tokio::sync::oneshot::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut said = Some(said_tx);
        let mut all = String::new();
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap();
            if let Some(tx) = said.take_if(|_| line.starts_with("rush: waiting for")) {
                let _ = tx.send(line.clone());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let waiting = tokio::time::timeout(Duration::from_secs(10), said_rx)
        .await
        .expect("rush said it waits within 10 s")
        .expect("rush said it waits");
    assert!(
        waiting.starts_with(&format!(
            "rush: waiting for {addr} (HELLO): connecting to {addr}: "
        )) && waiting.ends_with("(--timeout 30)"),
        "{waiting}"
    );
    let dir = tempfile::tempdir().unwrap();
    let node = node_on(&addr, dir.path()).await;

    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = reader.join().unwrap();
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n");
    // Within a backoff step of the node's coming, far from the deadline.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let c = Client::connect(&addr).await.unwrap();
    assert_eq!(c.get("seed").await.unwrap().as_deref(), Some(&b"up"[..]));
    node.shutdown().await.unwrap();
}

/// The library: `connect_with` retries the node it is given until
/// `seed_deadline`, telling `on_retry` (op HELLO) each time; what no wait
/// can cure fails at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_retries_until_the_seed_deadline() {
    let notices: Arc<Mutex<Vec<(String, String, u32)>>> = Arc::default();
    let seen = notices.clone();
    let opts = ClientOptions {
        retry_deadline: Duration::from_secs(30),
        seed_deadline: Some(Duration::from_millis(600)),
        on_retry: Some(RetryHook::new(move |n| {
            seen.lock()
                .unwrap()
                .push((n.op.to_string(), n.addr.to_string(), n.attempt))
        })),
        ..ClientOptions::default()
    };
    let addr = common::fixed_listen_addr();
    let started = Instant::now();
    let e = Client::connect_with(&addr, opts.clone()).await.unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(
            e,
            ClientError::Connect {
                transient: true,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        took >= Duration::from_millis(550) && took < Duration::from_secs(2),
        "{took:?}"
    );
    {
        let n = notices.lock().unwrap();
        assert!(n.len() >= 2, "{n:?}");
        for (i, (op, at, attempt)) in n.iter().enumerate() {
            assert_eq!((op.as_str(), at.as_str()), ("HELLO", addr.as_str()));
            assert_eq!(*attempt as usize, i + 1);
        }
    }

    // An address that speaks HTTP: a mistake no wait cures.
    notices.lock().unwrap().clear();
    let http = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let http_addr = http.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for s in http.incoming() {
            let Ok(mut s) = s else { return };
            let mut buf = [0u8; 256];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let started = Instant::now();
    let e = Client::connect_with(&http_addr, opts.clone())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("that address speaks HTTP"), "{e}");
    assert!(started.elapsed() < Duration::from_millis(500));
    assert!(notices.lock().unwrap().is_empty());

    // No seed deadline: the retry deadline, here zero — one attempt.
    let started = Instant::now();
    let once = ClientOptions {
        retry_deadline: Duration::ZERO,
        seed_deadline: None,
        ..opts
    };
    assert!(Client::connect_with(&addr, once).await.is_err());
    assert!(started.elapsed() < Duration::from_millis(500));
    assert!(notices.lock().unwrap().is_empty());
}
