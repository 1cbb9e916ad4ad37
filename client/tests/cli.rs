//! The `rush` command line against a real node.

mod common;

use common::node;
use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_commands() {
    let n = node().await;
    assert_eq!(n.ok(&["ping"]).await, "PONG\n");
    assert_eq!(n.ok(&["set", "greeting", "hello world"]).await, "OK\n");
    assert_eq!(n.ok(&["get", "greeting"]).await, "hello world\n");
    assert_eq!(n.ok(&["set", "greeting", "x", "--nx"]).await, "(not set)\n");
    assert_eq!(n.ok(&["get", "nothing"]).await, "(nil)\n");
    assert_eq!(n.ok(&["incrby", "n", "5"]).await, "5\n");
    assert_eq!(n.ok(&["incrby", "n", "-7"]).await, "-2\n");
    assert_eq!(n.ok(&["ttl", "n"]).await, "(no expiry)\n");
    assert_eq!(n.ok(&["expire", "n", "30d"]).await, "1\n");
    let ttl = n.ok(&["ttl", "n"]).await;
    assert!(
        ttl.ends_with("ms\n") || ttl.ends_with("s\n") || ttl.ends_with("d\n"),
        "{ttl}"
    );
    assert_eq!(n.ok(&["expire", "n", "--persist"]).await, "1\n");
    assert_eq!(n.ok(&["ttl", "n"]).await, "(no expiry)\n");
    assert_eq!(n.ok(&["set", "tmp", "v", "--ttl", "1h"]).await, "OK\n");
    assert_eq!(n.ok(&["exists", "tmp"]).await, "1\n");
    assert_eq!(n.ok(&["del", "tmp"]).await, "1\n");
    assert_eq!(n.ok(&["exists", "tmp"]).await, "0\n");
    assert_eq!(n.ok(&["hset", "h", "a", "1", "b", "2"]).await, "2\n");
    assert_eq!(n.ok(&["hget", "h", "b"]).await, "2\n");
    assert_eq!(n.ok(&["hincrby", "h", "a", "9"]).await, "10\n");
    assert_eq!(n.ok(&["hgetall", "h"]).await, "a 10\nb 2\n");
    assert_eq!(n.ok(&["hdel", "h", "a", "zz"]).await, "1\n");
    assert!(n.ok(&["info"]).await.contains("shards: 2\n"));
    assert!(n
        .ok(&["cluster", "slots"])
        .await
        .contains("0-16383 127.0.0.1:"));
    n.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_exit_non_zero() {
    let n = node().await;
    n.ok(&["hset", "h", "f", "v"]).await;
    let (code, _, err) = n.rush(&["get", "h"]).await.parts();
    assert_eq!(code, 1);
    assert!(err.contains("WRONG_TYPE"), "{err}");
    let (code, _, err) = n.rush(&["set", "k", "v", "--ttl", "soon"]).await.parts();
    assert_eq!(code, 1);
    assert!(err.contains("duration"), "{err}");
    let (code, _, _) = n.rush(&["hset", "h", "odd"]).await.parts();
    assert_ne!(code, 0);
    n.stop().await;
}

#[test]
fn keyslot_needs_no_node() {
    let out = Command::new(env!("CARGO_BIN_EXE_rush"))
        .args(["--addr", "127.0.0.1:1", "keyslot", "{user1000}.following"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3443\n");
    let out = Command::new(env!("CARGO_BIN_EXE_rush"))
        .args(["keyslot", "foo"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "12182\n");
}

#[test]
fn unreachable_node_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_rush"))
        .args(["--addr", "127.0.0.1:1", "ping"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("connecting to 127.0.0.1:1"));
}

#[test]
fn every_command_has_help() {
    for args in [
        vec!["--help"],
        vec!["set", "--help"],
        vec!["cluster", "--help"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_rush"))
            .args(&args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"));
    }
}
