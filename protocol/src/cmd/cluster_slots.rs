use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_LIST, MAX_TEXT};
use crate::slot::SLOTS;
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `CLUSTER_SLOTS` → the cluster map: its epoch and each node's slot ranges
/// (and, when the map says, each node's RESP address).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterSlots {}

/// An inclusive range of slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
}

impl SlotRange {
    pub fn contains(&self, slot: u16) -> bool {
        self.start <= slot && slot <= self.end
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    pub id: String,
    /// The binary protocol's `host:port`.
    pub addr: String,
    pub ranges: Vec<SlotRange>,
    /// Where Redis clients reach the node (its RESP listener, `host:port`),
    /// what `-MOVED` and RESP's CLUSTER SLOTS name. `None`: the default,
    /// [`ClusterNode::resp_addr`].
    pub resp_addr: Option<String>,
    /// The id of the node this one is a replica of: it owns no slots, holds
    /// a copy of that node's data, and `rush cluster failover` can give it
    /// the primary's slots. `None`: a primary.
    pub replica_of: Option<String>,
}

/// How far above the binary port a node's RESP listener is when the map
/// doesn't say (rushd's default `server.resp_listen`: 7379 → 7381).
pub const DEFAULT_RESP_PORT_OFFSET: u16 = 2;

impl ClusterNode {
    /// The node's RESP address: the map's, else the default layout's (the
    /// binary address's host, its port + [`DEFAULT_RESP_PORT_OFFSET`]).
    pub fn resp_addr(&self) -> String {
        if let Some(a) = &self.resp_addr {
            return a.clone();
        }
        match self.addr.rsplit_once(':') {
            Some((host, port)) => match port
                .parse::<u16>()
                .ok()
                .and_then(|p| p.checked_add(DEFAULT_RESP_PORT_OFFSET))
            {
                Some(p) => format!("{host}:{p}"),
                None => self.addr.clone(),
            },
            None => self.addr.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterSlotsReply {
    pub epoch: u64,
    pub nodes: Vec<ClusterNode>,
}

impl ClusterSlotsReply {
    /// The replicas of the node with id `primary`.
    pub fn replicas_of<'a>(&'a self, primary: &'a str) -> impl Iterator<Item = &'a ClusterNode> {
        self.nodes
            .iter()
            .filter(move |n| n.replica_of.as_deref() == Some(primary))
    }

    /// The node serving `slot`, if any.
    pub fn node_for(&self, slot: u16) -> Option<&ClusterNode> {
        self.nodes
            .iter()
            .find(|n| n.ranges.iter().any(|r| r.contains(slot)))
    }
}

impl ClusterSlots {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for ClusterSlots {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ClusterSlots {})
    }
}

impl Wire for SlotRange {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u16(self.start);
        out.put_u16(self.end);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let start = r.u16("range start")?;
        let end = r.u16("range end")?;
        if start > end || end >= SLOTS {
            return Err(DecodeError::invalid(
                "slot range",
                format!("{start}-{end} is not within 0-{}", SLOTS - 1),
            ));
        }
        Ok(SlotRange { start, end })
    }
}

impl Wire for ClusterNode {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.id.as_bytes());
        out.put_lp(self.addr.as_bytes());
        out.put_count(self.ranges.len());
        for range in &self.ranges {
            range.encode(out);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ClusterNode {
            id: r.string("node id", MAX_TEXT)?,
            addr: r.string("node addr", MAX_TEXT)?,
            ranges: r.list("ranges", SLOTS as usize, 4, SlotRange::decode)?,
            // Read after the list of nodes (see ClusterSlotsReply).
            resp_addr: None,
            replica_of: None,
        })
    }
}

/// The RESP addresses are a field added after the list of nodes (a new
/// field never goes inside a list element: PROTOCOL.md, "Compatibility"):
/// `list<string>`, one per node in the nodes' order, `""` for a node
/// without one. A map where no node has one leaves the field out, so it
/// encodes as before the field existed — what an older node reads in a
/// CLUSTER_SETMAP or MIGRATE_COMMIT, whose requests end with a map.
///
/// The primaries of replicas are the next added field, the same way: one
/// id per node, `""` for a primary; left out when no node is a replica
/// (the RESP addresses are then written even when all are `""`, to keep
/// the fields in order).
impl Wire for ClusterSlotsReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.epoch);
        out.put_count(self.nodes.len());
        for node in &self.nodes {
            node.encode(out);
        }
        let replicas = self.nodes.iter().any(|n| n.replica_of.is_some());
        if replicas || self.nodes.iter().any(|n| n.resp_addr.is_some()) {
            out.put_count(self.nodes.len());
            for node in &self.nodes {
                out.put_lp(node.resp_addr.as_deref().unwrap_or("").as_bytes());
            }
        }
        if replicas {
            out.put_count(self.nodes.len());
            for node in &self.nodes {
                out.put_lp(node.replica_of.as_deref().unwrap_or("").as_bytes());
            }
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let epoch = r.u64("epoch")?;
        let mut nodes = r.list("nodes", MAX_LIST, 12, ClusterNode::decode)?;
        let resp = r.added(|r| {
            r.list("resp addrs", MAX_LIST, 4, |r| {
                r.string("resp addr", MAX_TEXT)
            })
        })?;
        let primaries = r.added(|r| {
            r.list("replica of", MAX_LIST, 4, |r| {
                r.string("primary id", MAX_TEXT)
            })
        })?;
        let per_node = |field: &'static str, what: &str, v: &Vec<String>| {
            if v.len() == nodes.len() {
                Ok(())
            } else {
                Err(DecodeError::invalid(
                    field,
                    format!("{} {what} for {} nodes", v.len(), nodes.len()),
                ))
            }
        };
        if let Some(resp) = &resp {
            per_node("resp addrs", "addresses", resp)?;
        }
        if let Some(p) = &primaries {
            per_node("replica of", "primaries", p)?;
        }
        for (i, n) in nodes.iter_mut().enumerate() {
            let set = |v: &Option<Vec<String>>| {
                v.as_ref().map(|v| v[i].clone()).filter(|a| !a.is_empty())
            };
            n.resp_addr = set(&resp);
            n.replica_of = set(&primaries);
        }
        Ok(ClusterSlotsReply { epoch, nodes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::WriteExt;

    #[test]
    fn replica_lists_of_another_length_are_refused() {
        let map = ClusterSlotsReply {
            epoch: 1,
            nodes: vec![
                ClusterNode {
                    id: "a".into(),
                    addr: "h:1".into(),
                    ranges: vec![SlotRange {
                        start: 0,
                        end: 16383,
                    }],
                    resp_addr: None,
                    replica_of: None,
                },
                ClusterNode {
                    id: "b".into(),
                    addr: "h:2".into(),
                    ranges: Vec::new(),
                    resp_addr: None,
                    replica_of: Some("a".into()),
                },
            ],
        };
        let whole = map.to_bytes();
        assert_eq!(ClusterSlotsReply::decode_body(whole.clone()).unwrap(), map);
        // The same map with one primary id for its two nodes.
        let mut short = BytesMut::new();
        short.put_u64(1);
        short.put_count(2);
        for n in &map.nodes {
            n.encode(&mut short);
        }
        short.put_count(2);
        short.put_lp(b"");
        short.put_lp(b"");
        short.put_count(1);
        short.put_lp(b"");
        let e = ClusterSlotsReply::decode_body(short.freeze()).unwrap_err();
        assert!(e.to_string().contains("1 primaries for 2 nodes"), "{e}");
    }
}
