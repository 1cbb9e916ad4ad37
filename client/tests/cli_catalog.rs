//! `rush catalog …` against a real in-process daemon.

mod common;

use common::{node as start, Node};

/// `rush catalog query` with the words of `query`, which must succeed: how
/// many records it printed (one a line).
async fn found(node: &Node, query: &str) -> usize {
    let out = node.run(&format!("catalog query {query}")).await;
    out.exits(0).stdout.lines().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_query_alias_delete() {
    let node = start().await;
    assert_eq!(
        node.ok(&["catalog", "put", "M1", "c2", "plan=gold", "region=eu west"])
            .await,
        "created\n"
    );
    let out = node
        .run("catalog put M1 c1 plan=basic --valid-from 2026-01-01 --valid-to 2027-01-01T00:00:00Z")
        .await;
    assert_eq!(out.exits(0).stdout, "created\n");
    assert_eq!(
        node.ok(&["catalog", "put", "M1", "c2", "plan=gold", "region=eu west"])
            .await,
        "replaced\n"
    );
    assert_eq!(
        node.ok(&["catalog", "query", "M1"]).await,
        "c1 [2026-01-01T00:00:00Z,2027-01-01T00:00:00Z) plan=basic\nc2 plan=gold region=eu west\n"
    );
    assert_eq!(
        node.ok(&["catalog", "query", "M1", "plan=gold"]).await,
        "c2 plan=gold region=eu west\n"
    );
    assert_eq!(
        node.ok(&["catalog", "query", "M1", "--at", "2028-06-01"])
            .await,
        "c2 plan=gold region=eu west\n"
    );
    assert_eq!(found(&node, "M1 --at 1767225600000 plan=basic").await, 1);
    let j = common::json(&node.addr(), &["catalog", "query", "M1"]).await;
    assert_eq!(
        j,
        serde_json::json!([
            {
                "id": "c1",
                "valid_from_ms": 1_767_225_600_000u64,
                "valid_from": "2026-01-01T00:00:00Z",
                "valid_to_ms": 1_798_761_600_000u64,
                "valid_to": "2027-01-01T00:00:00Z",
                "attributes": { "plan": "basic" },
            },
            {
                "id": "c2",
                "valid_from_ms": null,
                "valid_from": null,
                "valid_to_ms": null,
                "valid_to": null,
                "attributes": { "plan": "gold", "region": "eu west" },
            },
        ])
    );
    // Times with an offset are honoured.
    assert_eq!(found(&node, "M1 --at 2027-01-01T07:59:59+08:00").await, 2);
    // None: nothing printed, exit 0.
    assert_eq!(node.ok(&["catalog", "query", "nobody"]).await, "");
    assert_eq!(
        node.ok(&["catalog", "query", "M1", "plan=platinum"]).await,
        ""
    );

    assert_eq!(
        node.ok(&["catalog", "alias", "name", "Acme Ltd", "M1"])
            .await,
        "created\n"
    );
    assert_eq!(
        node.ok(&["catalog", "resolve", "name", "Acme Ltd"]).await,
        "M1\n"
    );
    assert_eq!(node.ok(&["catalog", "resolve", "name", "Nobody"]).await, "");
    assert_eq!(
        node.ok(&[
            "catalog",
            "query",
            "--alias",
            "name",
            "Acme Ltd",
            "plan=gold"
        ])
        .await,
        "c2 plan=gold region=eu west\n"
    );
    assert_eq!(
        node.ok(&["catalog", "query", "--alias", "name", "Nobody"])
            .await,
        ""
    );
    assert_eq!(
        node.ok(&["catalog", "unalias", "name", "Acme Ltd"]).await,
        "1\n"
    );

    assert_eq!(node.ok(&["catalog", "delete", "M1", "c1"]).await, "1\n");
    assert_eq!(node.ok(&["catalog", "delete", "M1", "c1"]).await, "0\n");
    assert_eq!(found(&node, "M1").await, 1);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_switches_and_errors() {
    let node = start().await;
    node.ok(&["catalog", "put", "W1", "c1", "k=v"]).await;
    assert_eq!(
        node.ok(&["catalog", "warm", "W1", "W2"]).await,
        "loaded 1 absent 1\n"
    );
    assert_eq!(node.ok(&["catalog", "shed", "on"]).await, "OK\n");
    assert_eq!(
        node.ok(&["catalog", "query", "W1"]).await,
        "c1 k=v\n",
        "a cache hit answers while shed"
    );
    assert_eq!(node.ok(&["catalog", "shed", "auto"]).await, "OK\n");
    assert_eq!(node.ok(&["catalog", "shed", "off"]).await, "OK\n");
    assert_eq!(
        node.ok(&["catalog", "rebuild"]).await,
        "rebuilding on 2 shards\n"
    );

    let out = node.rush(&["catalog", "shed", "sometimes"]).await;
    assert_eq!(out.code, 64, "a usage error: {}", out.stderr);
    let out = node.rush(&["catalog", "put", "", "c1", "k=v"]).await;
    assert_eq!(Some(out.code), Some(1));
    assert!(out.stderr.contains("BAD_REQUEST"));
    // Malformed arguments are usage errors (64), refused before anything is sent.
    let out = node.rush(&["catalog", "put", "W1", "c1", "novalue"]).await;
    assert_eq!(out.code, 64, "{}", out.stderr);
    assert!(out.stderr.contains("not key=value"), "{}", out.stderr);
    let out = node
        .rush(&["catalog", "put", "W1", "c1", "--valid-from", "tomorrow"])
        .await;
    assert_eq!(out.code, 64, "{}", out.stderr);
    assert!(out.stderr.contains("is not a time"), "{}", out.stderr);
    let out = node.rush(&["catalog", "query", "--alias", "name"]).await;
    assert_eq!(out.code, 64, "{}", out.stderr);
    assert!(out.stderr.contains("KIND ALIAS"), "{}", out.stderr);
    let out = node.rush(&["catalog", "query", "W1", "plan"]).await;
    assert_eq!(out.code, 64, "{}", out.stderr);
    assert_eq!(
        node.ok(&["catalog", "query", "W1"]).await,
        "c1 k=v\n",
        "nothing changed"
    );
    node.stop().await;
}
