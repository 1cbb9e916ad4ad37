//! A shard's mailbox: how anything that is not the shard reaches it.
//!
//! One unbounded channel plus a wake-up (a `mio::Waker`, an eventfd), with
//! two rules:
//!
//! - **Work is bounded.** Requests (jobs from the node's tasks, batches
//!   forwarded by other shards) count against `storage.queue_depth`; past
//!   it they are handed back with BUSY already chosen, so the sender
//!   answers at once instead of waiting (backpressure). Control messages
//!   (a new connection, answers, ticks, slot moves) are never refused: an
//!   answer must not be lost because the shard is busy.
//! - **One wake-up per burst.** A sender wakes the shard only if nobody has
//!   since it last looked ([`Mailbox::notified`]): a pass that receives 50
//!   batches was woken once.

use super::conn::ConnId;
use super::slots::SlotOp;
use super::{Job, ShardMsg};
use bytes::Bytes;
use crossbeam_channel::{Receiver, Sender};
use rush_protocol::RushError;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;

struct Shared {
    waker: mio::Waker,
    /// Set by the first sender after the shard last drained; cleared by the
    /// shard before it drains.
    notified: AtomicBool,
    /// Work items (requests) sent and not yet taken by the shard.
    queued: AtomicUsize,
    cap: usize,
}

/// The sending side of a shard's mailbox. Cheap to clone.
#[derive(Clone)]
pub struct ShardHandle {
    id: usize,
    tx: Sender<ShardMsg>,
    shared: Arc<Shared>,
}

/// The receiving side, owned by the shard thread.
pub struct Mailbox {
    rx: Receiver<ShardMsg>,
    shared: Arc<Shared>,
}

/// A mailbox for shard `id`, waking `poll` (token `token`), holding at most
/// `cap` requests.
pub fn mailbox(
    id: usize,
    poll: &mio::Poll,
    token: mio::Token,
    cap: usize,
) -> std::io::Result<(ShardHandle, Mailbox)> {
    let (tx, rx) = crossbeam_channel::unbounded();
    let shared = Arc::new(Shared {
        waker: mio::Waker::new(poll.registry(), token)?,
        notified: AtomicBool::new(false),
        queued: AtomicUsize::new(0),
        cap,
    });
    Ok((
        ShardHandle {
            id,
            tx,
            shared: shared.clone(),
        },
        Mailbox { rx, shared },
    ))
}

impl ShardHandle {
    pub fn id(&self) -> usize {
        self.id
    }

    // The message comes back by value: the failure path allocates nothing.
    #[allow(clippy::result_large_err)]
    fn post(&self, msg: ShardMsg) -> Result<(), ShardMsg> {
        self.tx.send(msg).map_err(|e| e.0)?;
        self.wake();
        Ok(())
    }

    /// Wake the shard with no message (its write-back thread: a run has
    /// landed, which the shard's next pass takes in).
    pub(crate) fn nudge(&self) {
        self.wake();
    }

    fn wake(&self) {
        if !self.shared.notified.swap(true, Ordering::AcqRel) {
            // An eventfd write; a failure means the shard is gone.
            let _ = self.shared.waker.wake();
        }
    }

    /// Room for `n` more requests? Reserves it when there is.
    fn reserve(&self, n: usize) -> bool {
        let s = &self.shared;
        let before = s.queued.fetch_add(n, Ordering::AcqRel);
        if before + n > s.cap && before > 0 {
            s.queued.fetch_sub(n, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Queue a job. A full queue hands the job back with BUSY already chosen,
    /// so the caller answers at once instead of waiting (backpressure).
    // The job comes back by value (not boxed) so the BUSY path allocates nothing.
    #[allow(clippy::result_large_err)]
    pub fn submit(&self, job: Job) -> Result<(), (Job, RushError)> {
        if !self.reserve(1) {
            return Err((
                job,
                RushError::busy("shard queue is full; retry with backoff"),
            ));
        }
        match self.post(ShardMsg::Job(job)) {
            Ok(()) => Ok(()),
            Err(ShardMsg::Job(job)) => {
                self.shared.queued.fetch_sub(1, Ordering::AcqRel);
                Err((job, RushError::unavailable("shard is shutting down")))
            }
            Err(_) => unreachable!("a job comes back as a job"),
        }
    }

    /// Forward a batch of requests from another shard: `Ok` when all were
    /// taken; otherwise the batch comes back (the queue is full or the
    /// shard is gone) for the sender to answer BUSY / UNAVAILABLE.
    pub(crate) fn forward(&self, batch: super::forward::Batch) -> Result<(), ForwardRefused> {
        let n = batch.len();
        if !self.reserve(n) {
            return Err(ForwardRefused::Busy(batch));
        }
        match self.post(ShardMsg::Forward(batch)) {
            Ok(()) => Ok(()),
            Err(ShardMsg::Forward(batch)) => {
                self.shared.queued.fetch_sub(n, Ordering::AcqRel);
                Err(ForwardRefused::Gone(batch))
            }
            Err(_) => unreachable!("a batch comes back as a batch"),
        }
    }

    /// Answers of requests another shard forwarded (never refused).
    pub(crate) fn answers(&self, batch: super::forward::Answers) {
        let _ = self.post(ShardMsg::Answers(batch));
    }

    /// One encoded answer for a connection of this shard (from a node
    /// task), to a request of `size` bytes.
    pub fn answer(&self, conn: ConnId, size: usize, frame: Bytes) {
        let _ = self.post(ShardMsg::Answer(conn, size, frame));
    }

    /// Tell the shard which node it serves (once, before any connection).
    pub(crate) fn set_node(&self, node: std::sync::Arc<crate::server::NodeShared>) {
        let _ = self.post(ShardMsg::Node(node));
    }

    /// Hand a freshly accepted connection to this shard; the stream comes
    /// back if the shard is gone.
    pub fn accept(
        &self,
        stream: std::net::TcpStream,
        protocol: crate::resp::Protocol,
    ) -> Result<(), std::net::TcpStream> {
        match self.post(ShardMsg::Accept(stream, protocol)) {
            Ok(()) => Ok(()),
            Err(ShardMsg::Accept(s, _)) => Err(s),
            Err(_) => unreachable!("a stream comes back as a stream"),
        }
    }

    /// Move a connection to this shard (SHARD_BIND).
    pub(crate) fn adopt(&self, conn: Box<super::conn::Conn>) {
        let _ = self.post(ShardMsg::Adopt(conn));
    }

    /// Ask the shard to run its timers; resolves when it has.
    pub fn tick(&self) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        // A stopped shard drops the sender, which the receiver sees as an error.
        let _ = self.post(ShardMsg::Tick(tx));
        rx
    }

    /// Queue a cluster operation (never refused while the shard runs);
    /// `Err` when the shard is gone.
    pub fn slot_op(&self, op: SlotOp) -> Result<(), Option<SlotOp>> {
        match self.post(ShardMsg::Slots(op)) {
            Ok(()) => Ok(()),
            Err(_) => Err(None),
        }
    }

    /// Stop reading requests, finish and answer what is in flight, close
    /// the connections (within `timeout`); resolves when done.
    pub fn drain(&self, timeout: std::time::Duration) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        let _ = self.post(ShardMsg::Drain(timeout, tx));
        rx
    }

    /// Pause between passes for a replica's snapshot (see
    /// `replication::source`); a stopped shard drops the request, which
    /// the session sees.
    pub fn repl_pause(&self, pause: crate::replication::source::Pause) {
        let _ = self.post(super::ShardMsg::ReplPause(pause));
    }

    pub fn stop(&self) {
        let _ = self.post(ShardMsg::Stop);
    }

    /// Requests waiting in the mailbox.
    pub fn queue_len(&self) -> usize {
        self.shared.queued.load(Ordering::Relaxed)
    }
}

/// Why a forwarded batch came back.
pub(crate) enum ForwardRefused {
    Busy(super::forward::Batch),
    Gone(super::forward::Batch),
}

impl Mailbox {
    /// Called before draining: later senders wake the shard again.
    pub fn rearm(&self) {
        self.shared.notified.store(false, Ordering::Release);
    }

    pub fn try_recv(&self) -> Option<ShardMsg> {
        self.rx.try_recv().ok()
    }

    /// `n` requests were taken off the mailbox (their room is free again).
    pub fn taken(&self, n: usize) {
        if n > 0 {
            self.shared.queued.fetch_sub(n, Ordering::AcqRel);
        }
    }

    pub fn queued(&self) -> usize {
        self.shared.queued.load(Ordering::Relaxed)
    }
}
