//! Node-level requests and the operator HTTP endpoints.

mod common;

use common::{http_get, TestNode};
use rush_client::protocol::cmd::Hello;
use rush_client::protocol::ErrorCode;
use std::time::Duration;

#[tokio::test]
async fn info_and_cluster_slots() {
    let node = TestNode::start().await;
    let info = node.client.info().await.unwrap();
    assert_eq!(info.get("shards"), Some("2"));
    assert_eq!(info.get("protocol"), Some("1"));
    assert_eq!(
        info.get("data_dir"),
        Some(node.dir.path().to_str().unwrap())
    );
    let node_id = info.get("node_id").unwrap().to_string();
    assert_eq!(node_id.len(), 16);

    let map = node.client.cluster_slots().await.unwrap();
    assert_eq!(map.nodes.len(), 1);
    assert_eq!(map.nodes[0].addr, node.addr().to_string());
    assert_eq!(map.nodes[0].ranges[0].start, 0);
    assert_eq!(map.nodes[0].ranges[0].end, 16383);
    assert_eq!(map.node_for(12182).unwrap().id, node_id);

    // A node keeps its generated id across restarts.
    let mut node = node;
    node.restart().await;
    assert_eq!(
        node.client.info().await.unwrap().get("node_id"),
        Some(node_id.as_str())
    );
    node.stop().await;
}

#[tokio::test]
async fn hello_with_another_version_is_refused() {
    let node = TestNode::start().await;
    let e = node
        .client
        .call(Hello {
            version: 2,
            token: None,
            client: "future".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::UnsupportedVersion));
    node.stop().await;
}

#[tokio::test]
async fn clock_control_is_off_by_default() {
    let node = TestNode::start_with(|c| c.debug.clock_control = false).await;
    let e = node
        .client
        .clock_advance(Duration::from_secs(1))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Forbidden));
    node.stop().await;
}

#[tokio::test]
async fn metrics_health_and_ready() {
    let node = TestNode::start().await;
    let http = node.running().http_addr().unwrap();
    for i in 0..10 {
        node.client.set(format!("k{i}"), "v").await.unwrap();
    }
    let _ = node.client.get("missing").await.unwrap();
    let _ = node.client.incr_by("k1", 1).await.unwrap_err();

    assert_eq!(http_get(http, "/health").await.0, 200);
    assert_eq!(http_get(http, "/ready").await.0, 200);
    let (status, body) = http_get(http, "/metrics").await;
    assert_eq!(status, 200);
    let value = |needle: &str| -> f64 {
        body.lines()
            .find(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("no {needle} in:\n{body}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(
        value("rush_requests_total{op=\"SET\",outcome=\"ok\"}"),
        10.0
    );
    assert_eq!(
        value("rush_requests_total{op=\"INCRBY\",outcome=\"WRONG_TYPE\"}"),
        1.0
    );
    assert!(
        value("rush_storage_syncs_total") >= 1.0,
        "durable writes were synced"
    );
    assert!(value("rush_request_duration_seconds_count{op=\"SET\"}") >= 10.0);
    assert!(body.contains("rush_shard_queue_depth{shard=\"1\"}"));
    assert!(body.contains("rush_shard_batch_size_bucket"));
    // Every pass that ran requests is timed (a stall shows there); the
    // test's writes are far under the write-back budget: no waits.
    assert!(value("rush_shard_pass_seconds_count") >= 1.0);
    assert!(value("rush_shard_pass_seconds_bucket{le=\"+Inf\"}") >= 1.0);
    assert_eq!(value("rush_storage_write_back_wait_seconds_count"), 0.0);
    // The test's client: one connection per shard.
    assert_eq!(
        value("rush_connections"),
        common::open_connections(&node.client).await as f64
    );
    assert_eq!(value("rush_connections"), 2.0);
    assert_eq!(http_get(http, "/nope").await.0, 404);
    node.stop().await;
}

#[tokio::test]
async fn dropping_every_client_handle_closes_its_connection() {
    let node = TestNode::start().await;
    let connections = || common::open_connections(&node.client);
    // The test's own client holds some (one per shard).
    let own = connections().await;
    {
        let c = rush_client::Connection::connect(&node.addr().to_string(), Duration::from_secs(5))
            .await
            .unwrap();
        let again = c.clone();
        c.call(
            &rush_client::protocol::cmd::Ping::default(),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
        drop(again);
        assert_eq!(connections().await, own + 1, "a clone keeps it open");
    }
    // The server sees the close as soon as the client's I/O tasks run.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while connections().await != own {
        assert!(
            std::time::Instant::now() < deadline,
            "the socket was not closed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    node.stop().await;
}
