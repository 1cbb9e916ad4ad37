//! Configuration: one serde struct per section, defaults as named constants
//! (STYLE 7). Precedence, lowest first: built-in defaults, the TOML file,
//! `RUSH_*` environment variables, command-line flags. With nothing at all,
//! `rushd` listens on loopback and keeps its data in `./rush-data`.
//! `deploy/rushd.toml` is the commented example; a test loads it.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7379";
pub const DEFAULT_HTTP: &str = "127.0.0.1:7380";
/// The RESP listener's port is the protocol listener's plus this (7381
/// beside the default 7379; Redis's 6379 stays free for a local Redis).
pub const RESP_PORT_OFFSET: u16 = 2;
pub const DEFAULT_DATA_DIR: &str = "rush-data";
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
pub const DEFAULT_LISTEN_BACKLOG: u32 = 4096;
pub const DEFAULT_MAX_INFLIGHT_REQUESTS: usize = 4096;
pub const DEFAULT_MAX_INFLIGHT_BYTES: usize = 32 << 20;
pub const DEFAULT_GLOBAL_INFLIGHT_BYTES: usize = 1 << 30;
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 64 << 20;
pub const DEFAULT_IDLE_TIMEOUT_SECS: u64 = 300;
pub const DEFAULT_FRAME_TIMEOUT_SECS: u64 = 30;
pub const DEFAULT_WRITE_TIMEOUT_SECS: u64 = 30;
pub const DEFAULT_DRAIN_TIMEOUT_SECS: u64 = 10;
pub const DEFAULT_YIELD_BEFORE_SLEEP_PCT: u8 = 25;
pub const DEFAULT_QUEUE_DEPTH: usize = 8192;
pub const DEFAULT_MAX_BATCH: usize = 512;
pub const DEFAULT_BLOCK_CACHE_MB: usize = 256;
/// Charged what its rows really take (their table slots at the table's
/// load: `shard::rows`), the row cache holds at 512 MiB what it held at
/// 256 when a row was charged half of that.
pub const DEFAULT_ROW_CACHE_MB: usize = 512;
pub const DEFAULT_WRITE_BUFFER_MB: usize = 64;
pub const DEFAULT_WRITE_BACK_MB: usize = 64;
pub const DEFAULT_TICK_MS: u64 = 100;
/// How `[memory] budget_mb` is split when it is set, in percent of it
/// (deploy/rushd.toml says why; the rest is headroom).
pub const DEFAULT_BLOCK_CACHE_PCT: u8 = 30;
pub const DEFAULT_ROW_CACHE_PCT: u8 = 15;
pub const DEFAULT_CATALOG_CACHE_PCT: u8 = 15;
pub const DEFAULT_MEMTABLES_PCT: u8 = 10;
pub const DEFAULT_WRITE_BACK_PCT: u8 = 10;
/// The smallest budget: below it RocksDB's own floors (an 8 MiB block
/// cache, 4 MiB memtables per shard) would not fit in the split.
pub const MIN_MEMORY_BUDGET_MB: usize = 64;
/// The smallest block cache and write buffer storage opens with.
pub const MIN_BLOCK_CACHE_MB: usize = 8;
pub const MIN_WRITE_BUFFER_MB: usize = 4;
/// Memtables each shard's column family may hold at once: the one being
/// filled and one being flushed (RocksDB's `max_write_buffer_number`).
pub const MEMTABLES_PER_SHARD: usize = 2;
/// Run buffers a shard with `commit = "log"` may hold at once (the run
/// being filled, the one being written, one kept for reuse).
pub const WRITE_BACK_BUFFERS: usize = 3;
/// The settings a memory budget sets: naming one beside `memory.budget_mb`
/// is an error (the budget would silently override it).
pub const BUDGETED_SETTINGS: [(&str, &str); 5] = [
    ("storage", "block_cache_mb"),
    ("storage", "row_cache_mb"),
    ("storage", "write_buffer_mb"),
    ("storage", "write_back_mb"),
    ("catalog", "cache_mb"),
];
/// Most shard threads a node may run.
pub const MAX_SHARDS: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing config file {path}: {source}")]
    Parse {
        path: PathBuf,
        source: Box<toml::de::Error>,
    },
    #[error("invalid config: {0}")]
    Invalid(String),
}

/// Where the RESP listener goes when `server.resp_listen` is not set:
/// the protocol listener's host, its port + [`RESP_PORT_OFFSET`] (0 stays 0).
pub fn default_resp_addr(protocol: SocketAddr) -> SocketAddr {
    let port = match protocol.port() {
        0 => 0,
        p => p.saturating_add(RESP_PORT_OFFSET),
    };
    SocketAddr::new(protocol.ip(), port)
}

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub node: NodeConfig,
    pub server: ServerConfig,
    pub storage: StorageConfig,
    pub auth: AuthConfig,
    pub tls: TlsConfig,
    pub limits: crate::limits::LimitsConfig,
    pub catalog: crate::catalog::CatalogConfig,
    pub envelopes: crate::envelopes::EnvelopeConfig,
    pub links: crate::links::LinksConfig,
    /// The cluster map (file, advertised address) and slot moves.
    pub cluster: crate::cluster::ClusterConfig,
    /// The node's memory budget (sizes the caches and buffers above).
    pub memory: MemoryConfig,
    /// This node as a replica of another (`replica_of`), and what a
    /// primary keeps for its replicas.
    pub replication: crate::replication::ReplicationConfig,
    pub debug: DebugConfig,
    /// Which of [`BUDGETED_SETTINGS`] the TOML file named (filled by
    /// [`Config::from_toml`]; a budget beside any of them is refused).
    #[serde(skip)]
    pub named_sizes: Vec<String>,
}

/// One setting for the node's memory, split by the rules below into the
/// sizes of what it keeps: RocksDB's block cache (data, index and filter
/// blocks) and memtables, the shards' row caches and writes held for
/// write-back, the catalog's hot cache. What no share sizes — the
/// catalog's Bloom filters, purchase limits' key filters, hot service state
/// (envelope books) — is taken from each shard's row cache, down to a
/// quarter of its share (`Shard::publish_memory`). What is left is headroom
/// for connection buffers (bounded by `server.global_inflight_bytes`), the
/// allocator's slack and the program itself. INFO's Memory section and `rush_memory_bytes`
/// show what each part holds (`memory.rs`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// MiB for the whole node; 0 = no budget: each part is sized by its
    /// own setting (`storage.block_cache_mb`…).
    pub budget_mb: usize,
    /// Percent of the budget for RocksDB's block cache.
    pub block_cache_pct: u8,
    /// …for the row caches (split over shards).
    pub row_cache_pct: u8,
    /// …for the catalog's hot cache (split over shards).
    pub catalog_cache_pct: u8,
    /// …for RocksDB's memtables: each shard's write buffer is its share
    /// over [`MEMTABLES_PER_SHARD`].
    pub memtables_pct: u8,
    /// …for writes held for write-back (`commit = "log"`): each shard's
    /// `write_back_mb` share is this over [`WRITE_BACK_BUFFERS`].
    pub write_back_pct: u8,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            budget_mb: 0,
            block_cache_pct: DEFAULT_BLOCK_CACHE_PCT,
            row_cache_pct: DEFAULT_ROW_CACHE_PCT,
            catalog_cache_pct: DEFAULT_CATALOG_CACHE_PCT,
            memtables_pct: DEFAULT_MEMTABLES_PCT,
            write_back_pct: DEFAULT_WRITE_BACK_PCT,
        }
    }
}

impl MemoryConfig {
    /// The parts' shares, by setting name.
    fn shares(&self) -> [(&'static str, u8); 5] {
        [
            ("block_cache_pct", self.block_cache_pct),
            ("row_cache_pct", self.row_cache_pct),
            ("catalog_cache_pct", self.catalog_cache_pct),
            ("memtables_pct", self.memtables_pct),
            ("write_back_pct", self.write_back_pct),
        ]
    }

    /// `pct` percent of the budget, in MiB.
    fn share_mb(&self, pct: u8) -> usize {
        self.budget_mb * usize::from(pct) / 100
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// Stable node id; generated on first start and kept in the data
    /// directory when not set.
    pub id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Protocol listener.
    pub listen: String,
    /// HTTP listener for /metrics, /health, /ready. Empty turns it off.
    pub http: String,
    /// RESP (Redis protocol) listener. Not set: beside the protocol
    /// listener, on its host at its port + 2 (127.0.0.1:7381 by default;
    /// port 0 when the protocol listener's is 0), skipped with a warning if
    /// that address is taken. Set: that address, which must bind. Empty
    /// turns it off.
    pub resp_listen: Option<String>,
    /// Connections beyond this are answered UNAVAILABLE and closed.
    pub max_connections: usize,
    /// Accept queue of each listener (protocol, HTTP, redirects):
    /// connections the kernel completes while the accept loop catches up
    /// with a burst (capped by net.core.somaxconn).
    pub listen_backlog: u32,
    /// Largest accepted frame (bytes after the length prefix).
    pub max_frame_bytes: usize,
    /// Requests one connection may have in flight; the reader stops reading
    /// (TCP pushes back) while this many are unanswered.
    pub max_inflight_requests: usize,
    /// Request bytes one connection may have in flight.
    pub max_inflight_bytes: usize,
    /// Request bytes all connections together may have in flight.
    pub global_inflight_bytes: usize,
    /// Encoded answers one connection may have waiting to be written. Past
    /// half of it the connection isn't read; past all of it it is closed.
    pub max_output_bytes: usize,
    /// Threads of the runtime serving HTTP, cluster and node-wide work; 0 =
    /// half the cores (at least 1). Client connections are served by the
    /// shard threads themselves.
    pub io_threads: usize,
    /// A connection with nothing in flight and nothing received for this long is closed.
    pub idle_timeout_secs: u64,
    /// A frame that started arriving must be complete within this long.
    pub frame_timeout_secs: u64,
    /// A client that doesn't take its answers for this long is disconnected.
    pub write_timeout_secs: u64,
    /// On shutdown, how long in-flight requests may take to finish.
    pub drain_timeout_secs: u64,
    /// Let the kernel back rushd's heap with transparent huge pages (as its
    /// `transparent_hugepage` setting says). Off by default (Redis keeps
    /// itself off them too: its allocator does not ask for them by default, and its
    /// `disable-thp yes` turns them off where the kernel would impose
    /// them): writes grow memory all the time, and each fault of a huge
    /// page zeroes 2 MiB. On makes cached reads a little cheaper (fewer TLB
    /// misses) and writes dearer (bench/results/NOTES.md).
    pub transparent_huge_pages: bool,
    /// After a busy pass (8 requests or more), a shard with nothing ready
    /// yields its core and looks again, for up to this percent of the
    /// pass's time (at most 50 µs), before it sleeps — while other threads
    /// want the core; alone on it, it sleeps after two yields. Where
    /// clients share the cores, each sleep and wake-up it saves is CPU and
    /// a fuller next pass (bench/results/NOTES.md). 0 sleeps at once.
    pub yield_before_sleep_pct: u8,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: DEFAULT_LISTEN.into(),
            http: DEFAULT_HTTP.into(),
            resp_listen: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            listen_backlog: DEFAULT_LISTEN_BACKLOG,
            max_frame_bytes: rush_protocol::limits::DEFAULT_MAX_FRAME,
            max_inflight_requests: DEFAULT_MAX_INFLIGHT_REQUESTS,
            max_inflight_bytes: DEFAULT_MAX_INFLIGHT_BYTES,
            global_inflight_bytes: DEFAULT_GLOBAL_INFLIGHT_BYTES,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            io_threads: 0,
            idle_timeout_secs: DEFAULT_IDLE_TIMEOUT_SECS,
            frame_timeout_secs: DEFAULT_FRAME_TIMEOUT_SECS,
            write_timeout_secs: DEFAULT_WRITE_TIMEOUT_SECS,
            drain_timeout_secs: DEFAULT_DRAIN_TIMEOUT_SECS,
            transparent_huge_pages: false,
            yield_before_sleep_pct: DEFAULT_YIELD_BEFORE_SLEEP_PCT,
        }
    }
}

/// How an acknowledged write reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// In the WAL and fsynced (group-committed) before the answer.
    Sync,
    /// In the WAL (the OS page cache) before the answer: survives a crash of
    /// rushd, not of the machine. Never used for money or ID reservations.
    Relaxed,
}

/// The in-memory write buffer of each shard's column family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Memtable {
    /// One skiplist per slot (a hash of the key's 2-byte slot prefix picks
    /// it): an insert walks a short list that stays in cache. Every key
    /// starts with its slot and every scan stays inside one slot, so
    /// nothing needs the whole memtable in order.
    #[default]
    SlotHash,
    /// RocksDB's default: one skiplist for the whole memtable.
    Skiplist,
}

/// How a pass's writes reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Commit {
    /// Each pass is one WriteBatch into RocksDB: its WAL, then its memtable
    /// (a random key's insert there is a chain of cache misses).
    Direct,
    /// Each pass is one record of the shard's own log (`storage::log`),
    /// synced; the writes stay in memory (`shard::pending`) until they are
    /// written to RocksDB as one sorted run, which costs a third of as many
    /// random inserts (bench/results/NOTES.md).
    #[default]
    Log,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    pub data_dir: PathBuf,
    /// Shard threads; 0 = one per core.
    pub shards: usize,
    /// Durability of generic key writes (SET, HSET, BATCH…).
    pub kv_durability: Durability,
    /// Requests a shard's queue holds before answering BUSY.
    pub queue_depth: usize,
    /// Most requests one group commit takes.
    pub max_batch: usize,
    pub block_cache_mb: usize,
    /// Hot values kept per node (split over shards) in front of RocksDB.
    pub row_cache_mb: usize,
    pub write_buffer_mb: usize,
    /// The memtable's structure (see [`Memtable`]; bench/results/NOTES.md
    /// has the A/B that chose the default).
    pub memtable: Memtable,
    /// How a pass's writes reach the disk (see [`Commit`]).
    pub commit: Commit,
    /// With `commit = "log"`: writes held in memory per node (split over
    /// shards, at most 1 GiB per shard) before a shard writes them to RocksDB
    /// as one sorted run. The larger the run, the closer together its keys
    /// land in the memtable.
    pub write_back_mb: usize,
    /// How often shards run their timers (expiry sweeps, prefetch, refunds).
    pub tick_ms: u64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            shards: 0,
            kv_durability: Durability::Sync,
            queue_depth: DEFAULT_QUEUE_DEPTH,
            max_batch: DEFAULT_MAX_BATCH,
            block_cache_mb: DEFAULT_BLOCK_CACHE_MB,
            row_cache_mb: DEFAULT_ROW_CACHE_MB,
            write_buffer_mb: DEFAULT_WRITE_BUFFER_MB,
            memtable: Memtable::default(),
            commit: Commit::default(),
            write_back_mb: DEFAULT_WRITE_BACK_MB,
            tick_ms: DEFAULT_TICK_MS,
        }
    }
}

/// Shared-secret authentication (see `auth.rs`). Both unset: no auth.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Client tokens, one per line (`name:token` or `token`).
    pub token_file: Option<PathBuf>,
    /// Admin tokens, same format; they also allow admin requests.
    pub admin_token_file: Option<PathBuf>,
}

/// TLS on the protocol listener. Both files or neither.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DebugConfig {
    /// Accept CLOCK_ADVANCE. For tests of expiry and windows; never in production.
    pub clock_control: bool,
    /// Crash tests only: exit the process abruptly (like `kill -9`) at this
    /// named step of a slot move (`source-after-copy`, `target-after-commit`,
    /// … see `cluster`). Never set in production.
    pub crash_point: Option<String>,
}

impl Config {
    /// A small lone node, for tests and embedding: data in `data_dir`, the
    /// protocol on a loopback port the kernel picks, no HTTP listener, two
    /// shards, a 16 MiB block cache and 8 MiB write buffers.
    pub fn small(data_dir: &Path) -> Config {
        let mut c = Config::default();
        c.server.listen = "127.0.0.1:0".into();
        c.server.http = String::new();
        c.storage.data_dir = data_dir.to_path_buf();
        c.storage.shards = 2;
        c.storage.block_cache_mb = 16;
        c.storage.write_buffer_mb = 8;
        c
    }

    /// Parse a TOML document.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        let parse_error = |e| ConfigError::Parse {
            path: origin.to_owned(),
            source: Box::new(e),
        };
        let mut config: Config = toml::from_str(text).map_err(parse_error)?;
        let table: toml::Table = toml::from_str(text).map_err(parse_error)?;
        config.named_sizes = BUDGETED_SETTINGS
            .iter()
            .filter(|(section, key)| {
                table
                    .get(*section)
                    .and_then(|s| s.as_table())
                    .is_some_and(|s| s.contains_key(*key))
            })
            .map(|(section, key)| format!("{section}.{key}"))
            .collect();
        Ok(config)
    }

    /// Size the caches and buffers from `memory.budget_mb` (when set) by
    /// its shares; [`Config::validate`] first. Idempotent.
    pub fn apply_memory_budget(&mut self) {
        let m = &self.memory;
        if m.budget_mb == 0 {
            return;
        }
        let shards = self.shard_count().max(1);
        self.storage.block_cache_mb = m.share_mb(m.block_cache_pct);
        self.storage.row_cache_mb = m.share_mb(m.row_cache_pct);
        self.catalog.cache_mb = m.share_mb(m.catalog_cache_pct).max(1);
        self.storage.write_buffer_mb =
            (m.share_mb(m.memtables_pct) / (shards * MEMTABLES_PER_SHARD)).max(MIN_WRITE_BUFFER_MB);
        self.storage.write_back_mb = (m.share_mb(m.write_back_pct) / WRITE_BACK_BUFFERS).max(1);
    }

    /// The memory budget's own checks (see [`Config::validate`]).
    fn validate_memory(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let m = &self.memory;
        let shares = m.shares();
        if let Some((name, _)) = shares.iter().find(|(_, pct)| *pct == 0 || *pct > 100) {
            return bad(format!(
                "memory.{name} must be within 1..=100 (percent of memory.budget_mb)"
            ));
        }
        let total: usize = shares.iter().map(|(_, pct)| usize::from(*pct)).sum();
        if total > 100 {
            return bad(format!(
                "memory's shares add up to {total} %: block_cache_pct, row_cache_pct, \
                 catalog_cache_pct, memtables_pct and write_back_pct must leave headroom within 100 %"
            ));
        }
        if m.budget_mb == 0 {
            return Ok(());
        }
        if m.budget_mb < MIN_MEMORY_BUDGET_MB {
            return bad(format!(
                "memory.budget_mb = {} is below the smallest budget, {MIN_MEMORY_BUDGET_MB} MiB",
                m.budget_mb
            ));
        }
        if let Some(named) = self.named_sizes.first() {
            return bad(format!(
                "{named} is set by memory.budget_mb (by its share in [memory]); \
                 remove {named}, or set memory.budget_mb = 0 to size each part yourself"
            ));
        }
        // Each shard's memtables must fit in their share at RocksDB's floor.
        let shards = self.shard_count().max(1);
        let floor = shards * MEMTABLES_PER_SHARD * MIN_WRITE_BUFFER_MB;
        if m.share_mb(m.memtables_pct) < floor {
            return bad(format!(
                "memory.memtables_pct of memory.budget_mb is {} MiB, below the {floor} MiB that \
                 {shards} shards' memtables need at least ({MEMTABLES_PER_SHARD} × \
                 {MIN_WRITE_BUFFER_MB} MiB each): raise the budget or the share",
                m.share_mb(m.memtables_pct)
            ));
        }
        if m.share_mb(m.block_cache_pct) < MIN_BLOCK_CACHE_MB {
            return bad(format!(
                "memory.block_cache_pct of memory.budget_mb is {} MiB, below RocksDB's \
                 {MIN_BLOCK_CACHE_MB} MiB floor: raise the budget or the share",
                m.share_mb(m.block_cache_pct)
            ));
        }
        Ok(())
    }

    /// Read and parse a TOML file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(&text, path)
    }

    /// The shard count to run with: configured, or one per core.
    pub fn shard_count(&self) -> usize {
        match self.storage.shards {
            0 => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            n => n,
        }
    }

    pub fn io_threads(&self) -> usize {
        match self.server.io_threads {
            0 => std::thread::available_parallelism()
                .map(|n| (n.get() / 2).max(1))
                .unwrap_or(1),
            n => n,
        }
    }

    /// Where a health check on this machine reaches the HTTP listener
    /// (`rushd health`, the container's HEALTHCHECK): `server.http`, with
    /// a wildcard address (0.0.0.0, ::) replaced by loopback.
    pub fn http_probe_addr(&self) -> Result<SocketAddr, ConfigError> {
        let http = &self.server.http;
        if http.is_empty() {
            return Err(ConfigError::Invalid(
                "server.http is off (\"\"): there is no /health to check".into(),
            ));
        }
        let addr: SocketAddr = http
            .parse()
            .map_err(|e| ConfigError::Invalid(format!("server.http {http:?}: {e}")))?;
        if addr.port() == 0 {
            return Err(ConfigError::Invalid(format!(
                "server.http {http:?} lets the kernel pick the port: a health check can't know it"
            )));
        }
        let ip = match addr.ip() {
            std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
            ip => ip,
        };
        Ok(SocketAddr::new(ip, addr.port()))
    }

    /// Check values that serde can't.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        self.replication.validate().map_err(ConfigError::Invalid)?;
        if !self.replication.replica_of.trim().is_empty() && self.cluster.map_file.is_some() {
            return bad(
                "replication.replica_of and cluster.map_file: a replica follows a lone node, \
                 not a cluster's"
                    .into(),
            );
        }
        self.server.listen.parse::<SocketAddr>().map_err(|e| {
            ConfigError::Invalid(format!("server.listen {:?}: {e}", self.server.listen))
        })?;
        if !self.server.http.is_empty() {
            self.server.http.parse::<SocketAddr>().map_err(|e| {
                ConfigError::Invalid(format!("server.http {:?}: {e}", self.server.http))
            })?;
        }
        let max = rush_protocol::limits::MAX_FRAME_CEILING;
        if self.server.max_frame_bytes < 1024 || self.server.max_frame_bytes > max {
            return bad(format!(
                "server.max_frame_bytes must be within 1024..={max}"
            ));
        }
        if self.server.max_inflight_bytes < self.server.max_frame_bytes {
            return bad("server.max_inflight_bytes must be at least server.max_frame_bytes".into());
        }
        if self.server.global_inflight_bytes < self.server.max_inflight_bytes {
            return bad(
                "server.global_inflight_bytes must be at least server.max_inflight_bytes".into(),
            );
        }
        if self.server.max_output_bytes < 64 * 1024 {
            return bad("server.max_output_bytes must be at least 64 KiB".into());
        }
        if self.server.max_inflight_requests == 0
            || self.server.max_connections == 0
            || self.server.listen_backlog == 0
        {
            return bad(
                "server.max_inflight_requests, server.max_connections and server.listen_backlog \
                 must be positive"
                    .into(),
            );
        }
        if self.server.yield_before_sleep_pct > 100 {
            return bad("server.yield_before_sleep_pct must be at most 100".into());
        }
        if self.shard_count() > MAX_SHARDS {
            return bad(format!("storage.shards must be at most {MAX_SHARDS}"));
        }
        if self.storage.queue_depth == 0 || self.storage.max_batch == 0 || self.storage.tick_ms == 0
        {
            return bad(
                "storage.queue_depth, storage.max_batch and storage.tick_ms must be positive"
                    .into(),
            );
        }
        if self.storage.commit == Commit::Log && self.storage.write_back_mb == 0 {
            return bad(
                "storage.write_back_mb must be positive with storage.commit = \"log\" \
                 (the writes held in memory before a write back)"
                    .into(),
            );
        }
        if self.tls.cert_file.is_some() != self.tls.key_file.is_some() {
            return bad("tls.cert_file and tls.key_file go together".into());
        }
        if self.storage.data_dir.as_os_str().is_empty() {
            return bad("storage.data_dir must not be empty".into());
        }
        self.limits.validate().map_err(ConfigError::Invalid)?;
        self.catalog.validate().map_err(ConfigError::Invalid)?;
        self.envelopes.validate().map_err(ConfigError::Invalid)?;
        self.links.validate()?;
        self.cluster.validate().map_err(ConfigError::Invalid)?;
        self.validate_memory()?;
        if let Some(id) = &self.node.id {
            if id.is_empty()
                || id.len() > 256
                || id.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                return bad(format!(
                    "node.id {id:?} must be 1-256 characters without spaces"
                ));
            }
        }
        Ok(())
    }
}
