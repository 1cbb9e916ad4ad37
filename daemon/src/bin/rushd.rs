//! `rushd`: parse flags, load config, run until SIGTERM/SIGINT.

use anyhow::Context;
use clap::Parser;
use rush_daemon::{Clock, Config};

use std::path::PathBuf;

/// Requests allocate and free small buffers on one thread and drop them on
/// another; glibc malloc spent 15–20 % of rushd's CPU on that
/// (bench/results/NOTES.md). mimalloc's thread-local free lists do not. The
/// `override` feature (root Cargo.toml) sends RocksDB's C++ allocations to
/// mimalloc as well: −11 % CPU per op on kv-incr, −3 % on kv-set.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long mimalloc keeps freed memory before giving it back to the
/// kernel, unless `MIMALLOC_PURGE_DELAY` says otherwise. Kept 10 s, freed
/// memory was up to 140 MiB of a 768 MiB node's resident memory (envelopes
/// at 1M), and the CPU it saved is gone: it was memtable arenas faulted in
/// afresh (23 % of kv-incr's CPU in `clear_page_erms` then), and with
/// `commit = "log"` writes no longer go through memtables. 1 s against
/// 10 s: kv-incr 1.81 against 1.91 µs/op, kv-set 2.48 against 2.35 (one
/// outlier round; 2 of 3 rounds faster), resident memory 50–140 MiB lower
/// (bench/results/NOTES.md).
const PURGE_DELAY_MS: std::ffi::c_long = 1_000;

/// `mi_option_purge_delay` in mimalloc's `mi_option_t` (include/mimalloc.h);
/// the Rust bindings name no constant for it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one of mimalloc's integer options; mimalloc reads it
        // at each purge, and any value is valid.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
    }
}

/// Rush daemon: short links, purchase limits, the Bloom-guarded catalog and
/// red envelopes on one sharded, disk-backed node.
///
/// Precedence, lowest first: built-in defaults, --config FILE, RUSH_*
/// environment variables, flags. With no arguments rushd listens on
/// 127.0.0.1:7379 (protocol) and 127.0.0.1:7380 (HTTP /metrics, /health,
/// /ready) and keeps its data in ./rush-data.
#[derive(Parser, Debug)]
#[command(name = "rushd", version)]
struct Args {
    /// TOML config file (see deploy/rushd.toml).
    #[arg(long, env = "RUSH_CONFIG")]
    config: Option<PathBuf>,
    /// Protocol listen address.
    #[arg(long, env = "RUSH_LISTEN")]
    listen: Option<String>,
    /// HTTP address for /metrics, /health, /ready ("" turns it off).
    #[arg(long, env = "RUSH_HTTP")]
    http: Option<String>,
    /// RESP (Redis protocol) listener address ("" turns it off; default:
    /// the protocol listener's port + 2).
    #[arg(long, env = "RUSH_RESP")]
    resp: Option<String>,
    /// Short-link redirect listener for GET /{code} ("" turns it off, the default).
    #[arg(long, env = "RUSH_REDIRECT")]
    redirect: Option<String>,
    /// Data directory.
    #[arg(long, env = "RUSH_DATA")]
    data: Option<PathBuf>,
    /// Shard threads (0 = one per core).
    #[arg(long, env = "RUSH_SHARDS")]
    shards: Option<usize>,
    /// The node's memory budget in MiB (`[memory] budget_mb`): sizes the
    /// caches and buffers by the config's shares.
    #[arg(long, env = "RUSH_MEMORY_MB")]
    memory_mb: Option<usize>,
    /// Client tokens, one per line (`name:token` or `token`): HELLO must present one.
    #[arg(long, env = "RUSH_AUTH_TOKEN_FILE")]
    auth_token_file: Option<PathBuf>,
    /// Admin tokens, same format: they also allow admin requests.
    #[arg(long, env = "RUSH_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<PathBuf>,
    /// PEM certificate chain: serve the protocol over TLS (with --tls-key).
    #[arg(long, env = "RUSH_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, env = "RUSH_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// This node's id in the cluster map (default: generated on first start
    /// and kept in the data directory).
    #[arg(long, env = "RUSH_NODE_ID")]
    node_id: Option<String>,
    /// The host:port peers and clients reach this node at (default: the
    /// listen address).
    #[arg(long, env = "RUSH_ADVERTISE")]
    advertise: Option<String>,
    /// Cluster map file (`epoch`, `[[nodes]]` with `id`, `addr`, `slots`).
    #[arg(long, env = "RUSH_CLUSTER_MAP")]
    cluster_map: Option<PathBuf>,
    /// Follow this primary (`host:port` of its replication listener) as
    /// its replica (`[replication] replica_of`).
    #[arg(long, env = "RUSH_REPLICA_OF")]
    replica_of: Option<String>,
    /// Serve replicas on this address (`[replication] listen`; "" turns
    /// it off, the default).
    #[arg(long, env = "RUSH_REPLICATION_LISTEN")]
    replication_listen: Option<String>,
    /// Log filter (tracing's EnvFilter syntax).
    #[arg(long, env = "RUSH_LOG", default_value = "info")]
    log: String,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// Exit 0 if the node this configuration (file, RUSH_*, flags) describes
    /// answers GET /health on its HTTP listener, 1 otherwise: the container
    /// image's HEALTHCHECK, which then follows `[server] http`.
    Health {
        /// Ask /ready (serving and not draining) instead.
        #[arg(long)]
        ready: bool,
        /// Seconds to wait for the answer.
        #[arg(long, default_value_t = 3)]
        timeout: u64,
    },
}

fn main() -> anyhow::Result<()> {
    keep_freed_memory();
    let args = Args::parse();
    // Logs go to stderr; stdout carries only the "serving" line.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(&args.log))
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(v) = args.listen {
        config.server.listen = v;
    }
    if let Some(v) = args.http {
        config.server.http = v;
    }
    if let Some(v) = args.resp {
        config.server.resp_listen = Some(v);
    }
    if let Some(v) = args.redirect {
        config.links.redirect_listen = v;
    }
    if let Some(v) = args.data {
        config.storage.data_dir = v;
    }
    if let Some(v) = args.shards {
        config.storage.shards = v;
    }
    if let Some(v) = args.memory_mb {
        config.memory.budget_mb = v;
    }
    if let Some(v) = args.auth_token_file {
        config.auth.token_file = Some(v);
    }
    if let Some(v) = args.admin_token_file {
        config.auth.admin_token_file = Some(v);
    }
    if let Some(v) = args.node_id {
        config.node.id = Some(v);
    }
    if let Some(v) = args.advertise {
        config.cluster.advertise = Some(v);
    }
    if let Some(v) = args.cluster_map {
        config.cluster.map_file = Some(v);
    }
    if let Some(v) = args.replica_of {
        config.replication.replica_of = v;
    }
    if let Some(v) = args.replication_listen {
        config.replication.listen = v;
    }
    if let (Some(cert), Some(key)) = (args.tls_cert, args.tls_key) {
        config.tls.cert_file = Some(cert);
        config.tls.key_file = Some(key);
    }
    if let Some(Command::Health { ready, timeout }) = args.command {
        let addr = config.http_probe_addr()?;
        let path = if ready { "/ready" } else { "/health" };
        rush_daemon::http::probe(addr, path, std::time::Duration::from_secs(timeout))?;
        return Ok(());
    }
    config.validate()?;
    if !rush_daemon::server::raise_fd_limit() {
        tracing::warn!("could not raise the open-file limit");
    }
    if !rush_daemon::server::set_transparent_huge_pages(config.server.transparent_huge_pages) {
        tracing::warn!("could not turn transparent huge pages off");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.io_threads())
        .thread_name("rush-io")
        .enable_all()
        .build()
        .context("starting the I/O runtime")?;
    runtime.block_on(rush_daemon::server::run(
        config,
        Clock::system(),
        shutdown_signal(),
        print_serving,
    ))
}

/// One stable line on stdout for scripts and tests that start rushd on
/// port 0 (again after a promoted replica restarts, with the same addresses).
fn print_serving(running: &rush_daemon::server::Running) {
    {
        let http = running
            .http_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|| "off".into());
        let redirect = running
            .redirect_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|| "off".into());
        let resp = running
            .resp_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|| "off".into());
        // Not println!: a reader gone from stdout (a script that read the
        // first line) must not stop a restarted node.
        use std::io::Write;
        let _ = writeln!(
            std::io::stdout(),
            "rushd serving {} http {} redirect {} resp {}",
            running.addr(),
            http,
            redirect,
            resp
        );
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing SIGTERM handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
    }
}
