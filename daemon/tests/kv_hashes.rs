//! Hashes stored field by field, through a real daemon and client: what is
//! on disk after each command, the limits, a hash's whole life (deleted,
//! overwritten by a string, expired — its fields never show through a new
//! hash on the key, and compaction drops them), and hashes an older rushd
//! wrote as one value.

mod common;

use bytes::Bytes;
use common::TestNode;
use rush_client::protocol::cmd::{Cond, HGetAll, HLen, TtlReply};
use rush_client::protocol::{key_slot, ErrorCode, Reply};
use rush_daemon::storage::{keys, value, WriteBatch, HASH_FIELD_GRACE_MS};
use std::collections::BTreeMap;
use std::time::Duration;

/// Every hash-field entry the node's storage holds, live or not (after
/// every committed write is written back to RocksDB).
async fn raw_fields(node: &TestNode) -> usize {
    node.running().write_back().await;
    let storage = node.running().storage();
    let mut n = 0;
    for shard in 0..storage.shards() {
        storage
            .scan(shard, &[], &[0xff, 0xff, 0xff], |k, _| {
                n += usize::from(keys::split(k).unwrap().1 == keys::ks::HASH_FIELD);
                true
            })
            .unwrap();
    }
    n
}

/// The raw value under a generic key's storage key in RocksDB.
async fn raw_head(node: &TestNode, key: &str) -> Option<Vec<u8>> {
    node.running().write_back().await;
    let storage = node.running().storage();
    let slot = key_slot(key.as_bytes());
    let shard = rush_daemon::shard::route::shard_of_slot(slot, storage.shards());
    storage
        .get(shard, &keys::kv(slot, key.as_bytes()))
        .unwrap()
        .map(|v| v.to_vec())
}

fn fields(n: usize, value: &str) -> Vec<(String, String)> {
    (0..n)
        .map(|i| (format!("f{i:05}"), format!("{value}{i}")))
        .collect()
}

#[tokio::test]
async fn each_field_is_its_own_value_and_the_header_counts_them() {
    let node = TestNode::start().await;
    let c = &node.client;
    assert_eq!(c.hlen("h").await.unwrap(), 0);
    // 5,000 fields in five HSETs, then one more field: each HSET writes the
    // fields it names and the header.
    for chunk in fields(5_000, "v").chunks(1_000) {
        assert_eq!(c.hset("h", chunk.to_vec()).await.unwrap(), 1_000);
    }
    assert_eq!(raw_fields(&node).await, 5_000);
    assert_eq!(c.hset("h", [("extra", "x")]).await.unwrap(), 1);
    assert_eq!(c.hset("h", [("extra", "y")]).await.unwrap(), 0, "replaced");
    assert_eq!(raw_fields(&node).await, 5_001);
    let head = raw_head(&node, "h").await.expect("a header");
    assert_eq!(head[0], keys::kind::HASH_HEAD);
    assert!(
        head.len() < 64,
        "the header holds no field: {} bytes",
        head.len()
    );
    assert_eq!(c.hlen("h").await.unwrap(), 5_001);
    assert_eq!(c.hget("h", "f04999").await.unwrap().unwrap(), "v4999");
    assert_eq!(c.hget("h", "extra").await.unwrap().unwrap(), "y");
    let all = c.hgetall("h").await.unwrap();
    assert_eq!(all.len(), 5_001);
    assert_eq!(all[0], (Bytes::from("extra"), Bytes::from("y")));
    assert_eq!(all[1], (Bytes::from("f00000"), Bytes::from("v0")));
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "in field order");

    assert_eq!(c.hdel("h", ["f00000", "nope", "f00001"]).await.unwrap(), 2);
    assert_eq!(c.hlen("h").await.unwrap(), 4_999);
    assert_eq!(raw_fields(&node).await, 4_999, "HDEL deletes the fields");
    assert_eq!(c.hincr_by("h", "n", 5).await.unwrap(), 5);
    assert_eq!(c.hincr_by("h", "n", -7).await.unwrap(), -2);
    assert_eq!(
        c.hincr_by("h", "extra", 1).await.unwrap_err().code(),
        Some(ErrorCode::WrongType)
    );
    assert_eq!(c.hlen("h").await.unwrap(), 5_000);

    // EXPIRE and TTL are the header's; HSET keeps the TTL.
    assert!(c.expire("h", Duration::from_secs(60)).await.unwrap());
    c.hset("h", [("late", "1")]).await.unwrap();
    assert!(matches!(
        c.ttl("h").await.unwrap(),
        TtlReply::Remaining(ms) if ms <= 60_000 && ms > 50_000
    ));
    assert_eq!(raw_fields(&node).await, 5_001, "EXPIRE rewrote no field");
    node.stop().await;
}

#[tokio::test]
async fn a_hash_has_limits_and_a_refused_write_changes_nothing() {
    let node = TestNode::start().await;
    let c = &node.client;
    let max = rush_client::protocol::limits::MAX_HASH_FIELDS;
    for chunk in fields(max, "").chunks(1_000) {
        c.hset("full", chunk.to_vec()).await.unwrap();
    }
    assert_eq!(c.hlen("full").await.unwrap(), max as u64);
    // One more field is refused, even beside a replaced one; nothing of the
    // request is written.
    let e = c
        .hset("full", [("f00000", "changed"), ("one-too-many", "x")])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TooLarge), "{e}");
    assert_eq!(c.hget("full", "f00000").await.unwrap().unwrap(), "0");
    assert_eq!(c.hlen("full").await.unwrap(), max as u64);
    assert_eq!(raw_fields(&node).await, max);
    // Replacing fields of a full hash is fine.
    assert_eq!(c.hset("full", [("f00001", "new")]).await.unwrap(), 0);

    // 8 MiB of field names and values per hash.
    let big = "x".repeat(1_000_000);
    for i in 0..8 {
        c.hset("fat", [(format!("b{i}"), big.clone())])
            .await
            .unwrap();
    }
    let e = c.hset("fat", [("b8", big.clone())]).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TooLarge), "{e}");
    assert!(e.to_string().contains("bytes"), "{e}");
    assert_eq!(c.hlen("fat").await.unwrap(), 8);
    // A value replaced by one of the same size, or a smaller one, fits.
    c.hset("fat", [("b0", big.clone())]).await.unwrap();
    c.hset("fat", [("b1", "small")]).await.unwrap();
    c.hset("fat", [("b8", "x".repeat(900_000))]).await.unwrap();
    node.stop().await;
}

#[tokio::test]
async fn a_new_hash_never_shows_an_old_ones_fields_and_compaction_drops_them() {
    let node = TestNode::start().await;
    let c = &node.client;
    let storage = node.running().storage().clone();

    // Deleted: DEL writes only the header.
    c.hset("del", fields(50, "old")).await.unwrap();
    assert!(c.del("del").await.unwrap());
    assert_eq!(c.hlen("del").await.unwrap(), 0);
    assert!(c.hgetall("del").await.unwrap().is_empty());
    assert_eq!(c.hget("del", "f00001").await.unwrap(), None);
    c.hset("del", [("fresh", "1")]).await.unwrap();

    // Overwritten by a string (SET reads nothing), then made a hash again.
    c.hset("set", fields(50, "old")).await.unwrap();
    c.set("set", "a string").await.unwrap();
    assert_eq!(
        c.hget("set", "f00001").await.unwrap_err().code(),
        Some(ErrorCode::WrongType)
    );
    assert!(c.del("set").await.unwrap());
    c.hset("set", [("fresh", "1")]).await.unwrap();

    // Expired, then made a hash again.
    c.hset("exp", fields(50, "old")).await.unwrap();
    c.expire("exp", Duration::from_secs(10)).await.unwrap();
    // Expired and left alone.
    c.hset("gone", fields(50, "old")).await.unwrap();
    c.expire("gone", Duration::from_secs(10)).await.unwrap();
    // A live one with a TTL far off.
    c.hset("kept", fields(50, "kept")).await.unwrap();
    c.expire("kept", Duration::from_secs(3_600)).await.unwrap();
    c.clock_advance(Duration::from_secs(11)).await.unwrap();
    assert_eq!(c.hlen("exp").await.unwrap(), 0);
    assert_eq!(c.hget("gone", "f00001").await.unwrap(), None);
    c.hset("exp", [("fresh", "1")]).await.unwrap();
    assert_eq!(c.ttl("exp").await.unwrap(), TtlReply::Persistent);

    for key in ["del", "set", "exp"] {
        let all = c.hgetall(key).await.unwrap();
        assert_eq!(all, vec![(Bytes::from("fresh"), Bytes::from("1"))], "{key}");
        assert_eq!(c.hlen(key).await.unwrap(), 1, "{key}");
    }
    // The dead fields are still on disk until compaction drops them.
    assert_eq!(raw_fields(&node).await, 4 * 50 + 3 + 50);
    c.compact().await.unwrap();
    assert_eq!(
        raw_fields(&node).await,
        3 + 50 + 50,
        "replaced versions are dropped; an expired hash's fields wait out the grace"
    );
    assert_eq!(c.hget("gone", "f00001").await.unwrap(), None);
    c.clock_advance(Duration::from_millis(HASH_FIELD_GRACE_MS))
        .await
        .unwrap();
    c.compact().await.unwrap();
    assert_eq!(
        raw_fields(&node).await,
        3 + 50,
        "only live hashes' fields remain"
    );
    assert_eq!(c.hlen("kept").await.unwrap(), 50);
    assert_eq!(c.hget("kept", "f00049").await.unwrap().unwrap(), "kept49");
    for key in ["del", "set", "exp"] {
        assert_eq!(c.hget(key, "fresh").await.unwrap().unwrap(), "1");
    }
    // The survivors outlive a restart, and a second compaction keeps them.
    let mut node = node;
    drop(storage);
    node.restart().await;
    let c = &node.client;
    c.compact().await.unwrap();
    assert_eq!(raw_fields(&node).await, 3 + 50);
    assert_eq!(c.hgetall("kept").await.unwrap().len(), 50);
    node.stop().await;
}

#[tokio::test]
async fn batches_see_their_own_field_writes_and_fail_whole() {
    let node = TestNode::start().await;
    let c = &node.client;
    let replies = c
        .batch()
        .hset("{b}:h", "a", "1")
        .hset("{b}:h", "b", "2")
        .op(HLen {
            key: Bytes::from("{b}:h"),
        })
        .op(HGetAll {
            key: Bytes::from("{b}:h"),
        })
        .del("{b}:h")
        .hset("{b}:h", "c", "3")
        .op(HGetAll {
            key: Bytes::from("{b}:h"),
        })
        .exec()
        .await
        .unwrap();
    assert_eq!(replies[2], Reply::HLen(2));
    match &replies[3] {
        Reply::HGetAll(r) => assert_eq!(r.fields.len(), 2),
        other => panic!("{other:?}"),
    }
    match &replies[6] {
        Reply::HGetAll(r) => {
            assert_eq!(r.fields, vec![(Bytes::from("c"), Bytes::from("3"))])
        }
        other => panic!("{other:?}"),
    }
    // A failed condition after field writes writes none of them.
    let e = c
        .batch()
        .hset("{b}:h", "d", "4")
        .hincr_by("{b}:h", "n", 1)
        .check("{b}:h", Some("c"), Cond::Eq(Bytes::from("nope")))
        .exec()
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::ConditionFailed));
    assert_eq!(c.hlen("{b}:h").await.unwrap(), 1);
    assert_eq!(c.hget("{b}:h", "d").await.unwrap(), None);
    node.stop().await;
}

#[tokio::test]
async fn a_hash_an_older_rushd_wrote_as_one_value_is_read_and_converted_on_write() {
    let mut node = TestNode::start().await;
    let storage = node.running().storage().clone();
    let old: value::Hash = (0..20)
        .map(|i| {
            (
                format!("f{i:02}").into_bytes(),
                format!("v{i}").into_bytes(),
            )
        })
        .collect::<BTreeMap<_, _>>();
    let mut batch = WriteBatch::default();
    for key in ["legacy", "legacy-del", "legacy-ttl"] {
        let slot = key_slot(key.as_bytes());
        let shard = rush_daemon::shard::route::shard_of_slot(slot, storage.shards());
        batch.put_cf(
            storage.cf(shard),
            keys::kv(slot, key.as_bytes()),
            value::encode(keys::kind::HASH, 0, &value::encode_hash(&old)),
        );
    }
    storage.write(batch, true).unwrap();
    drop(storage);
    node.restart().await;
    let c = &node.client;

    // Read as it is.
    assert_eq!(c.hlen("legacy").await.unwrap(), 20);
    assert_eq!(c.hget("legacy", "f07").await.unwrap().unwrap(), "v7");
    assert_eq!(c.hgetall("legacy").await.unwrap().len(), 20);
    assert!(c
        .check(
            "legacy",
            Some(Bytes::from("f03")),
            Cond::Eq(Bytes::from("v3"))
        )
        .await
        .unwrap());
    assert_eq!(raw_fields(&node).await, 0);

    // The first write stores it field by field.
    assert_eq!(c.hset("legacy", [("new", "n")]).await.unwrap(), 1);
    assert_eq!(raw_fields(&node).await, 21);
    assert_eq!(
        raw_head(&node, "legacy").await.unwrap()[0],
        keys::kind::HASH_HEAD
    );
    let all = c.hgetall("legacy").await.unwrap();
    assert_eq!(all.len(), 21);
    assert_eq!(c.hget("legacy", "f19").await.unwrap().unwrap(), "v19");
    // HDEL of a field it lacks converts it too; DEL and EXPIRE work on it.
    assert_eq!(c.hdel("legacy-del", ["absent"]).await.unwrap(), 0);
    assert_eq!(c.hlen("legacy-del").await.unwrap(), 20);
    assert!(c.del("legacy-del").await.unwrap());
    assert!(c
        .expire("legacy-ttl", Duration::from_secs(5))
        .await
        .unwrap());
    assert_eq!(c.hlen("legacy-ttl").await.unwrap(), 20);
    c.clock_advance(Duration::from_secs(6)).await.unwrap();
    assert_eq!(c.hlen("legacy-ttl").await.unwrap(), 0);
    c.clock_advance(Duration::from_millis(HASH_FIELD_GRACE_MS))
        .await
        .unwrap();
    c.compact().await.unwrap();
    assert_eq!(
        raw_fields(&node).await,
        21,
        "the dead ones' fields are dropped"
    );
    node.stop().await;
}

/// A hash's fields read whole while some of its writes are still pending
/// (in the shard log, not yet in RocksDB): HGETALL merges them over what
/// RocksDB holds — new fields, replaced values, and deleted fields hidden
/// even though RocksDB still has them — before and after they land.
#[tokio::test]
async fn hgetall_sees_pending_writes_over_what_rocksdb_holds() {
    let node = TestNode::start().await;
    let c = &node.client;
    let mut model: BTreeMap<String, String> = BTreeMap::new();
    let first = fields(60, "old");
    c.hset("p", first.clone()).await.unwrap();
    model.extend(first);
    // RocksDB holds these sixty; what follows is pending.
    node.running().write_back().await;
    let gone: Vec<String> = (0..20).map(|i| format!("f{i:05}")).collect();
    assert_eq!(c.hdel("p", gone.clone()).await.unwrap(), 20);
    for f in &gone {
        model.remove(f);
    }
    let newer: Vec<(String, String)> = (20..40)
        .map(|i| (format!("f{i:05}"), format!("new{i}")))
        .chain((100..110).map(|i| (format!("g{i}"), format!("added{i}"))))
        .collect();
    c.hset("p", newer.clone()).await.unwrap();
    model.extend(newer);
    let read = |all: Vec<(Bytes, Bytes)>| -> BTreeMap<String, String> {
        all.into_iter()
            .map(|(f, v)| {
                (
                    String::from_utf8(f.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                )
            })
            .collect()
    };
    assert_eq!(read(c.hgetall("p").await.unwrap()), model, "while pending");
    assert_eq!(c.hlen("p").await.unwrap(), model.len() as u64);
    node.running().write_back().await;
    assert_eq!(
        read(c.hgetall("p").await.unwrap()),
        model,
        "once written back"
    );
    node.stop().await;
}
