//! `rush catalog …` against a real in-process daemon.

use rush_daemon::{Clock, Config};
use std::process::Output;

struct Node {
    _dir: tempfile::TempDir,
    running: Option<rush_daemon::Running>,
    addr: String,
}

async fn start() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::default();
    c.server.listen = "127.0.0.1:0".into();
    c.server.http = String::new();
    c.storage.data_dir = dir.path().to_path_buf();
    c.storage.shards = 2;
    c.storage.block_cache_mb = 16;
    c.storage.write_buffer_mb = 8;
    let running = rush_daemon::start(c, Clock::system()).await.unwrap();
    Node {
        addr: running.addr().to_string(),
        _dir: dir,
        running: Some(running),
    }
}

impl Node {
    /// Run `rush --addr ADDR catalog ARGS…` (off the runtime's threads).
    async fn rush(&self, args: &[&str]) -> Output {
        let mut full = vec!["--addr".to_string(), self.addr.clone(), "catalog".into()];
        full.extend(args.iter().map(|a| a.to_string()));
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_rush"))
                .args(&full)
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    }

    /// Run and expect success; stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.rush(args).await;
        assert!(
            out.status.success(),
            "rush catalog {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    async fn stop(mut self) {
        self.running.take().unwrap().shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_query_alias_delete() {
    let node = start().await;
    assert_eq!(
        node.ok(&["put", "M1", "c2", "plan=gold", "region=eu west"])
            .await,
        "created\n"
    );
    assert_eq!(
        node.ok(&[
            "put",
            "M1",
            "c1",
            "plan=basic",
            "--valid-from",
            "2026-01-01",
            "--valid-to",
            "2027-01-01T00:00:00Z"
        ])
        .await,
        "created\n"
    );
    assert_eq!(
        node.ok(&["put", "M1", "c2", "plan=gold", "region=eu west"])
            .await,
        "replaced\n"
    );
    assert_eq!(
        node.ok(&["query", "M1"]).await,
        "c1 [2026-01-01T00:00:00Z,2027-01-01T00:00:00Z) plan=basic\nc2 plan=gold region=eu west\n"
    );
    assert_eq!(
        node.ok(&["query", "M1", "plan=gold"]).await,
        "c2 plan=gold region=eu west\n"
    );
    assert_eq!(
        node.ok(&["query", "M1", "--at", "2028-06-01"]).await,
        "c2 plan=gold region=eu west\n"
    );
    assert_eq!(
        node.ok(&["query", "M1", "--at", "1767225600000", "plan=basic"])
            .await
            .lines()
            .count(),
        1
    );
    // None: nothing printed, exit 0.
    assert_eq!(node.ok(&["query", "nobody"]).await, "");
    assert_eq!(node.ok(&["query", "M1", "plan=platinum"]).await, "");

    assert_eq!(
        node.ok(&["alias", "name", "Acme Ltd", "M1"]).await,
        "created\n"
    );
    assert_eq!(node.ok(&["resolve", "name", "Acme Ltd"]).await, "M1\n");
    assert_eq!(node.ok(&["resolve", "name", "Nobody"]).await, "");
    assert_eq!(
        node.ok(&["query", "--alias", "name", "Acme Ltd", "plan=gold"])
            .await,
        "c2 plan=gold region=eu west\n"
    );
    assert_eq!(node.ok(&["query", "--alias", "name", "Nobody"]).await, "");
    assert_eq!(node.ok(&["unalias", "name", "Acme Ltd"]).await, "1\n");

    assert_eq!(node.ok(&["delete", "M1", "c1"]).await, "1\n");
    assert_eq!(node.ok(&["delete", "M1", "c1"]).await, "0\n");
    assert_eq!(node.ok(&["query", "M1"]).await.lines().count(), 1);
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_switches_and_errors() {
    let node = start().await;
    node.ok(&["put", "W1", "c1", "k=v"]).await;
    assert_eq!(node.ok(&["warm", "W1", "W2"]).await, "loaded 1 absent 1\n");
    assert_eq!(node.ok(&["shed", "on"]).await, "OK\n");
    assert_eq!(
        node.ok(&["query", "W1"]).await,
        "c1 k=v\n",
        "a cache hit answers while shed"
    );
    assert_eq!(node.ok(&["shed", "auto"]).await, "OK\n");
    assert_eq!(node.ok(&["shed", "off"]).await, "OK\n");
    assert_eq!(node.ok(&["rebuild"]).await, "rebuilding on 2 shards\n");

    let out = node.rush(&["shed", "sometimes"]).await;
    assert_eq!(out.status.code(), Some(2), "clap usage error");
    let out = node.rush(&["put", "", "c1", "k=v"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("BAD_REQUEST"));
    let out = node.rush(&["put", "W1", "c1", "novalue"]).await;
    assert_eq!(out.status.code(), Some(1));
    let out = node
        .rush(&["put", "W1", "c1", "--valid-from", "tomorrow"])
        .await;
    assert_eq!(out.status.code(), Some(1));
    let out = node.rush(&["query", "--alias", "name"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        node.ok(&["query", "W1"]).await,
        "c1 k=v\n",
        "nothing changed"
    );
    node.stop().await;
}
