//! The RESP listener through tools nobody here wrote (`redis-cli`, RESP2 and
//! RESP3) and through raw sockets for what a tool can't send: pipelines
//! across shards, hostile input, authentication, expiry on the daemon's
//! clock, and acknowledged writes surviving SIGKILL.

mod common;

use common::{fixed_listen_addr, redis_cli, Spawned, TestNode};
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn resp_addr(node: &TestNode) -> SocketAddr {
    node.running().resp_addr().expect("RESP listener on")
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

/// What `redis-cli` prints for `input`, one command a line, run on one
/// connection (its REPL, reading stdin).
fn redis_cli_stdin(addr: SocketAddr, resp3: bool, input: &str) -> String {
    use std::io::Write;
    use std::process::Stdio;
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()]);
    if resp3 {
        cmd.arg("-3");
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("redis-cli runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "redis-cli < {input:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Commands as redis-cli takes them (words split on spaces), `$p` standing
/// for the protocol's key prefix, and what redis-cli prints for each.
fn run_cases(addr: SocketAddr, resp3: bool, p: &str, cases: &[(String, &str)]) -> Option<()> {
    for (line, want) in cases {
        let line = line.replace("$p", p);
        let args: Vec<&str> = line.split(' ').collect();
        let got = redis_cli(addr, resp3, &args)?;
        assert_eq!(
            got,
            want.trim_end(),
            "redis-cli{} {line}",
            if resp3 { " -3" } else { "" }
        );
    }
    Some(())
}

// redis-cli blocks its thread; the node's accept loop needs another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_cli_runs_every_command_in_resp2_and_resp3() {
    let node = TestNode::start().await;
    let addr = resp_addr(&node);
    let crossslot = "CROSSSLOT Keys in request don't hash to the same slot";
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    // Every row of the table is a command (a test in table.rs checks it).
    let count: &'static str = Box::leak(
        rush_daemon::resp::table::SPECS
            .len()
            .to_string()
            .into_boxed_str(),
    );
    for resp3 in [false, true] {
        let p = if resp3 { "r3" } else { "r2" };
        let k = |s: &str| format!("{p}:{s}");
        let (h, n) = (k("h"), k("n"));
        let c = |line: &str, want: &'static str| (line.to_string(), want);
        let cases = vec![
            c("PING", "PONG"),
            c("PING hi", "hi"),
            c("ECHO hello", "hello"),
            c("SELECT 0", "OK"),
            c("SET $p:{t}a 1", "OK"),
            c("GET $p:{t}a", "1"),
            c("GET $p:missing", ""),
            c("SET $p:{t}a x NX", ""),
            c("SET $p:{t}a 2 XX GET", "1"),
            c("SET $p:{t}b 7 PX 60000", "OK"),
            c("MGET $p:{t}a $p:{t}b $p:{t}c", "2\n7\n"),
            c("EXISTS $p:{t}a $p:{t}b $p:{t}c", "2"),
            c("DEL $p:{t}a $p:{t}c", "1"),
            c("EXISTS $p:{t}a", "0"),
            c("INCR $p:n", "1"),
            c("INCRBY $p:n 41", "42"),
            c("DECR $p:n", "41"),
            c("DECRBY $p:n 40", "1"),
            c("TTL $p:n", "-1"),
            c("EXPIRE $p:n 100", "1"),
            c("TTL $p:n", "100"),
            c("PEXPIRE $p:n 500000", "1"),
            c("TTL $p:missing", "-2"),
            // EXPIRE's options: NX only without a TTL, XX only with one,
            // GT only to lengthen it, LT only to shorten it (no TTL counts
            // as never expiring); a missing key is never given one.
            c("SET $p:ex v", "OK"),
            c("EXPIRE $p:ex 100 XX", "0"),
            c("EXPIRE $p:ex 100 GT", "0"),
            c("TTL $p:ex", "-1"),
            c("EXPIRE $p:ex 100 NX", "1"),
            c("EXPIRE $p:ex 200 NX", "0"),
            c("TTL $p:ex", "100"),
            c("EXPIRE $p:ex 50 GT", "0"),
            c("EXPIRE $p:ex 300 xx gt", "1"),
            c("TTL $p:ex", "300"),
            c("PEXPIRE $p:ex 400000 LT", "0"),
            c("EXPIRE $p:ex 200 LT", "1"),
            c("TTL $p:ex", "200"),
            c("EXPIRE $p:missing 100 LT", "0"),
            c("EXISTS $p:missing", "0"),
            c("SET $p:ey v", "OK"),
            c("EXPIRE $p:ey 100 LT", "1"),
            c("EXPIRE $p:ey -1 GT", "0"),
            c("EXISTS $p:ey", "1"),
            c("PEXPIREAT $p:ey 1 LT", "1"),
            c("EXISTS $p:ey", "0"),
            c(
                "EXPIRE $p:ex 1 NX GT",
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            ),
            c("EXPIRE $p:ex 1 FOREVER", "ERR Unsupported option FOREVER"),
            c("TTL $p:ex", "200"),
            // The string commands composed of SET, GET, DEL and EXPIRE.
            c("SETNX $p:s 1", "1"),
            c("SETNX $p:s 2", "0"),
            c("GETDEL $p:s", "1"),
            c("GETDEL $p:s", ""),
            c("SETEX $p:se 100 v", "OK"),
            c("TTL $p:se", "100"),
            c(
                "SETEX $p:se 0 v",
                "ERR invalid expire time in 'setex' command",
            ),
            c("PSETEX $p:pse 100000 w", "OK"),
            c("GET $p:pse", "w"),
            c("GETEX $p:se", "v"),
            c("GETEX $p:se PERSIST", "v"),
            c("TTL $p:se", "-1"),
            c("GETEX $p:se EX 100", "v"),
            c("TTL $p:se", "100"),
            c("GETEX $p:se PX 50000", "v"),
            c("TTL $p:se", "50"),
            c("GETEX $p:missing EX 5", ""),
            c("GETEX $p:se EX 5 PX 5", "ERR syntax error"),
            c("PERSIST $p:se", "1"),
            c("PERSIST $p:se", "0"),
            c("PERSIST $p:missing", "0"),
            // Times already past: written and gone at once.
            c("SET $p:sx v EXAT 1", "OK"),
            c("EXISTS $p:sx", "0"),
            c("SET $p:sx v", "OK"),
            c("SET $p:sx w PXAT 1 NX", ""),
            c("GET $p:sx", "v"),
            c("SET $p:sx w PXAT 1 XX GET", "v"),
            c("EXISTS $p:sx", "0"),
            c("SET $p:sx v", "OK"),
            c("GETEX $p:sx EXAT 1", "v"),
            c("EXISTS $p:sx", "0"),
            c("EXPIREAT $p:missing 1", "0"),
            c("SET $p:sx v", "OK"),
            c("PEXPIREAT $p:sx 1", "1"),
            c("EXISTS $p:sx", "0"),
            c("SET $p:kt v EX 100", "OK"),
            c("SET $p:kt w KEEPTTL", "OK"),
            c("TTL $p:kt", "100"),
            c("SET $p:kt x KEEPTTL XX GET", "w"),
            c("GET $p:kt", "x"),
            c("SET $p:kt2 v KEEPTTL NX", "OK"),
            c("TTL $p:kt2", "-1"),
            c("SET $p:kt2 v KEEPTTL EX 5", "ERR syntax error"),
            c("MSET $p:{t}m1 1 $p:{t}m2 2", "OK"),
            c("MSETNX $p:{t}m2 x $p:{t}m3 y", "0"),
            c("MGET $p:{t}m2 $p:{t}m3", "2\n"),
            c("MSETNX $p:{t}m3 x $p:{t}m4 y", "1"),
            c("MGET $p:{t}m3 $p:{t}m4", "x\ny"),
            c("UNLINK $p:{t}m3 $p:{t}m4 $p:{t}m5", "2"),
            c("UNLINK $p:{t}m1", "1"),
            c("MSET $p:x 1 $p:y 2", crossslot),
            c("MSETNX $p:x 1 $p:y 2", crossslot),
            c("MGET $p:x $p:y", crossslot),
            c("EXISTS $p:x $p:y", crossslot),
            c("UNLINK $p:x $p:y", crossslot),
            c("DEL $p:x $p:y", crossslot),
            c("GET $p:x", ""),
            // Hashes.
            c("HSET $p:h f 1 g 2", "2"),
            c("HGET $p:h g", "2"),
            c("HINCRBY $p:h f 9", "10"),
            c("HDEL $p:h g zz", "1"),
            c("HMGET $p:h zz f", "\n10"),
            c("HEXISTS $p:h f", "1"),
            c("HEXISTS $p:h zz", "0"),
            c("HEXISTS $p:missing f", "0"),
            c("HLEN $p:h", "1"),
            c("HLEN $p:missing", "0"),
            c("HSETNX $p:h2 f x", "1"),
            c("HSETNX $p:h2 f y", "0"),
            c("HSETNX $p:h2 g z", "1"),
            c("HLEN $p:h2", "2"),
            c("HMGET $p:h2 f g", "x\nz"),
            c("GET $p:h", wrongtype),
            c("GETDEL $p:h", wrongtype),
            c("HLEN $p:{t}b", wrongtype),
            c("HEXISTS $p:{t}b f", wrongtype),
            c("HMGET $p:{t}b f", wrongtype),
            c("HSETNX $p:{t}b f v", wrongtype),
            c("INCR $p:{t}b", "8"),
            c("COMMAND COUNT", count),
            c(
                "NOPE arg",
                "ERR unknown command 'NOPE', with args beginning with: 'arg'",
            ),
            c("EXEC", "ERR EXEC without MULTI"),
            c("DISCARD", "ERR DISCARD without MULTI"),
            c("UNWATCH", "OK"),
            c("WATCH $p:x $p:y", crossslot),
        ];
        if run_cases(addr, resp3, p, &cases).is_none() {
            return;
        }
        // HGETALL: a flat array in RESP2, a map in RESP3 (redis-cli prints
        // both as lines; the raw bytes are checked below).
        let got = redis_cli(addr, resp3, &["HGETALL", &h]).unwrap();
        assert_eq!(got, if resp3 { "f 10" } else { "f\n10" });
        let pttl: i64 = redis_cli(addr, resp3, &["PTTL", &n])
            .unwrap()
            .parse()
            .unwrap();
        // Wall time passes between the commands (the clock is not stopped):
        // a margin of 60 s, not one of a few redis-cli calls.
        assert!((440_000..=500_000).contains(&pttl), "PTTL {pttl}");

        // Transactions on one connection. What redis-cli prints was taken
        // from Redis 7 running the same lines, up to the Rush-only part.
        let script = "MULTI\nSET {$p}x 1\nINCR {$p}x\nGET {$p}nothing\nPING\nHSET {$p}h f v\n\
                      HGETALL {$p}h\nHMGET {$p}h f zz\nEXEC\nEXEC\n\
                      MULTI\nMULTI\nSET {$p}x\nEXEC\n\
                      WATCH {$p}x\nSET {$p}x 5\nMULTI\nINCR {$p}x\nEXEC\nGET {$p}x\n\
                      WATCH {$p}x\nMULTI\nINCR {$p}x\nEXEC\nMULTI\nDISCARD\nDISCARD\n\
                      MULTI\nSET {$p}x 0\nSET $p:elsewhere 1\nEXEC\n\
                      MULTI\nSET {$p}x 0\nHSET {$p}x f v\nEXEC\n\
                      MULTI\nSET {$p}x 0\nMSETNX {$p}a 1 {$p}b 2\nEXEC\n\
                      MULTI\nGETDEL {$p}x\nHEXISTS {$p}h f\nHEXISTS {$p}h g\nHLEN {$p}h\nEXEC\n\
                      GET {$p}x\nGET $p:elsewhere\n";
        let hgetall = if resp3 { "f v\n" } else { "f\nv\n" };
        let want = format!(
            "OK\nQUEUED\nQUEUED\nQUEUED\nQUEUED\nQUEUED\nQUEUED\nQUEUED\n\
             OK\n2\n\nPONG\n1\n{hgetall}v\n\n\
             ERR EXEC without MULTI\n\n\
             OK\nERR MULTI calls can not be nested\n\n\
             ERR wrong number of arguments for 'set' command\n\n\
             EXECABORT Transaction discarded because of previous errors.\n\n\
             OK\nOK\nOK\nQUEUED\n\n5\n\
             OK\nOK\nQUEUED\n6\nOK\nOK\nERR DISCARD without MULTI\n\n\
             OK\nQUEUED\nQUEUED\n{crossslot}\n\n\
             OK\nQUEUED\nQUEUED\n\
             EXECABORT Transaction discarded because command 2 (HSET) failed: {wrongtype}\n\n\
             OK\nQUEUED\n\
             ERR MSETNX can't be queued in MULTI: Rush runs a transaction as one BATCH of key operations\n\n\
             EXECABORT Transaction discarded because of previous errors.\n\n\
             OK\nQUEUED\nQUEUED\nQUEUED\nQUEUED\n6\n1\n0\n1\n\
             \n\n"
        );
        let got = redis_cli_stdin(addr, resp3, &script.replace("$p", p));
        assert_eq!(
            got,
            want,
            "redis-cli{} < transactions",
            if resp3 { " -3" } else { "" }
        );

        // Absolute times, against the daemon's clock, which then moves past
        // them.
        let now_ms = node.client.clock_advance(Duration::ZERO).await.unwrap();
        let (in_100_s, in_100_ms) = (now_ms / 1000 + 100, now_ms + 100_000);
        let at = vec![
            c(&format!("SET $p:{{at}}1 v EXAT {in_100_s}"), "OK"),
            c(&format!("SET $p:{{at}}2 v PXAT {in_100_ms}"), "OK"),
            c("SET $p:{at}3 v", "OK"),
            c(&format!("EXPIREAT $p:{{at}}3 {in_100_s}"), "1"),
            c("SET $p:{at}4 v", "OK"),
            c(&format!("PEXPIREAT $p:{{at}}4 {in_100_ms}"), "1"),
            c("SET $p:{at}5 v", "OK"),
            c(&format!("GETEX $p:{{at}}5 EXAT {in_100_s}"), "v"),
            c("SET $p:{at}6 v", "OK"),
            c(&format!("GETEX $p:{{at}}6 PXAT {in_100_ms}"), "v"),
            c("SET $p:{at}kept v EX 50", "OK"),
            c("PERSIST $p:{at}kept", "1"),
            c("TTL $p:{at}kept", "-1"),
            c(
                "EXISTS $p:{at}1 $p:{at}2 $p:{at}3 $p:{at}4 $p:{at}5 $p:{at}6 $p:{at}kept",
                "7",
            ),
        ];
        run_cases(addr, resp3, p, &at).unwrap();
        for i in 1..=6 {
            let ttl: i64 = redis_cli(addr, resp3, &["PTTL", &k(&format!("{{at}}{i}"))])
                .unwrap()
                .parse()
                .unwrap();
            // EXAT's whole seconds land up to 1 s short of 100 s.
            assert!((90_000..=100_000).contains(&ttl), "{i}: PTTL {ttl}");
        }
        node.client
            .clock_advance(Duration::from_secs(101))
            .await
            .unwrap();
        let after = vec![
            c(
                "EXISTS $p:{at}1 $p:{at}2 $p:{at}3 $p:{at}4 $p:{at}5 $p:{at}6 $p:{at}kept",
                "1",
            ),
            c("GET $p:{at}kept", "v"),
        ];
        run_cases(addr, resp3, p, &after).unwrap();
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

/// A pipeline of INCRs, INCRBYs, DECRs, DECRBYs and GETs through one shard
/// just restarted (its row cache empty): the shard looks ahead at the
/// commands in its read buffer (loading their rows and what its filter of
/// the keys it holds says of them), new counters are answered without a
/// read, and every answer is still the one running the commands in order
/// gives. Counters written before the restart alternate with new ones, a
/// string among them is refused as no integer (Redis's words) and keeps its
/// value, and command names come in any case.
#[tokio::test]
async fn pipelined_counters_after_a_restart_answer_in_order() {
    pipelined_counters_after_a_restart(1).await;
}

/// The same through two shards: the connection's shard looks ahead at the
/// commands it runs, and the other shard at the batches forwarded to it.
#[tokio::test]
async fn pipelined_counters_forwarded_after_a_restart_answer_in_order() {
    pipelined_counters_after_a_restart(2).await;
}

async fn pipelined_counters_after_a_restart(shards: usize) {
    let mut node = TestNode::start_with(|c| c.storage.shards = shards).await;
    for i in 0..50 {
        assert_eq!(
            node.client.incr_by(format!("n:{i}"), 100).await.unwrap(),
            100
        );
    }
    assert!(node.client.set("n:word", "abc").await.unwrap());
    node.restart().await;
    let addr = resp_addr(&node);
    let mut values: std::collections::HashMap<String, i64> =
        (0..50).map(|i| (format!("n:{i}"), 100)).collect();

    // Sixteen INCRs of written counters in one write find their values in
    // storage.
    let mut pipeline = Vec::new();
    for i in 0..16 {
        pipeline.extend(command(&[b"INCR", format!("n:{i}").as_bytes()]));
    }
    let want = ":101\r\n".repeat(16);
    let (got, closed) = exchange(addr, &pipeline, want.len()).await;
    assert!(!closed);
    assert_eq!(String::from_utf8_lossy(&got), want);
    for i in 0..16 {
        *values.get_mut(&format!("n:{i}")).unwrap() += 1;
    }
    // Sixteen of new counters read nothing: the filter of the keys each
    // shard holds says they are new (a false positive is read: 1 %).
    let reads_before = node.storage_reads().await;
    let mut pipeline = Vec::new();
    for i in 0..16 {
        pipeline.extend(command(&[b"INCR", format!("fresh:{i}").as_bytes()]));
    }
    let want = ":1\r\n".repeat(16);
    let (got, closed) = exchange(addr, &pipeline, want.len()).await;
    assert!(!closed);
    assert_eq!(String::from_utf8_lossy(&got), want);
    let reads = node.storage_reads().await - reads_before;
    assert!(reads <= 2, "{reads} storage reads for 16 new counters");

    let (mut pipeline, mut want) = (Vec::new(), Vec::new());
    for j in 0..1000 {
        let key = if j % 250 == 7 {
            "n:word".to_string()
        } else {
            // Consecutive commands alternate between written and new
            // counters, so a read buffer holds both.
            format!("n:{}", j * 37 % 200)
        };
        let (args, delta): (Vec<&[u8]>, Option<i64>) = match j % 5 {
            0 => (vec![b"INCR", key.as_bytes()], Some(1)),
            1 => (vec![b"incrby", key.as_bytes(), b"3"], Some(3)),
            2 => (vec![b"DeCr", key.as_bytes()], Some(-1)),
            3 => (vec![b"GET", key.as_bytes()], None),
            _ => (vec![b"DECRBY", key.as_bytes(), b"2"], Some(-2)),
        };
        pipeline.extend(command(&args));
        match (key.as_str(), delta) {
            ("n:word", Some(_)) => want.extend(b"-ERR value is not an integer or out of range\r\n"),
            ("n:word", None) => want.extend(b"$3\r\nabc\r\n"),
            (_, Some(d)) => {
                let v = values.entry(key.clone()).or_insert(0);
                *v += d;
                want.extend(format!(":{v}\r\n").as_bytes());
            }
            (_, None) => match values.get(&key) {
                Some(v) => {
                    let v = v.to_string();
                    want.extend(format!("${}\r\n{v}\r\n", v.len()).as_bytes());
                }
                None => want.extend(b"$-1\r\n"),
            },
        }
    }
    pipeline.extend(command(&[b"GET", b"n:word"]));
    want.extend(b"$3\r\nabc\r\n");
    let (got, closed) = exchange(addr, &pipeline, want.len()).await;
    assert!(!closed);
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&want)
    );
    // The binary protocol reads the same counters.
    for (key, v) in &values {
        let got = node.client.get(key.clone()).await.unwrap();
        assert_eq!(got.as_deref(), Some(v.to_string().as_bytes()), "{key}");
    }
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
async fn transactions_run_as_one_batch_and_watch_sees_other_connections() {
    let node = TestNode::start_with(|c| c.storage.shards = 4).await;
    let addr = resp_addr(&node);
    for (hello, null) in [("", "*-1\r\n"), ("HELLO 3\r\n", "_\r\n")] {
        let mut a = TcpStream::connect(addr).await.unwrap();
        let mut b = TcpStream::connect(addr).await.unwrap();
        if !hello.is_empty() {
            a.write_all(hello.as_bytes()).await.unwrap();
            read_until(&mut a, "modules\r\n*0\r\n").await;
        }
        // Pipelined, on keys of a slot most likely on another shard than
        // the connection's: in order, and both writes or neither.
        a.write_all(b"MULTI\r\nSET {w}k 1\r\nINCR {w}n\r\nGET {w}k\r\nEXEC\r\n")
            .await
            .unwrap();
        let want = "+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*3\r\n+OK\r\n:";
        let got = read_until(&mut a, "$1\r\n1\r\n").await;
        assert!(got.starts_with(want), "{got:?}");
        // A watched key another connection changes: EXEC answers the null
        // array and writes nothing.
        a.write_all(b"WATCH {w}k {w}gone\r\n").await.unwrap();
        assert_eq!(read_until(&mut a, "\r\n").await, "+OK\r\n");
        b.write_all(b"SET {w}k 2\r\n").await.unwrap();
        assert_eq!(read_until(&mut b, "\r\n").await, "+OK\r\n");
        a.write_all(b"MULTI\r\nSET {w}k mine\r\nEXEC\r\nGET {w}k\r\n")
            .await
            .unwrap();
        let want = format!("+OK\r\n+QUEUED\r\n{null}$1\r\n2\r\n");
        assert_eq!(read_until(&mut a, &want).await, want);
        // Watched again, unchanged (a missing key stays missing): EXEC runs.
        a.write_all(b"WATCH {w}k {w}gone\r\n").await.unwrap();
        assert_eq!(read_until(&mut a, "\r\n").await, "+OK\r\n");
        a.write_all(b"MULTI\r\nSET {w}k mine\r\nEXEC\r\n")
            .await
            .unwrap();
        let want = "+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n";
        assert_eq!(read_until(&mut a, want).await, want);
        // A key that came into being between WATCH and EXEC aborts it too.
        a.write_all(b"WATCH {w}gone\r\n").await.unwrap();
        assert_eq!(read_until(&mut a, "\r\n").await, "+OK\r\n");
        b.write_all(b"SET {w}gone here\r\n").await.unwrap();
        assert_eq!(read_until(&mut b, "\r\n").await, "+OK\r\n");
        a.write_all(b"MULTI\r\nDEL {w}k\r\nEXEC\r\nDEL {w}gone\r\n")
            .await
            .unwrap();
        let want = format!("+OK\r\n+QUEUED\r\n{null}:1\r\n");
        assert_eq!(read_until(&mut a, &want).await, want);
        // The binary protocol sees what EXEC wrote, and not what it didn't.
        assert_eq!(node.client.get("{w}k").await.unwrap().unwrap(), "mine");
    }
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
    // KEEPTTL keeps the TTL the key had, through RESP and the client; the
    // key then expires on time.
    s.write_all(b"SET kt v EX 10\r\nSET kt w KEEPTTL\r\n")
        .await
        .unwrap();
    assert_eq!(read_some(&mut s, 10).await.0, b"+OK\r\n+OK\r\n");
    let kept = node
        .client
        .set_keep_ttl("kt", "x", rush_protocol::cmd::SetCond::IfPresent)
        .await
        .unwrap();
    assert!(kept);
    node.client
        .clock_advance(Duration::from_secs(9))
        .await
        .unwrap();
    s.write_all(b"GET kt\r\n").await.unwrap();
    assert_eq!(read_some(&mut s, 7).await.0, b"$1\r\nx\r\n");
    node.client
        .clock_advance(Duration::from_secs(2))
        .await
        .unwrap();
    s.write_all(b"GET kt\r\n").await.unwrap();
    assert_eq!(read_some(&mut s, 5).await.0, b"$-1\r\n");
    node.stop().await;
}

/// DBSIZE counts the generic keys that live: strings and hashes, not the
/// services' records, not what has expired by the daemon's clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dbsize_counts_live_generic_keys() {
    let node = TestNode::start().await;
    let addr = resp_addr(&node);
    assert_eq!(node.client.dbsize().await.unwrap(), 0);
    // Keys on every shard (their slots spread), a hash, two with a TTL.
    for i in 0..40 {
        node.client.set(format!("k{i}"), "v").await.unwrap();
    }
    node.client
        .hset("h", [("f", "1"), ("g", "2")])
        .await
        .unwrap();
    for k in ["soon", "later"] {
        let ttl = Duration::from_secs(if k == "soon" { 10 } else { 100 });
        node.client
            .set_with(k, "v", ttl, rush_protocol::cmd::SetCond::Always)
            .await
            .unwrap();
    }
    // A short link and its records are no generic key.
    node.client
        .shorten("https://shop.example/dbsize")
        .await
        .unwrap();
    assert_eq!(node.client.dbsize().await.unwrap(), 43);
    for resp3 in [false, true] {
        let Some(got) = redis_cli(addr, resp3, &["DBSIZE"]) else {
            return;
        };
        assert_eq!(got, "43");
    }
    node.client
        .clock_advance(Duration::from_secs(11))
        .await
        .unwrap();
    node.client.del("k0").await.unwrap();
    assert_eq!(redis_cli(addr, false, &["DBSIZE"]).unwrap(), "41");
    assert_eq!(
        redis_cli(addr, false, &["DBSIZE", "x"]).unwrap(),
        "ERR wrong number of arguments for 'dbsize' command"
    );
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
