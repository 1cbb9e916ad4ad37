//! Red envelopes across `kill -9` of a real `rushd` process: no acknowledged
//! grab is lost, no refund is written twice or lost, the books add up.

mod common;

use common::{connect, Spawned};
use rush_client::protocol::cmd::{EnvelopeCreate, RefundCursor};
use rush_client::protocol::ErrorCode;
use rush_client::{Client, ClientOptions};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const HOUR: Duration = Duration::from_secs(3600);

/// `rushd --config` with clock control and the given extra TOML.
fn spawn(dir: &Path, extra_toml: &str) -> Spawned {
    let config = dir.with_extension("toml");
    std::fs::write(
        &config,
        format!("[debug]\nclock_control = true\n{extra_toml}"),
    )
    .unwrap();
    Spawned::start(dir, &["--config", config.to_str().unwrap()])
}

fn create(sender: &str, total: u64, count: u32) -> EnvelopeCreate {
    let mut c = EnvelopeCreate::new(sender.to_string(), total, count);
    c.expires_in_ms = HOUR.as_millis() as u64;
    c
}

async fn audit_ok(c: &Client) {
    let a = c.envelope_audit().await.unwrap();
    assert!(a.ok(), "audit found problems: {:?}", a.problems);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill9_during_a_grab_storm_loses_no_acknowledged_grab() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let mut d = spawn(&dir, "");
    let c = connect(d.addr).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        let id = c
            .envelope_create(create(&format!("boss-{i}"), 1_000_000, 10_000))
            .await
            .unwrap()
            .id;
        ids.push(id);
    }
    // 32 connections grab as fast as they can; every acknowledged grab is
    // written down.
    let acked: Arc<Mutex<Vec<(u64, String, u64)>>> = Arc::default();
    let mut tasks = Vec::new();
    for t in 0..32 {
        // No retries: after the kill a grabber stops at its first error.
        let opts = ClientOptions {
            retry_deadline: Duration::ZERO,
            ..ClientOptions::default()
        };
        let c = Client::connect_with(&d.addr.to_string(), opts)
            .await
            .unwrap();
        let (ids, acked) = (ids.clone(), acked.clone());
        tasks.push(tokio::spawn(async move {
            for n in 0.. {
                let id = ids[n % ids.len()];
                let user = format!("t{t}-u{n}");
                match c.envelope_grab(id, user.clone()).await {
                    Ok(g) => acked.lock().unwrap().push((id, user, g.amount_cents)),
                    Err(e) if e.code() == Some(ErrorCode::Busy) => {}
                    // The daemon died: stop.
                    Err(_) => return,
                }
            }
        }));
    }
    let started = Instant::now();
    while acked.lock().unwrap().len() < 2_000 && started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    d.kill9();
    for t in tasks {
        t.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 2_000, "the storm was running at the kill");

    let d = spawn(&dir, "");
    let c = connect(d.addr).await;
    audit_ok(&c).await;
    let mut stored: HashMap<(u64, String), u64> = HashMap::new();
    for &id in &ids {
        let info = c.envelope_info(id).await.unwrap();
        let sum: u64 = info.grabs.iter().map(|g| g.amount_cents).sum();
        assert_eq!(sum + info.remaining_cents, info.total_cents);
        for g in info.grabs {
            stored.insert(
                (id, String::from_utf8_lossy(&g.user).into_owned()),
                g.amount_cents,
            );
        }
    }
    for (id, user, amount) in &acked {
        assert_eq!(
            stored.get(&(*id, user.clone())),
            Some(amount),
            "acknowledged grab of {user} on {id} survived the kill"
        );
    }
    // A repeat after the restart answers the same amount.
    for (id, user, amount) in acked.iter().step_by(97) {
        let again = c.envelope_grab(*id, user.clone()).await.unwrap();
        assert!(again.repeated);
        assert_eq!(again.amount_cents, *amount);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill9_during_refunds_writes_each_refund_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    // One refund per shard per 50 ms timer run: 200 take seconds, so the
    // kill lands in the middle of them even if the test stalls a while.
    let slow = "[storage]\ntick_ms = 50\n[envelopes]\nrefunds_per_tick = 1\n";
    let mut d = spawn(&dir, slow);
    let c = connect(d.addr).await;
    let mut owed = HashMap::new();
    for i in 0..200u64 {
        let id = c
            .envelope_create(create(&format!("sender-{i}"), 1_000 + i, 10))
            .await
            .unwrap()
            .id;
        let g = c.envelope_grab(id, "first").await.unwrap();
        owed.insert(id, 1_000 + i - g.amount_cents);
    }
    // Expire them all, and push the clock a day further, so the stream's
    // stamps run a day ahead of where the restarted daemon's clock will be.
    c.clock_advance(HOUR * 2).await.unwrap();
    c.clock_advance(HOUR * 24).await.unwrap();
    let mut seen_before = HashMap::new();
    let started = Instant::now();
    let cursor_before = loop {
        let page = c
            .envelope_refunds(RefundCursor::START, 10_000)
            .await
            .unwrap();
        assert!(page.refunds.len() < 200, "the kill came too late");
        if page.refunds.len() >= 10 {
            for r in &page.refunds {
                seen_before.insert(r.envelope_id(), r.clone());
            }
            break page.next;
        }
        assert!(started.elapsed() < Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    d.kill9();

    // The restarted daemon's clock is back to real time: advance it past the
    // expiries again (but not past the stamps already handed out).
    let d = spawn(&dir, slow);
    let c = connect(d.addr).await;
    c.clock_advance(HOUR * 2).await.unwrap();
    let started = Instant::now();
    let all = loop {
        let page = c
            .envelope_refunds(RefundCursor::START, 10_000)
            .await
            .unwrap();
        if page.refunds.len() >= 200 {
            break page;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "refunds resume: {} of 200 after {} before the kill",
            page.refunds.len(),
            seen_before.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(all.refunds.len(), 200, "no refund written twice");
    let mut ids = HashSet::new();
    for r in &all.refunds {
        assert!(ids.insert(r.envelope_id()), "one refund per envelope");
        assert_eq!(r.amount_cents, owed[&r.envelope_id()], "the exact rest");
    }
    // Refunds read before the kill are the same records after it.
    for (id, before) in &seen_before {
        assert!(
            all.refunds.contains(before),
            "refund of {id} kept as it was"
        );
    }
    // A consumer still holding its pre-kill cursor misses nothing: every
    // refund written after that read sorts after it, clock or no clock.
    let rest = c.envelope_refunds(cursor_before, 10_000).await.unwrap();
    let after: HashSet<u64> = rest.refunds.iter().map(|r| r.envelope_id()).collect();
    for id in owed.keys() {
        assert!(
            seen_before.contains_key(id) || after.contains(id),
            "refund of {id} is after the old cursor"
        );
    }
    audit_ok(&c).await;
}
