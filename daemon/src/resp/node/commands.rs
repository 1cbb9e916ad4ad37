//! COMMAND: the facts of the command table ([`super::table`]) in Redis's
//! shapes, for redis-cli's hints and the clients that probe.

use super::{arity_error, error, Decoded};
use crate::resp::command::Now;
use crate::resp::table::{self, Spec};
use crate::resp::value::Value;
use bytes::Bytes;

/// `COMMAND [COUNT | LIST | INFO name... | DOCS name... | GETKEYS cmd arg...]`;
/// `None`: an unknown subcommand.
pub(super) fn command(sub: Option<&str>, a: &[Bytes]) -> Option<Decoded> {
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
        "dbsize" => "Returns the number of keys in the database.",
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
