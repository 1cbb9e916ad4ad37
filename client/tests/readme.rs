//! The README's `rush` examples, run literally against a real node.
//!
//! Every `rush …` line of the shell blocks under "## Using it" runs through
//! bash, as a reader would paste it (quotes, `&&`, trailing comments), with
//! the real `rush` first on PATH and `RUSH_ADDR` naming an in-process node.
//! Placeholders (`CODE`, `ENVELOPE_ID`, `CURSOR`) are filled from what the
//! earlier commands printed, as the README says; a capitalised word that
//! nothing filled fails the test. A line's exit code is 0 unless its
//! comment says `exit N:`; comment lines right after a command are its
//! expected output, unless marked "(for example". The Rust example is
//! compiled by the doc tests (`ReadmeDoctests` in the client crate).

mod common;

use std::collections::HashMap;
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

struct Step<'a> {
    line: &'a str,
    /// Output lines the README shows for it.
    expect: Vec<&'a str>,
}

fn steps<'a>(block: &[&'a str]) -> Vec<Step<'a>> {
    let mut steps: Vec<Step> = Vec::new();
    let mut after_command = false;
    for line in block {
        if line.starts_with("rush ") {
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
                    out.stdout.lines().any(|l| l == *shown),
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
