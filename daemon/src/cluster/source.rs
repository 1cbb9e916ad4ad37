//! The source side of a slot move: CLUSTER_MIGRATE (see the module doc of
//! `cluster`). The copy is streamed by [`copy`]; a move whose outcome is
//! unknown (a lost answer, a crash) is resolved by [`recover`].

mod copy;
mod recover;

pub use recover::recover;

use super::peer::{PeerConn, PeerError};
use super::store::{MigrationRecord, Phase};
use super::{blocking, conflict, shard_of, shard_op, storage_error};
use crate::server::NodeShared;
use crate::shard::SlotOp;
use crate::storage::{keys, Storage};
use copy::copy;
use recover::resolve;
use rush_protocol::cmd::{
    ClusterMigrate, ClusterMigrateReply, ClusterSetMap, ClusterSlots, MigrateAbort, MigrateCommit,
};
use rush_protocol::{ErrorCode, RushError};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a move waits inline for an unreachable target to say whether it
/// committed, before leaving it to the background recovery.
const RESOLVE_INLINE: Duration = Duration::from_secs(30);

pub async fn migrate(
    node: &Arc<NodeShared>,
    req: ClusterMigrate,
) -> Result<ClusterMigrateReply, RushError> {
    let c = &node.cluster;
    let _moving = c
        .migrating
        .try_lock()
        .map_err(|_| conflict("this node is already moving slots (one move at a time)"))?;
    let storage = c.storage.clone();
    if blocking(move || MigrationRecord::load(&storage).map_err(storage_error))
        .await?
        .is_some()
    {
        return Err(RushError::new(
            ErrorCode::TryAgain,
            "an interrupted slot move is being recovered on this node; retry shortly",
        ));
    }
    let map = c.routing.map();
    if map.epoch() == 0 {
        return Err(RushError::bad_request(
            "this node has no cluster map: create one first (rush cluster create)",
        ));
    }
    let Some(target) = map.map.node(&req.to).cloned() else {
        return Err(RushError::bad_request(format!(
            "no node {:?} in the cluster map (epoch {})",
            req.to,
            map.epoch()
        )));
    };
    if target.id == c.node_id {
        return Err(RushError::bad_request("the target is this node"));
    }
    let mut todo = Vec::new();
    for r in &req.slots {
        for slot in r.start..=r.end {
            let (owner, _) = map.owner(slot);
            if map.is_mine(slot) {
                todo.push(slot);
            } else if owner != target.id {
                return Err(RushError::bad_request(format!(
                    "slot {slot} is owned by {owner:?}, not by this node ({:?}); send the move to its owner",
                    c.node_id
                )));
            }
        }
    }
    todo.sort_unstable();
    todo.dedup();
    let mut reply = ClusterMigrateReply {
        epoch: map.epoch(),
        ..Default::default()
    };
    if todo.is_empty() {
        return Ok(reply);
    }
    // Source and target must start from the same map: the epoch goes up in
    // step on both with every slot.
    let theirs = c
        .peers
        .call(&target.addr, &ClusterSlots {})
        .await
        .map_err(RushError::from)?;
    if theirs.epoch > map.epoch() {
        return Err(conflict(format!(
            "the target runs a newer map (epoch {}) than this node (epoch {}): apply it here first",
            theirs.epoch,
            map.epoch()
        )));
    }
    if theirs.epoch == map.epoch() && !theirs.same_as(&map.map) {
        return Err(conflict(format!(
            "the target runs another map of the same epoch {}: apply one newer map to both",
            map.epoch()
        )));
    }
    if theirs.epoch < map.epoch() {
        c.peers
            .call(
                &target.addr,
                &ClusterSetMap {
                    map: map.map.clone(),
                },
            )
            .await
            .map_err(RushError::from)?;
    }
    tracing::info!(slots = todo.len(), to = %target.id, "moving slots");
    let started = Instant::now();
    let mut conn = None;
    for slot in todo {
        if !node.ready.load(Ordering::SeqCst) {
            return Err(RushError::unavailable(format!(
                "the node is shutting down; {} slots moved before slot {slot}",
                reply.slots
            )));
        }
        match move_slot(node, &mut conn, slot, &target.id, &target.addr).await {
            Ok((keys, bytes)) => {
                reply.slots += 1;
                reply.keys += keys;
                reply.bytes += bytes;
            }
            Err(e) => {
                return Err(RushError::new(
                    e.code,
                    format!(
                        "slot {slot}: {} ({} slots moved before it)",
                        e.message, reply.slots
                    ),
                ))
            }
        }
    }
    let map = c.routing.map();
    reply.epoch = map.epoch();
    reply.unsynced = push_map(node, &map.map).await;
    tracing::info!(
        slots = reply.slots,
        keys = reply.keys,
        bytes = reply.bytes,
        epoch = reply.epoch,
        ms = started.elapsed().as_millis() as u64,
        "slots moved"
    );
    Ok(reply)
}

/// Send `map` to every node but this one; the addresses that didn't take it.
pub(super) async fn push_map(
    node: &NodeShared,
    map: &rush_protocol::cmd::ClusterSlotsReply,
) -> Vec<String> {
    let c = &node.cluster;
    let mut failed = Vec::new();
    for n in &map.nodes {
        if n.id == c.node_id {
            continue;
        }
        let mut ok = false;
        for attempt in 0..3 {
            match c
                .peers
                .call(&n.addr, &ClusterSetMap { map: map.clone() })
                .await
            {
                Ok(_) => {
                    ok = true;
                    break;
                }
                Err(e) => {
                    tracing::warn!(node = %n.id, addr = %n.addr, error = %e, attempt, "sending the new map failed");
                    if matches!(e, PeerError::Server(_)) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        if !ok {
            failed.push(n.addr.clone());
        }
    }
    failed
}

/// Move one slot (steps 1–4 of the module doc): keys and bytes copied.
async fn move_slot(
    node: &Arc<NodeShared>,
    conn: &mut Option<PeerConn>,
    slot: u16,
    target_id: &str,
    target_addr: &str,
) -> Result<(u64, u64), RushError> {
    let c = &node.cluster;
    let m = &node.metrics.cluster;
    let base = c.routing.map();
    let new_map = base
        .map
        .with_slot_moved(slot, target_id, base.epoch() + 1)
        .map_err(RushError::internal)?;
    let mut rec = MigrationRecord {
        id: rand::random::<u64>() | 1,
        slot,
        phase: Phase::Copy,
        target_id: target_id.to_string(),
        target_addr: target_addr.to_string(),
        new_map,
    };
    store_record(&c.storage, &rec).await?;
    c.routing.freeze(slot);
    let shard = shard_of(node, slot);
    if let Err(e) = shard_op(node, shard, |done| SlotOp::Freeze { done }).await {
        roll_back(node, &rec, conn).await;
        return Err(e);
    }
    c.crash_point("source-after-freeze");
    let copied = match conn.as_mut() {
        Some(_) => Ok(()),
        None => c.peers.connect(target_addr).await.map(|k| {
            *conn = Some(k);
        }),
    };
    let copied = match copied {
        Ok(()) => copy(node, conn.as_mut().expect("connected"), &rec).await,
        Err(e) => Err(e),
    };
    let (chunks, keys, bytes) = match copied {
        Ok(v) => v,
        Err(e) => {
            *conn = None;
            m.migration_failures
                .with_label_values(&["rolled back"])
                .inc();
            roll_back(node, &rec, &mut None).await;
            return Err(e.into());
        }
    };
    c.crash_point("source-after-copy");
    rec.phase = Phase::Commit;
    if let Err(e) = store_record(&c.storage, &rec).await {
        roll_back(node, &rec, conn).await;
        return Err(e);
    }
    let commit = MigrateCommit {
        id: rec.id,
        slot,
        chunks,
        keys,
        map: rec.new_map.clone(),
    };
    let outcome = conn.as_mut().expect("connected").call(&commit).await;
    c.crash_point("source-after-commit");
    // Only the target's records say whether it committed. An error answer
    // is (by design) a refusal, but the records are asked all the same, so
    // that no path gives the slot back to service here while the target
    // serves it too.
    let mut refused = None;
    let committed = match outcome {
        Ok(_) => true,
        Err(e) => {
            match &e {
                PeerError::Server(e) => refused = Some(e.clone()),
                _ => *conn = None,
            }
            tracing::warn!(slot, error = %e, "MIGRATE_COMMIT did not succeed; asking the target");
            match resolve(node, &rec, Some(Instant::now() + RESOLVE_INLINE)).await {
                Some(committed) => committed,
                None => {
                    m.migration_failures
                        .with_label_values(&["unresolved"])
                        .inc();
                    super::spawn_recovery(node);
                    return Err(RushError::unavailable(format!(
                        "the target did not say whether it took slot {slot}; the slot stays frozen \
                         (TRYAGAIN) and this node keeps asking in the background"
                    )));
                }
            }
        }
    };
    if !committed {
        m.migration_failures
            .with_label_values(&["rolled back"])
            .inc();
        finish_roll_back(node, &rec).await;
        return Err(refused.unwrap_or_else(|| {
            RushError::unavailable("the target did not take the slot; it stays here")
        }));
    }
    if let Err(e) = release(node, &rec).await {
        super::spawn_recovery(node);
        return Err(e);
    }
    m.slots_migrated.inc();
    m.keys_migrated.inc_by(keys);
    m.bytes_migrated.inc_by(bytes);
    Ok((keys, bytes))
}

async fn store_record(storage: &Arc<Storage>, rec: &MigrationRecord) -> Result<(), RushError> {
    let (storage, rec) = (storage.clone(), rec.clone());
    blocking(move || rec.store(&storage).map_err(storage_error)).await
}

/// Step 4: the slot is the target's; drop it here.
async fn release(node: &NodeShared, rec: &MigrationRecord) -> Result<u64, RushError> {
    let c = &node.cluster;
    let _changes = c.map_changes.lock().await;
    let (slot, target, map) = (rec.slot, rec.target_id.clone(), rec.new_map.clone());
    let epoch = shard_op(node, shard_of(node, slot), |done| SlotOp::Release {
        slot,
        target,
        map,
        done,
    })
    .await?;
    tracing::info!(slot, to = %rec.target_id, epoch, "slot moved");
    Ok(epoch)
}

/// The move is off (COMMIT never sent, or the target said it did not
/// commit): tell the target to drop what it got (best effort: it can't
/// commit without us) and serve the slot again.
async fn roll_back(node: &NodeShared, rec: &MigrationRecord, conn: &mut Option<PeerConn>) {
    let abort = MigrateAbort {
        id: rec.id,
        slot: rec.slot,
    };
    let sent = match conn.as_mut() {
        Some(k) => k.call(&abort).await.map(|_| ()),
        None => Err(PeerError::Unreachable("no connection".into())),
    };
    if sent.is_err() {
        if let Err(e) = node.cluster.peers.call(&rec.target_addr, &abort).await {
            tracing::warn!(slot = rec.slot, error = %e, "could not tell the target to drop an aborted import (it stays invisible there until the next import of the slot)");
        }
    }
    finish_roll_back(node, rec).await;
}

/// Serve the slot here again and forget the move.
async fn finish_roll_back(node: &NodeShared, rec: &MigrationRecord) {
    let storage = node.cluster.storage.clone();
    let deleted = blocking(move || {
        let mut b = crate::storage::WriteBatch::default();
        storage.batch_meta_delete(&mut b, keys::meta::CLUSTER_MIGRATION);
        storage.write(b, true).map_err(storage_error)
    })
    .await;
    if let Err(e) = deleted {
        // The record says "copy" or an outcome the target denied: a restart
        // rolls back again, which is harmless.
        tracing::error!(slot = rec.slot, error = %e, "could not clear the migration record");
    }
    node.cluster.routing.unfreeze(rec.slot);
    tracing::warn!(slot = rec.slot, to = %rec.target_id, "slot move rolled back; the slot is served here");
}
