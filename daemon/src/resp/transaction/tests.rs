//! Unit tests of `transaction`.

use super::*;
use crate::resp::RespConn;
use rush_protocol::cmd::{Del, HSet, IncrBy, Set};

fn args(s: &str) -> Vec<Bytes> {
    s.split(' ').map(|w| Bytes::from(w.to_string())).collect()
}

fn send(c: &mut RespConn, s: &str) -> Decoded {
    c.decode(args(s), true, false, 0)
}

fn said(c: &mut RespConn, s: &str) -> String {
    match send(c, s) {
        Decoded::Now(Now::Simple(m)) => m.to_string(),
        Decoded::Now(Now::Error(e)) => e,
        other => panic!("{s}: {other:?}"),
    }
}

fn exec(c: &mut RespConn) -> (Vec<Request>, Exec) {
    match send(c, "EXEC") {
        Decoded::Run(Request::Batch(b), Shape::Exec(e)) => (b.ops, *e),
        other => panic!("EXEC: {other:?}"),
    }
}

fn rendered(exec: &Exec, result: Result<Reply, RushError>, proto: u8) -> String {
    let mut out = BytesMut::new();
    render(&mut out, proto, exec, result);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn the_words_answer_as_redis_does() {
    let mut c = RespConn::default();
    assert_eq!(said(&mut c, "EXEC"), "ERR EXEC without MULTI");
    assert_eq!(said(&mut c, "discard"), "ERR DISCARD without MULTI");
    assert_eq!(said(&mut c, "UNWATCH"), "OK");
    assert_eq!(
        said(&mut c, "EXEC now"),
        "ERR wrong number of arguments for 'exec' command"
    );
    assert_eq!(said(&mut c, "MULTI"), "OK");
    assert_eq!(said(&mut c, "MULTI"), "ERR MULTI calls can not be nested");
    assert_eq!(
        said(&mut c, "WATCH k"),
        "ERR WATCH inside MULTI is not allowed"
    );
    assert_eq!(said(&mut c, "SET k 1"), "QUEUED");
    assert_eq!(said(&mut c, "DISCARD"), "OK");
    assert_eq!(said(&mut c, "EXEC"), "ERR EXEC without MULTI");
    // Nothing queued: an empty array, no request.
    said(&mut c, "MULTI");
    assert_eq!(send(&mut c, "EXEC"), Decoded::Now(Now::Array(vec![])));
    // Only commands that need no shard: their answers, no request.
    said(&mut c, "MULTI");
    assert_eq!(said(&mut c, "PING"), "QUEUED");
    assert_eq!(said(&mut c, "UNWATCH"), "QUEUED");
    assert_eq!(
        send(&mut c, "EXEC"),
        Decoded::Now(Now::Array(vec![Now::Simple("PONG"), Now::Simple("OK")]))
    );
    // QUIT is not queued.
    said(&mut c, "MULTI");
    assert_eq!(send(&mut c, "QUIT"), Decoded::Quit);
}

#[test]
fn queued_commands_become_one_batch() {
    let mut c = RespConn::default();
    said(&mut c, "MULTI");
    for cmd in [
        "SET {t}a 1",
        "PING",
        "MGET {t}a {t}b",
        "INCR {t}n",
        "HEXISTS {t}h f",
        "HSET {t}h f v",
    ] {
        assert_eq!(said(&mut c, cmd), "QUEUED", "{cmd}");
    }
    let (ops, e) = exec(&mut c);
    assert_eq!(e.watches, 0);
    assert_eq!(
        ops,
        vec![
            Set::new("{t}a", "1").into(),
            Get { key: "{t}a".into() }.into(),
            Get { key: "{t}b".into() }.into(),
            IncrBy {
                key: "{t}n".into(),
                delta: 1
            }
            .into(),
            // HEXISTS reads the field: its CHECK would abort the batch.
            HGet {
                key: "{t}h".into(),
                field: "f".into()
            }
            .into(),
            HSet {
                key: "{t}h".into(),
                fields: vec![("f".into(), "v".into())]
            }
            .into(),
        ]
    );
    let results = vec![
        Reply::Set(true),
        Reply::Get(Some("1".into())),
        Reply::Get(None),
        Reply::IncrBy(7),
        Reply::HGet(None),
        Reply::HSet(1),
    ];
    let ok = Ok(Reply::Batch(BatchReply { results }));
    assert_eq!(
        rendered(&e, ok.clone(), 2),
        "*6\r\n+OK\r\n+PONG\r\n*2\r\n$1\r\n1\r\n$-1\r\n:7\r\n:0\r\n:1\r\n"
    );
    assert!(rendered(&e, ok, 3).contains("*2\r\n$1\r\n1\r\n_\r\n"));
    // An operation that fails fails all: EXECABORT names its command.
    let wrong = RushError::wrong_type("batch operation 3 (INCRBY): value is not an integer")
        .with_detail(ErrorDetail::BatchIndex { index: 3 });
    assert_eq!(
        rendered(&e, Err(wrong), 2),
        "-EXECABORT Transaction discarded because command 4 (INCR) failed: \
             ERR value is not an integer or out of range\r\n"
    );
    let cross = RushError::new(ErrorCode::CrossSlot, "batch operation 2 is in slot 1");
    assert_eq!(
        rendered(&e, Err(cross), 2),
        "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    );
}

#[test]
fn an_error_while_queueing_aborts_exec() {
    for (bad, answer) in [
            ("NOPE x", "ERR unknown command 'NOPE', with args beginning with: 'x' "),
            ("GET", "ERR wrong number of arguments for 'get' command"),
            ("SET k v NX XX", "ERR syntax error"),
            (
                "DEL a b",
                "CROSSSLOT Keys in request don't hash to the same slot",
            ),
            (
                "AUTH secret",
                "ERR AUTH can't be queued in MULTI: Rush runs a transaction as one BATCH of key operations",
            ),
            (
                "MSETNX {t}a 1 {t}b 2",
                "ERR MSETNX can't be queued in MULTI: Rush runs a transaction as one BATCH of key operations",
            ),
            ("HELLO 3", "ERR HELLO can't be queued in MULTI: Rush runs a transaction as one BATCH of key operations"),
        ] {
            let mut c = RespConn::default();
            said(&mut c, "MULTI");
            said(&mut c, "SET k 1");
            let got = match c.decode(args(bad), true, true, 0) {
                Decoded::Now(Now::Error(e)) => e,
                other => panic!("{bad}: {other:?}"),
            };
            assert_eq!(got, answer, "{bad}");
            assert_eq!(said(&mut c, "SET k 2"), "QUEUED");
            assert_eq!(
                said(&mut c, "EXEC"),
                "EXECABORT Transaction discarded because of previous errors.",
                "{bad}"
            );
            // The transaction is over.
            assert_eq!(said(&mut c, "EXEC"), "ERR EXEC without MULTI");
        }
    // A value over the limit is refused as it is queued.
    let mut c = RespConn::default();
    said(&mut c, "MULTI");
    let big = vec![
        Bytes::from("SET"),
        Bytes::from("k"),
        Bytes::from(vec![b'v'; (1 << 20) + 1]),
    ];
    match c.decode(big, true, false, 0) {
        Decoded::Now(Now::Error(e)) => {
            assert!(e.starts_with("ERR ") && e.contains("limit"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert!(said(&mut c, "EXEC").starts_with("EXECABORT "));
    // At most a batch's operations.
    said(&mut c, "MULTI");
    for _ in 0..MAX_BATCH_OPS {
        assert_eq!(said(&mut c, "INCR n"), "QUEUED");
    }
    assert!(said(&mut c, "INCR n").contains("at most 1000 operations"));
    assert!(said(&mut c, "EXEC").starts_with("EXECABORT "));
}

#[test]
fn watched_values_are_checked_at_the_head_of_execs_batch() {
    let mut c = RespConn::default();
    let read = match send(&mut c, "WATCH {t}a {t}b") {
        Decoded::Run(Request::Batch(b), Shape::Watch(read)) => {
            assert_eq!(b.ops.len(), 2);
            read
        }
        other => panic!("WATCH: {other:?}"),
    };
    // EXEC before WATCH's read came back can't check what it read.
    said(&mut c, "MULTI");
    said(&mut c, "DEL {t}a");
    assert!(said(&mut c, "EXEC")
        .starts_with("EXECABORT Transaction discarded: EXEC came before WATCH's reply"));
    // That EXEC unwatched: the late read is dropped.
    let values = Ok(Reply::Batch(BatchReply {
        results: vec![Reply::Get(Some("1".into())), Reply::Get(None)],
    }));
    c.txn.watched(&read, &values);
    said(&mut c, "MULTI");
    said(&mut c, "DEL {t}a");
    assert_eq!(exec(&mut c).0.len(), 1);

    let Decoded::Run(_, Shape::Watch(read)) = send(&mut c, "WATCH {t}a {t}b") else {
        panic!("WATCH")
    };
    c.txn.watched(&read, &values);
    said(&mut c, "MULTI");
    said(&mut c, "DEL {t}a");
    let (ops, e) = exec(&mut c);
    assert_eq!(e.watches, 2);
    assert_eq!(
        ops,
        vec![
            Check {
                key: "{t}a".into(),
                field: None,
                cond: Cond::Eq("1".into())
            }
            .into(),
            Check {
                key: "{t}b".into(),
                field: None,
                cond: Cond::Missing
            }
            .into(),
            Del { key: "{t}a".into() }.into(),
        ]
    );
    // A watched key that changed: a null array.
    let changed = RushError::new(ErrorCode::ConditionFailed, "condition")
        .with_detail(ErrorDetail::BatchIndex { index: 1 });
    assert_eq!(rendered(&e, Err(changed.clone()), 2), "*-1\r\n");
    assert_eq!(rendered(&e, Err(changed), 3), "_\r\n");
    let ok = Ok(Reply::Batch(BatchReply {
        results: vec![Reply::Check(true), Reply::Check(true), Reply::Del(true)],
    }));
    assert_eq!(rendered(&e, ok, 2), "*1\r\n:1\r\n");
    // EXEC unwatched; so do DISCARD and UNWATCH.
    said(&mut c, "MULTI");
    said(&mut c, "DEL {t}a");
    assert_eq!(exec(&mut c).1.watches, 0);
    for end in ["UNWATCH", "MULTI"] {
        let Decoded::Run(_, Shape::Watch(read)) = send(&mut c, "WATCH {t}a") else {
            panic!("WATCH")
        };
        c.txn.watched(&read, &values);
        said(&mut c, end);
        if end == "MULTI" {
            said(&mut c, "DISCARD");
        }
        said(&mut c, "MULTI");
        said(&mut c, "DEL {t}a");
        assert_eq!(exec(&mut c).1.watches, 0, "{end}");
    }
}
