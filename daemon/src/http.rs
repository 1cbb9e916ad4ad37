//! HTTP for operators: `/metrics` (Prometheus text), `/health` (the process
//! is up), `/ready` (serving; turns false first on shutdown so load balancers
//! and Kubernetes stop sending before connections drain).

use crate::server::NodeShared;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
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
