//! Replication: a second node holding a copy of a primary's data, that an
//! operator promotes when the primary is lost (`rush replication promote`).
//! Decided from outside, never by the nodes among themselves.
//!
//! **What is replicated.** Each shard's stream of group commits
//! ([`record`]), in commit order — not RocksDB's WAL: with `storage.commit
//! = "log"` a commit reaches RocksDB later, in sorted runs written without
//! the WAL, so the WAL holds neither every write nor the commit order. The
//! shard's commit is also where every write of the node's data passes
//! once, keys, values and expiries, ID high-water marks included; the node
//! records a copy needs (the short-code key, purchase-limit policies,
//! refund floors) travel whole beside it when they change.
//!
//! **How.** The replica pulls over the binary protocol, with the admin
//! token: REPL_SNAPSHOT pages through a consistent snapshot of the whole
//! node ([`source`]), then REPL_FETCH long-polls the records after its
//! positions ([`follow`]). A replica that restarts goes on from what it
//! applied; one the primary can no longer serve from its backlog (it fell
//! behind, or the primary restarted) bootstraps again by itself.
//!
//! **Acknowledgement.** Asynchronous, as Redis and Kvrocks: the primary
//! answers a write once it is durable on its own disk, and a replica
//! follows within milliseconds when it keeps up. A failover can lose the
//! writes acknowledged in that window (README, "Replicas").
//!
//! **Scope.** A primary and its replica, alone or in a cluster map (where
//! the replica is a node with `replica_of` and no slots, and `rush cluster
//! failover` gives it its primary's slots). A replica serves no slot
//! (requests are MOVED to their owner), runs no timers (refunds and expiry
//! sweeps are the primary's, and arrive as its writes) and can't be
//! followed itself. Slots a primary imports reach its replicas as records
//! of the import's writes ([`Source::append_outside`]).

pub mod follow;
pub mod listen;
pub mod record;
pub mod source;

use crate::server::NodeShared;
use crate::shard::ReplySink;
use crate::storage::keys::meta;
use crate::storage::{Storage, StorageError, WriteBatch};
use rush_protocol::cmd::{InfoReply, ReplFetchReply};
use rush_protocol::{Reply, Request, RushError};
use serde::Deserialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

pub use source::Source;

/// The longest a fetch is held open waiting for records.
const MAX_FETCH_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplicationConfig {
    /// Where a primary serves its replicas (`host:port`; empty: nowhere,
    /// no replica can follow this node). Its own listener, served off the
    /// shards (`listen`).
    pub listen: String,
    /// `host:port` of the primary's replication listener this node
    /// follows; empty: this node is a primary, unless the cluster map names
    /// it a replica ([`standby_of`]). Ignored once the node was promoted (it
    /// stays a primary until a newer map names it a replica, or it starts
    /// on an empty data directory).
    pub replica_of: String,
    /// MiB of committed records a primary keeps for its replicas to fetch
    /// (split over the shards; oldest dropped first). A replica that falls
    /// further behind bootstraps again.
    pub backlog_mb: usize,
    /// 1: a durable write is answered only once a replica holds it durably
    /// too (one round trip per group commit, not per write); 0: once it is
    /// on this node's disk (asynchronous, as Redis and Kvrocks).
    pub min_acks: u8,
    /// With `min_acks = 1`: how long a group commit waits for the replica.
    pub ack_timeout_ms: u64,
    /// With `min_acks = 1`: what a write no replica acknowledged in time
    /// is answered. false: UNAVAILABLE (the write is on this node only);
    /// true: done, as if asynchronous (`rush_replication_degraded_total`
    /// counts them, and an alert says so).
    pub degrade: bool,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            listen: String::new(),
            replica_of: String::new(),
            backlog_mb: 64,
            min_acks: 0,
            ack_timeout_ms: 1_000,
            degrade: false,
        }
    }
}

impl ReplicationConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.min_acks > 1 {
            return Err(format!(
                "replication.min_acks is {}; a node has one replica: 0 (asynchronous) or 1",
                self.min_acks
            ));
        }
        if self.min_acks > 0 && self.ack_timeout_ms == 0 {
            return Err("replication.ack_timeout_ms must be positive with min_acks = 1".into());
        }
        Ok(())
    }
}

/// The node's replication state.
pub struct Replication {
    pub source: Arc<Source>,
    /// On a replica: the follower.
    pub follow: Option<Arc<follow::Follow>>,
    stop_follow: watch::Sender<bool>,
    follow_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Turns true when the node must restart its serving in place (a
    /// promotion); `server::run` does it.
    pub restart: watch::Sender<bool>,
    /// When this node was promoted from a replica (unix ms).
    pub promoted_at: Option<u64>,
    /// The replication listener's bound address.
    pub listen_addr: std::sync::OnceLock<std::net::SocketAddr>,
}

/// Whose replica this start of the node is.
#[derive(Debug, Clone)]
pub struct Standby {
    /// `replication.replica_of` (the primary's replication listener), or
    /// the id of the node the cluster map says this one is a replica of.
    pub primary: String,
    /// From the map: each connection looks the primary up in the map in
    /// force (its replication listener is the port its INFO names, on its
    /// map address's host), so a replica follows a failover of its primary
    /// to another of its replicas.
    pub from_map: bool,
}

/// Whether this start of the node is a replica: configured as one and not
/// promoted since, or named a replica (`replica_of`) by the cluster map it
/// starts with (a map newer than its promotion, if it was promoted: the
/// map of a failover away from it).
pub fn standby_of(
    config: &crate::Config,
    storage: &Storage,
    node_id: &str,
) -> anyhow::Result<Option<Standby>> {
    let promoted = promoted(storage)?;
    let primary = config.replication.replica_of.trim();
    if !primary.is_empty() {
        if let Some((at, _)) = promoted {
            tracing::warn!(
                replica_of = primary,
                promoted_at_ms = at,
                "this node was promoted to primary: replication.replica_of is ignored (to follow \
                 again, start it on an empty data directory)"
            );
        } else {
            return Ok(Some(Standby {
                primary: primary.to_string(),
                from_map: false,
            }));
        }
    }
    let Some(map) = crate::cluster::store::load_map(storage)? else {
        return Ok(None);
    };
    let Some(of) = map.node(node_id).and_then(|n| n.replica_of.clone()) else {
        return Ok(None);
    };
    if promoted.is_some_and(|(_, epoch)| map.epoch <= epoch) {
        return Ok(None);
    }
    Ok(Some(Standby {
        primary: of,
        from_map: true,
    }))
}

/// When this node was promoted (ms) and the epoch of its map then.
fn promoted(storage: &Storage) -> anyhow::Result<Option<(u64, u64)>> {
    let Some(raw) = storage.meta_get(meta::REPLICATION_PROMOTED)? else {
        return Ok(None);
    };
    let word = |i: usize| {
        raw.get(i..i + 8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
    };
    // A record of the release before holds the time only (a lone pair: its
    // map had epoch 0).
    Ok(word(0).map(|at| (at, word(8).unwrap_or(0))))
}

fn promoted_at(storage: &Storage) -> anyhow::Result<Option<u64>> {
    Ok(promoted(storage)?.map(|(at, _)| at))
}

impl Replication {
    pub fn new(
        config: &crate::Config,
        storage: &Storage,
        standby: Option<&Standby>,
    ) -> anyhow::Result<Replication> {
        let (stop_follow, _) = watch::channel(false);
        Ok(Replication {
            source: Arc::new(Source::new(
                storage.shards(),
                config.replication.backlog_mb << 20,
                config.replication.min_acks > 0,
            )),
            follow: standby.map(|s| Arc::new(follow::Follow::new(s.clone()))),
            stop_follow,
            follow_task: Mutex::new(None),
            restart: watch::channel(false).0,
            promoted_at: promoted_at(storage)?,
            listen_addr: std::sync::OnceLock::new(),
        })
    }

    /// On a replica: start following (a node task).
    pub fn start_following(&self, node: &Arc<NodeShared>) {
        let Some(follow) = &self.follow else {
            return;
        };
        let _ = self.stop_follow.send(false);
        let task = node.runtime.spawn(follow::run(
            follow.clone(),
            node.storage.clone(),
            node.cluster.peers.clone(),
            node.cluster.routing.clone(),
            self.stop_follow.subscribe(),
        ));
        *self.follow_task.lock().expect("not poisoned") = Some(task);
    }

    /// Stop following and wait until the follower has let go.
    pub async fn stop_following(&self) {
        let _ = self.stop_follow.send(true);
        let task = self.follow_task.lock().expect("not poisoned").take();
        if let Some(t) = task {
            let _ = t.await;
        }
    }

    pub fn role(&self) -> &'static str {
        if self.follow.is_some() {
            "replica"
        } else {
            "primary"
        }
    }

    /// The replication gauges, before a scrape renders.
    pub fn publish(&self, config: &crate::Config, m: &crate::metrics::Metrics) {
        m.replication_is_replica
            .set(i64::from(self.follow.is_some()));
        match &self.follow {
            Some(f) => {
                let s = f.snapshot();
                m.replication_acks_required.set(0);
                m.replication_lag_records.set(s.lag_records() as i64);
                m.replication_lag_seconds
                    .set(s.behind_since.map_or(0.0, |t| t.elapsed().as_secs_f64()));
                m.replication_replica_connected.set(0);
                m.replication_replica_lag_bytes.set(0);
            }
            None => {
                m.replication_acks_required
                    .set(i64::from(config.replication.min_acks));
                let last = self.source.last_fetch.lock().expect("not poisoned").clone();
                let connected = last
                    .as_ref()
                    .is_some_and(|l| l.at.elapsed() < source::REPLICA_GONE_AFTER);
                m.replication_replica_connected.set(i64::from(connected));
                let heads = self.source.heads();
                let lag = last.as_ref().map_or(0, |l| {
                    heads
                        .iter()
                        .zip(&l.positions)
                        .map(|(h, p)| h.saturating_sub(*p))
                        .sum::<u64>()
                });
                m.replication_lag_records.set(lag as i64);
                m.replication_lag_seconds.set(0.0);
                let bytes = last.map_or(0, |l| self.source.bytes_after(&l.positions));
                m.replication_replica_lag_bytes.set(bytes as i64);
            }
        }
    }

    /// INFO's and REPL_STATUS's rows.
    pub fn rows(&self, storage: &Storage) -> Vec<(&'static str, String)> {
        let mut rows = vec![("role", self.role().to_string())];
        if let Some(f) = &self.follow {
            let s = f.snapshot();
            let applied = follow::Applied::load(storage);
            rows.extend([
                ("replica_of", f.primary.clone()),
                ("replication_state", s.state.to_string()),
                (
                    "replication_bootstrapped",
                    applied.as_ref().is_some_and(|a| a.complete).to_string(),
                ),
                ("replication_primary_run", format!("{:016x}", s.run_id)),
                ("replication_positions", join(&s.positions)),
                ("replication_primary_heads", join(&s.heads)),
                ("replication_lag_records", s.lag_records().to_string()),
                (
                    "replication_lag_seconds",
                    s.behind_since
                        .map_or(0.0, |t| t.elapsed().as_secs_f64())
                        .to_string(),
                ),
                (
                    "replication_last_contact_seconds",
                    s.last_contact
                        .map_or_else(|| "never".into(), |t| t.elapsed().as_secs_f64().to_string()),
                ),
                ("replication_bootstraps", s.bootstraps.to_string()),
                ("replication_records_applied", s.records_applied.to_string()),
                ("replication_last_error", s.last_error.unwrap_or_default()),
            ]);
        } else {
            let heads = self.source.heads();
            let last = self.source.last_fetch.lock().expect("not poisoned").clone();
            rows.extend([
                (
                    "replication_listen",
                    self.listen_addr
                        .get()
                        .map_or_else(String::new, ToString::to_string),
                ),
                ("replication_run", format!("{:016x}", self.source.run_id)),
                ("replication_heads", join(&heads)),
                ("replication_backlog_bytes", self.source.bytes().to_string()),
                (
                    "replication_replica_lag_records",
                    last.as_ref().map_or_else(String::new, |l| {
                        heads
                            .iter()
                            .zip(&l.positions)
                            .map(|(h, p)| h.saturating_sub(*p))
                            .sum::<u64>()
                            .to_string()
                    }),
                ),
                (
                    "replication_replica_last_fetch_seconds",
                    last.as_ref().map_or_else(
                        || "never".into(),
                        |l| l.at.elapsed().as_secs_f64().to_string(),
                    ),
                ),
                (
                    "replication_replica_lag_bytes",
                    last.map_or_else(String::new, |l| {
                        self.source.bytes_after(&l.positions).to_string()
                    }),
                ),
            ]);
            if let Some(at) = self.promoted_at {
                rows.push(("promoted_at_ms", at.to_string()));
            }
        }
        rows
    }
}

fn join(v: &[u64]) -> String {
    v.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
}

pub(crate) fn info_reply(rows: Vec<(&'static str, String)>) -> InfoReply {
    InfoReply {
        rows: rows.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

/// Answer a replication request (a node task).
pub async fn handle(node: Arc<NodeShared>, request: Request, sink: ReplySink) {
    let result = match request {
        Request::ReplSnapshot(_) | Request::ReplFetch(_) => Err(RushError::bad_request(
            "replicas fetch from the primary's replication listener (replication.listen), not \
             the protocol listener",
        )),
        Request::ReplStatus(_) => Ok(Reply::ReplStatus(info_reply(
            node.replication.rows(&node.storage),
        ))),
        Request::ReplPromote(_) => promote(&node).await.map(Reply::ReplPromote),
        other => Err(RushError::internal(format!(
            "{} is not a replication request",
            other.opcode().name()
        ))),
    };
    let promoted = matches!(result, Ok(Reply::ReplPromote(_)));
    sink.send(result);
    if promoted {
        // After the answer is on its way: the restart drains connections,
        // which writes it out first.
        let _ = node.replication.restart.send(true);
    }
}

fn refuse_on_replica(node: &NodeShared) -> Result<(), RushError> {
    if let Some(f) = &node.replication.follow {
        return Err(RushError::bad_request(format!(
            "this node is a replica of {}; follow the primary",
            f.primary
        )));
    }
    Ok(())
}

pub(crate) async fn snapshot(
    node: &Arc<NodeShared>,
    s: rush_protocol::cmd::ReplSnapshot,
) -> Result<Reply, RushError> {
    refuse_on_replica(node)?;
    let max = (s.max_bytes as usize).clamp(4 << 10, 16 << 20);
    let (source, storage, shards) = (
        node.replication.source.clone(),
        node.storage.clone(),
        node.shards.clone(),
    );
    tokio::task::spawn_blocking(move || {
        if s.session == 0 {
            source.start_session(storage, shards, max)
        } else {
            source.page(s.session, max)
        }
    })
    .await
    .map_err(|e| RushError::internal(format!("snapshot task: {e}")))?
    .map(Reply::ReplSnapshot)
}

pub(crate) async fn fetch(
    node: &Arc<NodeShared>,
    f: rush_protocol::cmd::ReplFetch,
) -> Result<ReplFetchReply, RushError> {
    refuse_on_replica(node)?;
    let source = &node.replication.source;
    let max = (f.max_bytes as usize).clamp(4 << 10, 16 << 20);
    let wait = Duration::from_millis(u64::from(f.wait_ms)).min(MAX_FETCH_WAIT);
    let deadline = tokio::time::Instant::now() + wait;
    *source.last_fetch.lock().expect("not poisoned") = Some(source::Follower {
        at: std::time::Instant::now(),
        positions: f.positions.clone(),
    });
    source.ack(f.run_id, &f.positions);
    loop {
        // Armed before looking, so an append in between is not missed.
        let appended = source.appended();
        let records = source.read(f.run_id, &f.positions, max)?;
        let version = node.storage.meta_version();
        let meta = if version != f.meta_version {
            let mut pairs = Vec::new();
            for name in meta::REPLICATED {
                for (k, v) in node
                    .storage
                    .meta_scan(name)
                    .map_err(|e| RushError::unavailable(e.to_string()))?
                {
                    pairs.push((k.into(), v.into()));
                }
            }
            Some((version, pairs))
        } else {
            None
        };
        if !records.is_empty() || meta.is_some() || tokio::time::Instant::now() >= deadline {
            return Ok(ReplFetchReply {
                heads: source.heads(),
                records,
                meta,
                now_ms: node.clock.now_ms(),
            });
        }
        let _ = tokio::time::timeout_at(deadline, appended).await;
    }
}

async fn promote(node: &Arc<NodeShared>) -> Result<InfoReply, RushError> {
    let repl = &node.replication;
    let Some(follow) = &repl.follow else {
        return Err(RushError::bad_request("this node is a primary already"));
    };
    let complete = |storage: &Storage| follow::Applied::load(storage).is_some_and(|a| a.complete);
    if !complete(&node.storage) {
        return Err(RushError::unavailable(
            "this replica has not finished copying its primary's data; it can't be promoted yet",
        ));
    }
    repl.stop_following().await;
    if !complete(&node.storage) {
        // It started bootstrapping again meanwhile.
        repl.start_following(node);
        return Err(RushError::unavailable(
            "this replica started copying its primary's data again; it can't be promoted yet",
        ));
    }
    let rows = repl.rows(&node.storage);
    let (storage, config) = (node.storage.clone(), node.config.clone());
    let now = node.clock.now_ms();
    let epoch = node.cluster.routing.map().epoch();
    let skipped = tokio::task::spawn_blocking(move || -> Result<usize, StorageError> {
        let mut batch = WriteBatch::default();
        let skipped = skip_ids(&storage, &config, &mut batch)?;
        let mut record = now.to_be_bytes().to_vec();
        record.extend_from_slice(&epoch.to_be_bytes());
        storage.batch_meta_put(&mut batch, meta::REPLICATION_PROMOTED, &record);
        storage.write(batch, true)?;
        Ok(skipped)
    })
    .await
    .map_err(|e| RushError::internal(format!("promote task: {e}")))?
    .map_err(|e| RushError::unavailable(format!("recording the promotion: {e}")))?;
    tracing::warn!(primary = %follow.primary, positions = ?follow.snapshot().positions, sequences_skipped = skipped, "promoted to primary: restarting serving in place");
    Ok(info_reply(rows))
}

/// Segments of each ID sequence (short codes, envelope ids) a promotion
/// skips.
///
/// The old primary may have reserved segments in its last moments that
/// never reached this replica (replication is asynchronous) and handed out
/// IDs from them; reusing one would give a live short code or envelope id
/// a second meaning. A reservation is made when a fifth of the segment in
/// use is left, so in the window a replica lags by (milliseconds), a slot
/// gets at most one segment ahead of what was replicated unless it issues
/// a whole segment's IDs (1,000 codes of one slot, by default) in that
/// window. Two segments are skipped, as a crash skips the unused rest of
/// one.
pub const PROMOTE_SKIP_SEGMENTS: u64 = 2;

/// Stage every ID sequence's high-water mark of every slot moved past
/// [`PROMOTE_SKIP_SEGMENTS`] of its segments into `batch` (a slot with no
/// mark yet gets one: the old primary may have started it in the window
/// this replica missed); how many.
fn skip_ids(
    storage: &Storage,
    config: &crate::Config,
    batch: &mut WriteBatch,
) -> Result<usize, StorageError> {
    use crate::storage::keys::{self, kind, seq};
    use crate::storage::value;
    let kinds: Vec<(u8, u64)> = (5..=8)
        .map(|len| (seq::link_code(len), config.links.segment_step(len)))
        .chain([(seq::ENVELOPE_ID, config.envelopes.id_step)])
        .collect();
    let shards = storage.shards();
    let mut n = 0;
    for shard in 0..shards {
        for slot in crate::shard::route::slots_of_shard(shard, shards) {
            for &(k, step) in &kinds {
                let key = keys::sequence(slot, k);
                let hwm = match storage.get(shard, &key)? {
                    Some(raw) => {
                        let stored = value::Stored::decode(&raw)?;
                        <[u8; 8]>::try_from(stored.payload).map_or(0, u64::from_be_bytes)
                    }
                    None => 0,
                };
                let moved = hwm.saturating_add(PROMOTE_SKIP_SEGMENTS.saturating_mul(step.max(1)));
                batch.put_cf(
                    storage.cf(shard),
                    &key,
                    value::encode(kind::SEQUENCE, 0, &moved.to_be_bytes()),
                );
                n += 1;
            }
        }
    }
    Ok(n)
}
