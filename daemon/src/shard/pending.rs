//! Pending writes: what a shard's committed passes wrote that is in its
//! log (`storage::log`, durable) but not yet in RocksDB
//! (`storage.commit = "log"`).
//!
//! Reads find them in the row cache (`rows`), where each is a dirty row
//! until the run that writes it back has landed: one probe answers a read
//! whether its key is pending or not. What is kept here is the run being
//! collected, for the write-back thread (`write_back`), which writes it to
//! RocksDB in key order: one batch whose keys RocksDB inserts next to each
//! other instead of at random places, which is where the saving is. Each
//! key is in a run once (its newest value: the row cache says where), so a
//! hot key rewritten a thousand times is written back once.
//!
//! A run is one buffer of writes copied in arrival order, each linked to
//! the previous write of its slot (a key's slot is its first two bytes):
//! appending is a copy at the end, a scan (always inside a slot) merges the few pending keys of its
//! slot ([`Pending::in_range`]), and the write-back thread takes the run
//! slot by slot, each slot's keys sorted among themselves.
//!
//! Whatever must read RocksDB directly (a slot move, a rebuild from
//! storage, a timer's flush) first waits for everything to land
//! ([`Pending::settle`]). Runs land in the order they were frozen (one at a
//! time), so RocksDB never gets an older value after a newer one.

use super::rows::RowCache;
use super::write_back::{Landed, Run, Writer};
use crate::storage::StorageError;
use bytes::Bytes;
use rush_protocol::SLOTS;
use std::sync::Arc;

/// A run's buffer offsets are u32: a shard's budget is capped well below
/// (the open run may reach twice the budget before a commit waits).
const MAX_BUDGET: usize = 1 << 30;

pub struct Pending {
    /// The run being collected: the newest value per storage key (`None`:
    /// deleted) since the last run was frozen.
    open: Run,
    /// Freeze a run when `bytes` passes this.
    budget: usize,
    /// The last log record whose writes are here (or in RocksDB).
    through: u64,
    /// The last log record RocksDB holds (synced).
    written_back: u64,
    /// The run on its way to RocksDB.
    frozen: Option<Arc<Run>>,
}

impl Pending {
    /// `through`: the last log record RocksDB already holds.
    pub fn new(budget: usize, through: u64) -> Pending {
        Pending {
            open: Run::new(1, 0),
            budget: budget.min(MAX_BUDGET),
            through,
            written_back: through,
            frozen: None,
        }
    }

    /// Nothing pending, nothing in flight.
    pub fn is_empty(&self) -> bool {
        self.open.keys == 0 && self.frozen.is_none()
    }

    /// RocksDB holds every committed write (nothing pending or in flight).
    pub fn settled(&self) -> bool {
        self.is_empty()
    }

    /// Keys held (pending and in flight).
    pub fn len(&self) -> usize {
        self.open.keys + self.frozen.as_ref().map_or(0, |r| r.keys)
    }

    /// Bytes held since the last run was frozen.
    pub fn bytes(&self) -> usize {
        self.open.bytes()
    }

    /// Bytes held before a run is due.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Over budget: time for a run.
    pub fn full(&self) -> bool {
        self.open.bytes() > self.budget
    }

    /// A run is on its way to RocksDB.
    pub fn in_flight(&self) -> bool {
        self.frozen.is_some()
    }

    /// Background work owed: a run in flight.
    pub fn owes_work(&self) -> bool {
        self.frozen.is_some()
    }

    /// The last log record RocksDB holds: segments up to it may go.
    pub fn written_back(&self) -> u64 {
        self.written_back
    }

    /// Does any slot of the key range `[from, to)` have pending writes?
    pub fn touches(&self, from: &[u8], to: &[u8]) -> bool {
        if self.is_empty() {
            return false;
        }
        let (first, last) = slot_span(from, to);
        self.open.touches(first, last)
            || self
                .frozen
                .as_deref()
                .is_some_and(|r| r.touches(first, last))
    }

    /// The pending writes in `[from, to)`, oldest first (a run in flight
    /// before what came after it), in no order within each: a scan merges
    /// them over what RocksDB holds.
    pub fn in_range<'a>(
        &'a self,
        from: &'a [u8],
        to: &'a [u8],
    ) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
        let (first, last) = slot_span(from, to);
        self.frozen
            .as_deref()
            .into_iter()
            .chain(std::iter::once(&self.open))
            .flat_map(move |run| (first..=last).flat_map(move |slot| run.slot(slot)))
            .map(|w| (w.key, w.value))
            .filter(move |(k, _)| *k >= from && *k < to)
    }

    /// The writes of log record `seq`, committed: `rows` holds them (dirty)
    /// for reads, the open run for the write-back thread.
    pub fn absorb(
        &mut self,
        writes: impl Iterator<Item = (Vec<u8>, Option<Bytes>)>,
        seq: u64,
        rows: &mut RowCache,
    ) {
        for (key, value) in writes {
            self.add(key, value, rows);
        }
        self.through = seq;
    }

    fn add(&mut self, key: Vec<u8>, value: Option<Bytes>, rows: &mut RowCache) {
        let run = &mut self.open;
        rows.write(key, value, run.id, |key, value, held| match held {
            Some(at) => run.replace(at, key, value),
            None => run.append(key, value),
        });
    }

    /// Hand what is pending to `writer` as a run. False when there was
    /// nothing to hand over, or a run is still in flight.
    pub fn freeze(&mut self, writer: &Writer, waited_for: bool) -> bool {
        if self.frozen.is_some() || (self.open.keys == 0 && self.written_back == self.through) {
            return false;
        }
        // The next run is about as long as this one: no regrowing from empty.
        let next = Run::new(self.open.id + 1, self.open.bytes());
        let mut run = std::mem::replace(&mut self.open, next);
        run.through = self.through;
        run.waited_for = waited_for;
        let run = Arc::new(run);
        self.frozen = Some(run.clone());
        writer.write(run);
        true
    }

    /// A run landed (or failed to): on success RocksDB holds it, its rows
    /// are clean, and it is freed on the writer's thread; on failure its
    /// writes join the open run (unless newer ones of their keys did).
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
                rows.landed(run.id);
                writer.free(run);
                Ok(landed.keys)
            }
            Err(e) => {
                let open = &mut self.open;
                for w in run.writes() {
                    // Unless the open run wrote the key since (its value is
                    // newer), the row still holds this one: it joins the
                    // open run.
                    rows.requeue(w.key, w.value, open.id, || open.append(w.key, w.value));
                }
                writer.free(run);
                Err(e)
            }
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

/// The slots a key range `[from, to)` spans.
fn slot_span(from: &[u8], to: &[u8]) -> (usize, usize) {
    let bound =
        |b: &[u8]| crate::storage::keys::slot_of_bound(b).min(u32::from(SLOTS) - 1) as usize;
    let (first, last) = (bound(from), bound(to));
    (first, last.max(first))
}

pub fn slot_of(key: &[u8]) -> usize {
    match key {
        [a, b, ..] => usize::from(u16::from_be_bytes([*a, *b])) % usize::from(SLOTS),
        _ => 0,
    }
}
