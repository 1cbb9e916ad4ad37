//! Requests the node answers itself (PING, HELLO, INFO, CLUSTER_SLOTS,
//! SHARDS, SHARD_BIND), cluster operations, and requests that run on every
//! shard (COMPACT, CLOCK_ADVANCE, envelope refunds and audit…).
//!
//! The shard that read such a request calls [`handle`] inline; what must
//! wait on storage, other shards or peers runs as a node task ([`spawn`])
//! whose answer is posted back to the connection's shard.

use super::NodeShared;
use crate::auth::Role;
use crate::shard::conn::ConnState;
use crate::shard::{Job, ReplySink, ReplyTo};
use rush_protocol::cmd::{ClusterSlotsReply, HelloReply, InfoReply, Pong, ShardsReply, SlotRange};
use rush_protocol::frame::VERSION;
use rush_protocol::{ErrorCode, Reply, Request, RushError, Service, Target};
use std::sync::Arc;

/// What became of a node request.
pub enum NodeAnswer {
    /// Answered now.
    Now(Result<Reply, RushError>),
    /// SHARD_BIND: the shard moves the connection (and answers from there).
    Bind(usize),
    /// Runs in a node task ([`spawn`]).
    Later(Request),
}

/// A node request, on the shard thread that read it. Never blocks.
pub fn handle(
    node: &Arc<NodeShared>,
    state: &mut ConnState,
    request: Request,
    _shard: usize,
) -> NodeAnswer {
    let result = match request {
        Request::Ping(p) => Ok(Reply::Ping(Pong { payload: p.payload })),
        Request::Hello(h) => hello(node, state, h),
        Request::Info(_) => Ok(Reply::Info(info(node))),
        Request::ClusterSlots(_) => Ok(Reply::ClusterSlots(cluster_slots(node))),
        Request::Shards(_) => Ok(Reply::Shards(shards(node))),
        Request::ShardBind(b) => return NodeAnswer::Bind(b.shard as usize),
        Request::ReadOnly(r) => {
            state.replica_reads = r.on;
            Ok(Reply::ReadOnly(r.on))
        }
        // Reads every key: on a thread of its own ([`spawn`]).
        Request::DbSize(d) => return NodeAnswer::Later(d.into()),
        // Cluster changes wait on storage, shards and peers: a node task.
        other if other.opcode().service() == Service::Cluster => return NodeAnswer::Later(other),
        other => Err(RushError::internal(format!(
            "{} is not a node request",
            other.opcode().name()
        ))),
    };
    NodeAnswer::Now(result)
}

/// Run a cluster operation, or a request whose target is every shard, as a
/// node task; its answer goes to `sink`.
pub fn spawn(node: &Arc<NodeShared>, target: Target, request: Request, sink: ReplySink) {
    if target == Target::AllShards {
        node.spawn(fan_out(node.clone(), request, ReplyTo::Conn(sink)));
    } else if let Request::DbSize(_) = request {
        node.spawn(db_size(node.clone(), sink));
    } else if matches!(
        request,
        Request::ReplSnapshot(_)
            | Request::ReplFetch(_)
            | Request::ReplStatus(_)
            | Request::ReplPromote(_)
    ) {
        node.spawn(crate::replication::handle(node.clone(), request, sink));
    } else {
        node.spawn(crate::cluster::handle(node.clone(), request, sink));
    }
}

/// DBSIZE: every shard's generic keys in the slots this node owns, counted
/// on a blocking thread.
async fn db_size(node: Arc<NodeShared>, sink: ReplySink) {
    // Each shard's timers with a flush: RocksDB then holds every committed
    // write (a shard with a log writes its pending ones back).
    for t in node.shards.iter().map(|h| h.tick()).collect::<Vec<_>>() {
        let _ = t.await;
    }
    let n = node.clone();
    let counted = tokio::task::spawn_blocking(move || {
        let routing = &n.cluster.routing;
        crate::kv::dbsize::count(
            &n.storage,
            n.shards.len(),
            |s| routing.owns(s),
            n.clock.now_ms(),
        )
    })
    .await
    .unwrap_or_else(|e| Err(RushError::internal(format!("DBSIZE task: {e}"))));
    sink.send(counted.map(Reply::DbSize))
}

/// The node's shard layout.
pub fn shards(node: &NodeShared) -> ShardsReply {
    let n = node.shards.len();
    ShardsReply {
        ranges: (0..n)
            .map(|i| {
                let r = crate::shard::route::slots_of_shard(i, n);
                SlotRange {
                    start: *r.start(),
                    end: *r.end(),
                }
            })
            .collect(),
    }
}

pub(crate) fn hello(
    node: &NodeShared,
    state: &mut ConnState,
    h: rush_protocol::cmd::Hello,
) -> Result<Reply, RushError> {
    if h.version != VERSION {
        return Err(RushError::new(
            ErrorCode::UnsupportedVersion,
            format!(
                "protocol version {} is not supported; this server speaks {VERSION}",
                h.version
            ),
        ));
    }
    if node.auth.required() {
        match h.token.as_deref().and_then(|t| node.auth.check(t)) {
            Some((role, name)) => {
                state.authenticated = true;
                state.admin = role == Role::Admin;
                tracing::debug!(client = %h.client, token = name, ?role, "authenticated");
            }
            None => {
                node.metrics.auth_failures.inc();
                // The client's name only: never the token.
                tracing::warn!(client = %h.client, "HELLO with a wrong or missing token");
                return Err(RushError::new(
                    ErrorCode::Unauthorized,
                    "wrong or missing token",
                ));
            }
        }
    }
    Ok(Reply::Hello(HelloReply {
        protocol: VERSION,
        server: env!("CARGO_PKG_VERSION").to_string(),
        node_id: node.node_id.clone(),
        shards: node.shards.len() as u16,
        admin: state.admin,
    }))
}

/// INFO's storage rows: (row, RocksDB property, summed over the shards'
/// column families or the database's own). The last four are background
/// work still owed: a benchmark of reads waits for them to reach 0 after
/// its preload, so that it measures reads, not the preload's compactions.
const STORAGE_ROWS: [(&str, &str, bool); 7] = [
    ("keys_estimate", "rocksdb.estimate-num-keys", true),
    ("sst_bytes", "rocksdb.total-sst-files-size", true),
    ("memtable_bytes", "rocksdb.cur-size-all-mem-tables", true),
    (
        "compactions_running",
        "rocksdb.num-running-compactions",
        false,
    ),
    ("flushes_running", "rocksdb.num-running-flushes", false),
    ("flushes_pending", "rocksdb.mem-table-flush-pending", true),
    (
        "compaction_pending_bytes",
        "rocksdb.estimate-pending-compaction-bytes",
        true,
    ),
];

pub(crate) fn info(node: &NodeShared) -> InfoReply {
    let s = &node.storage;
    let mut rows = vec![
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("protocol", VERSION.to_string()),
        ("node_id", node.node_id.clone()),
        (
            "uptime_seconds",
            node.started.elapsed().as_secs().to_string(),
        ),
        ("shards", node.shards.len().to_string()),
        (
            "connections",
            node.connections
                .load(std::sync::atomic::Ordering::Relaxed)
                .to_string(),
        ),
        ("data_dir", s.dir().display().to_string()),
    ];
    rows.extend(STORAGE_ROWS.iter().map(|&(row, property, summed)| {
        let v = if row == "keys_estimate" {
            s.keys_estimate()
        } else if summed {
            s.property_sum(property)
        } else {
            s.property(property)
        };
        (row, v.to_string())
    }));
    rows.extend([
        (
            "write_backs_running",
            s.stats.write_backs_running.get().max(0).to_string(),
        ),
        (
            "queued_requests",
            node.shards
                .iter()
                .map(|h| h.queue_len())
                .sum::<usize>()
                .to_string(),
        ),
        ("clock_ms", node.clock.now_ms().to_string()),
    ]);
    let memory = node.memory_report();
    let rows = rows
        .into_iter()
        .chain(node.cluster.info())
        .chain(node.replication.rows(&node.storage))
        .map(|(k, v)| (k.to_string(), v))
        .chain(
            memory
                .rss
                .map(|rss| ("rss_bytes".to_string(), rss.to_string())),
        )
        .chain(memory.info_rows(""));
    InfoReply {
        rows: rows.collect(),
    }
}

fn cluster_slots(node: &NodeShared) -> ClusterSlotsReply {
    node.cluster.routing.map().map.clone()
}

/// Run a request on every shard and combine the answers.
pub async fn fan_out(node: Arc<NodeShared>, request: Request, sink: ReplyTo) {
    let result = match request {
        Request::ClockAdvance(c) => clock_advance(&node, c.ms).await,
        Request::LimitPolicySet(set) => crate::limits::admin::policy_set(&node, set).await,
        Request::Compact(_) => {
            // Everything committed is compacted: shards with a log write
            // their pending writes back first (their timers, flushed).
            for t in node.shards.iter().map(|h| h.tick()).collect::<Vec<_>>() {
                let _ = t.await;
            }
            let storage = node.storage.clone();
            let shards = node.shards.len();
            tokio::task::spawn_blocking(move || (0..shards).for_each(|i| storage.compact(i)))
                .await
                .map(|_| Reply::Compact(()))
                .map_err(|e| RushError::internal(format!("compaction task: {e}")))
        }
        // Everything else: each shard answers, the request's service
        // combines the answers.
        other => broadcast(&node, other.clone())
            .await
            .and_then(|replies| crate::services::combine(&other, replies)),
    };
    sink.send(result)
}

/// Send a request to every shard's queue and collect the answers in shard
/// order. The first error (e.g. BUSY from a full queue) is the answer.
pub async fn broadcast(node: &NodeShared, request: Request) -> Result<Vec<Reply>, RushError> {
    let mut waiting = Vec::with_capacity(node.shards.len());
    for shard in &node.shards {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = Job {
            request: request.clone(),
            reply: ReplyTo::Once(tx),
        };
        if let Err((_, e)) = shard.submit(job) {
            return Err(e);
        }
        waiting.push(rx);
    }
    let mut replies = Vec::with_capacity(waiting.len());
    for rx in waiting {
        let r = rx
            .await
            .map_err(|_| RushError::unavailable("a shard stopped before answering"))?;
        replies.push(r?);
    }
    Ok(replies)
}

async fn clock_advance(node: &NodeShared, ms: u64) -> Result<Reply, RushError> {
    if !node.config.debug.clock_control {
        return Err(RushError::new(
            ErrorCode::Forbidden,
            "clock control is off (debug.clock_control = false)",
        ));
    }
    let now = node.clock.advance_ms(ms);
    tracing::info!(advanced_ms = ms, now_ms = now, "clock advanced");
    for t in node.shards.iter().map(|h| h.tick()).collect::<Vec<_>>() {
        // A shard that stopped has nothing left to run.
        let _ = t.await;
    }
    Ok(Reply::ClockAdvance(now))
}
