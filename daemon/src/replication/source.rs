//! The primary's side: each shard's backlog of committed records, and
//! snapshot sessions.
//!
//! **Backlog.** From the first snapshot a replica takes, each shard appends
//! every group commit it makes ([`super::record`]) to its backlog, after
//! the commit succeeded: a bounded queue in memory (`replication.backlog_mb`
//! split over the shards), oldest records dropped first — Redis's
//! replication backlog. A replica that fetches from a position the backlog
//! no longer holds (it fell that far behind, or the primary restarted:
//! another `run_id`) is told NOT_FOUND and bootstraps again. A node no
//! replica ever followed captures nothing: one relaxed load per commit.
//!
//! **Snapshot.** A session pauses every shard at once between its passes
//! (each first writes its pending writes back, so RocksDB holds every
//! committed write), takes one RocksDB snapshot of the whole node, notes
//! each shard's backlog head, and lets the shards go: they were held for
//! the time it takes to make a snapshot. The session's thread then reads
//! the snapshot page by page as the replica asks, and ends when it is read
//! or after [`SESSION_IDLE`] without a request.

use crate::shard::ShardHandle;
use crate::storage::keys::{self, meta};
use crate::storage::Storage;
use bytes::Bytes;
use rush_protocol::cmd::cluster::replication::META_FAMILY;
use rush_protocol::cmd::{ReplPair, ReplRecord, ReplSnapshotReply};
use rush_protocol::RushError;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A snapshot session nobody asked a page of for this long ends.
pub const SESSION_IDLE: Duration = Duration::from_secs(60);
/// How long a session waits for every shard to pause.
const PAUSE_WAIT: Duration = Duration::from_secs(60);

/// What a shard is asked to do for a snapshot (between its passes): start
/// capturing, write everything pending back, say its backlog head, and wait
/// until the snapshot is taken.
pub struct Pause {
    pub paused: mpsc::SyncSender<Result<u64, RushError>>,
    /// Resolves (a message, or the session gone) when the shard may go on.
    pub resume: mpsc::Receiver<()>,
}

#[derive(Default)]
struct Backlog {
    /// (seq, record), oldest first.
    records: VecDeque<(u64, Bytes)>,
    bytes: usize,
    /// The last seq appended (0: none yet).
    head: u64,
}

struct ShardBacklog {
    capturing: AtomicBool,
    inner: Mutex<Backlog>,
}

/// What became of a wait for a replica ([`Source::wait_acked`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// The replica holds the record.
    Held,
    /// Not within the time given.
    NotYet,
    /// No replica has fetched for [`REPLICA_GONE_AFTER`] (or ever).
    NoReplica,
}

/// What a replica fetched last (for the primary's status).
#[derive(Clone, Debug)]
pub struct Follower {
    pub at: Instant,
    pub positions: Vec<u64>,
}

/// The primary's side of replication, one per node.
pub struct Source {
    /// This run of the node (random at each start): positions name records
    /// of one run's backlogs.
    pub run_id: u64,
    shards: Box<[ShardBacklog]>,
    budget: usize,
    /// Woken at each append (a fetch waits for records).
    appended: tokio::sync::Notify,
    sessions: Mutex<HashMap<u64, mpsc::SyncSender<PageAsk>>>,
    /// The last fetch a replica made.
    pub last_fetch: Mutex<Option<Follower>>,
    /// What a replica holds durably, by its fetches (`min_acks = 1`).
    acked: Mutex<Acked>,
    acked_changed: Condvar,
}

/// The positions a replica said it holds durably, and when it last asked.
struct Acked {
    positions: Vec<u64>,
    seen: Option<Instant>,
}

/// A replica that has not fetched for this long is gone: a write that
/// needs its acknowledgement fails at once instead of waiting. (A fetch
/// waits up to 5 s for records; one is always under way while a replica
/// follows.)
pub const REPLICA_GONE_AFTER: Duration = Duration::from_secs(6);

struct PageAsk {
    max_bytes: usize,
    reply: oneshot::Sender<Result<ReplSnapshotReply, RushError>>,
}

impl Source {
    /// `capture`: keep commits from the start (a primary whose writes wait
    /// for a replica's acknowledgement), not from the first snapshot.
    pub fn new(shards: usize, backlog_bytes: usize, capture: bool) -> Source {
        Source {
            run_id: rand::random::<u64>() | 1,
            shards: (0..shards)
                .map(|_| ShardBacklog {
                    capturing: AtomicBool::new(capture),
                    inner: Mutex::new(Backlog::default()),
                })
                .collect(),
            acked: Mutex::new(Acked {
                positions: vec![0; shards],
                seen: None,
            }),
            acked_changed: Condvar::new(),
            budget: (backlog_bytes / shards.max(1)).max(1 << 16),
            appended: tokio::sync::Notify::new(),
            sessions: Mutex::new(HashMap::new()),
            last_fetch: Mutex::new(None),
        }
    }

    /// Does shard `i` keep its commits for replicas? (Once a replica took a
    /// snapshot, for the rest of the run.)
    #[inline]
    pub fn capturing(&self, shard: usize) -> bool {
        self.shards[shard].capturing.load(Ordering::Relaxed)
    }

    pub fn start_capture(&self, shard: usize) {
        self.shards[shard].capturing.store(true, Ordering::Relaxed);
    }

    /// Shard `i` committed `record`; its seq.
    pub fn append(&self, shard: usize, record: &[u8]) -> u64 {
        let seq = {
            let mut b = self.shards[shard].inner.lock().expect("not poisoned");
            b.head += 1;
            let seq = b.head;
            b.bytes += record.len();
            b.records.push_back((seq, Bytes::copy_from_slice(record)));
            while b.bytes > self.budget && b.records.len() > 1 {
                let (_, gone) = b.records.pop_front().expect("more than one");
                b.bytes -= gone.len();
            }
            seq
        };
        self.appended.notify_waiters();
        seq
    }

    /// Shard `i` wrote `record` to RocksDB itself, outside its commits (a
    /// slot's import): kept for replicas like a commit, if the shard keeps
    /// its commits. Call it after the write is durable: a snapshot taken
    /// in between then holds the write too (applying it twice is harmless,
    /// missing it is not).
    pub fn append_outside(&self, shard: usize, record: &[u8]) {
        if self.capturing(shard) && !record.is_empty() {
            self.append(shard, record);
        }
    }

    /// A replica of this run fetched from `positions`: it holds those
    /// records durably (it syncs what it applies before it fetches again).
    pub fn ack(&self, run_id: u64, positions: &[u64]) {
        let mut a = self.acked.lock().expect("not poisoned");
        // A replica of another run (about to bootstrap again) holds none
        // of this run's records: it doesn't count as present.
        if run_id == self.run_id && positions.len() == a.positions.len() {
            a.seen = Some(Instant::now());
            for (have, &p) in a.positions.iter_mut().zip(positions) {
                *have = (*have).max(p);
            }
        }
        drop(a);
        self.acked_changed.notify_all();
    }

    /// Wait until a replica holds shard `shard`'s record `seq`, at most
    /// `timeout`.
    pub fn wait_acked(&self, shard: usize, seq: u64, timeout: Duration) -> Ack {
        let deadline = Instant::now() + timeout;
        let mut a = self.acked.lock().expect("not poisoned");
        loop {
            if a.positions[shard] >= seq {
                return Ack::Held;
            }
            if a.seen.is_none_or(|t| t.elapsed() > REPLICA_GONE_AFTER) {
                return Ack::NoReplica;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ack::NotYet;
            }
            a = self
                .acked_changed
                .wait_timeout(a, left)
                .expect("not poisoned")
                .0;
        }
    }

    /// The last record shard `i` appended.
    pub fn head(&self, shard: usize) -> u64 {
        self.shards[shard].inner.lock().expect("not poisoned").head
    }

    pub fn heads(&self) -> Vec<u64> {
        (0..self.shards.len()).map(|i| self.head(i)).collect()
    }

    /// Bytes the backlogs hold.
    /// The bytes of the records after `positions` the backlogs hold: how
    /// far behind a replica at those positions is.
    pub fn bytes_after(&self, positions: &[u64]) -> u64 {
        self.shards
            .iter()
            .zip(positions)
            .map(|(s, &pos)| {
                let b = s.inner.lock().expect("not poisoned");
                b.records
                    .iter()
                    .rev()
                    .take_while(|(seq, _)| *seq > pos)
                    .map(|(_, r)| r.len() as u64)
                    .sum::<u64>()
            })
            .sum()
    }

    pub fn shard_bytes(&self, shard: usize) -> usize {
        self.shards[shard].inner.lock().expect("not poisoned").bytes
    }

    pub fn bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.inner.lock().expect("not poisoned").bytes)
            .sum()
    }

    /// The records after `positions`, about `max_bytes` of them (at least
    /// one when there is one), shard by shard; NOT_FOUND when a position is
    /// not one of this run's backlogs holds.
    pub fn read(
        &self,
        run_id: u64,
        positions: &[u64],
        max_bytes: usize,
    ) -> Result<Vec<ReplRecord>, RushError> {
        if run_id != self.run_id {
            return Err(RushError::not_found(format!(
                "this primary's run is {:016x}, not {run_id:016x} (it restarted): bootstrap again",
                self.run_id
            )));
        }
        if positions.len() != self.shards.len() {
            return Err(RushError::bad_request(format!(
                "{} positions for {} shards",
                positions.len(),
                self.shards.len()
            )));
        }
        let share = (max_bytes / self.shards.len()).max(1);
        let mut out = Vec::new();
        for (i, &pos) in positions.iter().enumerate() {
            let b = self.shards[i].inner.lock().expect("not poisoned");
            if pos > b.head {
                return Err(RushError::not_found(format!(
                    "shard {i}: position {pos} is past this run's head {}: bootstrap again",
                    b.head
                )));
            }
            if pos == b.head {
                continue;
            }
            let first = b.records.front().map_or(b.head + 1, |r| r.0);
            if pos + 1 < first {
                return Err(RushError::not_found(format!(
                    "shard {i}: record {} has left the backlog (it holds {first}..={}): bootstrap \
                     again, or give replication.backlog_mb more",
                    pos + 1,
                    b.head
                )));
            }
            let mut taken = 0;
            for (seq, rec) in b.records.range((pos + 1 - first) as usize..) {
                if taken > 0 && taken + rec.len() > share {
                    break;
                }
                taken += rec.len();
                out.push(ReplRecord {
                    shard: i as u16,
                    seq: *seq,
                    body: rec.clone(),
                });
            }
        }
        Ok(out)
    }

    /// Resolves at the next append after it was made (armed at once).
    pub fn appended(&self) -> std::pin::Pin<Box<tokio::sync::futures::Notified<'_>>> {
        let mut n = Box::pin(self.appended.notified());
        n.as_mut().enable();
        n
    }

    /// Start a snapshot session: pause the shards, take the view, and
    /// answer its first page. Blocking (run it off the runtime).
    pub fn start_session(
        self: &Arc<Self>,
        storage: Arc<Storage>,
        shards: Vec<ShardHandle>,
        max_bytes: usize,
    ) -> Result<ReplSnapshotReply, RushError> {
        let session = rand::random::<u64>() | 1;
        let (tx, rx) = mpsc::sync_channel::<PageAsk>(1);
        let (started_tx, started_rx) = mpsc::sync_channel(1);
        let source = self.clone();
        std::thread::Builder::new()
            .name("rush-repl-snap".into())
            .spawn(move || {
                let run_id = source.run_id;
                run_session(storage, shards, run_id, session, rx, started_tx);
                source
                    .sessions
                    .lock()
                    .expect("not poisoned")
                    .remove(&session);
            })
            .map_err(|e| RushError::internal(format!("snapshot thread: {e}")))?;
        started_rx
            .recv()
            .map_err(|_| RushError::internal("the snapshot thread ended"))??;
        self.sessions
            .lock()
            .expect("not poisoned")
            .insert(session, tx);
        self.page(session, max_bytes)
    }

    /// The next page of a session. Blocking.
    pub fn page(&self, session: u64, max_bytes: usize) -> Result<ReplSnapshotReply, RushError> {
        let tx = self
            .sessions
            .lock()
            .expect("not poisoned")
            .get(&session)
            .cloned()
            .ok_or_else(|| {
                RushError::not_found(format!(
                    "no snapshot session {session:016x} (ended, or idle over {SESSION_IDLE:?}): \
                     start again"
                ))
            })?;
        let (reply, rx) = oneshot::channel();
        tx.send(PageAsk { max_bytes, reply })
            .map_err(|_| RushError::not_found("the snapshot session ended: start again"))?;
        rx.blocking_recv()
            .map_err(|_| RushError::not_found("the snapshot session ended: start again"))?
    }
}

/// Where a session's reading is.
struct Cursor {
    /// 0: the node records; 1 + i: shard i.
    family: usize,
    /// The last key a page carried in this family.
    after: Option<Vec<u8>>,
}

fn run_session(
    storage: Arc<Storage>,
    shards: Vec<ShardHandle>,
    run_id: u64,
    session: u64,
    rx: mpsc::Receiver<PageAsk>,
    started: mpsc::SyncSender<Result<(), RushError>>,
) {
    // Pause every shard; each answers with its head once RocksDB holds
    // all it committed, then waits for `resume`.
    let mut resumes = Vec::with_capacity(shards.len());
    let mut paused = Vec::with_capacity(shards.len());
    for h in &shards {
        let (p_tx, p_rx) = mpsc::sync_channel(1);
        let (r_tx, r_rx) = mpsc::sync_channel(1);
        h.repl_pause(Pause {
            paused: p_tx,
            resume: r_rx,
        });
        resumes.push(r_tx);
        paused.push(p_rx);
    }
    let deadline = Instant::now() + PAUSE_WAIT;
    let mut positions = Vec::with_capacity(shards.len());
    let mut failed = None;
    for (i, p) in paused.iter().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        match p.recv_timeout(left) {
            Ok(Ok(head)) => positions.push(head),
            Ok(Err(e)) => {
                failed = Some(e);
                break;
            }
            Err(_) => {
                failed = Some(RushError::unavailable(format!(
                    "shard {i} did not pause for the snapshot within {PAUSE_WAIT:?}"
                )));
                break;
            }
        }
    }
    let view = failed.is_none().then(|| storage.view());
    // Dropping the senders lets every shard go, paused or not yet.
    drop(resumes);
    if let Some(e) = failed {
        let _ = started.send(Err(e));
        return;
    }
    let view = view.expect("taken when nothing failed");
    let _ = started.send(Ok(()));
    tracing::info!(
        session = format!("{session:016x}"),
        ?positions,
        "replication snapshot taken"
    );
    let mut cursor = Cursor {
        family: 0,
        after: None,
    };
    let (_, end) = keys::slot_range(rush_protocol::SLOTS - 1);
    let (start, _) = keys::slot_range(0);
    while let Ok(ask) = rx.recv_timeout(SESSION_IDLE) {
        let mut pairs = Vec::new();
        let mut bytes = 0usize;
        let mut failed = None;
        while cursor.family <= shards.len() && bytes < ask.max_bytes {
            if cursor.family == 0 {
                for name in meta::REPLICATED {
                    match view.meta_scan(name) {
                        Ok(found) => {
                            for (k, v) in found {
                                bytes += k.len() + v.len();
                                pairs.push(ReplPair {
                                    family: META_FAMILY,
                                    key: k.into(),
                                    value: v.into(),
                                });
                            }
                        }
                        Err(e) => failed = Some(e),
                    }
                }
                cursor.family = 1;
                continue;
            }
            let shard = cursor.family - 1;
            let from = match &cursor.after {
                Some(k) => {
                    let mut next = k.clone();
                    next.push(0);
                    next
                }
                None => start.clone(),
            };
            let mut last = None;
            let mut full = false;
            let scanned = view.scan(shard, &from, &end, |k, v| {
                bytes += k.len() + v.len();
                pairs.push(ReplPair {
                    family: shard as u16,
                    key: Bytes::copy_from_slice(k),
                    value: Bytes::copy_from_slice(v),
                });
                last = Some(k.to_vec());
                full = bytes >= ask.max_bytes;
                !full
            });
            if let Err(e) = scanned {
                failed = Some(e);
                break;
            }
            if full {
                cursor.after = last;
            } else {
                cursor.family += 1;
                cursor.after = None;
            }
        }
        let done = cursor.family > shards.len();
        let answer = match failed {
            Some(e) => Err(RushError::unavailable(format!("reading the snapshot: {e}"))),
            None => Ok(ReplSnapshotReply {
                run_id,
                session,
                positions: positions.clone(),
                pairs,
                done,
            }),
        };
        let _ = ask.reply.send(answer);
        if done {
            break;
        }
    }
}
