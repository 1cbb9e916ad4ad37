//! The node's own RESP commands: INFO, COMMAND, CLIENT, CONFIG GET, TIME,
//! READONLY / READWRITE (and CLUSTER, in [`super::cluster`]). None of them
//! runs a request: [`decode`] answers what needs nothing ([`Now::Value`]),
//! and what needs the node or the connection becomes an [`Ask`], which
//! [`run`] answers where the command was read, in command order (so a
//! CLIENT GETNAME sees the SETNAME sent before it).
//!
//! `protocol/RESP.md` ("Node") documents the replies.

use super::command::{Decoded, Now};
use super::table::{self, Spec};
use super::value::Value;
use super::RespConn;
use crate::server::NodeShared;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The Redis version whose commands and replies the listener follows, as
/// INFO and HELLO report it to clients that check (`rush_version` is
/// Rush's own).
pub const REDIS_VERSION: &str = "7.2.0";

/// What a node command needs answered from the node or the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// The sections asked for (lower case); empty: the default ones.
    Info(Vec<String>),
    Time,
    Cluster(super::cluster::Ask),
    Client(ClientAsk),
    /// CONFIG GET's patterns.
    ConfigGet(Vec<Bytes>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientAsk {
    Id,
    SetName(Bytes),
    GetName,
    /// CLIENT SETINFO LIB-NAME (true) or LIB-VER (false).
    SetInfo(bool, Bytes),
    Info,
    /// `None`: every client; else these ids.
    List(Option<Vec<u64>>),
}

/// Decode a node command (by its lower-case name), or `None` when `name`
/// is none of these.
pub fn decode(name: &str, a: &[Bytes]) -> Option<Decoded> {
    let ask = |a: Ask| Some(Decoded::Now(Now::Node(a)));
    let given = a.first().map(|s| String::from_utf8_lossy(s).into_owned());
    let sub = given.as_deref().map(str::to_ascii_lowercase);
    // An unknown subcommand is named as it was sent.
    let unknown = |cmd: &str| unknown_subcommand(given.as_deref().unwrap_or(""), cmd);
    match name {
        "readonly" | "readwrite" => Some(Decoded::Now(Now::Simple("OK"))),
        "time" => ask(Ask::Time),
        "info" => ask(Ask::Info(
            a.iter()
                .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
                .collect(),
        )),
        "command" => Some(command(sub.as_deref(), a).unwrap_or_else(|| unknown("COMMAND"))),
        "cluster" => Some(
            super::cluster::decode(sub.as_deref().unwrap_or(""), a.get(1..).unwrap_or(&[]))
                .unwrap_or_else(|| unknown("CLUSTER")),
        ),
        "client" => Some(
            client(sub.as_deref().unwrap_or(""), a.get(1..).unwrap_or(&[])).unwrap_or_else(|| unknown("CLIENT")),
        ),
        "config" => Some(match sub.as_deref() {
            Some("get") if a.len() >= 2 => Decoded::Now(Now::Node(Ask::ConfigGet(a[1..].to_vec()))),
            Some("get") => arity_error("config|get"),
            Some(s @ ("set" | "resetstat" | "rewrite")) => error(format!(
                "ERR CONFIG {} is not supported by Rush: settings come from rushd.toml, read at start",
                s.to_ascii_uppercase()
            )),
            Some(_) => unknown("CONFIG"),
            None => arity_error("config"),
        }),
        _ => None,
    }
}

fn error(e: impl Into<String>) -> Decoded {
    Decoded::Now(Now::Error(e.into()))
}

fn arity_error(name: &str) -> Decoded {
    error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

fn unknown_subcommand(sub: &str, cmd: &str) -> Decoded {
    let sub: String = sub.chars().take(128).collect();
    error(format!(
        "ERR unknown subcommand '{}'. Try {cmd} HELP.",
        sub.replace(['\r', '\n'], " ")
    ))
}

/// `COMMAND [COUNT | LIST | INFO name... | DOCS name... | GETKEYS cmd arg...]`;
/// `None`: an unknown subcommand.
fn command(sub: Option<&str>, a: &[Bytes]) -> Option<Decoded> {
    let now = |v: Value| Decoded::Now(Now::Value(v));
    let names = || {
        a[1..]
            .iter()
            .map(|n| String::from_utf8_lossy(n).to_ascii_lowercase())
    };
    Some(match sub {
        None => now(Value::Array(
            table::SPECS.iter().map(command_info).collect(),
        )),
        Some("count") => Decoded::Now(Now::Integer(table::SPECS.len() as i64)),
        Some("list") => now(Value::Array(
            table::SPECS.iter().map(|s| Value::bulk(s.name)).collect(),
        )),
        Some("info") if a.len() == 1 => now(Value::Array(
            table::SPECS.iter().map(command_info).collect(),
        )),
        Some("info") => now(Value::Array(
            names()
                .map(|n| table::find(&n).map_or(Value::Null, command_info))
                .collect(),
        )),
        Some("docs") => {
            let specs: Vec<&Spec> = if a.len() == 1 {
                table::SPECS.iter().collect()
            } else {
                names().filter_map(|n| table::find(&n)).collect()
            };
            now(Value::Map(
                specs
                    .into_iter()
                    .map(|s| (Value::bulk(s.name), command_docs(s)))
                    .collect(),
            ))
        }
        Some("getkeys") if a.len() >= 2 => getkeys(&a[1..]),
        Some("getkeys") => arity_error("command|getkeys"),
        Some(_) => return None,
    })
}

/// One command's COMMAND INFO entry, as Redis 7 gives it: name, arity,
/// flags, first key, last key, step, ACL categories, tips, key specs,
/// subcommands (the last three empty: the positions say it all).
fn command_info(s: &Spec) -> Value {
    let flags = s.flags.iter().map(|&f| Value::Simple(f)).collect();
    let mut acl = Vec::new();
    if s.flags.contains(&"write") {
        acl.push(Value::Simple("@write"));
    }
    if s.flags.contains(&"readonly") {
        acl.push(Value::Simple("@read"));
    }
    acl.push(Value::Status(format!("@{}", group_of(s.name))));
    acl.push(Value::Simple(if s.flags.contains(&"fast") {
        "@fast"
    } else {
        "@slow"
    }));
    Value::Array(vec![
        Value::bulk(s.name),
        Value::Integer(s.arity.into()),
        Value::Set(flags),
        Value::Integer(s.first_key.into()),
        Value::Integer(s.last_key.into()),
        Value::Integer(s.step.into()),
        Value::Set(acl),
        Value::Array(Vec::new()),
        Value::Array(Vec::new()),
        Value::Array(Vec::new()),
    ])
}

/// COMMAND DOCS: the command's summary and group (no argument lists).
fn command_docs(s: &Spec) -> Value {
    let mut doc = vec![(Value::bulk("group"), Value::bulk(group_of(s.name)))];
    if let Some(summary) = summary_of(s.name) {
        doc.insert(0, (Value::bulk("summary"), Value::bulk(summary)));
    }
    Value::Map(doc)
}

/// Redis's command group of a command of the table.
fn group_of(name: &str) -> &'static str {
    match name {
        "auth" | "client" | "echo" | "hello" | "ping" | "quit" | "readonly" | "readwrite"
        | "select" => "connection",
        "command" | "config" | "dbsize" | "info" | "time" => "server",
        "cluster" => "cluster",
        "multi" | "exec" | "discard" | "watch" | "unwatch" => "transactions",
        n if n.starts_with('h') && n != "hello" => "hash",
        "append" | "decr" | "decrby" | "get" | "getdel" | "getex" | "getrange" | "getset"
        | "incr" | "incrby" | "incrbyfloat" | "mget" | "mset" | "msetnx" | "psetex" | "set"
        | "setex" | "setnx" | "setrange" | "strlen" => "string",
        _ => "generic",
    }
}

fn summary_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "auth" => "Authenticates the connection (with a Rush token).",
        "client" => "Connection names, ids and the list of this node's RESP clients.",
        "cluster" => "The cluster map: slots, shards, nodes, a key's slot.",
        "command" => "Facts about the commands this listener answers.",
        "config" => "Reads the settings clients probe (CONFIG GET).",
        "decr" => "Decrements the integer value of a key by one.",
        "decrby" => "Decrements a number from the integer value of a key.",
        "del" => "Deletes one or more keys.",
        "echo" => "Returns the given string.",
        "exists" => "Determines whether one or more keys exist.",
        "expire" => "Sets the expiration time of a key in seconds.",
        "get" => "Returns the string value of a key.",
        "hdel" => "Deletes one or more fields from a hash.",
        "hello" => "Handshakes with the server (protocol version, authentication).",
        "hget" => "Returns the value of a field in a hash.",
        "hgetall" => "Returns all fields and values in a hash.",
        "hincrby" => "Increments the integer value of a field in a hash by a number.",
        "hset" => "Creates or modifies the value of a field in a hash.",
        "incr" => "Increments the integer value of a key by one.",
        "incrby" => "Increments the integer value of a key by a number.",
        "info" => "Information and statistics about the node.",
        "mget" => "Atomically returns the string values of one or more keys.",
        "pexpire" => "Sets the expiration time of a key in milliseconds.",
        "ping" => "Returns the server's liveliness response.",
        "pttl" => "Returns the expiration time in milliseconds of a key.",
        "quit" => "Closes the connection.",
        "readonly" | "readwrite" => "Accepted for cluster clients; Rush has no replicas.",
        "select" => "Selects database 0, the only one.",
        "set" => "Sets the string value of a key.",
        "time" => "Returns the node's clock.",
        "ttl" => "Returns the expiration time in seconds of a key.",
        _ => return None,
    })
}

/// `COMMAND GETKEYS cmd arg...`: the keys by the command's positions.
fn getkeys(cmd: &[Bytes]) -> Decoded {
    let name = String::from_utf8_lossy(&cmd[0]).to_ascii_lowercase();
    let Some(s) = table::find(&name) else {
        return error("ERR Invalid command specified");
    };
    if !s.arity_admits(cmd.len()) {
        return error("ERR Invalid number of arguments specified for command");
    }
    let keys = key_positions(s, cmd.len());
    if keys.is_empty() {
        return error("ERR The command has no key arguments");
    }
    Decoded::Now(Now::Value(Value::Array(
        keys.into_iter()
            .map(|i| Value::Bulk(cmd[i].clone()))
            .collect(),
    )))
}

/// The positions of a command's keys in a command of `argc` arguments.
pub fn key_positions(s: &Spec, argc: usize) -> Vec<usize> {
    if s.first_key <= 0 || s.step <= 0 {
        return Vec::new();
    }
    let last = if s.last_key < 0 {
        argc as i64 + i64::from(s.last_key)
    } else {
        i64::from(s.last_key).min(argc as i64 - 1)
    };
    (i64::from(s.first_key)..=last)
        .step_by(s.step as usize)
        .map(|i| i as usize)
        .collect()
}

/// `CLIENT subcommand ...`; `None`: an unknown subcommand.
fn client(sub: &str, a: &[Bytes]) -> Option<Decoded> {
    let ask = |c: ClientAsk| Decoded::Now(Now::Node(Ask::Client(c)));
    Some(match (sub, a.len()) {
        ("id", 0) => ask(ClientAsk::Id),
        ("getname", 0) => ask(ClientAsk::GetName),
        ("info", 0) => ask(ClientAsk::Info),
        ("setname", 1) => match valid_name(&a[0]) {
            true => ask(ClientAsk::SetName(a[0].clone())),
            false => {
                error("ERR Client names cannot contain spaces, newlines or special characters.")
            }
        },
        ("setinfo", 2) => {
            let attr = a[0].to_ascii_lowercase();
            let lib_name = match attr.as_slice() {
                b"lib-name" => true,
                b"lib-ver" => false,
                _ => {
                    return Some(error(format!(
                        "ERR Unrecognized option '{}'",
                        String::from_utf8_lossy(&a[0])
                    )))
                }
            };
            if !valid_name(&a[1]) {
                return Some(error(format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    String::from_utf8_lossy(&attr)
                )));
            }
            ask(ClientAsk::SetInfo(lib_name, a[1].clone()))
        }
        ("list", 0) => ask(ClientAsk::List(None)),
        ("list", _) => client_list_filter(a),
        ("id" | "getname" | "info" | "setname" | "setinfo", _) => {
            arity_error(&format!("client|{sub}"))
        }
        _ => return None,
    })
}

/// `CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id...]`: every
/// RESP client is of type normal.
fn client_list_filter(a: &[Bytes]) -> Decoded {
    let opt = a[0].to_ascii_lowercase();
    match (opt.as_slice(), a.len()) {
        (b"type", 2) => match a[1].to_ascii_lowercase().as_slice() {
            b"normal" => Decoded::Now(Now::Node(Ask::Client(ClientAsk::List(None)))),
            b"master" | b"replica" | b"slave" | b"pubsub" => {
                Decoded::Now(Now::Node(Ask::Client(ClientAsk::List(Some(Vec::new())))))
            }
            _ => error(format!(
                "ERR Unknown client type '{}'",
                String::from_utf8_lossy(&a[1])
            )),
        },
        (b"id", n) if n >= 2 => {
            let mut ids = Vec::with_capacity(n - 1);
            for id in &a[1..] {
                match super::command::parse_i64(id) {
                    Some(v) if v > 0 => ids.push(v as u64),
                    _ => return error("ERR Invalid client ID"),
                }
            }
            Decoded::Now(Now::Node(Ask::Client(ClientAsk::List(Some(ids)))))
        }
        _ => error("ERR syntax error"),
    }
}

/// Redis's rule for client names and library facts: printable ASCII, no
/// spaces (an empty name clears it).
fn valid_name(b: &[u8]) -> bool {
    b.iter().all(|&c| (b'!'..=b'~').contains(&c))
}

/// Answer an [`Ask`] for connection `conn`, now.
pub fn run(conn: &mut RespConn, ask: Ask) -> Now {
    let Some(node) = conn.node.clone() else {
        return Now::Error("ERR the node is starting".into());
    };
    let value = match ask {
        Ask::Time => {
            // The daemon's clock (which tests move); millisecond resolution.
            let ms = node.clock.now_ms();
            Value::Array(vec![
                Value::bulk((ms / 1000).to_string()),
                Value::bulk(((ms % 1000) * 1000).to_string()),
            ])
        }
        Ask::Info(sections) => Value::Text(info(&node, conn, &sections)),
        Ask::Cluster(c) => return super::cluster::run(&node, c),
        Ask::ConfigGet(patterns) => config_get(&node, conn, &patterns),
        Ask::Client(c) => return client_run(&node, conn, c),
    };
    Now::Value(value)
}

fn client_run(node: &NodeShared, conn: &mut RespConn, ask: ClientAsk) -> Now {
    let clients = &node.resp_clients;
    match ask {
        ClientAsk::Id => Now::Integer(conn.id as i64),
        ClientAsk::SetName(name) => {
            clients.update(conn.id, |c| {
                c.name = String::from_utf8_lossy(&name).into_owned()
            });
            Now::Simple("OK")
        }
        ClientAsk::GetName => match clients.get(conn.id) {
            Some(c) if !c.name.is_empty() => Now::Bulk(Bytes::from(c.name)),
            _ => Now::Value(Value::Null),
        },
        ClientAsk::SetInfo(lib_name, value) => {
            let value = String::from_utf8_lossy(&value).into_owned();
            clients.update(conn.id, |c| {
                if lib_name {
                    c.lib_name = value
                } else {
                    c.lib_ver = value
                }
            });
            Now::Simple("OK")
        }
        ClientAsk::Info => {
            conn.sync_proto();
            match clients.get(conn.id) {
                Some(c) => Now::Value(Value::Text(c.line(conn.id) + "\n")),
                None => Now::Error("ERR this connection is not registered".into()),
            }
        }
        ClientAsk::List(ids) => {
            conn.sync_proto();
            let mut text = String::new();
            for (id, c) in clients.all() {
                if ids.as_ref().is_none_or(|ids| ids.contains(&id)) {
                    text.push_str(&c.line(id));
                    text.push('\n');
                }
            }
            Now::Value(Value::Text(text))
        }
    }
}

/// The RESP clients of a node, for CLIENT LIST and INFO. Written on
/// connect, close and the CLIENT commands that change a client (rare next
/// to requests), read by CLIENT LIST and INFO: one mutex is plenty.
#[derive(Default)]
pub struct Clients {
    next_id: AtomicU64,
    open: Mutex<BTreeMap<u64, Client>>,
}

/// What CLIENT LIST shows of a client.
#[derive(Debug, Clone)]
pub struct Client {
    pub addr: Option<SocketAddr>,
    pub laddr: Option<SocketAddr>,
    pub name: String,
    pub lib_name: String,
    pub lib_ver: String,
    pub resp: u8,
    pub since: Instant,
}

impl Client {
    /// Its CLIENT LIST line: the fields Rush knows, in Redis's words.
    fn line(&self, id: u64) -> String {
        let addr = |a: Option<SocketAddr>| a.map(|a| a.to_string()).unwrap_or_default();
        format!(
            "id={id} addr={} laddr={} name={} age={} db=0 flags=N resp={} lib-name={} lib-ver={}",
            addr(self.addr),
            addr(self.laddr),
            self.name,
            self.since.elapsed().as_secs(),
            self.resp,
            self.lib_name,
            self.lib_ver
        )
    }
}

impl Clients {
    /// A new client: its id (unique on this node, from 1).
    pub fn open(&self, addr: Option<SocketAddr>, laddr: Option<SocketAddr>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let client = Client {
            addr,
            laddr,
            name: String::new(),
            lib_name: String::new(),
            lib_ver: String::new(),
            resp: 2,
            since: Instant::now(),
        };
        self.lock().insert(id, client);
        id
    }

    pub fn close(&self, id: u64) {
        self.lock().remove(&id);
    }

    pub fn update(&self, id: u64, f: impl FnOnce(&mut Client)) {
        if let Some(c) = self.lock().get_mut(&id) {
            f(c)
        }
    }

    pub fn get(&self, id: u64) -> Option<Client> {
        self.lock().get(&id).cloned()
    }

    pub fn all(&self) -> Vec<(u64, Client)> {
        self.lock().iter().map(|(&id, c)| (id, c.clone())).collect()
    }

    pub fn count(&self) -> usize {
        self.lock().len()
    }

    /// The map stays consistent whatever panicked while holding it (each
    /// change is one insert, remove or field write).
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Client>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// INFO's sections, in Redis's order; INFO with no argument, `default`,
/// `all` or `everything` gives all of them.
const SECTIONS: [&str; 8] = [
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cluster",
    "keyspace",
];

/// INFO's text: `# Section` lines, then `field:value` lines.
fn info(node: &NodeShared, conn: &RespConn, asked: &[String]) -> String {
    let all = asked.is_empty()
        || asked
            .iter()
            .any(|s| matches!(s.as_str(), "default" | "all" | "everything"));
    let map = node.cluster.routing.map();
    let clustered = map.epoch() > 0;
    let storage = &node.storage;
    let mut out = String::new();
    for section in SECTIONS {
        if !all && !asked.iter().any(|s| s == section) {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        let mut rows: Vec<(&str, String)> = Vec::new();
        let title = match section {
            "server" => {
                let uptime = node.started.elapsed().as_secs();
                rows.extend([
                    ("redis_version", REDIS_VERSION.to_string()),
                    ("rush_version", env!("CARGO_PKG_VERSION").to_string()),
                    (
                        "redis_mode",
                        if clustered { "cluster" } else { "standalone" }.to_string(),
                    ),
                    (
                        "os",
                        format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
                    ),
                    ("arch_bits", usize::BITS.to_string()),
                    ("process_id", std::process::id().to_string()),
                    ("rush_node_id", node.node_id.clone()),
                    (
                        "tcp_port",
                        conn.local_port().map(|p| p.to_string()).unwrap_or_default(),
                    ),
                    ("uptime_in_seconds", uptime.to_string()),
                    ("uptime_in_days", (uptime / 86_400).to_string()),
                    ("rush_shards", node.shards.len().to_string()),
                ]);
                "Server"
            }
            "clients" => {
                rows.extend([
                    (
                        "connected_clients",
                        node.connections.load(Ordering::Relaxed).to_string(),
                    ),
                    ("rush_resp_clients", node.resp_clients.count().to_string()),
                    ("maxclients", node.config.server.max_connections.to_string()),
                ]);
                "Clients"
            }
            "memory" => {
                if let Some(rss) = rss_bytes() {
                    rows.push(("used_memory_rss", rss.to_string()));
                }
                rows.extend([
                    ("maxmemory", "0".to_string()),
                    ("maxmemory_policy", "noeviction".to_string()),
                    (
                        "rush_memtable_bytes",
                        storage
                            .property_sum("rocksdb.cur-size-all-mem-tables")
                            .to_string(),
                    ),
                ]);
                "Memory"
            }
            "persistence" => {
                rows.extend([
                    ("loading", "0".to_string()),
                    ("aof_enabled", "0".to_string()),
                    ("rush_storage", "rocksdb".to_string()),
                    (
                        "rush_kv_durability",
                        match node.config.storage.kv_durability {
                            crate::config::Durability::Sync => "sync",
                            crate::config::Durability::Relaxed => "relaxed",
                        }
                        .to_string(),
                    ),
                    (
                        "rush_sst_bytes",
                        storage
                            .property_sum("rocksdb.total-sst-files-size")
                            .to_string(),
                    ),
                ]);
                "Persistence"
            }
            "stats" => {
                let m = &node.metrics;
                rows.extend([
                    (
                        "total_connections_received",
                        m.connections_total.get().to_string(),
                    ),
                    (
                        "rejected_connections",
                        m.connections_rejected.get().to_string(),
                    ),
                    ("rush_moved_total", m.cluster.moved.get().to_string()),
                    ("rush_tryagain_total", m.cluster.try_again.get().to_string()),
                ]);
                "Stats"
            }
            "replication" => {
                rows.extend([
                    ("role", "master".to_string()),
                    ("connected_slaves", "0".to_string()),
                    ("master_failover_state", "no-failover".to_string()),
                    ("master_repl_offset", "0".to_string()),
                ]);
                "Replication"
            }
            "cluster" => {
                rows.push(("cluster_enabled", u8::from(clustered).to_string()));
                "Cluster"
            }
            _ => {
                // RocksDB's estimate of the records stored, every
                // service's (a count would scan them all).
                let keys = storage.property_sum("rocksdb.estimate-num-keys");
                if keys > 0 {
                    rows.push(("db0", format!("keys={keys}")));
                }
                "Keyspace"
            }
        };
        let _ = write!(out, "# {title}\r\n");
        for (k, v) in rows {
            let _ = write!(out, "{k}:{v}\r\n");
        }
    }
    out
}

/// The process's resident memory, from /proc (Linux); None elsewhere.
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().map(|p| p * pages)
}

/// `CONFIG GET pattern...`: the settings clients probe, by Redis's names,
/// matched as Redis matches them (glob, case-insensitive).
fn config_get(node: &NodeShared, conn: &RespConn, patterns: &[Bytes]) -> Value {
    let clustered = node.cluster.routing.map().epoch() > 0;
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    let settings: [(&str, String); 12] = [
        (
            "appendfsync",
            match node.config.storage.kv_durability {
                crate::config::Durability::Sync => "always",
                crate::config::Durability::Relaxed => "no",
            }
            .to_string(),
        ),
        ("appendonly", "no".to_string()),
        (
            "bind",
            conn.laddr().map(|a| a.ip().to_string()).unwrap_or_default(),
        ),
        ("cluster-enabled", yes_no(clustered)),
        ("databases", "1".to_string()),
        ("maxclients", node.config.server.max_connections.to_string()),
        ("maxmemory", "0".to_string()),
        ("maxmemory-policy", "noeviction".to_string()),
        (
            "port",
            conn.local_port().map(|p| p.to_string()).unwrap_or_default(),
        ),
        (
            "proto-max-bulk-len",
            node.config.server.max_frame_bytes.to_string(),
        ),
        ("save", String::new()),
        ("timeout", node.config.server.idle_timeout_secs.to_string()),
    ];
    let mut pairs = Vec::new();
    for (name, value) in settings {
        if patterns.iter().any(|p| glob_match(p, name.as_bytes())) {
            pairs.push((Value::bulk(name), Value::bulk(value)));
        }
    }
    Value::Map(pairs)
}

/// Redis's `stringmatchlen`, case-insensitive: `*`, `?`, `[abc]`, `[a-z]`,
/// `[^...]`, `\x`.
pub fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    fn go(p: &[u8], s: &[u8], depth: usize) -> bool {
        // Each star recurses once: bounded by the pattern's length, which
        // the command's limits bound.
        if depth > 64 {
            return false;
        }
        let (mut p, mut s) = (p, s);
        while let Some(&c) = p.first() {
            match c {
                b'*' => {
                    while p.first() == Some(&b'*') {
                        p = &p[1..];
                    }
                    if p.is_empty() {
                        return true;
                    }
                    return (0..=s.len()).any(|i| go(p, &s[i..], depth + 1));
                }
                b'?' => {
                    if s.is_empty() {
                        return false;
                    }
                    p = &p[1..];
                    s = &s[1..];
                }
                b'[' => {
                    let Some(&ch) = s.first() else {
                        return false;
                    };
                    let mut i = 1;
                    let negate = p.get(1) == Some(&b'^');
                    if negate {
                        i += 1;
                    }
                    let mut matched = false;
                    while i < p.len() && p[i] != b']' {
                        if p[i] == b'\\' && i + 1 < p.len() {
                            matched |= p[i + 1].eq_ignore_ascii_case(&ch);
                            i += 2;
                        } else if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
                            let (lo, hi) = (p[i].min(p[i + 2]), p[i].max(p[i + 2]));
                            let l = ch.to_ascii_lowercase();
                            matched |=
                                (lo.to_ascii_lowercase()..=hi.to_ascii_lowercase()).contains(&l);
                            i += 3;
                        } else {
                            matched |= p[i].eq_ignore_ascii_case(&ch);
                            i += 1;
                        }
                    }
                    if matched == negate {
                        return false;
                    }
                    p = p.get(i + 1..).unwrap_or(&[]);
                    s = &s[1..];
                }
                b'\\' if p.len() >= 2 => {
                    if s.first().is_none_or(|ch| !ch.eq_ignore_ascii_case(&p[1])) {
                        return false;
                    }
                    p = &p[2..];
                    s = &s[1..];
                }
                _ => {
                    if s.first().is_none_or(|ch| !ch.eq_ignore_ascii_case(&c)) {
                        return false;
                    }
                    p = &p[1..];
                    s = &s[1..];
                }
            }
        }
        s.is_empty()
    }
    go(pattern, s, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_as_redis() {
        let m = |p: &str, s: &str| glob_match(p.as_bytes(), s.as_bytes());
        assert!(m("*", "maxmemory"));
        assert!(m("max*", "maxmemory-policy"));
        assert!(m("MAXMEMORY", "maxmemory"));
        assert!(!m("max", "maxmemory"));
        assert!(m("*-enabled", "cluster-enabled"));
        assert!(m("d?tabases", "databases"));
        assert!(m("[abc]ppendonly", "appendonly"));
        assert!(!m("[^a]ppendonly", "appendonly"));
        assert!(!m("[a-c]ave", "save") && m("[r-t]ave", "save"));
        assert!(m("sav\\e", "save"));
        assert!(!m("save?", "save"));
        assert!(!m(&"*a".repeat(200), "aaaa"));
    }

    #[test]
    fn key_positions_follow_the_rows() {
        let pos = |name: &str, argc| key_positions(table::find(name).unwrap(), argc);
        assert_eq!(pos("get", 2), vec![1]);
        assert_eq!(pos("mget", 4), vec![1, 2, 3]);
        assert_eq!(pos("hset", 6), vec![1]);
        assert!(pos("ping", 1).is_empty());
    }

    #[test]
    fn commands_decode_without_the_node() {
        let args =
            |s: &str| -> Vec<Bytes> { s.split(' ').map(|w| Bytes::from(w.to_string())).collect() };
        let now = |s: &str| match decode(
            &s.split(' ').next().unwrap().to_ascii_lowercase(),
            &args(s)[1..],
        ) {
            Some(Decoded::Now(n)) => n,
            _ => panic!("{s}"),
        };
        assert!(matches!(now("COMMAND COUNT"), Now::Integer(n) if n == table::SPECS.len() as i64));
        match now("COMMAND GETKEYS MGET a b") {
            Now::Value(Value::Array(keys)) => assert_eq!(keys.len(), 2),
            _ => panic!("GETKEYS"),
        }
        match now("COMMAND INFO get nosuch") {
            Now::Value(Value::Array(v)) => assert_eq!(v[1], Value::Null),
            _ => panic!("INFO"),
        }
        assert!(
            matches!(now("CLIENT SETNAME a\tb"), Now::Error(e) if e.contains("cannot contain"))
        );
        assert!(
            matches!(now("CLIENT SETINFO color red"), Now::Error(e) if e.contains("Unrecognized option"))
        );
        assert!(
            matches!(now("CONFIG SET maxmemory 1"), Now::Error(e) if e.contains("not supported"))
        );
        assert!(matches!(now("CLIENT KILL x"), Now::Error(e) if e.contains("unknown subcommand")));
        assert!(matches!(
            now("CLIENT LIST ID 3 4"),
            Now::Node(Ask::Client(ClientAsk::List(Some(ids)))) if ids == [3, 4]
        ));
    }
}
