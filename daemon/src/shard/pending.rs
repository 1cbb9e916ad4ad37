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
use crate::storage::keys::Key;
use crate::storage::{merge, StorageError};
use bytes::Bytes;
use hashbrown::HashTable;
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
    /// A commit's writes with their row-cache hashes, so that rows can be
    /// prefetched ahead of their writes (kept between commits).
    absorbing: Vec<(Key, Option<Bytes>, u64)>,
    /// The open run's merge writes (row-cache hash, offset): keys no row
    /// holds, with an operand to add to what RocksDB has ([`Pending::merge`]).
    merges: HashTable<(u64, u32)>,
    /// The same for the run in flight.
    frozen_merges: HashTable<(u64, u32)>,
}

/// Where a key's merge operands are ([`Pending::merges_of`]).
pub struct Merges<'a> {
    /// The run in flight holds one: RocksDB may or may not have it yet.
    pub in_flight: bool,
    /// The open run's operand.
    pub open: Option<&'a [u8]>,
}

/// How many writes ahead of the one being placed [`Pending::absorb`] has
/// its row fetched (and twice as far ahead, the control bytes that lead
/// to it; one ahead, the run's earlier write of its key): enough work
/// between the steps to cover a trip to memory.
const PREFETCH_AHEAD: usize = 4;

impl Pending {
    /// `through`: the last log record RocksDB already holds.
    pub fn new(budget: usize, through: u64) -> Pending {
        Pending {
            open: Run::new(1, 0),
            budget: budget.min(MAX_BUDGET),
            through,
            written_back: through,
            frozen: None,
            absorbing: Vec::new(),
            merges: HashTable::new(),
            frozen_merges: HashTable::new(),
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

    /// Memory the open run and the one in flight take (their buffers, as
    /// allocated).
    pub fn held_bytes(&self) -> usize {
        self.open.memory() + self.frozen.as_ref().map_or(0, |r| r.memory())
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
            // (Operands are not values: merged keys, link statistics, are
            // read by key, never scanned.)
            .filter(|w| !w.merge)
            .map(|w| (w.key, w.value))
            .filter(move |(k, _)| *k >= from && *k < to)
    }

    /// The writes of log record `seq`, committed: `rows` holds them (dirty)
    /// for reads, the open run for the write-back thread.
    pub fn absorb(
        &mut self,
        writes: impl Iterator<Item = (impl Into<Key>, Option<Bytes>)>,
        seq: u64,
        rows: &mut RowCache,
    ) {
        let mut batch = std::mem::take(&mut self.absorbing);
        batch.extend(writes.map(|(k, v)| {
            let k = k.into();
            let hash = rows.hash(&k);
            (k, v, hash)
        }));
        // Each row a few writes ahead is on its way from memory while this
        // one is placed (a pass's keys are random keys of a table far larger
        // than the caches: bench/results/NOTES.md).
        for i in 0..batch.len() {
            if let Some(&(_, _, hash)) = batch.get(i + 2 * PREFETCH_AHEAD) {
                rows.prefetch_group(hash);
            }
            if let Some(&(_, _, hash)) = batch.get(i + PREFETCH_AHEAD) {
                rows.prefetch_row(hash);
            }
            // The next write's row is in: if this run holds its key, the
            // write it replaces comes in too.
            if let Some((key, _, hash)) = batch.get(i + 1) {
                if let Some(at) = rows.held_by(*hash, key, self.open.id) {
                    self.open.prefetch(at);
                }
            }
            let (key, value, hash) = &mut batch[i];
            self.add(*hash, key, value.take(), rows);
        }
        batch.clear();
        self.absorbing = batch;
        self.through = seq;
    }

    fn add(&mut self, hash: u64, key: &[u8], value: Option<Bytes>, rows: &mut RowCache) {
        // A write of the key replaces operands the run held for it.
        if !self.merges.is_empty() {
            let open = &self.open;
            if let Ok(e) = self.merges.find_entry(hash, |&(h, at)| {
                h == hash && open.at(at as usize).key == key
            }) {
                let ((_, at), _) = e.remove();
                self.open.kill(at);
            }
        }
        let run = &mut self.open;
        rows.write(hash, key, value, run.id, |key, value, held| match held {
            Some(at) => run.replace(at, key, value),
            None => run.append(key, value),
        });
    }

    /// Add `operand` to `key` without reading it (`storage::merge`): on the
    /// row when the row cache holds the key (the key is then written whole,
    /// as any write), else as a merge write of the open run, combined with
    /// the one it may hold already. Like [`Pending::absorb`], for the
    /// operands of a committed log record.
    pub fn merge(&mut self, key: &[u8], operand: &[u8], rows: &mut RowCache) {
        let hash = rows.hash(key);
        if let Some(base) = rows.peek(hash, key) {
            let whole = merge::merge(base.as_deref(), operand);
            self.add(hash, key, Some(Bytes::from(whole)), rows);
            return;
        }
        let open = &mut self.open;
        match self.merges.find_entry(hash, |&(h, at)| {
            h == hash && open.at(at as usize).key == key
        }) {
            Ok(mut e) => {
                let at = e.get().1;
                let combined = merge::merge(open.at(at as usize).value, operand);
                e.get_mut().1 = open.replace_merge(at, key, &combined);
            }
            Err(_) => {
                let at = open.append_merge(key, operand);
                self.merges.insert_unique(hash, (hash, at), |&(h, _)| h);
            }
        }
    }

    /// Does any run hold merge writes? (Until one lands, a read that misses
    /// the row cache asks [`Pending::merges_of`] its key.)
    pub fn holds_merges(&self) -> bool {
        !(self.merges.is_empty() && self.frozen_merges.is_empty())
    }

    /// The merge writes held for `key` (`hash`: its row-cache hash).
    pub fn merges_of(&self, key: &[u8], hash: u64) -> Merges<'_> {
        let find = |table: &HashTable<(u64, u32)>, run: &'_ Run| {
            table
                .find(hash, |&(h, at)| h == hash && run.at(at as usize).key == key)
                .map(|&(_, at)| at)
        };
        Merges {
            in_flight: self
                .frozen
                .as_deref()
                .is_some_and(|run| find(&self.frozen_merges, run).is_some()),
            open: find(&self.merges, &self.open).and_then(|at| self.open.at(at as usize).value),
        }
    }

    /// Wait for the run in flight to land (see [`Pending::landed`]).
    pub fn wait_in_flight(
        &mut self,
        writer: &Writer,
        rows: &mut RowCache,
    ) -> Result<usize, StorageError> {
        if self.frozen.is_none() {
            return Ok(0);
        }
        self.landed(writer.wait_landed(), writer, rows)
    }

    /// Hand what is pending to `writer` as a run. False when there was
    /// nothing to hand over, or a run is still in flight.
    pub fn freeze(&mut self, writer: &Writer, waited_for: bool) -> bool {
        if self.frozen.is_some() || (self.open.keys == 0 && self.written_back == self.through) {
            return false;
        }
        // A run freed earlier, or a new one about as long as this one: no
        // regrowing from empty.
        let next = writer.spare(self.open.id + 1, self.open.bytes());
        let mut run = std::mem::replace(&mut self.open, next);
        std::mem::swap(&mut self.merges, &mut self.frozen_merges);
        self.merges.clear();
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
        self.frozen_merges.clear();
        match landed.result {
            Ok(()) => {
                self.written_back = self.written_back.max(landed.through);
                rows.landed(run.id);
                writer.free(run);
                Ok(landed.keys)
            }
            Err(e) => {
                let open = &mut self.open;
                for w in run.writes().filter(|w| !w.merge) {
                    // Unless the open run wrote the key since (its value is
                    // newer), the row still holds this one: it joins the
                    // open run.
                    rows.requeue(w.key, w.value, open.id, || open.append(w.key, w.value));
                }
                for w in run.writes().filter(|w| w.merge) {
                    self.requeue_merge(w.key, w.value.unwrap_or_default(), rows);
                }
                writer.free(run);
                Err(e)
            }
        }
    }

    /// A merge write of a run that failed to land, back in the open run,
    /// before what came since: dropped if the key was written since, added
    /// under the open run's operand if it has one.
    fn requeue_merge(&mut self, key: &[u8], operand: &[u8], rows: &mut RowCache) {
        let hash = rows.hash(key);
        if rows.held_by(hash, key, self.open.id).is_some() {
            return;
        }
        let open = &mut self.open;
        match self.merges.find_entry(hash, |&(h, at)| {
            h == hash && open.at(at as usize).key == key
        }) {
            Ok(mut e) => {
                let at = e.get().1;
                let newer = open.at(at as usize).value.unwrap_or_default();
                let combined = merge::merge(Some(operand), newer);
                e.get_mut().1 = open.replace_merge(at, key, &combined);
            }
            Err(_) => {
                let at = open.append_merge(key, operand);
                self.merges.insert_unique(hash, (hash, at), |&(h, _)| h);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Storage;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn key(s: &str) -> Vec<u8> {
        let mut k = 7u16.to_be_bytes().to_vec();
        k.extend_from_slice(s.as_bytes());
        k
    }

    fn value(s: &str) -> Option<Bytes> {
        Some(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// A shard's storage and a write-back thread whose run number `fails`
    /// (from 0) fails to land, as a full disk would fail it; the others are
    /// written for real. `attempts` counts the runs it was handed.
    struct FailingWriter {
        _dir: tempfile::TempDir,
        _poll: mio::Poll,
        _mailbox: super::super::mailbox::Mailbox,
        storage: Arc<Storage>,
        writer: Arc<Writer>,
        attempts: Arc<AtomicUsize>,
    }

    impl FailingWriter {
        fn start(fails: usize) -> FailingWriter {
            let dir = tempfile::tempdir().unwrap();
            let storage = Arc::new(Storage::open_small(dir.path(), Default::default()));
            let poll = mio::Poll::new().unwrap();
            let (wake, mailbox) =
                super::super::mailbox::mailbox(0, &poll, mio::Token(0), 16).unwrap();
            let attempts = Arc::new(AtomicUsize::new(0));
            let writer = Arc::new({
                let (storage, attempts) = (storage.clone(), attempts.clone());
                Writer::start_with(0, wake, move |run| {
                    if attempts.fetch_add(1, Ordering::SeqCst) == fails {
                        return Err(StorageError::Io(std::io::Error::other("disk full")));
                    }
                    super::super::write_back::write(&storage, 0, run)
                })
                .unwrap()
            });
            FailingWriter {
                _dir: dir,
                _poll: poll,
                _mailbox: mailbox,
                storage,
                writer,
                attempts,
            }
        }
    }

    /// A commit longer than the prefetch distance (rows are fetched ahead
    /// of their writes) that rewrites keys the open run holds — in place,
    /// longer, or deleted: each key is one row and one live write of the
    /// run, holding its newest value.
    #[test]
    fn a_long_commit_keeps_one_row_and_one_write_per_key() {
        let mut rows = RowCache::new(1 << 20);
        let mut pending = Pending::new(1 << 20, 0);
        let name = |i: usize| key(&format!("k{i:03}"));
        pending.absorb(
            (0..100).map(|i| (name(i), value(&format!("v{i}")))),
            1,
            &mut rows,
        );
        // Every other key again: the same length (overwritten in place), a
        // longer value (appended, the old write dead), or deleted.
        let newest = |i: usize| match (i % 2, i % 3) {
            (1, _) => value(&format!("v{i}")),
            (_, 0) => value(&format!("w{i}")),
            (_, 1) => value(&format!("longer{i}")),
            _ => None,
        };
        pending.absorb(
            (0..100).step_by(2).map(|i| (name(i), newest(i))),
            2,
            &mut rows,
        );
        assert_eq!(pending.len(), 100, "one live write per key");
        for i in 0..100 {
            assert_eq!(rows.get(&name(i)), Some(newest(i)), "row of k{i:03}");
        }
        let (from, to) = (key(""), key("~"));
        let held: Vec<_> = pending.in_range(&from, &to).collect();
        assert_eq!(held.len(), 100);
        for (k, v) in held {
            let i: usize = std::str::from_utf8(&k[3..]).unwrap().parse().unwrap();
            assert_eq!(
                v.map(Bytes::copy_from_slice),
                newest(i),
                "run's write of k{i:03}"
            );
        }
    }

    /// A run that fails to land goes back to pending under the newer writes
    /// of its keys: reads still see every committed value, nothing is lost,
    /// and the next write-back puts the newest of each in RocksDB.
    #[test]
    fn a_run_that_fails_to_land_is_written_again() {
        for cap in [0, 1 << 20] {
            // The first run fails, as a full disk would fail it; later ones
            // are written for real.
            let failing = FailingWriter::start(0);
            let (storage, writer, attempts) =
                (&failing.storage, &failing.writer, &failing.attempts);
            // An older value of the key the run deletes, in RocksDB already.
            let mut batch = crate::storage::WriteBatch::default();
            batch.put_cf(storage.cf(0), key("gone"), b"stale");
            storage.write(batch, false).unwrap();
            let mut rows = RowCache::new(cap);
            let mut pending = Pending::new(1 << 20, 0);
            let writes = |kv: &[(&str, Option<Bytes>)]| {
                kv.iter()
                    .map(|(k, v)| (key(k), v.clone()))
                    .collect::<Vec<_>>()
                    .into_iter()
            };
            pending.absorb(
                writes(&[("a", value("a1")), ("b", value("b1")), ("gone", None)]),
                1,
                &mut rows,
            );
            assert!(pending.freeze(writer, false));
            // While that run is in flight, b is written again and c is new.
            pending.absorb(
                writes(&[("b", value("b2")), ("c", value("c1"))]),
                2,
                &mut rows,
            );

            let failed = pending.landed(writer.wait_landed(), writer, &mut rows);
            assert!(failed.is_err(), "cap {cap}: the failure is reported");
            assert_eq!(pending.written_back(), 0, "nothing counts as written back");
            for (k, v) in [("a", value("a1")), ("b", value("b2")), ("c", value("c1"))] {
                assert_eq!(rows.get(&key(k)), Some(v), "cap {cap}: {k} is still read");
            }
            assert_eq!(rows.get(&key("gone")), Some(None), "cap {cap}");
            // The open run holds each key once, with its newest value.
            let mut open: Vec<(Vec<u8>, Option<Vec<u8>>)> = pending
                .in_range(&key(""), &key("~"))
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect();
            open.sort();
            let expected = vec![
                (key("a"), Some(b"a1".to_vec())),
                (key("b"), Some(b"b2".to_vec())),
                (key("c"), Some(b"c1".to_vec())),
                (key("gone"), None),
            ];
            assert_eq!(open, expected, "cap {cap}");

            assert_eq!(pending.settle(writer, &mut rows).unwrap(), 4, "cap {cap}");
            assert_eq!(attempts.load(Ordering::SeqCst), 2);
            assert_eq!(pending.written_back(), 2, "cap {cap}");
            assert!(pending.is_empty());
            for (k, v) in &expected {
                let stored = storage.get(0, k).unwrap().map(|v| v.to_vec());
                assert_eq!(&stored, v, "cap {cap}: RocksDB holds the newest {k:?}");
            }
        }
    }

    /// A link's visit statistics as stored: `total` visits on day 1.
    fn stats(total: u64) -> Vec<u8> {
        use crate::storage::{keys::kind, value};
        let s = crate::links::record::Stats {
            total,
            last_visit: 0,
            days: [(1, total)][..].into(),
        };
        value::encode(kind::LINK_STATS, 0, &s.encode())
    }

    /// Operands merged into keys without reading them: a read sees RocksDB's
    /// value with every operand held (the group's own, the open run's, one
    /// in flight, one that failed to land), a write of the key replaces
    /// them, a key the row cache holds takes them on its row, and what
    /// lands in RocksDB is the sum of everything merged, once.
    #[test]
    fn merged_operands_are_read_written_back_and_requeued_once() {
        use crate::shard::txn::Txn;
        // The second run fails, as a full disk would fail it.
        let failing = FailingWriter::start(1);
        let (storage, writer, attempts) = (&failing.storage, &failing.writer, &failing.attempts);
        // Stored already: 10 visits of "a" and 1 of "cached".
        let mut batch = crate::storage::WriteBatch::default();
        batch.put_cf(storage.cf(0), key("a"), stats(10));
        batch.put_cf(storage.cf(0), key("cached"), stats(1));
        storage.write(batch, false).unwrap();

        let mut state = (RowCache::new(1 << 20), Pending::new(1 << 20, 0));
        // One group, committed as a shard commits it (log record `seq`).
        let group = |state: &mut (RowCache, Pending), seq: u64, f: &mut dyn FnMut(&mut Txn)| {
            let (rows, pending) =
                std::mem::replace(state, (RowCache::new(0), Pending::new(1 << 20, 0)));
            let mut txn = Txn::new(storage, 0)
                .with_rows(rows)
                .with_pending(Some(pending), Some(writer.clone()));
            f(&mut txn);
            txn.finish_request(true);
            let mut finished = txn.finish();
            let (mut rows, mut pending) = (finished.rows.unwrap(), finished.pending.unwrap());
            pending.absorb(finished.applied.drain(), seq, &mut rows);
            for (k, operand) in finished.merges.drain() {
                pending.merge(&k, &operand, &mut rows);
            }
            *state = (rows, pending);
        };
        let read = |txn: &Txn, k: &str| txn.get(&key(k)).unwrap().map(|v| v.to_vec());
        group(&mut state, 1, &mut |txn| {
            assert_eq!(read(txn, "cached"), Some(stats(1)), "now in the row cache");
            txn.merge(key("a"), &stats(2));
            txn.merge(key("a"), &stats(3));
            txn.merge(key("b"), &stats(4));
            txn.merge(key("cached"), &stats(5));
            txn.merge(key("gone"), &stats(6));
            txn.merge(key("b2"), &stats(7));
            assert_eq!(read(txn, "b2"), Some(stats(7)), "the group's own operand");
        });
        assert_eq!(state.1.len(), 5);
        group(&mut state, 2, &mut |txn| {
            assert_eq!(read(txn, "a"), Some(stats(15)));
            assert_eq!(read(txn, "b"), Some(stats(4)));
            assert_eq!(read(txn, "cached"), Some(stats(6)));
            txn.delete(key("gone"));
        });
        let (rows, pending) = &mut state;
        assert!(
            rows.get(&key("a")).is_none(),
            "a value RocksDB lacks isn't cached"
        );
        assert_eq!(pending.len(), 5, "a write of gone replaced its operand");
        assert!(pending.freeze(writer, false));
        group(&mut state, 3, &mut |txn| txn.merge(key("a"), &stats(100)));
        group(&mut state, 4, &mut |txn| {
            // (The run in flight holds an operand of a: its landing is
            // waited for.)
            assert_eq!(read(txn, "a"), Some(stats(115)));
            assert_eq!(read(txn, "gone"), None);
        });
        let (rows, pending) = &mut state;
        assert_eq!(pending.written_back(), 2);
        assert!(!pending.in_flight());
        let stored = |k: &str| storage.get(0, &key(k)).unwrap().map(|v| v.to_vec());
        assert_eq!(stored("a"), Some(stats(15)));
        // The next run fails to land: its operand comes back, under a newer one.
        assert!(pending.freeze(writer, false));
        assert!(pending.landed(writer.wait_landed(), writer, rows).is_err());
        group(&mut state, 5, &mut |txn| txn.merge(key("a"), &stats(1000)));
        group(&mut state, 6, &mut |txn| {
            assert_eq!(read(txn, "a"), Some(stats(1115)));
        });
        let (rows, pending) = &mut state;
        pending.settle(writer, rows).unwrap();
        assert_eq!(attempts.load(Ordering::SeqCst), 3);
        assert_eq!(pending.written_back(), 6);
        let expected = [
            ("a", Some(stats(1115))),
            ("b", Some(stats(4))),
            ("b2", Some(stats(7))),
            ("cached", Some(stats(6))),
            ("gone", None),
        ];
        for (k, v) in expected {
            assert_eq!(stored(k), v, "RocksDB's {k}");
        }
    }
}
