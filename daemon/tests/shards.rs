//! Shard-per-core serving: every shard serves its own connections, a
//! request for another shard's slot is forwarded inside the node, and a
//! shard-aware client (SHARDS, SHARD_BIND) sends each request to its owner
//! so nothing is forwarded.

mod common;

use common::TestNode;
use rush_client::protocol::cmd::{Get, Hello, Set, ShardBind, Shards};
use rush_client::protocol::{key_slot, ErrorCode};
use rush_client::{Client, ClientOptions, Connection};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

/// A key whose slot is on shard `shard` of a 2-shard node.
fn key_on(shard: usize, i: u32) -> String {
    (0u32..)
        .map(|n| format!("k{i}-{n}"))
        .find(|k| rush_daemon::shard::route::shard_of_slot(key_slot(k.as_bytes()), 2) == shard)
        .unwrap()
}

async fn raw(node: &TestNode) -> Connection {
    let c = Connection::connect(&node.addr().to_string(), T)
        .await
        .unwrap();
    c.call(
        &Hello {
            version: 1,
            token: None,
            client: "test".into(),
        },
        T,
    )
    .await
    .unwrap();
    c
}

async fn forwarded(node: &TestNode) -> u64 {
    let body = node.metrics().await;
    body.lines()
        .find_map(|l| l.strip_prefix("rush_shard_forwarded_total "))
        .map(|v| v.trim().parse::<f64>().unwrap() as u64)
        .unwrap_or_else(|| panic!("no rush_shard_forwarded_total in {body}"))
}

#[tokio::test]
async fn the_layout_binding_and_forwarding() {
    let node = TestNode::start().await;
    let c = raw(&node).await;
    let layout = c.call(&Shards {}, T).await.unwrap();
    assert_eq!(layout.ranges.len(), 2);
    assert_eq!((layout.ranges[0].start, layout.ranges[0].end), (0, 8191));
    assert_eq!(
        (layout.ranges[1].start, layout.ranges[1].end),
        (8192, 16383)
    );

    // Bound to shard 1, the connection still reaches both shards' keys: one
    // runs where it is read, the other is forwarded and answered back.
    let bound = c.call(&ShardBind { shard: 1 }, T).await.unwrap();
    assert_eq!(
        (bound.shard, bound.shards, bound.first_slot, bound.last_slot),
        (1, 2, 8192, 16383)
    );
    let before = forwarded(&node).await;
    let (mine, theirs) = (key_on(1, 0), key_on(0, 0));
    for k in [&mine, &theirs] {
        assert!(c.call(&Set::new(k.clone(), "v"), T).await.unwrap());
        assert_eq!(
            c.call(
                &Get {
                    key: k.clone().into()
                },
                T
            )
            .await
            .unwrap()
            .as_deref(),
            Some(&b"v"[..])
        );
    }
    assert_eq!(
        forwarded(&node).await - before,
        2,
        "only the other shard's SET and GET were forwarded"
    );
    // Binding again, to where it is, answers the same way.
    assert_eq!(c.call(&ShardBind { shard: 1 }, T).await.unwrap().shard, 1);
    // A shard the node doesn't run.
    let e = c.call(&ShardBind { shard: 7 }, T).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BadRequest), "{e}");
    // ...changed nothing: the connection is still served, by shard 1.
    let before = forwarded(&node).await;
    assert!(c.call(&Set::new(key_on(1, 99), "v"), T).await.unwrap());
    assert_eq!(forwarded(&node).await, before, "still bound to shard 1");
    node.stop().await;
}

#[tokio::test]
async fn bind_with_requests_in_flight_is_a_conflict() {
    let node = TestNode::start().await;
    let c = raw(&node).await;
    // Many requests pipelined with the bind: some are still unanswered when
    // it arrives (or follow it in the same read).
    let mut calls = Vec::new();
    for i in 0..200 {
        let c = c.clone();
        calls.push(tokio::spawn(async move {
            c.call(&Set::new(key_on(0, i), "v"), T).await.map(|_| ())
        }));
    }
    let bind = {
        let c = c.clone();
        tokio::spawn(async move { c.call(&ShardBind { shard: 1 }, T).await })
    };
    for call in calls {
        call.await.unwrap().unwrap();
    }
    match bind.await.unwrap() {
        Ok(b) => assert_eq!(b.shard, 1),
        Err(e) => assert_eq!(e.code(), Some(ErrorCode::Conflict), "{e}"),
    }
    // Either way the connection works.
    assert!(c.call(&Set::new("after", "v"), T).await.unwrap());
    node.stop().await;
}

#[tokio::test]
async fn a_shard_aware_client_forwards_nothing_and_a_plain_one_still_works() {
    let node = TestNode::start().await;
    let addr = node.addr().to_string();
    let aware = Client::connect(&addr).await.unwrap();
    let plain = Client::connect_with(
        &addr,
        ClientOptions {
            per_shard: false,
            ..ClientOptions::default()
        },
    )
    .await
    .unwrap();
    let keys: Vec<String> = (0..200).map(|i| format!("user:{i}")).collect();
    let before = forwarded(&node).await;
    for k in &keys {
        aware.set(k.clone(), "a").await.unwrap();
        assert_eq!(
            aware.get(k.clone()).await.unwrap().as_deref(),
            Some(&b"a"[..])
        );
    }
    assert_eq!(
        forwarded(&node).await,
        before,
        "every request went to its shard"
    );
    // One connection per node: about half the keys are the other shard's.
    for k in &keys {
        assert_eq!(
            plain.get(k.clone()).await.unwrap().as_deref(),
            Some(&b"a"[..])
        );
    }
    let hops = forwarded(&node).await - before;
    assert!((40..=160).contains(&hops), "{hops} of 200 forwarded");
    node.stop().await;
}
