//! `CLUSTER SLOTS | SHARDS | NODES | INFO | MYID | KEYSLOT`: the map in
//! force, in Redis Cluster's reply shapes, naming each node by its RESP
//! address (the map's `resp_addr`, else its binary port + 2; a lone node,
//! its own RESP listener). What cluster clients (`redis-cli -c`, redis-py's
//! `RedisCluster`) read to route. A map's replicas are shown as Redis shows
//! them (after their primary; `slave` in NODES); they serve no reads (a
//! request there is MOVED to the owner). Rush has no cluster bus: every
//! node is shown connected; the "bus port" shown is the node's binary
//! protocol port, where nodes talk to each other.

use super::command::{Decoded, Now};
use super::node::Ask as NodeAsk;
use super::value::Value;
use crate::cluster::routing::Map;
use crate::cluster::Cluster;
use crate::server::NodeShared;
use bytes::Bytes;
use rush_protocol::cmd::ClusterNode;
use rush_protocol::SLOTS;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    Slots,
    Shards,
    Nodes,
    Info,
    MyId,
}

/// A CLUSTER subcommand (lower case) and its arguments; `None`: unknown.
pub fn decode(sub: &str, a: &[Bytes]) -> Option<Decoded> {
    let ask = |c: Ask| Decoded::Now(Now::Node(NodeAsk::Cluster(c)));
    let err = |e: String| Decoded::Now(Now::Error(e));
    Some(match (sub, a.len()) {
        ("slots", 0) => ask(Ask::Slots),
        ("shards", 0) => ask(Ask::Shards),
        ("nodes", 0) => ask(Ask::Nodes),
        ("info", 0) => ask(Ask::Info),
        ("myid", 0) => ask(Ask::MyId),
        ("keyslot", 1) => Decoded::Now(Now::Integer(rush_protocol::key_slot(&a[0]).into())),
        ("countkeysinslot" | "getkeysinslot", _) => err(format!(
            "ERR CLUSTER {} is not supported by Rush (it would scan the slot's keys)",
            sub.to_ascii_uppercase()
        )),
        ("slots" | "shards" | "nodes" | "info" | "myid" | "keyslot", _) => err(format!(
            "ERR wrong number of arguments for 'cluster|{sub}' command"
        )),
        _ => return None,
    })
}

/// Answer a CLUSTER subcommand from the map in force.
pub fn run(node: &NodeShared, ask: Ask) -> Now {
    let c = &node.cluster;
    let map = c.routing.map();
    let value = match ask {
        Ask::MyId => Value::bulk(c.node_id.clone()),
        Ask::Slots => slots(c, &map),
        Ask::Shards => shards(c, &map),
        Ask::Nodes => Value::Text(nodes_text(c, &map)),
        Ask::Info => Value::Text(info_text(&map)),
    };
    Now::Value(value)
}

/// A node's RESP address as (host, port): `[::1]:7381` → (`::1`, 7381).
fn host_port(addr: &str) -> (String, i64) {
    match addr.rsplit_once(':') {
        Some((h, p)) => (
            h.trim_start_matches('[').trim_end_matches(']').to_string(),
            p.parse().unwrap_or(0),
        ),
        None => (addr.to_string(), 0),
    }
}

/// The port of a binary address (the "bus port" of CLUSTER NODES).
fn port_of(addr: &str) -> i64 {
    host_port(addr).1
}

fn resp_of(c: &Cluster, map: &Map, n: &ClusterNode) -> (String, i64) {
    host_port(&c.resp_addr(map, n))
}

/// `[host, port, id]` of a node.
fn endpoint(c: &Cluster, map: &Map, n: &ClusterNode) -> Value {
    let (host, port) = resp_of(c, map, n);
    Value::Array(vec![
        Value::bulk(host),
        Value::Integer(port),
        Value::bulk(n.id.clone()),
    ])
}

/// `[[start, end, [host, port, id], replicas...], ...]` in slot order.
fn slots(c: &Cluster, map: &Map) -> Value {
    let mut ranges: Vec<(u16, u16, &ClusterNode)> = map
        .map
        .nodes
        .iter()
        .flat_map(|n| n.ranges.iter().map(move |r| (r.start, r.end, n)))
        .collect();
    ranges.sort_by_key(|r| r.0);
    Value::Array(
        ranges
            .into_iter()
            .map(|(start, end, n)| {
                let mut entry = vec![
                    Value::Integer(start.into()),
                    Value::Integer(end.into()),
                    endpoint(c, map, n),
                ];
                entry.extend(map.map.replicas_of(&n.id).map(|r| endpoint(c, map, r)));
                Value::Array(entry)
            })
            .collect(),
    )
}

/// One shard per primary: its slots as a flat list of start, end... and
/// its nodes, the primary first, then its replicas.
fn shards(c: &Cluster, map: &Map) -> Value {
    let node = |n: &ClusterNode, role: &str| {
        let (host, port) = resp_of(c, map, n);
        Value::Map(vec![
            (Value::bulk("id"), Value::bulk(n.id.clone())),
            (Value::bulk("port"), Value::Integer(port)),
            (Value::bulk("ip"), Value::bulk(host.clone())),
            (Value::bulk("endpoint"), Value::bulk(host)),
            (Value::bulk("role"), Value::bulk(role)),
            (Value::bulk("replication-offset"), Value::Integer(0)),
            (Value::bulk("health"), Value::bulk("online")),
        ])
    };
    Value::Array(
        map.map
            .nodes
            .iter()
            .filter(|n| n.replica_of.is_none())
            .map(|n| {
                let slots = n
                    .ranges
                    .iter()
                    .flat_map(|r| [Value::Integer(r.start.into()), Value::Integer(r.end.into())])
                    .collect();
                let nodes = std::iter::once(node(n, "master"))
                    .chain(map.map.replicas_of(&n.id).map(|r| node(r, "replica")))
                    .collect();
                Value::Map(vec![
                    (Value::bulk("slots"), Value::Array(slots)),
                    (Value::bulk("nodes"), Value::Array(nodes)),
                ])
            })
            .collect(),
    )
}

/// `id host:port@busport flags master ping pong epoch state slots...`, a
/// line per node (`master`: a replica's primary's id, else `-`).
fn nodes_text(c: &Cluster, map: &Map) -> String {
    let mut out = String::new();
    for (i, n) in map.map.nodes.iter().enumerate() {
        let (host, port) = resp_of(c, map, n);
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let role = if n.replica_of.is_some() {
            "slave"
        } else {
            "master"
        };
        let flags = if map.me == Some(i) {
            format!("myself,{role}")
        } else {
            role.to_string()
        };
        out.push_str(&format!(
            "{} {host}:{port}@{} {flags} {} 0 0 {} connected",
            n.id,
            port_of(&n.addr),
            n.replica_of.as_deref().unwrap_or("-"),
            map.epoch()
        ));
        for r in &n.ranges {
            out.push(' ');
            out.push_str(&r.to_string());
        }
        out.push('\n');
    }
    out
}

fn info_text(map: &Map) -> String {
    let assigned: usize = map
        .map
        .nodes
        .iter()
        .flat_map(|n| &n.ranges)
        .map(|r| usize::from(r.end - r.start) + 1)
        .sum();
    let size = map
        .map
        .nodes
        .iter()
        .filter(|n| !n.ranges.is_empty())
        .count();
    let state = if assigned == usize::from(SLOTS) {
        "ok"
    } else {
        "fail"
    };
    let rows = [
        ("cluster_state", state.to_string()),
        ("cluster_slots_assigned", assigned.to_string()),
        ("cluster_slots_ok", assigned.to_string()),
        ("cluster_slots_pfail", "0".into()),
        ("cluster_slots_fail", "0".into()),
        ("cluster_known_nodes", map.map.nodes.len().to_string()),
        ("cluster_size", size.to_string()),
        ("cluster_current_epoch", map.epoch().to_string()),
        ("cluster_my_epoch", map.epoch().to_string()),
        ("rush_slots_served", map.owned_count().to_string()),
    ];
    rows.iter().map(|(k, v)| format!("{k}:{v}\r\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_into_host_and_port() {
        assert_eq!(host_port("10.0.0.2:7381"), ("10.0.0.2".into(), 7381));
        assert_eq!(host_port("[::1]:6379"), ("::1".into(), 6379));
        assert_eq!(host_port("nope"), ("nope".into(), 0));
    }

    #[test]
    fn subcommands_decode() {
        let d = |sub: &str, a: &[&str]| {
            let a: Vec<Bytes> = a.iter().map(|s| Bytes::from(s.to_string())).collect();
            decode(sub, &a)
        };
        assert!(matches!(
            d("keyslot", &["somekey"]),
            Some(Decoded::Now(Now::Integer(11058)))
        ));
        assert!(matches!(
            d("slots", &[]),
            Some(Decoded::Now(Now::Node(NodeAsk::Cluster(Ask::Slots))))
        ));
        assert!(
            matches!(d("slots", &["x"]), Some(Decoded::Now(Now::Error(e))) if e.contains("wrong number"))
        );
        assert!(d("meet", &[]).is_none());
        assert!(
            matches!(d("countkeysinslot", &["1"]), Some(Decoded::Now(Now::Error(e))) if e.contains("not supported"))
        );
    }
}
