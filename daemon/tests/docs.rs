//! The documents stay true: every repository path ARCHITECTURE.md names
//! exists, and a real node's INFO rows are the ones PROTOCOL.md lists.

mod common;

use std::path::Path;

#[test]
fn every_path_architecture_md_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    // Paths are written in backticks and start with a top-level folder.
    let tops = [
        "protocol/",
        "daemon/",
        "client/",
        "bench/",
        "deploy/",
        "scripts/",
    ];
    let mut named = 0;
    let mut missing = Vec::new();
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 0 || !tops.iter().any(|t| part.starts_with(t)) {
            continue;
        }
        named += 1;
        if !root.join(part).exists() {
            missing.push(part.to_string());
        }
    }
    assert!(
        named >= 20,
        "only {named} paths found: is the file still a map?"
    );
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names missing paths: {missing:?}"
    );
}

/// INFO as a real node sends it matches PROTOCOL.md's list of rows: every
/// row the node sends is documented, in the documented order, and a node
/// outside a cluster sends at least every row that isn't about the cluster.
#[tokio::test]
async fn info_rows_are_the_documented_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("protocol/PROTOCOL.md")).expect("PROTOCOL.md");
    let listed = doc
        .split("### INFO (0x03)")
        .nth(1)
        .and_then(|s| s.split("in that order").next())
        .expect("PROTOCOL.md's INFO section lists its rows");
    let documented: Vec<&str> = listed
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    assert!(documented.len() >= 20, "rows found: {documented:?}");

    let node = common::TestNode::start().await;
    let info = node.client.info().await.unwrap();
    let sent: Vec<&str> = info.rows.iter().map(|(name, _)| name.as_str()).collect();
    let mut at = documented.iter();
    for name in &sent {
        assert!(
            at.any(|d| d == name),
            "INFO row {name:?} is undocumented or out of order; sent {sent:?}, documented {documented:?}"
        );
    }
    for name in documented.iter().filter(|d| !d.starts_with("cluster_")) {
        assert!(
            sent.contains(name),
            "a standalone node sends no {name:?} row; sent {sent:?}"
        );
    }
}
