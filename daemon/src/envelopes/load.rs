//! What the envelope service loads from storage: its indexes (pending
//! expiries, the refund stream, day markers) at the first request or timer
//! run and again after a failed commit, and one envelope's books and grabs
//! on first touch.

use super::days::Days;
use super::expiries::Expiries;
use super::record::{self, EnvelopeRecord, GrabRecord};
use super::refunds::StreamEntry;
use super::{corrupt, storage_error, Envelopes, Live};
use crate::shard::route::shard_of_slot;
use crate::shard::txn::Txn;
use crate::storage::{keys, StorageError};
use hashbrown::HashMap;
use rush_protocol::cmd::{envelope_day, envelope_slot, RefundCursor};
use rush_protocol::{RushError, SLOTS};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

impl Envelopes {
    /// This shard's slots (contiguous).
    fn slots(&self) -> impl Iterator<Item = u16> + use<> {
        let (shard, shards) = (self.shard, self.shards);
        (0..SLOTS).filter(move |&s| shard_of_slot(s, shards) == shard)
    }

    pub(super) fn ensure_loaded(&mut self, txn: &Txn) -> Result<(), RushError> {
        if self.loaded {
            return Ok(());
        }
        self.reload(txn).map_err(storage_error)?;
        self.loaded = true;
        Ok(())
    }

    /// Visit every key of keyspace `ks` in this shard's slots that this node
    /// owns, in order.
    /// Empty slots cost nothing: each scan runs on to the shard's end and
    /// stops at the first key outside the keyspace, whose slot is where the
    /// next scan starts, so a shard costs one seek per slot that has data.
    pub(super) fn scan_keyspace(
        &self,
        txn: &Txn,
        ks: u8,
        mut f: impl FnMut(u16, &[u8], &[u8]),
    ) -> Result<(), StorageError> {
        let mut slots = self.slots();
        let Some(first) = slots.next() else {
            return Ok(());
        };
        let last = slots.last().unwrap_or(first);
        let end = keys::slot_range(last).1;
        let mut slot = first;
        loop {
            let (from, to) = keys::keyspace_range(slot, ks);
            let mut next = None;
            let owned = self.routing.owns(slot);
            txn.scan_stored(&from, &end, |k, v| {
                if k < to.as_slice() {
                    if owned {
                        f(slot, k, v);
                    }
                    true
                } else {
                    next = keys::slot_of(k);
                    false
                }
            })?;
            slot = match next {
                Some(n) if n > slot => n,
                Some(_) if slot < last => slot + 1,
                _ => return Ok(()),
            };
        }
    }

    /// Rebuild the indexes from storage: pending expiries (and money in
    /// flight), the refund stream and its stamp floor, the day markers.
    /// Touches only open envelopes, unacknowledged refunds and day markers,
    /// never the envelopes' bulk. A record that doesn't decode is logged and
    /// skipped (the audit reports it) rather than stopping the service.
    fn reload(&mut self, txn: &Txn) -> Result<(), StorageError> {
        self.cache.clear();
        let mut expiries = Expiries::new(self.cfg.cached_envelopes);
        let mut stream = BTreeMap::new();
        let mut days = Days::default();
        let mut in_flight = 0u64;
        let mut floor = 0u64;
        let mut last_stamp = 0u64;
        let shard = self.shard;
        let skip = |what: &str, k: &[u8], e: &dyn std::fmt::Display| {
            tracing::error!(shard, key = ?k, error = %e, "unreadable envelope {what}; skipped");
        };
        self.scan_keyspace(txn, keys::ks::ENVELOPE_PENDING, |_, k, v| {
            match (keys::envelope::parse_pending(k), record::decode_pending(v)) {
                (Some(entry), Ok(remaining)) => {
                    expiries.insert(entry);
                    in_flight = in_flight.saturating_add(remaining);
                }
                (_, Err(e)) => skip("pending entry", k, &e),
                (None, _) => skip("pending entry", k, &"bad key"),
            }
        })?;
        self.scan_keyspace(txn, keys::ks::ENVELOPE_REFUND, |_, k, v| {
            match (
                keys::envelope::parse_refund(k),
                record::RefundRecord::decode(v),
            ) {
                (Some((stamp, id)), Ok(r)) => {
                    last_stamp = last_stamp.max(stamp);
                    stream.insert(
                        RefundCursor { stamp, id },
                        StreamEntry {
                            amount: r.amount,
                            refunded_at: r.refunded_at,
                            sender: r.sender,
                        },
                    );
                }
                (_, Err(e)) => skip("refund", k, &e),
                (None, _) => skip("refund", k, &"bad key"),
            }
        })?;
        self.scan_keyspace(txn, keys::ks::ENVELOPE_DAY, |slot, k, v| {
            match (keys::envelope::parse_day_marker(k), record::decode_day(v)) {
                (Some(day), Ok(first)) => days.insert(slot, day, first),
                (_, Err(e)) => skip("day marker", k, &e),
                (None, _) => skip("day marker", k, &"bad key"),
            }
        })?;
        self.expiries = expiries;
        self.stream = stream;
        self.days = days;
        // Floors promised by any shard (of any past shard count).
        for i in 0..crate::config::MAX_SHARDS {
            if let Some(raw) = self
                .storage
                .meta_get(&keys::meta::envelope_refund_floor(i))?
            {
                if let Ok(b) = <[u8; 8]>::try_from(raw.as_slice()) {
                    floor = floor.max(u64::from_be_bytes(b));
                }
            }
        }
        self.stamp_floor = self.stamp_floor.max(floor).max(last_stamp);
        self.shared
            .highest_stamp
            .fetch_max(last_stamp, Ordering::SeqCst);
        self.floor_promise = self.floor_promise.max(floor);
        let gauge = &self.metrics.envelopes.in_flight_cents;
        gauge.sub(self.in_flight as i64);
        gauge.add(in_flight as i64);
        self.in_flight = in_flight;
        tracing::debug!(
            shard = self.shard,
            open = self.expiries.len(),
            refunds = self.stream.len(),
            days = self.days.len(),
            "envelope indexes loaded"
        );
        Ok(())
    }

    /// Envelope `id`, which a request names, in memory and marked used at
    /// `now`; NOT_FOUND when there is no such envelope. The caller then
    /// takes it from `self.cache` (see [`Envelopes::ensure_cached`]).
    pub(super) fn open(&mut self, id: u64, now: u64, txn: &Txn) -> Result<(), RushError> {
        if self.ensure_cached(id, Some(now), txn)? {
            Ok(())
        } else {
            Err(RushError::not_found(format!("no envelope {id}")))
        }
    }

    /// Envelope `id`'s grabs, as committed (none read when its books count
    /// none). RocksDB holds them all unless
    /// some are still held for write-back (the shard log): the books, read
    /// through `txn`, count every grab, so a shortfall in RocksDB means
    /// those are pending, and only then are the range's pending writes
    /// merged in (a walk of the slot's pending writes). Without it an
    /// envelope dropped from memory right after a grab came back without
    /// that grab, and its user could grab again.
    pub(super) fn load_grabs(
        &self,
        slot: u16,
        day: u8,
        id: u64,
        rec: &EnvelopeRecord,
        txn: &Txn,
    ) -> Result<HashMap<Box<[u8]>, GrabRecord>, RushError> {
        let mut grabs = HashMap::with_capacity(rec.grabbed() as usize);
        if rec.grabbed() == 0 {
            return Ok(grabs);
        }
        let from = keys::envelope::grab(slot, day, id, b"");
        let (_, to) = keys::envelope::envelope_range(slot, day, id);
        let add = |grabs: &mut HashMap<Box<[u8]>, GrabRecord>,
                   k: &[u8],
                   v: &[u8]|
         -> Result<(), crate::storage::value::Corrupt> {
            let g = GrabRecord::decode(v)?;
            grabs.insert(k[keys::envelope::GRAB_USER_OFFSET..].into(), g);
            Ok(())
        };
        let mut bad = Ok(());
        self.storage
            .scan(self.shard, &from, &to, |k, v| {
                bad = add(&mut grabs, k, v);
                bad.is_ok()
            })
            .map_err(storage_error)?;
        bad.map_err(corrupt)?;
        if grabs.len() < rec.grabbed() as usize {
            grabs.clear();
            let (all, _) = txn
                .scan(&from, &to, rec.count as usize + 1)
                .map_err(storage_error)?;
            for (k, v) in &all {
                add(&mut grabs, k, v).map_err(corrupt)?;
            }
        }
        Ok(grabs)
    }

    /// Read the next pending expiries back from storage (memory holds the
    /// earliest only: `expiries`), one seek per slot this node owns. Writes
    /// held for write-back are written back first, so the read is whole.
    pub(super) fn refill_expiries(&mut self, txn: &Txn) -> Result<(), StorageError> {
        let routing = &self.routing;
        let slots: Vec<u16> = self.slots().filter(|&s| routing.owns(s)).collect();
        self.expiries.refill(|from, visit| {
            for &slot in &slots {
                let start = keys::envelope::pending(slot, from.0, from.1);
                let (_, end) = keys::keyspace_range(slot, keys::ks::ENVELOPE_PENDING);
                txn.scan_stored(&start, &end, |k, _| {
                    keys::envelope::parse_pending(k).is_none_or(&mut *visit)
                })?;
            }
            Ok(())
        })
    }

    /// Make sure the envelope is in memory, loading its books and grabs on
    /// first touch, and mark it used at `used_at` (a request's time; timers
    /// pass `None`). False: no such envelope (never created, removed by
    /// retention, or an id that is not a valid envelope id of this shard).
    /// Callers then use `self.cache` directly, so the borrow of the entry
    /// stays apart from the other fields (metrics, rng).
    pub(super) fn ensure_cached(
        &mut self,
        id: u64,
        used_at: Option<u64>,
        txn: &Txn,
    ) -> Result<bool, RushError> {
        if let Some(live) = self.cache.get_mut(&id) {
            if let Some(at) = used_at {
                live.touched = at;
            }
            return Ok(true);
        }
        let slot = envelope_slot(id);
        let day = envelope_day(id);
        if !(1..=31).contains(&day) || shard_of_slot(slot, self.shards) != self.shard {
            return Ok(false);
        }
        // Through the txn: an envelope created earlier in this group is in
        // the cache already, so a miss here is committed state. Its grabs
        // are not read: a grab looks its user up (`Live::complete`), and
        // ENVELOPE_INFO reads them all.
        let Some(raw) = txn
            .get(&keys::envelope::record(slot, day, id))
            .map_err(storage_error)?
        else {
            return Ok(false);
        };
        let rec = EnvelopeRecord::decode(&raw).map_err(corrupt)?;
        self.cache.insert(
            id,
            Live {
                complete: rec.grabbed() == 0,
                rec,
                grabs: HashMap::new(),
                touched: used_at.unwrap_or(0),
            },
        );
        Ok(true)
    }
}
