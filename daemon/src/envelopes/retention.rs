//! Retention by whole days (see `days` for the day-of-month buckets) and
//! eviction of the in-memory cache.

use super::days::epoch_day;
use super::Envelopes;
use crate::shard::txn::Txn;
use crate::storage::keys;
use hashbrown::HashMap;
use rush_protocol::cmd::{envelope_day, envelope_slot};

/// (slot, day) ranges one timer run removes at most: one range delete each,
/// but each also evicts from the cache, so spread a midnight over ticks.
const REMOVALS_PER_TICK: usize = 256;

impl Envelopes {
    /// Remove every (slot, calendar day) older than `retention_days`: one
    /// range delete of its part of the day-of-month bucket (envelopes and
    /// grabs) and its day marker. Refund records are not in the buckets, so
    /// an unpaid refund is never removed with its day.
    pub(super) fn retention(&mut self, now: u64, txn: &mut Txn) {
        let keep = self.cfg.retention_days;
        if keep == 0 {
            return;
        }
        // Refunds first: an envelope's day must not go while its refund is
        // still to be written (config guarantees expiry < retention, and
        // this covers a refund backlog or a failed timer run).
        if self.expiries.earliest().is_some_and(|at| at <= now) {
            return;
        }
        let Some(last_day) = epoch_day(now).checked_sub(keep) else {
            return;
        };
        // (slot, bucket) → ids below this go (u64::MAX: the whole bucket).
        let mut gone: HashMap<(u16, u8), u64> = HashMap::new();
        for _ in 0..REMOVALS_PER_TICK {
            let Some(rm) = self.days.oldest_due(last_day) else {
                break;
            };
            // Not while the slot is being handed over (its copy must be
            // exact); the next tick goes on.
            if !self.routing.serving(rm.slot) {
                break;
            }
            let from = keys::envelope::day_start(rm.slot, rm.bucket);
            let to = match rm.before {
                Some(first_newer) => keys::envelope::day_from_id(rm.slot, rm.bucket, first_newer),
                None => keys::envelope::day_id_end(rm.slot, rm.bucket),
            };
            txn.delete_range(from, to);
            txn.delete(keys::envelope::day_marker(rm.slot, rm.day));
            txn.finish_request(true);
            self.days.remove(rm.slot, rm.day);
            gone.insert((rm.slot, rm.bucket), rm.before.unwrap_or(u64::MAX));
            self.metrics.envelopes.days_removed.inc();
            tracing::debug!(
                shard = self.shard,
                slot = rm.slot,
                day = rm.day,
                "envelope day removed by retention"
            );
        }
        if !gone.is_empty() {
            self.cache.retain(|&id, _| {
                gone.get(&(envelope_slot(id), envelope_day(id)))
                    .is_none_or(|&before| id >= before)
            });
        }
    }

    /// Keep the cache within `cached_envelopes`: drop the least recently
    /// used tenth beyond it (they reload from storage when used again).
    pub(super) fn evict(&mut self) {
        let cap = self.cfg.cached_envelopes;
        if self.cache.len() <= cap {
            return;
        }
        let target = cap - cap / 10;
        let mut by_age: Vec<(u64, u64)> = self
            .cache
            .iter()
            .map(|(&id, live)| (live.touched, id))
            .collect();
        let excess = by_age.len() - target;
        by_age.select_nth_unstable(excess - 1);
        for &(_, id) in &by_age[..excess] {
            self.cache.remove(&id);
        }
    }
}
