//! RESP commands → Rush requests. Each command's arguments are checked as
//! Redis checks them (arity, integers, options) and become one
//! [`Request`] with the [`Shape`] its answer is written in; commands that
//! need nothing of a shard are answered here.

use bytes::Bytes;
use rush_protocol::cmd::{
    Batch, Del, Exists, Expire, Get, HDel, HGet, HGetAll, HIncrBy, HSet, Hello, IncrBy, Set,
    SetCond, Ttl,
};
use rush_protocol::frame::VERSION;
use rush_protocol::limits::MAX_BATCH_OPS;
use rush_protocol::Request;

/// How a request's answer is written in RESP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// Option<Bytes> → bulk or null.
    Bulk,
    /// SET's bool → `+OK`, or null when NX/XX kept it from writing.
    SetOk,
    /// BATCH [GET, SET] → the GET's value.
    SetGet,
    /// bool → `:1` / `:0`.
    Flag,
    /// u64 / i64 → integer.
    Integer,
    /// BATCH of bools → how many were true.
    CountTrue,
    /// BATCH of GETs → array of bulk or null.
    Values,
    /// TTL → seconds (or ms): -2 missing, -1 no expiry.
    Ttl { ms: bool },
    /// HGETALL → map (RESP3) or flat array.
    Map,
    /// HELLO's answer: `+OK` (AUTH), or the HELLO map in protocol `proto`.
    Hello { proto: Option<u8> },
}

/// What to do with one command.
pub enum Decoded {
    /// Run this request; write its answer so.
    Run(Request, Shape),
    /// Answered at once: a simple string, bulk, integer or error...
    Now(Now),
    /// `+OK`, then close once everything before it is answered.
    Quit,
}

/// Answers that need no shard.
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
            Now::Value(v) => v.estimate(),
            _ => 16,
        }
    }
}

/// Decode one command. `authenticated`: the connection may run commands
/// other than AUTH, HELLO and QUIT. `auth_required`: the node has tokens.
pub fn decode(args: Vec<Bytes>, authenticated: bool, auth_required: bool) -> Decoded {
    let mut name = args[0].to_vec();
    name.make_ascii_lowercase();
    let name = String::from_utf8_lossy(&name).into_owned();
    // Redis's order: an unknown command, then a wrong count of arguments,
    // then authentication.
    let Some(spec) = super::table::find(&name) else {
        return err(unknown_command(&args));
    };
    if !spec.arity_admits(args.len()) {
        return err(format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    if !authenticated && !matches!(name.as_str(), "auth" | "hello" | "quit") {
        return err("NOAUTH Authentication required.");
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
        "set" => decode_set(a, &name),
        "del" | "exists" => {
            need!(!a.is_empty());
            if a.len() == 1 {
                let key = a[0].clone();
                let r: Request = if name == "del" {
                    Del { key }.into()
                } else {
                    Exists { key }.into()
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
                    if name == "del" {
                        Del { key }.into()
                    } else {
                        Exists { key }.into()
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
        _ => super::node::decode(&name, a).unwrap_or_else(|| err(unknown_command(&args))),
    }
}

fn err(message: impl Into<String>) -> Decoded {
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

/// `SET key value [NX|XX] [GET] [EX s|PX ms|KEEPTTL]`.
fn decode_set(a: &[Bytes], name: &str) -> Decoded {
    if a.len() < 2 {
        return err(format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    let mut cond = SetCond::Always;
    let mut get = false;
    let mut ttl_ms: Option<i64> = None;
    let mut i = 2;
    while i < a.len() {
        let opt = a[i].to_ascii_uppercase();
        let next = a.get(i + 1);
        match (opt.as_slice(), next) {
            (b"NX", _) if cond != SetCond::IfPresent => cond = SetCond::IfAbsent,
            (b"XX", _) if cond != SetCond::IfAbsent => cond = SetCond::IfPresent,
            (b"GET", _) => get = true,
            (b"EX" | b"PX", Some(v)) if ttl_ms.is_none() => {
                let Some(n) = parse_i64(v) else {
                    return err("ERR value is not an integer or out of range");
                };
                let ms = if opt == b"EX" {
                    n.checked_mul(1000)
                } else {
                    Some(n)
                };
                match ms {
                    Some(ms) if ms > 0 => ttl_ms = Some(ms),
                    _ => return err("ERR invalid expire time in 'set' command"),
                }
                i += 1;
            }
            (b"KEEPTTL" | b"EXAT" | b"PXAT", _) => {
                return err(format!(
                    "ERR SET {} is not supported yet by Rush",
                    String::from_utf8_lossy(&opt)
                ))
            }
            _ => return err("ERR syntax error"),
        }
        i += 1;
    }
    let set = Set {
        key: a[0].clone(),
        value: a[1].clone(),
        ttl_ms: ttl_ms.unwrap_or(0) as u64,
        cond,
    };
    if get {
        // The old value and the write in one atomic batch.
        let ops = vec![Get { key: a[0].clone() }.into(), set.into()];
        Decoded::Run(Batch { ops }.into(), Shape::SetGet)
    } else {
        Decoded::Run(set.into(), Shape::SetOk)
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
        match decode(args("SET k v PX 1500 NX"), true, false) {
            Decoded::Run(Request::Set(s), Shape::SetOk) => {
                assert_eq!((s.ttl_ms, s.cond), (1500, SetCond::IfAbsent))
            }
            _ => panic!("SET"),
        }
        match decode(args("set k v ex 2 get"), true, false) {
            Decoded::Run(Request::Batch(b), Shape::SetGet) => assert_eq!(b.ops.len(), 2),
            _ => panic!("SET GET"),
        }
        match decode(args("DECRBY k 5"), true, false) {
            Decoded::Run(Request::IncrBy(i), Shape::Integer) => assert_eq!(i.delta, -5),
            _ => panic!("DECRBY"),
        }
        match decode(args("EXPIRE k 0"), true, false) {
            Decoded::Run(Request::Del(_), Shape::Flag) => {}
            _ => panic!("EXPIRE 0 deletes"),
        }
    }

    #[test]
    fn errors_in_redis_words() {
        assert_eq!(
            error_of(decode(args("GET"), true, false)),
            "ERR wrong number of arguments for 'get' command"
        );
        assert_eq!(
            error_of(decode(args("FLUSHALL now"), true, false)),
            "ERR unknown command 'FLUSHALL', with args beginning with: 'now' "
        );
        assert_eq!(
            error_of(decode(args("SET k v NX XX"), true, false)),
            "ERR syntax error"
        );
        assert_eq!(
            error_of(decode(args("SET k v EX 0"), true, false)),
            "ERR invalid expire time in 'set' command"
        );
        assert!(error_of(decode(args("SET k v KEEPTTL"), true, false)).contains("not supported"));
        assert_eq!(
            error_of(decode(args("INCRBY k 1.5"), true, false)),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            error_of(decode(args("DECRBY k -9223372036854775808"), true, false)),
            "ERR decrement would overflow"
        );
        assert!(error_of(decode(args("GET k"), false, true)).starts_with("NOAUTH "));
        assert!(error_of(decode(args("HELLO 4"), true, false)).starts_with("NOPROTO "));
    }

    #[test]
    fn integers() {
        assert_eq!(parse_i64(b"-12"), Some(-12));
        for bad in [&b""[..], b"+1", b"01", b"-0", b"1 ", b"x"] {
            assert_eq!(parse_i64(bad), None);
        }
    }
}
