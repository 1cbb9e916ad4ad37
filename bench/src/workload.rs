//! The workload abstraction and the registry of every workload.
//!
//! A workload is one file in `workloads/` with a type implementing
//! [`Workload`]: its Rush side ([`Workload::rush`]), its Redis side
//! ([`Workload::redis`]), optionally what it preloads on each side, and one
//! line in [`WORKLOADS`]. The driver owns everything else (connections,
//! closed and open loop, timing, errors, progress, JSON), so both sides of
//! every workload are measured by the same code with the same settings.
//!
//! One operation is one logical user action (a SET; later a whole order, a
//! grab): what it costs on each side, including round trips and scripts, is
//! what the row compares.

mod preload;

pub use preload::{
    recall, redis_bulk, redis_bulk_range, remember, rush_bulk, rush_bulk_collect, Marker,
};

use crate::dist::{Dist, KeySampler};
use crate::driver::{self, RunOptions};
use crate::stats::{OpError, Outcome, RunReport};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rush_client::ClientError;
use rush_protocol::Command;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// What every workload is built from (the command line's data options).
#[derive(Debug, Clone)]
pub struct Params {
    /// Size of the key space (`--keys`): keys, links, owners, users.
    pub keys: u64,
    /// Which keys requests touch (`--dist`); `None` = the workload's own
    /// ([`Workload::DIST`]). The driver fills it in before
    /// [`Workload::new`], so workloads read [`Params::dist`].
    pub dist: Option<Dist>,
    /// Bytes per written value (`--value-size`, 100 as in redis-benchmark).
    pub value_size: usize,
    /// The data this workload reads is there (loaded by `--preload` in this
    /// run or an earlier one), so a missing item is an error, not a miss.
    pub preload: bool,
    /// Set by the driver: the target (`rush://…`). Names what a preload left
    /// on that server for later runs in this process (see [`remember`]).
    pub target: String,
    /// Set by the driver: at most how many operations this run sends, so a
    /// workload that uses data up (envelope shares) can prepare enough.
    pub max_ops: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            keys: 100_000,
            dist: None,
            value_size: 100,
            preload: false,
            target: String::new(),
            max_ops: 0,
        }
    }
}

impl Params {
    /// The command line's data options (`--keys`, `--dist`, `--value-size`);
    /// nothing preloaded, the driver's fields unset.
    pub fn new(keys: u64, dist: Option<Dist>, value_size: usize) -> Params {
        Params {
            keys,
            dist,
            value_size,
            ..Params::default()
        }
    }

    /// The distribution in force (the driver has filled in the workload's).
    pub fn dist(&self) -> Dist {
        self.dist.unwrap_or(Dist::Uniform)
    }
}

/// A Rush connection with the run's request timeout: one node's
/// multiplexed [`rush_client::NodeConnection`] (one connection per shard of
/// the node, each request sent to its shard's), or — against a cluster — a
/// [`rush_client::Client`] that loads the map and routes each request to
/// the node serving its slot (one connection per node, multiplexed).
#[derive(Clone)]
pub struct RushConn {
    link: RushLink,
    pub timeout: Duration,
}

#[derive(Clone)]
enum RushLink {
    Node(rush_client::NodeConnection),
    Cluster(rush_client::Client),
}

impl RushConn {
    pub fn node(conn: rush_client::NodeConnection, timeout: Duration) -> RushConn {
        RushConn {
            link: RushLink::Node(conn),
            timeout,
        }
    }

    pub fn cluster(client: rush_client::Client, timeout: Duration) -> RushConn {
        RushConn {
            link: RushLink::Cluster(client),
            timeout,
        }
    }

    /// Sockets this connection uses (one per shard of the node when
    /// shard-aware; the cluster client's are its own business: 1).
    pub fn sockets(&self) -> usize {
        match &self.link {
            RushLink::Node(c) => c.len(),
            RushLink::Cluster(_) => 1,
        }
    }

    /// The routing client, when this connection is to a cluster.
    pub fn client(&self) -> Option<&rush_client::Client> {
        match &self.link {
            RushLink::Cluster(c) => Some(c),
            RushLink::Node(_) => None,
        }
    }

    /// One request, one answer (pipelined with the connection's other lanes).
    #[inline]
    pub async fn call<C: Command>(&self, cmd: &C) -> Result<C::Reply, OpError> {
        Ok(self.request(cmd).await?)
    }

    /// The same, with the client's typed error (to tell a normal refusal —
    /// LIMITED, EMPTY — from a failure).
    #[inline]
    pub async fn request<C: Command>(&self, cmd: &C) -> Result<C::Reply, ClientError> {
        match &self.link {
            RushLink::Node(c) => c.call(cmd, self.timeout).await,
            // `Client::call` takes the request by value (it may broadcast
            // it); a clone is reference counts plus the odd short string.
            RushLink::Cluster(c) => c.call(cmd.clone()).await,
        }
    }
}

/// A Redis connection (multiplexed: clones share the socket).
pub type RedisConn = redis::aio::MultiplexedConnection;

/// One workload: the same user action on Rush and on Redis.
///
/// The driver creates one [`Workload::Lane`] per request slot (C connections
/// × P in flight) and calls `rush` or `redis` with it for every operation, so
/// per-lane state (an RNG, a reserved ID segment, a list of created ids)
/// needs no locking.
pub trait Workload: Sized + Send + Sync + 'static {
    /// The command-line name (`kv-set`).
    const NAME: &'static str;
    /// One line for `--help` and the report.
    const ABOUT: &'static str;
    /// Names this workload had before: still accepted on the command line
    /// (`rush-bench lookups`, `--workloads lookups`) and read as this one in
    /// older results.
    const ALIASES: &'static [&'static str] = &[];
    /// The suite preloads before running this workload (it reads data).
    const READS_PRELOADED: bool = false;
    /// The suite also measures this workload's latency against offered load.
    const SWEEP: bool = false;
    /// The key distribution when `--dist` doesn't say (e.g. zipf popularity
    /// for link resolves).
    const DIST: Dist = Dist::Uniform;
    /// Prometheus series of rushd whose change over the run is reported
    /// (when the run knows the nodes' `/metrics`): e.g. storage reads.
    /// Counters (`…_total`) are reported as the increase during the run,
    /// anything else as its value at the end.
    const RUSH_METRICS: &'static [&'static str] = &[];

    /// Per-lane state.
    type Lane: Send + 'static;

    fn new(params: &Params) -> anyhow::Result<Self>;

    /// State for lane number `index` (seeded from it: runs are repeatable).
    fn lane(&self, index: u64) -> Self::Lane;

    /// Load what the workload reads into Rush; returns how many items.
    fn preload_rush(
        &self,
        _conns: &[RushConn],
    ) -> impl Future<Output = anyhow::Result<u64>> + Send {
        async { Ok(0) }
    }

    /// Load what the workload reads into Redis; returns how many items.
    fn preload_redis(
        &self,
        _conns: &[RedisConn],
    ) -> impl Future<Output = anyhow::Result<u64>> + Send {
        async { Ok(0) }
    }

    /// Prepare one run against Rush, after any preload and before the
    /// clock starts; runs every time (a policy to set, envelopes to create
    /// for this run's grabbers). Lanes are made after it.
    fn setup_rush(&self, _conns: &[RushConn]) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { Ok(()) }
    }

    /// Prepare one run against Redis (scripts to load, envelopes to create).
    fn setup_redis(&self, _conns: &[RedisConn]) -> impl Future<Output = anyhow::Result<()>> + Send {
        async { Ok(()) }
    }

    /// One operation against Rush.
    fn rush(
        &self,
        lane: &mut Self::Lane,
        conn: &RushConn,
    ) -> impl Future<Output = Result<Outcome, OpError>> + Send;

    /// The same operation against Redis, the way a skilled Redis user would.
    fn redis(
        &self,
        lane: &mut Self::Lane,
        conn: &mut RedisConn,
    ) -> impl Future<Output = Result<Outcome, OpError>> + Send;
}

type RunFuture = Pin<Box<dyn Future<Output = anyhow::Result<RunReport>> + Send>>;

/// A registered workload, type-erased for the command line and the suite.
pub struct Entry {
    pub name: &'static str,
    pub about: &'static str,
    pub aliases: &'static [&'static str],
    pub reads_preloaded: bool,
    pub sweep: bool,
    pub dist: Dist,
    pub rush_metrics: &'static [&'static str],
    run: fn(RunOptions) -> RunFuture,
}

impl Entry {
    pub const fn of<W: Workload>() -> Entry {
        Entry {
            name: W::NAME,
            about: W::ABOUT,
            aliases: W::ALIASES,
            reads_preloaded: W::READS_PRELOADED,
            sweep: W::SWEEP,
            dist: W::DIST,
            rush_metrics: W::RUSH_METRICS,
            run: run_boxed::<W>,
        }
    }

    /// Run this workload as `opts` say.
    pub fn run(&self, opts: RunOptions) -> RunFuture {
        (self.run)(opts)
    }
}

fn run_boxed<W: Workload>(opts: RunOptions) -> RunFuture {
    Box::pin(driver::run::<W>(opts))
}

/// Every workload, in report order. Adding one: a file in `workloads/`, its
/// `mod` line there, and one line here.
pub static WORKLOADS: &[Entry] = &[
    Entry::of::<crate::workloads::kv_set::KvSet>(),
    Entry::of::<crate::workloads::kv_get::KvGet>(),
    Entry::of::<crate::workloads::kv_incr::KvIncr>(),
    Entry::of::<crate::workloads::links_shorten::LinksShorten>(),
    Entry::of::<crate::workloads::links_resolve::LinksResolve>(),
    Entry::of::<crate::workloads::limits::Limits>(),
    Entry::of::<crate::workloads::limits::LimitsHeld>(),
    Entry::of::<crate::workloads::catalog::Catalog>(),
    Entry::of::<crate::workloads::catalog::CatalogZipf>(),
    Entry::of::<crate::workloads::envelopes::Envelopes>(),
    Entry::of::<crate::workloads::envelopes_held::EnvelopesHeld>(),
    Entry::of::<crate::workloads::mixed::Mixed>(),
];

/// The workload called `name`, or once called it (an alias).
pub fn find(name: &str) -> Option<&'static Entry> {
    WORKLOADS
        .iter()
        .find(|e| e.name == name || e.aliases.contains(&name))
}

/// A workload's name as this build calls it: `name` itself unless it is
/// an older name of a registered workload (then that workload's name).
pub fn current_name(name: &str) -> &str {
    WORKLOADS
        .iter()
        .find(|e| e.aliases.contains(&name))
        .map_or(name, |e| e.name)
}

// ── helpers for workloads ───────────────────────────────────────────────

/// The usual lane: an RNG and the key distribution.
pub struct KeyPicker {
    pub rng: SmallRng,
    pub sampler: KeySampler,
    /// Reused for formatting keys (no allocation per request on its own).
    pub buf: Vec<u8>,
}

impl KeyPicker {
    pub fn new(params: &Params, index: u64) -> KeyPicker {
        KeyPicker {
            // Distinct, fixed seeds: a rerun draws the same keys.
            rng: SmallRng::seed_from_u64(0x5eed_0000 ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            sampler: KeySampler::new(params.dist(), params.keys),
            buf: Vec::with_capacity(32),
        }
    }

    /// The next key, formatted as `prefix` + 12 zero-padded digits (the
    /// `key:000000012345` shape redis-benchmark uses) into `self.buf`.
    #[inline]
    pub fn next_key(&mut self, prefix: &[u8]) -> &[u8] {
        let n = self.sampler.sample(&mut self.rng);
        format_key(&mut self.buf, prefix, n);
        &self.buf
    }
}

/// `prefix` + `n` as 12 zero-padded decimal digits, into `buf`.
#[inline]
pub fn format_key(buf: &mut Vec<u8>, prefix: &[u8], n: u64) {
    buf.clear();
    buf.extend_from_slice(prefix);
    let mut digits = [b'0'; 20];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let width = (digits.len() - i).max(12);
    buf.extend_from_slice(&digits[digits.len() - width..]);
}

/// A value of `size` bytes of `x`, as redis-benchmark writes.
pub fn filler_value(size: usize) -> Bytes {
    Bytes::from(vec![b'x'; size])
}

/// The first of a run's connections: where a preload or a setup reads and
/// writes its markers and loads its scripts.
pub fn first_conn<C>(conns: &[C]) -> anyhow::Result<&C> {
    conns
        .first()
        .ok_or_else(|| anyhow::anyhow!("no connection"))
}

/// A tag unique to this workload instance (time and a counter), for names
/// one run must not share with another: order ids, envelope senders.
pub fn run_nonce() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    format!(
        "{:x}{:x}",
        secs & 0xff_ffff_ffff,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_nonces_differ() {
        assert_ne!(run_nonce(), run_nonce());
    }

    #[test]
    fn keys_look_like_redis_benchmark() {
        let mut b = Vec::new();
        format_key(&mut b, b"key:", 12345);
        assert_eq!(b, b"key:000000012345");
        format_key(&mut b, b"counter:", 0);
        assert_eq!(b, b"counter:000000000000");
        format_key(&mut b, b"k:", 1_234_567_890_123);
        assert_eq!(b, b"k:1234567890123");
    }

    #[test]
    fn registry_names_are_unique_and_found() {
        for e in WORKLOADS {
            assert_eq!(find(e.name).map(|f| f.name), Some(e.name));
            assert_eq!(current_name(e.name), e.name);
            // No name, current or old, stands for two workloads.
            for n in std::iter::once(&e.name).chain(e.aliases) {
                let owners = WORKLOADS
                    .iter()
                    .filter(|o| o.name == *n || o.aliases.contains(n))
                    .count();
                assert_eq!(owners, 1, "{n}");
            }
        }
        assert!(find("nope").is_none());
        assert_eq!(current_name("nope"), "nope");
    }

    #[test]
    fn the_catalog_workloads_keep_their_old_names() {
        assert_eq!(find("lookups").map(|e| e.name), Some("catalog"));
        assert_eq!(find("lookups-zipf").map(|e| e.name), Some("catalog-zipf"));
        assert_eq!(current_name("lookups"), "catalog");
        assert_eq!(current_name("lookups-zipf"), "catalog-zipf");
    }
}
