//! Async client for rushd.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rush_client::ClientError> {
//! let client = rush_client::Client::connect("127.0.0.1:7379").await?;
//! client.set("greeting", "hello").await?;
//! assert_eq!(client.get("greeting").await?.as_deref(), Some(&b"hello"[..]));
//! # Ok(()) }
//! ```
//!
//! One [`Client`] keeps one multiplexed connection per shard of each node
//! ([`NodeConnection`]: each bound to its shard with SHARD_BIND, so every
//! request goes straight to the thread that runs it; `per_shard = false`
//! keeps one per node): clone it freely and call from many tasks; requests
//! are pipelined and answers matched by request id. Against a cluster,
//! connect to any node: the client loads the map and sends each request to
//! the node serving its slot (generated codes and envelope ids carry theirs),
//! following MOVED (refreshing the map).
//! A lost connection is re-established with backoff (jittered, see
//! `backoff`); idempotent requests — and creates that carry an idempotency
//! key — are retried until [`ClientOptions::retry_deadline`], as are answers
//! that say nothing was done (TRYAGAIN while a slot changes hands); others
//! fail with [`ClientError::ConnectionLost`] (their outcome is unknown).
//! Connecting retries the same way: [`Client::connect_with`] keeps trying
//! to reach the node it is given (restarting, or not listening yet) until
//! [`ClientOptions::seed_deadline`]. [`ClientOptions::on_retry`] is told
//! about every retry, so a tool can say what it is waiting for.
//!
//! This file is the [`Client`] and its one request loop (route, send, follow
//! MOVED, retry until the deadline): over 500 lines because the loop's
//! retry, deadline and redirect rules read best as one piece; each service's
//! calls live in a file of their own (`links.rs`, `limits.rs`, …), the
//! options in `options.rs`.

mod backoff;
mod batch;
pub mod calendar;
mod catalog;
pub mod cluster;
#[cfg(test)]
mod compat_tests;
mod connection;
mod duration;
mod envelopes;
mod error;
mod limits;
mod links;
mod options;
mod routing;
mod shards;

pub use batch::BatchBuilder;
pub use connection::{Connection, Tls};
pub use duration::{format_duration, format_remaining, parse_duration};
pub use error::ClientError;
pub use options::{ClientOptions, RetryHook, RetryNotice};
pub use routing::ClientStats;
pub use rush_protocol as protocol;
pub use rush_protocol::LimitDenial;
pub use shards::NodeConnection;

use bytes::Bytes;
use routing::{Counters, Routes};
use rush_protocol::cmd::*;
use rush_protocol::{Command, ErrorCode, Opcode, Reply, Target, Wire};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// The port rushd serves its protocol on unless `server.listen` says
/// otherwise (its HTTP listener is on 7380, short-link redirects on 7381).
pub const DEFAULT_PORT: u16 = 7379;

struct Inner {
    /// The address the client was given: where it starts, and where
    /// requests go that name no slot (PING, INFO, HELLO) or whose slot's
    /// node is unknown.
    addr: String,
    opts: ClientOptions,
    /// One multiplexed connection per node, by address.
    nodes: std::sync::Mutex<HashMap<String, Arc<NodeConn>>>,
    /// The slot → node table (see `routing`). Read per request (an `Arc`
    /// clone under an uncontended read lock); replaced on refresh.
    routes: std::sync::RwLock<Arc<Routes>>,
    /// One map refresh at a time; others skip theirs.
    refreshing: Mutex<()>,
    /// When the map was last loaded (refreshes after connection failures
    /// are spaced out).
    refreshed: std::sync::Mutex<Option<Instant>>,
    stats: Counters,
}

/// A node's connections, re-established after one breaks. A tokio mutex
/// because reconnecting awaits while holding it, so only one task
/// reconnects.
struct NodeConn {
    conn: Mutex<Option<NodeConnection>>,
    /// The node's id, from its HELLO answer.
    id: std::sync::Mutex<Option<String>>,
}

#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("addr", &self.inner.addr)
            .finish()
    }
}

/// The least and the most a retry waits (jittered between, see `backoff`).
const BACKOFF_START: Duration = Duration::from_millis(20);
const BACKOFF_MAX: Duration = Duration::from_millis(1000);
/// The least time the last attempt before the retry deadline gets: one
/// that would get less could only time out, so the deadline may be
/// overrun by this much.
const LAST_ATTEMPT: Duration = Duration::from_millis(50);
/// MOVED answers one call follows at most (a map in flux settles in a
/// hop or two; more means the nodes disagree).
const MAX_REDIRECTS: u32 = 16;
/// Least time between map refreshes caused by unreachable nodes.
const REFRESH_SPACING: Duration = Duration::from_millis(500);

impl Client {
    pub async fn connect(addr: &str) -> Result<Client, ClientError> {
        Self::connect_with(addr, ClientOptions::default()).await
    }

    /// Connect to any node, say HELLO (with the token, if any) and load the
    /// cluster map from it: requests are then routed to the node that
    /// serves their slot. A node that can't be reached yet is tried again
    /// until [`ClientOptions::seed_deadline`] (by default the retry
    /// deadline); what can't pass by waiting (a refused token or
    /// certificate, an address that speaks HTTP) fails at once.
    pub async fn connect_with(addr: &str, opts: ClientOptions) -> Result<Client, ClientError> {
        let client = Client {
            inner: Arc::new(Inner {
                addr: addr.to_string(),
                opts,
                nodes: std::sync::Mutex::new(HashMap::new()),
                routes: std::sync::RwLock::new(Arc::new(Routes::single(addr))),
                refreshing: Mutex::new(()),
                refreshed: std::sync::Mutex::new(None),
                stats: Counters::default(),
            }),
        };
        client.reach_seed().await?;
        // A node that can't answer CLUSTER_SLOTS gets every request.
        let _ = client.refresh_map_from(addr).await;
        Ok(client)
    }

    /// Connect to the node the client was given, trying again while that
    /// may help (it is restarting, or not listening yet) until
    /// [`ClientOptions::seed_deadline`], as calls retry: the same backoff,
    /// the same notices (op `HELLO`).
    async fn reach_seed(&self) -> Result<(), ClientError> {
        let opts = &self.inner.opts;
        let addr = &self.inner.addr;
        let mut retries = Retries::new(opts.seed_deadline.unwrap_or(opts.retry_deadline));
        let mut within = None;
        loop {
            let error = match self.connection(addr, within).await {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            // HELLO (and what connecting sends with it) is safe to resend.
            if !worth_retrying(&error, || true, opts.retry_busy) {
                return Err(error);
            }
            match self
                .pause(&mut retries, Opcode::Hello.name(), addr, &error)
                .await
            {
                Some(next) => within = Some(next),
                None => return Err(error),
            }
        }
    }

    /// The address the client was given.
    pub fn addr(&self) -> &str {
        &self.inner.addr
    }

    /// What this client did so far: calls, retries, redirects followed.
    pub fn stats(&self) -> ClientStats {
        self.inner.stats.snapshot()
    }

    /// The cluster map the client routes by (`None`: one node, no map).
    pub fn cluster_map(&self) -> Option<ClusterSlotsReply> {
        self.routes().map.clone()
    }

    /// The address of every node requests may go to.
    pub fn node_addrs(&self) -> Vec<String> {
        self.routes().nodes()
    }

    fn routes(&self) -> Arc<Routes> {
        self.inner.routes.read().expect("not poisoned").clone()
    }

    fn node(&self, addr: &str) -> Arc<NodeConn> {
        self.inner
            .nodes
            .lock()
            .expect("not poisoned")
            .entry(addr.to_string())
            .or_insert_with(|| {
                Arc::new(NodeConn {
                    conn: Mutex::new(None),
                    id: std::sync::Mutex::new(None),
                })
            })
            .clone()
    }

    /// The live connections to `addr`, connecting (and saying HELLO) if
    /// needed, within `within` when given (else the connect timeout).
    async fn connection(
        &self,
        addr: &str,
        within: Option<Duration>,
    ) -> Result<NodeConnection, ClientError> {
        let node = self.node(addr);
        let mut slot = node.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let opts = &self.inner.opts;
        let hello = Hello {
            version: rush_protocol::frame::VERSION,
            token: opts.token.clone(),
            client: opts.client_name.clone(),
        };
        let timeout = within.map_or(opts.connect_timeout, |w| w.min(opts.connect_timeout));
        let (c, reply) =
            NodeConnection::connect(addr, timeout, opts.tls.as_ref(), &hello, opts.per_shard)
                .await?;
        *node.id.lock().expect("not poisoned") = Some(reply.node_id);
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Load the cluster map from the node at `addr` and route by it.
    pub async fn refresh_map_from(&self, addr: &str) -> Result<(), ClientError> {
        let _one = self.inner.refreshing.lock().await;
        self.load_map(addr).await
    }

    async fn load_map(&self, addr: &str) -> Result<(), ClientError> {
        let opts = &self.inner.opts;
        let c = self.connection(addr, None).await?;
        let map = c.call(&ClusterSlots {}, opts.request_timeout).await?;
        let seed = &self.inner.addr;
        let seed_id = self.node(seed).id.lock().expect("not poisoned").clone();
        let current = self.routes();
        // An older map than the one in use is stale news, and so is "no
        // map" once MOVED answers have taught the client where slots are.
        if map.epoch < current.epoch || (map.epoch == 0 && current.addrs.len() > 1) {
            return Ok(());
        }
        let routes = Routes::from_map(map, seed, seed_id.as_deref())
            .map_err(|e| ClientError::Protocol(format!("cluster map from {addr}: {e}")))?;
        *self.inner.routes.write().expect("not poisoned") = Arc::new(routes);
        *self.inner.refreshed.lock().expect("not poisoned") = Some(Instant::now());
        self.inner.stats.refreshes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Refresh the map in the background from `from` (or any node), unless
    /// a refresh is running already.
    fn refresh_soon(&self, from: Option<String>) {
        if self.routes().epoch == 0 && from.is_none() {
            return;
        }
        let client = self.clone();
        tokio::spawn(async move {
            let Ok(_one) = client.inner.refreshing.try_lock() else {
                return;
            };
            let mut candidates: Vec<String> = from.into_iter().collect();
            candidates.extend(client.routes().nodes());
            candidates.push(client.inner.addr.clone());
            for addr in candidates {
                if client.load_map(&addr).await.is_ok() {
                    return;
                }
            }
        });
    }

    /// MOVED: route `slot` to `addr` from now on, and refresh the map from
    /// the node that knows best.
    fn learn_moved(&self, slot: u16, addr: &str) {
        let routes = self.routes();
        if !routes.patch(slot, addr) {
            let mut w = self.inner.routes.write().expect("not poisoned");
            let grown = w.with_addr(slot, w.resolve(addr));
            *w = Arc::new(grown);
        }
        let target = routes.resolve(addr).to_string();
        self.refresh_soon(Some(target));
    }

    /// Send any request, routed by its slot; follow MOVED; retry as
    /// the options allow. A request that runs on every shard goes to every
    /// node of the cluster and the answers are merged.
    pub async fn call<C: Command>(&self, cmd: C) -> Result<C::Reply, ClientError> {
        self.inner.stats.requests.fetch_add(1, Ordering::Relaxed);
        match cmd.target() {
            Ok(Target::Slot(slot)) => self.send(&cmd, Some(slot), None).await,
            Ok(Target::AllShards) if self.routes().nodes().len() > 1 => self.broadcast(cmd).await,
            // Node requests, and invalid ones (the node answers why).
            _ => self.send(&cmd, None, None).await,
        }
    }

    /// Send a request to the node at `addr` only: no routing, MOVED is
    /// returned, not followed; lost connections are retried as usual.
    pub async fn call_on<C: Command>(&self, addr: &str, cmd: C) -> Result<C::Reply, ClientError> {
        self.inner.stats.requests.fetch_add(1, Ordering::Relaxed);
        self.send(&cmd, None, Some(addr)).await
    }

    async fn broadcast<C: Command>(&self, cmd: C) -> Result<C::Reply, ClientError> {
        let mut replies = Vec::new();
        for addr in self.routes().nodes() {
            let r = self.send(&cmd, None, Some(&addr)).await?;
            let mut b = bytes::BytesMut::new();
            r.encode(&mut b);
            replies.push(
                Reply::decode(C::OPCODE, b.freeze())
                    .map_err(|e| ClientError::Protocol(e.to_string()))?,
            );
        }
        let req: rush_protocol::Request = cmd.into();
        let merged = routing::merge(&req, replies)?;
        let mut b = bytes::BytesMut::new();
        merged.encode_body(&mut b);
        C::Reply::decode_body(b.freeze()).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    async fn send<C: Command>(
        &self,
        cmd: &C,
        slot: Option<u16>,
        fixed: Option<&str>,
    ) -> Result<C::Reply, ClientError> {
        let opts = &self.inner.opts;
        let mut retries = Retries::new(opts.retry_deadline);
        // The first attempt has the whole request timeout; retries end at
        // the deadline.
        let mut within: Option<Duration> = None;
        let mut redirects = 0;
        let mut safe: Option<bool> = None;
        loop {
            let addr = match (fixed, slot) {
                (Some(a), _) => a.to_string(),
                (None, Some(s)) => self.routes().addr_for(s, &self.inner.addr).to_string(),
                (None, None) => self.inner.addr.clone(),
            };
            let timeout = within.map_or(opts.request_timeout, |w| w.min(opts.request_timeout));
            let result = match self.connection(&addr, within).await {
                Ok(c) => c.call(cmd, timeout).await,
                Err(e) => Err(e),
            };
            let error = match result {
                Ok(reply) => return Ok(reply),
                Err(e) => e,
            };
            if let ClientError::Server(e) = &error {
                if let (Some((s, to)), None) = (routing::moved(e), fixed) {
                    redirects += 1;
                    if redirects <= MAX_REDIRECTS {
                        self.inner.stats.moved.fetch_add(1, Ordering::Relaxed);
                        self.learn_moved(s, to);
                        continue;
                    }
                }
            }
            let is_safe = || *safe.get_or_insert_with(|| routing::retry_safe(&cmd.clone().into()));
            if !worth_retrying(&error, is_safe, opts.retry_busy) || retries.spent() {
                return Err(error);
            }
            if matches!(error, ClientError::Connect { .. }) && fixed.is_none() {
                // The node may be gone for good: see what the others say.
                let due = self
                    .inner
                    .refreshed
                    .lock()
                    .expect("not poisoned")
                    .is_none_or(|t| t.elapsed() >= REFRESH_SPACING);
                if due {
                    self.refresh_soon(None);
                }
            }
            match self
                .pause(&mut retries, C::OPCODE.name(), &addr, &error)
                .await
            {
                Some(next) => within = Some(next),
                None => return Err(error),
            }
        }
    }

    /// Before another attempt: count it, tell the `on_retry` hook, and wait
    /// out the backoff (never past the deadline). Returns how long the next
    /// attempt may take, or `None` when the deadline has passed (no retry).
    async fn pause(
        &self,
        retries: &mut Retries,
        op: &'static str,
        addr: &str,
        error: &ClientError,
    ) -> Option<Duration> {
        let remaining = retries.remaining();
        if remaining.is_zero() {
            return None;
        }
        // Never sleep past the deadline: the last attempt is at it.
        let wait = retries.backoff.next_wait().min(remaining);
        retries.made += 1;
        self.inner.stats.retries.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(op, %addr, ?wait, "retrying");
        if let Some(hook) = &self.inner.opts.on_retry {
            (hook.0)(&RetryNotice {
                op,
                addr,
                error,
                attempt: retries.made,
                wait,
                remaining,
            });
        }
        tokio::time::sleep(wait).await;
        Some(retries.remaining().max(LAST_ATTEMPT))
    }

    pub async fn ping(&self) -> Result<(), ClientError> {
        self.call(Ping::default()).await.map(|_| ())
    }

    pub async fn info(&self) -> Result<InfoReply, ClientError> {
        self.call(Info {}).await
    }

    /// The generic keys (strings and hashes) held by the node this client
    /// reached first, in the slots it owns (Redis's DBSIZE). It reads
    /// every key on that node: for operators and tests.
    pub async fn dbsize(&self) -> Result<u64, ClientError> {
        self.call(DbSize {}).await
    }

    pub async fn cluster_slots(&self) -> Result<ClusterSlotsReply, ClientError> {
        self.call(ClusterSlots {}).await
    }

    pub async fn get(&self, key: impl Into<Bytes>) -> Result<Option<Bytes>, ClientError> {
        self.call(Get { key: key.into() }).await
    }

    pub async fn set(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
    ) -> Result<bool, ClientError> {
        self.call(Set::new(key, value)).await
    }

    /// SET with a TTL (0 = none) and a condition (NX/XX).
    pub async fn set_with(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        ttl: Duration,
        cond: SetCond,
    ) -> Result<bool, ClientError> {
        self.call(Set {
            key: key.into(),
            value: value.into(),
            ttl_ms: ttl.as_millis() as u64,
            cond,
        })
        .await
    }

    /// SET that keeps the TTL the key has (Redis's `SET … KEEPTTL`), with
    /// a condition (NX/XX).
    pub async fn set_keep_ttl(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        cond: SetCond,
    ) -> Result<bool, ClientError> {
        self.call(SetKeepTtl {
            key: key.into(),
            value: value.into(),
            cond,
        })
        .await
    }

    pub async fn del(&self, key: impl Into<Bytes>) -> Result<bool, ClientError> {
        self.call(Del { key: key.into() }).await
    }

    pub async fn exists(&self, key: impl Into<Bytes>) -> Result<bool, ClientError> {
        self.call(Exists { key: key.into() }).await
    }

    pub async fn incr_by(&self, key: impl Into<Bytes>, delta: i64) -> Result<i64, ClientError> {
        self.call(IncrBy {
            key: key.into(),
            delta,
        })
        .await
    }

    /// Set a key's TTL; `Duration::ZERO` removes it. False when the key is missing.
    pub async fn expire(&self, key: impl Into<Bytes>, ttl: Duration) -> Result<bool, ClientError> {
        self.call(Expire {
            key: key.into(),
            ttl_ms: ttl.as_millis() as u64,
        })
        .await
    }

    pub async fn ttl(&self, key: impl Into<Bytes>) -> Result<TtlReply, ClientError> {
        self.call(Ttl { key: key.into() }).await
    }

    pub async fn hset<F, V>(
        &self,
        key: impl Into<Bytes>,
        fields: impl IntoIterator<Item = (F, V)>,
    ) -> Result<u64, ClientError>
    where
        F: Into<Bytes>,
        V: Into<Bytes>,
    {
        self.call(HSet {
            key: key.into(),
            fields: fields
                .into_iter()
                .map(|(f, v)| (f.into(), v.into()))
                .collect(),
        })
        .await
    }

    pub async fn hget(
        &self,
        key: impl Into<Bytes>,
        field: impl Into<Bytes>,
    ) -> Result<Option<Bytes>, ClientError> {
        self.call(HGet {
            key: key.into(),
            field: field.into(),
        })
        .await
    }

    pub async fn hdel<F: Into<Bytes>>(
        &self,
        key: impl Into<Bytes>,
        fields: impl IntoIterator<Item = F>,
    ) -> Result<u64, ClientError> {
        self.call(HDel {
            key: key.into(),
            fields: fields.into_iter().map(Into::into).collect(),
        })
        .await
    }

    pub async fn hincr_by(
        &self,
        key: impl Into<Bytes>,
        field: impl Into<Bytes>,
        delta: i64,
    ) -> Result<i64, ClientError> {
        self.call(HIncrBy {
            key: key.into(),
            field: field.into(),
            delta,
        })
        .await
    }

    pub async fn hgetall(&self, key: impl Into<Bytes>) -> Result<Vec<(Bytes, Bytes)>, ClientError> {
        self.call(HGetAll { key: key.into() })
            .await
            .map(|r| r.fields)
    }

    /// How many fields the hash at `key` has (0 when missing).
    pub async fn hlen(&self, key: impl Into<Bytes>) -> Result<u64, ClientError> {
        self.call(HLen { key: key.into() }).await
    }

    pub async fn check(
        &self,
        key: impl Into<Bytes>,
        field: Option<Bytes>,
        cond: Cond,
    ) -> Result<bool, ClientError> {
        self.call(Check {
            key: key.into(),
            field,
            cond,
        })
        .await
    }

    /// Start a BATCH: operations on keys of one slot, applied atomically.
    pub fn batch(&self) -> BatchBuilder {
        BatchBuilder::new(self.clone())
    }

    /// Run a prepared BATCH; one reply per operation.
    pub async fn exec_batch(&self, batch: Batch) -> Result<Vec<Reply>, ClientError> {
        self.call(batch).await.map(|r| r.results)
    }

    /// Compact storage now (admin).
    pub async fn compact(&self) -> Result<(), ClientError> {
        self.call(Compact {}).await
    }

    /// Move the node's clock forward (admin; needs `debug.clock_control`).
    pub async fn clock_advance(&self, by: Duration) -> Result<u64, ClientError> {
        self.call(ClockAdvance {
            ms: by.as_millis() as u64,
        })
        .await
    }
}

/// One call's retries (or one connect's): the deadline they end at and
/// the backoff between them.
struct Retries {
    deadline: Instant,
    backoff: backoff::Backoff,
    /// Retries so far.
    made: u32,
}

impl Retries {
    /// Retries for `budget` from now.
    fn new(budget: Duration) -> Retries {
        Retries {
            deadline: Instant::now() + budget,
            backoff: backoff::Backoff::new(BACKOFF_START, BACKOFF_MAX),
            made: 0,
        }
    }

    fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// The deadline has passed: no more attempts.
    fn spent(&self) -> bool {
        self.remaining().is_zero()
    }
}

/// Whether a failed attempt may be made again: it certainly was not
/// applied (the node was not reached, a slot is changing hands, BUSY when
/// `retry_busy`), or its outcome is unknown but `safe()` says resending it
/// changes nothing (the connection broke, the node is UNAVAILABLE).
fn worth_retrying(error: &ClientError, safe: impl FnOnce() -> bool, retry_busy: bool) -> bool {
    match error {
        ClientError::Connect { transient, .. } => *transient,
        ClientError::ConnectionLost(_) => safe(),
        e => match e.code() {
            Some(ErrorCode::TryAgain) => true,
            Some(ErrorCode::Busy) => retry_busy,
            Some(ErrorCode::Unavailable) => safe(),
            _ => false,
        },
    }
}

/// The README, whose Rust example `cargo test --doc` compiles (its shell
/// examples are run by `tests/readme.rs`), so neither can rot.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
