//! The `rush` command line against a real node: key commands, output for
//! people and for scripts, errors and exit codes, timeouts, help and
//! completions.

mod common;

use common::{node, node_with, rush_args};
use std::process::Command;
use std::time::{Duration, Instant};

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
async fn ttl_for_people_and_scripts() {
    let n = node().await;
    let addr = n.addr();
    let c = rush_client::Client::connect(&addr).await.unwrap();
    n.ok(&["set", "n", "1"]).await;
    assert_eq!(n.ok(&["ttl", "n"]).await, "(no expiry)\n");
    assert_eq!(n.ok(&["ttl", "n", "--raw"]).await, "-1\n");
    assert_eq!(n.ok(&["ttl", "missing"]).await, "(missing)\n");
    assert_eq!(n.ok(&["ttl", "missing", "--raw"]).await, "-2\n");
    assert_eq!(n.ok(&["ttl", "missing", "--ms"]).await, "-2\n");
    assert_eq!(n.ok(&["expire", "n", "30d"]).await, "1\n");
    // An hour later on the node's clock: 30 days less an hour (and the
    // milliseconds the commands took).
    c.clock_advance(Duration::from_secs(3600)).await.unwrap();
    assert_eq!(n.ok(&["ttl", "n"]).await, "29d 22h 59m\n");
    let secs: u64 = n.ok(&["ttl", "n", "--raw"]).await.trim().parse().unwrap();
    let left = 30 * 86_400 - 3600;
    assert!((left - 60..=left).contains(&secs), "{secs}");
    let ms: u64 = n.ok(&["ttl", "n", "--ms"]).await.trim().parse().unwrap();
    assert!((left * 1000 - 60_000..=left * 1000).contains(&ms), "{ms}");
    let j = common::json(&addr, &["ttl", "n"]).await;
    assert_eq!(j["exists"], true);
    let ttl_ms = j["ttl_ms"].as_u64().unwrap();
    assert!(
        (left * 1000 - 60_000..=left * 1000).contains(&ttl_ms),
        "{j}"
    );
    assert_eq!(
        common::json(&addr, &["ttl", "missing"]).await,
        serde_json::json!({ "exists": false, "ttl_ms": null })
    );
    assert_eq!(n.ok(&["expire", "n", "--persist"]).await, "1\n");
    assert_eq!(n.ok(&["ttl", "n"]).await, "(no expiry)\n");
    // Half a minute left: seconds, not days.
    n.ok(&["expire", "n", "90s"]).await;
    c.clock_advance(Duration::from_secs(60)).await.unwrap();
    let out = n.ok(&["ttl", "n"]).await;
    assert!(out.ends_with("s\n") && !out.contains('m'), "{out}");
    n.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_answers() {
    let n = node().await;
    let addr = n.addr();
    let j = |args: &'static [&'static str]| {
        let addr = addr.clone();
        async move { common::json(&addr, args).await }
    };
    assert_eq!(j(&["ping"]).await, "PONG");
    assert_eq!(j(&["set", "k", "v"]).await, true);
    assert_eq!(j(&["set", "k", "w", "--nx"]).await, false);
    assert_eq!(j(&["get", "k"]).await, "v");
    assert_eq!(j(&["get", "nothing"]).await, serde_json::Value::Null);
    assert_eq!(j(&["incrby", "n", "-3"]).await, -3);
    assert_eq!(j(&["hset", "h", "a", "1", "b", "x y"]).await, 2);
    assert_eq!(
        j(&["hgetall", "h"]).await,
        serde_json::json!({ "a": "1", "b": "x y" })
    );
    assert_eq!(j(&["exists", "h"]).await, true);
    assert_eq!(j(&["keyslot", "foo"]).await, 12182);
    let info = j(&["info"]).await;
    assert_eq!(info["shards"], "2", "{info}");
    let slots = j(&["cluster", "slots"]).await;
    assert_eq!(slots["epoch"], 0);
    assert_eq!(slots["nodes"][0]["ranges"][0], "0-16383");
    assert_eq!(slots["nodes"][0]["slots"], 16384);
    n.stop().await;
}

/// A server error is printed once, for every kind of error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_printed_once() {
    let secrets = tempfile::tempdir().unwrap();
    let (clients, admins) = (
        secrets.path().join("clients"),
        secrets.path().join("admins"),
    );
    std::fs::write(&clients, "shop:client-secret-1\n").unwrap();
    std::fs::write(&admins, "ops:admin-secret-1\n").unwrap();
    let n = node_with(|c| {
        c.auth.token_file = Some(clients.clone());
        c.auth.admin_token_file = Some(admins.clone());
    })
    .await;
    let addr = n.addr();
    let rush = |token: &'static str, args: &'static [&'static str]| {
        let addr = addr.clone();
        async move {
            let mut full = vec!["--addr", &addr, "--token", token];
            full.extend_from_slice(args);
            rush_args(&full).await
        }
    };
    let once = |out: &common::Out, code: &str| {
        assert_eq!(out.code, 1, "{code}: {}", out.stderr);
        assert_eq!(
            out.stderr.matches(code).count(),
            1,
            "{code} printed once: {}",
            out.stderr
        );
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.starts_with(&format!("error: {code}: ")));
    };
    let c = "client-secret-1";
    once(&rush(c, &["shorten", "not-a-url"]).await, "BAD_REQUEST");
    once(&rush(c, &["link", "info", "nothing"]).await, "NOT_FOUND");
    assert_eq!(rush(c, &["hset", "h", "f", "v"]).await.code, 0);
    once(&rush(c, &["get", "h"]).await, "WRONG_TYPE");
    once(&rush(c, &["compact"]).await, "FORBIDDEN");
    once(&rush("guess", &["ping"]).await, "UNAUTHORIZED");
    assert_eq!(rush("admin-secret-1", &["compact"]).await.code, 0);
    n.stop().await;
}

/// Usage errors exit 64 — clap's and those found after it — and reach no
/// node; `--help` is not an error; the codes are documented.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_have_their_own_exit_code() {
    let n = node().await;
    for args in [
        &["set", "k", "v", "--ttl", "10x"][..],
        &["set", "k", "v", "--ttl", "soon"],
        &["hset", "h", "f1", "v1", "f2"],
        &["hset", "h", "f1"],
        &["expire", "k"],
        &["expire", "k", "1d", "--persist"],
        &["nonsense"],
        &["get"],
        &["set", "k", "v", "--bogus"],
        &["incrby", "n", "1.5"],
        &["shorten", "https://e.com", "--ttl", "forever"],
        &["shorten", "https://e.com", "--alias", "a", "--reuse"],
        &["link", "qr", "code"],
        &["limit", "policy", "set", "p", "--window", "day"],
        &[
            "envelope", "create", "--sender", "s", "--total", "-5", "--count", "2",
        ],
        &["envelope", "grab", "not-a-number", "bob"],
        &["catalog", "put", "o", "r", "novalue"],
        &["cluster", "migrate", "", "--to", "x"],
        &["completions", "tcsh"],
    ] {
        let out = n.rush(args).await;
        assert_eq!(out.code, 64, "rush {args:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.starts_with("error: "),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("--help"), "{args:?}: {}", out.stderr);
    }
    // Nothing was written by the refused commands.
    assert_eq!(n.ok(&["get", "k"]).await, "(nil)\n");
    assert_eq!(n.ok(&["hgetall", "h"]).await, "");
    // A bad --addr is a usage error too, and no command at all.
    assert_eq!(rush_args(&["--addr", "host:99999", "ping"]).await.code, 64);
    assert_eq!(rush_args(&[]).await.code, 64);
    // A server's refusal is an error (1), not a usage error.
    let out = n.rush(&["shorten", "javascript:alert(1)"]).await;
    assert_eq!(out.code, 1, "{}", out.stderr);

    let help = rush_args(&["--help"]).await;
    assert_eq!(help.code, 0);
    for line in [
        "Exit codes:",
        "  0   done",
        "  1   error",
        "  2   denied",
        "  3   envelope audit",
        "  64  usage",
    ] {
        assert!(help.stdout.contains(line), "{line:?} in\n{}", help.stdout);
    }
    assert_eq!(rush_args(&["--version"]).await.code, 0);
    assert_eq!(rush_args(&["get", "--help"]).await.code, 0);
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

/// A loopback port nothing listens on (bound, then closed).
fn dead_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// `--timeout` bounds a command that retries (its key's node is down), and
/// stderr says what it waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_bounds_retries_and_says_what_it_waits_for() {
    use rush_client::protocol::cmd::ClusterSlotsReply;
    let n = node().await;
    let addr = n.addr();
    let dead = dead_addr();
    // A cluster of the live node and one that is down: the upper half of
    // the slots is served by nobody.
    let c = rush_client::Client::connect(&addr).await.unwrap();
    let id = c.info().await.unwrap().get("node_id").unwrap().to_string();
    let map = ClusterSlotsReply::even(1, vec![(id, addr.clone()), ("down".into(), dead.clone())]);
    c.cluster_setmap_on(&addr, map).await.unwrap();
    let key_in = |upper: bool| {
        (0..)
            .map(|i| format!("k{i}"))
            .find(|k| (rush_client::protocol::key_slot(k.as_bytes()) >= 8192) == upper)
            .unwrap()
    };
    let key = key_in(true);

    for (timeout, least) in [(1, 0.9), (3, 2.9)] {
        let t = timeout.to_string();
        let started = Instant::now();
        let out = n.rush(&["--timeout", &t, "get", &key]).await;
        let took = started.elapsed().as_secs_f64();
        assert_eq!(out.code, 1, "{}", out.stderr);
        // The whole --timeout is used, and not much more (the client's own
        // retry deadline used to be a fixed 10 s).
        assert!(took >= least, "--timeout {t} gave up after {took:.2}s");
        assert!(took < timeout as f64 + 3.0, "--timeout {t} took {took:.2}s");
        assert!(
            out.stderr.contains(&format!(
                "rush: waiting for {dead} (GET): connecting to {dead}: "
            )),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&format!("(--timeout {t})")),
            "{}",
            out.stderr
        );
        // Announced once (the reason did not change), then the error.
        assert_eq!(
            out.stderr.matches("rush: waiting for").count(),
            1,
            "{}",
            out.stderr
        );
        let last = out.stderr.lines().last().unwrap();
        assert!(
            last.starts_with(&format!("error: connecting to {dead}")),
            "{last}"
        );
    }
    // Keys on the live node answer at once.
    let started = Instant::now();
    assert_eq!(
        n.ok(&["--timeout", "1", "get", &key_in(false)]).await,
        "(nil)\n"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    n.stop().await;
}

/// An HTTP port given for --addr is named as such; a host alone means the
/// default protocol port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addresses() {
    let n = node_with(|c| c.server.http = "127.0.0.1:0".into()).await;
    let http = n.running().http_addr().unwrap().to_string();
    let out = rush_args(&["--addr", &http, "--timeout", "2", "ping"]).await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("that address speaks HTTP; the protocol port is 7379"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("over the limit"), "{}", out.stderr);
    // No port: 7379. (127.0.0.2 is loopback too; should something serve
    // there, it is still port 7379 that answered.)
    let out = rush_args(&["--addr", "127.0.0.2", "--timeout", "1", "ping"]).await;
    if out.code != 0 {
        assert!(
            out.stderr.contains("connecting to 127.0.0.2:7379: "),
            "{}",
            out.stderr
        );
    }
    let out = rush_args(&["--addr", "[::1]", "--timeout", "1", "ping"]).await;
    if out.code != 0 {
        assert!(out.stderr.contains("[::1]:7379"), "{}", out.stderr);
    }
    // The protocol port itself, with RUSH_ADDR.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rush"));
    cmd.env("RUSH_ADDR", n.addr()).arg("ping");
    assert_eq!(common::run(cmd).await.stdout, "PONG\n");
    n.stop().await;
}

/// Help: global options under their own heading, every option described,
/// and no node options for the commands that need no node.
#[test]
fn help() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_rush"))
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    /// The option lines of a help text's section.
    fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
        text.split("\n\n")
            .find(|s| s.starts_with(heading))
            .map(|s| s.lines().skip(1).collect())
            .unwrap_or_default()
    }
    for args in [&[][..], &["get"], &["cluster", "migrate"], &["link", "qr"]] {
        let text = help(args);
        assert!(text.contains("Usage"), "{args:?}");
        let globals = section(&text, "Global options:");
        for opt in ["--addr", "--token", "--timeout", "--json", "--tls-ca"] {
            assert!(
                globals.iter().any(|l| l.contains(opt)),
                "{args:?}: {opt} under Global options:\n{text}"
            );
            assert!(
                !section(&text, "Options:").iter().any(|l| l.contains(opt)),
                "{args:?}: {opt} among the command's own options:\n{text}"
            );
        }
    }
    // Options that used to have no description.
    for (args, opt) in [
        (&["expire"][..], "--persist"),
        (&["cluster", "migrate"], "--to"),
        (&["shorten"], "--ios"),
        (&["shorten"], "--android"),
        (&["link", "update"], "--ios"),
        (&["link", "update"], "--android"),
        (&["link", "qr"], "-o, --out"),
        (&["link", "qr"], "--svg"),
    ] {
        let text = help(args);
        let line = section(&text, "Options:")
            .into_iter()
            .find(|l| l.trim_start().starts_with(opt))
            .unwrap_or_else(|| panic!("{opt} in {args:?}:\n{text}"));
        // `  --svg  Write SVG…`: text after the option's own column.
        let described = line
            .trim_start()
            .split("  ")
            .filter(|part| !part.trim().is_empty())
            .count()
            >= 2;
        assert!(described, "{args:?} {opt} has no description: {line:?}");
    }
    for args in [&["keyslot"][..], &["completions"]] {
        let text = help(args);
        for opt in ["--addr", "--token", "--timeout", "--tls-ca"] {
            assert!(!text.contains(opt), "{args:?} offers {opt}:\n{text}");
        }
    }
}

/// `rush completions SHELL` prints a script the shell runs.
#[test]
fn completions() {
    let script = |shell: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_rush"))
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(script("zsh").starts_with("#compdef rush"));
    assert!(script("fish").contains("complete -c rush "));
    // Bash: load it and complete `rush sh<TAB>` and `rush link <TAB>`.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rush.bash");
    std::fs::write(&file, script("bash")).unwrap();
    let complete = |words: &str| {
        let probe = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}; \
             _rush rush \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            file.display()
        );
        let out = Command::new("bash").args(["-c", &probe]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let words = complete("rush sh");
    let first: Vec<&str> = words.lines().collect();
    assert_eq!(first, ["shorten"], "{words}");
    let link: Vec<String> = complete("rush link ''")
        .lines()
        .map(str::to_string)
        .collect();
    for sub in ["info", "update", "delete", "qr"] {
        assert!(link.iter().any(|w| w == sub), "{sub} in {link:?}");
    }
}
