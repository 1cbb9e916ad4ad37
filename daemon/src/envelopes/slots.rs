//! Slot moves: the envelope service's hooks (see `shard::slots`).
//!
//! A slot carries all of its envelope state in its key range — books,
//! grabs, pending expiries, unpaid refunds, day markers, idempotency keys,
//! the id sequence's high-water mark — so the data moves as raw keys. What
//! the service adds: its in-memory indexes follow the slot, and the refund
//! records of a gained slot are re-stamped into this node's stream.

use super::record::{self, EnvelopeRecord, RefundRecord};
use super::refunds::StreamEntry;
use super::{corrupt, storage_error, Envelopes};
use crate::cluster::routing::SlotSet;
use crate::shard::txn::Txn;
use crate::storage::keys;
use rush_protocol::cmd::{envelope_day, envelope_slot, RefundCursor};
use rush_protocol::RushError;
use std::sync::atomic::Ordering;

impl Envelopes {
    /// Before a gained slot is served: give its unpaid refunds stamps at or
    /// above this shard's stream floor (and the books the same stamp), in the
    /// caller's synced write. Every cursor this node (or a client merging
    /// the cluster's nodes) ever handed out is below this shard's floor, so
    /// no consumer can be past a re-stamped refund: none is skipped. A
    /// refund already stamped at or above the floor keeps its stamp.
    pub(super) fn restamp_gained(
        &mut self,
        slot: u16,
        now: u64,
        txn: &mut Txn,
    ) -> Result<u64, RushError> {
        let (from, to) = keys::keyspace_range(slot, keys::ks::ENVELOPE_REFUND);
        let mut found = Vec::new();
        self.storage
            .scan(self.shard, &from, &to, |k, v| {
                found.push((k.to_vec(), v.to_vec()));
                true
            })
            .map_err(storage_error)?;
        let stamp = self.next_stamp(now);
        let mut moved = 0u64;
        for (k, v) in found {
            let Some((old, id)) = keys::envelope::parse_refund(&k) else {
                continue;
            };
            if old >= stamp {
                continue;
            }
            txn.delete(k);
            txn.put(keys::envelope::refund(slot, stamp, id), v);
            let rk = keys::envelope::record(slot, envelope_day(id), id);
            // The books may be gone (retention removes days, never unpaid
            // refunds); then there is nothing to keep in step.
            if let Some(raw) = txn.get(&rk).map_err(storage_error)? {
                let mut rec = EnvelopeRecord::decode(&raw).map_err(corrupt)?;
                rec.refund_stamp = stamp;
                txn.put(rk, rec.encode());
            }
            moved += 1;
        }
        if moved > 0 {
            txn.require_sync();
            self.stamp_floor = self.stamp_floor.max(stamp);
            self.shared.highest_stamp.fetch_max(stamp, Ordering::SeqCst);
            tracing::info!(
                shard = self.shard,
                slot,
                refunds = moved,
                stamp,
                "refunds of a gained slot re-stamped"
            );
        }
        txn.finish_request(true);
        Ok(moved)
    }

    /// Slots this shard serves from now on: their open envelopes, unpaid
    /// refunds and day markers join the indexes. (Before the indexes are
    /// first loaded there is nothing to add: loading covers every owned slot.)
    pub(super) fn slots_imported(&mut self, slots: &[u16]) {
        let set = SlotSet::of(slots);
        self.cache.retain(|id, _| !set.contains(envelope_slot(*id)));
        if !self.loaded {
            return;
        }
        for &slot in slots {
            if let Err(e) = self.load_slot(slot) {
                tracing::error!(shard = self.shard, slot, error = %e, "loading an imported slot's envelope indexes failed; reloading all");
                self.loaded = false;
                return;
            }
        }
    }

    fn load_slot(&mut self, slot: u16) -> Result<(), crate::storage::StorageError> {
        let mut pending = Vec::new();
        let mut refunds = Vec::new();
        let mut days = Vec::new();
        let scan = |ks: u8, out: &mut Vec<(Vec<u8>, Vec<u8>)>| {
            let (from, to) = keys::keyspace_range(slot, ks);
            self.storage.scan(self.shard, &from, &to, |k, v| {
                out.push((k.to_vec(), v.to_vec()));
                true
            })
        };
        scan(keys::ks::ENVELOPE_PENDING, &mut pending)?;
        scan(keys::ks::ENVELOPE_REFUND, &mut refunds)?;
        scan(keys::ks::ENVELOPE_DAY, &mut days)?;
        let mut money = 0u64;
        for (k, v) in pending {
            if let (Some(entry), Ok(remaining)) = (
                keys::envelope::parse_pending(&k),
                record::decode_pending(&v),
            ) {
                self.expiries.insert(entry);
                money = money.saturating_add(remaining);
            }
        }
        self.money_in(money);
        for (k, v) in refunds {
            if let (Some((stamp, id)), Ok(r)) =
                (keys::envelope::parse_refund(&k), RefundRecord::decode(&v))
            {
                self.stamp_floor = self.stamp_floor.max(stamp);
                self.shared.highest_stamp.fetch_max(stamp, Ordering::SeqCst);
                self.stream.insert(
                    RefundCursor { stamp, id },
                    StreamEntry {
                        amount: r.amount,
                        refunded_at: r.refunded_at,
                        sender: r.sender,
                    },
                );
            }
        }
        for (k, v) in days {
            if let (Some(day), Ok(first)) =
                (keys::envelope::parse_day_marker(&k), record::decode_day(&v))
            {
                self.days.insert(slot, day, first);
            }
        }
        Ok(())
    }

    /// Slots this shard no longer serves: forget everything about them.
    /// (Called before their data is deleted, so the money they held can be
    /// taken off the in-flight gauge.)
    pub(super) fn slots_dropped(&mut self, slots: &[u16]) {
        let set = SlotSet::of(slots);
        let of = |id: &u64| set.contains(envelope_slot(*id));
        self.cache.retain(|id, _| !of(id));
        self.stream.retain(|c, _| !of(&c.id));
        self.expiries.retain(|(_, id)| !of(id));
        for &slot in slots {
            self.days.remove_slot(slot);
            let (from, to) = keys::keyspace_range(slot, keys::ks::ENVELOPE_PENDING);
            let mut money = 0u64;
            let _ = self.storage.scan(self.shard, &from, &to, |_, v| {
                money = money.saturating_add(record::decode_pending(v).unwrap_or(0));
                true
            });
            self.money_out(money);
        }
    }
}
