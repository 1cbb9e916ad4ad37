//! `rush cluster …` and `rush --addr ANY_NODE …` against a real two-node
//! cluster (in-process nodes).

mod common;

use common::{node, ok};

/// A key whose slot is in `slots`.
fn key_in(prefix: &str, slots: std::ops::Range<u16>) -> String {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .find(|k| slots.contains(&rush_client::protocol::key_slot(k.as_bytes())))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_commands_and_routing() {
    let (a, b) = (node().await, node().await);
    let (aa, ba) = (a.addr(), b.addr());
    // A lone node: epoch 0, every slot.
    let out = ok(&aa, &["cluster", "slots"]).await;
    assert!(out.starts_with("epoch 0\n0-16383 "), "{out}");

    let out = ok(&aa, &["cluster", "create", &aa, &ba]).await;
    assert!(out.contains("cluster created: 2 nodes, epoch 1"), "{out}");
    assert!(
        out.contains(&format!("0-8191 {aa} ")) && out.contains(&format!("8192-16383 {ba} ")),
        "{out}"
    );
    // Again: refused without --replace (exit 1, nothing changed).
    let (code, _, err) = common::rush(&aa, &["cluster", "create", &aa, &ba])
        .await
        .parts();
    assert_eq!(code, 1);
    assert!(err.contains("--replace"), "{err}");

    let nodes = ok(&ba, &["cluster", "nodes"]).await;
    let lines: Vec<&str> = nodes.lines().collect();
    assert_eq!(lines[0], "epoch 1");
    assert!(
        lines[1].contains(&aa) && lines[1].contains("slots=8192 0-8191"),
        "{nodes}"
    );
    let b_id = lines[2].split_whitespace().next().unwrap().to_string();

    // Any node answers for any key: the CLI routes.
    let (on_a, on_b) = (key_in("k", 2..8190), key_in("k", 8192..16384));
    assert_eq!(ok(&aa, &["set", &on_b, "from-a"]).await, "OK\n");
    assert_eq!(ok(&ba, &["set", &on_a, "from-b"]).await, "OK\n");
    assert_eq!(ok(&ba, &["get", &on_b]).await, "from-a\n");
    assert_eq!(ok(&aa, &["get", &on_a]).await, "from-b\n");
    // Admin broadcasts reach every node.
    assert_eq!(ok(&aa, &["compact"]).await, "OK\n");

    // Move the slot of `on_a` (and its neighbours) to B, live.
    let slot = rush_client::protocol::key_slot(on_a.as_bytes());
    let range = format!("{}-{}", slot.saturating_sub(2), slot + 2);
    let moved = common::rush(&aa, &["cluster", "migrate", &range, "--to", &b_id]).await;
    assert_eq!(moved.code, 0, "{}", moved.stderr);
    let out = moved.stdout;
    assert!(out.starts_with("moved 5 slots to "), "{out}");
    assert!(out.contains("epoch 6"), "{out}");
    // Not a terminal: no progress line, only the final one.
    assert_eq!(moved.stderr, "", "no progress off a terminal");
    let slots = ok(&aa, &["cluster", "slots"]).await;
    assert!(
        slots.contains(&format!("{}-{} {ba} {b_id}", slot - 2, slot + 2)),
        "{slots}"
    );
    assert_eq!(ok(&aa, &["get", &on_a]).await, "from-b\n");
    // Bad slot specs are refused before anything moves.
    let (code, _, err) = common::rush(&aa, &["cluster", "migrate", "9-3", "--to", &b_id])
        .await
        .parts();
    assert_eq!(code, 64, "{err}");

    // On a terminal the move shows its progress on stderr, redrawn in place.
    // (Slots of A's away from those just moved.)
    let first = if slot > 4000 { 100 } else { 6000 };
    let out = std::process::Command::new("script")
        .args(["-qefc"])
        .arg(format!(
            "{} --addr {aa} cluster migrate {first}-{} --to {b_id}",
            env!("CARGO_BIN_EXE_rush"),
            first + 2
        ))
        .arg("/dev/null")
        .env_remove("RUSH_ADDR")
        .output()
        .expect("script(1), from util-linux");
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{tty}");
    for step in [
        "moving slots: 0/3 (0%), 0 keys, 0 B",
        "moving slots: 3/3 (100%)",
    ] {
        assert!(
            tty.contains(&format!("\r\x1b[2K{step}")),
            "{step:?} in {tty:?}"
        );
    }
    assert!(tty.contains("moved 3 slots to "), "{tty:?}");
    let next = (first + 3).to_string();
    let out = ok(&aa, &["--json", "cluster", "migrate", &next, "--to", &b_id]).await;
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (j["slots"].as_u64(), j["epoch"].as_u64()),
        (Some(1), Some(10)),
        "{j}"
    );

    // The map as a file, with a newer epoch, applied to every node.
    let toml = ok(&aa, &["cluster", "slots", "--toml"]).await;
    assert!(toml.starts_with("epoch = 10\n"), "{toml}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    std::fs::write(&file, toml.replace("epoch = 10", "epoch = 20")).unwrap();
    let out = ok(&aa, &["cluster", "apply", file.to_str().unwrap()]).await;
    assert_eq!(
        out.lines().filter(|l| l.ends_with(": epoch 20")).count(),
        2,
        "{out}"
    );
    // Applying an older map fails on every node, and says so.
    std::fs::write(&file, toml).unwrap();
    let (code, out, _) = common::rush(&aa, &["cluster", "apply", file.to_str().unwrap()])
        .await
        .parts();
    assert_eq!(code, 1);
    assert!(out.contains("CONFLICT"), "{out}");
    assert!(ok(&ba, &["cluster", "slots"])
        .await
        .starts_with("epoch 20\n"));
    a.stop().await;
    b.stop().await;
}
