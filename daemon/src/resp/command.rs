//! RESP commands → Rush requests. Each command's arguments are checked as
//! Redis checks them (arity, integers, options) and become one
//! [`Request`] with the [`Shape`] its answer is written in; commands that
//! need nothing of a shard are answered here.

mod expiry;
mod hashes;
mod strings;

use bytes::Bytes;
use rush_protocol::cmd::{
    Batch, Del, Exists, Expire, Get, HDel, HGet, HGetAll, HIncrBy, HSet, Hello, IncrBy, Ttl,
};
use rush_protocol::frame::VERSION;
use rush_protocol::limits::MAX_BATCH_OPS;
use rush_protocol::Request;

/// How a request's answer is written in RESP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// Option<Bytes> → bulk or null.
    Bulk,
    /// Any success → `+OK` (MSET, SETEX, SET with a time already past).
    Ok,
    /// SET's bool → `+OK`, or null when NX/XX kept it from writing. A SET
    /// whose EXAT/PXAT is already past writes nothing that lives: with XX
    /// it is a DEL (its bool: the key existed), with NX an EXISTS (its
    /// bool inverted: the key was missing).
    SetOk,
    /// BATCH [GET, writes…] → the GET's value (SET … GET, GETDEL, GETEX).
    SetGet,
    /// bool → `:1` / `:0`.
    Flag,
    /// Option<Bytes> → `:1` if there is one, else `:0` (HEXISTS in MULTI).
    Present,
    /// u64 / i64 → integer.
    Integer,
    /// BATCH of bools → how many were true.
    CountTrue,
    /// BATCH of GETs or HGETs → array of bulk or null.
    Values,
    /// HGETALL → how many fields (HLEN).
    Len,
    /// BATCH [TTL, EXPIRE 0] → `:1` if the key had a TTL (PERSIST).
    Persist,
    /// BATCH [CHECK × `checks`, writes…] → `:1`, or `:0` when one of the
    /// CHECKs failed and nothing was written (MSETNX, HSETNX). Relies on a
    /// failed CHECK aborting its batch, so it can't be queued in MULTI.
    IfAllHold { checks: usize },
    /// WATCH's read of its keys → `+OK`; the connection keeps the values.
    Watch(super::transaction::WatchRead),
    /// EXEC's batch → the array of each queued command's reply.
    Exec(Box<super::transaction::Exec>),
    /// TTL → seconds (or ms): -2 missing, -1 no expiry.
    Ttl { ms: bool },
    /// HGETALL → map (RESP3) or flat array.
    Map,
    /// HELLO's answer: `+OK` (AUTH), or the HELLO map in protocol `proto`.
    Hello { proto: Option<u8> },
    /// A service command's answer (`LINK.*`, `LIMIT.*`, ...).
    Service(super::services::ServiceShape),
}

/// What to do with one command.
#[derive(Debug, PartialEq)]
pub enum Decoded {
    /// Run this request; write its answer so.
    Run(Request, Shape),
    /// Answered at once: a simple string, bulk, integer or error...
    Now(Now),
    /// `+OK`, then close once everything before it is answered.
    Quit,
}

/// Answers that need no shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Now {
    Simple(&'static str),
    Bulk(Bytes),
    Integer(i64),
    Error(String),
    /// HELLO without AUTH: the map, after switching to `proto`.
    Hello {
        proto: u8,
    },
    /// An empty array (COMMAND, COMMAND DOCS) — a map in RESP3 for DOCS.
    Empty {
        map: bool,
    },
    /// An array of answers (EXEC of commands that need no shard).
    Array(Vec<Now>),
    /// A reply built here (COMMAND, INFO, CLUSTER...): `super::value`.
    Value(super::value::Value),
    /// Needs the node or the connection: answered by `super::node::run`.
    Node(super::node::Ask),
}

impl Now {
    /// Bytes it holds while it waits for its turn.
    pub fn estimate(&self) -> usize {
        match self {
            Now::Bulk(b) => b.len() + 16,
            Now::Error(e) => e.len() + 3,
            Now::Array(a) => a.iter().map(Now::estimate).sum::<usize>() + 16,
            Now::Value(v) => v.estimate(),
            _ => 16,
        }
    }
}

/// Decode one command. `authenticated`: the connection may run commands
/// other than AUTH, HELLO and QUIT. `auth_required`: the node has tokens.
/// `now_ms`: the daemon's clock, which absolute times (EXAT, EXPIREAT…)
/// are made relative to.
///
/// The transaction commands (MULTI, EXEC, DISCARD, WATCH, UNWATCH) keep
/// the connection's state: [`super::RespConn::decode`] answers them and
/// queues commands in MULTI; here they are unknown.
pub fn decode(args: Vec<Bytes>, authenticated: bool, auth_required: bool, now_ms: u64) -> Decoded {
    let mut name = args[0].to_vec();
    name.make_ascii_lowercase();
    let name = String::from_utf8_lossy(&name).into_owned();
    if let Some(refused) = refusal(&name, &args, authenticated) {
        return refused;
    }
    let a = &args[1..];
    let arity = |ok: bool| -> Option<Decoded> {
        (!ok).then(|| {
            err(format!(
                "ERR wrong number of arguments for '{name}' command"
            ))
        })
    };
    macro_rules! need {
        ($ok:expr) => {
            if let Some(e) = arity($ok) {
                return e;
            }
        };
    }
    macro_rules! int {
        ($b:expr) => {
            match parse_i64($b) {
                Some(v) => v,
                None => return err("ERR value is not an integer or out of range"),
            }
        };
    }
    let run = |r: Request, s: Shape| Decoded::Run(r, s);
    match name.as_str() {
        "ping" => {
            need!(a.len() <= 1);
            match a.first() {
                None => Decoded::Now(Now::Simple("PONG")),
                Some(m) => Decoded::Now(Now::Bulk(m.clone())),
            }
        }
        "echo" => {
            need!(a.len() == 1);
            Decoded::Now(Now::Bulk(a[0].clone()))
        }
        "quit" => Decoded::Quit,
        "select" => {
            need!(a.len() == 1);
            match parse_i64(&a[0]) {
                Some(0) => Decoded::Now(Now::Simple("OK")),
                Some(_) => err("ERR DB index is out of range"),
                None => err("ERR value is not an integer or out of range"),
            }
        }
        "auth" => {
            need!(a.len() == 1 || a.len() == 2);
            if !auth_required {
                return err(
                    "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
                );
            }
            // The user name (Redis ACLs) is not used: tokens have no users.
            run(hello(&a[a.len() - 1]), Shape::Hello { proto: None })
        }
        "hello" => decode_hello(a, authenticated, auth_required),
        "get" => {
            need!(a.len() == 1);
            run(Get { key: a[0].clone() }.into(), Shape::Bulk)
        }
        "set" => strings::set(a, now_ms),
        "setnx" => strings::setnx(a),
        "setex" | "psetex" => strings::setex(a, &name),
        "getdel" => strings::getdel(a),
        "getex" => strings::getex(a, now_ms),
        "mset" => strings::mset(a, false),
        "msetnx" => strings::mset(a, true),
        "expireat" | "pexpireat" => expiry::expire_at(a, &name, now_ms),
        "persist" => expiry::persist(a),
        "hmget" => hashes::hmget(a),
        "hexists" => hashes::hexists(a),
        "hlen" => hashes::hlen(a),
        "hsetnx" => hashes::hsetnx(a),
        // UNLINK frees memory lazily in Redis; here it is DEL.
        "del" | "unlink" | "exists" => {
            need!(!a.is_empty());
            if a.len() == 1 {
                let key = a[0].clone();
                let r: Request = if name == "exists" {
                    Exists { key }.into()
                } else {
                    Del { key }.into()
                };
                return run(r, Shape::Flag);
            }
            if a.len() > MAX_BATCH_OPS {
                return err(format!("ERR {name} takes at most {MAX_BATCH_OPS} keys"));
            }
            let ops = a
                .iter()
                .map(|k| {
                    let key = k.clone();
                    if name == "exists" {
                        Exists { key }.into()
                    } else {
                        Del { key }.into()
                    }
                })
                .collect();
            run(Batch { ops }.into(), Shape::CountTrue)
        }
        "mget" => {
            need!(!a.is_empty());
            if a.len() > MAX_BATCH_OPS {
                return err(format!("ERR mget takes at most {MAX_BATCH_OPS} keys"));
            }
            let ops = a.iter().map(|k| Get { key: k.clone() }.into()).collect();
            run(Batch { ops }.into(), Shape::Values)
        }
        "incr" | "decr" => {
            need!(a.len() == 1);
            let delta = if name == "incr" { 1 } else { -1 };
            run(incr(&a[0], delta), Shape::Integer)
        }
        "incrby" | "decrby" => {
            need!(a.len() == 2);
            let by = int!(&a[1]);
            let delta = if name == "incrby" {
                by
            } else {
                match by.checked_neg() {
                    Some(d) => d,
                    None => return err("ERR decrement would overflow"),
                }
            };
            run(incr(&a[0], delta), Shape::Integer)
        }
        "expire" | "pexpire" => {
            need!(a.len() == 2);
            let n = int!(&a[1]);
            let ms = if name == "expire" {
                n.checked_mul(1000)
            } else {
                Some(n)
            };
            let Some(ms) = ms else {
                return err(format!("ERR invalid expire time in '{name}' command"));
            };
            let key = a[0].clone();
            if ms <= 0 {
                // Redis deletes the key: 1 if it existed.
                run(Del { key }.into(), Shape::Flag)
            } else {
                run(
                    Expire {
                        key,
                        ttl_ms: ms as u64,
                    }
                    .into(),
                    Shape::Flag,
                )
            }
        }
        "ttl" | "pttl" => {
            need!(a.len() == 1);
            run(
                Ttl { key: a[0].clone() }.into(),
                Shape::Ttl { ms: name == "pttl" },
            )
        }
        "hset" => {
            need!(a.len() >= 3 && a.len() % 2 == 1);
            let fields = a[1..]
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            run(
                HSet {
                    key: a[0].clone(),
                    fields,
                }
                .into(),
                Shape::Integer,
            )
        }
        "hget" => {
            need!(a.len() == 2);
            run(
                HGet {
                    key: a[0].clone(),
                    field: a[1].clone(),
                }
                .into(),
                Shape::Bulk,
            )
        }
        "hdel" => {
            need!(a.len() >= 2);
            run(
                HDel {
                    key: a[0].clone(),
                    fields: a[1..].to_vec(),
                }
                .into(),
                Shape::Integer,
            )
        }
        "hgetall" => {
            need!(a.len() == 1);
            run(HGetAll { key: a[0].clone() }.into(), Shape::Map)
        }
        "hincrby" => {
            need!(a.len() == 3);
            let delta = int!(&a[2]);
            run(
                HIncrBy {
                    key: a[0].clone(),
                    field: a[1].clone(),
                    delta,
                }
                .into(),
                Shape::Integer,
            )
        }
        // The node's own commands (COMMAND, INFO, CLUSTER, CLIENT...).
        _ => super::services::decode(&name, a)
            .or_else(|| super::node::decode(&name, a))
            .unwrap_or_else(|| err(unknown_command(&args))),
    }
}

/// Redis's order of refusals before a command runs: an unknown command,
/// then a wrong count of arguments, then authentication. `name` is lower
/// case.
pub fn refusal(name: &str, args: &[Bytes], authenticated: bool) -> Option<Decoded> {
    let Some(spec) = super::table::find(name) else {
        return Some(err(unknown_command(args)));
    };
    if !spec.arity_admits(args.len()) {
        return Some(arity_error(name));
    }
    if !authenticated && !matches!(name, "auth" | "hello" | "quit") {
        return Some(err("NOAUTH Authentication required."));
    }
    None
}

fn arity_error(name: &str) -> Decoded {
    err(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

pub(super) fn err(message: impl Into<String>) -> Decoded {
    Decoded::Now(Now::Error(message.into()))
}

fn hello(token: &Bytes) -> Request {
    Hello {
        version: VERSION,
        token: Some(String::from_utf8_lossy(token).into_owned()),
        client: "resp".into(),
    }
    .into()
}

fn incr(key: &Bytes, delta: i64) -> Request {
    IncrBy {
        key: key.clone(),
        delta,
    }
    .into()
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
fn decode_hello(a: &[Bytes], authenticated: bool, auth_required: bool) -> Decoded {
    let mut proto = None;
    let mut token = None;
    if let Some(v) = a.first() {
        match parse_i64(v) {
            Some(v @ (2 | 3)) => proto = Some(v as u8),
            Some(_) => return err("NOPROTO unsupported protocol version"),
            None => return err("ERR Protocol version is not an integer or out of range"),
        }
    }
    let mut i = 1;
    while i < a.len() {
        let opt = a[i].to_ascii_lowercase();
        if opt == b"auth" && i + 2 < a.len() {
            token = Some(a[i + 2].clone());
            i += 3;
        } else if opt == b"setname" && i + 1 < a.len() {
            // Client names are not kept yet (CLIENT is a later slice).
            i += 2;
        } else {
            return err(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&a[i])
            ));
        }
    }
    match token {
        Some(t) if auth_required => Decoded::Run(hello(&t), Shape::Hello { proto }),
        // No tokens configured: any credentials are as good as none.
        Some(_) | None if authenticated => Decoded::Now(Now::Hello {
            proto: proto.unwrap_or(0),
        }),
        _ => err(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ),
    }
}

/// Redis's wording: `ERR unknown command 'X', with args beginning with: 'a' 'b' `.
fn unknown_command(args: &[Bytes]) -> String {
    let clip = |b: &Bytes| {
        let s = String::from_utf8_lossy(&b[..b.len().min(128)]).into_owned();
        s.replace(['\r', '\n'], " ")
    };
    let mut m = format!(
        "ERR unknown command '{}', with args beginning with: ",
        clip(&args[0])
    );
    for a in &args[1..] {
        if m.len() > 512 {
            break;
        }
        m.push_str(&format!("'{}' ", clip(a)));
    }
    m
}

/// A decimal integer as Redis reads one (no sign but `-`, no spaces, no
/// leading zeros, in range).
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty()
        || s.starts_with('+')
        || (s.len() > 1 && s.starts_with('0'))
        || s.starts_with("-0")
    {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rush_protocol::cmd::{Check, Cond, Set, SetCond, SetKeepTtl};

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
        assert_eq!(run("HLEN h"), (HGetAll { key: b("h") }.into(), Shape::Len));
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
                "EXPIREAT k 1 NX",
                "ERR wrong number of arguments for 'expireat' command",
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
}
