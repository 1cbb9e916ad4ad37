//! `rush-bench`: one workload against one target, the whole suite, or a
//! report from saved results.
//!
//! ```text
//! rush-bench kv-set --target rush://127.0.0.1:7379 --connections 50 --pipeline 16 --duration 10
//! rush-bench kv-get --target redis://127.0.0.1:6379 --preload --rate 50000 --json out.json
//! rush-bench suite --rushd target/release/rushd --quick
//! rush-bench suite --rushd target/release/rushd --pin
//! ```
//!
//! Over 500 lines only with its unit tests (`mod tests`, at the end): the
//! rest is the three argument structs — their doc comments are the `--help`
//! text, so they read best whole — and the few functions that dispatch to
//! the library (`rush_bench::suite`, `rush_bench::report`).

use anyhow::Context;
use clap::{ArgMatches, Args, Command, FromArgMatches};
use rush_bench::suite::{self, ServerKind, SuiteOptions};
use rush_bench::{Dist, Params, RunOptions, RunReport, Stop, Target, WORKLOADS};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of a single run (every workload takes the same).
#[derive(Args, Debug)]
struct RunArgs {
    /// rush://HOST:PORT or redis://HOST:PORT. A Rush cluster: rush://A,B,C
    /// or --target once per node (requests are routed by slot).
    #[arg(long, required = true)]
    target: Vec<Target>,
    /// Connections (each multiplexed).
    #[arg(long, short = 'c', default_value_t = 50)]
    connections: usize,
    /// Requests in flight per connection.
    #[arg(long, short = 'P', default_value_t = 1)]
    pipeline: usize,
    /// Seconds to run (default 10 unless --requests is given).
    #[arg(long, conflicts_with = "requests")]
    duration: Option<f64>,
    /// Requests to send in all.
    #[arg(long, short = 'n')]
    requests: Option<u64>,
    /// Size of the key space.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Key distribution: uniform or zipf:S (e.g. zipf:0.99). Default: the
    /// workload's (uniform, or zipf:0.99 where popularity is the point).
    #[arg(long)]
    dist: Option<Dist>,
    /// Open loop: offered load in requests per second (all connections
    /// together); latency counts from each request's scheduled send time.
    #[arg(long)]
    rate: Option<f64>,
    /// Bytes per written value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Load the data the workload reads first (e.g. every key for kv-get).
    #[arg(long)]
    preload: bool,
    /// Per-request timeout in seconds (the same for both sides).
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Free text describing the server setup, kept in the JSON.
    #[arg(long)]
    label: Option<String>,
    /// What an acknowledged write means on this target, kept in the JSON.
    #[arg(long)]
    durability: Option<String>,
    /// HOST:PORT of a Rush node's HTTP listener (its /metrics), once per
    /// node: server-side figures (e.g. storage reads per catalog query) are read
    /// before and after the run.
    #[arg(long)]
    metrics: Vec<String>,
    /// The server's process id, when it runs on this machine: its CPU time
    /// per operation is reported.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Client runtime threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// No progress line.
    #[arg(long, short = 'q')]
    quiet: bool,
}

/// Options of `rush-bench suite`.
#[derive(Args, Debug)]
struct SuiteArgs {
    /// The rushd binary to benchmark.
    #[arg(long, default_value = "target/release/rushd")]
    rushd: PathBuf,
    /// The redis-server binary to compare with.
    #[arg(long, default_value = "redis-server")]
    redis_server: PathBuf,
    /// Short run for CI smoke tests (under 2 minutes).
    #[arg(long)]
    quick: bool,
    /// Directory for REPORT.md, results.json and the charts.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
    /// rushd shard threads (default: rushd's, one per core).
    #[arg(long)]
    shards: Option<usize>,
    /// Connections per run.
    #[arg(long)]
    connections: Option<usize>,
    /// Requests in flight per connection, one closed-loop run each (e.g. 1,16).
    #[arg(long, value_delimiter = ',')]
    pipelines: Option<Vec<usize>>,
    /// Seconds per closed-loop run.
    #[arg(long)]
    duration: Option<f64>,
    /// Size of the key space.
    #[arg(long)]
    keys: Option<u64>,
    /// Key distribution: uniform or zipf:S.
    #[arg(long)]
    dist: Option<Dist>,
    /// Open-loop steps as fractions of the closed-loop peak (e.g. 0.25,0.5,0.9).
    #[arg(long, value_delimiter = ',')]
    sweep: Option<Vec<f64>>,
    /// Seconds per open-loop step.
    #[arg(long)]
    sweep_duration: Option<f64>,
    /// Only these workloads (comma-separated; older names are accepted).
    #[arg(long, value_delimiter = ',')]
    workloads: Option<Vec<String>>,
    /// Only these servers: rush, redis-everysec, redis-always.
    #[arg(long, value_delimiter = ',')]
    servers: Option<Vec<ServerKind>>,
    /// Parent directory for the servers' temporary data directories
    /// (default: the system temp directory, unless it is tmpfs).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Client runtime threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Skip the redis-benchmark calibration rows (skipped anyway with --quick).
    #[arg(long)]
    no_calibrate: bool,
    /// Skip the redis-benchmark phase: redis-benchmark (Redis's own client,
    /// independent of rush-bench) run against rushd's RESP listener and each
    /// redis-server, `-t set`, `get`, `incr`, `hset` each at `-P 1` and
    /// `-P 16`, with the server's CPU per request. Without this option a
    /// missing redis-benchmark skips the phase with a note, except under
    /// RUSH_REQUIRE_ALL=1 (CI), where it fails the suite, as does any error
    /// redis-benchmark reports.
    #[arg(long)]
    no_redis_benchmark: bool,
    /// redis-benchmark `-n` in the redis-benchmark phase: requests per test
    /// and pipeline (default 100000, redis-benchmark's own; 1000 with
    /// --quick).
    #[arg(long, value_name = "N")]
    redis_benchmark_requests: Option<u64>,
    /// redis-benchmark `-c` in the redis-benchmark phase: clients
    /// (connections) (default 50). Its `-r` is --keys (HSET's capped at the
    /// 10,000 fields a Rush hash may hold), its `-d` the value size.
    #[arg(long, value_name = "N")]
    redis_benchmark_clients: Option<usize>,
    /// Item counts of the scaling rows, e.g. 1000000,10000000: links
    /// (links-resolve, the footprint per link, links-shorten) and owners
    /// (catalog, the footprint per owner, catalog-zipf), each family on a
    /// fresh server.
    #[arg(long, value_delimiter = ',')]
    scale_keys: Option<Vec<u64>>,
    /// Servers of the scaling rows (default: rush, redis-everysec).
    #[arg(long, value_delimiter = ',')]
    scale_servers: Option<Vec<ServerKind>>,
    /// rushd's memory budget in the scaling rows, MiB (`rushd --memory-mb`:
    /// its caches, memtables and held writes are sized from it); default
    /// 1024, 256 with --quick, more when the shards' memtables need it (80
    /// per shard); 0: rushd's own sizes, no budget.
    #[arg(long, value_name = "N")]
    scale_memory_mb: Option<usize>,
    /// No scaling and footprint rows.
    #[arg(long)]
    no_scaling: bool,
    /// No one-shard rows.
    #[arg(long)]
    no_one_shard: bool,
    /// No open-loop step at half the peak for workloads that aren't swept.
    #[arg(long)]
    no_half_peak: bool,
    /// Also run the headline closed-loop runs (every workload, every server,
    /// the deepest pipeline) in a pinned layout: each server alone on the
    /// first CPU this process may use (under taskset; rushd with --shards 1),
    /// the client on the second. Needs two CPUs and taskset (util-linux).
    #[arg(long)]
    pin: bool,
}

/// Options of `rush-bench report`.
#[derive(Args, Debug)]
struct ReportArgs {
    /// A results.json written by the suite.
    #[arg(long, default_value = "bench/results/results.json")]
    results: PathBuf,
    /// Directory for REPORT.md and the charts.
    #[arg(long, default_value = "bench/results")]
    out: PathBuf,
}

fn cli() -> Command {
    let mut cmd = Command::new("rush-bench")
        .about("Load harness: Rush workloads against rushd and, side by side, against Redis")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .arg_required_else_help(true);
    for e in WORKLOADS {
        // An old name still runs the workload (hidden from the help).
        cmd = cmd.subcommand(
            RunArgs::augment_args(Command::new(e.name))
                .about(e.about)
                .aliases(e.aliases),
        );
    }
    cmd.subcommand(SuiteArgs::augment_args(Command::new("suite")).about(
        "Start rushd and redis-server (AOF everysec, then always) on loopback, run every \
         workload against each, write REPORT.md with charts",
    ))
    .subcommand(
        ReportArgs::augment_args(Command::new("report"))
            .about("Write REPORT.md and the charts again from a results.json"),
    )
    .subcommand(Command::new("list").about("List the workloads"))
}

fn main() -> ExitCode {
    let matches = cli().get_matches();
    let (name, sub) = matches.subcommand().expect("a subcommand is required");
    let result = match name {
        "list" => {
            for e in WORKLOADS {
                let was = if e.aliases.is_empty() {
                    String::new()
                } else {
                    format!(" (formerly {})", e.aliases.join(", "))
                };
                println!("{:<12} {}{was}", e.name, e.about);
            }
            Ok(ExitCode::SUCCESS)
        }
        "suite" => run_suite(sub),
        "report" => run_report(sub),
        workload => run_one(workload, sub),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rush-bench: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn runtime(threads: Option<usize>) -> anyhow::Result<tokio::runtime::Runtime> {
    let threads = threads.unwrap_or_else(cores).max(1);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name("rush-bench")
        .enable_all()
        .build()
        .context("starting the runtime")
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn run_one(workload: &str, m: &ArgMatches) -> anyhow::Result<ExitCode> {
    let a = RunArgs::from_arg_matches(m)?;
    let target = Target::merge(&a.target).map_err(|e| anyhow::anyhow!(e))?;
    let mut o = RunOptions::new(target);
    o.connections = a.connections;
    o.pipeline = a.pipeline;
    o.stop = match (a.requests, a.duration) {
        (Some(n), _) => Stop::Requests(n),
        (None, Some(s)) => Stop::Duration(secs(s, "--duration")?),
        (None, None) => Stop::Duration(Duration::from_secs(10)),
    };
    o.rate = a.rate;
    o.params = Params::new(a.keys, a.dist, a.value_size);
    o.preload(a.preload);
    o.timeout = secs(a.timeout, "--timeout")?;
    o.progress = !a.quiet;
    o.label = a.label;
    o.durability = a.durability;
    o.metrics = a.metrics;
    o.server_pid = a.server_pid;
    let rt = runtime(a.threads)?;
    let report = rt.block_on(rush_bench::run(workload, o))?;
    print_summary(&report);
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if report.errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn secs(v: f64, flag: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("{flag} must be a positive number of seconds"))
}

fn print_summary(r: &RunReport) {
    let mode = match r.rate {
        Some(rate) => format!(
            "open loop at {} ops/s",
            rush_bench::driver::group(rate as u64)
        ),
        None => "closed loop".into(),
    };
    println!(
        "{} {}  {mode}, {} connections × {} in flight, {:.1}s",
        r.workload, r.target, r.connections, r.pipeline, r.elapsed_secs
    );
    if r.preloaded > 0 {
        println!(
            "  preloaded   {} items in {:.1}s",
            r.preloaded, r.preload_secs
        );
    }
    println!(
        "  throughput  {} ops/s ({} ok{}{}, {} errors)",
        rush_bench::driver::group(r.throughput.round() as u64),
        r.ok,
        if r.misses > 0 {
            format!(", {} misses", r.misses)
        } else {
            String::new()
        },
        if r.denied > 0 {
            format!(", {} denied", r.denied)
        } else {
            String::new()
        },
        r.errors
    );
    let l = &r.latency;
    println!(
        "  latency ms  p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
        l.p50_us / 1e3,
        l.p90_us / 1e3,
        l.p99_us / 1e3,
        l.p999_us / 1e3,
        l.max_us / 1e3
    );
    for (kind, stat) in &r.error_types {
        println!("  error       {kind} × {}: {}", stat.count, stat.example);
    }
    if let (Some(s), Some(c)) = (r.server_cpu_us_per_op(), r.client_cpu_us_per_op()) {
        println!("  cpu µs/op   server {s:.1}  client {c:.1}");
    } else if let Some(c) = r.client_cpu_us_per_op() {
        println!("  cpu µs/op   client {c:.1}");
    }
    for (series, v) in &r.server_metrics {
        let per_op = if series
            .split('{')
            .next()
            .is_some_and(|n| n.ends_with("_total"))
            && r.ok > 0
        {
            format!("  ({:.4} per op)", v / r.ok as f64)
        } else {
            String::new()
        };
        println!("  server      {series} {v}{per_op}");
    }
}

fn run_suite(m: &ArgMatches) -> anyhow::Result<ExitCode> {
    let o = suite_options(SuiteArgs::from_arg_matches(m)?)?;
    let rt = runtime(Some(o.threads))?;
    let results = suite::run_suite(&o, &rt)?;
    let errors = results.error_count();
    if errors > 0 || !results.failures.is_empty() {
        eprintln!(
            "rush-bench suite: {errors} failed requests, {} failed runs (see the report)",
            results.failures.len()
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn suite_options(a: SuiteArgs) -> anyhow::Result<SuiteOptions> {
    let mut o = SuiteOptions::new(a.rushd, a.redis_server, a.quick);
    o.out = a.out;
    o.shards = a.shards;
    if let Some(v) = a.connections {
        o.connections = v;
    }
    if let Some(v) = a.pipelines {
        anyhow::ensure!(!v.is_empty(), "--pipelines needs at least one value");
        o.pipelines = v;
    }
    if let Some(v) = a.duration {
        o.duration = secs(v, "--duration")?;
    }
    if let Some(v) = a.keys {
        o.keys = v;
    }
    if let Some(v) = a.dist {
        o.dist = Some(v);
    }
    if let Some(v) = a.scale_keys {
        anyhow::ensure!(v.iter().all(|k| *k > 0), "--scale-keys must be positive");
        o.scale_keys = v;
    }
    if let Some(v) = a.scale_servers {
        o.scale_servers = v;
    }
    o.scale_memory_mb = match a.scale_memory_mb {
        Some(0) => None,
        Some(mb) => Some(mb),
        None => Some(suite::default_scale_memory_mb(a.quick, o.shards)),
    };
    o.scale_keys.retain(|_| !a.no_scaling);
    o.one_shard &= !a.no_one_shard;
    o.half_peak &= !a.no_half_peak;
    if let Some(v) = a.sweep {
        anyhow::ensure!(
            v.iter().all(|f| *f > 0.0 && f.is_finite()),
            "--sweep fractions must be positive"
        );
        o.sweep = v;
    }
    if let Some(v) = a.sweep_duration {
        o.sweep_duration = secs(v, "--sweep-duration")?;
    }
    if let Some(v) = a.workloads {
        o.workloads = v;
    }
    if let Some(v) = a.servers {
        o.servers = v;
    }
    o.data_dir = a.data_dir;
    o.calibrate &= !a.no_calibrate;
    o.redis_benchmark &= !a.no_redis_benchmark;
    if let Some(n) = a.redis_benchmark_requests {
        anyhow::ensure!(n > 0, "--redis-benchmark-requests must be positive");
        o.redis_benchmark_requests = n;
    }
    if let Some(c) = a.redis_benchmark_clients {
        anyhow::ensure!(c > 0, "--redis-benchmark-clients must be positive");
        o.redis_benchmark_clients = c;
    }
    o.pin = a.pin;
    o.threads = a.threads.unwrap_or_else(cores).max(1);
    Ok(o)
}

fn run_report(m: &ArgMatches) -> anyhow::Result<ExitCode> {
    let a = ReportArgs::from_arg_matches(m)?;
    let text = std::fs::read_to_string(&a.results)
        .with_context(|| format!("reading {}", a.results.display()))?;
    let results: suite::SuiteResults =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", a.results.display()))?;
    rush_bench::report::write(&results, &a.out)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_consistent() {
        super::cli().debug_assert();
    }

    fn suite(args: &[&str]) -> SuiteOptions {
        let m = cli()
            .try_get_matches_from(["rush-bench", "suite"].iter().chain(args))
            .expect("parses");
        let (name, sub) = m.subcommand().expect("a subcommand");
        assert_eq!(name, "suite");
        suite_options(SuiteArgs::from_arg_matches(sub).expect("suite args")).expect("options")
    }

    #[test]
    fn old_workload_names_still_run_the_workload() {
        let m = cli()
            .try_get_matches_from(["rush-bench", "lookups", "--target", "rush://h:1"])
            .expect("the old name parses");
        assert_eq!(m.subcommand_name(), Some("catalog"));
        let m = cli()
            .try_get_matches_from(["rush-bench", "lookups-zipf", "--target", "rush://h:1"])
            .expect("the old name parses");
        assert_eq!(m.subcommand_name(), Some("catalog-zipf"));
        // The suite resolves --workloads through the registry, aliases too.
        let o = suite(&["--workloads", "lookups,kv-set"]);
        let found: Vec<_> = o
            .workloads
            .iter()
            .map(|n| rush_bench::workload::find(n).map(|e| e.name))
            .collect();
        assert_eq!(found, [Some("catalog"), Some("kv-set")]);
    }

    #[test]
    fn the_redis_benchmark_phase_has_options() {
        let o = suite(&[]);
        assert!(o.redis_benchmark);
        assert_eq!(
            (o.redis_benchmark_requests, o.redis_benchmark_clients),
            (100_000, 50)
        );
        // --quick runs it too, briefly.
        let o = suite(&["--quick"]);
        assert!(o.redis_benchmark);
        assert_eq!(o.redis_benchmark_requests, 1_000);
        let o = suite(&[
            "--quick",
            "--redis-benchmark-requests",
            "300",
            "--redis-benchmark-clients",
            "4",
        ]);
        assert_eq!(
            (o.redis_benchmark_requests, o.redis_benchmark_clients),
            (300, 4)
        );
        assert!(!suite(&["--no-redis-benchmark"]).redis_benchmark);
        let help = cli()
            .find_subcommand_mut("suite")
            .expect("suite")
            .render_long_help()
            .to_string();
        for flag in [
            "--no-redis-benchmark",
            "--redis-benchmark-requests",
            "--redis-benchmark-clients",
        ] {
            assert!(help.contains(flag), "{flag} not in:\n{help}");
        }
    }

    #[test]
    fn the_scaling_rows_run_rushd_on_a_memory_budget() {
        let budget = |args: &[&str]| suite(args).scale_memory_mb;
        assert_eq!(budget(&["--shards", "2"]), Some(1024));
        assert_eq!(budget(&["--quick", "--shards", "2"]), Some(256));
        // Raised to what rushd takes: 10 % of it holds 2 × 4 MiB per shard.
        assert_eq!(budget(&["--quick", "--shards", "4"]), Some(320));
        assert_eq!(budget(&["--shards", "16"]), Some(1280));
        // Without --shards: for rushd's one shard per core.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(
            budget(&["--quick"]),
            Some(256.max(suite::smallest_memory_mb(cores)))
        );
        let o = suite(&["--scale-memory-mb", "512", "--scale-keys", "1000,2000"]);
        assert_eq!(o.scale_memory_mb, Some(512));
        assert_eq!(o.scale_keys, [1000, 2000]);
        // 0: rushd's own sizes.
        assert_eq!(suite(&["--scale-memory-mb", "0"]).scale_memory_mb, None);
        let help = cli()
            .find_subcommand_mut("suite")
            .expect("suite")
            .render_long_help()
            .to_string();
        assert!(help.contains("--scale-memory-mb"), "{help}");
    }

    #[test]
    fn pin_is_a_suite_option() {
        assert!(!suite(&[]).pin);
        let o = suite(&["--pin"]);
        assert!(o.pin && !o.quick);
        // A short pinned pass for smoke tests.
        let o = suite(&["--quick", "--pin", "--servers", "rush"]);
        assert!(o.pin && o.quick);
        assert_eq!(o.pipelines, [16]);
        assert_eq!(o.servers, [ServerKind::Rush]);
        assert!(cli()
            .try_get_matches_from(["rush-bench", "suite", "--pin=2"])
            .is_err());
        assert!(cli()
            .try_get_matches_from(["rush-bench", "kv-set", "--target", "rush://h:1", "--pin"])
            .is_err());
    }
}
