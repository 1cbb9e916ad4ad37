//! Unit tests of `command`.

use super::*;
use rush_protocol::cmd::{Check, Cond, Expire, HLen, Set, SetCond, SetKeepTtl};

/// The daemon's clock in these tests: 2033-05-18 03:33:20 UTC.
const NOW: u64 = 2_000_000_000_000;

fn args(s: &str) -> Vec<Bytes> {
    s.split(' ').map(|w| Bytes::from(w.to_string())).collect()
}

fn error_of(d: Decoded) -> String {
    match d {
        Decoded::Now(Now::Error(e)) => e,
        _ => panic!("not an error"),
    }
}

#[test]
fn options_map_onto_requests() {
    match decode(args("SET k v PX 1500 NX"), true, false, NOW) {
        Decoded::Run(Request::Set(s), Shape::SetOk) => {
            assert_eq!((s.ttl_ms, s.cond), (1500, SetCond::IfAbsent))
        }
        _ => panic!("SET"),
    }
    match decode(args("set k v ex 2 get"), true, false, NOW) {
        Decoded::Run(Request::Batch(b), Shape::SetGet) => assert_eq!(b.ops.len(), 2),
        _ => panic!("SET GET"),
    }
    match decode(args("DECRBY k 5"), true, false, NOW) {
        Decoded::Run(Request::IncrBy(i), Shape::Integer) => assert_eq!(i.delta, -5),
        _ => panic!("DECRBY"),
    }
    match decode(args("EXPIRE k 0"), true, false, NOW) {
        Decoded::Run(Request::Del(_), Shape::Flag) => {}
        _ => panic!("EXPIRE 0 deletes"),
    }
}

fn run(s: &str) -> (Request, Shape) {
    match decode(args(s), true, false, NOW) {
        Decoded::Run(r, shape) => (r, shape),
        other => panic!("{s}: {other:?}"),
    }
}

fn ops(r: Request) -> Vec<Request> {
    match r {
        Request::Batch(b) => b.ops,
        other => panic!("not a batch: {other:?}"),
    }
}

fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}

#[test]
fn absolute_times_become_ttls_on_the_daemons_clock() {
    // NOW is 2_000_000_000 s.
    let (r, shape) = run("SET k v EXAT 2000000010 XX");
    assert_eq!(shape, Shape::SetOk);
    assert_eq!(
        r,
        Set {
            key: b("k"),
            value: b("v"),
            ttl_ms: 10_000,
            cond: SetCond::IfPresent
        }
        .into()
    );
    assert_eq!(
        run("SET k v PXAT 2000000000250").0,
        Set {
            ttl_ms: 250,
            ..Set::new("k", "v")
        }
        .into()
    );
    // Already past: the key is gone (Always, XX) or untouched (NX).
    assert_eq!(
        run("SET k v PXAT 5"),
        (Del { key: b("k") }.into(), Shape::Ok)
    );
    assert_eq!(
        run("SET k v EXAT 5 XX"),
        (Del { key: b("k") }.into(), Shape::SetOk)
    );
    assert_eq!(
        run("SET k v EXAT 5 NX"),
        (Exists { key: b("k") }.into(), Shape::SetOk)
    );
    let (r, shape) = run("SET k v EXAT 5 GET");
    assert_eq!(shape, Shape::SetGet);
    assert_eq!(
        ops(r),
        vec![Get { key: b("k") }.into(), Del { key: b("k") }.into()]
    );
    assert_eq!(
        run("EXPIREAT k 2000000100"),
        (
            Expire {
                key: b("k"),
                ttl_ms: 100_000
            }
            .into(),
            Shape::Flag
        )
    );
    assert_eq!(
        run("PEXPIREAT k 2000000000001").0,
        Expire {
            key: b("k"),
            ttl_ms: 1
        }
        .into()
    );
    assert_eq!(
        run("PEXPIREAT k -1"),
        (Del { key: b("k") }.into(), Shape::Flag)
    );
    assert_eq!(run("EXPIREAT k 2000000000").0, Del { key: b("k") }.into());
    let expire = |ttl_ms| {
        Expire {
            key: b("k"),
            ttl_ms,
        }
        .into()
    };
    assert_eq!(ops(run("GETEX k EXAT 2000000001").0)[1], expire(1000));
    assert_eq!(ops(run("getex k pxat 2000000000002").0)[1], expire(2));
    assert_eq!(ops(run("GETEX k EXAT 1").0)[1], Del { key: b("k") }.into());
    assert_eq!(ops(run("GETEX k PERSIST").0)[1], expire(0));
    assert_eq!(ops(run("GETEX k EX 3").0)[1], expire(3000));
    assert_eq!(ops(run("GETEX k PX 3").0)[1], expire(3));
    assert_eq!(run("GETEX k"), (Get { key: b("k") }.into(), Shape::Bulk));
}

#[test]
fn compositions() {
    assert_eq!(
        run("SETNX k v"),
        (
            Set {
                cond: SetCond::IfAbsent,
                ..Set::new("k", "v")
            }
            .into(),
            Shape::Flag
        )
    );
    assert_eq!(
        run("SETEX k 2 v").0,
        Set {
            ttl_ms: 2000,
            ..Set::new("k", "v")
        }
        .into()
    );
    assert_eq!(
        run("PSETEX k 2 v").0,
        Set {
            ttl_ms: 2,
            ..Set::new("k", "v")
        }
        .into()
    );
    assert_eq!(
        run("SET k v XX KEEPTTL"),
        (
            SetKeepTtl {
                key: b("k"),
                value: b("v"),
                cond: SetCond::IfPresent
            }
            .into(),
            Shape::SetOk
        )
    );
    assert_eq!(run("SET k v KEEPTTL GET").1, Shape::SetGet);
    let (r, shape) = run("GETDEL k");
    assert_eq!(shape, Shape::SetGet);
    assert_eq!(
        ops(r),
        vec![Get { key: b("k") }.into(), Del { key: b("k") }.into()]
    );
    let (r, shape) = run("MSET {t}a 1 {t}b 2");
    assert_eq!(shape, Shape::Ok);
    assert_eq!(
        ops(r),
        vec![Set::new("{t}a", "1").into(), Set::new("{t}b", "2").into()]
    );
    let (r, shape) = run("MSETNX {t}a 1 {t}b 2");
    assert_eq!(shape, Shape::IfAllHold { checks: 2 });
    let missing = |k| Check {
        key: b(k),
        field: None,
        cond: Cond::Missing,
    };
    assert_eq!(
        ops(r),
        vec![
            missing("{t}a").into(),
            missing("{t}b").into(),
            Set::new("{t}a", "1").into(),
            Set::new("{t}b", "2").into()
        ]
    );
    assert_eq!(run("UNLINK k"), (Del { key: b("k") }.into(), Shape::Flag));
    assert_eq!(run("UNLINK {t}a {t}b").1, Shape::CountTrue);
    let (r, shape) = run("PERSIST k");
    assert_eq!(shape, Shape::Persist);
    assert_eq!(
        ops(r),
        vec![
            Ttl { key: b("k") }.into(),
            Expire {
                key: b("k"),
                ttl_ms: 0
            }
            .into()
        ]
    );
    let (r, shape) = run("HMGET h f g");
    assert_eq!(shape, Shape::Values);
    let hget = |f| HGet {
        key: b("h"),
        field: b(f),
    };
    assert_eq!(ops(r), vec![hget("f").into(), hget("g").into()]);
    assert_eq!(
        run("HEXISTS h f"),
        (
            Check {
                key: b("h"),
                field: Some(b("f")),
                cond: Cond::Exists
            }
            .into(),
            Shape::Flag
        )
    );
    assert_eq!(run("HLEN h"), (HLen { key: b("h") }.into(), Shape::Integer));
    let (r, shape) = run("HSETNX h f v");
    assert_eq!(shape, Shape::IfAllHold { checks: 1 });
    assert_eq!(ops(r).len(), 2);
}

#[test]
fn new_commands_refuse_as_redis_does() {
    let error = |s: &str| error_of(decode(args(s), true, false, NOW));
    for (cmd, want) in [
        ("SET k v EX 1 PX 1", "ERR syntax error"),
        ("SET k v EXAT 1 KEEPTTL", "ERR syntax error"),
        ("SET k v KEEPTTL EXAT 1", "ERR syntax error"),
        ("SET k v EXAT", "ERR syntax error"),
        // Options first, then the number.
        ("SET k v EXAT soon NX XX", "ERR syntax error"),
        (
            "SET k v EXAT soon",
            "ERR value is not an integer or out of range",
        ),
        ("SET k v PXAT 0", "ERR invalid expire time in 'set' command"),
        (
            "SET k v EXAT -5",
            "ERR invalid expire time in 'set' command",
        ),
        ("SETEX k 0 v", "ERR invalid expire time in 'setex' command"),
        (
            "PSETEX k -1 v",
            "ERR invalid expire time in 'psetex' command",
        ),
        ("SETEX k x v", "ERR value is not an integer or out of range"),
        (
            "SETEX k 9223372036854775807 v",
            "ERR invalid expire time in 'setex' command",
        ),
        ("GETEX k EX 0", "ERR invalid expire time in 'getex' command"),
        ("GETEX k EX", "ERR syntax error"),
        ("GETEX k PERSIST EX 1", "ERR syntax error"),
        ("GETEX k EX 1 PX 1", "ERR syntax error"),
        ("GETEX k NX 1", "ERR syntax error"),
        (
            "GETEX k PX x",
            "ERR value is not an integer or out of range",
        ),
        ("MSET a", "ERR wrong number of arguments for 'mset' command"),
        (
            "MSET a 1 b",
            "ERR wrong number of arguments for 'mset' command",
        ),
        (
            "MSETNX a 1 b",
            "ERR wrong number of arguments for 'msetnx' command",
        ),
        (
            "EXPIREAT k x",
            "ERR value is not an integer or out of range",
        ),
        (
            "EXPIREAT k 1 NX XX",
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ),
        (
            "EXPIRE k 1 GT LT",
            "ERR GT and LT options at the same time are not compatible",
        ),
        ("PEXPIRE k x SOON", "ERR Unsupported option SOON"),
        (
            "EXPIRE k",
            "ERR wrong number of arguments for 'expire' command",
        ),
        (
            "EXPIREAT k 9223372036854775807",
            "ERR invalid expire time in 'expireat' command",
        ),
        (
            "PERSIST",
            "ERR wrong number of arguments for 'persist' command",
        ),
        (
            "HMGET h",
            "ERR wrong number of arguments for 'hmget' command",
        ),
        (
            "HEXISTS h",
            "ERR wrong number of arguments for 'hexists' command",
        ),
        (
            "HLEN h f",
            "ERR wrong number of arguments for 'hlen' command",
        ),
        (
            "HSETNX h f",
            "ERR wrong number of arguments for 'hsetnx' command",
        ),
        (
            "SETNX k",
            "ERR wrong number of arguments for 'setnx' command",
        ),
        (
            "GETDEL",
            "ERR wrong number of arguments for 'getdel' command",
        ),
        (
            "UNLINK",
            "ERR wrong number of arguments for 'unlink' command",
        ),
    ] {
        assert_eq!(error(cmd), want, "{cmd}");
    }
    let many = format!("MSETNX{}", " k v".repeat(MAX_BATCH_OPS / 2 + 1));
    assert!(
        error(&many).contains("at most 500 keys"),
        "{}",
        error(&many)
    );
    let many = format!("HMGET h{}", " f".repeat(MAX_BATCH_OPS + 1));
    assert!(error(&many).contains("at most 1000 fields"));
}

#[test]
fn errors_in_redis_words() {
    assert_eq!(
        error_of(decode(args("GET"), true, false, NOW)),
        "ERR wrong number of arguments for 'get' command"
    );
    assert_eq!(
        error_of(decode(args("FLUSHALL now"), true, false, NOW)),
        "ERR unknown command 'FLUSHALL', with args beginning with: 'now' "
    );
    assert_eq!(
        error_of(decode(args("SET k v NX XX"), true, false, NOW)),
        "ERR syntax error"
    );
    assert_eq!(
        error_of(decode(args("SET k v EX 0"), true, false, NOW)),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        error_of(decode(args("INCRBY k 1.5"), true, false, NOW)),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error_of(decode(
            args("DECRBY k -9223372036854775808"),
            true,
            false,
            NOW
        )),
        "ERR decrement would overflow"
    );
    assert!(error_of(decode(args("GET k"), false, true, NOW)).starts_with("NOAUTH "));
    assert!(error_of(decode(args("HELLO 4"), true, false, NOW)).starts_with("NOPROTO "));
}

#[test]
fn integers() {
    assert_eq!(parse_i64(b"-12"), Some(-12));
    for bad in [&b""[..], b"+1", b"01", b"-0", b"1 ", b"x"] {
        assert_eq!(parse_i64(bad), None);
    }
}

/// What a shard looks at ahead of a command (`ahead_opcode`) is what the
/// command runs as: the same request, whose body begins with the command's
/// first argument, length-prefixed. Every other command is not looked at.
#[test]
fn commands_looked_at_ahead_run_as_their_opcode_and_key() {
    for line in [
        "GET k:1",
        "get k:1",
        "INCR k:1",
        "decr k:1",
        "IncrBy k:1 5",
        "DECRBY k:1 5",
        "LINK.RESOLVE abc123",
    ] {
        let a = args(line);
        let Decoded::Run(request, _) = decode(a.clone(), true, false, NOW) else {
            panic!("{line} does not run");
        };
        assert_eq!(ahead_opcode(&a[0]), Some(request.opcode()), "{line}");
        let mut body = bytes::BytesMut::new();
        request.encode_body(&mut body);
        let mut begins = (a[1].len() as u32).to_be_bytes().to_vec();
        begins.extend_from_slice(&a[1]);
        assert!(body.starts_with(&begins), "{line}");
    }
    for line in ["SET k v", "HGET k f", "EXISTS k", "GETDEL k", "PING"] {
        assert_eq!(ahead_opcode(&args(line)[0]), None, "{line}");
    }
}
