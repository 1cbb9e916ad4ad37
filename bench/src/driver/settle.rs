//! After a preload, wait until the server has done the background work the
//! preload left it, so that a read workload measures its reads and not the
//! preload's writes: rushd's flushes, compactions and write backs (INFO's
//! `compactions_running`, `flushes_running`, `flushes_pending`,
//! `compaction_pending_bytes`, `write_backs_running` all 0), Redis's AOF
//! rewrite
//! (`aof_rewrite_in_progress` and `aof_rewrite_scheduled` 0).
//!
//! A server that doesn't settle within [`SETTLE_LIMIT`] is measured anyway;
//! the seconds waited are in the run's report either way.

use crate::workload::{RedisConn, RushConn};
use rush_protocol::cmd::Info;
use std::time::{Duration, Instant};

/// Longest wait for a server to settle.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(200);

/// rushd's INFO rows that must all read 0.
const RUSH_OWED: &[&str] = &[
    "compactions_running",
    "flushes_running",
    "flushes_pending",
    "compaction_pending_bytes",
    "write_backs_running",
];

/// Redis's INFO persistence fields that must all read 0.
const REDIS_OWED: &[&str] = &["aof_rewrite_in_progress", "aof_rewrite_scheduled"];

/// Whether every `owed` field of `rows` is 0 (a field the server doesn't
/// report counts as 0: an older server owes nothing we can see).
fn settled<'a>(rows: impl Iterator<Item = (&'a str, &'a str)> + Clone, owed: &[&str]) -> bool {
    owed.iter().all(|name| {
        rows.clone()
            .find(|(k, _)| k == name)
            .is_none_or(|(_, v)| v.trim() == "0")
    })
}

/// Wait for rushd (through one of the run's connections); seconds waited.
pub async fn rush(conn: &RushConn) -> anyhow::Result<f64> {
    let started = Instant::now();
    loop {
        let info = conn.request(&Info {}).await?;
        let rows = info.rows.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        if settled(rows, RUSH_OWED) || started.elapsed() >= SETTLE_LIMIT {
            return Ok(started.elapsed().as_secs_f64());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Wait for Redis; seconds waited.
pub async fn redis(conn: &RedisConn) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut conn = conn.clone();
    loop {
        let text: String = redis::cmd("INFO")
            .arg("persistence")
            .query_async(&mut conn)
            .await?;
        let rows = text.lines().filter_map(|l| l.split_once(':'));
        if settled(rows, REDIS_OWED) || started.elapsed() >= SETTLE_LIMIT {
            return Ok(started.elapsed().as_secs_f64());
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_means_every_owed_field_is_zero() {
        let rows = [("compactions_running", "0"), ("flushes_running", "1")];
        assert!(!settled(rows.iter().copied(), RUSH_OWED));
        let rows = [("compactions_running", "0"), ("flushes_running", "0")];
        assert!(settled(rows.iter().copied(), RUSH_OWED));
        let text = "# Persistence\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:1\r\n";
        let rows = text.lines().filter_map(|l| l.split_once(':'));
        assert!(!settled(rows, REDIS_OWED));
    }
}
