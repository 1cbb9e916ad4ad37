//! RESP, the Redis protocol, on its own listener (`server.resp_listen`),
//! served by the same shard loops as the binary protocol.
//!
//! The seam is a per-connection codec and nothing else: a RESP command
//! becomes the same [`rush_protocol::Request`] a binary client would send
//! ([`command::decode`]), and goes through the same path — authentication,
//! routing, forwarding to its shard, admission, the pass's group commit
//! (answers to writes are held until they are synced), backpressure and the
//! connection's output bounds. Its answer is encoded as a binary answer
//! frame into the connection's output like any other; when the connection
//! is written, [`RespConn::take_answers`] turns those frames into RESP, in
//! the order the commands were sent (RESP has no request ids: answers of
//! forwarded requests can come back before those of earlier local ones, so
//! they wait in the connection's queue until their turn).
//!
//! The cost is one extra encode and decode of each answer; the hot path's
//! µs per operation are left for a later change with its A/B (STYLE 13).
//!
//! `protocol/RESP.md` documents the commands and their replies.

pub mod cluster;
pub mod command;
pub mod node;
pub mod reply;
pub mod services;
pub mod table;
pub mod transaction;
pub mod value;

use bytes::{Bytes, BytesMut};
use command::{Decoded, Now, Shape};
use rush_protocol::frame;
use rush_protocol::limits::MAX_FRAME_CEILING;
use rush_protocol::resp::write;
use rush_protocol::{Reply, RushError};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

/// Which protocol a listener, and so a connection, speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Binary,
    Resp,
}

/// One command's place in the connection's answer order. Answers are
/// written when their turn comes, in the protocol version in effect then
/// (a `HELLO` before them may have switched it).
enum Pending {
    /// Runs through the request path; its answer frame carries the
    /// sequence number as request id.
    Waiting(Shape),
    /// Its answer (of this many frame bytes) came ahead of its turn. Boxed:
    /// a reply is large, and only answers that overtake others wait here.
    Answered(Shape, Box<Result<Reply, RushError>>, usize),
    /// Answered without a request.
    Now(Now),
}

/// A RESP connection's codec state.
pub struct RespConn {
    /// 2 or 3 (`HELLO 3`).
    pub proto: u8,
    /// The sequence number of `queue`'s first entry. Sequence numbers are
    /// the request ids of this connection's requests.
    base: u64,
    /// Commands not yet answered on the wire, oldest first. Bounded by the
    /// connection's budgets: reading stops while too much is in flight or
    /// unwritten.
    queue: VecDeque<Pending>,
    /// RESP bytes ready to be written.
    pub wire: BytesMut,
    /// Bytes of answers in `queue` (as they came, or as estimated).
    queued_bytes: usize,
    /// MULTI's queue and WATCH's values.
    txn: transaction::Transaction,
    /// The node, for the commands it answers itself ([`node::run`]) and
    /// the RESP addresses of MOVED answers. `None` only in unit tests.
    node: Option<Arc<crate::server::NodeShared>>,
    /// CLIENT ID: this connection's entry in the node's
    /// [`node::Clients`] (0: none).
    pub id: u64,
    /// The protocol version the node's client list shows for it.
    listed_proto: u8,
    laddr: Option<SocketAddr>,
}

impl Default for RespConn {
    fn default() -> Self {
        RespConn::new(None, None, None)
    }
}

impl Drop for RespConn {
    fn drop(&mut self) {
        if let Some(node) = &self.node {
            node.resp_clients.close(self.id);
        }
    }
}

impl RespConn {
    /// A connection from `addr` to `laddr`, listed in the node's clients.
    pub fn new(
        node: Option<Arc<crate::server::NodeShared>>,
        addr: Option<SocketAddr>,
        laddr: Option<SocketAddr>,
    ) -> RespConn {
        let id = node
            .as_ref()
            .map_or(0, |n| n.resp_clients.open(addr, laddr));
        RespConn {
            proto: 2,
            base: 1,
            queue: VecDeque::new(),
            wire: BytesMut::new(),
            queued_bytes: 0,
            txn: transaction::Transaction::default(),
            node,
            id,
            listed_proto: 2,
            laddr,
        }
    }

    /// CLIENT SETNAME's (and HELLO SETNAME's) name, as the node's client
    /// list shows it.
    pub fn set_name(&self, name: &[u8]) {
        if let Some(node) = &self.node {
            node.resp_clients.update(self.id, |c| {
                c.name = String::from_utf8_lossy(name).into_owned()
            });
        }
    }

    /// The address this connection was accepted on.
    pub fn laddr(&self) -> Option<SocketAddr> {
        self.laddr
    }

    pub fn local_port(&self) -> Option<u16> {
        self.laddr.map(|a| a.port())
    }

    /// Show the connection's protocol version in the client list (after a
    /// HELLO switched it).
    pub fn sync_proto(&mut self) {
        if self.listed_proto != self.proto {
            self.listed_proto = self.proto;
            if let Some(node) = &self.node {
                let p = self.proto;
                node.resp_clients.update(self.id, |c| c.resp = p);
            }
        }
    }

    /// Unwritten answers.
    pub fn queued_output(&self) -> usize {
        self.wire.len() + self.queued_bytes
    }

    /// Decode one command (see [`command::decode`]) in the connection's
    /// state: the transaction words are answered here, and between MULTI
    /// and EXEC every other command is queued.
    pub fn decode(
        &mut self,
        args: Vec<Bytes>,
        authenticated: bool,
        auth_required: bool,
        now_ms: u64,
    ) -> Decoded {
        if let Some(word) = transaction::Word::of(&args[0]) {
            return match command::refusal(word.name(), &args, authenticated) {
                Some(refused) => self.txn.refused(refused),
                None => self.txn.word(word, &args),
            };
        }
        if !self.txn.in_multi() {
            let mut decoded = command::decode(args, authenticated, auth_required, now_ms);
            if let Decoded::Now(Now::Hello { greeting, .. })
            | Decoded::Run(_, Shape::Hello { greeting, .. }) = &mut decoded
            {
                greeting.id = self.id;
                greeting.cluster = self
                    .node
                    .as_ref()
                    .is_some_and(|n| n.cluster.routing.map().epoch() > 0);
            }
            return decoded;
        }
        let name = args[0].clone();
        let size = args.iter().map(|a| a.len()).sum();
        let decoded = command::decode(args, authenticated, auth_required, now_ms);
        self.txn.queue(&name, size, decoded)
    }

    /// A command that runs through the request path: its request id.
    pub fn wait(&mut self, shape: Shape) -> u64 {
        self.queue.push_back(Pending::Waiting(shape));
        self.base + self.queue.len() as u64 - 1
    }

    /// A command answered without a request. The node's own commands are
    /// answered now, in command order ([`node::run`]).
    pub fn answer(&mut self, now: Now) {
        let now = match now {
            Now::Node(ask) => node::run(self, ask),
            Now::Hello { proto, greeting } => {
                if let Some(name) = &greeting.name {
                    self.set_name(name);
                }
                Now::Hello { proto, greeting }
            }
            now => now,
        };
        if self.queue.is_empty() {
            write_now(&mut self.wire, &mut self.proto, now);
            self.sync_proto();
        } else {
            self.queued_bytes += now.estimate();
            self.queue.push_back(Pending::Now(now));
        }
    }

    /// Turn the answer frames in `out` into RESP, in command order.
    pub fn take_answers(&mut self, out: &mut BytesMut) {
        while let Ok(Some(f)) = frame::parse(out, MAX_FRAME_CEILING * 2) {
            let Some(i) = f
                .header
                .request_id
                .checked_sub(self.base)
                .map(|i| i as usize)
                .filter(|&i| i < self.queue.len())
            else {
                tracing::warn!(
                    request_id = f.header.request_id,
                    "a RESP answer no command waits for; dropped"
                );
                continue;
            };
            let Pending::Waiting(shape) = &mut self.queue[i] else {
                continue;
            };
            // Taken, not cloned (EXEC's shape holds its parts); the entry
            // is replaced below.
            let shape = std::mem::replace(shape, Shape::Bulk);
            let size = f.body.len();
            let result = reply::decode_answer(f.header.opcode, f.body)
                .map_err(|e| reply::redirect_to_resp(e, self.node.as_deref().map(|n| &*n.cluster)));
            match &shape {
                Shape::Watch(read) => self.txn.watched(read, &result),
                Shape::Hello { greeting, .. } if result.is_ok() => {
                    if let Some(name) = &greeting.name {
                        self.set_name(name);
                    }
                }
                _ => {}
            }
            if i == 0 {
                self.queue.pop_front();
                self.base += 1;
                reply::render(&mut self.wire, &mut self.proto, &shape, result);
                self.drain();
            } else {
                self.queued_bytes += size;
                self.queue[i] = Pending::Answered(shape, Box::new(result), size);
            }
        }
        self.sync_proto();
    }

    /// Write the answers whose turn has come.
    fn drain(&mut self) {
        loop {
            match self.queue.front() {
                Some(Pending::Answered(..) | Pending::Now(_)) => {}
                _ => return,
            }
            self.base += 1;
            match self.queue.pop_front() {
                Some(Pending::Answered(shape, result, size)) => {
                    self.queued_bytes = self.queued_bytes.saturating_sub(size);
                    reply::render(&mut self.wire, &mut self.proto, &shape, *result);
                }
                Some(Pending::Now(now)) => {
                    self.queued_bytes = self.queued_bytes.saturating_sub(now.estimate());
                    write_now(&mut self.wire, &mut self.proto, now);
                }
                _ => {}
            }
        }
    }
}

/// Write an answer that needed no request. `HELLO 2|3` switches the
/// connection's version first: it is answered in the version it asked for.
pub(crate) fn write_now(out: &mut BytesMut, proto: &mut u8, answer: Now) {
    if let Now::Hello {
        proto: p @ (2 | 3), ..
    } = answer
    {
        *proto = p;
    }
    let resp3 = *proto == 3;
    match answer {
        Now::Simple(s) => write::simple(out, s),
        Now::Bulk(b) => write::bulk(out, &b),
        Now::Integer(n) => write::integer(out, n),
        Now::Error(e) => write::error(out, &e),
        Now::Hello { greeting, .. } => reply::hello_map(out, resp3, &greeting),
        Now::Empty { map: true } => write::map(out, 0, resp3),
        Now::Empty { map: false } => write::array(out, 0),
        Now::Array(answers) => {
            write::array(out, answers.len());
            for a in answers {
                write_now(out, proto, a);
            }
        }
        Now::Value(v) => v.write(out, resp3),
        // Answered in `RespConn::answer` before anything is queued.
        Now::Node(_) => write::error(out, "ERR internal: a node command left unanswered"),
    }
}
