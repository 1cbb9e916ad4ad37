//! Slot moves, as the shard sees them: operations the cluster sends through
//! the shard's queue ([`SlotOp`]), run on the shard thread between groups —
//! so every request applied before one is committed, and every request
//! applied after it sees its effect — and the hook pair each service
//! implements for its in-memory state:
//!
//! - `on_slots_imported(slots)`: the shard serves these slots from now on
//!   (moved in, or given to this node by a new map): load their indexes.
//! - `on_slots_dropped(slots)`: it no longer does: forget their state.
//!
//! Data of a slot never changes while its routing state isn't `Serving`
//! (requests are refused by the routing check at apply, timers skip it), so
//! a hook sees exactly what the copy carried.

use super::service::Cx;
use super::txn::Txn;
use super::Shard;
use crate::cluster::store::encode_map;
use crate::storage::keys::{self, meta};
use rush_protocol::cmd::ClusterSlotsReply;
use rush_protocol::RushError;
use tokio::sync::oneshot;

type Done<T> = oneshot::Sender<Result<T, RushError>>;

/// A cluster operation on one shard.
pub enum SlotOp {
    /// The slot was just frozen: write out buffered state (timers), so its
    /// stored data is final, and answer (a barrier).
    Freeze { done: Done<()> },
    /// Target side of a move: the imported slot becomes this node's, in one
    /// synced write with the new map and the "committed" record.
    Adopt {
        slot: u16,
        import_id: u64,
        map: ClusterSlotsReply,
        done: Done<u64>,
    },
    /// Source side of a move: the slot is the target's now. Its data is
    /// deleted in one synced write with the new map and the end of the
    /// migration record.
    Release {
        slot: u16,
        target: String,
        map: ClusterSlotsReply,
        done: Done<u64>,
    },
    /// A new map (CLUSTER_SETMAP) gives these slots to this node.
    Gained { slots: Vec<u16>, done: Done<()> },
    /// A new map takes these slots away (their data stays on disk).
    Lost { slots: Vec<u16>, done: Done<()> },
}

impl Shard {
    pub(super) fn slot_op(&mut self, op: SlotOp) {
        match op {
            SlotOp::Freeze { done } => {
                self.tick(true);
                // The mover reads the slot from RocksDB: it must hold every
                // committed write (`tick(true)` wrote the pending ones back).
                let held = self.pending.as_ref().is_none_or(|p| p.settled());
                let _ = done.send(if held {
                    Ok(())
                } else {
                    Err(RushError::unavailable(
                        "this shard's pending writes could not be written to RocksDB; the slot stays",
                    ))
                });
            }
            SlotOp::Adopt {
                slot,
                import_id,
                map,
                done,
            } => {
                let _ = done.send(self.adopt(slot, import_id, map));
            }
            SlotOp::Release {
                slot,
                target,
                map,
                done,
            } => {
                let _ = done.send(self.release(slot, &target, map));
            }
            SlotOp::Gained { slots, done } => {
                let _ = done.send(self.gain(&slots));
            }
            SlotOp::Lost { slots, done } => {
                self.slots_dropped(&slots);
                let _ = done.send(Ok(()));
            }
        }
    }

    fn adopt(
        &mut self,
        slot: u16,
        import_id: u64,
        map: ClusterSlotsReply,
    ) -> Result<u64, RushError> {
        let storage = self.ctx.storage.clone();
        let now = self.ctx.clock.now_ms();
        let mut txn = Txn::new(&storage, self.id);
        self.prepare_import(&[slot], now, &mut txn)?;
        txn.put_meta(meta::CLUSTER_MAP, &encode_map(&map));
        txn.put_meta(&meta::cluster_imported(slot), &import_id.to_be_bytes());
        txn.delete_meta(&meta::cluster_import(slot));
        self.commit(txn)?;
        // Committed: from here on nothing may fail the answer, or the
        // source would take the slot back while this node has it. (The map
        // was checked before; a node that can't put it in force runs it
        // from its next start.)
        self.slots_imported(&[slot]);
        let epoch = map.epoch;
        if let Err(e) = self.ctx.routing.install(map) {
            tracing::error!(slot, error = %e, "the stored map can't be put in force; restart the node");
        }
        Ok(epoch)
    }

    fn release(
        &mut self,
        slot: u16,
        target: &str,
        map: ClusterSlotsReply,
    ) -> Result<u64, RushError> {
        let current = self.ctx.routing.map();
        // The map the move was planned against is still in force (the
        // cluster refuses map changes on a node that is moving a slot); if
        // it somehow isn't, the slot still goes: the target owns it.
        let map = if map.epoch > current.epoch() {
            map
        } else {
            current
                .map
                .with_slot_moved(slot, target, current.epoch() + 1)
                .map_err(RushError::internal)?
        };
        // Memory first: if the write below fails, the slot is still owned
        // and frozen, and every service reloads from storage.
        self.slots_dropped(&[slot]);
        let storage = self.ctx.storage.clone();
        let mut txn = Txn::new(&storage, self.id);
        let (from, to) = keys::slot_range(slot);
        txn.delete_range(from, to);
        txn.finish_request(true);
        txn.put_meta(meta::CLUSTER_MAP, &encode_map(&map));
        txn.delete_meta(meta::CLUSTER_MIGRATION);
        self.commit(txn)?;
        let epoch = map.epoch;
        self.ctx
            .routing
            .install(map)
            .map_err(|e| RushError::internal(format!("releasing slot {slot}: {e}")))?;
        self.ctx.routing.unfreeze(slot);
        Ok(epoch)
    }

    fn gain(&mut self, slots: &[u16]) -> Result<(), RushError> {
        let storage = self.ctx.storage.clone();
        let now = self.ctx.clock.now_ms();
        let mut txn = Txn::new(&storage, self.id);
        self.prepare_import(slots, now, &mut txn)?;
        self.commit(txn)?;
        self.slots_imported(slots);
        Ok(())
    }

    /// Every service's "about to import" hook: writes for the commit that
    /// makes the slots this shard's.
    fn prepare_import(&mut self, slots: &[u16], now: u64, txn: &mut Txn) -> Result<(), RushError> {
        let mut cx = Cx {
            now,
            txn,
            slot: None,
            segments: &mut self.segments,
            backlog: 0,
            flush: false,
        };
        for s in &mut self.services {
            s.prepare_import(slots, &mut cx)?;
        }
        Ok(())
    }

    /// Every service's "slots imported" hook.
    fn slots_imported(&mut self, slots: &[u16]) {
        self.segments.forget_slots(slots);
        for s in &mut self.services {
            s.on_slots_imported(slots, &self.ctx.storage);
        }
    }

    /// Every service's "slots dropped" hook.
    fn slots_dropped(&mut self, slots: &[u16]) {
        self.segments.forget_slots(slots);
        for s in &mut self.services {
            s.on_slots_dropped(slots);
        }
    }
}
