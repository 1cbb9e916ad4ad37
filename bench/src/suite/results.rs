//! What `results.json` holds: the servers compared, every measured run
//! (with its phase and the cores' layout), the footprint, the calibration
//! and the machine. The suite writes it; the report and the charts read it,
//! also from files written by older builds (every field added later has a
//! default).

use crate::stats::RunReport;
use crate::target::Side;
use serde::{Deserialize, Serialize};

/// The servers the suite compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServerKind {
    /// rushd with its defaults: generic key writes synced before the answer.
    Rush,
    /// Redis, AOF, `appendfsync everysec`.
    RedisEverysec,
    /// Redis, AOF, `appendfsync always`.
    RedisAlways,
}

impl ServerKind {
    pub const ALL: [ServerKind; 3] = [
        ServerKind::Rush,
        ServerKind::RedisEverysec,
        ServerKind::RedisAlways,
    ];

    pub fn key(self) -> &'static str {
        match self {
            ServerKind::Rush => "rush",
            ServerKind::RedisEverysec => "redis-everysec",
            ServerKind::RedisAlways => "redis-always",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            ServerKind::Rush => "Rush",
            ServerKind::RedisEverysec => "Redis (AOF everysec)",
            ServerKind::RedisAlways => "Redis (AOF always)",
        }
    }

    /// What an acknowledged write means on this server.
    pub fn durability(self) -> &'static str {
        match self {
            ServerKind::Rush => "fsynced before the ack (group commit)",
            ServerKind::RedisEverysec => {
                "in the AOF, fsynced within ~1 s (the last second can be lost)"
            }
            ServerKind::RedisAlways => "fsynced before the ack (appendfsync always)",
        }
    }

    pub fn side(self) -> Side {
        match self {
            ServerKind::Rush => Side::Rush,
            _ => Side::Redis,
        }
    }
}

impl std::str::FromStr for ServerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ServerKind::ALL
            .into_iter()
            .find(|k| k.key() == s)
            .ok_or_else(|| format!("unknown server {s:?}: rush, redis-everysec or redis-always"))
    }
}

/// How the server under test and the client shared the machine's cores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// Client and server on every core, scheduled as the kernel likes (and
    /// the layout of results written before layouts were recorded).
    #[default]
    Shared,
    /// The server on one CPU, the client on another ([`Pinning`] says which).
    Pinned,
}

/// One measured run of the suite.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteRun {
    pub server: ServerKind,
    /// Open-loop step: the fraction of the closed-loop peak offered.
    pub fraction: Option<f64>,
    pub report: RunReport,
    /// `None`: the main matrix; [`VARIANT_SCALING`], [`VARIANT_ONE_SHARD`]
    /// or [`VARIANT_PINNED`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The cores' layout during the run (absent in older results: shared).
    #[serde(default)]
    pub layout: Layout,
    /// The machine's 1-minute load average when the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_average: Option<f64>,
}

impl SuiteRun {
    /// Part of the main matrix (phase 1, shared layout): the runs the
    /// headline, the per-workload tables and the charts are made of.
    pub fn main_matrix(&self) -> bool {
        self.variant.is_none() && self.layout == Layout::Shared
    }
}

/// The CPUs of the pinned layout (`--pin`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinning {
    /// The server under test ran on this CPU alone (`taskset -c`).
    pub server_cpu: usize,
    /// The bench client ran on this CPU alone.
    pub client_cpu: usize,
    /// The client's runtime threads in the pinned runs.
    pub client_threads: usize,
    /// rushd's `--shards` in the pinned runs.
    pub rush_shards: usize,
}

/// What a server holds in memory and on disk for a number of stored items
/// (links, or catalog owners) of one workload's data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Footprint {
    pub server: ServerKind,
    /// The workload whose data was measured: `links-resolve` (links) or
    /// `catalog` (owners); results written before the catalog's footprint
    /// have none and measured links.
    #[serde(default = "links_workload")]
    pub workload: String,
    /// Items stored (links or owners; 0: the empty server). The name is
    /// older than the catalog's footprint and stays, so that older
    /// `results.json` files read.
    pub links: u64,
    /// Redis DBSIZE (the items plus a counter or a marker).
    pub keys: Option<u64>,
    /// Resident memory of the process (VmRSS).
    pub rss_bytes: u64,
    pub rss_empty_bytes: u64,
    /// Bytes in the data directory (Rush: after a full compaction; Redis: its AOF).
    pub disk_bytes: u64,
    pub disk_empty_bytes: u64,
    /// Redis `INFO memory` used_memory.
    pub used_memory: Option<u64>,
    pub used_memory_empty: Option<u64>,
}

/// The workload of a footprint that names none (written before footprints
/// named theirs): links.
fn links_workload() -> String {
    "links-resolve".into()
}

impl Footprint {
    /// What its items are (one of [`ITEM_KINDS`]).
    pub fn items(&self) -> &'static str {
        items_of(&self.workload)
    }
}

/// What the scaling families store, in the order the report shows them.
pub const ITEM_KINDS: [&str; 4] = ["links", "owners", "users", "envelopes"];

/// What the items a `workload` stores are called: "owners" for the
/// catalog's, "users" for limits-held's books, "envelopes" for
/// envelopes-held's, "links" for the others.
pub fn items_of(workload: &str) -> &'static str {
    use crate::workload::Workload;
    if crate::workloads::catalog::is_catalog(workload) {
        "owners"
    } else if workload == crate::workloads::limits::LimitsHeld::NAME {
        "users"
    } else if workload == crate::workloads::envelopes_held::EnvelopesHeld::NAME {
        "envelopes"
    } else {
        "links"
    }
}

/// The machine the suite ran on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub kernel: String,
    /// 1-minute load average when the suite started (others' work shows here).
    pub load_average: String,
    /// Filesystem type of the servers' data directories.
    pub data_fs: String,
}

/// Everything the suite knows; `results.json`, and the report's input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteResults {
    pub mode: String,
    pub generated: String,
    pub machine: Machine,
    pub rushd: String,
    /// `release` or `debug` (from the binary's path).
    pub rushd_profile: String,
    pub rush_shards: String,
    pub redis_version: String,
    pub connections: usize,
    pub client_threads: usize,
    pub duration_secs: f64,
    pub sweep_secs: f64,
    pub keys: u64,
    pub dist: String,
    pub value_size: usize,
    pub runs: Vec<SuiteRun>,
    /// Runs that could not be made at all.
    pub failures: Vec<String>,
    /// redis-benchmark on the same Redis servers, to show how close
    /// rush-bench's Redis side comes to Redis's own C client.
    #[serde(default)]
    pub calibration: Vec<Calibration>,
    /// Memory and disk per stored item, links and owners (scaling phase).
    #[serde(default)]
    pub footprint: Vec<Footprint>,
    /// rushd's `--memory-mb` in the scaling phase, when it ran on a budget
    /// (absent in older results, and when it ran on rushd's own sizes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_memory_mb: Option<u64>,
    /// 1-minute load average when the suite ended.
    #[serde(default)]
    pub load_average_end: String,
    /// How long the whole suite ran.
    #[serde(default)]
    pub suite_secs: f64,
    /// The pinned layout's CPUs, when the suite ran it (`--pin`); its runs
    /// have [`Layout::Pinned`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Pinning>,
    /// The redis-benchmark phase: redis-benchmark (an independent client)
    /// against each server's RESP listener (absent in older results).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redis_benchmark: Vec<RedisBenchmarkRow>,
    /// Why the redis-benchmark phase has no rows, when it was not run
    /// (skipped by option, or redis-benchmark is not installed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_benchmark_skipped: Option<String>,
}

/// One redis-benchmark test (`-t set`, …) at one pipeline against one
/// server, with the server's CPU time over it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedisBenchmarkRow {
    pub server: ServerKind,
    /// redis-benchmark's name of the test: SET, GET, INCR, HSET.
    pub test: String,
    /// `-P`: requests in flight per client.
    pub pipeline: usize,
    /// `-c`
    pub clients: usize,
    /// `-n`: requests of the test.
    pub requests: u64,
    /// `-r`: the random part of the keys (`key:__rand_int__`) ranges over this many.
    pub keyspace: u64,
    /// `-d`: SET's value size, bytes.
    pub value_size: usize,
    /// Requests per second, as redis-benchmark reports it.
    pub throughput: f64,
    /// Latencies redis-benchmark reports (its CSV's columns), milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<f64>,
    /// CPU seconds (user + system, from /proc/PID/stat) the server process
    /// and its forked children used while redis-benchmark ran the test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_secs: Option<f64>,
}

impl RedisBenchmarkRow {
    /// Server CPU microseconds per request.
    pub fn server_cpu_us_per_op(&self) -> Option<f64> {
        let cpu = self.server_cpu_secs?;
        (self.requests > 0).then(|| cpu * 1e6 / self.requests as f64)
    }
}

/// One redis-benchmark figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Calibration {
    pub server: ServerKind,
    /// The workload whose command redis-benchmark ran (`kv-set` → SET).
    #[serde(deserialize_with = "crate::stats::current_workload_name")]
    pub workload: String,
    pub connections: usize,
    pub pipeline: usize,
    pub throughput: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl SuiteResults {
    /// Operations that failed, over all runs.
    pub fn error_count(&self) -> u64 {
        self.runs.iter().map(|r| r.report.errors).sum()
    }
}

/// Which part of the suite a run belongs to (`None`: the main matrix).
pub const VARIANT_SCALING: &str = "scaling";
pub const VARIANT_ONE_SHARD: &str = "1-shard";
/// Phase 4's runs (with [`Layout::Pinned`]).
pub const VARIANT_PINNED: &str = "pinned";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_kinds_round_trip() {
        for k in ServerKind::ALL {
            assert_eq!(k.key().parse::<ServerKind>(), Ok(k));
        }
        assert!("mysql".parse::<ServerKind>().is_err());
    }

    #[test]
    fn runs_without_a_layout_are_shared() {
        let report = serde_json::to_value(RunReport {
            workload: "kv-set".into(),
            side: "rush".into(),
            target: "rush://127.0.0.1:1".into(),
            label: None,
            durability: None,
            mode: "closed".into(),
            connections: 1,
            pipeline: 1,
            rate: None,
            keys: 1,
            dist: "uniform".into(),
            value_size: 1,
            preloaded: 0,
            preload_secs: 0.0,
            settle_secs: 0.0,
            ok: 1,
            misses: 0,
            denied: 0,
            errors: 0,
            error_types: Default::default(),
            elapsed_secs: 1.0,
            throughput: 1.0,
            latency: crate::stats::Latency {
                min_us: 1.0,
                mean_us: 1.0,
                p50_us: 1.0,
                p90_us: 1.0,
                p99_us: 1.0,
                p999_us: 1.0,
                max_us: 1.0,
            },
            server_metrics: Default::default(),
            server_cpu_secs: None,
            server_background_secs: None,
            client_cpu_secs: None,
        })
        .unwrap();
        let old = serde_json::json!({"server": "rush", "fraction": null, "report": report});
        let run: SuiteRun = serde_json::from_value(old).unwrap();
        assert_eq!(run.layout, Layout::Shared);
        assert!(run.main_matrix());
        let mut pinned = run.clone();
        pinned.layout = Layout::Pinned;
        pinned.variant = Some(VARIANT_PINNED.into());
        let json = serde_json::to_value(&pinned).unwrap();
        assert_eq!(json["layout"], "pinned");
        assert_eq!(json["variant"], "pinned");
        let back: SuiteRun = serde_json::from_value(json).unwrap();
        assert_eq!(back.layout, Layout::Pinned);
        assert!(!back.main_matrix());
        // A shared run says so too.
        assert_eq!(serde_json::to_value(&run).unwrap()["layout"], "shared");
    }
}
