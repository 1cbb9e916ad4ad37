//! One client connection, owned by the shard thread that serves it: its
//! socket (plain or TLS), its read buffer and its answers.
//!
//! Nothing here blocks or waits: the shard's pass ([`super::pass`]) reads
//! what a readable socket has, parses the frames in place, runs them, and
//! writes what the connection may be told. Memory per connection is
//! bounded on both sides:
//!
//! - Requests: the read buffer holds at most one frame of
//!   `max_frame_bytes` plus one read (a larger announced length is refused
//!   before its body is read), and a connection with
//!   `max_inflight_requests` requests (or `max_inflight_bytes` of them)
//!   still unanswered is not read, so TCP pushes back on the client.
//! - Answers: past half of `max_output_bytes` unwritten the connection is
//!   not read; an answer that would go past all of it (the client isn't
//!   reading, or asks for more than it takes) closes the connection instead
//!   of growing memory. A client that doesn't take its answers for
//!   `write_timeout_secs` is disconnected too.
//!
//! An idle connection costs its socket and this struct: buffers are
//! allocated when there is something to hold.

use bytes::{Buf, BytesMut};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Instant;

/// Bytes a read asks for: from this...
pub const MIN_READ_AHEAD: usize = 4 * 1024;
/// ...up to this, while reads keep filling what they were given.
pub const MAX_READ_AHEAD: usize = 64 * 1024;
/// Buffers larger than this are released when they empty.
const KEEP_BUFFER: usize = 64 * 1024;

/// A connection's address on its shard: the slab slot and which
/// incarnation of it, so a late answer for a closed connection (whose slot
/// was reused) is dropped instead of reaching a stranger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnId {
    pub index: u32,
    pub gen: u32,
}

/// Per-connection state the node-level requests change (HELLO).
#[derive(Debug, Clone, Copy)]
pub struct ConnState {
    pub authenticated: bool,
    pub admin: bool,
    /// READONLY: key reads may be answered from a replica's copy.
    pub replica_reads: bool,
}

/// An answer that waits for the pass's commit: enough to replace it with
/// an error if the commit fails.
#[derive(Debug, Clone, Copy)]
pub struct Held {
    pub request_id: u64,
    pub opcode: u8,
    pub received: Instant,
    /// What the answer says, for the metrics when it goes out.
    pub outcome: Result<(), rush_protocol::ErrorCode>,
}

pub(crate) enum Io {
    Plain(mio::net::TcpStream),
    Tls(Box<TlsIo>),
}

pub(crate) struct TlsIo {
    sock: mio::net::TcpStream,
    tls: rustls::ServerConnection,
}

/// What a read found.
pub enum ReadOutcome {
    /// Bytes were added to the buffer; `full` when the read filled all the
    /// room it was given (more may be waiting).
    Data { full: bool },
    /// Nothing now (the socket is drained).
    WouldBlock,
    /// The peer closed its side.
    Eof,
}

impl Io {
    pub fn plain(sock: mio::net::TcpStream) -> Io {
        Io::Plain(sock)
    }

    pub fn tls(sock: mio::net::TcpStream, config: Arc<rustls::ServerConfig>) -> io::Result<Io> {
        let tls = rustls::ServerConnection::new(config).map_err(io::Error::other)?;
        Ok(Io::Tls(Box::new(TlsIo { sock, tls })))
    }

    pub fn socket(&mut self) -> &mut mio::net::TcpStream {
        match self {
            Io::Plain(s) => s,
            Io::Tls(t) => &mut t.sock,
        }
    }

    /// Still in the TLS handshake.
    pub fn handshaking(&self) -> bool {
        match self {
            Io::Plain(_) => false,
            Io::Tls(t) => t.tls.is_handshaking(),
        }
    }

    /// Read once into the spare room of `buf` (at least `want` bytes of it).
    pub fn read(&mut self, buf: &mut BytesMut, want: usize) -> io::Result<ReadOutcome> {
        match self {
            Io::Plain(s) => read_plain(s, buf, want),
            Io::Tls(t) => t.read(buf, want),
        }
    }

    /// Write as much of `out` as the socket takes; returns how much of it
    /// was consumed. TLS may keep some encrypted bytes of its own
    /// ([`Io::wants_write`]).
    pub fn write(&mut self, out: &[u8]) -> io::Result<usize> {
        match self {
            Io::Plain(s) => match s.write(out) {
                Ok(n) => Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
                Err(e) => Err(e),
            },
            Io::Tls(t) => t.write(out),
        }
    }

    /// TLS has encrypted bytes the socket hasn't taken yet.
    pub fn wants_write(&self) -> bool {
        match self {
            Io::Plain(_) => false,
            Io::Tls(t) => t.tls.wants_write(),
        }
    }

    /// Closing: TLS says so to the peer (close_notify), if the socket
    /// takes it.
    pub fn close(&mut self) {
        if let Io::Tls(t) = self {
            t.tls.send_close_notify();
            let _ = t.flush();
        }
    }

    /// Push TLS's own pending bytes (handshake, encrypted answers).
    pub fn flush_tls(&mut self) -> io::Result<()> {
        match self {
            Io::Plain(_) => Ok(()),
            Io::Tls(t) => t.flush(),
        }
    }
}

fn read_plain(
    s: &mut mio::net::TcpStream,
    buf: &mut BytesMut,
    want: usize,
) -> io::Result<ReadOutcome> {
    buf.reserve(want);
    let spare = buf.spare_capacity_mut();
    let room = spare.len();
    // SAFETY: `read(2)` writes at most `room` bytes into the spare capacity,
    // which is valid for writes of that length; exactly the `n` bytes it
    // reports are marked initialized below.
    let n = unsafe { libc::read(s.as_raw_fd(), spare.as_mut_ptr().cast(), room) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(ReadOutcome::WouldBlock),
            _ => Err(e),
        };
    }
    let n = n as usize;
    if n == 0 {
        return Ok(ReadOutcome::Eof);
    }
    // SAFETY: the kernel initialized `n` bytes of the spare capacity.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(ReadOutcome::Data { full: n == room })
}

impl TlsIo {
    fn read(&mut self, buf: &mut BytesMut, want: usize) -> io::Result<ReadOutcome> {
        let mut eof = false;
        match self.tls.read_tls(&mut self.sock) {
            Ok(0) => eof = true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if let Err(e) = self.tls.process_new_packets() {
            // Tell the peer why (an alert), then give up.
            let _ = self.flush();
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        // Handshake messages, alerts.
        self.flush()?;
        let mut got = false;
        loop {
            let start = buf.len();
            buf.resize(start + want, 0);
            match self.tls.reader().read(&mut buf[start..]) {
                Ok(0) => {
                    buf.truncate(start);
                    eof = true;
                    break;
                }
                Ok(n) => {
                    buf.truncate(start + n);
                    got = true;
                    if n < want {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    buf.truncate(start);
                    break;
                }
                Err(e) => {
                    buf.truncate(start);
                    return Err(e);
                }
            }
        }
        if got {
            // More may wait in the socket (read_tls takes one chunk).
            Ok(ReadOutcome::Data { full: true })
        } else if eof {
            Ok(ReadOutcome::Eof)
        } else {
            Ok(ReadOutcome::WouldBlock)
        }
    }

    fn write(&mut self, out: &[u8]) -> io::Result<usize> {
        let n = self.tls.writer().write(out)?;
        self.flush()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// One connection of a shard.
pub struct Conn {
    pub(crate) io: Io,
    pub gen: u32,
    pub state: ConnState,
    /// Received bytes not yet parsed into frames.
    pub rbuf: BytesMut,
    /// Bytes asked of each read: doubled while reads fill it (a pipelining
    /// client), back to the minimum when one doesn't.
    pub read_ahead: usize,
    /// Answers the client may be told now, not yet written.
    pub out: BytesMut,
    /// Answers that wait for the pass's commit (they wrote, or may have
    /// read what this pass wrote), and what they answer.
    pub held: BytesMut,
    pub held_reqs: Vec<Held>,
    /// Requests of this connection answered elsewhere and not yet back
    /// (forwarded to another shard, queued, running in a node task), and
    /// their frame bytes.
    pub inflight: usize,
    pub inflight_bytes: usize,
    /// Edge-triggered readiness: the socket may have bytes to read / room
    /// to write.
    pub readable: bool,
    pub writable: bool,
    /// The peer closed its side: answer what is in flight, then close.
    pub peer_closed: bool,
    /// Set when the connection must close, with the reason (metrics).
    pub closing: Option<&'static str>,
    /// Listed for this pass's writes / for the next pass's reads.
    pub in_touched: bool,
    pub in_pending: bool,
    pub in_blocked: bool,
    /// Activity, for the idle, frame and write timeouts.
    pub opened: Instant,
    pub last_read: Instant,
    pub frame_started: Option<Instant>,
    pub write_stalled: Option<Instant>,
    /// A RESP connection's codec: its answers leave `out` as RESP, in
    /// command order (`crate::resp`). None on the binary protocol.
    pub resp: Option<Box<crate::resp::RespConn>>,
}

impl Conn {
    pub(crate) fn new(io: Io, gen: u32, state: ConnState, now: Instant) -> Conn {
        Conn {
            io,
            gen,
            state,
            rbuf: BytesMut::new(),
            read_ahead: MIN_READ_AHEAD,
            out: BytesMut::new(),
            held: BytesMut::new(),
            held_reqs: Vec::new(),
            inflight: 0,
            inflight_bytes: 0,
            readable: true,
            writable: true,
            peer_closed: false,
            closing: None,
            in_touched: false,
            in_pending: false,
            in_blocked: false,
            opened: now,
            last_read: now,
            frame_started: None,
            write_stalled: None,
            resp: None,
        }
    }

    /// Unwritten answers, held or not.
    pub fn queued_output(&self) -> usize {
        self.out.len() + self.held.len() + self.resp.as_ref().map_or(0, |r| r.queued_output())
    }

    /// Answers ready to be written (a write is worth trying).
    pub fn has_output(&self) -> bool {
        !self.out.is_empty() || self.resp.as_ref().is_some_and(|r| !r.wire.is_empty())
    }

    /// How many bytes to ask the next read for: the rest of an announced
    /// frame (already checked against the frame limit by parsing), or the
    /// read-ahead.
    pub fn next_read_size(&self) -> usize {
        let want = if self.resp.is_some() {
            // RESP announces no length up front; the parser bounds it.
            0
        } else if self.rbuf.len() >= 4 {
            4 + u32::from_be_bytes(self.rbuf[..4].try_into().expect("4 bytes")) as usize
        } else {
            0
        };
        want.saturating_sub(self.rbuf.len()).max(self.read_ahead)
    }

    /// The pass's commit is done: held answers may go out (after any
    /// unwritten ready ones).
    pub fn release_held(&mut self) {
        if self.held.is_empty() {
            self.held_reqs.clear();
            return;
        }
        if self.out.is_empty() {
            std::mem::swap(&mut self.out, &mut self.held);
        } else {
            self.out.extend_from_slice(&self.held);
            self.held.clear();
        }
        self.held_reqs.clear();
    }

    /// Write what may be written. `Ok(true)` when everything (TLS's own
    /// bytes included) is out.
    pub fn flush(&mut self, now: Instant) -> io::Result<bool> {
        if let Some(r) = self.resp.as_deref_mut() {
            r.take_answers(&mut self.out);
        }
        if self.io.wants_write() {
            self.io.flush_tls()?;
        }
        let out = match self.resp.as_deref_mut() {
            Some(r) => &mut r.wire,
            None => &mut self.out,
        };
        while !out.is_empty() {
            let n = self.io.write(out)?;
            if n == 0 {
                self.writable = false;
                self.write_stalled.get_or_insert(now);
                return Ok(false);
            }
            out.advance(n);
            self.write_stalled = None;
        }
        if out.capacity() > KEEP_BUFFER {
            *out = BytesMut::new();
        }
        if self.io.wants_write() {
            self.write_stalled.get_or_insert(now);
            return Ok(false);
        }
        self.write_stalled = None;
        Ok(true)
    }

    /// Release a large read buffer that emptied.
    pub fn trim_read_buffer(&mut self) {
        if self.rbuf.is_empty() && self.rbuf.capacity() > KEEP_BUFFER {
            self.rbuf = BytesMut::new();
        }
    }
}
