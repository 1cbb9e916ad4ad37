//! A live node's /metrics as Prometheus tooling sees it: `promtool check
//! metrics` accepts it (names, types, units), storage counters are
//! counters, and besides `rush_*` it carries `rush_build_info` and the
//! standard `process_*` metrics, measured.

mod common;

use common::TestNode;
use rush_client::protocol::cmd::LinkShorten;
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

/// `name{labels}` → value, and `name` → its `# TYPE`.
struct Scrape {
    samples: BTreeMap<String, f64>,
    types: BTreeMap<String, String>,
    text: String,
}

impl Scrape {
    fn value(&self, series: &str) -> f64 {
        *self
            .samples
            .get(series)
            .unwrap_or_else(|| panic!("{series} missing from\n{}", self.text))
    }
}

async fn scrape(node: &TestNode) -> Scrape {
    let http = node.running().http_addr().expect("HTTP on");
    let (status, text) = common::http_get(http, "/metrics").await;
    assert_eq!(status, 200);
    let mut samples = BTreeMap::new();
    let mut types = BTreeMap::new();
    for line in text.lines() {
        if let Some(t) = line.strip_prefix("# TYPE ") {
            let (name, kind) = t.split_once(' ').expect("# TYPE name kind");
            types.insert(name.to_string(), kind.to_string());
        } else if !line.starts_with('#') && !line.is_empty() {
            let (series, value) = line.rsplit_once(' ').expect("series value");
            samples.insert(series.to_string(), value.parse().expect("a number"));
        }
    }
    Scrape {
        samples,
        types,
        text,
    }
}

/// `promtool check metrics` on `text`: Ok, or what it said.
fn promtool_check(text: &str) -> Result<(), String> {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Lint problems are printed (and fail the exit status); a clean
    // exposition prints nothing.
    if out.status.success() && said.trim().is_empty() {
        Ok(())
    } else {
        Err(said)
    }
}

fn promtool_installed() -> bool {
    let ok = Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        common::prerequisite_missing(
            "promtool is not installed",
            "run scripts/ensure-deps --promtool (Debian package prometheus)",
        );
    }
    ok
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_a_live_nodes_metrics() {
    if !promtool_installed() {
        return;
    }
    let node = TestNode::start_with(|c| c.links.redirect_listen = "127.0.0.1:0".into()).await;
    // Traffic, so lazily labelled series (error outcomes, redirects) are
    // there as well.
    let c = &node.client;
    let link = c.shorten("https://example.com/m").await.unwrap();
    c.resolve(link.code.clone()).await.unwrap();
    assert!(c.shorten("not a url").await.is_err());
    assert!(c
        .shorten_with(LinkShorten {
            alias: Some("has space".into()),
            ..LinkShorten::new("https://example.com/")
        })
        .await
        .is_err());
    let redirect = node.running().redirect_addr().unwrap();
    common::http_get(redirect, &format!("/{}", link.code)).await;
    common::http_get(redirect, "/nope").await;
    let s = scrape(&node).await;
    assert!(s.text.contains("outcome=\"BAD_REQUEST\""), "{}", s.text);
    if let Err(said) = promtool_check(&s.text) {
        panic!("promtool check metrics:\n{said}");
    }
    // The check can fail: promtool flags what the node used to export.
    let old = "# HELP rush_storage_writes_total RocksDB write batches\n\
               # TYPE rush_storage_writes_total gauge\n\
               rush_storage_writes_total 3\n\
               # HELP rush_envelope_retention_days_removed_total Days removed\n\
               # TYPE rush_envelope_retention_days_removed_total counter\n\
               rush_envelope_retention_days_removed_total 0\n";
    let said = promtool_check(old).unwrap_err();
    assert!(
        said.contains("non-counter metrics should not have \"_total\" suffix"),
        "{said}"
    );
    assert!(
        said.contains("use base unit \"seconds\" instead of \"days\""),
        "{said}"
    );
    node.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_counts_are_counters() {
    let node = TestNode::start().await;
    let before = scrape(&node).await;
    for m in [
        "rush_storage_writes_total",
        "rush_storage_syncs_total",
        "rush_storage_write_errors_total",
        "rush_storage_reads_total",
    ] {
        assert_eq!(
            before.types.get(m).map(String::as_str),
            Some("counter"),
            "{m}"
        );
    }
    node.client.shorten("https://example.com/s").await.unwrap();
    node.client.set("k", "v").await.unwrap();
    let after = scrape(&node).await;
    for m in ["rush_storage_writes_total", "rush_storage_syncs_total"] {
        assert!(after.value(m) > before.value(m), "{m} counts the writes");
    }
    assert_eq!(after.value("rush_storage_write_errors_total"), 0.0);
    // The shard log's gauges: the two writes wait in memory for a write
    // back, which DBSIZE forces (it counts what RocksDB holds).
    for m in [
        "rush_storage_pending_keys",
        "rush_storage_write_backs_running",
    ] {
        assert_eq!(after.types.get(m).map(String::as_str), Some("gauge"), "{m}");
    }
    assert!(after.value("rush_storage_pending_keys") >= 2.0);
    assert_eq!(
        node.client.dbsize().await.unwrap(),
        1,
        "k (a link is no generic key)"
    );
    let written = scrape(&node).await;
    assert_eq!(written.value("rush_storage_pending_keys"), 0.0);
    assert_eq!(written.value("rush_storage_write_errors_total"), 0.0);
    node.stop().await;
}

/// What `rush_build_info{commit}` must say, found independently of the
/// build script: the build's override, else git's HEAD if this is a
/// checkout of the workspace, else "unknown".
fn expected_commit() -> String {
    if let Some(c) = std::env::var("RUSH_BUILD_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
    {
        return c.trim().to_string();
    }
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(&workspace)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let top = git(&["rev-parse", "--show-toplevel"]).map(std::path::PathBuf::from);
    let ours = top.and_then(|t| t.canonicalize().ok()) == workspace.canonicalize().ok();
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) if ours => c,
        _ => "unknown".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn build_info_and_process_metrics() {
    let node = TestNode::start().await;
    let first = scrape(&node).await;
    // Labels in the encoder's (sorted) order.
    let info = format!(
        "rush_build_info{{commit=\"{}\",version=\"{}\"}}",
        expected_commit(),
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(first.value(&info), 1.0, "{info}");
    for (m, kind) in [
        ("process_cpu_seconds_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("process_threads", "gauge"),
    ] {
        assert_eq!(first.types.get(m).map(String::as_str), Some(kind), "{m}");
    }

    // The process is this test's (the node runs in-process): its start is
    // before now and after the test binary could have been built.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = first.value("process_start_time_seconds");
    assert!(
        started <= now && started > now - 3600.0,
        "{started} vs {now}"
    );
    let rss = first.value("process_resident_memory_bytes");
    assert!(rss > 1e6 && rss <= first.value("process_virtual_memory_bytes"));
    // Two shards, the runtime's threads and the main one at least.
    assert!(first.value("process_threads") >= 4.0);
    assert!(first.value("process_max_fds") >= first.value("process_open_fds"));

    // Measured, not made up: 40 more connections are at least 40 more
    // descriptors (the client ends; the node's ends as it accepts them),
    // and work costs CPU time.
    let mut conns = Vec::new();
    for _ in 0..40 {
        conns.push(tokio::net::TcpStream::connect(node.addr()).await.unwrap());
    }
    for i in 0..2000 {
        node.client.set(format!("k{i}"), "v").await.unwrap();
    }
    let second = scrape(&node).await;
    let fds = second.value("process_open_fds") - first.value("process_open_fds");
    assert!(fds >= 40.0, "{fds} more descriptors for 40 connections");
    assert!(
        second.value("process_cpu_seconds_total") > first.value("process_cpu_seconds_total"),
        "CPU time grows"
    );
    drop(conns);
    node.stop().await;
}
