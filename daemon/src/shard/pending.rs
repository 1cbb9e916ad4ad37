//! Pending writes: what a shard's committed passes wrote that is in its
//! log (`storage::log`, durable) but not yet in RocksDB
//! (`storage.commit = "log"`).
//!
//! Reads look here before the row cache and RocksDB. When the pending
//! writes pass their budget they are frozen into a run and handed to the
//! shard's write-back thread (`write_back`), which writes them to RocksDB
//! in key order: one batch whose keys RocksDB inserts next to each other
//! instead of at random places, which is where the saving is. Each key is
//! held once (its newest value), so a hot key rewritten a thousand times is
//! written back once. Until the run has landed, reads find it here too.
//!
//! A landed run's values then move into the row cache, a few slots each
//! pass ([`Pending::drain_into`]): written values are read soon after, and
//! the row cache may hold older values of the same keys (reads look here
//! first, so those are never seen). What moves is what the run held; no
//! key is copied.
//!
//! The writes are kept one map per slot: a key's slot is its first two
//! bytes, so a lookup costs one more index, a scan (always inside a slot)
//! merges the few pending keys of its slot ([`Pending::in_range`]), and a
//! run is written slot by slot, each slot's keys sorted among themselves.
//!
//! Whatever must read RocksDB directly (a slot move, a rebuild from
//! storage, a timer's flush) first waits for everything to land
//! ([`Pending::settle`]). Runs land in the order they were frozen (one at a
//! time), so RocksDB never gets an older value after a newer one.

use super::rows::RowCache;
use super::write_back::{Landed, Run, SlotMap, Writer};
use crate::storage::StorageError;
use bytes::Bytes;
use rush_protocol::SLOTS;
use std::sync::Arc;

/// Per-entry bookkeeping counted on top of key and value.
const ENTRY_OVERHEAD: usize = 48;

pub struct Pending {
    /// Newest value per storage key (`None`: deleted) since the last run,
    /// one map per slot.
    slots: Vec<SlotMap>,
    keys: usize,
    bytes: usize,
    /// Freeze a run when `bytes` passes this.
    budget: usize,
    /// The last log record whose writes are here (or in RocksDB).
    through: u64,
    /// The last log record RocksDB holds (synced).
    written_back: u64,
    /// The run on its way to RocksDB.
    frozen: Option<Arc<Run>>,
    /// A run RocksDB holds, moving into the row cache from slot `.1` on.
    draining: Option<(Run, usize)>,
}

/// Slots of a landed run moved into the row cache per pass.
pub const DRAIN_SLOTS_PER_PASS: usize = 256;

impl Pending {
    /// `through`: the last log record RocksDB already holds.
    pub fn new(budget: usize, through: u64) -> Pending {
        Pending {
            slots: empty_slots(),
            keys: 0,
            bytes: 0,
            budget,
            through,
            written_back: through,
            frozen: None,
            draining: None,
        }
    }

    /// Nothing pending, nothing in flight.
    pub fn is_empty(&self) -> bool {
        self.keys == 0 && self.frozen.is_none() && self.draining.is_none()
    }

    /// RocksDB holds every committed write (nothing pending or in flight).
    pub fn settled(&self) -> bool {
        self.keys == 0 && self.frozen.is_none()
    }

    /// Stop moving a landed run into the row cache (RocksDB holds it): a
    /// slot's data is about to change outside the shard's groups, and the
    /// row cache is cleared.
    pub fn forget_landed(&mut self, writer: &Writer) {
        if let Some((run, _)) = self.draining.take() {
            writer.free(Arc::new(run));
        }
    }

    /// Keys held (pending and in flight).
    pub fn len(&self) -> usize {
        self.keys + self.frozen.as_ref().map_or(0, |r| r.keys)
    }

    /// Bytes held since the last run was frozen.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes held before a run is due.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Over budget: time for a run.
    pub fn full(&self) -> bool {
        self.bytes > self.budget
    }

    /// A run is on its way to RocksDB.
    pub fn in_flight(&self) -> bool {
        self.frozen.is_some()
    }

    /// Background work owed: a run in flight, or one still moving into the
    /// row cache.
    pub fn owes_work(&self) -> bool {
        self.frozen.is_some() || self.draining.is_some()
    }

    /// The last log record RocksDB holds: segments up to it may go.
    pub fn written_back(&self) -> u64 {
        self.written_back
    }

    /// The newest pending value of `key`: `Some(None)` when it was deleted,
    /// `None` when nothing is pending for it.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<Option<Bytes>> {
        if self.is_empty() {
            return None;
        }
        let slot = slot_of(key);
        if let Some(v) = self.slots[slot].get(key) {
            return Some(v.clone());
        }
        if let Some(v) = self.frozen.as_ref().and_then(|r| r.slots[slot].get(key)) {
            return Some(v.clone());
        }
        let (run, _) = self.draining.as_ref()?;
        run.slots[slot].get(key).cloned()
    }

    /// Does any slot of the key range `[from, to)` have pending writes?
    pub fn touches(&self, from: &[u8], to: &[u8]) -> bool {
        if self.is_empty() {
            return false;
        }
        let (first, last) = slot_span(from, to);
        let any = |slots: &[SlotMap]| slots[first..=last].iter().any(|m| !m.is_empty());
        any(&self.slots) || self.frozen.as_ref().is_some_and(|r| any(&r.slots))
    }

    /// The pending writes in `[from, to)`, oldest first (a run in flight
    /// before what came after it), in no order within each: a scan merges
    /// them over what RocksDB holds.
    pub fn in_range<'a>(
        &'a self,
        from: &'a [u8],
        to: &'a [u8],
    ) -> impl Iterator<Item = (&'a [u8], &'a Option<Bytes>)> + 'a {
        let (first, last) = slot_span(from, to);
        let frozen = self.frozen.as_deref().map(|r| &r.slots[first..=last]);
        frozen
            .into_iter()
            .flatten()
            .chain(&self.slots[first..=last])
            .flat_map(|m| m.iter())
            .map(|(k, v)| (k.as_slice(), v))
            .filter(move |(k, _)| *k >= from && *k < to)
    }

    /// The writes of log record `seq`, committed.
    pub fn absorb(&mut self, writes: impl Iterator<Item = (Vec<u8>, Option<Bytes>)>, seq: u64) {
        for (key, value) in writes {
            self.insert(key, value);
        }
        self.through = seq;
    }

    fn insert(&mut self, key: Vec<u8>, value: Option<Bytes>) {
        let (key_len, new_len) = (key.len(), value_len(&value));
        let slot = slot_of(&key);
        match self.slots[slot].insert(key, value) {
            Some(old) => self.bytes = (self.bytes + new_len).saturating_sub(value_len(&old)),
            None => {
                self.bytes += key_len + new_len + ENTRY_OVERHEAD;
                self.keys += 1;
            }
        }
    }

    /// Hand what is pending to `writer` as a run. False when there was
    /// nothing to hand over, or a run is still in flight.
    pub fn freeze(&mut self, writer: &Writer, waited_for: bool) -> bool {
        if self.frozen.is_some() || (self.keys == 0 && self.written_back == self.through) {
            return false;
        }
        let run = Arc::new(Run {
            slots: std::mem::replace(&mut self.slots, empty_slots()),
            keys: std::mem::take(&mut self.keys),
            through: self.through,
            bytes: std::mem::take(&mut self.bytes),
            waited_for,
        });
        self.frozen = Some(run.clone());
        writer.write(run);
        true
    }

    /// A run landed (or failed to): on success RocksDB holds it, and it is
    /// freed on the writer's thread; on failure its writes are pending again
    /// (under any newer ones).
    pub fn landed(
        &mut self,
        landed: Landed,
        writer: &Writer,
        rows: &mut RowCache,
    ) -> Result<usize, StorageError> {
        let Some(run) = self.frozen.take() else {
            return Ok(0);
        };
        match landed.result {
            Ok(()) => {
                self.written_back = self.written_back.max(landed.through);
                // The writer let go of it before saying it landed.
                // The run before must have moved whole first: the row cache
                // may hold values older than what it has left.
                while self.draining.is_some() {
                    self.drain_into(rows, usize::MAX);
                }
                match Arc::try_unwrap(run) {
                    Ok(run) => self.draining = Some((run, 0)),
                    Err(shared) => {
                        // (Never: the writer lets go first.) Without moving
                        // its values, the row cache can't keep older ones.
                        for (k, _) in shared.slots.iter().flatten() {
                            rows.remove(k);
                        }
                        writer.free(shared);
                    }
                }
                Ok(landed.keys)
            }
            Err(e) => {
                // The writer let go of it before saying so.
                let run = Arc::try_unwrap(run).unwrap_or_else(|shared| Run {
                    slots: shared.slots.clone(),
                    keys: shared.keys,
                    through: shared.through,
                    bytes: shared.bytes,
                    waited_for: shared.waited_for,
                });
                for (k, v) in run.slots.into_iter().flatten() {
                    if !self.slots[slot_of(&k)].contains_key(&k) {
                        self.insert(k, v);
                    }
                }
                Err(e)
            }
        }
    }

    /// Move the next `max_slots` slots of a landed run into `rows` (a few
    /// each pass: [`DRAIN_SLOTS_PER_PASS`]).
    pub fn drain_into(&mut self, rows: &mut RowCache, max_slots: usize) {
        let Some((run, next)) = self.draining.as_mut() else {
            return;
        };
        let end = next.saturating_add(max_slots).min(run.slots.len());
        for slot in &mut run.slots[*next..end] {
            for (k, v) in slot.drain() {
                rows.insert(k, v);
            }
        }
        *next = end;
        if end == run.slots.len() {
            self.draining = None;
        }
    }

    /// Make RocksDB hold everything committed: wait for the run in flight,
    /// then write what is pending as one more and wait for it. Returns the
    /// keys written back.
    pub fn settle(&mut self, writer: &Writer, rows: &mut RowCache) -> Result<usize, StorageError> {
        let mut keys = 0;
        loop {
            if self.frozen.is_some() {
                keys += self.landed(writer.wait_landed(), writer, rows)?;
            }
            if !self.freeze(writer, true) {
                return Ok(keys);
            }
        }
    }
}

fn empty_slots() -> Vec<SlotMap> {
    (0..SLOTS).map(|_| SlotMap::default()).collect()
}

/// The slots a key range `[from, to)` spans.
fn slot_span(from: &[u8], to: &[u8]) -> (usize, usize) {
    let bound =
        |b: &[u8]| crate::storage::keys::slot_of_bound(b).min(u32::from(SLOTS) - 1) as usize;
    let (first, last) = (bound(from), bound(to));
    (first, last.max(first))
}

fn value_len(v: &Option<Bytes>) -> usize {
    v.as_ref().map_or(0, Bytes::len)
}

fn slot_of(key: &[u8]) -> usize {
    match key {
        [a, b, ..] => usize::from(u16::from_be_bytes([*a, *b])) % usize::from(SLOTS),
        _ => 0,
    }
}
