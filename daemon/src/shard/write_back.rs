//! A shard's write-back thread: it writes runs of pending writes (see
//! `pending`) to RocksDB, so that the shard thread goes on serving while a
//! run of hundreds of thousands of keys is sorted and inserted.
//!
//! One run is in flight at a time. The shard hands it over read-only (an
//! `Arc`: the shard still answers reads from it until RocksDB holds it),
//! the thread writes it in key order with the log position it reaches
//! (`Storage::write_back`: flushed to an SST file, then the position
//! synced), says so on a channel and wakes the shard. Freeing a run (a few
//! hundred thousand keys and values) is also its work, not the shard's.

use super::mailbox::ShardHandle;
use crate::storage::{Storage, StorageError};
use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};
use hashbrown::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Newest value per storage key (`None`: deleted) of one slot.
pub type SlotMap = HashMap<Vec<u8>, Option<Bytes>>;

/// Pending writes on their way to RocksDB, read-only.
pub struct Run {
    /// One map per slot, by slot (keys start with their slot).
    pub slots: Vec<SlotMap>,
    pub keys: usize,
    /// The last log record whose writes are in `slots`.
    pub through: u64,
    pub bytes: usize,
    /// The shard waits for it (a scan, a slot move, a stop): written
    /// through RocksDB's WAL, not flushed, so that a wait costs one fsync
    /// and leaves no small SST file behind (`Storage::write_back`).
    pub waited_for: bool,
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
        let (jobs, rx) = crossbeam_channel::unbounded::<Job>();
        let (tx, landed) = crossbeam_channel::unbounded();
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
                            drop(run);
                            continue;
                        }
                    };
                    let started = Instant::now();
                    let result = write(&storage, shard, &run);
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
            thread: Some(thread),
        })
    }

    /// Write `run` to RocksDB.
    pub fn write(&self, run: Arc<Run>) {
        self.send(Job::Write(run));
    }

    /// Free `run` on this thread.
    pub fn free(&self, run: Arc<Run>) {
        self.send(Job::Free(run));
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
/// slot), each slot's few keys sorted among themselves.
fn write(storage: &Storage, shard: usize, run: &Run) -> Result<(), StorageError> {
    let mut sorted: Vec<(&Vec<u8>, &Option<Bytes>)> = Vec::with_capacity(run.keys);
    for slot in &run.slots {
        let start = sorted.len();
        sorted.extend(slot.iter());
        sorted[start..].sort_unstable_by(|a, b| a.0.cmp(b.0));
    }
    storage.write_back(
        shard,
        sorted.iter().map(|(k, v)| (k.as_slice(), v.as_deref())),
        run.through,
        run.waited_for,
    )
}
