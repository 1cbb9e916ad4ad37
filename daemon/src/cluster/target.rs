//! The target side of a slot move: MIGRATE_IMPORT, MIGRATE_COMMIT,
//! MIGRATE_ABORT, MIGRATE_STATUS (see the module doc of `cluster`).
//!
//! Imported chunks are written straight to the slot's range in the shard's
//! column family (not through the shard thread): the node doesn't serve the
//! slot, so no request, timer or in-memory state touches that range until
//! the commit, which does go through the shard.

use super::store::{committed_import, ImportMarker};
use super::{blocking, conflict, shard_of, shard_op, storage_error};
use crate::replication::record::{self, Op};
use crate::server::NodeShared;
use crate::shard::SlotOp;
use crate::storage::keys::{self, meta};
use crate::storage::{value, WriteBatch};
use hashbrown::HashMap;
use rush_protocol::cmd::{
    MigrateAbort, MigrateCommit, MigrateImport, MigrateStatus, MigrationState,
};
use rush_protocol::RushError;
use std::sync::Arc;

/// A node that is moving slots out takes none in (one direction at a time
/// keeps source and target maps in step).
fn not_migrating_out(node: &NodeShared) -> Result<(), RushError> {
    match node.cluster.migrating.try_lock() {
        Ok(_) => Ok(()),
        Err(_) => Err(conflict(
            "this node is moving slots out; it takes slots in only when that is done",
        )),
    }
}

pub async fn import(node: &Arc<NodeShared>, req: MigrateImport) -> Result<u64, RushError> {
    not_migrating_out(node)?;
    let c = &node.cluster;
    let _one = c.importing.lock().await;
    let slot = req.slot;
    if c.routing.owns(slot) {
        return Err(conflict(format!("slot {slot} is already this node's")));
    }
    for p in &req.pairs {
        if keys::split(&p.key).map(|(s, _, _)| s) != Some(slot) {
            return Err(RushError::bad_request(format!(
                "a key of the import is not in slot {slot}"
            )));
        }
        if !p.append && p.value.len() < value::HEADER {
            return Err(RushError::bad_request(
                "an imported value is shorter than the value header",
            ));
        }
    }
    let storage = c.storage.clone();
    let shard = shard_of(node, slot);
    let n = req.pairs.len() as u64;
    let source = node.replication.source.clone();
    blocking(move || {
        let marker = ImportMarker::load(&storage, slot).map_err(storage_error)?;
        let mut batch = WriteBatch::default();
        let cf = storage.cf(shard);
        let marker = if req.seq == 0 {
            // A new import: whatever an earlier, unfinished one left goes.
            let (from, to) = keys::slot_range(slot);
            batch.delete_range_cf(cf, &from, &to);
            ImportMarker {
                id: req.id,
                next_seq: 1,
                keys: n,
                from: req.from.clone(),
            }
        } else {
            match marker {
                Some(m) if m.id == req.id && m.next_seq == req.seq => ImportMarker {
                    next_seq: m.next_seq + 1,
                    keys: m.keys + n,
                    ..m
                },
                Some(m) if m.id == req.id => {
                    return Err(conflict(format!(
                        "chunk {} of import {:x} is out of order (expected {})",
                        req.seq, req.id, m.next_seq
                    )))
                }
                _ => {
                    return Err(conflict(format!(
                        "no import {:x} of slot {slot} is in progress here",
                        req.id
                    )))
                }
            }
        };
        // Values sent in parts: the first part is in storage already (an
        // earlier chunk) or earlier in this one.
        let mut here: HashMap<&[u8], Vec<u8>> = HashMap::new();
        for p in &req.pairs {
            if p.append {
                let mut v = match here.remove(&p.key[..]) {
                    Some(v) => v,
                    None => storage
                        .get(shard, &p.key)
                        .map_err(storage_error)?
                        .map(|v| v.to_vec())
                        .ok_or_else(|| conflict("a value part without its beginning"))?,
                };
                v.extend_from_slice(&p.value);
                here.insert(&p.key, v);
            } else {
                here.insert(&p.key, p.value.to_vec());
            }
        }
        // The same writes for replicas (the marker is this node's own).
        let mut record = Vec::new();
        if req.seq == 0 {
            let (from, to) = keys::slot_range(slot);
            record::push(&mut record, &Op::DeleteRange(&from, &to));
        }
        for (k, v) in &here {
            batch.put_cf(cf, k, v);
            record::push(&mut record, &Op::Put(k, v));
        }
        storage.batch_meta_put(&mut batch, &meta::cluster_import(slot), &marker.encode());
        storage.write(batch, true).map_err(storage_error)?;
        source.append_outside(shard, &record);
        Ok(())
    })
    .await?;
    c.crash_point("target-after-chunk");
    Ok(n)
}

pub async fn commit(node: &Arc<NodeShared>, req: MigrateCommit) -> Result<u64, RushError> {
    not_migrating_out(node)?;
    let c = &node.cluster;
    let _one = c.importing.lock().await;
    let _changes = c.map_changes.lock().await;
    let slot = req.slot;
    let storage = c.storage.clone();
    let (done, marker) = blocking(move || {
        Ok((
            committed_import(&storage, slot).map_err(storage_error)?,
            ImportMarker::load(&storage, slot).map_err(storage_error)?,
        ))
    })
    .await?;
    if done == Some(req.id) {
        // A resend after success.
        return Ok(c.routing.map().epoch());
    }
    let Some(marker) = marker.filter(|m| m.id == req.id) else {
        return Err(conflict(format!(
            "no import {:x} of slot {slot} is in progress here",
            req.id
        )));
    };
    if marker.next_seq != req.chunks || marker.keys != req.keys {
        return Err(conflict(format!(
            "received {} chunks with {} keys of import {:x}; the source sent {} with {}",
            marker.next_seq, marker.keys, req.id, req.chunks, req.keys
        )));
    }
    req.map.validate().map_err(RushError::bad_request)?;
    if req.map.node_for(slot).map(|n| n.id.as_str()) != Some(c.node_id.as_str()) {
        return Err(RushError::bad_request(format!(
            "the map sent with the commit does not give slot {slot} to this node"
        )));
    }
    let current = c.routing.map();
    if req.map.epoch <= current.epoch() {
        return Err(conflict(format!(
            "the map sent with the commit (epoch {}) is not newer than this node's (epoch {})",
            req.map.epoch,
            current.epoch()
        )));
    }
    c.crash_point("target-before-commit");
    let (id, map) = (req.id, req.map);
    let epoch = shard_op(node, shard_of(node, slot), |done| SlotOp::Adopt {
        slot,
        import_id: id,
        map,
        done,
    })
    .await?;
    c.crash_point("target-after-commit");
    node.metrics.cluster.slots_imported.inc();
    tracing::info!(slot, from = %marker.from, keys = marker.keys, epoch, "slot imported");
    Ok(epoch)
}

pub async fn abort(node: &Arc<NodeShared>, req: MigrateAbort) -> Result<bool, RushError> {
    let c = &node.cluster;
    let _one = c.importing.lock().await;
    let (slot, id) = (req.slot, req.id);
    let storage = c.storage.clone();
    let shard = shard_of(node, slot);
    let source = node.replication.source.clone();
    let dropped = blocking(move || {
        if committed_import(&storage, slot).map_err(storage_error)? == Some(id) {
            return Err(conflict(format!(
                "import {id:x} of slot {slot} has committed; it can't be aborted"
            )));
        }
        match ImportMarker::load(&storage, slot).map_err(storage_error)? {
            Some(m) if m.id == id => {
                let mut batch = WriteBatch::default();
                let (from, to) = keys::slot_range(slot);
                batch.delete_range_cf(storage.cf(shard), &from, &to);
                storage.batch_meta_delete(&mut batch, &meta::cluster_import(slot));
                storage.write(batch, true).map_err(storage_error)?;
                let mut record = Vec::new();
                record::push(&mut record, &Op::DeleteRange(&from, &to));
                source.append_outside(shard, &record);
                Ok(true)
            }
            _ => Ok(false),
        }
    })
    .await?;
    if dropped {
        tracing::info!(slot, "import aborted by its source; its data was dropped");
    }
    Ok(dropped)
}

pub async fn status(
    node: &Arc<NodeShared>,
    req: MigrateStatus,
) -> Result<MigrationState, RushError> {
    let c = &node.cluster;
    // After any import request in progress (a late COMMIT decides first).
    let _one = c.importing.lock().await;
    let storage = c.storage.clone();
    let (slot, id) = (req.slot, req.id);
    blocking(move || {
        if committed_import(&storage, slot).map_err(storage_error)? == Some(id) {
            return Ok(MigrationState::Committed);
        }
        match ImportMarker::load(&storage, slot).map_err(storage_error)? {
            Some(m) if m.id == id => Ok(MigrationState::Importing),
            _ => Ok(MigrationState::Unknown),
        }
    })
    .await
}
