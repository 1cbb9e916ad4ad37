//! "redis-benchmark (an independent client)": the redis-benchmark phase's
//! rows — Redis's own benchmark client against rushd's RESP listener and
//! against each Redis, the same arguments for each — with throughput, the
//! latencies redis-benchmark reports and the server's CPU per request.

use super::format::{ops, ratio};
use crate::suite::{RedisBenchmarkRow, ServerKind, SuiteResults};
use std::fmt::Write as _;

pub(super) const TITLE: &str = "## redis-benchmark (an independent client)";

/// The section; nothing for results from before the phase existed, a line
/// saying why when the phase was skipped.
pub(super) fn section(s: &mut String, results: &SuiteResults) {
    let rows = &results.redis_benchmark;
    if rows.is_empty() {
        if let Some(why) = &results.redis_benchmark_skipped {
            let _ = writeln!(
                s,
                "{TITLE}\n\nThis run has no redis-benchmark rows: {why}.\n"
            );
        }
        return;
    }
    let _ = writeln!(s, "{TITLE}\n");
    let first = &rows[0];
    let _ = writeln!(
        s,
        "Redis's own benchmark client, not rush-bench, against rushd's RESP listener and \
         against each Redis: a fresh server each, one at a time, the same command line for \
         every server — `redis-benchmark -t TEST -P PIPELINE -c {} -n {} -r {} -d {} --csv`, \
         one run per test so that each row has the server's own CPU time (user + system, \
         its forked children's included, from `/proc/PID/stat` before and after the run) divided by the requests. SET and GET \
         use `key:__rand_int__`, INCR `counter:__rand_int__`, HSET field \
         `element:__rand_int__` of the one key `myhash`, with `-r {}` (at most the 10,000 \
         fields a Rush hash may hold; Rush stores each field on its own, so an HSET writes its \
         field and the hash's header). \
         Rush syncs every acknowledged write \
         (group commit), as Redis does with `appendfsync always`; with `everysec` Redis \
         acknowledges before the fsync. At pipeline 1 each client waits for every write's \
         sync, which is what that row shows. Ratios are Rush/Redis: above 1× Rush answers \
         more requests per second, or spends more CPU per request. /proc counts CPU time in \
         clock ticks of 10 ms, so a µs/op figure is good to 10 ms / -n = {:.2} µs here.\n",
        first.clients,
        first.requests,
        first.keyspace,
        first.value_size,
        rows.iter()
            .find(|r| r.test == "HSET")
            .map_or(first.keyspace, |r| r.keyspace),
        10_000.0 / first.requests.max(1) as f64
    );
    let redis: Vec<ServerKind> = ServerKind::ALL
        .into_iter()
        .filter(|k| *k != ServerKind::Rush && rows.iter().any(|r| r.server == *k))
        .collect();
    let keys = test_order(rows);
    let find = |k: ServerKind, test: &str, p: usize| {
        rows.iter()
            .find(|r| r.server == k && r.test == test && r.pipeline == p)
    };
    let us = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.1}"));
    let msf = |v: Option<f64>| v.map_or("–".into(), |v| format!("{v:.3}"));
    for &k in &redis {
        let _ = writeln!(s, "### Rush vs {}\n", k.label());
        let _ = writeln!(
            s,
            "| Test | Pipeline | Rush req/s | Redis req/s | Rush/Redis | Rush server µs/op | Redis server µs/op | Rush/Redis |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for (test, p) in &keys {
            let rush = find(ServerKind::Rush, test, *p);
            let other = find(k, test, *p);
            let rps = |r: Option<&RedisBenchmarkRow>| r.map(|r| r.throughput);
            let cpu = |r: Option<&RedisBenchmarkRow>| r.and_then(|r| r.server_cpu_us_per_op());
            let both = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => ratio(a, b),
                _ => "–".into(),
            };
            let _ = writeln!(
                s,
                "| {test} | {p} | {} | {} | {} | {} | {} | {} |",
                rps(rush).map_or("–".into(), ops),
                rps(other).map_or("–".into(), ops),
                both(rps(rush), rps(other)),
                us(cpu(rush)),
                us(cpu(other)),
                both(cpu(rush), cpu(other)),
            );
        }
        let _ = writeln!(s);
    }
    // Latency as redis-benchmark reports it, every server side by side.
    let servers: Vec<ServerKind> = std::iter::once(ServerKind::Rush)
        .filter(|k| rows.iter().any(|r| r.server == *k))
        .chain(redis.iter().copied())
        .collect();
    let _ = writeln!(s, "### Latency as redis-benchmark reports it (ms)\n");
    let mut head = String::from("| Test | Pipeline |");
    let mut rule = String::from("|---|---:|");
    for k in &servers {
        let _ = write!(head, " {} avg | p50 | p99 |", k.label());
        rule.push_str("---:|---:|---:|");
    }
    let _ = writeln!(s, "{head}\n{rule}");
    for (test, p) in &keys {
        let mut line = format!("| {test} | {p} |");
        for k in &servers {
            let r = find(*k, test, *p);
            let _ = write!(
                line,
                " {} | {} | {} |",
                msf(r.and_then(|r| r.avg_ms)),
                msf(r.and_then(|r| r.p50_ms)),
                msf(r.and_then(|r| r.p99_ms))
            );
        }
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s);
}

/// (test, pipeline) in the order the phase ran them: pipeline, then test.
fn test_order(rows: &[RedisBenchmarkRow]) -> Vec<(String, usize)> {
    let mut keys: Vec<(String, usize)> = Vec::new();
    for r in rows {
        if !keys.iter().any(|(t, p)| *t == r.test && *p == r.pipeline) {
            keys.push((r.test.clone(), r.pipeline));
        }
    }
    keys.sort_by_key(|(_, p)| *p);
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        server: ServerKind,
        test: &str,
        pipeline: usize,
        rps: f64,
        cpu: f64,
    ) -> RedisBenchmarkRow {
        RedisBenchmarkRow {
            server,
            test: test.into(),
            pipeline,
            clients: 50,
            requests: 10_000,
            keyspace: 1000,
            value_size: 100,
            throughput: rps,
            avg_ms: Some(0.5),
            p50_ms: Some(0.4),
            p99_ms: Some(1.25),
            max_ms: Some(3.0),
            server_cpu_secs: Some(cpu),
        }
    }

    fn results(rows: Vec<RedisBenchmarkRow>, skipped: Option<&str>) -> SuiteResults {
        let json = crate::report::tests::results_json(Vec::new(), None);
        let mut r: SuiteResults = serde_json::from_value(json).expect("loads");
        assert!(r.redis_benchmark.is_empty() && r.redis_benchmark_skipped.is_none());
        r.redis_benchmark = rows;
        r.redis_benchmark_skipped = skipped.map(str::to_string);
        r
    }

    #[test]
    fn rush_beside_each_redis_with_the_ratios() {
        let rows = vec![
            row(ServerKind::Rush, "SET", 1, 5_000.0, 0.5),
            row(ServerKind::Rush, "SET", 16, 200_000.0, 0.3),
            row(ServerKind::RedisEverysec, "SET", 1, 20_000.0, 0.2),
            row(ServerKind::RedisEverysec, "SET", 16, 400_000.0, 0.1),
            row(ServerKind::RedisAlways, "SET", 1, 2_500.0, 0.25),
        ];
        let mut s = String::new();
        section(&mut s, &results(rows, None));
        assert!(s.starts_with(TITLE), "{s}");
        assert!(s.contains("-c 50 -n 10000 -r 1000 -d 100 --csv"), "{s}");
        assert!(s.contains("10 ms / -n = 1.00 µs here"), "{s}");
        let everysec = s.find("### Rush vs Redis (AOF everysec)").expect("{s}");
        let always = s.find("### Rush vs Redis (AOF always)").expect("{s}");
        assert!(everysec < always);
        // 0.5 s over 10,000 requests: 50 µs; 0.2 s: 20 µs.
        assert!(
            s[everysec..always]
                .contains("| SET | 1 | 5,000 | 20,000 | 0.25× | 50.0 | 20.0 | 2.50× |"),
            "{s}"
        );
        assert!(
            s[everysec..always]
                .contains("| SET | 16 | 200,000 | 400,000 | 0.50× | 30.0 | 10.0 | 3.00× |"),
            "{s}"
        );
        // Redis always has no pipeline-16 row: dashes, not a made-up ratio.
        assert!(
            s[always..].contains("| SET | 1 | 5,000 | 2,500 | 2.00× | 50.0 | 25.0 | 2.00× |"),
            "{s}"
        );
        assert!(
            s[always..].contains("| SET | 16 | 200,000 | – | – | 30.0 | – | – |"),
            "{s}"
        );
        assert!(s.contains(
            "| Test | Pipeline | Rush avg | p50 | p99 | Redis (AOF everysec) avg | p50 | p99 | Redis (AOF always) avg | p50 | p99 |"
        ), "{s}");
        assert!(s.contains("| SET | 1 | 0.500 | 0.400 | 1.250 |"), "{s}");
    }

    #[test]
    fn old_results_have_no_section_and_a_skipped_phase_says_why() {
        let mut s = String::new();
        section(&mut s, &results(Vec::new(), None));
        assert!(s.is_empty(), "{s}");
        section(
            &mut s,
            &results(Vec::new(), Some("redis-benchmark is not installed")),
        );
        assert!(s.contains(TITLE));
        assert!(
            s.contains("This run has no redis-benchmark rows: redis-benchmark is not installed.")
        );
    }
}
