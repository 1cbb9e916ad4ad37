//! HTTP for operators: `/metrics` (Prometheus text), `/health` (the process
//! is up), `/ready` (serving; turns false first on shutdown so load balancers
//! and Kubernetes stop sending before connections drain). [`probe`] is the
//! other side, for `rushd health` (the container image's HEALTHCHECK).

use crate::server::NodeShared;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::net::TcpListener;

/// The handlers hold the node weakly: an open scrape connection must not keep
/// the node (and its RocksDB) alive after shutdown.
pub async fn serve(listener: TcpListener, node: Weak<NodeShared>) {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .with_state(node);
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "HTTP listener failed");
    }
}

fn gone() -> axum::response::Response {
    (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response()
}

async fn metrics(State(node): State<Weak<NodeShared>>) -> axum::response::Response {
    let Some(node) = node.upgrade() else {
        return gone();
    };
    let node: Arc<NodeShared> = node;
    let m = &node.metrics;
    for (i, s) in node.shards.iter().enumerate() {
        m.queue_depth
            .with_label_values(&[&i.to_string()])
            .set(s.queue_len() as i64);
    }
    m.set_memory(&node.memory_report());
    node.replication.publish(&node.config, m);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        m.render(),
    )
        .into_response()
}

async fn health() -> &'static str {
    "ok\n"
}

async fn ready(State(node): State<Weak<NodeShared>>) -> axum::response::Response {
    match node.upgrade() {
        Some(node) if node.ready.load(Ordering::SeqCst) => {
            (StatusCode::OK, "ready\n").into_response()
        }
        _ => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response(),
    }
}

/// Why a health probe failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("asking {addr} for {path}: {source}")]
    Io {
        addr: SocketAddr,
        path: String,
        source: std::io::Error,
    },
    #[error("{addr}{path} answered {status:?}")]
    Status {
        addr: SocketAddr,
        path: String,
        status: String,
    },
}

/// GET `path` from the HTTP listener at `addr`, on plain blocking sockets
/// (no runtime: this runs as its own short-lived process); Ok on a 200.
pub fn probe(addr: SocketAddr, path: &str, timeout: Duration) -> Result<(), ProbeError> {
    let io = |source| ProbeError::Io {
        addr,
        path: path.to_string(),
        source,
    };
    let mut stream = std::net::TcpStream::connect_timeout(&addr, timeout)
        .map_err(|source| ProbeError::Connect { addr, source })?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(io)?;
    // The status line is all that matters; it fits in the first read's
    // worth of a few hundred bytes.
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < 4096 {
        match stream.read(&mut buf).map_err(io)? {
            0 => break,
            n => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = String::from_utf8_lossy(&head);
    let line = line.lines().next().unwrap_or("").trim().to_string();
    match line.split_whitespace().nth(1) {
        Some("200") if line.starts_with("HTTP/1.") => Ok(()),
        _ => Err(ProbeError::Status {
            addr,
            path: path.to_string(),
            status: if line.is_empty() {
                "nothing".into()
            } else {
                line
            },
        }),
    }
}
