//! The cluster: which node serves which slots, and moving slots between
//! nodes while they serve.
//!
//! **The map** (node ids, addresses, slot ranges, an epoch) comes from the
//! operator — a map file (`[cluster] map_file`, e.g. a Kubernetes
//! ConfigMap), `rush cluster create|apply` (CLUSTER_SETMAP) — never from a
//! vote among nodes. A node accepts a map only with a newer epoch, stores
//! it (meta column family) before using it, and at start runs the newer of
//! the stored map and the file. No map at all: the node owns every slot at
//! epoch 0, as a lone node always did.
//!
//! **Routing** ([`routing`]): a request for a slot this node doesn't serve
//! answers MOVED with the owner's address; the check is one atomic load per
//! request, done when the connection routes it and again when the shard
//! applies it.
//!
//! **Moving a slot** ([`source`] coordinates, [`target`] receives). Every
//! piece of a slot's state is in its key range (`[slot][keyspace]…`), so a
//! slot moves as raw keys. The source moves one slot at a time:
//!
//! 1. It stores "slot S → T, phase copy" (synced) and *freezes* S: requests
//!    for S answer TRYAGAIN (nothing applied: clients resend, even
//!    non-idempotent requests), timers skip it, and a barrier through the
//!    shard writes out buffered state (link visit counters). S's stored data
//!    is now final.
//! 2. It streams S's range to T (MIGRATE_IMPORT chunks, each synced at T,
//!    chunk 0 clearing whatever T had in the range and recording the import
//!    id), plus the code key S's short codes were scrambled with.
//! 3. It stores "phase commit" and sends MIGRATE_COMMIT with the map after
//!    the move (epoch + 1). T checks it got every chunk, then in one synced
//!    write stores the map, remembers the import id as committed and
//!    re-stamps S's unpaid refunds into its own stream; it runs its
//!    services' "slots imported" hooks, then serves S.
//! 4. The source, in one synced write, deletes S's range, stores the new map
//!    and drops its migration record; it runs the "slots dropped" hooks and
//!    answers MOVED for S from then on.
//!
//! After the last slot the source sends the final map to every other node.
//! The epoch goes up by one per slot, and source and target always hold the
//! same map after each step, so no two different maps ever share an epoch.
//!
//! *Why MOVED and not ASK:* a slot is handed over whole, in one step (the
//! freeze lasts as long as one slot's copy, ~1/16384 of the data), so it is
//! never half here, half there; a moved slot is permanently elsewhere, which
//! is MOVED. So Rush has no ASK: its code (7) is retired (PROTOCOL.md,
//! "Error codes").
//!
//! **Crash safety.** Only the target's commit decides a move, and the
//! source's phase record says whether a commit can have been asked for:
//! - phase copy (COMMIT never sent): the target can't have committed; the
//!   source tells it to abort (best effort) and serves S again.
//! - phase commit: the source asks the target (MIGRATE_STATUS, with the
//!   import id): committed → finish step 4; anything else → MIGRATE_ABORT
//!   (refused once committed) → serve S again. While the target can't be
//!   reached S stays frozen: availability of one slot over correctness.
//!
//! A restarted source resumes this from its record in the background. A
//! target keeps an uncommitted import invisible (it doesn't serve S, and
//! indexes and audits cover owned slots only) until an abort or a new
//! import of S clears it. No acknowledged write is lost (everything applied
//! before the freeze is committed and copied; nothing is applied during
//! it), no id is reissued (the sequences' high-water marks are in the
//! range, and the services forget their in-memory segments of a slot that
//! comes or goes), no envelope money is doubled or lost (timers don't touch
//! a frozen slot; refunds are written by exactly one owner at a time and
//! re-stamped where they land).
//!
//! One move at a time per node: a node that is moving slots out refuses
//! CLUSTER_SETMAP and imports meanwhile. Run one migration at a time per
//! cluster, as with `redis-cli --cluster reshard`.
//!
//! **Operating.** A new node joins through a map that lists it with no
//! slots (`rush cluster apply`), then slots move to it (`rush cluster
//! migrate`); the same grows a lone node that already holds data into a
//! cluster (`rush cluster create` refuses to hide its data). A map that
//! reassigns slots without moving them (`create --replace`, `apply`) leaves
//! their data where it was, invisible. After a move the nodes store the new
//! map, not the map file: put it back into the file (`rush cluster slots
//! --toml`) or the file stays older than what the nodes run, which is fine
//! (the newer map wins at start) until someone edits it.
//!
//! Cost: each slot takes about five synced writes whatever its size, so
//! moving thousands of nearly empty slots is bound by fsync latency
//! (~6–10 ms a slot on the test machines).

pub mod config;
pub mod metrics;
pub mod peer;
pub mod routing;
mod source;
pub mod store;
mod target;

pub use config::ClusterConfig;
pub use metrics::ClusterMetrics;

use crate::config::Config;
use crate::metrics::Metrics;
use crate::server::NodeShared;
use crate::shard::route::shard_of_slot;
use crate::shard::ReplySink;
use crate::shard::SlotOp;
use crate::storage::keys;
use crate::storage::Storage;
use anyhow::Context;
use peer::Peers;
use routing::{Map, Routing};
use rush_protocol::cmd::{ClusterNode, ClusterSlotsReply, SlotRange};
use rush_protocol::{ErrorCode, Reply, Request, RushError, SLOTS};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// The cluster side of a node.
pub struct Cluster {
    pub routing: Arc<Routing>,
    pub node_id: String,
    /// What a lone node reports as its address.
    pub advertise: String,
    /// This node's RESP address as a lone node reports it in RESP answers
    /// and INFO (`cluster.resp_advertise`, else the RESP listener's bound
    /// address; none when it is off). In a map, the map's counts.
    pub resp_advertise: Option<String>,
    pub config: ClusterConfig,
    pub peers: Peers,
    storage: Arc<Storage>,
    /// The slot move this node coordinates: one at a time. Held for the
    /// whole move (and by recovery); imports and map changes check it.
    migrating: tokio::sync::Mutex<()>,
    /// Import requests (target side), one at a time: chunk order and the
    /// commit read-modify-write one marker.
    importing: tokio::sync::Mutex<()>,
    /// Every change of the map in force (SETMAP, commit, release), one at a
    /// time: each checks the epoch it replaces.
    map_changes: tokio::sync::Mutex<()>,
    /// Test support: `debug.crash_point` exits the process at a named step
    /// of a move (see [`Cluster::crash_point`]).
    crash: Option<String>,
    /// A move was interrupted (its record was found at start): recovery
    /// runs as soon as the node serves.
    interrupted: bool,
}

/// Who this node is to the cluster: its id, where it listens, and whose
/// replica it is (if it is one).
pub struct Identity<'a> {
    pub node_id: &'a str,
    pub listen: std::net::SocketAddr,
    pub resp: Option<std::net::SocketAddr>,
    /// The primary this node follows: it serves no slot.
    pub standby_of: Option<&'a str>,
}

impl Cluster {
    /// Pick the map to run (newer of stored and file), put it in force and
    /// freeze a slot whose move was interrupted (recovery resumes it).
    pub fn open(
        config: &Config,
        storage: &Arc<Storage>,
        me: Identity,
        metrics: &Metrics,
        peer_token: Option<String>,
    ) -> anyhow::Result<Cluster> {
        let Identity {
            node_id,
            listen,
            resp,
            standby_of,
        } = me;
        let cfg = config.cluster.clone();
        let advertise = cfg.advertise.clone().unwrap_or_else(|| listen.to_string());
        let resp_advertise = cfg
            .resp_advertise
            .clone()
            .or_else(|| resp.map(|a| a.to_string()));
        let map = pick_map(&cfg, storage)?.unwrap_or_else(|| lone_map(node_id, &advertise));
        // A replica serves no slot. In a cluster map it is a node that owns
        // none (requests are MOVED to their owners); a lone replica's map
        // names its primary for all (not stored).
        let map = match standby_of {
            Some(primary) if map.epoch == 0 => standby_map(primary),
            Some(primary)
                if map
                    .nodes
                    .iter()
                    .any(|n| n.id == node_id && !n.ranges.is_empty()) =>
            {
                tracing::warn!(
                    epoch = map.epoch,
                    primary,
                    "the cluster map gives this replica slots (it was a primary when the map was \
                     made): it serves none; apply the map of the failover to it"
                );
                standby_map(primary)
            }
            _ => map,
        };
        let map = Map::new(map, node_id)
            .map_err(|e| anyhow::anyhow!("the cluster map is invalid: {e}"))?;
        if map.epoch() > 0 && map.me.is_none() {
            tracing::warn!(
                node = node_id,
                epoch = map.epoch(),
                "this node is not in the cluster map: it serves no slots"
            );
        }
        let routing = Arc::new(Routing::new(map, node_id, &metrics.cluster));
        let interrupted = store::MigrationRecord::load(storage)?;
        if let Some(rec) = &interrupted {
            tracing::warn!(slot = rec.slot, target = %rec.target_id, "a slot move was interrupted; the slot stays frozen until it is resolved");
            routing.freeze(rec.slot);
        }
        for (k, _) in storage.meta_scan(keys::meta::CLUSTER_IMPORT.as_bytes())? {
            tracing::info!(record = %String::from_utf8_lossy(&k), "an uncommitted import is on disk (invisible until its source commits or aborts it)");
        }
        let peers = Peers::of_cluster(node_id, peer_token, &cfg)?;
        Ok(Cluster {
            routing,
            node_id: node_id.to_string(),
            advertise,
            resp_advertise,
            peers,
            storage: storage.clone(),
            migrating: tokio::sync::Mutex::new(()),
            importing: tokio::sync::Mutex::new(()),
            map_changes: tokio::sync::Mutex::new(()),
            crash: config.debug.crash_point.clone(),
            interrupted: interrupted.is_some(),
            config: cfg,
        })
    }

    /// Test support: end the process right here, like `kill -9`, when the
    /// config names this point (`debug.crash_point`).
    pub fn crash_point(&self, name: &str) {
        if self.crash.as_deref() == Some(name) {
            tracing::error!(point = name, "debug.crash_point reached: exiting now");
            // SAFETY: `_exit` ends the process at once, like a kill; nothing
            // of this process is used afterwards.
            unsafe { libc::_exit(86) };
        }
    }

    /// Where Redis clients reach node `n` of `map`: the map's `resp_addr`;
    /// for a lone node (epoch 0) without one, this node's RESP listener;
    /// else the default, `addr`'s port + 2.
    pub fn resp_addr(&self, map: &Map, n: &ClusterNode) -> String {
        match (&n.resp_addr, &self.resp_advertise) {
            (None, Some(own)) if map.epoch() == 0 && n.id == self.node_id => own.clone(),
            _ => n.resp_addr(),
        }
    }

    /// The RESP address of the node at binary address `addr` in the map in
    /// force (a MOVED answer's), by the rule of [`Cluster::resp_addr`].
    pub fn resp_addr_of(&self, addr: &str) -> String {
        let map = self.routing.map();
        match map.map.nodes.iter().find(|n| n.addr == addr) {
            Some(n) => self.resp_addr(&map, n),
            None => ClusterNode {
                id: String::new(),
                addr: addr.to_string(),
                ranges: Vec::new(),
                resp_addr: None,
                replica_of: None,
            }
            .resp_addr(),
        }
    }

    /// INFO rows.
    pub fn info(&self) -> Vec<(&'static str, String)> {
        let map = self.routing.map();
        vec![
            ("cluster_epoch", map.epoch().to_string()),
            ("cluster_nodes", map.map.nodes.len().to_string()),
            ("cluster_slots_owned", map.owned_count().to_string()),
            ("advertise", self.advertise.clone()),
            (
                "resp_advertise",
                self.resp_advertise.clone().unwrap_or_default(),
            ),
        ]
    }
}

/// The map a node starts with: the newer of the stored one and the map
/// file (a newer file is stored); none when there is neither.
fn pick_map(cfg: &ClusterConfig, storage: &Storage) -> anyhow::Result<Option<ClusterSlotsReply>> {
    let stored = store::load_map(storage).context("reading the stored cluster map")?;
    let file = match &cfg.map_file {
        Some(path) => {
            Some(rush_protocol::cmd::cluster::file::load_map(path).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    let map = match (stored, file) {
        (None, None) => return Ok(None),
        (Some(s), None) => s,
        (None, Some(f)) => {
            storage.meta_put(keys::meta::CLUSTER_MAP, &store::encode_map(&f))?;
            tracing::info!(epoch = f.epoch, "cluster map from the map file");
            f
        }
        (Some(s), Some(f)) if f.epoch > s.epoch => {
            storage.meta_put(keys::meta::CLUSTER_MAP, &store::encode_map(&f))?;
            tracing::info!(
                file = f.epoch,
                stored = s.epoch,
                "the map file is newer than the stored map: using it"
            );
            f
        }
        (Some(s), Some(f)) => {
            if f.epoch == s.epoch && !f.same_as(&s) {
                tracing::warn!(
                    epoch = s.epoch,
                    "the map file differs from the stored map of the same epoch; keeping the \
                     stored one (bump the file's epoch to replace it)"
                );
            } else if f.epoch < s.epoch {
                tracing::info!(
                    file = f.epoch,
                    stored = s.epoch,
                    "the stored map is newer than the map file (slots moved since): using it"
                );
            }
            s
        }
    };
    Ok(Some(map))
}

/// Before a node of a cluster map serves: ask the other nodes of its map
/// for theirs, and store the newest if it is newer. A node that was down
/// may have missed a failover (it would serve slots that are another's
/// now, or not know it is a replica) or a slot move. Each node is given
/// `cluster.peer_timeout_ms`, all at once; a node that doesn't answer is
/// skipped. Not while a slot move this node coordinated is unresolved (its
/// recovery decides the map).
pub async fn catch_up(
    config: &Config,
    storage: &Arc<Storage>,
    node_id: &str,
    peer_token: Option<String>,
) -> anyhow::Result<()> {
    let cfg = config.cluster.clone();
    let (cfg2, st) = (cfg.clone(), storage.clone());
    let picked = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let map = pick_map(&cfg2, &st)?;
        let moving = store::MigrationRecord::load(&st)?.is_some();
        Ok(map.filter(|m| m.epoch > 0 && !moving))
    })
    .await
    .context("cluster map task")??;
    let Some(map) = picked else {
        return Ok(());
    };
    let peers = Peers::of_cluster(node_id, peer_token, &cfg)?;
    let asks = map
        .nodes
        .iter()
        .filter(|n| n.id != node_id)
        .map(|n| peers.call(&n.addr, &rush_protocol::cmd::ClusterSlots {}));
    let answers = tokio::time::timeout(
        Duration::from_millis(cfg.peer_timeout_ms),
        futures_util::future::join_all(asks),
    )
    .await
    .unwrap_or_default();
    let newest = answers
        .into_iter()
        .filter_map(Result::ok)
        .filter(|m| m.epoch > map.epoch && m.validate().is_ok())
        .max_by_key(|m| m.epoch);
    if let Some(m) = newest {
        tracing::warn!(
            stored = map.epoch,
            newer = m.epoch,
            "another node runs a newer cluster map: using it (this node missed a map change \
             while it was down)"
        );
        let (st, raw) = (storage.clone(), store::encode_map(&m));
        tokio::task::spawn_blocking(move || st.meta_put(keys::meta::CLUSTER_MAP, &raw))
            .await
            .context("cluster map task")??;
    }
    Ok(())
}

/// The map of a node that was never given one: it owns every slot.
/// A replica's map: every slot its primary's, at `addr` (its replication
/// listener until the follower learns the primary's protocol address).
pub fn standby_map(addr: &str) -> ClusterSlotsReply {
    lone_map("primary", addr)
}

fn lone_map(node_id: &str, advertise: &str) -> ClusterSlotsReply {
    ClusterSlotsReply {
        epoch: 0,
        nodes: vec![ClusterNode {
            id: node_id.to_string(),
            addr: advertise.to_string(),
            ranges: vec![SlotRange {
                start: 0,
                end: SLOTS - 1,
            }],
            // Binary clients need none; RESP answers name the listener's
            // own address (`Cluster::resp_advertise`). Left out, the reply
            // is what a client of the release before reads.
            resp_addr: None,
            replica_of: None,
        }],
    }
}

/// Answer a cluster request (admin; runs as a node task: these wait on
/// storage, shards and peers).
pub async fn handle(node: Arc<NodeShared>, request: Request, sink: ReplySink) {
    let result = match request {
        Request::ClusterSetMap(r) => set_map(&node, r.map).await.map(Reply::ClusterSetMap),
        Request::ClusterMigrate(r) => source::migrate(&node, r).await.map(Reply::ClusterMigrate),
        Request::MigrateImport(r) => target::import(&node, r).await.map(Reply::MigrateImport),
        Request::MigrateCommit(r) => target::commit(&node, r).await.map(Reply::MigrateCommit),
        Request::MigrateAbort(r) => target::abort(&node, r).await.map(Reply::MigrateAbort),
        Request::MigrateStatus(r) => target::status(&node, r).await.map(Reply::MigrateStatus),
        other => Err(RushError::internal(format!(
            "{} is not a cluster request",
            other.opcode().name()
        ))),
    };
    let new_map = matches!(result, Ok(Reply::ClusterSetMap(_)));
    sink.send(result);
    // A primary the map now names a replica (a failover away from it):
    // after the answer, it restarts in place and follows its new primary.
    let me = &node.cluster.node_id;
    let named_replica = || {
        let map = node.cluster.routing.map();
        map.map.node(me).is_some_and(|n| n.replica_of.is_some())
    };
    if new_map && node.replication.follow.is_none() && named_replica() {
        let demoted = crate::replication::standby_of(&node.config, &node.storage, me);
        if let Ok(Some(s)) = demoted {
            tracing::warn!(primary = %s.primary, "the cluster map makes this node a replica: restarting in place to follow");
            let _ = node.replication.restart.send(true);
        }
    }
}

fn conflict(message: impl Into<String>) -> RushError {
    RushError::new(ErrorCode::Conflict, message)
}

/// Run blocking storage work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, RushError> + Send + 'static,
) -> Result<T, RushError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RushError::internal(format!("storage task: {e}")))?
}

fn storage_error(e: impl std::fmt::Display) -> RushError {
    RushError::unavailable(format!("storage: {e}"))
}

/// Send a cluster operation to a shard and wait for its answer.
async fn shard_op<T>(
    node: &NodeShared,
    shard: usize,
    make: impl FnOnce(oneshot::Sender<Result<T, RushError>>) -> SlotOp,
) -> Result<T, RushError> {
    let (tx, rx) = oneshot::channel();
    let mut op = make(tx);
    loop {
        match node.shards[shard].slot_op(op) {
            Ok(()) => break,
            // A full queue: wait for room rather than fail a move.
            Err(Some(back)) => {
                op = back;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Err(None) => return Err(RushError::unavailable("the shard is shutting down")),
        }
    }
    rx.await
        .map_err(|_| RushError::unavailable("the shard stopped before answering"))?
}

/// The shard of a slot on this node.
fn shard_of(node: &NodeShared, slot: u16) -> usize {
    shard_of_slot(slot, node.shards.len())
}

/// CLUSTER_SETMAP: put a newer map in force.
pub async fn set_map(node: &Arc<NodeShared>, map: ClusterSlotsReply) -> Result<u64, RushError> {
    let c = &node.cluster;
    map.validate().map_err(RushError::bad_request)?;
    if map.epoch == 0 {
        return Err(RushError::bad_request(
            "a map's epoch must be at least 1 (0 means \"no map\")",
        ));
    }
    let _moving = c
        .migrating
        .try_lock()
        .map_err(|_| conflict("this node is moving a slot; apply the map when the move is done"))?;
    let _changes = c.map_changes.lock().await;
    let current = c.routing.map();
    if map.epoch < current.epoch() || (map.epoch == current.epoch() && !map.same_as(&current.map)) {
        return Err(conflict(format!(
            "this node runs epoch {}; a map must have a newer epoch to replace it (got {})",
            current.epoch(),
            map.epoch
        )));
    }
    if map.epoch == current.epoch() {
        return Ok(map.epoch);
    }
    {
        let storage = c.storage.clone();
        blocking(move || {
            if store::MigrationRecord::load(&storage)
                .map_err(storage_error)?
                .is_some()
            {
                return Err(conflict(
                    "a slot move is being recovered on this node; apply the map when it is done",
                ));
            }
            Ok(())
        })
        .await?;
    }
    let me = &c.node_id;
    if let Some(f) = &node.replication.follow {
        if map.node(me).is_some_and(|n| !n.ranges.is_empty()) {
            return Err(RushError::bad_request(format!(
                "this node is a replica (of {}): a map can't give it slots until it is promoted \
                 (`rush cluster failover {me}` does both)",
                f.primary
            )));
        }
    }
    let next = Map::new(map.clone(), me).map_err(RushError::bad_request)?;
    // Slots gained and lost, per shard.
    let shards = node.shards.len();
    let mut gained = vec![Vec::new(); shards];
    let mut lost = vec![Vec::new(); shards];
    for slot in 0..SLOTS {
        match (current.is_mine(slot), next.is_mine(slot)) {
            (false, true) => gained[shard_of_slot(slot, shards)].push(slot),
            (true, false) => lost[shard_of_slot(slot, shards)].push(slot),
            _ => {}
        }
    }
    // Gained slots are made ready (refunds re-stamped, indexes loaded)
    // before the map that routes them here is stored and put in force...
    for (shard, slots) in gained.into_iter().enumerate() {
        if !slots.is_empty() {
            shard_op(node, shard, |done| SlotOp::Gained { slots, done }).await?;
        }
    }
    {
        let storage = c.storage.clone();
        let raw = store::encode_map(&map);
        blocking(move || {
            storage
                .meta_put(keys::meta::CLUSTER_MAP, &raw)
                .map_err(storage_error)
        })
        .await?;
    }
    c.routing
        .install(map.clone())
        .map_err(RushError::bad_request)?;
    // ...and lost ones are forgotten once requests no longer reach them.
    for (shard, slots) in lost.into_iter().enumerate() {
        if !slots.is_empty() {
            shard_op(node, shard, |done| SlotOp::Lost { slots, done }).await?;
        }
    }
    tracing::info!(
        epoch = map.epoch,
        slots = c.routing.map().owned_count(),
        "cluster map applied"
    );
    Ok(map.epoch)
}

/// At start: resume a slot move the node was coordinating when it stopped.
pub fn recover_at_start(node: &Arc<NodeShared>) {
    if node.cluster.interrupted {
        spawn_recovery(node);
    }
}

/// Resolve the slot move this node's record describes, in the background.
pub fn spawn_recovery(node: &Arc<NodeShared>) {
    let node = node.clone();
    let tasks = node.tasks.clone();
    tasks.spawn(async move { source::recover(&node).await });
}
