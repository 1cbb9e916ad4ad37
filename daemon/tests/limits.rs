//! Purchase limits through a real daemon and client: the seed's rules, local
//! days, fixed and sliding windows, concurrency, idempotency, release,
//! durability across SIGKILL and restarts, invalid input, run-time policies,
//! metrics and TTL compaction.

mod common;

use common::{limit_policy as policy, Spawned, TestNode};
use rush_client::protocol::cmd::{
    AcquireReply, LimitAcquire, LimitStatus, OrderItem, ReleaseReply, Scope, StatusReply, Window,
};
use rush_client::protocol::limits::{MAX_ID, MAX_KEY, MAX_ORDER_ITEMS, MAX_ORDER_QTY};
use rush_client::protocol::{key_slot, ErrorCode, LimitDenial};
use rush_client::{Client, ClientError};
use rush_daemon::storage::keys;
use rush_daemon::Config;
use std::path::Path;
use std::time::Duration;

const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;
/// Asia/Shanghai is UTC+8 all year (no DST).
const SHANGHAI: u64 = 8 * HOUR;

/// The seed's rules: each flash-sale item at most once a day, at most 5
/// flash-sale purchases a day in total, days in Shanghai time.
const SEED: &str = r#"
[limits.policies.flash-sale]
window = "day:Asia/Shanghai"
item_max = 1
total_max = 5
"#;

fn with_limits(toml: &str) -> impl FnOnce(&mut Config) + '_ {
    move |c: &mut Config| {
        c.limits = Config::from_toml(toml, Path::new("test.toml"))
            .expect("test config parses")
            .limits;
    }
}

/// The next local midnight in Shanghai after `now`, computed by hand (not by
/// the daemon's time zone library).
fn next_shanghai_midnight(now: u64) -> u64 {
    ((now + SHANGHAI) / DAY + 1) * DAY - SHANGHAI
}

async fn now(c: &Client) -> u64 {
    c.clock_advance(Duration::ZERO).await.unwrap()
}

/// Advances the node clock to `ms` (Unix ms, ahead of the node's now).
async fn advance_to(c: &Client, ms: u64) {
    let t = now(c).await;
    c.clock_advance(Duration::from_millis(ms - t))
        .await
        .unwrap();
}

/// Advances the node clock to a second past the next minute, so that what a
/// test does next lands in one fixed one-minute window.
async fn early_in_a_minute(c: &Client) {
    let t = now(c).await;
    advance_to(c, (t / 60_000 + 1) * 60_000 + 1_000).await;
}

fn item(id: &str) -> Vec<OrderItem> {
    vec![OrderItem::new(id, 1)]
}

fn denial(r: Result<AcquireReply, ClientError>) -> LimitDenial {
    let e = r.expect_err("the order should be limited");
    assert_eq!(e.code(), Some(ErrorCode::Limited), "{e}");
    e.limit_denial().expect("LIMITED carries the rule")
}

/// A denial as (rule, item, current, limit, requested).
fn parts(d: &LimitDenial) -> (&str, &str, u64, u64, u64) {
    (&d.rule, &d.item, d.current, d.limit, d.requested)
}

/// One user's orders under one policy, each call expecting the answer it is
/// named for.
struct Buyer<'a> {
    c: &'a Client,
    policy: &'a str,
    user: &'a str,
}

impl<'a> Buyer<'a> {
    fn new(c: &'a Client, policy: &'a str, user: &'a str) -> Self {
        Buyer { c, policy, user }
    }

    async fn acquire(
        &self,
        order: &str,
        items: impl IntoIterator<Item = OrderItem>,
    ) -> Result<AcquireReply, ClientError> {
        self.c
            .limit_acquire(self.policy, self.user.to_owned(), order, items)
            .await
    }

    /// An order that must be answered OK (allowed, or a replay).
    async fn buy(&self, order: &str, items: impl IntoIterator<Item = OrderItem>) -> AcquireReply {
        self.acquire(order, items)
            .await
            .unwrap_or_else(|e| panic!("{} order {order} of {}: {e}", self.policy, self.user))
    }

    /// An order that must be LIMITED: what denied it.
    async fn denied(&self, order: &str, items: impl IntoIterator<Item = OrderItem>) -> LimitDenial {
        denial(self.acquire(order, items).await)
    }

    /// A release of an order the node knows.
    async fn release(&self, order: &str) -> ReleaseReply {
        self.c
            .limit_release(self.policy, self.user.to_owned(), order)
            .await
            .unwrap()
    }

    async fn status(&self) -> StatusReply {
        self.c
            .limit_status(self.policy, self.user.to_owned())
            .await
            .unwrap()
    }

    /// What the policy's total rule has counted.
    async fn total(&self) -> u64 {
        self.status().await.count("total", "")
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, ClientError>) -> ErrorCode {
    r.expect_err("expected an error answer")
        .code()
        .expect("a server error")
}

#[tokio::test]
async fn seed_rules_and_the_next_local_day() {
    let node = TestNode::start_with(with_limits(SEED)).await;
    let c = &node.client;
    let buyer = Buyer::new(c, "flash-sale", "860000000000001");
    // Keep clear of a midnight during the test itself.
    let t = now(c).await;
    if next_shanghai_midnight(t) - t < 10 * 60_000 {
        c.clock_advance(Duration::from_secs(15 * 60)).await.unwrap();
    }
    let midnight = next_shanghai_midnight(now(c).await);

    let r = buyer.buy("o1", item("sku-1")).await;
    assert!(!r.replayed);
    assert_eq!(r.allowances.len(), 2);
    let (it, total) = (&r.allowances[0], &r.allowances[1]);
    assert_eq!((it.rule.as_str(), it.item.as_str()), ("item", "sku-1"));
    assert_eq!((it.count, it.limit, it.remaining()), (1, 1, 0));
    assert_eq!((total.rule.as_str(), total.item.as_str()), ("total", ""));
    assert_eq!((total.count, total.limit, total.remaining()), (1, 5, 4));
    assert_eq!(it.resets_at_ms, midnight, "resets at local midnight");
    assert_eq!(total.resets_at_ms, midnight);

    // A second purchase of the same item the same day is denied.
    let d = buyer.denied("o2", item("sku-1")).await;
    assert_eq!(parts(&d), ("item", "sku-1", 1, 1, 1));

    // A mixed order where one item fails records nothing.
    let before = buyer.status().await;
    let d = buyer
        .denied(
            "o3",
            [OrderItem::new("sku-2", 1), OrderItem::new("sku-1", 1)],
        )
        .await;
    assert_eq!((d.rule.as_str(), d.item.as_str()), ("item", "sku-1"));
    let after = buyer.status().await;
    assert_eq!(before, after, "a denied order changes nothing");
    assert_eq!(after.count("item", "sku-2"), 0);
    assert_eq!(after.count("total", ""), 1);

    // Up to five in total; the denied order ids are free to use again.
    buyer
        .buy(
            "o2",
            [OrderItem::new("sku-2", 1), OrderItem::new("sku-3", 1)],
        )
        .await;
    buyer.buy("o3", item("sku-4")).await;
    let r = buyer.buy("o4", item("sku-5")).await;
    assert_eq!(r.allowances[1].count, 5);
    assert_eq!(r.allowances[1].remaining(), 0);
    // The sixth purchase is denied by the total rule.
    let d = buyer.denied("o5", item("sku-6")).await;
    assert_eq!(parts(&d), ("total", "", 5, 5, 1));
    let s = buyer.status().await;
    assert_eq!(s.count("total", ""), 5);
    assert_eq!(
        s.allowances.iter().filter(|a| a.rule == "item").count(),
        5,
        "one entry per item bought: {s:?}"
    );
    assert!(s.allowances.iter().all(|a| a.resets_at_ms == midnight));

    // A minute before local midnight it is still the same day (a UTC day
    // would have reset at 08:00 Shanghai time)...
    advance_to(c, midnight - 60_000).await;
    buyer.denied("o5", item("sku-6")).await;
    buyer.denied("o6", item("sku-1")).await;
    // ...and past it the next local day allows again (a UTC day would not
    // have ended at 16:00 UTC).
    c.clock_advance(Duration::from_secs(120)).await.unwrap();
    buyer.buy("o5", item("sku-6")).await;
    let r = buyer.buy("o6", item("sku-1")).await;
    assert_eq!(r.allowances[0].count, 1);
    assert_eq!(r.allowances[1].count, 2);
    assert_eq!(r.allowances[1].resets_at_ms, midnight + DAY);
    node.stop().await;
}

#[tokio::test]
async fn orders_with_quantities_count_their_quantities() {
    let node = TestNode::start_with(with_limits(SEED)).await;
    let buyer = Buyer::new(&node.client, "flash-sale", "qty-user");
    // Two of one item is over "each item once".
    let d = buyer.denied("o1", [OrderItem::new("a", 2)]).await;
    assert_eq!((d.rule.as_str(), d.current, d.requested), ("item", 0, 2));
    // Five items of one each fit; the total is checked with the order's sum.
    let five: Vec<OrderItem> = (1..=5)
        .map(|i| OrderItem::new(format!("s{i}"), 1))
        .collect();
    let r = buyer.buy("o2", five).await;
    assert_eq!(r.allowances.len(), 6, "five items and the total");
    assert_eq!(r.allowances[5].count, 5);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_concurrent_acquires_exactly_five_succeed() {
    let node = TestNode::start_with(with_limits(SEED)).await;
    let mut clients = Vec::new();
    for _ in 0..20 {
        clients.push(common::connect(node.addr()).await);
    }
    let mut tasks = Vec::new();
    for i in 0..200 {
        let c = clients[i % clients.len()].clone();
        tasks.push(tokio::spawn(async move {
            c.limit_acquire(
                "flash-sale",
                "hot-user",
                format!("order-{i}"),
                item(&format!("sku-{i}")),
            )
            .await
        }));
    }
    let (mut ok, mut limited) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            r @ Err(_) => {
                let d = denial(r);
                assert_eq!((d.rule.as_str(), d.current), ("total", 5));
                limited += 1;
            }
        }
    }
    assert_eq!((ok, limited), (5, 195));
    let s = Buyer::new(&node.client, "flash-sale", "hot-user")
        .status()
        .await;
    assert_eq!(s.count("total", ""), 5);
    assert_eq!(s.allowances.iter().filter(|a| a.rule == "item").count(), 5);
    node.stop().await;
}

#[tokio::test]
async fn replaying_an_order_counts_it_once() {
    let node = TestNode::start_with(with_limits(SEED)).await;
    let c = &node.client;
    let buyer = Buyer::new(c, "flash-sale", "replayer");
    let order = vec![OrderItem::new("a", 1), OrderItem::new("b", 1)];
    let first = buyer.buy("o1", order.clone()).await;
    assert!(!first.replayed);
    // A redelivered message, items in another order: the first answer again.
    for _ in 0..3 {
        let again = buyer
            .buy("o1", [OrderItem::new("b", 1), OrderItem::new("a", 1)])
            .await;
        assert!(again.replayed);
        assert_eq!(again.allowances, first.allowances);
    }
    let s = buyer.status().await;
    assert_eq!(s.count("total", ""), 2, "counted once");
    assert_eq!(s.count("item", "a"), 1);
    // The same order id with other items is a conflict, and counts nothing.
    let e = buyer.acquire("o1", item("c")).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Conflict), "{e}");
    assert_eq!(buyer.status().await, s);
    // A replay even after the items' day has ended still counts nothing
    // (orders are remembered for at least the longest window).
    c.clock_advance(Duration::from_millis(DAY + HOUR / 2))
        .await
        .unwrap();
    assert!(buyer.buy("o1", order).await.replayed);
    assert_eq!(buyer.total().await, 0);
    node.stop().await;
}

#[tokio::test]
async fn release_gives_back_exactly_once() {
    let node = TestNode::start_with(with_limits(SEED)).await;
    let c = &node.client;
    let u = "refunder";
    let buyer = Buyer::new(c, "flash-sale", u);
    let order = vec![OrderItem::new("a", 1), OrderItem::new("b", 1)];
    buyer.buy("o1", order.clone()).await;
    buyer.buy("o2", item("c")).await;
    assert_eq!(buyer.total().await, 3);

    let r = buyer.release("o1").await;
    assert!(!r.replayed);
    assert_eq!(r.items, order);
    let s = buyer.status().await;
    assert_eq!(s.count("total", ""), 1);
    assert_eq!(s.count("item", "a"), 0);
    assert_eq!(s.count("item", "c"), 1);

    // Item "a" can be bought again; releasing o1 again gives nothing back.
    buyer.buy("o3", item("a")).await;
    let again = buyer.release("o1").await;
    assert!(again.replayed);
    assert_eq!(again.items, order);
    let s = buyer.status().await;
    assert_eq!(s.count("total", ""), 2);
    assert_eq!(s.count("item", "a"), 1, "o3's count is untouched");
    // A replayed acquire of a released order counts nothing either.
    assert!(buyer.buy("o1", order.clone()).await.replayed);
    assert_eq!(buyer.total().await, 2);

    // Unknown orders are NOT_FOUND.
    assert_eq!(
        code(c.limit_release("flash-sale", u, "never").await),
        ErrorCode::NotFound
    );
    assert_eq!(
        code(c.limit_release("flash-sale", "other-user", "o2").await),
        ErrorCode::NotFound
    );

    // Releasing an order of a day that has ended leaves today's counts alone.
    c.clock_advance(Duration::from_millis(DAY)).await.unwrap();
    buyer.buy("o4", item("c")).await;
    let r = buyer.release("o2").await;
    assert!(!r.replayed);
    let s = buyer.status().await;
    assert_eq!(s.count("item", "c"), 1);
    assert_eq!(s.count("total", ""), 1);
    node.stop().await;
}

#[tokio::test]
async fn fixed_windows_reset_on_their_boundary() {
    let node = TestNode::start().await;
    let c = &node.client;
    c.limit_policy_set(policy(
        "per-minute",
        &[("total", Scope::Total, 2, "fixed:60")],
    ))
    .await
    .unwrap();
    let buyer = Buyer::new(c, "per-minute", "u");
    // Start early in a minute so the test's own requests stay in it.
    early_in_a_minute(c).await;
    let boundary = (now(c).await / 60_000 + 1) * 60_000;
    buyer.buy("o1", item("x")).await;
    let r = buyer.buy("o2", item("x")).await;
    assert_eq!(r.allowances[0].resets_at_ms, boundary);
    buyer.denied("o3", item("x")).await;
    // (The node clock runs on in real time, so "just before" leaves the
    // test 20 s to get its request in.)
    advance_to(c, boundary - 20_000).await;
    buyer.denied("o3", item("x")).await;
    c.clock_advance(Duration::from_millis(21_000))
        .await
        .unwrap();
    buyer.buy("o3", item("x")).await;
    node.stop().await;
}

#[tokio::test]
async fn sliding_windows_forget_each_acquisition_after_the_window() {
    let node = TestNode::start().await;
    let c = &node.client;
    // 60 s in 6 buckets of 10 s: an acquisition counts for more than 60 s
    // and at most 70 s.
    c.limit_policy_set(policy(
        "sliding",
        &[("recent", Scope::Total, 2, "sliding:60/6")],
    ))
    .await
    .unwrap();
    let buyer = Buyer::new(c, "sliding", "u");
    let t0 = now(c).await;
    let first = buyer.buy("o1", item("x")).await;
    let resets = first.allowances[0].resets_at_ms;
    // (t0 was read before the acquire: allow the time it took.)
    assert!(
        resets > t0 + 60_000 && resets <= t0 + 75_000,
        "{resets} vs {t0}"
    );
    assert_eq!(resets % 10_000, 0, "a bucket boundary");

    // 30 s later a second one; a third is over the limit.
    c.clock_advance(Duration::from_secs(30)).await.unwrap();
    let second = buyer.buy("o2", item("x")).await;
    assert_eq!(second.allowances[0].count, 2);
    assert_eq!(
        second.allowances[0].resets_at_ms, resets,
        "the oldest drops first"
    );
    buyer.denied("o3", item("x")).await;

    // Just before the first one's bucket stops counting (5 s before, as the
    // node clock runs on in real time): still 2.
    advance_to(c, resets - 5_000).await;
    assert_eq!(buyer.status().await.count("recent", ""), 2);
    buyer.denied("o3", item("x")).await;
    // From then on only the second counts.
    c.clock_advance(Duration::from_millis(6_000)).await.unwrap();
    assert_eq!(buyer.status().await.count("recent", ""), 1);
    let third = buyer.buy("o3", item("x")).await;
    assert_eq!(third.allowances[0].count, 2);
    // 80 s on, both of those are gone too.
    c.clock_advance(Duration::from_secs(80)).await.unwrap();
    let s = buyer.status().await;
    assert_eq!(s.count("recent", ""), 0);
    assert_eq!(s.get("recent", "").unwrap().resets_at_ms, 0);
    node.stop().await;
}

#[tokio::test]
async fn policies_set_at_run_time_reach_every_shard() {
    let node = TestNode::start_with(with_limits(SEED)).await;
    let c = &node.client;
    let mut def = policy(
        "coupon",
        &[
            ("per-coupon", Scope::Item, 1, "day"),
            ("weekly", Scope::Total, 3, "fixed:604800"),
        ],
    );
    let r = c.limit_policy_set(def.clone()).await.unwrap();
    assert!(r.created);
    // The node's default zone is written in.
    assert_eq!(r.policy.rules[0].window, Window::Day { tz: "UTC".into() });
    assert_eq!(c.limit_policy_get("coupon").await.unwrap(), r.policy);
    let names: Vec<String> = c
        .limit_policy_list()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, vec!["coupon", "flash-sale"]);

    // Users on both shards (slots below 8192 are shard 0 of 2).
    let users: Vec<String> = (0..100).map(|i| format!("user-{i}")).collect();
    let low = users
        .iter()
        .find(|u| key_slot(u.as_bytes()) < 8192)
        .unwrap();
    let high = users
        .iter()
        .find(|u| key_slot(u.as_bytes()) >= 8192)
        .unwrap();
    for u in [low, high] {
        let buyer = Buyer::new(c, "coupon", u);
        buyer.buy("o1", item("c1")).await;
        buyer.denied("o2", item("c1")).await;
    }

    // Replacing keeps counts of rules that keep their name and window.
    def.rules[0].max = 2;
    let r = c.limit_policy_set(def.clone()).await.unwrap();
    assert!(!r.created);
    let r = Buyer::new(c, "coupon", low).buy("o2", item("c1")).await;
    assert_eq!(r.allowances[0].count, 2);

    // Bad definitions change nothing.
    let mut bad = def.clone();
    bad.rules[0].window = Window::Day {
        tz: "Mars/Olympus".into(),
    };
    assert_eq!(code(c.limit_policy_set(bad).await), ErrorCode::BadRequest);
    let mut bad = def.clone();
    bad.rules[1].name = "per-coupon".into();
    assert_eq!(code(c.limit_policy_set(bad).await), ErrorCode::BadRequest);
    assert_eq!(c.limit_policy_get("coupon").await.unwrap().rules[0].max, 2);
    assert_eq!(code(c.limit_policy_get("nope").await), ErrorCode::NotFound);
    node.stop().await;
}

#[tokio::test]
async fn graceful_restart_keeps_counts_orders_and_policies() {
    let mut node = TestNode::start_with(with_limits(SEED)).await;
    add_runtime_policy(&node.client).await;
    let buyer = Buyer::new(&node.client, "flash-sale", "u");
    for (i, sku) in ["a", "b", "c"].iter().enumerate() {
        buyer.buy(&format!("o{i}"), item(sku)).await;
    }
    node.restart().await;
    let c = &node.client;
    let buyer = Buyer::new(c, "flash-sale", "u");
    assert_eq!(buyer.total().await, 3);
    assert!(buyer.buy("o0", item("a")).await.replayed);
    runtime_policy_kept(c).await;
    node.stop().await;
}

/// A policy set at run time (not in the config), and user "u"'s first order
/// under it: what a restart must keep.
async fn add_runtime_policy(c: &Client) {
    c.limit_policy_set(policy("runtime", &[("total", Scope::Total, 2, "day")]))
        .await
        .unwrap();
    Buyer::new(c, "runtime", "u").buy("r1", item("a")).await;
}

/// [`add_runtime_policy`]'s policy is still there, with its count: one more
/// order fits under its total of two, and the next is denied.
async fn runtime_policy_kept(c: &Client) {
    assert_eq!(c.limit_policy_get("runtime").await.unwrap().rules[0].max, 2);
    let buyer = Buyer::new(c, "runtime", "u");
    assert_eq!(buyer.total().await, 1);
    buyer.buy("r2", item("b")).await;
    buyer.denied("r3", item("c")).await;
}

#[test]
fn counts_and_policies_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rushd.toml");
    std::fs::write(&config, SEED).unwrap();
    let data = dir.path().join("data");
    let args = ["--config", config.to_str().unwrap()];
    let rt = tokio::runtime::Runtime::new().unwrap();

    let mut d = Spawned::start(&data, &args);
    rt.block_on(async {
        let c = common::connect(d.addr).await;
        add_runtime_policy(&c).await;
        let buyer = Buyer::new(&c, "flash-sale", "u");
        for i in 0..3 {
            buyer.buy(&format!("o{i}"), item(&format!("s{i}"))).await;
        }
        buyer.release("o2").await;
    });
    // Every acknowledged acquisition was fsynced: a SIGKILL loses none.
    d.kill9();
    let d = Spawned::start(&data, &args);
    rt.block_on(async {
        let c = common::connect(d.addr).await;
        let buyer = Buyer::new(&c, "flash-sale", "u");
        let s = buyer.status().await;
        assert_eq!(s.count("total", ""), 2);
        assert_eq!(s.count("item", "s0"), 1);
        assert_eq!(s.count("item", "s2"), 0, "the release survived too");
        assert!(buyer.buy("o0", item("s0")).await.replayed);
        assert!(buyer.release("o2").await.replayed);
        runtime_policy_kept(&c).await;
    });
}

#[tokio::test]
async fn invalid_input_is_bad_request_and_changes_nothing() {
    let node = TestNode::start_with(with_limits(SEED)).await;
    let c = &node.client;
    let u = "careful";
    let buyer = Buyer::new(c, "flash-sale", u);
    buyer.buy("o0", item("a")).await;
    let before = buyer.status().await;
    // Each case is a valid order with one thing wrong.
    let valid = LimitAcquire {
        policy: "flash-sale".into(),
        user: bytes::Bytes::from_static(u.as_bytes()),
        order_id: "o1".into(),
        items: item("b"),
    };
    let with_items = |items: Vec<OrderItem>| LimitAcquire {
        items,
        ..valid.clone()
    };
    let long = "x".repeat(MAX_ID + 1);
    let cases = vec![
        (
            "unknown policy",
            LimitAcquire {
                policy: "nope".into(),
                ..valid.clone()
            },
        ),
        (
            "policy name",
            LimitAcquire {
                policy: "no such/policy".into(),
                ..valid.clone()
            },
        ),
        ("qty 0", with_items(vec![OrderItem::new("b", 0)])),
        (
            "qty over the maximum",
            with_items(vec![OrderItem::new("b", MAX_ORDER_QTY + 1)]),
        ),
        (
            "qty u64::MAX",
            with_items(vec![OrderItem::new("b", u64::MAX)]),
        ),
        ("no items", with_items(vec![])),
        (
            "too many items",
            with_items(
                (0..=MAX_ORDER_ITEMS)
                    .map(|i| OrderItem::new(format!("i{i}"), 1))
                    .collect(),
            ),
        ),
        (
            "an item twice",
            with_items(vec![OrderItem::new("b", 1), OrderItem::new("b", 1)]),
        ),
        (
            "long order id",
            LimitAcquire {
                order_id: long.clone(),
                ..valid.clone()
            },
        ),
        (
            "empty order id",
            LimitAcquire {
                order_id: String::new(),
                ..valid.clone()
            },
        ),
        ("long item id", with_items(item(&long))),
        ("empty item id", with_items(item(""))),
        (
            "long user",
            LimitAcquire {
                user: vec![b'u'; MAX_KEY + 1].into(),
                ..valid.clone()
            },
        ),
        (
            "empty user",
            LimitAcquire {
                user: bytes::Bytes::new(),
                ..valid.clone()
            },
        ),
    ];
    for (what, req) in cases {
        let e = c.call(req).await.unwrap_err();
        assert_eq!(e.code(), Some(ErrorCode::BadRequest), "{what}: {e}");
    }
    assert_eq!(code(c.limit_status("nope", u).await), ErrorCode::BadRequest);
    assert_eq!(
        code(c.limit_release("nope", u, "o0").await),
        ErrorCode::BadRequest
    );
    let e = c
        .call(LimitStatus {
            policy: "flash-sale".into(),
            user: bytes::Bytes::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::BadRequest));
    assert_eq!(buyer.status().await, before);
    // "o1" was never recorded: it can be used now, and counts normally.
    let r = buyer.buy("o1", item("b")).await;
    assert!(!r.replayed);
    assert_eq!(r.allowances[1].count, 2);
    node.stop().await;
}

#[tokio::test]
async fn the_seed_as_one_batch_and_as_one_acquire() {
    let node = TestNode::start_with(with_limits(SEED)).await;
    let c = &node.client;
    // The seed's five commands as one atomic BATCH: the keys share the
    // {user} hashtag, so one slot.
    let replies = common::seed_batch(
        c,
        "mall:sale:freq:ctrl:{860000000000001}",
        "mall:sale:order:{860000000000001}:o1",
    )
    .await;
    assert_eq!(replies, common::SEED_BATCH_REPLIES);
    // The same rule as one LIMIT_ACQUIRE, routed by the same hashtag rule:
    // checked, counted, idempotent and resetting at local midnight.
    let user = "{860000000000001}";
    let buyer = Buyer::new(c, "flash-sale", user);
    let order = vec![OrderItem::new("sku-1", 1), OrderItem::new("sku-2", 1)];
    let r = buyer.buy("o1", order.clone()).await;
    assert_eq!(r.allowances.len(), 3);
    assert_eq!(
        key_slot(user.as_bytes()),
        key_slot(b"mall:sale:freq:ctrl:{860000000000001}")
    );
    // Run twice, the BATCH would have written twice; the acquire counts once.
    assert!(buyer.buy("o1", order).await.replayed);
    assert_eq!(buyer.total().await, 2);
    node.stop().await;
}

#[tokio::test]
async fn durability_is_sync_unless_the_policy_is_relaxed() {
    let node = TestNode::start_with(with_limits(
        r#"
[limits.policies.strict]
window = "fixed:3600"
total_max = 100

[limits.policies.loose]
durability = "relaxed"
window = "fixed:3600"
total_max = 100
"#,
    ))
    .await;
    let (loose, strict) = (
        Buyer::new(&node.client, "loose", "u"),
        Buyer::new(&node.client, "strict", "u"),
    );
    let syncs = || node.running().storage().stats.syncs.get();
    let before = syncs();
    loose.buy("o1", item("a")).await;
    loose.release("o1").await;
    assert_eq!(syncs(), before, "relaxed: written without an fsync");
    strict.buy("o1", item("a")).await;
    assert_eq!(syncs(), before + 1, "sync: fsynced before the answer");
    strict.release("o1").await;
    assert_eq!(syncs(), before + 2);
    // Status reads write nothing.
    strict.status().await;
    assert_eq!(syncs(), before + 2);
    node.stop().await;
}

#[tokio::test]
async fn expired_counters_and_orders_are_compacted_away() {
    let node = TestNode::start_with(with_limits(
        r#"
[limits]
order_retention_secs = 7200

[limits.policies.minute]
window = "fixed:60"
item_max = 5
total_max = 10
"#,
    ))
    .await;
    let c = &node.client;
    let u = "compact-me";
    let buyer = Buyer::new(c, "minute", u);
    // Early in a minute, so the three land in one window.
    early_in_a_minute(c).await;
    for i in 0..3 {
        buyer.buy(&format!("o{i}"), item(&format!("s{i}"))).await;
    }
    let slot = key_slot(u.as_bytes());
    // What RocksDB holds, once it holds every committed write.
    node.running().write_back().await;
    let storage = node.running().storage().clone();
    let shard = rush_daemon::shard::route::shard_of_slot(slot, storage.shards());
    let raw = |ks: u8| {
        let (from, to) = keys::keyspace_range(slot, ks);
        storage.count_raw(shard, &from, &to).unwrap()
    };
    assert_eq!(
        raw(keys::ks::LIMIT_BOOK),
        1,
        "three items and the total, in the user's book"
    );
    assert_eq!(raw(keys::ks::LIMIT_ORDER), 3);
    c.clock_advance(Duration::from_secs(61)).await.unwrap();
    c.compact().await.unwrap();
    assert_eq!(
        raw(keys::ks::LIMIT_BOOK),
        0,
        "a book ends with its last count's window"
    );
    assert_eq!(
        raw(keys::ks::LIMIT_ORDER),
        3,
        "orders are kept for the retention"
    );
    assert!(buyer.buy("o0", item("s0")).await.replayed);
    c.clock_advance(Duration::from_secs(7200)).await.unwrap();
    c.compact().await.unwrap();
    assert_eq!(raw(keys::ks::LIMIT_ORDER), 0);
    node.stop().await;
}

#[tokio::test]
async fn metrics_count_outcomes_and_denials_by_rule() {
    let node = TestNode::start_with(with_limits(SEED)).await;
    let c = &node.client;
    let buyer = Buyer::new(c, "flash-sale", "m");
    buyer.buy("o1", item("a")).await;
    buyer.buy("o1", item("a")).await;
    buyer.denied("o2", item("a")).await;
    buyer.denied("o3", item("a")).await;
    buyer.release("o1").await;
    let _ = c.limit_status("unknown-policy", "m").await;
    let body = node.metrics().await;
    let value = |name: &str, labels: &[&str]| -> Option<u64> {
        body.lines()
            .find(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|x| l.contains(x)))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    };
    let acq = "rush_limit_acquires_total";
    let p = "policy=\"flash-sale\"";
    assert_eq!(value(acq, &[p, "outcome=\"allowed\""]), Some(1));
    assert_eq!(value(acq, &[p, "outcome=\"replayed\""]), Some(1));
    assert_eq!(value(acq, &[p, "outcome=\"limited\""]), Some(2));
    assert_eq!(
        value("rush_limit_denials_total", &[p, "rule=\"item\""]),
        Some(2)
    );
    assert_eq!(
        value("rush_limit_denials_total", &[p, "rule=\"total\""]),
        Some(0)
    );
    assert_eq!(
        value("rush_limit_releases_total", &[p, "outcome=\"released\""]),
        Some(1)
    );
    assert!(body.contains("rush_limit_unknown_policy_total 1"), "{body}");
    node.stop().await;
}

#[tokio::test]
async fn status_lists_at_most_a_thousand_items() {
    let node = TestNode::start_with(with_limits(
        r#"
[limits.policies.bulk]
window = "fixed:3600"
item_max = 1
total_max = 100000
"#,
    ))
    .await;
    let buyer = Buyer::new(&node.client, "bulk", "big-buyer");
    for o in 0..11 {
        let items = (0..MAX_ORDER_ITEMS).map(|i| OrderItem::new(format!("o{o:02}-i{i:03}"), 1));
        buyer.buy(&format!("order-{o}"), items).await;
    }
    let s = buyer.status().await;
    assert!(s.truncated);
    let items: Vec<&str> = s
        .allowances
        .iter()
        .filter(|a| a.rule == "item")
        .map(|a| a.item.as_str())
        .collect();
    assert_eq!(items.len(), 1000);
    assert_eq!(
        (items[0], items[999]),
        ("o00-i000", "o09-i099"),
        "in item order"
    );
    // The total is always there, and right.
    assert_eq!(s.count("total", ""), 1100);
    node.stop().await;
}
