//! Cluster map files (feature `map-file`): the operator's source of truth,
//! e.g. a Kubernetes ConfigMap mounted at `/etc/rush/cluster.toml`.
//!
//! ```toml
//! epoch = 1
//!
//! [[nodes]]
//! id = "rush-0"
//! addr = "rush-0.rush:7379"
//! resp_addr = "rush-0.rush:6379"   # optional; default: addr's port + 2
//! slots = ["0-5460", "9000"]   # inclusive ranges or single slots
//!
//! [[nodes]]
//! id = "rush-0-b"
//! addr = "rush-0-b.rush:7379"
//! replica_of = "rush-0"   # a replica: owns no slots
//! ```
//!
//! A file must assign every slot exactly once and have an epoch of at least
//! 1 (epoch 0 is a lone node that was never given a map).

use crate::cmd::{ClusterNode, ClusterSlotsReply};
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MapFile {
    epoch: u64,
    nodes: Vec<FileNode>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileNode {
    id: String,
    addr: String,
    /// Where Redis clients reach the node; not set: `addr`'s host, its
    /// port + 2 (rushd's default RESP listener).
    #[serde(default)]
    resp_addr: Option<String>,
    /// A replica: the id of the node it copies (it owns no slots).
    #[serde(default)]
    replica_of: Option<String>,
    /// A replica has none.
    #[serde(default)]
    slots: Vec<SlotSpec>,
}

/// `"0-5460"`, `"9000"` or `9000`.
#[derive(Deserialize)]
#[serde(untagged)]
enum SlotSpec {
    Text(String),
    Number(i64),
}

/// Parse and check a map file's text.
pub fn parse_map(text: &str) -> Result<ClusterSlotsReply, String> {
    let file: MapFile = toml::from_str(text).map_err(|e| e.to_string())?;
    if file.epoch == 0 {
        return Err("epoch must be at least 1 (0 means \"no map\")".into());
    }
    let mut nodes = Vec::with_capacity(file.nodes.len());
    for n in file.nodes {
        let mut ranges = Vec::with_capacity(n.slots.len());
        for s in &n.slots {
            let spec = match s {
                SlotSpec::Text(t) => t.clone(),
                SlotSpec::Number(v) => v.to_string(),
            };
            ranges
                .push(super::parse_slot_spec(&spec).map_err(|e| format!("node {:?}: {e}", n.id))?);
        }
        nodes.push(ClusterNode {
            id: n.id,
            addr: n.addr,
            ranges,
            resp_addr: n.resp_addr,
            replica_of: n.replica_of,
        });
    }
    let map = ClusterSlotsReply {
        epoch: file.epoch,
        nodes,
    };
    map.validate()?;
    Ok(map)
}

/// Read, parse and check a map file.
pub fn load_map(path: &Path) -> Result<ClusterSlotsReply, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("reading cluster map {}: {e}", path.display()))?;
    parse_map(&text).map_err(|e| format!("cluster map {}: {e}", path.display()))
}

/// A map in the file format (what `rush cluster slots --toml` prints).
pub fn to_toml(map: &ClusterSlotsReply) -> String {
    let mut out = format!("epoch = {}\n", map.epoch);
    for n in &map.normalized().nodes {
        let slots: Vec<String> = n.ranges.iter().map(|r| format!("\"{r}\"")).collect();
        out.push_str(&format!(
            "\n[[nodes]]\nid = {:?}\naddr = {:?}\n",
            n.id, n.addr
        ));
        if let Some(resp) = &n.resp_addr {
            out.push_str(&format!("resp_addr = {resp:?}\n"));
        }
        if let Some(primary) = &n.replica_of {
            out.push_str(&format!("replica_of = {primary:?}\n"));
        } else {
            out.push_str(&format!("slots = [{}]\n", slots.join(", ")));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_parse_check_and_round_trip() {
        let text = r#"
epoch = 3

[[nodes]]
id = "rush-0"
addr = "rush-0.rush:7379"
slots = ["0-5460", "9000"]

[[nodes]]
id = "rush-1"
addr = "rush-1.rush:7379"
resp_addr = "rush-1.rush:6379"
slots = ["5461-8999", 9001, "9002-16383"]
"#;
        let map = parse_map(text).unwrap();
        assert_eq!(map.epoch, 3);
        assert_eq!(map.nodes[0].resp_addr, None);
        assert_eq!(map.nodes[1].resp_addr.as_deref(), Some("rush-1.rush:6379"));
        assert_eq!(map.node_for(9000).unwrap().id, "rush-0");
        assert_eq!(map.node_for(9001).unwrap().id, "rush-1");
        let again = parse_map(&to_toml(&map)).unwrap();
        assert!(again.same_as(&map));

        let partial = text.replace("\"9002-16383\"", "\"9002-16000\"");
        let e = parse_map(&partial).unwrap_err();
        assert!(
            e.contains("owned by no node") && e.contains("16001-16383"),
            "{e}"
        );
        assert!(parse_map(&text.replace("epoch = 3", "epoch = 0")).is_err());
        assert!(parse_map(&text.replace("rush-1\"\naddr", "rush-0\"\naddr")).is_err());
        assert!(parse_map(&text.replace("9000\"]", "9000\", \"16384\"]")).is_err());
        assert!(parse_map(&text.replace("epoch = 3", "epoch = 3\ncolor = 1")).is_err());

        let with_replica = format!(
            "{text}\n[[nodes]]\nid = \"rush-1-b\"\naddr = \"rush-1-b.rush:7379\"\nreplica_of = \"rush-1\"\n"
        );
        let map = parse_map(&with_replica).unwrap();
        assert_eq!(map.nodes[2].replica_of.as_deref(), Some("rush-1"));
        assert!(map.nodes[2].ranges.is_empty());
        let again = parse_map(&to_toml(&map)).unwrap();
        assert!(again.same_as(&map));
        let e =
            parse_map(&with_replica.replace("replica_of = \"rush-1\"", "replica_of = \"rush-9\""))
                .unwrap_err();
        assert!(e.contains("not in the map"), "{e}");
    }
}
