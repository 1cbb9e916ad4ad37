//! Generic key operations through a real daemon and client.

mod common;

use bytes::Bytes;
use common::TestNode;
use rush_client::protocol::cmd::{Cond, SetCond, TtlReply};
use rush_client::protocol::{ErrorCode, ErrorDetail, Reply};
use std::time::Duration;

const DAY: Duration = Duration::from_secs(86_400);

#[tokio::test]
async fn strings_and_counters() {
    let node = TestNode::start().await;
    let c = &node.client;
    c.ping().await.unwrap();
    assert_eq!(c.get("missing").await.unwrap(), None);
    assert!(c.set("k", "v1").await.unwrap());
    assert_eq!(c.get("k").await.unwrap().as_deref(), Some(&b"v1"[..]));
    assert!(c.exists("k").await.unwrap());

    // NX only when absent, XX only when present.
    assert!(!c
        .set_with("k", "v2", Duration::ZERO, SetCond::IfAbsent)
        .await
        .unwrap());
    assert!(c
        .set_with("k", "v3", Duration::ZERO, SetCond::IfPresent)
        .await
        .unwrap());
    assert!(!c
        .set_with("nope", "x", Duration::ZERO, SetCond::IfPresent)
        .await
        .unwrap());
    assert!(!c.exists("nope").await.unwrap());
    assert_eq!(c.get("k").await.unwrap().as_deref(), Some(&b"v3"[..]));

    assert!(c.del("k").await.unwrap());
    assert!(!c.del("k").await.unwrap());
    assert!(!c.exists("k").await.unwrap());

    assert_eq!(c.incr_by("n", 5).await.unwrap(), 5);
    assert_eq!(c.incr_by("n", -7).await.unwrap(), -2);
    assert_eq!(c.get("n").await.unwrap().as_deref(), Some(&b"-2"[..]));

    c.set("word", "abc").await.unwrap();
    let e = c.incr_by("word", 1).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::WrongType));
    c.set("big", i64::MAX.to_string()).await.unwrap();
    let e = c.incr_by("big", 1).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BadRequest), "{e}");
    assert_eq!(
        c.get("big").await.unwrap().unwrap(),
        Bytes::from(i64::MAX.to_string())
    );
    node.stop().await;
}

#[tokio::test]
async fn hashes_and_wrong_types() {
    let node = TestNode::start().await;
    let c = &node.client;
    assert_eq!(c.hset("h", [("a", "1"), ("b", "2")]).await.unwrap(), 2);
    assert_eq!(c.hset("h", [("b", "3"), ("c", "4")]).await.unwrap(), 1);
    assert_eq!(c.hget("h", "b").await.unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(c.hget("h", "zz").await.unwrap(), None);
    assert_eq!(c.hincr_by("h", "a", 10).await.unwrap(), 11);
    assert_eq!(c.hincr_by("h", "new", -1).await.unwrap(), -1);
    let all = c.hgetall("h").await.unwrap();
    let names: Vec<&[u8]> = all.iter().map(|(f, _)| f.as_ref()).collect();
    assert_eq!(names, vec![&b"a"[..], b"b", b"c", b"new"]);
    assert_eq!(c.hdel("h", ["a", "zz"]).await.unwrap(), 1);
    assert_eq!(c.hgetall("h").await.unwrap().len(), 3);
    assert_eq!(c.hdel("h", ["b", "c", "new"]).await.unwrap(), 3);
    assert!(!c.exists("h").await.unwrap(), "an emptied hash is removed");

    c.hset("h2", [("f", "x")]).await.unwrap();
    assert_eq!(
        c.get("h2").await.unwrap_err().code(),
        Some(ErrorCode::WrongType)
    );
    assert_eq!(
        c.incr_by("h2", 1).await.unwrap_err().code(),
        Some(ErrorCode::WrongType)
    );
    assert_eq!(
        c.hincr_by("h2", "f", 1).await.unwrap_err().code(),
        Some(ErrorCode::WrongType)
    );
    c.set("s", "v").await.unwrap();
    assert_eq!(
        c.hget("s", "f").await.unwrap_err().code(),
        Some(ErrorCode::WrongType)
    );
    assert_eq!(
        c.hset("s", [("f", "v")]).await.unwrap_err().code(),
        Some(ErrorCode::WrongType)
    );
    // SET replaces any type, as in Redis.
    assert!(c.set("h2", "now a string").await.unwrap());
    assert_eq!(
        c.get("h2").await.unwrap().as_deref(),
        Some(&b"now a string"[..])
    );
    node.stop().await;
}

#[tokio::test]
async fn ttl_expiry_follows_the_clock() {
    let node = TestNode::start().await;
    let c = &node.client;
    c.set_with("short", "v", Duration::from_secs(60), SetCond::Always)
        .await
        .unwrap();
    c.set("forever", "v").await.unwrap();
    c.hset("hash", [("f", "1")]).await.unwrap();
    assert!(c.expire("hash", DAY).await.unwrap());
    assert!(!c.expire("missing", DAY).await.unwrap());

    match c.ttl("short").await.unwrap() {
        TtlReply::Remaining(ms) => assert!(ms > 55_000 && ms <= 60_000, "{ms}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.ttl("forever").await.unwrap(), TtlReply::Persistent);
    assert_eq!(c.ttl("missing").await.unwrap(), TtlReply::Missing);

    // INCRBY keeps the TTL.
    c.set_with("counter", "1", Duration::from_secs(60), SetCond::Always)
        .await
        .unwrap();
    c.incr_by("counter", 1).await.unwrap();
    assert!(matches!(
        c.ttl("counter").await.unwrap(),
        TtlReply::Remaining(_)
    ));

    c.clock_advance(Duration::from_secs(61)).await.unwrap();
    assert_eq!(c.get("short").await.unwrap(), None);
    assert!(!c.exists("short").await.unwrap());
    assert_eq!(c.ttl("short").await.unwrap(), TtlReply::Missing);
    assert_eq!(c.get("counter").await.unwrap(), None);
    assert_eq!(c.get("forever").await.unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(
        c.hget("hash", "f").await.unwrap().as_deref(),
        Some(&b"1"[..])
    );

    // PERSIST, then a day later the hash is still there.
    assert!(c.expire("hash", Duration::ZERO).await.unwrap());
    c.clock_advance(DAY * 2).await.unwrap();
    assert_eq!(
        c.hget("hash", "f").await.unwrap().as_deref(),
        Some(&b"1"[..])
    );
    // An expired key can be set again (NX sees it as absent).
    assert!(c
        .set_with("short", "again", Duration::ZERO, SetCond::IfAbsent)
        .await
        .unwrap());
    node.stop().await;
}

#[tokio::test]
async fn compaction_removes_expired_data() {
    let node = TestNode::start().await;
    let c = &node.client;
    for i in 0..200 {
        c.set_with(
            format!("gone:{i}"),
            "x".repeat(100),
            Duration::from_secs(3600),
            SetCond::Always,
        )
        .await
        .unwrap();
        c.set(format!("kept:{i}"), "y").await.unwrap();
    }
    assert_eq!(node.stored_keys().await, 400);
    c.compact().await.unwrap();
    assert_eq!(node.stored_keys().await, 400, "nothing has expired yet");
    c.clock_advance(Duration::from_secs(3601)).await.unwrap();
    assert_eq!(
        node.stored_keys().await,
        400,
        "expired values linger until compaction"
    );
    c.compact().await.unwrap();
    assert_eq!(
        node.stored_keys().await,
        200,
        "compaction dropped exactly the expired values"
    );
    for i in 0..200 {
        assert!(c.exists(format!("kept:{i}")).await.unwrap());
    }
    node.stop().await;
}

#[tokio::test]
async fn batch_is_atomic() {
    let node = TestNode::start().await;
    let c = &node.client;
    // The seed's five commands as one batch: hset, hset, expire, set, expire.
    let replies = common::seed_batch(c, "{u1}:items", "{u1}:order:o1").await;
    assert_eq!(replies, common::SEED_BATCH_REPLIES);

    // Later operations see earlier ones.
    let replies = c
        .batch()
        .incr_by("{u2}:n", 2)
        .incr_by("{u2}:n", 3)
        .get("{u2}:n")
        .exec()
        .await
        .unwrap();
    assert_eq!(replies[2], Reply::Get(Some(Bytes::from_static(b"5"))));

    // A failing condition writes nothing — not even the writes before it.
    let err = c
        .batch()
        .incr_by("{u2}:n", 100)
        .hset("{u2}:h", "f", "v")
        .check("{u2}:n", None, Cond::Lt(50))
        .set("{u2}:after", "x", Duration::ZERO)
        .exec()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::ConditionFailed));
    match err {
        rush_client::ClientError::Server(e) => {
            assert_eq!(e.detail, ErrorDetail::BatchIndex { index: 2 })
        }
        other => panic!("{other}"),
    }
    assert_eq!(c.get("{u2}:n").await.unwrap().as_deref(), Some(&b"5"[..]));
    assert!(!c.exists("{u2}:h").await.unwrap());
    assert!(!c.exists("{u2}:after").await.unwrap());

    // A failing operation aborts the same way.
    c.set("{u2}:word", "abc").await.unwrap();
    let err = c
        .batch()
        .set("{u2}:x", "1", Duration::ZERO)
        .incr_by("{u2}:word", 1)
        .exec()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::WrongType));
    assert!(!c.exists("{u2}:x").await.unwrap());

    // Check-then-write: "only if HGET k f < 1", twice — the second is refused.
    for attempt in 0..2 {
        let r = c
            .batch()
            .check("{u3}:daily", Some("sku-9"), Cond::Lt(1))
            .hincr_by("{u3}:daily", "sku-9", 1)
            .exec()
            .await;
        assert_eq!(r.is_ok(), attempt == 0, "{r:?}");
    }
    assert_eq!(
        c.hget("{u3}:daily", "sku-9").await.unwrap().as_deref(),
        Some(&b"1"[..])
    );

    // Standalone CHECK answers a bool.
    assert!(c
        .check(
            "{u3}:daily",
            Some(Bytes::from("sku-9")),
            Cond::Eq(Bytes::from("1"))
        )
        .await
        .unwrap());
    assert!(!c
        .check("{u3}:daily", Some(Bytes::from("sku-9")), Cond::Gt(1))
        .await
        .unwrap());
    assert!(c.check("nothing", None, Cond::Missing).await.unwrap());
    node.stop().await;
}

/// CHECK's TTL conditions through the binary client: a key without an
/// expiry expires never; a missing key satisfies none; a condition that
/// names a field is refused and writes nothing; a failed one aborts its
/// batch with the key's expiry in the message.
#[tokio::test]
async fn ttl_conditions_gate_a_batch() {
    let node = TestNode::start().await;
    let c = &node.client;
    c.set("{t}:p", "v").await.unwrap();
    c.set_with("{t}:v", "v", Duration::from_secs(100), SetCond::Always)
        .await
        .unwrap();
    let holds =
        |key: &'static str, cond: Cond| async move { c.check(key, None, cond).await.unwrap() };
    assert!(holds("{t}:p", Cond::NoTtl).await && !holds("{t}:p", Cond::HasTtl).await);
    assert!(holds("{t}:v", Cond::HasTtl).await && !holds("{t}:v", Cond::NoTtl).await);
    // 100 s left: below 200 s, above 50 s; no expiry is above everything.
    assert!(holds("{t}:v", Cond::TtlBelow(200_000)).await);
    assert!(!holds("{t}:v", Cond::TtlBelow(50_000)).await);
    assert!(holds("{t}:v", Cond::TtlAbove(50_000)).await);
    assert!(holds("{t}:p", Cond::TtlAbove(i64::MAX)).await);
    assert!(!holds("{t}:p", Cond::TtlBelow(i64::MAX)).await);
    for cond in [
        Cond::NoTtl,
        Cond::HasTtl,
        Cond::TtlBelow(1),
        Cond::TtlAbove(-1),
    ] {
        assert!(!holds("{t}:missing", cond).await);
    }

    // A field with a TTL condition: BAD_REQUEST, and the batch wrote nothing.
    let err = c
        .batch()
        .set("{t}:w", "x", Duration::ZERO)
        .check("{t}:v", Some("f"), Cond::HasTtl)
        .exec()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::BadRequest), "{err}");
    assert!(!c.exists("{t}:w").await.unwrap());

    // GT's batch: lengthen only. 50 s is no later than 100 s: refused, the
    // TTL stays; 300 s is.
    let err = c
        .batch()
        .check("{t}:v", None, Cond::TtlBelow(50_000))
        .expire("{t}:v", Duration::from_secs(50))
        .exec()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::ConditionFailed));
    assert!(err.to_string().contains("the key expires in"), "{err}");
    // (The daemon's clock runs on in real time between the calls.)
    let left = |t| match t {
        TtlReply::Remaining(ms) => ms,
        other => panic!("{other:?}"),
    };
    assert!((90_000..=100_000).contains(&left(c.ttl("{t}:v").await.unwrap())));
    c.batch()
        .check("{t}:v", None, Cond::TtlBelow(300_000))
        .expire("{t}:v", Duration::from_secs(300))
        .exec()
        .await
        .unwrap();
    assert!((290_000..=300_000).contains(&left(c.ttl("{t}:v").await.unwrap())));
    node.stop().await;
}

#[tokio::test]
async fn batch_across_slots_is_crossslot() {
    let node = TestNode::start().await;
    let c = &node.client;
    let err = c
        .batch()
        .set("{a}x", "1", Duration::ZERO)
        .set("{b}y", "1", Duration::ZERO)
        .exec()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::CrossSlot), "{err}");
    assert!(!c.exists("{a}x").await.unwrap());
    // Keys that merely share a hashtag are fine.
    c.batch()
        .set("{a}x", "1", Duration::ZERO)
        .set("z{a}z", "1", Duration::ZERO)
        .exec()
        .await
        .unwrap();
    node.stop().await;
}

#[tokio::test]
async fn pipelining_1000_in_flight_on_one_connection() {
    let node = TestNode::start().await;
    let conn = rush_client::Connection::connect(&node.addr().to_string(), Duration::from_secs(5))
        .await
        .unwrap();
    let t = Duration::from_secs(30);
    let sets = (0..1000).map(|i| {
        let conn = conn.clone();
        async move {
            conn.call(
                &rush_client::protocol::cmd::Set::new(format!("p:{i}"), format!("value-{i}")),
                t,
            )
            .await
        }
    });
    for r in futures_join_all(sets).await {
        assert!(r.unwrap());
    }
    // Mixed requests in flight at once; keys spread over both shards, so
    // answers come back out of order and must still be matched by id.
    let gets = (0..1000).map(|i| {
        let conn = conn.clone();
        async move {
            let key = format!("p:{i}");
            (
                i,
                conn.call(&rush_client::protocol::cmd::Get { key: key.into() }, t)
                    .await,
            )
        }
    });
    for (i, r) in futures_join_all(gets).await {
        assert_eq!(r.unwrap().unwrap(), Bytes::from(format!("value-{i}")));
    }
    node.stop().await;
}

/// A thousand INCRs in flight on one connection, over new counters and
/// counters already written, each several times, with a string among them:
/// the shard reads the counters of each read buffer its row cache lacks
/// from storage in one batch, and every counter still ends at the sum of its increments, and
/// the string still answers WRONG_TYPE and keeps its value.
#[tokio::test]
async fn pipelined_incrs_of_new_and_written_counters_all_count() {
    // One shard: every frame is read by the shard that runs it (a
    // forwarded one is not looked ahead at).
    let mut node = TestNode::start_with(|c| c.storage.shards = 1).await;
    for i in 0..50 {
        let n = node.client.incr_by(format!("n:{i}"), 100).await.unwrap();
        assert_eq!(n, 100);
    }
    assert!(node.client.set("n:word", "abc").await.unwrap());
    // An empty row cache: the written counters are read from RocksDB,
    // with the new ones, in the same batches.
    node.restart().await;
    let c = &node.client;
    let conn = rush_client::Connection::connect(&node.addr().to_string(), Duration::from_secs(5))
        .await
        .unwrap();
    let t = Duration::from_secs(30);
    let key_of = |j: usize| {
        if j % 250 == 7 {
            "n:word".to_string()
        } else {
            // Consecutive requests alternate between written and new
            // counters, so a batch holds both.
            format!("n:{}", j * 37 % 200)
        }
    };
    let incrs = (0..1000).map(|j| {
        let conn = conn.clone();
        let key = key_of(j);
        async move {
            let r = conn
                .call(
                    &rush_client::protocol::cmd::IncrBy {
                        key: key.clone().into(),
                        delta: 1,
                    },
                    t,
                )
                .await;
            (key, r)
        }
    });
    let mut words = 0;
    for (key, r) in futures_join_all(incrs).await {
        if key == "n:word" {
            assert_eq!(r.unwrap_err().code(), Some(ErrorCode::WrongType));
            words += 1;
        } else {
            r.unwrap();
        }
    }
    assert_eq!(words, 4);
    assert_eq!(c.get("n:word").await.unwrap().as_deref(), Some(&b"abc"[..]));
    for i in 0..200 {
        let adds = (0..1000).filter(|&j| key_of(j) == format!("n:{i}")).count();
        let want = if i < 50 { 100 + adds } else { adds };
        assert_eq!(
            c.get(format!("n:{i}")).await.unwrap(),
            Some(Bytes::from(want.to_string())),
            "n:{i}"
        );
    }
    node.stop().await;
}

/// A counter's first INCR and a SET NX of a new key read nothing from
/// storage: the shard's filter of the generic keys it holds says the key is
/// new. Keys it holds are read and count on, and after a restart (the
/// filter is built again from storage) too.
#[tokio::test]
async fn new_counters_are_not_read_from_storage() {
    let mut node = TestNode::start_with(|c| c.storage.shards = 1).await;
    for i in 0..100 {
        assert!(node.client.set(format!("old:{i}"), "7").await.unwrap());
    }
    let before = node.storage_reads().await;
    for i in 0..500 {
        assert_eq!(node.client.incr_by(format!("new:{i}"), 1).await.unwrap(), 1);
    }
    for i in 0..100 {
        assert!(node
            .client
            .set_with(format!("nx:{i}"), "x", Duration::ZERO, SetCond::IfAbsent)
            .await
            .unwrap());
    }
    let reads = node.storage_reads().await - before;
    // The filter's false positives (1 %) are read; without it, all 600.
    assert!(reads <= 30, "{reads} storage reads for 600 new keys");
    for i in 0..100 {
        assert_eq!(node.client.incr_by(format!("old:{i}"), 1).await.unwrap(), 8);
        assert!(!node
            .client
            .set_with(format!("nx:{i}"), "y", Duration::ZERO, SetCond::IfAbsent)
            .await
            .unwrap());
    }
    node.restart().await;
    for i in (0..500).step_by(7) {
        assert_eq!(node.client.incr_by(format!("new:{i}"), 1).await.unwrap(), 2);
    }
    for i in 0..100 {
        assert_eq!(node.client.incr_by(format!("old:{i}"), 1).await.unwrap(), 9);
        assert_eq!(
            node.client.get(format!("nx:{i}")).await.unwrap().as_deref(),
            Some(&b"x"[..])
        );
    }
    node.stop().await;
}

/// Run futures concurrently on the current task (they are all in flight at once).
async fn futures_join_all<F: std::future::Future>(
    fs: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let handles: Vec<_> = fs.into_iter().map(Box::pin).collect();
    let mut outs = Vec::with_capacity(handles.len());
    let mut pending: Vec<_> = handles.into_iter().map(Some).collect();
    let mut done: Vec<Option<F::Output>> = (0..pending.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut all = true;
        for (i, slot) in pending.iter_mut().enumerate() {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        done[i] = Some(v);
                        *slot = None;
                    }
                    std::task::Poll::Pending => all = false,
                }
            }
        }
        if all {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    outs.extend(done.into_iter().map(|v| v.expect("completed")));
    outs
}
