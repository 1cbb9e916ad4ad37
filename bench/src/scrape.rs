//! Reading rushd's `/metrics` (Prometheus text) around a run, so a workload
//! can report what the server did per operation — storage reads per catalog
//! query, for one — next to what the client measured.
//!
//! A plain HTTP/1.1 GET over a tokio socket: the bench needs no HTTP client
//! for one request before and one after a run.

use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Series (`name{labels}` exactly as exported) → value.
pub type Samples = BTreeMap<String, f64>;

/// Fetch `http://{addr}/metrics` and keep the series whose metric name is
/// one of `names`.
pub async fn scrape(addr: &str, names: &[&str], timeout: Duration) -> anyhow::Result<Samples> {
    let text = tokio::time::timeout(timeout, get(addr, "/metrics"))
        .await
        .with_context(|| format!("{addr}/metrics did not answer within {timeout:?}"))??;
    Ok(parse(&text, names))
}

async fn get(addr: &str, path: &str) -> anyhow::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        bail!("{addr}{path}: no HTTP header end");
    };
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!(
            "{addr}{path}: {}",
            head.lines().next().unwrap_or("no status line")
        );
    }
    // axum answers /metrics with a length, not chunks; a chunked body
    // would still parse (chunk sizes are not valid sample lines).
    Ok(body.to_string())
}

/// The samples of Prometheus text whose metric name is in `names`.
pub fn parse(text: &str, names: &[&str]) -> Samples {
    let mut out = Samples::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        // `name{labels} value` or `name value`; label values may hold spaces.
        let (series, value) = match line.rfind(' ') {
            Some(i) => (&line[..i], line[i + 1..].trim()),
            None => continue,
        };
        let name = series.split('{').next().unwrap_or(series);
        if !names.contains(&name) {
            continue;
        }
        if let Ok(v) = value.parse::<f64>() {
            out.insert(series.to_string(), v);
        }
    }
    out
}

/// Every node's samples added up, series by series.
pub fn sum(all: &[Samples]) -> Samples {
    let mut out = Samples::new();
    for s in all {
        for (k, v) in s {
            *out.entry(k.clone()).or_default() += v;
        }
    }
    out
}

/// rushd's series that say where a stall was, read around every Rush run:
/// how long its shards' passes and group commits took, and how long they
/// waited for their write-back threads (histograms: a run reports how many of each were
/// over a bound, and their time in all).
pub const STALL_METRICS: &[&str] = &[
    "rush_shard_pass_seconds_bucket",
    "rush_shard_pass_seconds_count",
    "rush_shard_pass_seconds_sum",
    "rush_storage_write_back_wait_seconds_bucket",
    "rush_storage_write_back_wait_seconds_count",
    "rush_storage_write_back_wait_seconds_sum",
    "rush_storage_commit_seconds_bucket",
    "rush_storage_commit_seconds_count",
];

/// What a run reports: a counter's (`…_total`, or a histogram's buckets,
/// count and sum) increase from `before` to `after`, any other series'
/// value `after`.
pub fn change(before: &Samples, after: &Samples) -> Samples {
    after
        .iter()
        .map(|(k, v)| {
            let name = k.split('{').next().unwrap_or(k);
            let cumulative = ["_total", "_bucket", "_count", "_sum"]
                .iter()
                .any(|end| name.ends_with(end));
            let d = if cumulative {
                v - before.get(k).copied().unwrap_or(0.0)
            } else {
                *v
            };
            (k.clone(), d)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP rush_storage_reads_total RocksDB point reads\n\
# TYPE rush_storage_reads_total gauge\n\
rush_storage_reads_total 120\n\
rush_catalog_answers_total{op=\"query\",path=\"bloom_negative\"} 40\n\
rush_catalog_answers_total{op=\"query\",path=\"storage_hit\"} 7\n\
rush_catalog_bloom_false_positive_rate 0.01\n\
rush_other_total 5\n";

    #[test]
    fn keeps_named_series_and_computes_changes() {
        let names = [
            "rush_storage_reads_total",
            "rush_catalog_answers_total",
            "rush_catalog_bloom_false_positive_rate",
        ];
        let a = parse(TEXT, &names);
        assert_eq!(a.len(), 4);
        assert_eq!(a["rush_storage_reads_total"], 120.0);
        assert_eq!(
            a["rush_catalog_answers_total{op=\"query\",path=\"storage_hit\"}"],
            7.0
        );
        let mut b = a.clone();
        b.insert("rush_storage_reads_total".into(), 150.0);
        b.insert("rush_catalog_bloom_false_positive_rate".into(), 0.02);
        let d = change(&a, &b);
        assert_eq!(d["rush_storage_reads_total"], 30.0);
        assert_eq!(d["rush_catalog_bloom_false_positive_rate"], 0.02);
        let s = sum(&[a.clone(), a]);
        assert_eq!(s["rush_storage_reads_total"], 240.0);
    }

    /// A histogram's buckets, count and sum are cumulative: a run reports
    /// what was added during it.
    #[test]
    fn histograms_report_their_increase() {
        let text = |n: u32, sum: f64| {
            format!(
                "rush_shard_pass_seconds_bucket{{le=\"0.25\"}} {n}\n\
                 rush_shard_pass_seconds_bucket{{le=\"+Inf\"}} {}\n\
                 rush_shard_pass_seconds_sum {sum}\n\
                 rush_shard_pass_seconds_count {}\n",
                n + 2,
                n + 2
            )
        };
        let before = parse(&text(100, 1.5), STALL_METRICS);
        let after = parse(&text(160, 4.0), STALL_METRICS);
        assert_eq!(before.len(), 4);
        let d = change(&before, &after);
        assert_eq!(d["rush_shard_pass_seconds_bucket{le=\"0.25\"}"], 60.0);
        assert_eq!(d["rush_shard_pass_seconds_count"], 60.0);
        assert_eq!(d["rush_shard_pass_seconds_sum"], 2.5);
    }
}
