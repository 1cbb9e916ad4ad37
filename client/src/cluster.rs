//! Cluster administration: creating a cluster, applying maps, moving slots.
//! (Routing itself is in `routing`; every `Client` routes.)

use crate::{Client, ClientError, ClientOptions};
use rush_protocol::cmd::cluster::ranges_of;
use rush_protocol::cmd::{
    ClusterMigrate, ClusterMigrateReply, ClusterSetMap, ClusterSlotsReply, Info, ReplPromote,
    ReplStatus, SlotRange,
};
use std::collections::BTreeMap;

/// What [`Client::cluster_failover`] did.
#[derive(Debug)]
pub struct Failover {
    /// The map now in force on the new primary.
    pub map: ClusterSlotsReply,
    /// false: the replica had been promoted already (a second run).
    pub promoted: bool,
    /// Each node (by id) and whether it took the map: its epoch, or why
    /// not.
    pub nodes: Vec<(String, Result<u64, ClientError>)>,
}

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

    /// Fail over to the replica with id `replica` (admin): the map's next
    /// epoch gives it its primary's slots and makes the old primary (and
    /// the primary's other replicas) its replicas. The replica is promoted
    /// (unless it was already: running this again after a partial failure
    /// goes on where it stopped), takes the map once it serves again
    /// (within `wait`), then every other node is sent it. The old primary
    /// is usually down: the nodes that did not take the map are in the
    /// answer, to apply it to when they are back.
    pub async fn cluster_failover(
        &self,
        replica: &str,
        wait: std::time::Duration,
    ) -> Result<Failover, ClientError> {
        let map = self.cluster_slots().await?;
        let next = map
            .with_failover(replica, map.epoch + 1)
            .map_err(ClientError::Cluster)?;
        let addr = map
            .node(replica)
            .expect("with_failover found it")
            .addr
            .clone();
        let status = self.call_on(&addr, ReplStatus {}).await?;
        let promoted = match status.get("role") {
            Some("replica") => {
                self.call_on(&addr, ReplPromote {}).await?;
                true
            }
            _ => false,
        };
        // A promoted node restarts its serving: its listener comes back in
        // a moment.
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match self.cluster_setmap_on(&addr, next.clone()).await {
                Ok(_) => break,
                Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            }
        }
        let mut nodes = vec![(replica.to_string(), Ok(next.epoch))];
        for n in next.nodes.iter().filter(|n| n.id != replica) {
            let r = self.cluster_setmap_on(&n.addr, next.clone()).await;
            nodes.push((n.id.clone(), r));
        }
        Ok(Failover {
            map: next,
            promoted,
            nodes,
        })
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
        self.cluster_migrate_with(slots, to, |_| {}).await
    }

    /// [`Client::cluster_migrate`], telling `progress` how far it got: once
    /// before the first slot moves, then after every step. An owner moves
    /// its slots in steps of about a hundredth of the whole move (each a
    /// CLUSTER_MIGRATE of its own; the node moves one slot at a time either
    /// way), so a long move reports as it goes. The request timeout bounds
    /// each step.
    pub async fn cluster_migrate_with(
        &self,
        slots: &[SlotRange],
        to: &str,
        mut progress: impl FnMut(&MigrateProgress),
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
        for owned in by_owner.values_mut() {
            owned.sort_unstable();
            owned.dedup();
        }
        let mut done = MigrateProgress {
            slots_total: by_owner.values().map(|s| s.len() as u32).sum(),
            slots_moved: 0,
            keys: 0,
            bytes: 0,
            epoch: map.epoch,
        };
        let step = (done.slots_total as usize).div_ceil(MIGRATE_STEPS).max(1);
        progress(&done);
        let mut unsynced = Vec::new();
        for (owner, owned) in by_owner {
            for chunk in owned.chunks(step) {
                let reply = self
                    .call_on(
                        &owner,
                        ClusterMigrate {
                            slots: ranges_of(chunk.iter().copied()),
                            to: to.to_string(),
                        },
                    )
                    .await
                    .map_err(|e| {
                        if done.slots_moved == 0 {
                            return e;
                        }
                        ClientError::Cluster(format!(
                            "{} of {} slots moved to {to}, then {owner}: {e}",
                            done.slots_moved, done.slots_total
                        ))
                    })?;
                done.slots_moved += reply.slots;
                done.keys += reply.keys;
                done.bytes += reply.bytes;
                done.epoch = done.epoch.max(reply.epoch);
                // Each step pushes the newest map to every node: the nodes
                // still behind are those that missed the last push.
                unsynced = reply.unsynced;
                progress(&done);
            }
        }
        unsynced.sort();
        unsynced.dedup();
        let _ = self.refresh_map_from(self.addr()).await;
        Ok(ClusterMigrateReply {
            slots: done.slots_moved,
            keys: done.keys,
            bytes: done.bytes,
            epoch: done.epoch,
            unsynced,
        })
    }
}

/// How far a [`Client::cluster_migrate_with`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrateProgress {
    /// Slots to move (those the target owns already not counted).
    pub slots_total: u32,
    pub slots_moved: u32,
    /// Keys and bytes copied so far.
    pub keys: u64,
    pub bytes: u64,
    /// The newest map epoch so far (one up per slot moved).
    pub epoch: u64,
}

/// About how many steps a move is cut into (see `cluster_migrate_with`):
/// enough for progress to move by 1 %, few enough that the extra round
/// trips and map pushes are nothing next to copying the slots.
const MIGRATE_STEPS: usize = 100;

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
    // Each node's RESP address as it reports it (INFO's resp_advertise).
    let mut resp = Vec::with_capacity(addrs.len());
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
        resp.push(info.get("resp_advertise").map(str::to_string));
    }
    let mut map = ClusterSlotsReply::even(epoch + 1, nodes);
    // The map names a RESP address only where it isn't the default (the
    // binary port + 2), so maps of the default layout stay as readable to
    // older nodes as before.
    for (n, r) in map.nodes.iter_mut().zip(resp) {
        n.resp_addr = r.filter(|r| !r.is_empty() && *r != n.resp_addr());
    }
    map.validate().map_err(ClientError::Cluster)?;
    for n in &map.nodes {
        client.cluster_setmap_on(&n.addr, map.clone()).await?;
    }
    Ok(map)
}
