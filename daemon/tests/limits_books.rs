//! Purchase limits keep all of a user's counts under a policy in one book:
//! counts written by the layout before books (one per key) are folded into
//! books when a node opens its data, and a book is bounded.

mod common;

use common::TestNode;
use rush_daemon::storage::{keys, value, WriteBatch};
use rush_daemon::Config;
use rush_protocol::cmd::OrderItem;
use rush_protocol::{key_slot, ErrorCode};
use std::path::Path;
use std::time::Duration;

const MINUTE: u64 = 60_000;

fn with_policy(c: &mut Config) {
    c.limits = Config::from_toml(
        r#"
[limits.policies.minute]
window = "fixed:60"
item_max = 1
total_max = 5

[limits.policies.wide]
window = "fixed:60"
item_max = 1
"#,
        Path::new("test.toml"),
    )
    .expect("test config parses")
    .limits;
}

/// A count as the layout before books stored it: `u8 1 | u64 window start |
/// u64 count` behind a header of kind LIMIT_COUNTER, ending at the window's
/// end.
fn old_count(start: u64, count: u64) -> Vec<u8> {
    let mut p = vec![1];
    p.extend_from_slice(&start.to_be_bytes());
    p.extend_from_slice(&count.to_be_bytes());
    value::encode(keys::kind::LIMIT_COUNTER, start + MINUTE, &p)
}

#[tokio::test]
async fn counts_of_the_layout_before_books_are_folded_into_a_book_on_open() {
    let mut node = TestNode::start_with(with_policy).await;
    let c = &node.client;
    // Early in a minute, so everything below lands in one window.
    let t = c.clock_advance(Duration::ZERO).await.unwrap();
    let t = c
        .clock_advance(Duration::from_millis(MINUTE - t % MINUTE + 1_000))
        .await
        .unwrap();
    let window = t - t % MINUTE;

    // What an older rushd left: "u" bought sku-1 and sku-2 (2 in all) this
    // minute; "v" has a count from an earlier minute, which no longer counts.
    let (user, other) = ("u", "v");
    let slot = key_slot(user.as_bytes());
    let storage = node.running().storage().clone();
    let shard = rush_daemon::shard::route::shard_of_slot(slot, storage.shards());
    let mut batch = WriteBatch::default();
    let prefix = keys::limit_counters(slot, user.as_bytes(), "minute");
    for (rule, item, count) in [("item", "sku-1", 1), ("item", "sku-2", 1), ("total", "", 2)] {
        batch.put_cf(
            storage.cf(shard),
            keys::limit_counter(&prefix, rule, item),
            old_count(window, count),
        );
    }
    let other_slot = key_slot(other.as_bytes());
    let other_shard = rush_daemon::shard::route::shard_of_slot(other_slot, storage.shards());
    let other_prefix = keys::limit_counters(other_slot, other.as_bytes(), "minute");
    batch.put_cf(
        storage.cf(other_shard),
        keys::limit_counter(&other_prefix, "total", ""),
        old_count(window - MINUTE, 5),
    );
    storage.write(batch, true).unwrap();
    drop(storage);

    node.restart().await;
    let c = &node.client;
    let storage = node.running().storage().clone();
    let raw = |slot: u16, shard: usize, ks: u8| {
        let (from, to) = keys::keyspace_range(slot, ks);
        storage.count_raw(shard, &from, &to).unwrap()
    };
    assert_eq!(
        raw(slot, shard, keys::ks::LIMIT_COUNTER),
        0,
        "old keys are gone"
    );
    assert_eq!(
        raw(slot, shard, keys::ks::LIMIT_BOOK),
        1,
        "one book for the user"
    );

    // The folded counts count: sku-1 again is over its item limit, and the
    // total goes on from 2.
    let status = c.limit_status("minute", user).await.unwrap();
    let counts: Vec<_> = status
        .allowances
        .iter()
        .map(|a| (a.rule.as_str(), a.item.as_str(), a.count))
        .collect();
    assert_eq!(
        counts,
        [("item", "sku-1", 1), ("item", "sku-2", 1), ("total", "", 2)]
    );
    let e = c
        .limit_acquire("minute", user, "o1", vec![OrderItem::new("sku-1", 1)])
        .await
        .expect_err("sku-1 was bought this minute");
    assert_eq!(e.code(), Some(ErrorCode::Limited), "{e}");
    let r = c
        .limit_acquire("minute", user, "o2", vec![OrderItem::new("sku-3", 1)])
        .await
        .unwrap();
    let total = r.allowances.iter().find(|a| a.rule == "total").unwrap();
    assert_eq!(total.count, 3);

    // A count of an ended window was folded too, and counts nothing.
    let status = c.limit_status("minute", other).await.unwrap();
    assert_eq!(status.allowances.len(), 1);
    assert_eq!(status.allowances[0].count, 0);
    node.stop().await;
}

#[tokio::test]
async fn a_book_is_bounded_and_an_order_past_it_counts_nothing() {
    let node = TestNode::start_with(with_policy).await;
    let c = &node.client;
    let user = "collector";
    // 10,000 distinct items in 100 orders of 100 (an order's most).
    for o in 0..100 {
        let items: Vec<_> = (0..100)
            .map(|i| OrderItem::new(format!("sku-{}", o * 100 + i), 1))
            .collect();
        c.limit_acquire("wide", user, format!("o{o}"), items)
            .await
            .unwrap();
    }
    let one_more = || {
        c.limit_acquire(
            "wide",
            user,
            "one-more",
            vec![OrderItem::new("sku-new", 1), OrderItem::new("sku-newer", 1)],
        )
    };
    let e = one_more().await.expect_err("the book is full");
    assert_eq!(e.code(), Some(ErrorCode::TooLarge), "{e}");
    assert!(e.to_string().contains("10000"), "{e}");
    // Nothing of the refused order was counted, and its id is not used up.
    let status = c.limit_status("wide", user).await.unwrap();
    assert!(status.truncated, "10,000 items, 1,000 listed");
    assert!(status
        .allowances
        .iter()
        .all(|a| !a.item.starts_with("sku-new")));
    let e = c
        .limit_acquire("wide", user, "one-more", vec![OrderItem::new("sku-new", 1)])
        .await
        .expect_err("still full");
    assert_eq!(e.code(), Some(ErrorCode::TooLarge), "{e}");
    // Releasing an order frees its entries; the refused order then fits.
    c.limit_release("wide", user, "o0").await.unwrap();
    let r = one_more().await.unwrap();
    assert!(!r.replayed);
    node.stop().await;
}
