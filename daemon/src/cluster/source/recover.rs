//! Resolving a slot move whose outcome this node does not know: the target
//! is asked whether it committed (and told to abort if it didn't), inline
//! for a while after a lost MIGRATE_COMMIT answer, then in the background,
//! and after a restart from the migration record.

use super::{push_map, release, roll_back};
use crate::cluster::peer::PeerError;
use crate::cluster::store::{MigrationRecord, Phase};
use crate::cluster::{blocking, storage_error};
use crate::server::NodeShared;
use rush_protocol::cmd::{MigrateAbort, MigrateStatus, MigrationState};
use rush_protocol::ErrorCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ask the target whether import `rec.id` committed, aborting it if not.
/// `Some(true)`: committed; `Some(false)`: it never will; `None`: no answer
/// before `deadline`.
pub(super) async fn resolve(
    node: &NodeShared,
    rec: &MigrationRecord,
    deadline: Option<Instant>,
) -> Option<bool> {
    let peers = &node.cluster.peers;
    let status = MigrateStatus {
        id: rec.id,
        slot: rec.slot,
    };
    let mut wait = Duration::from_millis(100);
    loop {
        match peers.call(&rec.target_addr, &status).await {
            Ok(MigrationState::Committed) => return Some(true),
            Ok(_) => {
                let abort = MigrateAbort {
                    id: rec.id,
                    slot: rec.slot,
                };
                match peers.call(&rec.target_addr, &abort).await {
                    Ok(_) => return Some(false),
                    // Committed after all (a delayed COMMIT got there first):
                    // ask again.
                    Err(PeerError::Server(e)) if e.code == ErrorCode::Conflict => continue,
                    Err(e) => {
                        tracing::warn!(slot = rec.slot, error = %e, "aborting the import failed; retrying")
                    }
                }
            }
            Err(e) => {
                tracing::warn!(slot = rec.slot, target = %rec.target_addr, error = %e, "asking the target about a slot move failed; retrying")
            }
        }
        if !node.ready.load(Ordering::SeqCst) {
            return None;
        }
        if deadline.is_some_and(|d| Instant::now() + wait > d) {
            return None;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(2));
    }
}

/// Resolve the move this node's record describes (after a restart, or when
/// a move could not finish inline). Runs until resolved or shutdown.
pub async fn recover(node: &Arc<NodeShared>) {
    let c = &node.cluster;
    let _moving = c.migrating.lock().await;
    let mut wait = Duration::from_millis(200);
    loop {
        let storage = c.storage.clone();
        let rec =
            match blocking(move || MigrationRecord::load(&storage).map_err(storage_error)).await {
                Ok(None) => return,
                Ok(Some(rec)) => rec,
                Err(e) => {
                    tracing::error!(error = %e, "reading the migration record failed");
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
        tracing::info!(slot = rec.slot, phase = ?rec.phase, target = %rec.target_id, "resolving an interrupted slot move");
        let outcome = match rec.phase {
            // COMMIT was never sent: the target can't have the slot.
            Phase::Copy => Some(false),
            Phase::Commit => resolve(node, &rec, None).await,
        };
        match outcome {
            Some(true) => match release(node, &rec).await {
                Ok(_) => {
                    node.metrics.cluster.slots_migrated.inc();
                    let map = c.routing.map();
                    let unsynced = push_map(node, &map.map).await;
                    if !unsynced.is_empty() {
                        tracing::warn!(?unsynced, "nodes that did not take the new map");
                    }
                    return;
                }
                Err(e) => {
                    tracing::error!(slot = rec.slot, error = %e, "finishing the slot move failed; retrying")
                }
            },
            Some(false) => {
                roll_back(node, &rec, &mut None).await;
                return;
            }
            None => {}
        }
        if !node.ready.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(5));
    }
}
