//! Red envelopes through a real daemon and client: exact money, exactly-once
//! grabs, admission control, refunds at expiry as a resumable stream,
//! retention by day, the audit, and bad input.

mod common;

use common::TestNode;
use rush_client::protocol::cmd::{
    envelope_day, envelope_id, envelope_slot, EnvelopeAuditReply, EnvelopeCreate, EnvelopeMode,
    EnvelopeRefundsReply, EnvelopeState, RefundCursor,
};
use rush_client::protocol::ErrorCode;
use rush_client::{Client, ClientError};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

fn create(sender: &str, total: u64, count: u32) -> EnvelopeCreate {
    let mut c = EnvelopeCreate::new(sender.to_string(), total, count);
    c.expires_in_ms = HOUR.as_millis() as u64;
    c
}

/// A new envelope of `total` cents for `count` users from `sender`,
/// expiring in an hour: its id.
async fn envelope(c: &Client, sender: &str, total: u64, count: u32) -> u64 {
    c.envelope_create(create(sender, total, count))
        .await
        .expect("envelope created")
        .id
}

async fn audit_ok(c: &Client) -> EnvelopeAuditReply {
    let a = c.envelope_audit().await.unwrap();
    assert!(a.ok(), "audit found problems: {:?}", a.problems);
    a
}

/// Ends a test: the audit must find the books right, then the node stops
/// cleanly. The audit, for the test's own checks.
async fn audit_and_stop(node: TestNode) -> EnvelopeAuditReply {
    let a = audit_ok(&node.client).await;
    node.stop().await;
    a
}

/// The refund stream from its start: up to 100 refunds.
async fn refunds_from_start(c: &Client) -> EnvelopeRefundsReply {
    c.envelope_refunds(RefundCursor::START, 100).await.unwrap()
}

/// The node's metrics must hold every one of `lines` (a metric and its value).
async fn assert_metrics(node: &TestNode, lines: &[&str]) {
    let body = node.metrics().await;
    for line in lines {
        assert!(body.contains(line), "no {line:?} in {body}");
    }
}

fn code(e: &ClientError) -> Option<ErrorCode> {
    e.code()
}

#[tokio::test]
async fn grabs_split_exactly_once_per_user() {
    let node = TestNode::start().await;
    let c = &node.client;
    let id = envelope(c, "alice", 10_000, 10).await;
    assert_eq!(envelope_slot(id), rush_client::protocol::key_slot(b"alice"));
    assert!((1..=31).contains(&envelope_day(id)));

    let mut amounts = HashMap::new();
    for i in 0..10 {
        let g = c.envelope_grab(id, format!("u{i}")).await.unwrap();
        assert!(!g.repeated && g.amount_cents >= 1);
        amounts.insert(format!("u{i}"), g.amount_cents);
    }
    assert_eq!(amounts.values().sum::<u64>(), 10_000);
    // An 11th user finds it empty; a repeat gets the same amount again.
    let e = c.envelope_grab(id, "late").await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::Empty), "{e}");
    for (user, amount) in &amounts {
        let again = c.envelope_grab(id, user.clone()).await.unwrap();
        assert!(again.repeated);
        assert_eq!(again.amount_cents, *amount);
    }

    // An empty envelope answers from memory: no storage read or write.
    let stats = &node.running().storage().stats;
    let reads = stats.reads.get();
    let writes = stats.writes.get();
    for i in 0..100 {
        let e = c.envelope_grab(id, format!("more-{i}")).await.unwrap_err();
        assert_eq!(code(&e), Some(ErrorCode::Empty));
    }
    assert_eq!(stats.reads.get(), reads);
    assert_eq!(stats.writes.get(), writes);

    let info = c.envelope_info(id).await.unwrap();
    assert_eq!(info.state, EnvelopeState::Empty);
    assert_eq!((info.total_cents, info.remaining_cents), (10_000, 0));
    assert_eq!((info.count, info.grabbed), (10, 10));
    assert_eq!(info.sender, "alice");
    let listed: Vec<String> = info
        .grabs
        .iter()
        .map(|g| String::from_utf8_lossy(&g.user).into_owned())
        .collect();
    assert_eq!(listed, (0..10).map(|i| format!("u{i}")).collect::<Vec<_>>());
    for g in &info.grabs {
        assert_eq!(amounts[&*String::from_utf8_lossy(&g.user)], g.amount_cents);
    }

    // Fixed mode: 1001 cents in 4 shares is 251, 250, 250, 250.
    let mut fixed = create("bob", 1001, 4);
    fixed.mode = EnvelopeMode::Fixed;
    let f = c.envelope_create(fixed).await.unwrap().id;
    let mut got = Vec::new();
    for u in ["a", "b", "c", "d"] {
        got.push(c.envelope_grab(f, u).await.unwrap().amount_cents);
    }
    assert_eq!(got, vec![251, 250, 250, 250]);

    // Books survive a restart: memory is rebuilt from storage.
    let mut node = node;
    node.restart().await;
    let c = &node.client;
    for (user, amount) in &amounts {
        assert_eq!(
            c.envelope_grab(id, user.clone())
                .await
                .unwrap()
                .amount_cents,
            *amount
        );
    }
    let a = audit_and_stop(node).await;
    assert_eq!((a.envelopes, a.grabs, a.open), (2, 14, 0));
}

#[tokio::test]
async fn envelopes_dropped_from_memory_reload_from_storage() {
    let node = TestNode::start_with(|c| c.envelopes.cached_envelopes = 1).await;
    let c = &node.client;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(envelope(c, &format!("s{i}"), 50, 5).await);
    }
    let mut got: HashMap<(u64, &str), u64> = HashMap::new();
    for round in ["a", "b", "c"] {
        for &id in &ids {
            got.insert(
                (id, round),
                c.envelope_grab(id, round).await.unwrap().amount_cents,
            );
            // A timer run evicts down to one cached envelope.
            c.clock_advance(Duration::ZERO).await.unwrap();
        }
    }
    for (&(id, user), &amount) in &got {
        let again = c.envelope_grab(id, user).await.unwrap();
        assert!(again.repeated);
        assert_eq!(again.amount_cents, amount);
        c.clock_advance(Duration::ZERO).await.unwrap();
    }
    for &id in &ids {
        let info = c.envelope_info(id).await.unwrap();
        assert_eq!(info.grabbed, 3);
        let sum: u64 = info.grabs.iter().map(|g| g.amount_cents).sum();
        assert_eq!(sum + info.remaining_cents, 50);
    }
    audit_and_stop(node).await;
}

#[tokio::test]
async fn bad_input_is_refused_and_changes_nothing() {
    let node = TestNode::start_with(|c| {
        c.envelopes.max_count = 1000;
        c.envelopes.max_total_cents = 1_000_000;
    })
    .await;
    let c = &node.client;
    let bad = |total: u64, count: u32| create("s", total, count);
    let cases = vec![
        ("count 0", bad(100, 0)),
        ("total below count", bad(9, 10)),
        ("total 0", bad(0, 1)),
        ("count over the limit", bad(1_000_000, 1001)),
        ("total over the limit", bad(1_000_001, 10)),
        // A negative amount from a signed client arrives as a huge u64.
        ("negative total", bad(-5i64 as u64, 10)),
        ("overflowing total", bad(u64::MAX, 10)),
        ("expiry over the limit", {
            let mut e = bad(100, 1);
            e.expires_in_ms = 8 * DAY.as_millis() as u64;
            e
        }),
    ];
    for (what, req) in cases {
        let e = c.envelope_create(req).await.unwrap_err();
        assert_eq!(code(&e), Some(ErrorCode::BadRequest), "{what}: {e}");
    }
    // Over-long and empty names are BAD_REQUEST at decode.
    let e = c
        .envelope_create(create(&"x".repeat(257), 100, 1))
        .await
        .unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::BadRequest), "{e}");
    let e = c.envelope_grab(12345, "u".repeat(257)).await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::BadRequest), "{e}");
    let e = c.envelope_grab(12345, "").await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::BadRequest), "{e}");
    // Unknown ids, valid-looking or not.
    let unknown = envelope_id(77, 3, 500).unwrap();
    for id in [unknown, 0, u64::MAX] {
        let e = c.envelope_grab(id, "u").await.unwrap_err();
        assert_eq!(code(&e), Some(ErrorCode::NotFound), "{id}: {e}");
        let e = c.envelope_info(id).await.unwrap_err();
        assert_eq!(code(&e), Some(ErrorCode::NotFound), "{id}: {e}");
    }
    assert_eq!(node.stored_keys().await, 0, "bad input wrote nothing");
    let a = audit_ok(c).await;
    assert_eq!(a.envelopes, 0);

    // A good envelope next to the bad ones is untouched by them.
    let id = envelope(c, "s", 100, 2).await;
    let e = c.envelope_grab(id, "u".repeat(300)).await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::BadRequest));
    let info = c.envelope_info(id).await.unwrap();
    assert_eq!((info.grabbed, info.remaining_cents), (0, 100));
    audit_and_stop(node).await;
}

#[tokio::test]
async fn idempotency_key_makes_one_envelope() {
    let node = TestNode::start().await;
    let c = &node.client;
    let mut req = create("carol", 500, 5);
    req.idempotency_key = Some("order-1".into());
    let first = c.envelope_create(req.clone()).await.unwrap();
    let again = c.envelope_create(req.clone()).await.unwrap();
    assert_eq!(first, again);
    let mut other = req.clone();
    other.total_cents = 600;
    let e = c.envelope_create(other).await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::Conflict), "{e}");
    // Another key, or another sender with the same key, is a new envelope.
    let mut k2 = req.clone();
    k2.idempotency_key = Some("order-2".into());
    assert_ne!(c.envelope_create(k2).await.unwrap().id, first.id);
    let mut s2 = req.clone();
    s2.sender = "dave".into();
    assert_ne!(c.envelope_create(s2).await.unwrap().id, first.id);
    assert_eq!(audit_and_stop(node).await.envelopes, 3);
}

/// 2,000 users on 50 connections grab one envelope of 100 shares at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_thousand_grabbers_get_exactly_one_hundred_shares() {
    let node = TestNode::start().await;
    let total = 88_888;
    let id = envelope(&node.client, "boss", total, 100).await;
    let mut clients = Vec::new();
    for _ in 0..50 {
        clients.push(common::connect(node.addr()).await);
    }
    let mut tasks = Vec::new();
    for u in 0..2000 {
        let c = clients[u % clients.len()].clone();
        tasks.push(tokio::spawn(async move {
            let user = format!("user-{u}");
            loop {
                match c.envelope_grab(id, user.clone()).await {
                    Ok(g) => return (user, Some(g.amount_cents), 0),
                    Err(e) if code(&e) == Some(ErrorCode::Empty) => return (user, None, 0),
                    // Admission control said wait: the grab was not applied.
                    Err(e) if code(&e) == Some(ErrorCode::Busy) => {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Err(e) => panic!("grab failed: {e}"),
                }
            }
        }));
    }
    let mut winners = HashMap::new();
    let mut empty = 0;
    for t in tasks {
        match t.await.unwrap() {
            (user, Some(amount), _) => {
                assert!(amount >= 1);
                assert!(winners.insert(user, amount).is_none());
            }
            (_, None, _) => empty += 1,
        }
    }
    assert_eq!(winners.len(), 100, "exactly 100 distinct winners");
    assert_eq!(empty, 1900);
    assert_eq!(
        winners.values().sum::<u64>(),
        total,
        "not a cent more or less"
    );
    let info = node.client.envelope_info(id).await.unwrap();
    assert_eq!(info.grabs.len(), 100);
    for g in &info.grabs {
        assert_eq!(
            winners.get(&*String::from_utf8_lossy(&g.user)),
            Some(&g.amount_cents)
        );
    }
    assert_metrics(
        &node,
        &[
            "rush_envelope_grabs_total{outcome=\"ok\"} 100",
            "rush_envelope_in_flight_cents 0",
        ],
    )
    .await;
    audit_and_stop(node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grabs_beyond_the_queue_cap_are_busy() {
    let node = TestNode::start_with(|c| {
        c.envelopes.max_queued_grabs = 4;
        c.storage.shards = 1;
    })
    .await;
    let c = node.client.clone();
    let id = envelope(&c, "s", 10_000, 1000).await;
    let other = envelope(&c, "t", 100, 100).await;
    // Pipeline a burst on one connection: while one group commits, the rest
    // pile up in the envelope's lane and everything past 4 is refused.
    let burst: Vec<_> = (0..400)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { c.envelope_grab(id, format!("u{i}")).await })
        })
        .collect();
    // A grab of another envelope on the same shard is not held up by them.
    let calm = {
        let c = c.clone();
        tokio::spawn(async move { c.envelope_grab(other, "x").await })
    };
    let (mut ok, mut busy) = (0u32, 0u32);
    for t in burst {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(e) if code(&e) == Some(ErrorCode::Busy) => busy += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(calm.await.unwrap().is_ok());
    assert!(busy > 0, "the cap of 4 queued grabs refused some of 400");
    assert!(ok > 0);
    // BUSY grabs did nothing: the books count only the granted ones.
    let info = c.envelope_info(id).await.unwrap();
    assert_eq!(info.grabbed, ok);
    assert_eq!(
        info.total_cents - info.remaining_cents,
        info.grabs.iter().map(|g| g.amount_cents).sum::<u64>()
    );
    let line = format!("rush_envelope_grabs_total{{outcome=\"busy\"}} {busy}");
    assert_metrics(&node, &[&line]).await;
    audit_and_stop(node).await;
}

#[tokio::test]
async fn expiry_writes_exactly_one_refund_of_the_rest() {
    let node = TestNode::start().await;
    let c = &node.client;
    let id = envelope(c, "erin", 1_000, 10).await;
    let mut grabbed = 0;
    for u in ["a", "b", "c"] {
        grabbed += c.envelope_grab(id, u).await.unwrap().amount_cents;
    }
    // A fully grabbed envelope owes no refund.
    let full = envelope(c, "erin", 2, 2).await;
    c.envelope_grab(full, "a").await.unwrap();
    c.envelope_grab(full, "b").await.unwrap();

    assert!(refunds_from_start(c).await.refunds.is_empty());
    c.clock_advance(HOUR * 2).await.unwrap();
    let page = refunds_from_start(c).await;
    assert_eq!(page.refunds.len(), 1, "{page:?}");
    let r = &page.refunds[0];
    assert_eq!(r.envelope_id(), id);
    assert_eq!(r.sender, "erin");
    assert_eq!(r.amount_cents, 1_000 - grabbed);

    let info = c.envelope_info(id).await.unwrap();
    assert_eq!(info.state, EnvelopeState::Refunded);
    assert_eq!(
        (info.refunded_cents, info.remaining_cents),
        (1_000 - grabbed, 0)
    );
    let e = c.envelope_grab(id, "late").await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::Expired));
    // Someone who grabbed before still sees their amount.
    assert!(c.envelope_grab(id, "a").await.unwrap().repeated);

    // More timer runs, a restart: still exactly one refund.
    c.clock_advance(HOUR).await.unwrap();
    let mut node = node;
    node.restart().await;
    let c = &node.client;
    c.clock_advance(DAY).await.unwrap();
    let page = refunds_from_start(c).await;
    assert_eq!(page.refunds.len(), 1);
    let a = audit_and_stop(node).await;
    assert_eq!((a.refunded, a.open, a.in_flight_cents), (1, 0, 0));
}

#[tokio::test]
async fn an_open_envelope_is_refunded_after_a_restart() {
    let mut node = TestNode::start().await;
    let id = envelope(&node.client, "fay", 300, 3).await;
    node.client.envelope_grab(id, "a").await.unwrap();
    node.restart().await;
    // The pending expiry is found again at startup.
    node.client.clock_advance(HOUR * 2).await.unwrap();
    let page = node
        .client
        .envelope_refunds(RefundCursor::START, 10)
        .await
        .unwrap();
    assert_eq!(page.refunds.len(), 1);
    assert_eq!(page.refunds[0].envelope_id(), id);
    audit_and_stop(node).await;
}

#[tokio::test]
async fn the_refund_stream_resumes_from_the_acknowledged_cursor() {
    let mut node = TestNode::start().await;
    let mut ids = Vec::new();
    // Senders in different slots, so refunds come from both shards.
    for i in 0..6 {
        let c = &node.client;
        let mut req = create(&format!("sender-{i}"), 100 + i, 2);
        req.mode = EnvelopeMode::Fixed;
        let id = c.envelope_create(req).await.unwrap().id;
        c.envelope_grab(id, "g").await.unwrap();
        ids.push(id);
    }
    let shards: HashSet<usize> = ids
        .iter()
        .map(|&id| rush_daemon::shard::route::shard_of_slot(envelope_slot(id), 2))
        .collect();
    assert_eq!(shards.len(), 2);
    node.client.clock_advance(HOUR * 2).await.unwrap();

    let c = &node.client;
    let p1 = c.envelope_refunds(RefundCursor::START, 2).await.unwrap();
    assert_eq!(p1.refunds.len(), 2);
    assert!(p1.more);
    assert_eq!(p1.next, p1.refunds[1].cursor);
    // Reading again without acknowledging gives the same page.
    assert_eq!(
        c.envelope_refunds(RefundCursor::START, 2).await.unwrap(),
        p1
    );
    // The payment system paid those two.
    assert_eq!(c.envelope_refunds_ack(p1.next).await.unwrap(), 2);
    assert_eq!(
        c.envelope_refunds_ack(p1.next).await.unwrap(),
        0,
        "again: harmless"
    );

    // Both crash; the stream resumes after the acknowledged cursor.
    node.restart().await;
    let c = &node.client;
    let p2 = refunds_from_start(c).await;
    assert_eq!(p2.refunds.len(), 4);
    assert!(!p2.more);
    assert!(p2.refunds.iter().all(|r| r.cursor > p1.next));
    let mut seen: Vec<u64> = p1
        .refunds
        .iter()
        .chain(&p2.refunds)
        .map(|r| r.envelope_id())
        .collect();
    let cursors: Vec<_> = p2.refunds.iter().map(|r| r.cursor).collect();
    let mut sorted = cursors.clone();
    sorted.sort();
    assert_eq!(cursors, sorted, "in stream order");
    seen.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(seen, want, "every refund once");
    for r in p1.refunds.iter().chain(&p2.refunds) {
        let i = ids.iter().position(|&id| id == r.envelope_id()).unwrap() as u64;
        // Fixed shares: the first grab took the larger half.
        assert_eq!(r.amount_cents, (100 + i) / 2);
    }

    // Reading on from `next` finds nothing new; acknowledging empties it.
    assert!(c
        .envelope_refunds(p2.next, 100)
        .await
        .unwrap()
        .refunds
        .is_empty());
    assert_eq!(c.envelope_refunds_ack(p2.next).await.unwrap(), 4);
    assert!(refunds_from_start(c).await.refunds.is_empty());
    // A cursor the stream never handed out is refused.
    let future = RefundCursor {
        stamp: u64::MAX - 1,
        id: 0,
    };
    let e = c.envelope_refunds(future, 10).await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::BadRequest), "{e}");
    let e = c.envelope_refunds_ack(future).await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::BadRequest), "{e}");
    assert_metrics(&node, &["rush_envelope_refunds_acked_total 4"]).await;
    audit_and_stop(node).await;
}

#[tokio::test]
async fn refunds_written_after_a_read_sort_after_its_cursor() {
    let node = TestNode::start().await;
    let c = &node.client;
    let early = envelope(c, "early", 50, 5).await;
    let mut late = create("late", 60, 5);
    late.expires_in_ms = 3 * HOUR.as_millis() as u64;
    let late = c.envelope_create(late).await.unwrap().id;
    c.clock_advance(HOUR * 2).await.unwrap();
    let p = refunds_from_start(c).await;
    assert_eq!(p.refunds.len(), 1);
    assert_eq!(p.refunds[0].envelope_id(), early);
    // The later refund lands after the cursor the read handed out.
    c.clock_advance(HOUR * 2).await.unwrap();
    let q = c.envelope_refunds(p.next, 100).await.unwrap();
    assert_eq!(q.refunds.len(), 1);
    assert_eq!(q.refunds[0].envelope_id(), late);
    assert!(q.refunds[0].cursor > p.next);
    audit_and_stop(node).await;
}

/// Retention removes a slot's old day even when its day-of-month bucket
/// already holds a newer day (the 5th of this month vs the 5th of last).
#[tokio::test]
async fn retention_removes_old_days_and_keeps_newer_ones_in_the_same_bucket() {
    let node = TestNode::start().await;
    let c = &node.client;
    let retention = node.config.envelopes.retention_days as u64;
    assert_eq!(retention, 31);
    let old = envelope(c, "zoe", 500, 5).await;
    c.envelope_grab(old, "a").await.unwrap();
    let old_bucket = envelope_day(old);

    // Find the next day (28–31 days on) with the same day of month.
    let mut advanced = 0u64;
    let mut newer = None;
    while advanced < retention {
        c.clock_advance(DAY).await.unwrap();
        advanced += 1;
        let probe = envelope(c, "zoe", 10, 1).await;
        if envelope_day(probe) == old_bucket {
            newer = Some(probe);
            break;
        }
    }
    let newer = newer.expect("a day of month comes back within 31 days");
    assert_eq!(envelope_slot(newer), envelope_slot(old));
    assert!(newer > old, "ids grow within a slot");
    if advanced < retention {
        // Both days share the bucket and both are kept for now.
        assert!(c.envelope_info(old).await.is_ok());
    }
    // 31 days after the old day, it goes; the newer day in its bucket stays.
    c.clock_advance(DAY * (retention - advanced) as u32)
        .await
        .unwrap();
    let e = c.envelope_info(old).await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::NotFound), "{e}");
    let e = c.envelope_grab(old, "a").await.unwrap_err();
    assert_eq!(code(&e), Some(ErrorCode::NotFound), "{e}");
    let kept = c.envelope_info(newer).await.unwrap();
    assert_eq!(kept.total_cents, 10);
    // Its unpaid refund is not removed with its day.
    let page = c.envelope_refunds(RefundCursor::START, 1000).await.unwrap();
    assert!(page.refunds.iter().any(|r| r.envelope_id() == old));
    let a = audit_ok(c).await;
    // The probes of the days in between are younger than 31 days: kept.
    assert_eq!(a.envelopes, advanced);

    // Only the newer day's keys remain in the bucket (once RocksDB holds
    // every committed write).
    node.running().write_back().await;
    let storage = node.running().storage().clone();
    let slot = envelope_slot(old);
    let shard = rush_daemon::shard::route::shard_of_slot(slot, 2);
    let bucket = rush_daemon::storage::keys::envelope::day_start(slot, old_bucket);
    let end = rush_daemon::storage::keys::envelope::day_id_end(slot, old_bucket);
    assert_eq!(storage.count_raw(shard, &bucket, &end).unwrap(), 1);
    assert_metrics(
        &node,
        &["rush_envelope_retention_day_buckets_removed_total 1"],
    )
    .await;
    node.stop().await;
}

/// An envelope dropped from memory by a regular timer run (no write-back
/// with it) while its latest grabs are still held for write-back reloads
/// them too: a user who grabbed just before can't grab again.
#[tokio::test]
async fn an_envelope_reloaded_before_its_grabs_are_written_back_still_knows_them() {
    let node = TestNode::start_with(|c| {
        c.envelopes.cached_envelopes = 1;
        c.storage.tick_ms = 5;
    })
    .await;
    let c = &node.client;
    // One slot, so one shard's cache holds both.
    let a = envelope(c, "{s}a", 1000, 10).await;
    let b = envelope(c, "{s}b", 1000, 10).await;
    for round in 0..3 {
        let user = format!("u{round}");
        let first = c.envelope_grab(a, user.clone()).await.unwrap();
        assert!(!first.repeated);
        // b used later than a, then timer runs: a is the one dropped.
        tokio::time::sleep(Duration::from_millis(5)).await;
        c.envelope_grab(b, format!("v{round}")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let again = c.envelope_grab(a, user.clone()).await.unwrap();
        assert!(again.repeated, "round {round}: {user} grabbed twice");
        assert_eq!(again.amount_cents, first.amount_cents);
    }
    let info = c.envelope_info(a).await.unwrap();
    assert_eq!(info.grabbed, 3);
    assert_eq!(info.grabs.len(), 3);
    // An emptied envelope, dropped and reloaded by someone else's grab (its
    // grabs not read with it): its last grabber's repeat is still a repeat,
    // not EMPTY.
    let one = envelope(c, "{s}c", 100, 1).await;
    let got = c.envelope_grab(one, "w").await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    c.envelope_grab(b, "v-last").await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let e = c.envelope_grab(one, "x").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Empty), "{e:?}");
    let again = c.envelope_grab(one, "w").await.unwrap();
    assert!(again.repeated);
    assert_eq!(again.amount_cents, got.amount_cents);
    audit_and_stop(node).await;
}

/// Memory holds only the earliest pending expiries (as many as
/// `cached_envelopes`); the rest are read back from storage as those are
/// used up. Envelopes created out of order, some after a restart, are each
/// refunded once, when due, whichever of them memory held.
#[tokio::test]
async fn refunds_come_due_in_order_with_few_expiries_held() {
    let mut node = TestNode::start_with(|c| c.envelopes.cached_envelopes = 2).await;
    // One slot, so one shard's index holds them all.
    let mut ids: HashMap<u64, u64> = HashMap::new();
    let mut make = async |node: &TestNode, hours: u64| {
        let mut e = create(&format!("{{s}}{hours}"), 100 * hours, 2);
        e.expires_in_ms = hours * HOUR.as_millis() as u64;
        let id = node.client.envelope_create(e).await.unwrap().id;
        node.client.envelope_grab(id, "u").await.unwrap();
        ids.insert(hours, id);
    };
    for hours in [5, 2, 8, 1] {
        make(&node, hours).await;
    }
    node.restart().await;
    for hours in [9, 3, 7, 4, 6] {
        make(&node, hours).await;
    }
    let c = &node.client;
    let mut refunded: Vec<u64> = Vec::new();
    for hour in 1..=9u64 {
        c.clock_advance(HOUR).await.unwrap();
        let page = refunds_from_start(c).await;
        refunded = page.refunds.iter().map(|r| r.envelope_id()).collect();
        let want: Vec<u64> = (1..=hour).map(|h| ids[&h]).collect();
        assert_eq!(refunded, want, "after {hour} hours");
        for r in &page.refunds {
            let h = ids
                .iter()
                .find(|(_, id)| **id == r.envelope_id())
                .unwrap()
                .0;
            let info = c.envelope_info(r.envelope_id()).await.unwrap();
            assert_eq!(r.amount_cents, 100 * h - info.grabs[0].amount_cents);
        }
    }
    assert_eq!(refunded.len(), 9);
    let a = audit_and_stop(node).await;
    assert_eq!((a.refunded, a.open, a.in_flight_cents), (9, 0, 0));
}
