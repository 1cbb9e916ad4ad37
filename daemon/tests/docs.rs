//! The map for newcomers stays true: every repository path ARCHITECTURE.md
//! names exists.

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
