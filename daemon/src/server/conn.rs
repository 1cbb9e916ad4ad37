//! One client connection: a reader that decodes frames and routes requests,
//! and a writer that sends answers in whatever order they complete.
//!
//! Memory per connection is bounded on both sides:
//! - Requests: the read buffer holds at most one frame of `max_frame_bytes`
//!   (a larger announced length is refused before reading it), and every
//!   request holds permits — per-connection count and bytes, node-wide bytes
//!   — until its answer has been written. At the limit the connection is not
//!   read, so TCP pushes back on the client.
//! - Answers: each answer is encoded where it is produced and counted against
//!   the connection's output budget (`max_output_bytes`). Past half of it the
//!   reader stops taking requests; an answer that would go past all of it
//!   (the client isn't reading, or asks for more than it takes) closes the
//!   connection instead of growing memory. A client that doesn't take its
//!   answers for `write_timeout_secs` is disconnected too.

use super::{node_cmds, NodeShared};
use crate::metrics::Metrics;
use crate::shard::{Job, ReplyTo};
use crate::storage::keys::shard_of_slot;
use bytes::{Bytes, BytesMut};
use rush_protocol::frame::{self, FrameError, VERSION};
use rush_protocol::limits::MAX_FRAME_CEILING;
use rush_protocol::{ErrorCode, Opcode, Reply, Request, RushError, Service, Target};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Notify, OwnedSemaphorePermit, Semaphore};

/// Byte permits are counted in KiB so a semaphore (u32 permits) covers GiBs.
const PERMIT_UNIT: usize = 1024;
/// Bytes a read asks for: from this...
const MIN_READ_AHEAD: usize = 4 * 1024;
/// ...up to this, while reads keep filling what they were given.
const MAX_READ_AHEAD: usize = 64 * 1024;
/// The writer sends what has accumulated once it reaches this size.
const WRITE_CHUNK: usize = 256 * 1024;
/// The writer keeps a gathering buffer up to this size between writes.
const KEEP_WRITE_BUFFER: usize = 64 * 1024;

/// Held by a request until its answer is written.
pub struct Permits {
    _count: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

/// One encoded answer on its way to the writer.
struct Outgoing {
    bytes: Bytes,
    _permits: Option<Permits>,
}

/// A connection's answers not yet written: the output budget.
struct Output {
    queued: AtomicUsize,
    limit: usize,
    /// Set when an answer didn't fit: the connection is closed.
    overflowed: AtomicBool,
    /// Signalled by the writer after each write.
    drained: Notify,
    /// Signalled once, when `overflowed` is set (`notify_one` keeps the
    /// signal for a reader that isn't waiting yet).
    closing: Notify,
    metrics: Arc<Metrics>,
}

/// Where a request's answer goes; consumed by sending.
pub struct ReplySink {
    tx: mpsc::UnboundedSender<Outgoing>,
    output: Arc<Output>,
    request_id: u64,
    opcode: u8,
    started: Instant,
    permits: Option<Permits>,
}

impl ReplySink {
    /// Nobody will read this answer (the connection closed or overflowed):
    /// the request need not even run.
    pub fn is_abandoned(&self) -> bool {
        self.tx.is_closed() || self.output.overflowed.load(Ordering::Relaxed)
    }

    /// Encode the answer here (on the shard, or wherever it was produced) and
    /// queue it for the writer, within the connection's output budget.
    pub fn send(self, result: Result<Reply, RushError>) {
        if self.is_abandoned() {
            return;
        }
        let mut buf = BytesMut::new();
        let outcome = match &result {
            Ok(reply) => {
                frame::encode_ok(&mut buf, self.opcode, self.request_id, |b| {
                    reply.encode_body(b)
                });
                if buf.len() > MAX_FRAME_CEILING {
                    buf.clear();
                    let e = RushError::new(
                        ErrorCode::TooLarge,
                        "the answer is larger than a frame may be; ask for less at once",
                    );
                    frame::encode_error(&mut buf, self.opcode, self.request_id, &e);
                    Err(e.code)
                } else {
                    Ok(())
                }
            }
            Err(e) => {
                frame::encode_error(&mut buf, self.opcode, self.request_id, e);
                Err(e.code)
            }
        };
        let out = &self.output;
        out.metrics
            .observe(self.opcode, outcome, self.started.elapsed().as_secs_f64());
        let len = buf.len();
        let queued = out.queued.fetch_add(len, Ordering::SeqCst);
        if queued > 0 && queued + len > out.limit {
            // The client isn't taking its answers: close rather than grow.
            out.queued.fetch_sub(len, Ordering::SeqCst);
            if !out.overflowed.swap(true, Ordering::SeqCst) {
                out.drained.notify_waiters();
                out.closing.notify_one();
            }
            return;
        }
        // If the connection is gone the answer (and its permits) are dropped.
        if self
            .tx
            .send(Outgoing {
                bytes: buf.freeze(),
                _permits: self.permits,
            })
            .is_err()
        {
            out.queued.fetch_sub(len, Ordering::SeqCst);
        }
    }
}

/// Per-connection state the node-level commands may change (HELLO).
pub struct ConnState {
    pub authenticated: bool,
    pub admin: bool,
}

pub async fn serve(stream: TcpStream, node: Arc<NodeShared>, shutdown: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    match node.tls.clone() {
        None => {
            let (rd, wr) = stream.into_split();
            serve_io(rd, wr, node, shutdown).await
        }
        Some(acceptor) => {
            // The handshake must finish within the frame timeout, like any
            // half-sent frame.
            let limit = Duration::from_secs(node.config.server.frame_timeout_secs);
            match tokio::time::timeout(limit, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let (rd, wr) = tokio::io::split(tls);
                    serve_io(rd, wr, node, shutdown).await
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "TLS handshake failed");
                    node.metrics
                        .connections_closed
                        .with_label_values(&["tls handshake failed"])
                        .inc();
                }
                Err(_) => {
                    node.metrics
                        .connections_closed
                        .with_label_values(&["tls handshake timeout"])
                        .inc();
                }
            }
        }
    }
}

async fn serve_io<R, W>(
    mut rd: R,
    wr: W,
    node: Arc<NodeShared>,
    mut shutdown: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let cfg = &node.config.server;
    let output = Arc::new(Output {
        queued: AtomicUsize::new(0),
        limit: cfg.max_output_bytes,
        overflowed: AtomicBool::new(false),
        drained: Notify::new(),
        closing: Notify::new(),
        metrics: node.metrics.clone(),
    });
    let writer = tokio::spawn(write_loop(wr, rx, node.clone(), output.clone()));
    let count = Arc::new(Semaphore::new(cfg.max_inflight_requests));
    let bytes = Arc::new(Semaphore::new(cfg.max_inflight_bytes / PERMIT_UNIT));
    let open = !node.auth.required();
    let mut state = ConnState {
        authenticated: open,
        admin: open,
    };
    let max_frame = cfg.max_frame_bytes;
    let idle = Duration::from_secs(cfg.idle_timeout_secs);
    let frame_timeout = Duration::from_secs(cfg.frame_timeout_secs);
    // Buffers are allocated when there is something to hold: an idle
    // connection costs a few KiB, not a read and a write buffer.
    let mut buf = BytesMut::new();
    // Bytes asked of each read: doubled while reads fill it (a pipelining
    // client), back to the minimum when one doesn't.
    let mut read_ahead = MIN_READ_AHEAD;
    let mut frame_started: Option<Instant> = None;

    let reason: &'static str = 'conn: loop {
        loop {
            match frame::parse(&mut buf, max_frame) {
                Ok(Some(f)) => {
                    // Don't take more work while half the output budget is
                    // still unwritten.
                    loop {
                        let drained = output.drained.notified();
                        if output.overflowed.load(Ordering::SeqCst) {
                            break 'conn "output over limit";
                        }
                        if output.queued.load(Ordering::SeqCst) <= output.limit / 2 {
                            break;
                        }
                        tokio::select! {
                            _ = drained => {}
                            _ = tx.closed() => break 'conn "writer closed",
                        }
                    }
                    let size = f.body.len() + frame::HEADER_LEN;
                    let permits = tokio::select! {
                        p = acquire(&node, &count, &bytes, size) => p,
                        _ = tx.closed() => break 'conn "writer closed",
                    };
                    let sink = ReplySink {
                        tx: tx.clone(),
                        output: output.clone(),
                        request_id: f.header.request_id,
                        opcode: f.header.opcode,
                        started: Instant::now(),
                        permits: Some(permits),
                    };
                    dispatch(&node, &mut state, f, sink);
                }
                Ok(None) => break,
                Err(e) => {
                    let reason = match &e {
                        FrameError::TooLarge { .. } => "frame too large",
                        _ => "malformed frame",
                    };
                    node.metrics
                        .frames_rejected
                        .with_label_values(&[reason])
                        .inc();
                    let (opcode, request_id) = match &e {
                        FrameError::TooLarge {
                            header: Some(h), ..
                        } => (h.opcode, h.request_id),
                        _ => (0, 0),
                    };
                    let code = match &e {
                        FrameError::TooLarge { .. } => ErrorCode::TooLarge,
                        _ => ErrorCode::BadRequest,
                    };
                    let sink = ReplySink {
                        tx: tx.clone(),
                        output: output.clone(),
                        request_id,
                        opcode,
                        started: Instant::now(),
                        permits: None,
                    };
                    sink.send(Err(RushError::new(
                        code,
                        format!("{e}; closing the connection"),
                    )));
                    break 'conn reason;
                }
            }
        }
        frame_started = match (buf.is_empty(), frame_started) {
            (true, _) => None,
            (false, None) => Some(Instant::now()),
            (false, started) => started,
        };
        // Grow the buffer to hold the announced frame (already checked
        // against max_frame by `parse`), or the read-ahead.
        let want = if buf.len() >= 4 {
            4 + u32::from_be_bytes(buf[..4].try_into().expect("4 bytes")) as usize
        } else {
            0
        };
        buf.reserve(want.saturating_sub(buf.len()).max(read_ahead));
        let room = buf.capacity() - buf.len();
        let deadline = match frame_started {
            Some(t) => t + frame_timeout,
            None => Instant::now() + idle,
        };
        tokio::select! {
            r = rd.read_buf(&mut buf) => match r {
                Ok(0) => break if buf.is_empty() { "closed by client" } else { "closed mid-frame" },
                Ok(n) => {
                    read_ahead = if n == room {
                        (read_ahead * 2).min(MAX_READ_AHEAD)
                    } else {
                        MIN_READ_AHEAD
                    };
                }
                Err(_) => break "read error",
            },
            _ = tokio::time::sleep_until(deadline.into()) => {
                break if frame_started.is_some() { "frame timeout" } else { "idle timeout" };
            }
            _ = shutdown.changed() => break "shutdown",
            _ = tx.closed() => break "writer closed",
            _ = output.closing.notified() => break "output over limit",
        }
    };
    node.metrics
        .connections_closed
        .with_label_values(&[reason])
        .inc();
    tracing::debug!(reason, "connection closing");
    // Answers still in flight are written; the writer ends when the last
    // sink is dropped. A client that isn't reading gets no more time.
    drop(tx);
    let mut writer = writer;
    if reason != "output over limit" {
        let drain = Duration::from_secs(node.config.server.drain_timeout_secs);
        let _ = tokio::time::timeout(drain, &mut writer).await;
    }
    writer.abort();
}

async fn acquire(
    node: &NodeShared,
    count: &Arc<Semaphore>,
    bytes: &Arc<Semaphore>,
    size: usize,
) -> Permits {
    let units = size.div_ceil(PERMIT_UNIT).max(1) as u32;
    // The semaphores are never closed, so acquiring only waits.
    let count = count.clone().acquire_owned().await.expect("never closed");
    let bytes = bytes
        .clone()
        .acquire_many_owned(units)
        .await
        .expect("never closed");
    let global = node
        .global_bytes
        .clone()
        .acquire_many_owned(units)
        .await
        .expect("never closed");
    Permits {
        _count: count,
        _bytes: bytes,
        _global: global,
    }
}

fn dispatch(
    node: &Arc<NodeShared>,
    state: &mut ConnState,
    f: rush_protocol::Frame,
    sink: ReplySink,
) {
    let h = f.header;
    if h.version != VERSION {
        return sink.send(Err(RushError::new(
            ErrorCode::UnsupportedVersion,
            format!(
                "protocol version {} is not supported; this server speaks {VERSION}",
                h.version
            ),
        )));
    }
    if h.is_response() {
        return sink.send(Err(RushError::bad_request(
            "a client sent a response frame",
        )));
    }
    if !state.authenticated && h.opcode != Opcode::Hello.as_u8() {
        return sink.send(Err(RushError::new(
            ErrorCode::Unauthorized,
            "authentication required: send HELLO with the token first",
        )));
    }
    let request = match Request::decode(h.opcode, f.body) {
        Ok(r) => r,
        Err(e) => return sink.send(Err(e)),
    };
    let target = match request.target() {
        Ok(t) => t,
        Err(e) => return sink.send(Err(e)),
    };
    // Admin requests: whatever runs on every shard, and the admin and
    // cluster services (the cluster map itself is readable by anyone).
    let admin_only = target == Target::AllShards
        || matches!(
            request.opcode().service(),
            Service::Admin | Service::Cluster
        );
    if admin_only && !state.admin {
        return sink.send(Err(RushError::new(
            ErrorCode::Forbidden,
            format!("{} needs the admin token", request.opcode().name()),
        )));
    }
    match target {
        Target::Node => node_cmds::handle(node, state, request, sink),
        Target::Slot(slot) => {
            // Routing: one atomic load; MOVED / TRYAGAIN when this node
            // doesn't serve the slot right now.
            if let Err(e) = node.cluster.routing.check(slot) {
                return sink.send(Err(e));
            }
            let shard = shard_of_slot(slot, node.shards.len());
            let job = Job {
                request,
                reply: ReplyTo::Conn(sink),
            };
            if let Err((job, err)) = node.shards[shard].submit(job) {
                job.reply.send(Err(err));
            }
        }
        Target::AllShards => {
            node.tasks
                .spawn(node_cmds::fan_out(node.clone(), request, sink));
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: W,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    node: Arc<NodeShared>,
    output: Arc<Output>,
) {
    let timeout = Duration::from_secs(node.config.server.write_timeout_secs);
    let mut buf = BytesMut::new();
    let mut written: Vec<Outgoing> = Vec::new();
    while let Some(first) = rx.recv().await {
        if output.overflowed.load(Ordering::SeqCst) {
            break;
        }
        let mut len = first.bytes.len();
        written.push(first);
        while len < WRITE_CHUNK {
            match rx.try_recv() {
                Ok(o) => {
                    len += o.bytes.len();
                    written.push(o);
                }
                Err(_) => break,
            }
        }
        // A lone answer is written as it is; several are gathered into one write.
        let out: &[u8] = if let [one] = written.as_slice() {
            &one.bytes
        } else {
            for o in &written {
                buf.extend_from_slice(&o.bytes);
            }
            &buf
        };
        match tokio::time::timeout(timeout, wr.write_all(out)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return,
            Err(_) => {
                node.metrics
                    .connections_closed
                    .with_label_values(&["write timeout"])
                    .inc();
                tracing::info!("client did not read its answers for {timeout:?}; disconnecting");
                return;
            }
        }
        output.queued.fetch_sub(len, Ordering::SeqCst);
        output.drained.notify_waiters();
        // Dropping the answers releases their permits.
        written.clear();
        buf.clear();
        if buf.capacity() > KEEP_WRITE_BUFFER {
            buf = BytesMut::new();
        }
    }
    let _ = wr.shutdown().await;
}
