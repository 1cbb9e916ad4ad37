//! The primary's replication listener (`replication.listen`): replicas
//! fetch here, on the node's runtime, not through a shard.
//!
//! Why not the protocol listener: with `min_acks = 1` a shard waits, after
//! its commit, for the replica to say it holds the commit — and that
//! acknowledgement is the replica's next fetch. Were the replica's
//! connection one of the waiting shard's, nothing would read it until the
//! wait timed out. Here nothing a shard does delays a fetch.
//!
//! The same frames as the protocol listener, one request at a time per
//! connection: HELLO (with the admin token when auth is on; TLS when the
//! node serves TLS), PING, INFO, REPL_SNAPSHOT, REPL_FETCH, REPL_STATUS.
//! Anything else is BAD_REQUEST.

use super::{fetch, snapshot};
use crate::server::NodeShared;
use crate::shard::conn::ConnState;
use crate::shard::encode_answer;
use bytes::BytesMut;
use rush_protocol::cmd::Pong;
use rush_protocol::frame;
use rush_protocol::limits::DEFAULT_MAX_FRAME;
use rush_protocol::{ErrorCode, Reply, Request, RushError};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// Connections the replication listener holds at once (a node has one
/// replica; the rest is room for a replica reconnecting and for operators'
/// REPL_STATUS). Beyond it a new connection is closed at once.
pub const MAX_CONNECTIONS: usize = 16;

/// Accept replicas until the task is aborted (at shutdown), which ends
/// their connections too (they hold the node).
pub async fn serve(listener: TcpListener, node: Arc<NodeShared>) {
    let mut conns = tokio::task::JoinSet::new();
    let tls = node
        .config
        .tls
        .cert_file
        .as_ref()
        .zip(node.config.tls.key_file.as_ref())
        .and_then(|(c, k)| crate::tls::server_config(c, k).ok())
        .map(tokio_rustls::TlsAcceptor::from);
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "replication listener: accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        while conns.try_join_next().is_some() {}
        if conns.len() >= MAX_CONNECTIONS {
            tracing::warn!(%peer, "replication listener: {MAX_CONNECTIONS} connections open; closing a new one");
            node.metrics.connections_rejected.inc();
            continue;
        }
        let _ = sock.set_nodelay(true);
        let (node, tls) = (node.clone(), tls.clone());
        conns.spawn(async move {
            let outcome = match tls {
                Some(acceptor) => match acceptor.accept(sock).await {
                    Ok(s) => serve_one(s, &node).await,
                    Err(e) => Err(e),
                },
                None => serve_one(sock, &node).await,
            };
            if let Err(e) = outcome {
                tracing::debug!(%peer, error = %e, "replication connection closed");
            }
        });
    }
}

async fn serve_one<S: AsyncRead + AsyncWrite + Unpin>(
    mut sock: S,
    node: &Arc<NodeShared>,
) -> std::io::Result<()> {
    let mut state = ConnState {
        authenticated: !node.auth.required(),
        admin: !node.auth.required(),
        replica_reads: false,
    };
    let mut buf = BytesMut::with_capacity(16 << 10);
    let mut out = BytesMut::new();
    loop {
        let f = loop {
            match frame::parse(&mut buf, DEFAULT_MAX_FRAME) {
                Ok(Some(f)) => break f,
                Ok(None) => {}
                Err(e) => return Err(std::io::Error::other(e.to_string())),
            }
            if sock.read_buf(&mut buf).await? == 0 {
                return Ok(());
            }
        };
        let result = match Request::decode(f.header.opcode, f.body) {
            Ok(req) => answer(node, &mut state, req).await,
            Err(e) => Err(e),
        };
        out.clear();
        let _ = encode_answer(&mut out, f.header.opcode, f.header.request_id, &result);
        sock.write_all(&out).await?;
    }
}

async fn answer(
    node: &Arc<NodeShared>,
    state: &mut ConnState,
    req: Request,
) -> Result<Reply, RushError> {
    if let Request::Hello(h) = req {
        return crate::server::node_cmds::hello(node, state, h);
    }
    if !state.authenticated {
        return Err(RushError::new(
            ErrorCode::Unauthorized,
            "HELLO with a token first",
        ));
    }
    if !state.admin {
        return Err(RushError::new(
            ErrorCode::Forbidden,
            "replication needs the admin token",
        ));
    }
    match req {
        Request::Ping(p) => Ok(Reply::Ping(Pong { payload: p.payload })),
        Request::Info(_) => Ok(Reply::Info(crate::server::node_cmds::info(node))),
        Request::ReplSnapshot(s) => snapshot(node, s).await,
        Request::ReplFetch(f) => fetch(node, f).await.map(Reply::ReplFetch),
        Request::ReplStatus(_) => Ok(Reply::ReplStatus(super::info_reply(
            node.replication.rows(&node.storage),
        ))),
        other => Err(RushError::bad_request(format!(
            "{} is not served on the replication listener (replication.listen); send it to the \
             protocol listener",
            other.opcode().name()
        ))),
    }
}
