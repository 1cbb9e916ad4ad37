//! `rush limit …` against a real in-process daemon: output and exit codes
//! (0 allowed, 2 limited, 1 error).

mod common;

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_commands() {
    let node = common::node().await;
    // The policies count per UTC day and per Shanghai day: keep clear of
    // either midnight during the test, on the node's clock.
    let c = rush_client::Client::connect(&node.addr()).await.unwrap();
    let now = c.clock_advance(Duration::ZERO).await.unwrap();
    const DAY: u64 = 86_400_000;
    let near_midnight = [0, 8 * 3_600_000].iter().any(|offset| {
        let next = ((now + offset) / DAY + 1) * DAY - offset;
        next - now < 10 * 60_000
    });
    if near_midnight {
        c.clock_advance(Duration::from_secs(15 * 60)).await.unwrap();
    }

    node.run("limit policy set flash --item-max 1 --total-max 3 --window day:Asia/Shanghai")
        .await
        .exits(0)
        .stdout_starts("created\n")
        .stdout_has("policy flash durability sync")
        .stdout_has("rule item per item max 1 window day:Asia/Shanghai")
        .stdout_has("rule total per total max 3 window day:Asia/Shanghai");
    // No maximum is a usage error.
    node.run("limit policy set flash --window day")
        .await
        .exits(64)
        .stderr_has("--item-max");
    node.run("limit policy set bad --total-max 1 --window week")
        .await
        .exits(64)
        .stderr_has("not a window");

    // Allowed: exit 0 with the allowance.
    node.run("limit acquire flash u1 o1 sku-1 sku-2:1")
        .await
        .exits(0)
        .stdout_starts("allowed\n")
        .stdout_has("item sku-1 1/1 remaining 0 resets ")
        .stdout_has("total (total) 2/3 remaining 1");
    // A replay: still 0, says so, with the counts as they are now.
    node.run("limit acquire flash u1 o1 sku-2 sku-1")
        .await
        .exits(0)
        .stdout_starts("allowed (replayed")
        .stdout_has("total (total) 2/3 remaining 1");
    // Limited: exit 2, naming the rule and item.
    node.run("limit acquire flash u1 o2 sku-1")
        .await
        .exits(2)
        .stdout_starts("limited\n")
        .stdout_has("rule item item sku-1: 1 counted + 1 requested > limit 1");
    node.run("limit acquire flash u1 o2 sku-3:2")
        .await
        .exits(2)
        .stdout_has("rule item item sku-3: 0 counted + 2 requested");
    // Errors: exit 1.
    for bad in ["nope u1 o3 sku-1", "flash u1 o3 sku-1:0"] {
        node.run(&format!("limit acquire {bad}"))
            .await
            .exits(1)
            .stderr_has("BAD_REQUEST");
    }

    // For scripts: the same answers as JSON, limited still exit 2.
    let o = node.run("--json limit acquire flash u1 o2 sku-1").await;
    o.exits(2);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(j["allowed"], false);
    assert_eq!(j["denial"]["item"], "sku-1");
    assert_eq!(j["denial"]["limit"], 1);
    let j = node.json("limit status flash u1").await;
    assert_eq!(j["truncated"], false);
    assert_eq!(j["allowances"][0]["item"], "sku-1");
    assert_eq!(j["allowances"][2]["item"], serde_json::Value::Null);
    assert_eq!(j["allowances"][2]["count"], 2);
    assert!(j["allowances"][2]["resets_at"]
        .as_str()
        .unwrap()
        .ends_with('Z'));

    let o = node.run("limit status flash u1").await;
    o.exits(0);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", o.stdout);
    assert!(lines[0].starts_with("item sku-1 1/1"));
    assert!(lines[1].starts_with("item sku-2 1/1"));
    assert!(lines[2].starts_with("total (total) 2/3"));

    let o = node.run("limit release flash u1 o1").await;
    o.exits(0);
    assert_eq!(o.stdout, "released\nsku-1 1\nsku-2 1\n");
    node.run("limit release flash u1 o1")
        .await
        .exits(0)
        .stdout_starts("already released");
    // A replay of the released order says so, with the counts of now.
    node.run("limit acquire flash u1 o1 sku-1 sku-2")
        .await
        .exits(0)
        .stdout_starts("released (replayed")
        .stdout_has("item sku-1 0/1 remaining 1")
        .stdout_has("total (total) 0/3 remaining 3");
    let j = node.json("limit acquire flash u1 o1 sku-1 sku-2").await;
    assert_eq!(j["replayed"], true);
    assert_eq!(j["released"], true);
    assert_eq!(j["allowed"], false);
    node.run("limit release flash u1 never")
        .await
        .exits(1)
        .stderr_has("NOT_FOUND");
    let o = node.run("limit status flash u1").await;
    assert_eq!(o.stdout.lines().count(), 1, "{}", o.stdout);
    o.stdout_starts("total (total) 0/3");

    node.run("limit policy get flash")
        .await
        .exits(0)
        .stdout_starts("policy flash durability sync\n");
    node.run("limit policy get nope")
        .await
        .exits(1)
        .stderr_has("NOT_FOUND");
    node.run("limit policy set burst --total-max 10 --window sliding:60 --relaxed")
        .await
        .exits(0)
        .stdout_has("rule total per total max 10 window sliding:60/60");
    let o = node.run("limit policy list").await;
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
