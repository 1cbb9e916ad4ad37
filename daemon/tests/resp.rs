//! The RESP listener through tools nobody here wrote (`redis-cli`, RESP2 and
//! RESP3) and through raw sockets for what a tool can't send: pipelines
//! across shards, hostile input, authentication, expiry on the daemon's
//! clock, and acknowledged writes surviving SIGKILL.

mod common;

use common::{fixed_listen_addr, prerequisite_missing, Spawned, TestNode};
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn resp_addr(node: &TestNode) -> SocketAddr {
    node.running().resp_addr().expect("RESP listener on")
}

/// `redis-cli` with these arguments; None (after saying why) when it is
/// not installed.
fn redis_cli(addr: SocketAddr, resp3: bool, args: &[&str]) -> Option<String> {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()]);
    if resp3 {
        cmd.arg("-3");
    }
    match cmd.args(args).output() {
        Ok(out) => {
            assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
            Some(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
        }
        Err(_) => {
            prerequisite_missing(
                "redis-cli is not installed",
                "run scripts/ensure-deps --redis (Debian's redis-tools)",
            );
            None
        }
    }
}

/// Send `bytes`, read until `want` bytes came or the server closed; returns
/// what came and whether the server closed.
async fn exchange(addr: SocketAddr, bytes: &[u8], want: usize) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    read_some(&mut s, want).await
}

async fn read_some(s: &mut TcpStream, want: usize) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while got.len() < want {
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (got, true),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!(
                "no answer within 10 s; got {:?}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    (got, false)
}

/// Read until what came ends with `suffix`.
async fn read_until(s: &mut TcpStream, suffix: &str) -> String {
    let mut got = String::new();
    while !got.ends_with(suffix) {
        let (more, closed) = read_some(s, 1).await;
        got.push_str(&String::from_utf8_lossy(&more));
        assert!(!closed || got.ends_with(suffix), "closed; got {got:?}");
    }
    got
}

/// Read until the server closes the connection.
async fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let (got, closed) = read_some(s, usize::MAX).await;
    assert!(closed);
    got
}

fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

// redis-cli blocks its thread; the node's accept loop needs another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_runs_every_command_in_resp2_and_resp3() {
    let node = TestNode::start().await;
    let addr = resp_addr(&node);
    let count = rush_daemon::resp::table::SPECS.len().to_string();
    for resp3 in [false, true] {
        let p = if resp3 { "r3" } else { "r2" };
        let k = |s: &str| format!("{p}:{s}");
        let (a, b, c) = (k("{t}a"), k("{t}b"), k("{t}c"));
        let (h, n) = (k("h"), k("n"));
        let cases: Vec<(Vec<String>, &str)> = vec![
            (vec!["PING".into()], "PONG"),
            (vec!["PING".into(), "hi".into()], "hi"),
            (vec!["ECHO".into(), "hello".into()], "hello"),
            (vec!["SELECT".into(), "0".into()], "OK"),
            (vec!["SET".into(), a.clone(), "1".into()], "OK"),
            (vec!["GET".into(), a.clone()], "1"),
            (vec!["GET".into(), k("missing")], ""),
            (vec!["SET".into(), a.clone(), "x".into(), "NX".into()], ""),
            (
                vec![
                    "SET".into(),
                    a.clone(),
                    "2".into(),
                    "XX".into(),
                    "GET".into(),
                ],
                "1",
            ),
            (
                vec![
                    "SET".into(),
                    b.clone(),
                    "7".into(),
                    "PX".into(),
                    "60000".into(),
                ],
                "OK",
            ),
            (
                vec!["MGET".into(), a.clone(), b.clone(), c.clone()],
                "2\n7\n",
            ),
            (vec!["EXISTS".into(), a.clone(), b.clone(), c.clone()], "2"),
            (vec!["DEL".into(), a.clone(), c.clone()], "1"),
            (vec!["EXISTS".into(), a.clone()], "0"),
            (vec!["INCR".into(), n.clone()], "1"),
            (vec!["INCRBY".into(), n.clone(), "41".into()], "42"),
            (vec!["DECR".into(), n.clone()], "41"),
            (vec!["DECRBY".into(), n.clone(), "40".into()], "1"),
            (vec!["TTL".into(), n.clone()], "-1"),
            (vec!["EXPIRE".into(), n.clone(), "100".into()], "1"),
            (vec!["TTL".into(), n.clone()], "100"),
            (vec!["PEXPIRE".into(), n.clone(), "5000".into()], "1"),
            (vec!["TTL".into(), k("missing")], "-2"),
            (
                vec![
                    "HSET".into(),
                    h.clone(),
                    "f".into(),
                    "1".into(),
                    "g".into(),
                    "2".into(),
                ],
                "2",
            ),
            (vec!["HGET".into(), h.clone(), "g".into()], "2"),
            (
                vec!["HINCRBY".into(), h.clone(), "f".into(), "9".into()],
                "10",
            ),
            (vec!["HDEL".into(), h.clone(), "g".into(), "zz".into()], "1"),
            (
                vec!["GET".into(), h.clone()],
                "WRONGTYPE Operation against a key holding the wrong kind of value",
            ),
            (vec!["INCR".into(), b.clone()], "8"),
            (
                vec!["DEL".into(), k("x"), k("y")],
                "CROSSSLOT Keys in request don't hash to the same slot",
            ),
            (vec!["COMMAND".into(), "COUNT".into()], count.as_str()),
            (
                vec!["NOPE".into(), "arg".into()],
                "ERR unknown command 'NOPE', with args beginning with: 'arg'",
            ),
        ];
        for (args, want) in &cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let Some(got) = redis_cli(addr, resp3, &args) else {
                return;
            };
            assert_eq!(
                got,
                want.trim_end(),
                "redis-cli{} {args:?}",
                if resp3 { " -3" } else { "" }
            );
        }
        // HGETALL: a flat array in RESP2, a map in RESP3 (redis-cli prints
        // both as lines; the raw bytes are checked below).
        let got = redis_cli(addr, resp3, &["HGETALL", &h]).unwrap();
        assert_eq!(got, if resp3 { "f 10" } else { "f\n10" });
        let pttl: i64 = redis_cli(addr, resp3, &["PTTL", &n])
            .unwrap()
            .parse()
            .unwrap();
        assert!((4000..=5000).contains(&pttl), "PTTL {pttl}");
    }
    // The shapes that differ, byte for byte.
    let mut hello = command(&[b"HELLO", b"3"]);
    hello.extend(command(&[b"HGETALL", b"r2:h"]));
    hello.extend(command(&[b"GET", b"nothing"]));
    hello.extend(command(&[b"HELLO", b"2"]));
    hello.extend(command(&[b"HGETALL", b"r2:h"]));
    hello.extend(command(&[b"GET", b"nothing"]));
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(&hello).await.unwrap();
    let got = read_until(&mut conn, "*2\r\n$1\r\nf\r\n$2\r\n10\r\n$-1\r\n").await;
    let want_tail = "%1\r\n$1\r\nf\r\n$2\r\n10\r\n_\r\n";
    assert!(
        got.starts_with("%7\r\n$6\r\nserver\r\n$4\r\nrush\r\n"),
        "{got:?}"
    );
    assert!(got.contains(want_tail), "{got:?}");
    assert!(
        got.contains("*14\r\n$6\r\nserver\r\n"),
        "HELLO 2 answers an array: {got:?}"
    );
    assert!(
        got.ends_with("*2\r\n$1\r\nf\r\n$2\r\n10\r\n$-1\r\n"),
        "{got:?}"
    );
    node.stop().await;
}

#[tokio::test]
async fn pipelined_answers_keep_their_order_across_shards() {
    let node = TestNode::start_with(|c| c.storage.shards = 4).await;
    let addr = resp_addr(&node);
    // Keys of every shard, so most requests are forwarded and their answers
    // come back at different times; RESP answers must still be in order.
    let n = 2_000;
    let mut pipeline = Vec::new();
    for i in 0..n {
        pipeline.extend(command(&[
            b"SET",
            format!("k{i}").as_bytes(),
            format!("v{i}").as_bytes(),
        ]));
        pipeline.extend(command(&[b"GET", format!("k{i}").as_bytes()]));
        pipeline.extend(b"PING\r\n");
    }
    let mut want = Vec::new();
    for i in 0..n {
        want.extend(b"+OK\r\n");
        let v = format!("v{i}");
        want.extend(format!("${}\r\n{v}\r\n", v.len()).as_bytes());
        want.extend(b"+PONG\r\n");
    }
    let (got, closed) = exchange(addr, &pipeline, want.len()).await;
    assert!(!closed);
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
    // The binary protocol sees the same data.
    assert_eq!(node.client.get("k1999").await.unwrap().unwrap(), "v1999");
    node.stop().await;
}

#[tokio::test]
async fn bad_input_is_refused_and_other_connections_carry_on() {
    let node = TestNode::start().await;
    let addr = resp_addr(&node);
    let mut bystander = TcpStream::connect(addr).await.unwrap();
    bystander
        .write_all(&command(&[b"SET", b"calm", b"1"]))
        .await
        .unwrap();
    assert_eq!(read_some(&mut bystander, 5).await.0, b"+OK\r\n");
    // Each case ends where the server stops reading, so its answer is not
    // lost to a reset for unread bytes.
    let long_line = vec![b'a'; 64 * 1024 + 1];
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"*1\r\n$999999999999\r\n".to_vec(), "invalid bulk length"),
        (b"*1\r\n$-5\r\n".to_vec(), "invalid bulk length"),
        (b"*2147483648\r\n".to_vec(), "invalid multibulk length"),
        (b"*1\r\n:1\r\n".to_vec(), "expected '$', got ':'"),
        (
            b"*1\r\n$1\r\nxyz".to_vec(),
            "bulk data not followed by CRLF",
        ),
        (long_line, "too big inline request"),
        // A command larger than the frame limit, announced in pieces that
        // are each under the bulk limit.
        (
            {
                let mut v = b"*100\r\n$4000000\r\n".to_vec();
                v.extend(vec![b'x'; 4_000_000]);
                v.extend(b"\r\n$4000000\r\n");
                v
            },
            "command is larger than",
        ),
    ];
    for (input, why) in cases {
        let mut s = TcpStream::connect(addr).await.unwrap();
        // A good command first: it is answered before the error.
        s.write_all(b"PING\r\n").await.unwrap();
        let _ = s.write_all(&input).await;
        let got = String::from_utf8_lossy(&until_closed(&mut s).await).to_string();
        assert!(
            got.starts_with("+PONG\r\n-ERR Protocol error: ") && got.contains(why),
            "{why}: {got:?}"
        );
    }
    // Over the value limit is an answer, not a protocol error.
    let big = vec![b'v'; (1 << 20) + 1];
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&command(&[b"SET", b"big", &big]))
        .await
        .unwrap();
    s.write_all(b"GET big\r\n").await.unwrap();
    let got = read_until(&mut s, "$-1\r\n").await;
    assert!(got.starts_with("-ERR ") && got.contains("limit"), "{got:?}");
    // The bystander was never disturbed.
    bystander.write_all(b"GET calm\r\n").await.unwrap();
    assert_eq!(read_some(&mut bystander, 7).await.0, b"$1\r\n1\r\n");
    // QUIT answers, then closes.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"QUIT\r\nPING\r\n").await.unwrap();
    assert_eq!(until_closed(&mut s).await, b"+OK\r\n");
    node.stop().await;
}

#[tokio::test]
async fn expiry_follows_the_daemons_clock() {
    let node = TestNode::start().await;
    let addr = resp_addr(&node);
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"SET e v EX 10\r\nTTL e\r\n").await.unwrap();
    assert_eq!(read_some(&mut s, 10).await.0, b"+OK\r\n:10\r\n");
    node.client
        .clock_advance(Duration::from_secs(11))
        .await
        .unwrap();
    s.write_all(b"GET e\r\nTTL e\r\nEXISTS e\r\n")
        .await
        .unwrap();
    assert_eq!(read_some(&mut s, 13).await.0, b"$-1\r\n:-2\r\n:0\r\n");
    node.stop().await;
}

// redis-cli blocks its thread; the node's accept loop needs another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_and_hello_auth_check_the_nodes_tokens() {
    let secrets = tempfile::tempdir().unwrap();
    let clients = secrets.path().join("clients.tokens");
    let admins = secrets.path().join("admin.tokens");
    std::fs::write(&clients, "shop:resp-s3cret-41\n").unwrap();
    std::fs::write(&admins, "ops:resp-adm1n-42\n").unwrap();
    let node = TestNode::start_with(|c| {
        c.auth.token_file = Some(clients.clone());
        c.auth.admin_token_file = Some(admins.clone());
    })
    .await;
    let addr = resp_addr(&node);
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET k\r\nAUTH nope\r\nGET k\r\nAUTH default resp-s3cret-41\r\nGET k\r\n")
        .await
        .unwrap();
    let want = "-NOAUTH Authentication required.\r\n\
                -WRONGPASS invalid username-password pair or user is disabled.\r\n\
                -NOAUTH Authentication required.\r\n\
                +OK\r\n$-1\r\n";
    let (got, _) = read_some(&mut s, want.len()).await;
    assert_eq!(String::from_utf8_lossy(&got), want);
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"HELLO 3\r\nHELLO 3 AUTH default resp-s3cret-41\r\nGET k\r\n")
        .await
        .unwrap();
    let got = read_until(&mut s, "*0\r\n_\r\n").await;
    assert!(got.starts_with("-NOAUTH HELLO must be called"), "{got:?}");
    assert!(got.contains("%7\r\n$6\r\nserver\r\n"), "{got:?}");
    // redis-cli with -a sends AUTH first.
    if let Some(out) = redis_cli(
        addr,
        false,
        &["-a", "resp-s3cret-41", "--no-auth-warning", "PING"],
    ) {
        assert_eq!(out, "PONG");
    }
    node.stop().await;
}

#[test]
fn acknowledged_resp_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let resp: SocketAddr = fixed_listen_addr().parse().unwrap();
    let resp_arg = resp.to_string();
    let mut node = Spawned::start(dir.path(), &["--resp", &resp_arg]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let n = 500;
    rt.block_on(async {
        let mut s = TcpStream::connect(resp).await.unwrap();
        let mut pipeline = Vec::new();
        for i in 0..n {
            pipeline.extend(command(&[
                b"SET",
                format!("d{i}").as_bytes(),
                format!("{i}").as_bytes(),
            ]));
            pipeline.extend(command(&[b"HSET", b"dh", format!("f{i}").as_bytes(), b"x"]));
            pipeline.extend(command(&[b"INCR", b"dc"]));
        }
        s.write_all(&pipeline).await.unwrap();
        let mut want = Vec::new();
        for i in 0..n {
            want.extend(format!("+OK\r\n:1\r\n:{}\r\n", i + 1).as_bytes());
        }
        let (got, _) = read_some(&mut s, want.len()).await;
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
    });
    // Every write above was acknowledged: none may be lost.
    node.kill9();
    let node = Spawned::start(dir.path(), &["--resp", &resp_arg]);
    rt.block_on(async {
        let mut s = TcpStream::connect(resp).await.unwrap();
        s.write_all(b"GET d0\r\nGET d499\r\nGET dc\r\nHGET dh f499\r\n")
            .await
            .unwrap();
        let want = "$1\r\n0\r\n$3\r\n499\r\n$3\r\n500\r\n$1\r\nx\r\n";
        let (got, _) = read_some(&mut s, want.len()).await;
        assert_eq!(String::from_utf8_lossy(&got), want);
        let client = common::connect(node.addr).await;
        for i in (0..n).step_by(37) {
            assert_eq!(
                client.get(format!("d{i}")).await.unwrap().unwrap(),
                i.to_string()
            );
        }
        assert_eq!(client.hgetall("dh").await.unwrap().len(), n);
    });
}
