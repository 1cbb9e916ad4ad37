//! Slot moves killed half-way: the source or the target exits abruptly
//! (like `kill -9`) at a step of the move, and is started again. The move
//! then either completes or rolls back — never anything in between — and
//! no acknowledged write, no id, no envelope cent is lost or doubled. A
//! second `migrate` then finishes the job.

mod cluster_support;
mod common;

use bytes::Bytes;
use cluster_support::{audit_clean, create, keys_in, opts, served_by, wait_settled, Node};
use common::limit_policy;
use rush_client::protocol::cmd::{BatchShortenItem, EnvelopeCreate, OrderItem, Scope, SlotRange};
use rush_client::protocol::ErrorCode;
use rush_client::{Client, ClientOptions};
use std::collections::HashSet;
use std::time::Duration;

const MOVING: SlotRange = SlotRange {
    start: 100,
    end: 104,
};

/// What was acknowledged before the move.
struct Seeded {
    kv: Vec<String>,
    /// envelope id → (user, amount) of each grab.
    envelopes: Vec<(u64, Vec<(String, u64)>)>,
    codes: Vec<(String, String)>,
    users: Vec<String>,
}

async fn seed(c: &Client) -> Seeded {
    let sale = limit_policy("sale", &[("total", Scope::Total, 1_000, "day")]);
    c.limit_policy_set(sale).await.unwrap();
    let kv = keys_in("kv", 100..=104, 200);
    for k in &kv {
        c.set(k.clone(), k.clone()).await.unwrap();
    }
    let mut envelopes = Vec::new();
    for s in keys_in("sender", 100..=104, 10) {
        let e = c
            .envelope_create(EnvelopeCreate::new(s, 1_000, 10))
            .await
            .unwrap();
        let mut grabs = Vec::new();
        for u in 0..3 {
            let user = format!("u{u}");
            let g = c.envelope_grab(e.id, user.clone()).await.unwrap();
            grabs.push((user, g.amount_cents));
        }
        envelopes.push((e.id, grabs));
    }
    let mut codes = Vec::new();
    for slot in 100..=104 {
        let items = (0..10)
            .map(|i| BatchShortenItem::new(format!("https://e.com/{slot}/{i}")))
            .collect();
        for (i, l) in c
            .shorten_batch_in(slot, "acct", items)
            .await
            .unwrap()
            .links
            .into_iter()
            .enumerate()
        {
            codes.push((l.code, format!("https://e.com/{slot}/{i}")));
        }
    }
    let users = keys_in("user", 100..=104, 10);
    for u in &users {
        for o in 0..2 {
            c.limit_acquire(
                "sale",
                u.clone(),
                format!("o{o}"),
                [OrderItem::new("sku", 1)],
            )
            .await
            .unwrap();
        }
    }
    Seeded {
        kv,
        envelopes,
        codes,
        users,
    }
}

/// Everything acknowledged is there, exactly once.
async fn verify(c: &Client, s: &Seeded) {
    for k in &s.kv {
        assert_eq!(
            c.get(k.clone()).await.unwrap(),
            Some(Bytes::from(k.clone())),
            "key {k}"
        );
    }
    for (id, grabs) in &s.envelopes {
        let info = c.envelope_info(*id).await.unwrap();
        assert_eq!(info.grabbed as usize, grabs.len(), "envelope {id}");
        let sum: u64 = info.grabs.iter().map(|g| g.amount_cents).sum();
        assert_eq!(
            sum + info.remaining_cents + info.refunded_cents,
            info.total_cents
        );
        for (user, amount) in grabs {
            let g = info
                .grabs
                .iter()
                .find(|g| g.user == user.as_bytes())
                .expect("grab kept");
            assert_eq!(g.amount_cents, *amount);
        }
    }
    for (code, url) in &s.codes {
        assert_eq!(&c.resolve(code.clone()).await.unwrap().target, url);
    }
    for u in &s.users {
        assert_eq!(
            c.limit_status("sale", u.clone())
                .await
                .unwrap()
                .count("total", ""),
            2
        );
    }
}

/// New ids in the moved slots are new.
async fn no_reissue(c: &Client, s: &Seeded) {
    let old: HashSet<&str> = s.codes.iter().map(|(c, _)| c.as_str()).collect();
    for slot in 100..=104 {
        let items = (0..20)
            .map(|i| BatchShortenItem::new(format!("https://n.com/{slot}/{i}")))
            .collect();
        for l in c.shorten_batch_in(slot, "acct", items).await.unwrap().links {
            assert!(
                !old.contains(l.code.as_str()),
                "code {} issued twice",
                l.code
            );
        }
    }
    let ids: HashSet<u64> = s.envelopes.iter().map(|(id, _)| *id).collect();
    for sender in keys_in("sender", 100..=104, 10) {
        let e = c
            .envelope_create(EnvelopeCreate::new(sender, 10, 1))
            .await
            .unwrap();
        assert!(!ids.contains(&e.id), "envelope id {} issued twice", e.id);
    }
}

/// How a crashed move must end.
#[derive(Debug, PartialEq)]
enum Ends {
    RolledBack,
    /// Slot 100 moved, the rest not (the source died in the middle).
    FirstSlotMoved,
    /// Every slot moved (the source got its answer after the target came back).
    AllMoved,
}

async fn crash(point: &str, source_crashes: bool, ends: Ends) {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = Node::start(tmp.path(), "a", source_crashes.then_some(point));
    let mut b = Node::start(tmp.path(), "b", (!source_crashes).then_some(point));
    create(&[&a, &b]).await;
    let c = Client::connect_with(&a.addr(), opts()).await.unwrap();
    let seeded = seed(&c).await;

    // The move, asked by a client that doesn't resend it: the outcome is
    // what this test looks at.
    let admin = Client::connect_with(
        &a.addr(),
        ClientOptions {
            retry_deadline: Duration::ZERO,
            request_timeout: Duration::from_secs(120),
            ..ClientOptions::default()
        },
    )
    .await
    .unwrap();
    let moving = tokio::spawn(async move { admin.cluster_migrate(&[MOVING], "b").await });
    let crashed = if source_crashes { &mut a } else { &mut b };
    crashed.wait_exit(Duration::from_secs(60));
    crashed.restart(None);
    let outcome = moving.await.unwrap();
    println!("{point}: migrate answered {outcome:?}");
    // A source that restarts resolves the move in the background; its slot
    // answers TRYAGAIN until then.
    let k100 = keys_in("probe", 100..=100, 1).remove(0);
    let k104 = keys_in("probe", 104..=104, 1).remove(0);
    let on_a = wait_settled(&a.addr(), &k100, Duration::from_secs(30)).await;
    match ends {
        Ends::RolledBack => {
            assert!(outcome.is_err());
            assert_eq!(on_a, Ok(()), "slot 100 stays with the source");
            assert_eq!(served_by(&b.addr(), &k100).await, Err(ErrorCode::Moved));
        }
        Ends::FirstSlotMoved => {
            assert!(outcome.is_err());
            assert_eq!(on_a, Err(ErrorCode::Moved), "slot 100 went to the target");
            assert_eq!(served_by(&b.addr(), &k100).await, Ok(()));
            assert_eq!(served_by(&a.addr(), &k104).await, Ok(()));
        }
        Ends::AllMoved => {
            assert_eq!(outcome.unwrap().slots, 5);
            assert_eq!(on_a, Err(ErrorCode::Moved));
            assert_eq!(served_by(&b.addr(), &k104).await, Ok(()));
        }
    }
    // Whatever happened, nothing acknowledged is lost and the books add up.
    verify(&c, &seeded).await;
    for n in [&a, &b] {
        audit_clean(&c, &n.addr()).await;
    }
    // A second move finishes the job.
    let again = c.cluster_migrate(&[MOVING], "b").await.unwrap();
    let expect = match ends {
        Ends::RolledBack => 5,
        Ends::FirstSlotMoved => 4,
        Ends::AllMoved => 0,
    };
    assert_eq!(again.slots, expect);
    for n in [&a, &b] {
        let m = c
            .call_on(&n.addr(), rush_client::protocol::cmd::ClusterSlots {})
            .await
            .unwrap();
        assert_eq!(m.node_for(100).unwrap().id, "b");
        assert_eq!(m.node_for(104).unwrap().id, "b");
    }
    verify(&c, &seeded).await;
    no_reissue(&c, &seeded).await;
    let mut envelopes = 0;
    for n in [&a, &b] {
        envelopes += audit_clean(&c, &n.addr()).await;
    }
    assert_eq!(envelopes, 20, "every envelope exactly once in the cluster");
    a.terminate();
    b.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_killed_while_copying_rolls_back() {
    crash("source-after-chunk", true, Ends::RolledBack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_killed_after_the_target_committed_completes() {
    crash("source-after-commit", true, Ends::FirstSlotMoved).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_killed_while_copying_rolls_back() {
    crash("target-after-chunk", false, Ends::RolledBack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_killed_before_committing_rolls_back() {
    crash("target-before-commit", false, Ends::RolledBack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_killed_after_committing_completes() {
    crash("target-after-commit", false, Ends::AllMoved).await;
}
