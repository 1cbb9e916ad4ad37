//! A shard's write-back thread: it writes runs of pending writes (see
//! `pending`) to RocksDB, so that the shard thread goes on serving while a
//! run of hundreds of thousands of keys is sorted and inserted.
//!
//! One run is in flight at a time. The shard hands it over read-only (an
//! `Arc`: the shard's scans still merge it until RocksDB holds it),
//! the thread writes it in key order with the log position it reaches
//! (`Storage::write_back`: one SST file ingested, then the position
//! synced), says so on a channel and wakes the shard. Freeing a run (a few
//! hundred thousand keys and values) is also its work, not the shard's.

use super::mailbox::ShardHandle;
use crate::storage::{Op, Storage, StorageError};
use crossbeam_channel::{Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;

/// No write (the end of a slot's list).
pub const NO_WRITE: u32 = u32::MAX;

/// A write's header in a run's buffer: the offset of the previous write
/// of its slot (u32), the slot (u16), flags (u8), key and value lengths
/// (u32 each); key and value follow.
const HEADER: usize = 15;
/// Flag: a later write of the same key in this run replaced it.
const DEAD: u8 = 1;
/// Flag: the write deletes its key (no value).
const DELETE: u8 = 2;
/// Flag: the value is an operand to merge into the key (`storage::merge`).
const MERGE: u8 = 4;

/// Pending writes on their way to RocksDB, read-only once frozen.
///
/// The writes are copied into one buffer, back to back in arrival order,
/// each linked to the previous write of its slot: appending is a copy at
/// the end, and the write-back thread reads the run front to back. (Holding
/// each write's key and value as their own allocations, shared with the
/// row cache, cost an allocation and a free per write and a cache miss per
/// write when written back: bench/results/NOTES.md.) A key is written once
/// per run: a newer write of it replaces its value in place when the
/// length is the same, and otherwise marks it dead and is appended. A
/// write is a value, a deletion, or an operand to merge into what RocksDB
/// holds (`Pending::merge`): an SST file takes one entry per key.
pub struct Run {
    /// Runs are numbered from 1 in the order they are frozen.
    pub id: u32,
    data: Vec<u8>,
    /// Per slot, the offset of its last write ([`NO_WRITE`]: none).
    heads: Vec<u32>,
    /// Per slot, its live writes.
    counts: Vec<u32>,
    /// Live writes: keys written.
    pub keys: usize,
    /// The last log record whose writes are in the run.
    pub through: u64,
    /// The shard waits for it (a scan, a slot move, a stop): written
    /// through RocksDB's WAL, not flushed, so that a wait costs one fsync
    /// and leaves no small SST file behind (`Storage::write_back`).
    pub waited_for: bool,
}

/// One write of a run, as read back.
pub struct RunWrite<'a> {
    pub key: &'a [u8],
    /// `None`: deleted.
    pub value: Option<&'a [u8]>,
    /// The value is an operand to merge into the key, not the key's value.
    pub merge: bool,
    slot: u16,
    previous: u32,
    dead: bool,
}

impl<'a> RunWrite<'a> {
    /// What writing it back does.
    pub fn op(&self) -> Op<'a> {
        match (self.value, self.merge) {
            (None, _) => Op::Delete,
            (Some(v), false) => Op::Put(v),
            (Some(v), true) => Op::Merge(v),
        }
    }
}

impl Run {
    /// An empty run numbered `id`, with room for `capacity` bytes of writes.
    pub fn new(id: u32, capacity: usize) -> Run {
        Run {
            id,
            data: Vec::with_capacity(capacity),
            heads: vec![NO_WRITE; usize::from(rush_protocol::SLOTS)],
            counts: vec![0; usize::from(rush_protocol::SLOTS)],
            keys: 0,
            through: 0,
            waited_for: false,
        }
    }

    /// Empty the run for reuse, keeping its buffers: the
    /// pages a run fills stay mapped, so the next run writes into memory
    /// that is already there instead of faulting in freshly zeroed pages
    /// (bench/results/NOTES.md: that was a fifth of limits' CPU).
    fn reset(&mut self) {
        self.data.clear();
        self.heads.fill(NO_WRITE);
        self.counts.fill(0);
        self.keys = 0;
        self.through = 0;
        self.waited_for = false;
    }

    /// Bytes the writes take.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// Memory the run's buffers take, as allocated.
    pub fn memory(&self) -> usize {
        self.data.capacity() + (self.heads.capacity() + self.counts.capacity()) * 4
    }

    /// Add a write of a key the run doesn't write yet; returns where it is.
    pub fn append(&mut self, key: &[u8], value: Option<&[u8]>) -> u32 {
        let flags = if value.is_none() { DELETE } else { 0 };
        self.push(key, value.unwrap_or_default(), flags)
    }

    /// Add an operand to merge into a key the run doesn't write yet;
    /// returns where it is.
    pub fn append_merge(&mut self, key: &[u8], operand: &[u8]) -> u32 {
        self.push(key, operand, MERGE)
    }

    fn push(&mut self, key: &[u8], value: &[u8], flags: u8) -> u32 {
        let slot = super::pending::slot_of(key);
        let at = self.data.len();
        self.data.extend_from_slice(&self.heads[slot].to_le_bytes());
        self.data.extend_from_slice(&(slot as u16).to_le_bytes());
        self.data.push(flags);
        self.data
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.data
            .extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.data.extend_from_slice(key);
        self.data.extend_from_slice(value);
        // (`Pending` freezes a run long before its offsets pass u32.)
        let at = at as u32;
        self.heads[slot] = at;
        self.counts[slot] += 1;
        self.keys += 1;
        at
    }

    /// A newer value of the write of `key` at `at`: in place when it is as
    /// long, else appended (and the old one marked dead). Returns where it
    /// is.
    pub fn replace(&mut self, at: u32, key: &[u8], value: Option<&[u8]>) -> u32 {
        let w = self.at(at as usize);
        let (key_len, old_len) = (w.key.len(), w.value.map_or(0, <[u8]>::len));
        let start = at as usize + HEADER + key_len;
        if let Some(v) = value.filter(|v| v.len() == old_len) {
            self.data[at as usize + 6] = 0;
            self.data[start..start + v.len()].copy_from_slice(v);
            return at;
        }
        if value.is_none() && old_len == 0 {
            self.data[at as usize + 6] = DELETE;
            return at;
        }
        self.kill(at);
        self.append(key, value)
    }

    /// A new operand, `operand`, for the merge write of `key` at `at`
    /// (what it held merged with what came since): in place when it is as
    /// long, else appended. Returns where it is.
    pub fn replace_merge(&mut self, at: u32, key: &[u8], operand: &[u8]) -> u32 {
        let w = self.at(at as usize);
        let start = at as usize + HEADER + w.key.len();
        if w.value.map_or(0, <[u8]>::len) == operand.len() {
            self.data[start..start + operand.len()].copy_from_slice(operand);
            return at;
        }
        self.kill(at);
        self.append_merge(key, operand)
    }

    /// The write at `at` no longer counts (a newer one of its key does).
    pub fn kill(&mut self, at: u32) {
        let slot = self.at(at as usize).slot;
        self.data[at as usize + 6] |= DEAD;
        self.counts[usize::from(slot)] -= 1;
        self.keys -= 1;
    }

    /// Start loading the write at offset `at` from memory.
    #[inline]
    pub fn prefetch(&self, at: u32) {
        super::rows::prefetch(self.data.as_ptr().wrapping_add(at as usize));
    }

    /// The write at offset `at`.
    pub fn at(&self, at: usize) -> RunWrite<'_> {
        let d = &self.data[at..];
        let u32_at = |i: usize| u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
        let (key_len, value_len) = (u32_at(7) as usize, u32_at(11) as usize);
        let flags = d[6];
        let key = &d[HEADER..HEADER + key_len];
        let value = &d[HEADER + key_len..HEADER + key_len + value_len];
        RunWrite {
            key,
            value: (flags & DELETE == 0).then_some(value),
            merge: flags & MERGE != 0,
            slot: u16::from_le_bytes([d[4], d[5]]),
            previous: u32_at(0),
            dead: flags & DEAD != 0,
        }
    }

    /// Every live write, in arrival order.
    pub fn writes(&self) -> impl Iterator<Item = RunWrite<'_>> + '_ {
        let mut at = 0;
        std::iter::from_fn(move || {
            while at < self.data.len() {
                let w = self.at(at);
                at += HEADER + w.key.len() + w.value.map_or(0, <[u8]>::len);
                if !w.dead {
                    return Some(w);
                }
            }
            None
        })
    }

    /// Does the run write anything in slots `first..=last`?
    pub fn touches(&self, first: usize, last: usize) -> bool {
        self.counts[first..=last].iter().any(|&n| n > 0)
    }

    /// The live writes of `slot`, newest first.
    pub fn slot(&self, slot: usize) -> impl Iterator<Item = RunWrite<'_>> + '_ {
        let mut next = self.heads[slot];
        std::iter::from_fn(move || {
            while next != NO_WRITE {
                let w = self.at(next as usize);
                next = w.previous;
                if !w.dead {
                    return Some(w);
                }
            }
            None
        })
    }
}

/// What became of a run.
pub struct Landed {
    pub through: u64,
    pub keys: usize,
    pub secs: f64,
    pub result: Result<(), StorageError>,
}

enum Job {
    Write(Arc<Run>),
    Free(Arc<Run>),
}

pub struct Writer {
    jobs: Option<Sender<Job>>,
    landed: Receiver<Landed>,
    /// Freed runs, emptied on the writer's thread, for the shard to reuse.
    spare: Receiver<Run>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    /// Start shard `shard`'s write-back thread; it wakes the shard through
    /// `wake` when a run has landed.
    pub fn start(
        shard: usize,
        storage: Arc<Storage>,
        wake: ShardHandle,
    ) -> std::io::Result<Writer> {
        Writer::start_with(shard, wake, move |run| write(&storage, shard, run))
    }

    /// [`Writer::start`] with what writing a run is (a test makes it fail).
    pub(super) fn start_with(
        shard: usize,
        wake: ShardHandle,
        mut write: impl FnMut(&Run) -> Result<(), StorageError> + Send + 'static,
    ) -> std::io::Result<Writer> {
        let (jobs, rx) = crossbeam_channel::unbounded::<Job>();
        let (tx, landed) = crossbeam_channel::unbounded();
        // One spare is all a shard reuses (it freezes one run at a time).
        let (spares, spare) = crossbeam_channel::bounded(1);
        let thread = std::thread::Builder::new()
            .name(format!("rush-write-back-{shard}"))
            .spawn(move || {
                // Not `metrics::local::enter_shard`: a shard's cells take
                // plain stores from its own thread only; this thread counts
                // in the shared cell.
                for job in rx {
                    let run = match job {
                        Job::Write(run) => run,
                        Job::Free(run) => {
                            // Emptied here, off the shard's thread; a spare
                            // the shard has not taken yet means this one is
                            // dropped.
                            if let Ok(mut run) = Arc::try_unwrap(run) {
                                run.reset();
                                let _ = spares.try_send(run);
                            }
                            continue;
                        }
                    };
                    let started = Instant::now();
                    let result = write(&run);
                    let landed = Landed {
                        through: run.through,
                        keys: run.keys,
                        secs: started.elapsed().as_secs_f64(),
                        result,
                    };
                    // The shard holds the other reference: it frees the run
                    // through `free` once it stops reading it.
                    drop(run);
                    if tx.send(landed).is_err() {
                        return;
                    }
                    wake.nudge();
                }
            })?;
        Ok(Writer {
            jobs: Some(jobs),
            landed,
            spare,
            thread: Some(thread),
        })
    }

    /// Write `run` to RocksDB.
    pub fn write(&self, run: Arc<Run>) {
        self.send(Job::Write(run));
    }

    /// Free `run` on this thread (it comes back through [`Writer::spare`]).
    pub fn free(&self, run: Arc<Run>) {
        self.send(Job::Free(run));
    }

    /// An empty run to collect writes in as run `id`: a freed one when
    /// there is one, else a new one with room for `capacity` bytes.
    pub fn spare(&self, id: u32, capacity: usize) -> Run {
        match self.spare.try_recv() {
            Ok(mut run) => {
                run.id = id;
                run.data.reserve(capacity);
                run
            }
            Err(_) => Run::new(id, capacity),
        }
    }

    fn send(&self, job: Job) {
        if let Some(jobs) = &self.jobs {
            // The thread only stops when this Writer is dropped.
            let _ = jobs.send(job);
        }
    }

    /// A run that has landed, if any.
    pub fn try_landed(&self) -> Option<Landed> {
        self.landed.try_recv().ok()
    }

    /// Wait for the run in flight to land.
    pub fn wait_landed(&self) -> Landed {
        self.landed.recv().unwrap_or_else(|_| Landed {
            through: 0,
            keys: 0,
            secs: 0.0,
            result: Err(StorageError::Io(std::io::Error::other(
                "the write-back thread stopped",
            ))),
        })
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The run in key order: slot by slot (keys start with their big-endian
/// slot), each slot's few keys sorted among themselves. The writes are
/// placed by slot in one pass over the run's buffer (a counting sort:
/// following each slot's links instead missed the cache on nearly every
/// write, bench/results/NOTES.md).
pub(super) fn write(storage: &Storage, shard: usize, run: &Run) -> Result<(), StorageError> {
    let mut next = Vec::with_capacity(run.counts.len());
    let mut total = 0usize;
    for &n in &run.counts {
        next.push(total);
        total += n as usize;
    }
    let mut sorted: Vec<(&[u8], Op)> = vec![(&[], Op::Delete); total];
    for w in run.writes() {
        let at = &mut next[usize::from(w.slot)];
        sorted[*at] = (w.key, w.op());
        *at += 1;
    }
    let mut start = 0;
    for &n in &run.counts {
        let end = start + n as usize;
        if n > 1 {
            sorted[start..end].sort_unstable_by(|a, b| a.0.cmp(b.0));
        }
        start = end;
    }
    // In key order the writes are at random places of the run: each one's
    // bytes are loaded a few writes ahead of their turn, so the misses
    // overlap (the first touch of each key, in the SST writer's order
    // check, was a third of this thread's time: bench/results/NOTES.md).
    let ahead = |i: usize| {
        if let Some(&(k, op)) = sorted.get(i + WRITE_AHEAD) {
            super::rows::prefetch(k.as_ptr());
            if let Op::Put(v) | Op::Merge(v) = op {
                super::rows::prefetch(v.as_ptr());
            }
        }
        sorted[i]
    };
    storage.write_back(shard, (0..total).map(ahead), run.through, run.waited_for)
}

/// How many writes ahead of the one being written back its bytes are
/// loaded.
const WRITE_AHEAD: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    fn key(slot: u16, s: &str) -> Vec<u8> {
        let mut k = slot.to_be_bytes().to_vec();
        k.extend_from_slice(s.as_bytes());
        k
    }

    #[test]
    fn a_run_keeps_one_live_write_per_key() {
        let mut run = Run::new(1, 0);
        let a = run.append(&key(3, "a"), Some(b"1"));
        let b = run.append(&key(3, "b"), None);
        let c = run.append(&key(9, "c"), Some(b"xyz"));
        assert_eq!(
            run.replace(a, &key(3, "a"), Some(b"2")),
            a,
            "same length: in place"
        );
        assert_eq!(
            run.replace(b, &key(3, "b"), None),
            b,
            "still deleted: in place"
        );
        let c2 = run.replace(c, &key(9, "c"), Some(b"longer"));
        assert_ne!(c2, c, "another length: appended");
        let b2 = run.replace(b, &key(3, "b"), Some(b"back"));
        assert_ne!(b2, b);
        let all: Vec<(Vec<u8>, Option<Vec<u8>>)> = run
            .writes()
            .map(|w| (w.key.to_vec(), w.value.map(<[u8]>::to_vec)))
            .collect();
        assert_eq!(
            all,
            vec![
                (key(3, "a"), Some(b"2".to_vec())),
                (key(9, "c"), Some(b"longer".to_vec())),
                (key(3, "b"), Some(b"back".to_vec())),
            ]
        );
        assert_eq!(run.keys, 3);
        let slot3: Vec<Vec<u8>> = run.slot(3).map(|w| w.key.to_vec()).collect();
        assert_eq!(slot3, vec![key(3, "b"), key(3, "a")], "newest first");
        assert!(run.touches(0, 3) && run.touches(9, 9) && !run.touches(4, 8));
        assert_eq!(run.at(c2 as usize).value, Some(&b"longer"[..]));
    }

    /// A freed run comes back empty through `spare`, its buffer kept, so the
    /// next run fills pages that are already mapped.
    #[test]
    fn a_freed_run_is_reused_empty() {
        let poll = mio::Poll::new().unwrap();
        let (wake, _mailbox) = super::super::mailbox::mailbox(0, &poll, mio::Token(0), 16).unwrap();
        let writer = Writer::start_with(0, wake, |_| Ok(())).unwrap();
        let mut run = Run::new(1, 0);
        for i in 0..1000 {
            run.append(&key(i % 7, &format!("k{i}")), Some(b"value"));
        }
        run.through = 5;
        run.waited_for = true;
        let capacity = run.data.capacity();
        let run = Arc::new(run);
        writer.write(run.clone());
        assert!(writer.wait_landed().result.is_ok());
        writer.free(run);
        // Jobs run in order: once this one has landed, the free is done.
        writer.write(Arc::new(Run::new(2, 0)));
        assert!(writer.wait_landed().result.is_ok());

        let spare = writer.spare(3, 0);
        assert_eq!(spare.id, 3);
        assert!(spare.data.capacity() >= capacity, "the buffer is kept");
        assert_eq!((spare.bytes(), spare.keys, spare.through), (0, 0, 0));
        assert!(!spare.waited_for);
        assert!(spare.writes().next().is_none());
        assert!(spare.slot(3).next().is_none());
        assert!(!spare.touches(0, usize::from(rush_protocol::SLOTS) - 1));
        let fresh = writer.spare(4, 100);
        assert_eq!(fresh.id, 4);
        assert!(
            fresh.data.capacity() >= 100 && fresh.data.capacity() < capacity,
            "no spare left: a new run"
        );
    }
}
