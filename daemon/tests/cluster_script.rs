//! `deploy/cluster.sh` does what its header says: up, status, a rolling
//! restart that keeps every node's data and the map, down.

mod common;

use rush_client::{Client, ClientOptions};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A base port with 12 free ports from it (3 nodes × protocol, HTTP,
/// RESP, redirects), below the ephemeral range: the rolling restart brings
/// every node back on its ports.
fn free_base() -> u16 {
    common::fixed_ports(12)
}

fn script(dir: &Path, rush: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/cluster.sh"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .env("RUSHD", env!("CARGO_BIN_EXE_rushd"))
        .env("RUSH", rush)
        .env("RUSHD_ARGS", "--shards 2")
        .env("RUSH_LOG", "warn")
        .output()
        .expect("bash runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_status_rolling_restart_down() {
    // The `rush` binary is built beside `rushd` by a workspace build; a
    // `cargo test -p rush-daemon` of its own may not have it.
    let rush: PathBuf = Path::new(env!("CARGO_BIN_EXE_rushd")).with_file_name("rush");
    if !rush.exists() {
        common::prerequisite_missing(
            &format!("{} is not built", rush.display()),
            "build the workspace (cargo test --workspace, or cargo build -p rush-client)",
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    let base = free_base();
    let (ok, out) = script(&dir, &rush, &["up", "3", "--base-port", &base.to_string()]);
    assert!(ok, "{out}");
    assert!(out.contains("cluster of 3 nodes up"), "{out}");
    assert!(
        out.contains(&format!(
            "node-2 127.0.0.1:{} slots=5461 10923-16383",
            base + 8
        )),
        "{out}"
    );
    for i in 0..3 {
        assert!(dir.join(format!("node-{i}.pid")).exists());
    }

    let (ok, out) = script(&dir, &rush, &["status"]);
    assert!(ok, "{out}");
    assert_eq!(out.matches("ready=200").count(), 3, "{out}");
    assert!(
        out.contains(&format!("resp=127.0.0.1:{}", base + 6)),
        "{out}"
    );
    assert!(out.contains("epoch 1"), "{out}");

    // Data written through any node, read through another, survives a
    // rolling restart.
    let opts = ClientOptions {
        retry_deadline: Duration::from_secs(30),
        ..ClientOptions::default()
    };
    let c = Client::connect_with(&format!("127.0.0.1:{base}"), opts.clone())
        .await
        .unwrap();
    for i in 0..100 {
        c.set(format!("k{i}"), format!("v{i}")).await.unwrap();
    }
    let (ok, out) = script(&dir, &rush, &["rolling-restart"]);
    assert!(ok, "{out}");
    assert_eq!(out.matches("restarted and ready").count(), 3, "{out}");
    let c = Client::connect_with(&format!("127.0.0.1:{}", base + 4), opts)
        .await
        .unwrap();
    for i in 0..100 {
        assert_eq!(
            c.get(format!("k{i}")).await.unwrap().as_deref(),
            Some(format!("v{i}").as_bytes())
        );
    }
    assert_eq!(c.cluster_map().unwrap().epoch, 1);
    // Each node's RESP listener is up at its place (protocol port + 2),
    // and redis-cli -c follows MOVED from any of them to the owner.
    for i in 0..3 {
        let resp = std::net::SocketAddr::from(([127, 0, 0, 1], base + 4 * i + 2));
        let Some(got) =
            common::redis_cli_session(resp, false, true, &["GET", &format!("k{}", 7 * i + 1)], "")
        else {
            return;
        };
        assert_eq!(got, format!("v{}", 7 * i + 1), "node-{i}'s RESP listener");
    }

    let (ok, out) = script(&dir, &rush, &["down"]);
    assert!(ok, "{out}");
    for i in 0..3 {
        assert!(!dir.join(format!("node-{i}.pid")).exists());
        assert!(
            TcpListener::bind(("127.0.0.1", base + 4 * i)).is_ok(),
            "node-{i} still listens"
        );
    }
    let (ok, out) = script(&dir, &rush, &["status"]);
    assert!(!ok && out.matches(" down").count() == 3, "{out}");
}
