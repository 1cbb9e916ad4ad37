//! One client connection: a reader that decodes frames and routes requests,
//! and a writer that encodes answers in whatever order they complete.
//!
//! Memory per connection is bounded: the read buffer holds at most one frame
//! of `max_frame_bytes` (a larger announced length is refused before reading
//! it), and every request holds permits — per-connection count and bytes, and
//! node-wide bytes — until its answer has been written. A client that stops
//! reading answers stops being read (TCP pushes back), and one that doesn't
//! take its answers for `write_timeout` is disconnected, which frees them.

use super::{node_cmds, NodeShared};
use crate::shard::{Job, ReplyTo};
use crate::storage::keys::shard_of_slot;
use bytes::BytesMut;
use rush_protocol::frame::{self, FrameError, VERSION};
use rush_protocol::{ErrorCode, Opcode, Reply, Request, RushError, Service, Target};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

/// Byte permits are counted in KiB so a semaphore (u32 permits) covers GiBs.
const PERMIT_UNIT: usize = 1024;
/// The writer sends what has accumulated once it reaches this size.
const WRITE_CHUNK: usize = 256 * 1024;

/// Held by a request until its answer is written.
pub struct Permits {
    _count: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
    _global: OwnedSemaphorePermit,
}

/// One answer on its way to the writer.
pub struct Outgoing {
    request_id: u64,
    opcode: u8,
    started: Instant,
    result: Result<Reply, RushError>,
    _permits: Option<Permits>,
}

/// Where a request's answer goes; consumed by sending.
pub struct ReplySink {
    tx: mpsc::UnboundedSender<Outgoing>,
    request_id: u64,
    opcode: u8,
    started: Instant,
    permits: Option<Permits>,
}

impl ReplySink {
    pub fn send(self, result: Result<Reply, RushError>) {
        // If the connection is gone the answer (and its permits) are dropped.
        let _ = self.tx.send(Outgoing {
            request_id: self.request_id,
            opcode: self.opcode,
            started: self.started,
            result,
            _permits: self.permits,
        });
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
    let writer = tokio::spawn(write_loop(wr, rx, node.clone()));
    let cfg = &node.config.server;
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
    let mut buf = BytesMut::with_capacity(16 * 1024);
    let mut frame_started: Option<Instant> = None;

    let reason: &'static str = 'conn: loop {
        loop {
            match frame::parse(&mut buf, max_frame) {
                Ok(Some(f)) => {
                    let size = f.body.len() + frame::HEADER_LEN;
                    let permits = tokio::select! {
                        p = acquire(&node, &count, &bytes, size) => p,
                        _ = tx.closed() => break 'conn "writer closed",
                    };
                    let sink = ReplySink {
                        tx: tx.clone(),
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
                    let _ = tx.send(Outgoing {
                        request_id,
                        opcode,
                        started: Instant::now(),
                        result: Err(RushError::new(code, format!("{e}; closing the connection"))),
                        _permits: None,
                    });
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
        // against max_frame by `parse`), or a little for the next header.
        let want = if buf.len() >= 4 {
            4 + u32::from_be_bytes(buf[..4].try_into().expect("4 bytes")) as usize
        } else {
            4096
        };
        buf.reserve(want.saturating_sub(buf.len()).max(1024));
        let deadline = match frame_started {
            Some(t) => t + frame_timeout,
            None => Instant::now() + idle,
        };
        tokio::select! {
            r = rd.read_buf(&mut buf) => match r {
                Ok(0) => break if buf.is_empty() { "closed by client" } else { "closed mid-frame" },
                Ok(_) => {}
                Err(_) => break "read error",
            },
            _ = tokio::time::sleep_until(deadline.into()) => {
                break if frame_started.is_some() { "frame timeout" } else { "idle timeout" };
            }
            _ = shutdown.changed() => break "shutdown",
            _ = tx.closed() => break "writer closed",
        }
    };
    node.metrics
        .connections_closed
        .with_label_values(&[reason])
        .inc();
    tracing::debug!(reason, "connection closing");
    // Answers still in flight are written; the writer ends when the last
    // sink is dropped, or after the drain timeout.
    drop(tx);
    let drain = Duration::from_secs(node.config.server.drain_timeout_secs);
    let _ = tokio::time::timeout(drain, writer).await;
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
) {
    let timeout = Duration::from_secs(node.config.server.write_timeout_secs);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut written: Vec<Outgoing> = Vec::new();
    while let Some(first) = rx.recv().await {
        encode(&node, &mut buf, &first);
        written.push(first);
        while buf.len() < WRITE_CHUNK {
            match rx.try_recv() {
                Ok(o) => {
                    encode(&node, &mut buf, &o);
                    written.push(o);
                }
                Err(_) => break,
            }
        }
        match tokio::time::timeout(timeout, wr.write_all(&buf)).await {
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
        buf.clear();
        // Dropping the answers releases their permits.
        written.clear();
        if buf.capacity() > 4 * WRITE_CHUNK {
            buf = BytesMut::with_capacity(64 * 1024);
        }
    }
    let _ = wr.shutdown().await;
}

fn encode(node: &NodeShared, buf: &mut BytesMut, o: &Outgoing) {
    let outcome = match &o.result {
        Ok(reply) => {
            frame::encode_ok(buf, o.opcode, o.request_id, |b| reply.encode_body(b));
            Ok(())
        }
        Err(e) => {
            frame::encode_error(buf, o.opcode, o.request_id, e);
            Err(e.code)
        }
    };
    node.metrics
        .observe(o.opcode, outcome, o.started.elapsed().as_secs_f64());
}
