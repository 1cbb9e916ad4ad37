//! Cluster maps: what every node and client computes the same way — is a
//! map valid, who owns a slot, what a map looks like after a slot moves or
//! when slots are split evenly, and the "100-199" slot notation.

use crate::cmd::{ClusterNode, ClusterSlotsReply, SlotRange};
use crate::slot::SLOTS;

/// No node owns the slot (only while checking a map).
const NOBODY: u16 = u16::MAX;

impl ClusterSlotsReply {
    /// Check a map: at least one node; ids and addresses non-empty and
    /// unique; ranges within 0–16383; every slot owned by exactly one node.
    /// A partial map is refused: a slot nobody serves would answer nothing
    /// anywhere, silently.
    pub fn validate(&self) -> Result<(), String> {
        self.owners().map(|_| ())
    }

    /// The index (in `nodes`) of each slot's owner, checking the map.
    pub fn owners(&self) -> Result<Vec<u16>, String> {
        if self.nodes.is_empty() {
            return Err("the map has no nodes".into());
        }
        if self.nodes.len() >= NOBODY as usize {
            return Err(format!("a map holds at most {} nodes", NOBODY - 1));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if n.id.is_empty() || n.addr.is_empty() {
                return Err(format!("node {} has an empty id or address", i + 1));
            }
            if n.id.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!("node id {:?} contains white space", n.id));
            }
            if let Some(other) = self.nodes[..i].iter().find(|o| o.id == n.id) {
                return Err(format!("node id {:?} appears twice", other.id));
            }
            if let Some(other) = self.nodes[..i].iter().find(|o| o.addr == n.addr) {
                return Err(format!(
                    "nodes {:?} and {:?} have the same address {}",
                    other.id, n.id, n.addr
                ));
            }
            if let Some(a) = &n.resp_addr {
                if a.rsplit_once(':')
                    .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
                {
                    return Err(format!("node {:?}: resp_addr {a:?} is not host:port", n.id));
                }
                if let Some(other) = self.nodes[..i]
                    .iter()
                    .find(|o| o.resp_addr.as_deref() == Some(a))
                {
                    return Err(format!(
                        "nodes {:?} and {:?} have the same RESP address {a}",
                        other.id, n.id
                    ));
                }
            }
        }
        for n in &self.nodes {
            let Some(primary) = &n.replica_of else {
                continue;
            };
            match self.node(primary) {
                None => {
                    return Err(format!(
                        "node {:?} is a replica of {primary:?}, which is not in the map",
                        n.id
                    ))
                }
                Some(p) if p.id == n.id => {
                    return Err(format!("node {:?} is a replica of itself", n.id))
                }
                Some(p) if p.replica_of.is_some() => {
                    return Err(format!(
                        "node {:?} is a replica of {primary:?}, itself a replica: a replica \
                         follows a primary",
                        n.id
                    ))
                }
                Some(_) => {}
            }
            if !n.ranges.is_empty() {
                return Err(format!(
                    "node {:?} is a replica (of {primary:?}) and owns slots: a replica owns none",
                    n.id
                ));
            }
        }
        let mut owner = vec![NOBODY; SLOTS as usize];
        for (i, n) in self.nodes.iter().enumerate() {
            for r in &n.ranges {
                if r.start > r.end || r.end >= SLOTS {
                    return Err(format!(
                        "node {:?}: range {}-{} is not within 0-{}",
                        n.id,
                        r.start,
                        r.end,
                        SLOTS - 1
                    ));
                }
                for s in r.start..=r.end {
                    let o = &mut owner[s as usize];
                    if *o != NOBODY {
                        return Err(format!(
                            "slot {s} is owned twice (by {:?} and {:?})",
                            self.nodes[*o as usize].id, n.id
                        ));
                    }
                    *o = i as u16;
                }
            }
        }
        let missing: Vec<u16> = (0..SLOTS)
            .filter(|&s| owner[s as usize] == NOBODY)
            .collect();
        if let Some(first) = missing.first() {
            let ranges = ranges_of(missing.iter().copied());
            let shown: Vec<String> = ranges.iter().take(5).map(range_text).collect();
            return Err(format!(
                "{} slots are owned by no node (first {first}; {}{}): a map must assign all {SLOTS} slots",
                missing.len(),
                shown.join(", "),
                if ranges.len() > 5 { ", …" } else { "" }
            ));
        }
        Ok(owner)
    }

    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&ClusterNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The same map with every range sorted and adjacent ranges merged, so
    /// two maps that assign the same slots compare equal.
    pub fn normalized(&self) -> ClusterSlotsReply {
        let mut m = self.clone();
        for n in &mut m.nodes {
            let mut slots: Vec<u16> = n.ranges.iter().flat_map(|r| r.start..=r.end).collect();
            slots.sort_unstable();
            slots.dedup();
            n.ranges = ranges_of(slots.into_iter());
        }
        m
    }

    /// Same epoch, nodes and slot assignment (range notation aside).
    pub fn same_as(&self, other: &ClusterSlotsReply) -> bool {
        self.normalized() == other.normalized()
    }

    /// This map with `slot` given to node `to`, at `epoch`.
    pub fn with_slot_moved(
        &self,
        slot: u16,
        to: &str,
        epoch: u64,
    ) -> Result<ClusterSlotsReply, String> {
        let mut owners = self.owners()?;
        let to = self
            .nodes
            .iter()
            .position(|n| n.id == to)
            .ok_or_else(|| format!("no node {to:?} in the map"))?;
        if let Some(p) = &self.nodes[to].replica_of {
            return Err(format!(
                "node {:?} is a replica of {p:?}: it can't own slots (fail it over first)",
                self.nodes[to].id
            ));
        }
        owners[slot as usize] = to as u16;
        Ok(Self::reassigned(epoch, self.nodes.clone(), &owners))
    }

    /// This map after replica `replica` takes its primary's place, at
    /// `epoch`: it owns the primary's slots, and the old primary and the
    /// primary's other replicas become its replicas (the old primary owns
    /// nothing; it rejoins by following the new one).
    pub fn with_failover(&self, replica: &str, epoch: u64) -> Result<ClusterSlotsReply, String> {
        self.validate()?;
        if epoch <= self.epoch {
            return Err(format!(
                "a failover needs a newer epoch than {} (got {epoch})",
                self.epoch
            ));
        }
        let node = self
            .node(replica)
            .ok_or_else(|| format!("no node {replica:?} in the map"))?;
        let primary = node
            .replica_of
            .clone()
            .ok_or_else(|| format!("node {replica:?} is a primary, not a replica"))?;
        let mut next = self.clone();
        next.epoch = epoch;
        let ranges = std::mem::take(
            &mut next
                .nodes
                .iter_mut()
                .find(|n| n.id == primary)
                .expect("validated")
                .ranges,
        );
        for n in &mut next.nodes {
            if n.id == replica {
                n.replica_of = None;
                n.ranges = ranges.clone();
            } else if n.id == primary || n.replica_of.as_deref() == Some(primary.as_str()) {
                n.replica_of = Some(replica.to_string());
            }
        }
        next.validate()?;
        Ok(next)
    }

    /// A map from each slot's owner index.
    pub fn from_owners(epoch: u64, nodes: Vec<(String, String)>, owners: &[u16]) -> Self {
        let nodes = nodes
            .into_iter()
            .map(|(id, addr)| ClusterNode {
                id,
                addr,
                ranges: Vec::new(),
                resp_addr: None,
                replica_of: None,
            })
            .collect();
        Self::reassigned(epoch, nodes, owners)
    }

    /// `nodes` as they are (ids, addresses) with the slots of `owners`.
    fn reassigned(epoch: u64, mut nodes: Vec<ClusterNode>, owners: &[u16]) -> Self {
        for (i, n) in nodes.iter_mut().enumerate() {
            n.ranges = ranges_of((0..SLOTS).filter(|&s| owners[s as usize] == i as u16));
        }
        ClusterSlotsReply { epoch, nodes }
    }

    /// `nodes` (id, addr) sharing all slots evenly, in order: node `i` of
    /// `n` owns `[i·16384/n, (i+1)·16384/n)`.
    pub fn even(epoch: u64, nodes: Vec<(String, String)>) -> Self {
        let n = nodes.len().max(1);
        let owners: Vec<u16> = (0..SLOTS as usize)
            .map(|s| (s * n / SLOTS as usize) as u16)
            .collect();
        Self::from_owners(epoch, nodes, &owners)
    }
}

fn range_text(r: &SlotRange) -> String {
    if r.start == r.end {
        r.start.to_string()
    } else {
        format!("{}-{}", r.start, r.end)
    }
}

impl std::fmt::Display for SlotRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&range_text(self))
    }
}

/// Ascending slots as inclusive ranges.
pub fn ranges_of(slots: impl Iterator<Item = u16>) -> Vec<SlotRange> {
    let mut out: Vec<SlotRange> = Vec::new();
    for s in slots {
        match out.last_mut() {
            Some(r) if r.end.checked_add(1) == Some(s) => r.end = s,
            _ => out.push(SlotRange { start: s, end: s }),
        }
    }
    out
}

/// `"100-199"` (inclusive) or `"9000"`.
pub fn parse_slot_spec(spec: &str) -> Result<SlotRange, String> {
    let num = |t: &str| -> Result<u16, String> {
        let v: u32 = t
            .trim()
            .parse()
            .map_err(|_| format!("{t:?} is not a slot number"))?;
        if v >= SLOTS as u32 {
            return Err(format!("slot {v} is not within 0-{}", SLOTS - 1));
        }
        Ok(v as u16)
    };
    let r = match spec.split_once('-') {
        Some((a, b)) => SlotRange {
            start: num(a)?,
            end: num(b)?,
        },
        None => {
            let s = num(spec)?;
            SlotRange { start: s, end: s }
        }
    };
    if r.start > r.end {
        return Err(format!("range {spec:?} ends before it starts"));
    }
    Ok(r)
}

/// Comma-separated slot specs: `"100-199,300"`.
pub fn parse_slot_specs(specs: &str) -> Result<Vec<SlotRange>, String> {
    specs
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_slot_spec)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, ranges: &[(u16, u16)]) -> ClusterNode {
        ClusterNode {
            id: id.into(),
            addr: format!("{id}:7379"),
            ranges: ranges
                .iter()
                .map(|&(start, end)| SlotRange { start, end })
                .collect(),
            resp_addr: None,
            replica_of: None,
        }
    }

    #[test]
    fn validation() {
        let ok = ClusterSlotsReply {
            epoch: 1,
            nodes: vec![
                node("a", &[(0, 99), (200, 16383)]),
                node("b", &[(100, 199)]),
            ],
        };
        ok.validate().unwrap();
        let partial = ClusterSlotsReply {
            epoch: 1,
            nodes: vec![node("a", &[(0, 99)]), node("b", &[(100, 199)])],
        };
        let e = partial.validate().unwrap_err();
        assert!(
            e.contains("owned by no node") && e.contains("200-16383"),
            "{e}"
        );
        let twice = ClusterSlotsReply {
            epoch: 1,
            nodes: vec![node("a", &[(0, 16383)]), node("b", &[(100, 100)])],
        };
        assert!(twice
            .validate()
            .unwrap_err()
            .contains("slot 100 is owned twice"));
        let dup = ClusterSlotsReply {
            epoch: 1,
            nodes: vec![node("a", &[(0, 99)]), node("a", &[(100, 16383)])],
        };
        assert!(dup.validate().unwrap_err().contains("appears twice"));
        let out = ClusterSlotsReply {
            epoch: 1,
            nodes: vec![node("a", &[(0, 16384)])],
        };
        assert!(out.validate().unwrap_err().contains("not within"));
    }

    #[test]
    fn even_split_and_moves() {
        let m = ClusterSlotsReply::even(
            3,
            vec![
                ("a".into(), "a:1".into()),
                ("b".into(), "b:1".into()),
                ("c".into(), "c:1".into()),
            ],
        );
        m.validate().unwrap();
        assert_eq!(
            m.nodes[0].ranges,
            vec![SlotRange {
                start: 0,
                end: 5461
            }]
        );
        assert_eq!(
            m.nodes[2].ranges,
            vec![SlotRange {
                start: 10923,
                end: 16383
            }]
        );
        let moved = m.with_slot_moved(100, "c", 4).unwrap();
        moved.validate().unwrap();
        assert_eq!(moved.epoch, 4);
        assert_eq!(moved.node_for(100).unwrap().id, "c");
        assert_eq!(moved.nodes[0].ranges.len(), 2);
        assert!(!moved.same_as(&m));
        assert!(m.same_as(&m.normalized()));
        // A move keeps what the map says of each node besides its slots.
        let mut with_resp = m.clone();
        with_resp.nodes[1].resp_addr = Some("b:6379".into());
        let moved = with_resp.with_slot_moved(100, "b", 4).unwrap();
        assert_eq!(moved.nodes[1].resp_addr.as_deref(), Some("b:6379"));
        assert_eq!(moved.nodes[0].resp_addr, None);
    }

    #[test]
    fn resp_addresses() {
        let mut m = ClusterSlotsReply::even(
            1,
            vec![("a".into(), "a:7379".into()), ("b".into(), "b:1".into())],
        );
        // Not said: the binary port + 2.
        assert_eq!(m.nodes[0].resp_addr(), "a:7381");
        m.nodes[1].resp_addr = Some("b:6379".into());
        assert_eq!(m.nodes[1].resp_addr(), "b:6379");
        m.validate().unwrap();
        m.nodes[0].resp_addr = Some("b:6379".into());
        assert!(m.validate().unwrap_err().contains("same RESP address"));
        m.nodes[0].resp_addr = Some("nope".into());
        assert!(m.validate().unwrap_err().contains("not host:port"));
    }

    #[test]
    fn slot_specs() {
        assert_eq!(
            parse_slot_spec("100-199").unwrap(),
            SlotRange {
                start: 100,
                end: 199
            }
        );
        assert_eq!(
            parse_slot_spec("9000").unwrap(),
            SlotRange {
                start: 9000,
                end: 9000
            }
        );
        assert!(parse_slot_spec("16384").is_err());
        assert!(parse_slot_spec("5-4").is_err());
        assert!(parse_slot_spec("x").is_err());
        assert_eq!(parse_slot_specs("1-2, 7").unwrap().len(), 2);
        assert_eq!(
            ranges_of([1, 2, 3, 7, 9, 10].into_iter()),
            vec![
                SlotRange { start: 1, end: 3 },
                SlotRange { start: 7, end: 7 },
                SlotRange { start: 9, end: 10 }
            ]
        );
    }

    fn replica(id: &str, of: &str) -> ClusterNode {
        ClusterNode {
            replica_of: Some(of.into()),
            ..node(id, &[])
        }
    }

    /// Two primaries: "a" with replicas "a2" and "a3", "b" with "b2".
    fn with_replicas(epoch: u64) -> ClusterSlotsReply {
        ClusterSlotsReply {
            epoch,
            nodes: vec![
                node("a", &[(0, 8191)]),
                node("b", &[(8192, 16383)]),
                replica("a2", "a"),
                replica("a3", "a"),
                replica("b2", "b"),
            ],
        }
    }

    #[test]
    fn replicas_and_failover() {
        let map = with_replicas(3);
        map.validate().unwrap();
        let ids = |it: &mut dyn Iterator<Item = &ClusterNode>| -> Vec<String> {
            it.map(|n| n.id.clone()).collect()
        };
        assert_eq!(ids(&mut map.replicas_of("a")), ["a2", "a3"]);

        let next = map.with_failover("a2", 4).unwrap();
        assert_eq!(next.epoch, 4);
        assert_eq!(
            next.node("a2").unwrap().ranges,
            map.node("a").unwrap().ranges
        );
        assert_eq!(next.node("a2").unwrap().replica_of, None);
        assert!(next.node("a").unwrap().ranges.is_empty());
        assert_eq!(ids(&mut next.replicas_of("a2")), ["a", "a3"]);
        assert_eq!(ids(&mut next.replicas_of("b")), ["b2"]);
        assert_eq!(
            next.node("b").unwrap().ranges,
            map.node("b").unwrap().ranges
        );
        // And back.
        let back = next.with_failover("a", 5).unwrap();
        assert!(back.same_as(&with_replicas(5)));

        let err = |m: &ClusterSlotsReply| m.validate().unwrap_err();
        assert!(map
            .with_failover("a", 4)
            .unwrap_err()
            .contains("is a primary"));
        assert!(map
            .with_failover("a2", 3)
            .unwrap_err()
            .contains("newer epoch"));
        assert!(map.with_failover("zz", 4).unwrap_err().contains("no node"));
        assert!(map
            .with_slot_moved(5, "a2", 4)
            .unwrap_err()
            .contains("replica"));
        let mut bad = map.clone();
        bad.nodes[2].replica_of = Some("zz".into());
        assert!(err(&bad).contains("not in the map"), "{}", err(&bad));
        bad.nodes[2].replica_of = Some("a2".into());
        assert!(err(&bad).contains("of itself"));
        bad.nodes[2].replica_of = Some("a3".into());
        assert!(err(&bad).contains("itself a replica"));
        let mut owning = map.clone();
        owning.nodes[1].ranges.truncate(0);
        owning.nodes[4].ranges = vec![SlotRange {
            start: 8192,
            end: 16383,
        }];
        assert!(err(&owning).contains("owns slots"), "{}", err(&owning));
    }
}
