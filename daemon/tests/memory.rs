//! The node's memory budget (`[memory]`): one setting sizes every cache and
//! buffer by its share, and INFO, RESP's INFO and /metrics show what each
//! part holds and may hold.

mod common;

use common::TestNode;
use rush_client::protocol::cmd::{CatalogFilter, EnvelopeCreate, Record};
use rush_client::Client;
use std::collections::BTreeMap;

const MIB: u64 = 1 << 20;

/// A node with a 256 MiB budget over its two shards.
async fn budgeted() -> TestNode {
    TestNode::start_with(|c| c.memory.budget_mb = 256).await
}

/// Traffic that fills every shard part: catalog owners written and
/// queried (hot cache, filters), keys written and read (row cache, held
/// writes), an envelope grabbed (hot state).
async fn traffic(c: &Client) {
    for i in 0..500 {
        let owner = format!("owner-{i}");
        c.catalog_put(owner.clone(), Record::new("c1").attr("plan", "basic"))
            .await
            .unwrap();
        assert_eq!(
            c.catalog_query(owner, &CatalogFilter::default())
                .await
                .unwrap()
                .len(),
            1
        );
        c.set(format!("k{i}"), vec![b'v'; 100]).await.unwrap();
        c.get(format!("k{i}")).await.unwrap().expect("written");
    }
    let mut create = EnvelopeCreate::new("sender", 10_000, 100);
    create.expires_in_ms = 3_600_000;
    let id = c.envelope_create(create).await.unwrap().id;
    for u in 0..50 {
        c.envelope_grab(id, format!("user-{u}")).await.unwrap();
    }
}

fn number(rows: &BTreeMap<String, String>, name: &str) -> u64 {
    rows.get(name)
        .unwrap_or_else(|| panic!("INFO has no {name}: {rows:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_sizes_every_part_and_info_and_metrics_show_them() {
    let node = budgeted().await;
    traffic(&node.client).await;
    // Shards publish their parts at their ticks; this runs one now.
    node.running().write_back().await;

    let info: BTreeMap<String, String> =
        node.client.info().await.unwrap().rows.into_iter().collect();
    assert_eq!(number(&info, "memory_budget_bytes"), 256 * MIB);
    // The split of deploy/rushd.toml's shares: 30 % block cache, 15 % row
    // cache, 15 % catalog cache, 10 % memtables (each of 2 shards' write
    // buffers a quarter of it, two per shard), 10 % held writes (a third
    // each buffer of 3).
    //
    // The row cache yields what no share sizes (the filters, the hot state
    // and the replication backlog), each shard from its own share.
    let unsized_parts: u64 = rush_daemon::memory::UNSIZED
        .iter()
        .map(|p| p.name())
        .map(|p| number(&info, &format!("memory_{p}_bytes")))
        .sum();
    assert!(unsized_parts > 0);
    let limits = [
        ("block_cache", 76 * MIB),
        ("row_cache", 38 * MIB - unsized_parts),
        ("catalog_cache", 38 * MIB),
        ("memtables", 6 * MIB * 2 * 2),
        ("write_back", 8 * MIB * 3),
    ];
    for (part, limit) in limits {
        assert_eq!(
            number(&info, &format!("memory_{part}_limit_bytes")),
            limit,
            "{part}"
        );
        let held = number(&info, &format!("memory_{part}_bytes"));
        assert!(held <= limit, "{part} holds {held} over its {limit}");
    }
    let sized: u64 = limits.iter().map(|(_, l)| l).sum::<u64>() + unsized_parts;
    assert!(sized <= 256 * MIB * 80 / 100, "headroom is left: {sized}");
    // What the traffic put in memory is counted where it lives.
    for part in [
        "row_cache",
        "catalog_cache",
        "catalog_filters",
        "hot_state",
        "key_filters",
    ] {
        assert!(
            number(&info, &format!("memory_{part}_bytes")) > 0,
            "{part} holds nothing: {info:?}"
        );
    }
    // Parts no setting sizes have no limit row.
    assert!(!info.contains_key("memory_hot_state_limit_bytes"));
    assert!(!info.contains_key("memory_key_filters_limit_bytes"));
    assert!(number(&info, "rss_bytes") > 0);

    // /metrics: the same limits, and a series per part.
    let text = node.metrics().await;
    let sample = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{series} missing from\n{text}"))
    };
    assert_eq!(sample("rush_memory_budget_bytes"), (256 * MIB) as f64);
    for (part, limit) in limits {
        assert_eq!(
            sample(&format!("rush_memory_limit_bytes{{part=\"{part}\"}}")),
            limit as f64
        );
    }
    for part in rush_daemon::memory::Part::ALL {
        sample(&format!("rush_memory_bytes{{part=\"{}\"}}", part.name()));
    }
    assert!(sample("rush_memory_bytes{part=\"catalog_cache\"}") > 0.0);

    // RESP's INFO: the budget is maxmemory, the parts are Rush's rows.
    let resp = node.running().resp_addr().expect("RESP on");
    match common::redis_cli(resp, false, &["INFO", "memory"]) {
        Some(out) => {
            assert!(out.contains(&format!("maxmemory:{}", 256 * MIB)), "{out}");
            assert!(out.contains("rush_memory_catalog_cache_bytes:"), "{out}");
            assert!(
                out.contains(&format!(
                    "rush_memory_catalog_cache_limit_bytes:{}",
                    38 * MIB
                )),
                "{out}"
            );
            assert!(out.contains("rush_memory_row_cache_limit_bytes:"), "{out}");
        }
        None => common::prerequisite_missing(
            "redis-cli is not installed",
            "run scripts/ensure-deps --redis (Debian package redis-tools)",
        ),
    }
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_budget_each_part_keeps_its_own_setting() {
    let node = TestNode::start_with(|c| {
        c.storage.block_cache_mb = 24;
        c.storage.row_cache_mb = 10;
        c.catalog.cache_mb = 12;
    })
    .await;
    traffic(&node.client).await;
    node.running().write_back().await;
    let info: BTreeMap<String, String> =
        node.client.info().await.unwrap().rows.into_iter().collect();
    assert_eq!(number(&info, "memory_budget_bytes"), 0);
    assert_eq!(number(&info, "memory_block_cache_limit_bytes"), 24 * MIB);
    assert_eq!(number(&info, "memory_row_cache_limit_bytes"), 10 * MIB);
    assert_eq!(number(&info, "memory_catalog_cache_limit_bytes"), 12 * MIB);
    // Config::small's 8 MiB write buffers, two per shard, two shards.
    assert_eq!(number(&info, "memory_memtables_limit_bytes"), 32 * MIB);
    assert!(number(&info, "memory_catalog_cache_bytes") > 0);
    node.stop().await;
}
