//! What a run measured: a latency histogram, counts, errors by type; and the
//! serialisable [`RunReport`] that `--json` writes and the suite reads back.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

/// Latencies are recorded in nanoseconds, 3 significant figures, up to this
/// (a request slower than a minute is clamped to it, not dropped).
const HIST_MAX_NS: u64 = 60_000_000_000;

/// A new latency histogram (ns, 3 significant figures: ~200 KB).
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid histogram bounds")
}

/// Why one operation failed, as a short stable name (`BUSY`, `TIMEOUT`,
/// `REDIS_WRONGTYPE`…) — errors are counted by it — plus the first message
/// seen, which the report keeps as an example.
#[derive(Debug, Clone)]
pub struct OpError {
    pub kind: Cow<'static, str>,
    pub message: String,
}

impl OpError {
    pub fn new(kind: impl Into<Cow<'static, str>>, message: impl Into<String>) -> OpError {
        OpError {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

impl From<rush_client::ClientError> for OpError {
    fn from(e: rush_client::ClientError) -> OpError {
        use rush_client::ClientError as E;
        let kind: Cow<'static, str> = match &e {
            E::Server(s) => Cow::Borrowed(s.code.name()),
            E::Timeout(_) => "TIMEOUT".into(),
            E::ConnectionLost(_) => "CONNECTION_LOST".into(),
            E::Connect { .. } => "CONNECT".into(),
            E::Protocol(_) => "PROTOCOL".into(),
            E::Cluster(_) => "CLUSTER".into(),
        };
        OpError::new(kind, e.to_string())
    }
}

impl From<redis::RedisError> for OpError {
    fn from(e: redis::RedisError) -> OpError {
        let kind: Cow<'static, str> = if e.is_timeout() {
            "TIMEOUT".into()
        } else if e.is_connection_dropped() || e.is_io_error() {
            "CONNECTION_LOST".into()
        } else if let Some(code) = e.code() {
            format!("REDIS_{code}").into()
        } else {
            format!("REDIS_{:?}", e.kind()).into()
        };
        OpError::new(kind, e.to_string())
    }
}

/// Errors of one type: how many, and the first message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ErrorStat {
    pub count: u64,
    pub example: String,
}

/// What one connection's lanes measured; merged into the run's total.
pub struct Tally {
    pub hist: Histogram<u64>,
    pub ok: u64,
    /// Reads that found nothing where the workload allows it (not errors).
    pub misses: u64,
    /// Normal refusals (LIMITED orders, EMPTY envelopes): answered, counted
    /// in `ok`, not errors.
    pub denied: u64,
    pub errors: BTreeMap<String, ErrorStat>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            hist: new_histogram(),
            ok: 0,
            misses: 0,
            denied: 0,
            errors: BTreeMap::new(),
        }
    }
}

impl Tally {
    #[inline]
    pub fn record(&mut self, latency: Duration, outcome: &Result<Outcome, OpError>) {
        let ns = (latency.as_nanos() as u64).clamp(1, HIST_MAX_NS);
        match outcome {
            Ok(o) => {
                self.ok += 1;
                match o {
                    Outcome::Done => {}
                    Outcome::Miss => self.misses += 1,
                    Outcome::Denied => self.denied += 1,
                }
                self.hist.saturating_record(ns);
            }
            Err(e) => {
                let stat = self.errors.entry(e.kind.to_string()).or_default();
                if stat.count == 0 {
                    stat.example = e.message.clone();
                }
                stat.count += 1;
            }
        }
    }

    pub fn merge(&mut self, other: Tally) {
        self.hist
            .add(&other.hist)
            .expect("histograms share their bounds");
        self.ok += other.ok;
        self.misses += other.misses;
        self.denied += other.denied;
        for (kind, stat) in other.errors {
            let mine = self.errors.entry(kind).or_default();
            if mine.count == 0 {
                mine.example = stat.example;
            }
            mine.count += stat.count;
        }
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().map(|s| s.count).sum()
    }
}

/// How a successful operation went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// A read that found no value, in a workload where that's allowed
    /// (kv-get without `--preload`, a lookup of an absent owner).
    Miss,
    /// A normal refusal the workload expects some of — an order over its
    /// limit (LIMITED), a grab of an emptied envelope (EMPTY): the server
    /// did its work and answered.
    Denied,
}

/// Latency summary in microseconds (successful operations only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latency {
    pub fn from_histogram(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            min_us: us(h.min()),
            mean_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.50)),
            p90_us: us(h.value_at_quantile(0.90)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// Everything one run measured, and how it was run. `--json` writes it; the
/// suite collects them into its report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Read under the workload's current name when the file used an older
    /// one (`lookups` is `catalog`).
    #[serde(deserialize_with = "current_workload_name")]
    pub workload: String,
    /// `rush` or `redis`.
    pub side: String,
    /// The `--target` URL.
    pub target: String,
    /// Free text naming the server setup (e.g. "Redis, appendfsync always").
    pub label: Option<String>,
    /// What an acknowledgement means on this target (stated in every row).
    pub durability: Option<String>,
    /// `closed` (C × P in flight) or `open` (`--rate`).
    pub mode: String,
    pub connections: usize,
    pub pipeline: usize,
    /// Offered load in requests per second (open loop only).
    pub rate: Option<f64>,
    pub keys: u64,
    pub dist: String,
    pub value_size: usize,
    /// Keys written by `--preload` before the run (0 when not preloaded).
    pub preloaded: u64,
    pub preload_secs: f64,
    /// Seconds waited after the preload for the server's background work
    /// (rushd's flushes and compactions, Redis's AOF rewrite) to finish,
    /// before measuring.
    #[serde(default)]
    pub settle_secs: f64,
    /// Successful operations.
    pub ok: u64,
    pub misses: u64,
    /// Normal refusals among `ok` (see [`Outcome::Denied`]).
    #[serde(default)]
    pub denied: u64,
    pub errors: u64,
    pub error_types: BTreeMap<String, ErrorStat>,
    /// From the first scheduled send to the last answer.
    pub elapsed_secs: f64,
    /// Successful operations per second.
    pub throughput: f64,
    pub latency: Latency,
    /// rushd series named by the workload (`Workload::RUSH_METRICS`) and
    /// those that say where a stall was (`scrape::STALL_METRICS`), summed
    /// over the nodes: a counter's or a histogram's increase during the
    /// run, anything else its value at the end. Empty when the run had no `/metrics` to read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server_metrics: BTreeMap<String, f64>,
    /// CPU seconds the server process and its forked children used during
    /// the measured run (when its pid was known: the suite's own servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_secs: Option<f64>,
    /// The part of `server_cpu_secs` that was background work: rushd's
    /// RocksDB threads (flushes, compactions), Redis's forked children
    /// (AOF rewrites); see `driver::cpu::background`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_background_secs: Option<f64>,
    /// CPU seconds the bench client used during the measured run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu_secs: Option<f64>,
}

impl RunReport {
    /// Server CPU microseconds per answered operation.
    pub fn server_cpu_us_per_op(&self) -> Option<f64> {
        let cpu = self.server_cpu_secs?;
        (self.ok > 0).then(|| cpu * 1e6 / self.ok as f64)
    }

    /// Background server CPU (`server_background_secs`) microseconds per
    /// answered operation.
    pub fn server_background_us_per_op(&self) -> Option<f64> {
        let cpu = self.server_background_secs?;
        (self.ok > 0).then(|| cpu * 1e6 / self.ok as f64)
    }

    /// Client CPU microseconds per answered operation.
    pub fn client_cpu_us_per_op(&self) -> Option<f64> {
        let cpu = self.client_cpu_secs?;
        (self.ok > 0).then(|| cpu * 1e6 / self.ok as f64)
    }

    /// The sum of every series of `name` (any labels) in `server_metrics`.
    pub fn metric_sum(&self, name: &str) -> Option<f64> {
        let mut found = None;
        for (k, v) in &self.server_metrics {
            let base = k.split('{').next().unwrap_or(k);
            if base == name {
                *found.get_or_insert(0.0) += v;
            }
        }
        found
    }

    /// The one series `name{labels}` exactly as exported.
    pub fn metric(&self, series: &str) -> Option<f64> {
        self.server_metrics.get(series).copied()
    }
}

/// A workload name from a file, under the name this build gives it.
pub(crate) fn current_workload_name<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    Ok(crate::workload::current_name(&name).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tally_counts_and_merges() {
        let mut a = Tally::default();
        a.record(Duration::from_micros(100), &Ok(Outcome::Done));
        a.record(Duration::from_micros(300), &Ok(Outcome::Miss));
        a.record(
            Duration::from_micros(5),
            &Err(OpError::new("BUSY", "first")),
        );
        let mut b = Tally::default();
        b.record(Duration::from_micros(200), &Ok(Outcome::Done));
        b.record(
            Duration::from_micros(5),
            &Err(OpError::new("BUSY", "second")),
        );
        b.record(
            Duration::from_micros(5),
            &Err(OpError::new("TIMEOUT", "slow")),
        );
        a.merge(b);
        assert_eq!(a.ok, 3);
        assert_eq!(a.misses, 1);
        assert_eq!(a.error_count(), 3);
        assert_eq!(a.errors["BUSY"].count, 2);
        assert_eq!(a.errors["BUSY"].example, "first");
        assert_eq!(a.hist.len(), 3);
        let l = Latency::from_histogram(&a.hist);
        assert!((l.p50_us - 200.0).abs() < 1.0, "{l:?}");
        assert!((l.max_us - 300.0).abs() < 1.0, "{l:?}");
        assert!(l.min_us <= l.p50_us && l.p50_us <= l.p99_us && l.p99_us <= l.max_us);
    }
}
