//! Printing answers: lines for people, or one JSON document with `--json`.
//!
//! Text output is meant for reading and for `grep`/`cut`; `--json` gives
//! every field, times as both unix milliseconds (`*_ms`) and RFC 3339
//! strings, and byte strings as (lossy) UTF-8.

use rush_client::calendar;
use serde_json::{json, Value};
use std::io::Write;

/// How the answers of one run are printed.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    pub json: bool,
}

impl Out {
    /// Print one JSON document (pretty, ending in a newline).
    pub fn json(&self, v: Value) -> anyhow::Result<()> {
        let mut stdout = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut stdout, &v)?;
        writeln!(stdout)?;
        Ok(())
    }

    /// `json` with `--json`, else `text`.
    pub fn print(
        &self,
        text: impl FnOnce() -> String,
        json: impl FnOnce() -> Value,
    ) -> anyhow::Result<()> {
        if self.json {
            self.json(json())
        } else {
            println!("{}", text());
            Ok(())
        }
    }
}

/// Bytes as text (invalid UTF-8 replaced).
pub fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A unix-ms time as JSON: the RFC 3339 string, or null for 0 ("never",
/// "none").
pub fn time(ms: u64) -> Value {
    if ms == 0 {
        Value::Null
    } else {
        json!(calendar::timestamp_exact(ms))
    }
}

/// A unix-ms time for people: RFC 3339 to the second, or `never` for 0.
pub fn when(ms: u64) -> String {
    if ms == 0 {
        "never".into()
    } else {
        calendar::timestamp(ms)
    }
}
