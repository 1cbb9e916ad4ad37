//! Support for the CLI tests: an in-process node on a real RocksDB in a
//! temporary directory, and the real `rush` binary run against it.
#![allow(dead_code)]

use rush_daemon::{Clock, Config, Running};
use std::process::Command;

#[allow(unused_imports)]
pub use rush_test_support::{fixed_listen_addr, fixed_ports};

pub struct Node {
    _dir: tempfile::TempDir,
    running: Option<Running>,
}

/// A node on loopback port 0 with two shards, small caches and clock
/// control.
pub async fn node() -> Node {
    node_with(|_| {}).await
}

/// Like [`node`], with `configure` applied to the config first.
pub async fn node_with(configure: impl FnOnce(&mut Config)) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::small(dir.path());
    c.debug.clock_control = true;
    configure(&mut c);
    let running = rush_daemon::start(c, Clock::system()).await.unwrap();
    Node {
        _dir: dir,
        running: Some(running),
    }
}

impl Node {
    pub fn running(&self) -> &Running {
        self.running.as_ref().expect("running")
    }

    pub fn addr(&self) -> String {
        self.running().addr().to_string()
    }

    /// `rush --addr NODE args…`.
    pub async fn rush(&self, args: &[&str]) -> Out {
        rush(&self.addr(), args).await
    }

    /// `rush --addr NODE args…`, which must succeed: its stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        ok(&self.addr(), args).await
    }

    /// `rush --addr NODE` with the words of `line` as its arguments, as a
    /// shell would split them (an argument holding a space goes through
    /// [`Node::rush`]).
    pub async fn run(&self, line: &str) -> Out {
        let args: Vec<&str> = line.split_whitespace().collect();
        self.rush(&args).await
    }

    /// [`Node::run`] with `--json`, which must succeed: its stdout parsed.
    pub async fn json(&self, line: &str) -> serde_json::Value {
        let args: Vec<&str> = line.split_whitespace().collect();
        json(&self.addr(), &args).await
    }

    pub async fn stop(mut self) {
        self.running.take().unwrap().shutdown().await.unwrap();
    }
}

/// What a `rush` run printed, and its exit code.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// (exit code, stdout, stderr).
    pub fn parts(self) -> (i32, String, String) {
        (self.code, self.stdout, self.stderr)
    }

    /// Asserts the exit code.
    #[track_caller]
    pub fn exits(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "exit code of a run that printed {self:#?}");
        self
    }

    /// Asserts that stdout holds `text`.
    #[track_caller]
    pub fn stdout_has(&self, text: &str) -> &Self {
        self.check("stdout to hold", &self.stdout, text, |s, t| s.contains(t))
    }

    /// Asserts that stdout starts with `text`.
    #[track_caller]
    pub fn stdout_starts(&self, text: &str) -> &Self {
        self.check("stdout to start with", &self.stdout, text, |s, t| {
            s.starts_with(t)
        })
    }

    /// Asserts that stderr holds `text`.
    #[track_caller]
    pub fn stderr_has(&self, text: &str) -> &Self {
        self.check("stderr to hold", &self.stderr, text, |s, t| s.contains(t))
    }

    #[track_caller]
    fn check(&self, what: &str, stream: &str, text: &str, holds: fn(&str, &str) -> bool) -> &Self {
        assert!(
            holds(stream, text),
            "expected {what} {text:?}; it is:\n{stream}"
        );
        self
    }
}

/// Run `rush --addr ADDR args…` off the runtime's threads.
pub async fn rush(addr: &str, args: &[&str]) -> Out {
    let mut full = vec!["--addr", addr];
    full.extend_from_slice(args);
    rush_args(&full).await
}

/// Run `rush args…` as given (no `--addr`), off the runtime's threads,
/// with none of the caller's `RUSH_*` variables.
pub async fn rush_args(args: &[&str]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rush"));
    cmd.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("RUSH_") {
            cmd.env_remove(k);
        }
    }
    run(cmd).await
}

/// Run a prepared command off the runtime's threads.
pub async fn run(mut cmd: Command) -> Out {
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("run rush"))
        .await
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// [`rush`] with `--json`, which must succeed: its stdout parsed.
pub async fn json(addr: &str, args: &[&str]) -> serde_json::Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let out = ok(addr, &full).await;
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("rush {args:?} --json: {e}: {out}"))
}

/// [`rush`], which must succeed: its stdout.
pub async fn ok(addr: &str, args: &[&str]) -> String {
    let out = rush(addr, args).await;
    assert_eq!(out.code, 0, "rush {args:?} failed: {}", out.stderr);
    out.stdout
}
