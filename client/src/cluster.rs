//! Cluster administration: creating a cluster, applying maps, moving slots.
//! (Routing itself is in `routing`; every `Client` routes.)

use crate::{Client, ClientError, ClientOptions};
use rush_protocol::cmd::cluster::ranges_of;
use rush_protocol::cmd::{
    ClusterMigrate, ClusterMigrateReply, ClusterSetMap, ClusterSlotsReply, Info, SlotRange,
};
use std::collections::BTreeMap;

impl Client {
    /// Install `map` on the node at `addr` (admin): its epoch must be newer
    /// than the node's. Returns the node's epoch.
    pub async fn cluster_setmap_on(
        &self,
        addr: &str,
        map: ClusterSlotsReply,
    ) -> Result<u64, ClientError> {
        self.call_on(addr, ClusterSetMap { map }).await
    }

    /// Send `map` to every node it names (admin): each node's outcome.
    pub async fn cluster_apply(
        &self,
        map: &ClusterSlotsReply,
    ) -> Vec<(String, Result<u64, ClientError>)> {
        let mut out = Vec::new();
        for n in &map.nodes {
            let r = self.cluster_setmap_on(&n.addr, map.clone()).await;
            out.push((n.addr.clone(), r));
        }
        let _ = self.refresh_map_from(self.addr()).await;
        out
    }

    /// Move `slots` to the node with id `to` (admin): each slot's current
    /// owner is asked to move it (CLUSTER_MIGRATE), one owner after the
    /// other. Slots `to` owns already are skipped. Set a request timeout
    /// long enough for the data to be copied.
    pub async fn cluster_migrate(
        &self,
        slots: &[SlotRange],
        to: &str,
    ) -> Result<ClusterMigrateReply, ClientError> {
        self.refresh_map_from(self.addr()).await?;
        let map = self.cluster_map().ok_or_else(|| {
            ClientError::Cluster("the node has no cluster map: create one first".into())
        })?;
        if map.node(to).is_none() {
            return Err(ClientError::Cluster(format!(
                "no node {to:?} in the map (epoch {})",
                map.epoch
            )));
        }
        // Owner address → its slots, in order.
        let mut by_owner: BTreeMap<String, Vec<u16>> = BTreeMap::new();
        for r in slots {
            for s in r.start..=r.end {
                let owner = map
                    .node_for(s)
                    .ok_or_else(|| ClientError::Cluster(format!("slot {s} has no owner")))?;
                if owner.id != to {
                    by_owner.entry(owner.addr.clone()).or_default().push(s);
                }
            }
        }
        let mut total = ClusterMigrateReply {
            epoch: map.epoch,
            ..Default::default()
        };
        for (owner, mut owned) in by_owner {
            owned.sort_unstable();
            let reply = self
                .call_on(
                    &owner,
                    ClusterMigrate {
                        slots: ranges_of(owned.into_iter()),
                        to: to.to_string(),
                    },
                )
                .await?;
            total.slots += reply.slots;
            total.keys += reply.keys;
            total.bytes += reply.bytes;
            total.epoch = total.epoch.max(reply.epoch);
            total.unsynced.extend(reply.unsynced);
        }
        total.unsynced.sort();
        total.unsynced.dedup();
        let _ = self.refresh_map_from(self.addr()).await;
        Ok(total)
    }
}

/// Create a cluster of the nodes at `addrs` (admin): read each node's id,
/// share the 16384 slots evenly among them in the order given, and send
/// the map — epoch one above the highest any of them runs — to every node.
/// Nodes that already run a map are refused unless `replace`: replacing a
/// map reassigns slots without moving their data.
pub async fn create(
    addrs: &[String],
    replace: bool,
    opts: ClientOptions,
) -> Result<ClusterSlotsReply, ClientError> {
    let Some(first) = addrs.first() else {
        return Err(ClientError::Cluster("name at least one node".into()));
    };
    let client = Client::connect_with(first, opts).await?;
    let mut nodes = Vec::with_capacity(addrs.len());
    let mut epoch = 0;
    for addr in addrs {
        let info = client.call_on(addr, Info {}).await?;
        let id = info
            .get("node_id")
            .ok_or_else(|| ClientError::Cluster(format!("{addr} did not say its node id")))?
            .to_string();
        let current = client
            .call_on(addr, rush_protocol::cmd::ClusterSlots {})
            .await?;
        if current.epoch > 0 && !replace {
            return Err(ClientError::Cluster(format!(
                "{addr} (node {id}) already runs a cluster map (epoch {}); pass --replace to \
                 replace it (slots are reassigned, their data is not moved)",
                current.epoch
            )));
        }
        // Data on a node that was running alone would be left in slots the
        // new map gives to other nodes, invisible: grow a cluster from such
        // a node by moving slots instead (apply a map that adds nodes
        // owning no slots, then `cluster migrate`).
        let keys: u64 = info
            .get("keys_estimate")
            .and_then(|k| k.parse().ok())
            .unwrap_or(0);
        if keys > 0 && current.epoch == 0 && !replace {
            return Err(ClientError::Cluster(format!(
                "{addr} (node {id}) already holds data (about {keys} keys): a new map would hide \
                 the keys of slots it gives to other nodes. Grow a cluster from it by applying a \
                 map that adds nodes with no slots and moving slots to them \
                 (rush cluster migrate), or pass --replace"
            )));
        }
        epoch = epoch.max(current.epoch);
        if let Some((other, _)) = nodes.iter().find(|(i, _): &&(String, String)| *i == id) {
            return Err(ClientError::Cluster(format!(
                "{addr} is node {other:?} again: every address must be another node"
            )));
        }
        nodes.push((id, addr.clone()));
    }
    let map = ClusterSlotsReply::even(epoch + 1, nodes);
    map.validate().map_err(ClientError::Cluster)?;
    for n in &map.nodes {
        client.cluster_setmap_on(&n.addr, map.clone()).await?;
    }
    Ok(map)
}
