//! `rush limit …` against a real in-process daemon: output and exit codes
//! (0 allowed, 2 limited, 1 error).

mod common;

use common::rush;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_commands() {
    let node = common::node().await;
    let addr = node.addr();
    // The policies count per UTC day and per Shanghai day: keep clear of
    // either midnight during the test, on the node's clock.
    let c = rush_client::Client::connect(&addr).await.unwrap();
    let now = c.clock_advance(Duration::ZERO).await.unwrap();
    const DAY: u64 = 86_400_000;
    let near_midnight = [0, 8 * 3_600_000].iter().any(|offset| {
        let next = ((now + offset) / DAY + 1) * DAY - offset;
        next - now < 10 * 60_000
    });
    if near_midnight {
        c.clock_advance(Duration::from_secs(15 * 60)).await.unwrap();
    }
    let run = |args: &'static [&'static str]| {
        let addr = addr.clone();
        async move { rush(&addr, args).await }
    };

    let o = run(&[
        "limit",
        "policy",
        "set",
        "flash",
        "--item-max",
        "1",
        "--total-max",
        "3",
        "--window",
        "day:Asia/Shanghai",
    ])
    .await;
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("created\n"), "{}", o.stdout);
    assert!(
        o.stdout.contains("policy flash durability sync"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout
            .contains("rule item per item max 1 window day:Asia/Shanghai"),
        "{}",
        o.stdout
    );
    assert!(o
        .stdout
        .contains("rule total per total max 3 window day:Asia/Shanghai"));
    let o = run(&["limit", "policy", "set", "flash", "--window", "day"]).await;
    assert_eq!(o.code, 64, "no maximum is a usage error: {}", o.stderr);
    assert!(o.stderr.contains("--item-max"), "{}", o.stderr);
    let o = run(&[
        "limit",
        "policy",
        "set",
        "bad",
        "--total-max",
        "1",
        "--window",
        "week",
    ])
    .await;
    assert_eq!(o.code, 64);
    assert!(o.stderr.contains("not a window"), "{}", o.stderr);

    // Allowed: exit 0 with the allowance.
    let o = run(&["limit", "acquire", "flash", "u1", "o1", "sku-1", "sku-2:1"]).await;
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("allowed\n"), "{}", o.stdout);
    assert!(
        o.stdout.contains("item sku-1 1/1 remaining 0 resets "),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("total (total) 2/3 remaining 1"),
        "{}",
        o.stdout
    );
    // A replay: still 0, says so, with the counts as they are now.
    let o = run(&["limit", "acquire", "flash", "u1", "o1", "sku-2", "sku-1"]).await;
    assert_eq!(o.code, 0);
    assert!(o.stdout.starts_with("allowed (replayed"), "{}", o.stdout);
    assert!(
        o.stdout.contains("total (total) 2/3 remaining 1"),
        "{}",
        o.stdout
    );
    // Limited: exit 2, naming the rule and item.
    let o = run(&["limit", "acquire", "flash", "u1", "o2", "sku-1"]).await;
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.starts_with("limited\n"), "{}", o.stdout);
    assert!(
        o.stdout
            .contains("rule item item sku-1: 1 counted + 1 requested > limit 1"),
        "{}",
        o.stdout
    );
    let o = run(&["limit", "acquire", "flash", "u1", "o2", "sku-3:2"]).await;
    assert_eq!(o.code, 2);
    assert!(
        o.stdout
            .contains("rule item item sku-3: 0 counted + 2 requested"),
        "{}",
        o.stdout
    );
    // Errors: exit 1.
    let o = run(&["limit", "acquire", "nope", "u1", "o3", "sku-1"]).await;
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("BAD_REQUEST"), "{}", o.stderr);
    let o = run(&["limit", "acquire", "flash", "u1", "o3", "sku-1:0"]).await;
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("BAD_REQUEST"), "{}", o.stderr);

    // For scripts: the same answers as JSON, limited still exit 2.
    let o = run(&["--json", "limit", "acquire", "flash", "u1", "o2", "sku-1"]).await;
    assert_eq!(o.code, 2);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["allowed"], false);
    assert_eq!(j["denial"]["item"], "sku-1");
    assert_eq!(j["denial"]["limit"], 1);
    let j = common::json(&addr, &["limit", "status", "flash", "u1"]).await;
    assert_eq!(j["truncated"], false);
    assert_eq!(j["allowances"][0]["item"], "sku-1");
    assert_eq!(j["allowances"][2]["item"], serde_json::Value::Null);
    assert_eq!(j["allowances"][2]["count"], 2);
    assert!(j["allowances"][2]["resets_at"]
        .as_str()
        .unwrap()
        .ends_with('Z'));

    let o = run(&["limit", "status", "flash", "u1"]).await;
    assert_eq!(o.code, 0);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", o.stdout);
    assert!(lines[0].starts_with("item sku-1 1/1"));
    assert!(lines[1].starts_with("item sku-2 1/1"));
    assert!(lines[2].starts_with("total (total) 2/3"));

    let o = run(&["limit", "release", "flash", "u1", "o1"]).await;
    assert_eq!(o.code, 0);
    assert_eq!(o.stdout, "released\nsku-1 1\nsku-2 1\n");
    let o = run(&["limit", "release", "flash", "u1", "o1"]).await;
    assert_eq!(o.code, 0);
    assert!(o.stdout.starts_with("already released"), "{}", o.stdout);
    // A replay of the released order says so, with the counts of now.
    let o = run(&["limit", "acquire", "flash", "u1", "o1", "sku-1", "sku-2"]).await;
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("released (replayed"), "{}", o.stdout);
    assert!(
        o.stdout.contains("item sku-1 0/1 remaining 1"),
        "{}",
        o.stdout
    );
    assert!(
        o.stdout.contains("total (total) 0/3 remaining 3"),
        "{}",
        o.stdout
    );
    let j = common::json(
        &addr,
        &["limit", "acquire", "flash", "u1", "o1", "sku-1", "sku-2"],
    )
    .await;
    assert_eq!(j["replayed"], true);
    assert_eq!(j["released"], true);
    assert_eq!(j["allowed"], false);
    let o = run(&["limit", "release", "flash", "u1", "never"]).await;
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("NOT_FOUND"), "{}", o.stderr);
    let o = run(&["limit", "status", "flash", "u1"]).await;
    assert_eq!(o.stdout.lines().count(), 1, "{}", o.stdout);
    assert!(o.stdout.starts_with("total (total) 0/3"));

    let o = run(&["limit", "policy", "get", "flash"]).await;
    assert_eq!(o.code, 0);
    assert!(o.stdout.starts_with("policy flash durability sync\n"));
    let o = run(&["limit", "policy", "get", "nope"]).await;
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("NOT_FOUND"));
    let o = run(&[
        "limit",
        "policy",
        "set",
        "burst",
        "--total-max",
        "10",
        "--window",
        "sliding:60",
        "--relaxed",
    ])
    .await;
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        o.stdout
            .contains("rule total per total max 10 window sliding:60/60"),
        "{}",
        o.stdout
    );
    let o = run(&["limit", "policy", "list"]).await;
    assert_eq!(
        o.stdout
            .lines()
            .filter(|l| l.starts_with("policy "))
            .collect::<Vec<_>>(),
        vec![
            "policy burst durability relaxed",
            "policy flash durability sync"
        ]
    );
    node.stop().await;
}
