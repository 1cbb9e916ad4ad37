//! The listeners: binding them (the RESP one at its default place or
//! where it is set), the descriptor limit, and the accept loop that hands
//! each connection to a shard.

use super::NodeShared;
use crate::config::Config;
use crate::resp::Protocol;
use anyhow::Context;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The RESP listener: where `server.resp_listen` says, or, when it says
/// nothing, beside the protocol listener (see
/// [`crate::config::ServerConfig::resp_listen`]). Only an address set
/// explicitly must bind; the default one is skipped with a warning when it
/// is taken, so a second node on one host still starts.
pub(super) async fn bind_resp(
    config: &Config,
    protocol: SocketAddr,
) -> anyhow::Result<Option<TcpListener>> {
    let (addr, explicit) = match &config.server.resp_listen {
        Some(a) if a.is_empty() => return Ok(None),
        Some(a) => (a.clone(), true),
        None => (
            crate::config::default_resp_addr(protocol).to_string(),
            false,
        ),
    };
    match bind(&addr, config.server.listen_backlog).await {
        Ok(l) => Ok(Some(l)),
        Err(e) if !explicit => {
            tracing::warn!(%addr, error = %e, "RESP listener off: its default address is taken; set server.resp_listen");
            Ok(None)
        }
        Err(e) => Err(e).with_context(|| format!("binding the RESP listener {addr}")),
    }
}

/// Binds a listener with an explicit accept queue (tokio's `bind` uses
/// 1024, which a burst of connects overflows: the kernel then drops SYNs
/// and clients wait a second for their retransmit).
pub(super) async fn bind(addr: &str, backlog: u32) -> std::io::Result<TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(addr).await? {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(backlog)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the address resolved to nothing",
        )
    }))
}

/// Connections are file descriptors: lifts the soft limit to the hard one so
/// `server.max_connections`, not a default of 1024, is what bounds them.
/// False if the limit could not be read or raised.
pub fn raise_fd_limit() -> bool {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain libc calls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return false;
        }
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            return libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0;
        }
    }
    true
}

pub(super) async fn accept_loop(
    listener: TcpListener,
    protocol: Protocol,
    node: Arc<NodeShared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut next = 0usize;
    loop {
        let (stream, _peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors and the like: back off, don't spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let open = node.connections.fetch_add(1, Ordering::SeqCst);
        if open >= node.config.server.max_connections {
            node.connections.fetch_sub(1, Ordering::SeqCst);
            node.metrics.connections_rejected.inc();
            tokio::spawn(refuse(stream, protocol, node.config.server.max_connections));
            continue;
        }
        node.metrics.connections_total.inc();
        node.metrics.connections.inc();
        // Round-robin; a shard-aware client moves its connections to the
        // shards it wants (SHARD_BIND).
        let shard = &node.shards[next % node.shards.len()];
        next = next.wrapping_add(1);
        let handed = stream
            .into_std()
            .map_err(|_| ())
            .and_then(|s| shard.accept(s, protocol).map_err(|_| ()));
        if handed.is_err() {
            node.connections.fetch_sub(1, Ordering::SeqCst);
            node.metrics.connections.dec();
        }
    }
}

/// Tell a connection over the limit why it is closed (request id 0).
async fn refuse(mut stream: tokio::net::TcpStream, protocol: Protocol, max: usize) {
    use tokio::io::AsyncWriteExt;
    let mut buf = bytes::BytesMut::new();
    let err = rush_protocol::RushError::unavailable(format!(
        "too many connections (max_connections = {max}); try another node or later"
    ));
    match protocol {
        Protocol::Binary => rush_protocol::frame::encode_error(&mut buf, 0, 0, &err),
        // Redis's own words for this.
        Protocol::Resp => {
            rush_protocol::resp::write::error(&mut buf, "ERR max number of clients reached")
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&buf)).await;
    let _ = stream.shutdown().await;
}
