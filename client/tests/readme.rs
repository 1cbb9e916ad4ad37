//! The README's shell examples, run literally against real nodes.
//!
//! Every `rush …` line of the shell blocks under "## Using it" runs through
//! bash, as a reader would paste it (quotes, `&&`, trailing comments), with
//! the real `rush` first on PATH and `RUSH_ADDR` naming an in-process node.
//! Placeholders (`CODE`, `ENVELOPE_ID`, `CURSOR`) are filled from what the
//! earlier commands printed, as the README says; a capitalised word that
//! nothing filled fails the test. A line's exit code is 0 unless its
//! comment says `exit N:`; comment lines right after a command are its
//! expected output, unless marked "(for example", and a capitalised word
//! in them stands for any word. The Rust example is compiled by the doc
//! tests (`ReadmeDoctests` in the client crate).
//!
//! The "## Cluster" block runs the same way against the cluster it starts
//! itself with `deploy/cluster.sh` (real `rushd` processes), on loopback
//! ports of its own instead of the default ones. It runs the `rushd` built
//! beside `rush`: a workspace build (`scripts/test`, `cargo test
//! --workspace`) builds both, while `--test readme` alone rebuilds `rush`
//! only.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const README: &str = include_str!("../../README.md");

/// The fenced blocks of `lang` in `text`.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<Vec<&'a str>> {
    let mut out = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        match (&mut current, line.trim_end()) {
            (None, l) if l == format!("```{lang}") => current = Some(Vec::new()),
            (Some(_), "```") => out.extend(current.take()),
            (Some(b), l) => b.push(l),
            (None, _) => {}
        }
    }
    out
}

/// The text of a `## heading` section.
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start = text
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("README has a section {heading:?}"));
    let rest = &text[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

/// Words that stand for something an earlier command printed.
fn is_placeholder(word: &str) -> bool {
    word.len() >= 3
        && word.starts_with(|c: char| c.is_ascii_uppercase())
        && word.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

/// Whether `actual` is the output line the README shows as `shown`, where
/// each placeholder word of `shown` stands for one or more non-blank
/// characters (`http://127.0.0.1:7390/CODE`, `(SECS s)`).
fn shows(shown: &str, actual: &str) -> bool {
    enum Part<'a> {
        Text(&'a str),
        Any,
    }
    // Placeholders: capitalised runs not inside a longer word.
    let mut parts = Vec::new();
    let mut text_from = 0;
    let bytes = shown.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let starts = i == 0 || !word(bytes[i - 1]);
        let end = i + bytes[i..].iter().take_while(|&&b| word(b)).count();
        if starts && end > i && is_placeholder(&shown[i..end]) {
            parts.push(Part::Text(&shown[text_from..i]));
            parts.push(Part::Any);
            text_from = end;
        }
        i = if end > i { end } else { i + 1 };
    }
    parts.push(Part::Text(&shown[text_from..]));

    fn matches(parts: &[Part], rest: &str) -> bool {
        match parts.split_first() {
            None => rest.is_empty(),
            Some((Part::Text(t), more)) => {
                rest.strip_prefix(t).is_some_and(|rest| matches(more, rest))
            }
            Some((Part::Any, more)) => {
                let run = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (1..=run)
                    .filter(|&n| rest.is_char_boundary(n))
                    .any(|n| matches(more, &rest[n..]))
            }
        }
    }
    matches(&parts, actual)
}

struct Step<'a> {
    line: &'a str,
    /// Output lines the README shows for it.
    expect: Vec<&'a str>,
}

/// The `rush …` commands of a block.
fn steps<'a>(block: &[&'a str]) -> Vec<Step<'a>> {
    steps_of(block, |l| l.starts_with("rush "))
}

/// The commands of a block (the lines `is_command` picks), each with the
/// output lines shown under it.
fn steps_of<'a>(block: &[&'a str], is_command: impl Fn(&str) -> bool) -> Vec<Step<'a>> {
    let mut steps: Vec<Step> = Vec::new();
    let mut after_command = false;
    for line in block {
        if is_command(line) {
            steps.push(Step {
                line,
                expect: Vec::new(),
            });
            after_command = true;
        } else if let (Some(shown), true) = (line.strip_prefix("# "), after_command) {
            if !shown.contains("(for example") {
                steps.last_mut().unwrap().expect.push(shown);
            }
        } else {
            after_command = false;
        }
    }
    steps
}

/// The exit code a line's comment announces (`# exit 2: limited`), else 0.
fn expected_code(line: &str) -> i32 {
    let comment = line.split_once('#').map_or("", |(_, c)| c);
    comment
        .split("exit ")
        .skip(1)
        .find_map(|rest| {
            rest.split_once(':')
                .and_then(|(n, _)| n.trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_examples_run_as_written() {
    let node = common::node().await;
    let addr = node.addr();
    let client = rush_client::Client::connect(&addr).await.unwrap();
    // The limits example counts per Shanghai day: keep clear of its
    // midnight (and UTC's) on the node's clock.
    let now = client.clock_advance(Duration::ZERO).await.unwrap();
    const DAY: u64 = 86_400_000;
    let near_midnight = [0, 8 * 3_600_000].iter().any(|offset| {
        let next = ((now + offset) / DAY + 1) * DAY - offset;
        next - now < 10 * 60_000
    });
    if near_midnight {
        client
            .clock_advance(Duration::from_secs(15 * 60))
            .await
            .unwrap();
    }

    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_rush"), bin.path().join("rush")).unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let mut filled: HashMap<&str, String> = HashMap::new();
    let mut ran = 0;
    for block in blocks(section(README, "Using it"), "sh") {
        for step in steps(&block) {
            let command = step.line.split_once(" #").map_or(step.line, |(c, _)| c);
            if command.starts_with("rush envelope refunds") {
                // The envelope's 24 hours pass: what is left is refunded.
                client
                    .clock_advance(Duration::from_secs(25 * 3600))
                    .await
                    .unwrap();
            }
            let words: Vec<String> = command
                .split(' ')
                .map(|w| match filled.get(w) {
                    Some(v) => v.clone(),
                    None => {
                        assert!(
                            !is_placeholder(w),
                            "{w} in {:?} is filled by no earlier command",
                            step.line
                        );
                        w.to_string()
                    }
                })
                .collect();
            let line = words.join(" ");
            let mut cmd = Command::new("bash");
            cmd.args(["-c", &line])
                .current_dir(cwd.path())
                .env("PATH", &path)
                .env("RUSH_ADDR", &addr);
            let out = common::run(cmd).await;
            ran += 1;
            assert_eq!(
                out.code,
                expected_code(step.line),
                "{line}\nstdout: {}\nstderr: {}",
                out.stdout,
                out.stderr
            );
            for shown in &step.expect {
                assert!(
                    out.stdout.lines().any(|l| shows(shown, l)),
                    "{line}: the README shows {shown:?}, it printed:\n{}",
                    out.stdout
                );
            }
            // What the README says later lines take from this one.
            let printed = out.stdout.trim();
            if command.starts_with("rush shorten") && !command.contains("--alias") {
                filled
                    .entry("CODE")
                    .or_insert_with(|| printed.rsplit('/').next().unwrap().to_string());
            }
            if command.starts_with("rush envelope create") {
                printed.parse::<u64>().expect("an envelope id");
                filled.insert("ENVELOPE_ID", printed.to_string());
            }
            if command.starts_with("rush envelope refunds") {
                let id = &filled["ENVELOPE_ID"];
                assert!(
                    out.stdout
                        .contains(&format!(" envelope {id} sender alice ")),
                    "{}",
                    out.stdout
                );
                let next = printed
                    .lines()
                    .find_map(|l| l.strip_prefix("next "))
                    .expect("a next cursor");
                filled.insert("CURSOR", next.split(' ').next().unwrap().to_string());
            }
        }
    }
    assert!(ran >= 30, "only {ran} README commands found");
    for p in ["CODE", "ENVELOPE_ID", "CURSOR"] {
        assert!(filled.contains_key(p), "{p} was never filled");
    }
    assert!(
        cwd.path().join("q.png").exists(),
        "rush link qr wrote q.png"
    );
    node.stop().await;
}

/// A base port with the 12 ports from it free (3 nodes × protocol, HTTP,
/// RESP, redirects), below the kernel's ephemeral range and clear of the
/// README's own ports: the rolling restart brings every node back on its
/// ports, and no outgoing connection can take one in between.
fn free_base() -> u16 {
    common::fixed_ports(12)
}

/// The README's cluster ports: node i on 7379 + 4i (protocol), + 1 (HTTP),
/// + 2 (RESP), + 3 (redirects).
const README_PORTS: std::ops::Range<u16> = 7379..7391;

/// `text` with the README's cluster ports moved to the test's.
fn on_ports(text: &str, base: u16) -> String {
    let mut out = String::new();
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        match digits.parse::<u16>() {
            Ok(p) if README_PORTS.contains(&p) => {
                out.push_str(&(base + (p - README_PORTS.start)).to_string())
            }
            _ => out.push_str(digits),
        }
        digits.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

/// Runs `deploy/cluster.sh down` when dropped, so that a failed step
/// leaves no `rushd` running.
struct StopCluster<'a>(&'a dyn Fn(&str) -> std::process::Output);

impl Drop for StopCluster<'_> {
    fn drop(&mut self) {
        let _ = (self.0)("deploy/cluster.sh down");
    }
}

/// The status line and `Location` of `GET path` on a loopback port.
fn http_get(port: u16, path: &str) -> (String, Option<String>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let status = answer.lines().next().unwrap_or_default().to_string();
    let location = answer
        .lines()
        .find_map(|l| {
            l.strip_prefix("location: ")
                .or(l.strip_prefix("Location: "))
        })
        .map(str::to_string);
    (status, location)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_cluster_runs_as_written() {
    let rush = PathBuf::from(env!("CARGO_BIN_EXE_rush"));
    let rushd = rush.with_file_name("rushd");
    assert!(
        rushd.exists(),
        "{} is not built: build the workspace (cargo build --workspace, or cargo test \
         --workspace, which builds it)",
        rushd.display()
    );
    let base = free_base();
    // The commands run from a directory that looks like the repository's
    // root to them: `deploy/` is there (a link to the real one), and
    // `./rush-cluster` is made there.
    let root = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::os::unix::fs::symlink(repo.join("deploy"), root.path().join("deploy")).unwrap();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&rush, bin.path().join("rush")).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let sh = |line: &str| {
        let mut cmd = Command::new("bash");
        cmd.args(["-c", line]).current_dir(root.path());
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("RUSH") {
                cmd.env_remove(k);
            }
        }
        cmd.env("PATH", &path)
            .env("RUSHD", &rushd)
            .env("RUSH", &rush)
            .env("RUSHD_ARGS", "--shards 2")
            .env("RUSH_LOG", "warn")
            // `rush` without --addr: node-0, on the test's port.
            .env("RUSH_ADDR", format!("127.0.0.1:{base}"))
            .output()
            .expect("bash runs")
    };
    let _stop = StopCluster(&sh);

    let mut ran = Vec::new();
    for block in blocks(section(README, "Cluster"), "sh") {
        let is_command = |l: &str| l.starts_with("rush ") || l.starts_with("deploy/cluster.sh ");
        for step in steps_of(&block, is_command) {
            let command = step
                .line
                .split_once(" #")
                .map_or(step.line, |(c, _)| c)
                .trim_end();
            // Nothing earlier prints what these commands take.
            assert!(
                !command.split(' ').any(is_placeholder),
                "{command}: a placeholder this test does not fill"
            );
            let mut line = on_ports(command, base);
            if command.starts_with("deploy/cluster.sh up") {
                line.push_str(&format!(" --base-port {base}"));
            }
            // Loopback only, and none of the README's own ports.
            for word in line.split_whitespace() {
                if let Some((host, port)) = word.rsplit_once(':') {
                    if let Ok(port) = port.parse::<u16>() {
                        assert_eq!(host, "127.0.0.1", "{line}");
                        assert!(!README_PORTS.contains(&port), "{line}");
                    }
                }
            }
            let out = tokio::task::block_in_place(|| sh(&line));
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
            );
            assert!(
                out.status.success(),
                "{line}: {}\nstdout: {stdout}\nstderr: {stderr}",
                out.status
            );
            for shown in &step.expect {
                let shown = on_ports(shown, base);
                assert!(
                    stdout.lines().any(|l| shows(&shown, l)),
                    "{line}: the README shows {shown:?}, it printed:\n{stdout}"
                );
            }
            if command.contains(" shorten ") {
                // Every node's redirect listener redirects the code: node-0
                // and node-1 forward the visit to node-2, which issued it.
                let code = stdout.trim().rsplit('/').next().unwrap().to_string();
                for node in 0..3 {
                    let (status, location) = tokio::task::block_in_place(|| {
                        http_get(base + 4 * node + 3, &format!("/{code}"))
                    });
                    assert!(status.starts_with("HTTP/1.1 302"), "node-{node}: {status}");
                    assert_eq!(location.as_deref(), Some("https://shop.example/a"));
                }
            }
            ran.push(command.to_string());
        }
    }
    // Every command of the block ran, the script's too.
    assert_eq!(ran.len(), 7, "{ran:#?}");
    for c in ["up 3", "rolling-restart", "down"] {
        assert!(
            ran.contains(&format!("deploy/cluster.sh {c}")),
            "{c} not run: {ran:#?}"
        );
    }
    assert!(
        root.path().join("rush-cluster/node-2").is_dir(),
        "the data is in ./rush-cluster"
    );
}

#[test]
fn placeholders_in_output_match_any_word() {
    assert!(shows("http://h:1/CODE", "http://h:1/Q5HqIr5"));
    assert!(!shows("http://h:1/CODE", "http://h:2/Q5HqIr5"));
    assert!(!shows("http://h:1/CODE", "http://h:1/"));
    assert!(shows("ready (SECS s)", "ready (12 s)"));
    assert!(!shows("ready (SECS s)", "ready (1 2 s)"));
    assert!(shows(
        "moved 100 slots: KEYS keys, BYTES bytes",
        "moved 100 slots: 3 keys, 84 bytes"
    ));
    assert!(shows("rule item sku-1", "rule item sku-1"));
    assert!(!shows("rule item sku-1", "rule item sku-1 more"));
    // Capitals inside a longer word are text.
    assert!(!shows("xCODE", "xyz") && shows("xCODE", "xCODE"));
    assert!(!shows("a_CODE", "a_b") && shows("a_CODE", "a_CODE"));
    assert_eq!(
        on_ports("127.0.0.1:7382 and 73820, 7391", 20000),
        "127.0.0.1:20003 and 73820, 7391"
    );
}

/// The exit codes the README lists are those `rush --help` lists.
#[test]
fn readme_lists_the_exit_codes() {
    let out = Command::new(env!("CARGO_BIN_EXE_rush"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let codes = &help[help.find("Exit codes:").expect("exit codes in --help")..];
    let listed = blocks(section(README, "Using it"), "text");
    assert!(
        listed.iter().any(|b| b.join("\n") == codes.trim_end()),
        "README's exit codes differ from rush --help:\n{codes}"
    );
}

#[test]
fn placeholders_and_codes_are_read_as_documented() {
    assert_eq!(expected_code("rush a   # exit 2: limited"), 2);
    assert_eq!(expected_code("rush a   # exit 3 if any book is off"), 0);
    assert_eq!(expected_code("rush a"), 0);
    assert!(is_placeholder("CODE") && is_placeholder("ENVELOPE_ID"));
    assert!(!is_placeholder("M001") && !is_placeholder("OK") && !is_placeholder("Acme"));
    let s = steps(&[
        "rush x",
        "# shown",
        "# (for example: not checked)",
        "rush y",
        "other",
        "# not output",
    ]);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].expect, ["shown"]);
    assert!(s[1].expect.is_empty());
}
