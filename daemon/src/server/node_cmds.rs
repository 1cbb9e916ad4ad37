//! Requests the node answers itself (PING, HELLO, INFO, CLUSTER_SLOTS) and
//! requests that run on every shard (COMPACT, CLOCK_ADVANCE, envelope
//! refunds and audit).

use super::conn::{ConnState, ReplySink};
use super::NodeShared;
use crate::auth::Role;
use crate::shard::{Job, ReplyTo};
use rush_protocol::cmd::{ClusterSlotsReply, HelloReply, InfoReply, Pong};
use rush_protocol::frame::VERSION;
use rush_protocol::{ErrorCode, Opcode, Reply, Request, RushError, Service};
use std::sync::Arc;

pub fn handle(node: &Arc<NodeShared>, state: &mut ConnState, request: Request, sink: ReplySink) {
    let result = match request {
        Request::Ping(p) => Ok(Reply::Ping(Pong { payload: p.payload })),
        Request::Hello(h) => hello(node, state, h),
        Request::Info(_) => Ok(Reply::Info(info(node))),
        Request::ClusterSlots(_) => Ok(Reply::ClusterSlots(cluster_slots(node))),
        // Cluster changes wait on storage, shards and peers: a node task.
        other if other.opcode().service() == Service::Cluster => {
            node.tasks
                .spawn(crate::cluster::handle(node.clone(), other, sink));
            return;
        }
        other => Err(RushError::internal(format!(
            "{} is not a node request",
            other.opcode().name()
        ))),
    };
    sink.send(result)
}

fn hello(
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

fn info(node: &NodeShared) -> InfoReply {
    let s = &node.storage;
    let rows = vec![
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
        (
            "keys_estimate",
            s.property_sum("rocksdb.estimate-num-keys").to_string(),
        ),
        (
            "sst_bytes",
            s.property_sum("rocksdb.total-sst-files-size").to_string(),
        ),
        (
            "memtable_bytes",
            s.property_sum("rocksdb.cur-size-all-mem-tables")
                .to_string(),
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
    ];
    let rows = rows.into_iter().chain(node.cluster.info());
    InfoReply {
        rows: rows.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }
}

fn cluster_slots(node: &NodeShared) -> ClusterSlotsReply {
    node.cluster.routing.map().map.clone()
}

/// Run a request on every shard and combine the answers.
pub async fn fan_out(node: Arc<NodeShared>, request: Request, sink: ReplySink) {
    let result = match request {
        Request::ClockAdvance(c) => clock_advance(&node, c.ms).await,
        Request::LimitPolicySet(set) => crate::limits::admin::policy_set(&node, set).await,
        Request::Compact(_) => {
            let storage = node.storage.clone();
            let shards = node.shards.len();
            tokio::task::spawn_blocking(move || (0..shards).for_each(|i| storage.compact(i)))
                .await
                .map(|_| Reply::Compact(()))
                .map_err(|e| RushError::internal(format!("compaction task: {e}")))
        }
        // Merging refund pages needs the page size, so not via `combine`.
        Request::EnvelopeRefunds(r) => {
            let limit = r.limit as usize;
            broadcast(&node, Request::EnvelopeRefunds(r))
                .await
                .and_then(|replies| crate::envelopes::merge_refunds(replies, limit))
        }
        other => {
            let opcode = other.opcode();
            broadcast(&node, other)
                .await
                .and_then(|replies| combine(opcode, replies))
        }
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

/// Merge per-shard answers of a request that ran on every shard.
fn combine(opcode: Opcode, replies: Vec<Reply>) -> Result<Reply, RushError> {
    // Each service that broadcasts adds how its answers merge, by opcode.
    match opcode {
        Opcode::CatalogShed => Ok(Reply::CatalogShed(())),
        Opcode::CatalogWarm => {
            let mut sum = rush_protocol::cmd::CatalogWarmReply::default();
            for r in replies {
                if let Reply::CatalogWarm(w) = r {
                    sum.loaded += w.loaded;
                    sum.absent += w.absent;
                }
            }
            Ok(Reply::CatalogWarm(sum))
        }
        Opcode::CatalogRebuild => Ok(Reply::CatalogRebuild(
            replies
                .iter()
                .map(|r| match r {
                    Reply::CatalogRebuild(n) => *n,
                    _ => 0,
                })
                .sum(),
        )),
        Opcode::EnvelopeRefundsAck | Opcode::EnvelopeAudit => {
            crate::envelopes::combine(opcode, replies)
        }
        _ => Err(RushError::internal(format!(
            "{} does not run on every shard",
            opcode.name()
        ))),
    }
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
