//! The node's own RESP commands: INFO, COMMAND, CLIENT, CONFIG GET, TIME,
//! READONLY / READWRITE (and CLUSTER, in [`super::cluster`]): COMMAND in
//! [`commands`], CLIENT in [`clients`], INFO and CONFIG GET in [`info`]. None of them
//! runs a request: [`decode`] answers what needs nothing ([`Now::Value`]),
//! and what needs the node or the connection becomes an [`Ask`], which
//! [`run`] answers where the command was read, in command order (so a
//! CLIENT GETNAME sees the SETNAME sent before it).
//!
//! `protocol/RESP.md` ("Node") documents the replies.

mod clients;
mod commands;
mod info;

pub use clients::{valid_name, Client, Clients, BAD_NAME};
pub use commands::key_positions;
pub use info::glob_match;

use super::command::{Decoded, Now};
use super::value::Value;
use super::RespConn;
use bytes::Bytes;
use clients::{client, client_run};
use commands::command;
use info::{config_get, info};

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

pub(super) fn error(e: impl Into<String>) -> Decoded {
    Decoded::Now(Now::Error(e.into()))
}

pub(super) fn arity_error(name: &str) -> Decoded {
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

#[cfg(test)]
mod tests;
