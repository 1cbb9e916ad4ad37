//! RESP commands → Rush requests. Each command's arguments are checked as
//! Redis checks them (arity, integers, options) and become one
//! [`Request`] with the [`Shape`] its answer is written in; commands that
//! need nothing of a shard are answered here.

mod expiry;
mod hashes;
mod strings;

use bytes::Bytes;
use rush_protocol::cmd::{
    Batch, DbSize, Del, Exists, Get, HDel, HGet, HGetAll, HIncrBy, HSet, Hello, IncrBy, Ttl,
};
use rush_protocol::frame::VERSION;
use rush_protocol::limits::MAX_BATCH_OPS;
use rush_protocol::{Opcode, Request};

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
    Hello {
        proto: Option<u8>,
        greeting: Box<Greeting>,
    },
    /// A service command's answer (`LINK.*`, `LIMIT.*`, ...).
    Service(super::services::ServiceShape),
}

/// What HELLO's map says of the connection, and the name its SETNAME
/// gives it. `id` and `cluster` are filled in by the connection
/// ([`super::RespConn::decode`]): decoding knows neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Greeting {
    /// CLIENT ID.
    pub id: u64,
    /// `mode`: `cluster` when the node serves a cluster map.
    pub cluster: bool,
    /// SETNAME's name, set once HELLO succeeds.
    pub name: Option<Bytes>,
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
        greeting: Box<Greeting>,
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

/// `name` in lower case, in `buf`; `None` when it doesn't fit or isn't
/// UTF-8.
fn lower_name<'b>(name: &[u8], buf: &'b mut [u8; 32]) -> Option<&'b str> {
    let lower = buf.get_mut(..name.len())?;
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    std::str::from_utf8(lower).ok()
}

/// The binary request a command runs as, when that request reads its key
/// first and its body begins with the command's first argument (the key,
/// length-prefixed): what a shard looks at ahead of running a pipeline
/// (`ShardService::prefetch_key`). `None` for every other command.
pub fn ahead_opcode(name: &[u8]) -> Option<Opcode> {
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    if is("get") {
        Some(Opcode::Get)
    } else if is("incr") || is("decr") || is("incrby") || is("decrby") {
        Some(Opcode::IncrBy)
    } else if is("link.resolve") {
        Some(Opcode::LinkResolve)
    } else {
        None
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
    // Lower-cased on the stack: every command's name is (a longer or
    // non-UTF-8 one is no command, and is copied only to be quoted).
    let mut lower = [0u8; 32];
    let long;
    let name: &str = match lower_name(&args[0], &mut lower) {
        Some(name) => name,
        None => {
            long = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
            &long
        }
    };
    if let Some(refused) = refusal(name, &args, authenticated) {
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
    match name {
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
        "dbsize" => {
            need!(a.is_empty());
            run(DbSize {}.into(), Shape::Integer)
        }
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
            run(
                hello(&a[a.len() - 1]),
                Shape::Hello {
                    proto: None,
                    greeting: Box::default(),
                },
            )
        }
        "hello" => decode_hello(a, authenticated, auth_required),
        "get" => {
            need!(a.len() == 1);
            run(Get { key: a[0].clone() }.into(), Shape::Bulk)
        }
        "set" => strings::set(a, now_ms),
        "setnx" => strings::setnx(a),
        "setex" | "psetex" => strings::setex(a, name),
        "getdel" => strings::getdel(a),
        "getex" => strings::getex(a, now_ms),
        "mset" => strings::mset(a, false),
        "msetnx" => strings::mset(a, true),
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
        "expire" | "pexpire" | "expireat" | "pexpireat" => expiry::expire(a, name, now_ms),
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
        _ => super::services::decode(name, a)
            .or_else(|| super::node::decode(name, a))
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
    let mut greeting = Box::<Greeting>::default();
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
            if !super::node::valid_name(&a[i + 1]) {
                return err(super::node::BAD_NAME);
            }
            greeting.name = Some(a[i + 1].clone());
            i += 2;
        } else {
            return err(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&a[i])
            ));
        }
    }
    match token {
        Some(t) if auth_required => Decoded::Run(hello(&t), Shape::Hello { proto, greeting }),
        // No tokens configured: any credentials are as good as none.
        Some(_) | None if authenticated => Decoded::Now(Now::Hello {
            proto: proto.unwrap_or(0),
            greeting,
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
mod tests;
