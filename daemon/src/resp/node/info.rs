//! INFO's sections and CONFIG GET's settings, by Redis's names.

use super::REDIS_VERSION;
use crate::resp::value::Value;
use crate::resp::RespConn;
use crate::server::NodeShared;
use bytes::Bytes;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;

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
pub(super) fn info(node: &NodeShared, conn: &RespConn, asked: &[String]) -> String {
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
        // Rows whose names are made, not constants.
        let mut owned: Vec<(String, String)> = Vec::new();
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
                let memory = node.memory_report();
                if let Some(rss) = memory.rss {
                    rows.push(("used_memory_rss", rss.to_string()));
                }
                rows.extend([
                    // The budget caps what Rush keeps in memory; nothing
                    // stored is evicted (it is on disk).
                    ("maxmemory", memory.budget.to_string()),
                    ("maxmemory_policy", "noeviction".to_string()),
                ]);
                owned.extend(memory.info_rows("rush_"));
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
                let keys = storage.keys_estimate();
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
        for (k, v) in owned {
            let _ = write!(out, "{k}:{v}\r\n");
        }
    }
    out
}

/// `CONFIG GET pattern...`: the settings clients probe, by Redis's names,
/// matched as Redis matches them (glob, case-insensitive).
pub(super) fn config_get(node: &NodeShared, conn: &RespConn, patterns: &[Bytes]) -> Value {
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
