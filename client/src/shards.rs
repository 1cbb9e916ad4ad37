//! One connection per shard of a node, each bound to its shard, so every
//! request reaches the thread that runs it without a hop between the
//! node's threads.
//!
//! A node runs its slots on several shards (threads). A connection is
//! served by one of them; a request for another shard's slot is forwarded
//! inside the node, which costs a hand-off each way. A [`NodeConnection`]
//! asks the node for its layout (SHARDS), opens one connection per shard,
//! moves each to its shard (SHARD_BIND), and sends each request on the
//! connection of the shard that owns its slot. Requests with no slot (PING,
//! INFO, admin broadcasts) go on shard 0's. Against a node of one shard, a
//! node that doesn't know SHARDS (one of an older release), or with
//! `per_shard = false`, it is a single connection.

use crate::connection::{Connection, Tls};
use crate::error::ClientError;
use rush_protocol::cmd::{Hello, HelloReply, ShardBind, Shards};
use rush_protocol::{Command, ErrorCode, Target, SLOTS};
use std::sync::Arc;
use std::time::Duration;

/// How a node's slots map to its shards, as the node said.
#[derive(Debug)]
struct Layout {
    /// Shard index per slot.
    shard_of: Box<[u16]>,
}

/// A node, reached through one connection per shard. Cheap to clone.
#[derive(Clone)]
pub struct NodeConnection {
    conns: Arc<[Connection]>,
    layout: Option<Arc<Layout>>,
}

impl NodeConnection {
    /// Connect to the node at `addr` and say HELLO on every connection;
    /// with `per_shard`, one connection per shard of the node.
    pub async fn connect(
        addr: &str,
        timeout: Duration,
        tls: Option<&Tls>,
        hello: &Hello,
        per_shard: bool,
    ) -> Result<(NodeConnection, HelloReply), ClientError> {
        let first = Connection::connect_tls(addr, timeout, tls).await?;
        let reply = first.call(hello, timeout).await?;
        if !per_shard || reply.shards <= 1 {
            return Ok((
                NodeConnection {
                    conns: Arc::new([first]),
                    layout: None,
                },
                reply,
            ));
        }
        let layout = match first.call(&Shards {}, timeout).await {
            Ok(layout) => layout,
            // A node that predates SHARDS: one connection, and the node
            // forwards between its shards (PROTOCOL.md, "Compatibility").
            Err(e) if e.code() == Some(ErrorCode::UnknownOpcode) => {
                return Ok((
                    NodeConnection {
                        conns: Arc::new([first]),
                        layout: None,
                    },
                    reply,
                ))
            }
            Err(e) => return Err(e),
        };
        let n = layout.ranges.len();
        let mut shard_of = vec![0u16; SLOTS as usize].into_boxed_slice();
        for (i, r) in layout.ranges.iter().enumerate() {
            if r.start <= r.end {
                for slot in r.start..=r.end.min(SLOTS - 1) {
                    shard_of[slot as usize] = i as u16;
                }
            }
        }
        let mut conns = Vec::with_capacity(n);
        conns.push(first);
        for _ in 1..n {
            let c = Connection::connect_tls(addr, timeout, tls).await?;
            c.call(hello, timeout).await?;
            conns.push(c);
        }
        // Each connection to its shard, nothing else in flight on it.
        for (i, c) in conns.iter().enumerate() {
            let bound = c.call(&ShardBind { shard: i as u16 }, timeout).await?;
            if bound.shard as usize != i {
                return Err(ClientError::Protocol(format!(
                    "{addr}: SHARD_BIND {i} answered shard {}",
                    bound.shard
                )));
            }
        }
        Ok((
            NodeConnection {
                conns: conns.into(),
                layout: Some(Arc::new(Layout { shard_of })),
            },
            reply,
        ))
    }

    /// Connections (one per shard, or one).
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// True when any of its connections closed (the node should be
    /// reconnected as a whole).
    pub fn is_closed(&self) -> bool {
        self.conns.iter().any(Connection::is_closed)
    }

    /// The connection a request for `slot` goes on.
    #[inline]
    pub fn for_slot(&self, slot: Option<u16>) -> &Connection {
        match (&self.layout, slot) {
            (Some(l), Some(s)) => &self.conns[l.shard_of[s as usize] as usize],
            _ => &self.conns[0],
        }
    }

    /// Send one request on its shard's connection and wait for the answer.
    #[inline]
    pub async fn call<C: Command>(
        &self,
        cmd: &C,
        timeout: Duration,
    ) -> Result<C::Reply, ClientError> {
        let slot = match cmd.target() {
            Ok(Target::Slot(s)) => Some(s),
            _ => None,
        };
        self.for_slot(slot).call(cmd, timeout).await
    }
}
