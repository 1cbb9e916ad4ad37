//! The node: listeners, shards and their shared context. [`start`] brings a
//! node up and returns a [`Running`] handle; tests start nodes in-process on
//! port 0 this way, the `rushd` binary through [`run`].
//!
//! The protocol listener only accepts: each connection is handed to a
//! shard (round-robin), whose thread serves it from then on (see `shard`).
//! The node's tokio runtime runs what isn't a shard's: the accept loop,
//! HTTP (metrics, redirects), cluster operations and requests that run on
//! every shard.

mod listen;
pub(crate) mod node_cmds;
mod process;

pub use listen::raise_fd_limit;
use listen::{accept_loop, bind, bind_resp};
pub use process::set_transparent_huge_pages;

use crate::clock::Clock;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::resp::Protocol;
use crate::shard::{self, ShardContext, ShardHandle};
use crate::storage::{keys, Storage};
use anyhow::Context;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What every connection task shares.
pub struct NodeShared {
    pub config: Arc<Config>,
    pub storage: Arc<Storage>,
    pub clock: Clock,
    pub metrics: Arc<Metrics>,
    pub shards: Vec<ShardHandle>,
    /// The cluster map, routing and slot moves.
    pub cluster: Arc<crate::cluster::Cluster>,
    pub node_id: String,
    pub listen_addr: SocketAddr,
    pub started: Instant,
    /// False until serving, and again from the start of shutdown, so load
    /// balancers stop sending before connections are drained.
    pub ready: AtomicBool,
    pub connections: AtomicUsize,
    /// The RESP listener's clients (CLIENT LIST, CLIENT ID).
    pub resp_clients: crate::resp::node::Clients,
    /// Tokens HELLO must present, when configured. Never logged.
    pub auth: crate::auth::Auth,
    /// Every node task (cluster operations, requests that run on all
    /// shards): shutdown waits for them, so the storage is closed when
    /// `shutdown` returns.
    pub tasks: tokio_util::task::TaskTracker,
    /// The node's runtime, for tasks started from shard threads.
    pub runtime: tokio::runtime::Handle,
    /// Primary or replica, and the state of either side.
    pub replication: Arc<crate::replication::Replication>,
}

impl NodeShared {
    /// Run a node task (from any thread, shards' included).
    pub fn spawn<F>(&self, task: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn_on(task, &self.runtime);
    }

    /// Where the node's memory goes now (INFO, /metrics).
    pub fn memory_report(&self) -> crate::memory::Report {
        crate::memory::report(&self.config, &self.storage, &self.metrics.shard_memory)
    }
}

/// A node that is serving.
pub struct Running {
    node: Arc<NodeShared>,
    addr: SocketAddr,
    http_addr: Option<SocketAddr>,
    redirect_addr: Option<SocketAddr>,
    resp_addr: Option<SocketAddr>,
    shutdown_tx: watch::Sender<bool>,
    accept: JoinHandle<()>,
    resp_accept: Option<JoinHandle<()>>,
    http: Option<JoinHandle<()>>,
    /// The short-link redirect listener; stops (gracefully) with the accept
    /// loop, before the shards it sends jobs to.
    redirect: Option<JoinHandle<()>>,
    /// The replication listener (`replication.listen`).
    repl: Option<JoinHandle<()>>,
    shard_threads: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    /// The protocol listener's address (the real port when started on 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The replication listener's address, when it is on.
    pub fn replication_addr(&self) -> Option<SocketAddr> {
        self.node.replication.listen_addr.get().copied()
    }

    /// The RESP listener's address, when it is on.
    pub fn resp_addr(&self) -> Option<SocketAddr> {
        self.resp_addr
    }

    /// The short-link redirect listener's address, when it is on.
    pub fn redirect_addr(&self) -> Option<SocketAddr> {
        self.redirect_addr
    }

    /// What short URLs start with: `links.base_url`, or the one derived
    /// from the redirect listener's address when that is not set.
    pub fn base_url(&self) -> &str {
        &self.node.config.links.base_url
    }

    pub fn clock(&self) -> &Clock {
        &self.node.clock
    }

    pub fn storage(&self) -> &Arc<Storage> {
        &self.node.storage
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.node.metrics
    }

    /// Make RocksDB hold every committed write: each shard runs its timers
    /// with a flush, which writes its pending writes back
    /// (`storage.commit = "log"`). For whoever reads [`Running::storage`]
    /// directly (tests of the on-disk layout).
    pub async fn write_back(&self) {
        for t in self
            .node
            .shards
            .iter()
            .map(|h| h.tick())
            .collect::<Vec<_>>()
        {
            let _ = t.await;
        }
    }

    /// Graceful shutdown: not ready, stop accepting, let connections finish
    /// what they have in flight (bounded by `drain_timeout_secs`), stop the
    /// shards after they answered their queues, flush storage.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let node = self.node;
        node.ready.store(false, Ordering::SeqCst);
        node.replication.stop_following().await;
        if let Some(repl) = self.repl {
            repl.abort();
            let _ = repl.await;
        }
        let _ = self.shutdown_tx.send(true);
        let _ = self.accept.await;
        if let Some(resp) = self.resp_accept {
            let _ = resp.await;
        }
        if let Some(http) = self.http {
            http.abort();
            let _ = http.await;
        }
        node.tasks.close();
        let drain = Duration::from_secs(node.config.server.drain_timeout_secs);
        if let Some(redirect) = self.redirect {
            if tokio::time::timeout(drain, redirect).await.is_err() {
                tracing::warn!("redirect requests did not finish within {drain:?}");
            }
        }
        // Shards stop reading, answer what is in flight and close their
        // connections, within the drain timeout (and as long again to
        // write the last answers).
        let drained: Vec<_> = node.shards.iter().map(|s| s.drain(drain)).collect();
        for d in drained {
            if tokio::time::timeout(drain * 2, d).await.is_err() {
                tracing::warn!("connections did not drain within {drain:?}; closing them");
            }
        }
        if tokio::time::timeout(drain, node.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("node tasks did not finish within {drain:?}");
        }
        for s in &node.shards {
            s.stop();
        }
        let threads = self.shard_threads;
        tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await
        .context("joining shard threads")?;
        node.storage.flush().context("flushing storage")?;
        if Arc::strong_count(&node) > 1 {
            tracing::warn!(
                "node state still referenced after shutdown; storage closes when released"
            );
        }
        drop(node);
        tracing::info!("stopped");
        Ok(())
    }
}

/// Bring a node up: open storage, start shards, bind listeners.
pub async fn start(mut config: Config, clock: Clock) -> anyhow::Result<Running> {
    config.validate()?;
    config.apply_memory_budget();
    let shards = config.shard_count();
    let storage = {
        let (cfg, clock) = (config.storage.clone(), clock.clone());
        tokio::task::spawn_blocking(move || Storage::open(&cfg, shards, clock))
            .await
            .context("storage task")?
            .with_context(|| {
                format!(
                    "opening data directory {}",
                    config.storage.data_dir.display()
                )
            })?
    };
    let storage = Arc::new(storage);
    let node_id = node_id(&config, &storage)?;
    crate::links::ensure_key(&storage).context("short-link code key")?;
    let auth = crate::auth::Auth::load(
        config.auth.token_file.as_deref(),
        config.auth.admin_token_file.as_deref(),
    )?;
    crate::cluster::catch_up(&config, &storage, &node_id, auth.peer_token()).await?;
    let standby = crate::replication::standby_of(&config, &storage, &node_id)?;
    let replication = Arc::new(crate::replication::Replication::new(
        &config,
        &storage,
        standby.as_ref(),
    )?);
    let metrics = Arc::new(Metrics::new(shards, &storage.stats));

    // Listeners first: a lone node started on port 0 reports its real
    // address in CLUSTER_SLOTS. Connections wait in the backlog until the
    // accept loop starts.
    let listener = bind(&config.server.listen, config.server.listen_backlog)
        .await
        .with_context(|| format!("binding {}", config.server.listen))?;
    let addr = listener.local_addr()?;
    let backlog = config.server.listen_backlog;
    let http_listener = bind_if_set(&config.server.http, backlog).await?;
    let http_addr = http_listener.as_ref().map(|l| l.local_addr()).transpose()?;
    let redirect_listener = bind_if_set(&config.links.redirect_listen, backlog).await?;
    let redirect_addr = redirect_listener
        .as_ref()
        .map(|l| l.local_addr())
        .transpose()?;
    // RESP last: its default port (the protocol's + 2) gives way to a
    // listener configured on it (deploy/cluster.sh puts redirects there).
    let resp_listener = bind_resp(&config, addr).await?;
    let repl_listener = bind_if_set(&config.replication.listen, backlog).await?;
    let resp_addr = resp_listener.as_ref().map(|l| l.local_addr()).transpose()?;
    // Short URLs name the redirect listener as bound (its real port when
    // configured as 0), unless links.base_url says otherwise.
    let short_urls = config.links.short_urls(&crate::links::config::Listeners {
        protocol: addr,
        http: http_addr,
        redirect: redirect_addr,
    });
    if let Some(w) = &short_urls.warning {
        tracing::warn!(base_url = %short_urls.base_url, "{w}");
    }
    if let Some(n) = &short_urls.note {
        tracing::info!(base_url = %short_urls.base_url, "{n}");
    }
    config.links.base_url = short_urls.base_url;
    let config = Arc::new(config);

    let cluster = {
        let (config, storage, node_id, metrics) = (
            config.clone(),
            storage.clone(),
            node_id.clone(),
            metrics.clone(),
        );
        let token = auth.peer_token();
        let standby = standby.as_ref().map(|s| s.primary.clone());
        tokio::task::spawn_blocking(move || {
            let me = crate::cluster::Identity {
                node_id: &node_id,
                listen: addr,
                resp: resp_addr,
                standby_of: standby.as_deref(),
            };
            crate::cluster::Cluster::open(&config, &storage, me, &metrics, token)
        })
        .await
        .context("cluster task")??
    };
    let cluster = Arc::new(cluster);

    let tls = match (&config.tls.cert_file, &config.tls.key_file) {
        (Some(cert), Some(key)) => Some(crate::tls::server_config(cert, key)?),
        _ => None,
    };
    let ctx = ShardContext {
        config: config.clone(),
        storage: storage.clone(),
        clock: clock.clone(),
        metrics: metrics.clone(),
        envelopes: Default::default(),
        routing: cluster.routing.clone(),
        tls,
        replication: replication.source.clone(),
        standby: standby.is_some(),
    };
    let mut handles = Vec::with_capacity(shards);
    let mut built = Vec::with_capacity(shards);
    for i in 0..shards {
        let ctx = ctx.clone();
        let (h, s) = tokio::task::spawn_blocking(move || shard::create(i, ctx))
            .await
            .context("shard task")?
            .context("creating a shard")?;
        handles.push(h);
        built.push(s);
    }

    if auth.required() {
        tracing::info!(tokens = ?auth, "authentication required");
    }
    let node = Arc::new(NodeShared {
        auth,
        runtime: tokio::runtime::Handle::current(),
        config,
        storage,
        clock,
        metrics,
        shards: handles,
        cluster,
        node_id,
        listen_addr: addr,
        started: Instant::now(),
        ready: AtomicBool::new(false),
        connections: AtomicUsize::new(0),
        resp_clients: Default::default(),
        tasks: tokio_util::task::TaskTracker::new(),
        replication,
    });
    let mut threads = Vec::with_capacity(shards);
    for (h, s) in node.shards.iter().zip(built) {
        h.set_node(node.clone());
        threads.push(shard::start(s).context("starting shard thread")?);
    }
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let accept = tokio::spawn(accept_loop(
        listener,
        Protocol::Binary,
        node.clone(),
        shutdown_rx.clone(),
    ));
    let resp_accept = resp_listener.map(|l| {
        tokio::spawn(accept_loop(
            l,
            Protocol::Resp,
            node.clone(),
            shutdown_rx.clone(),
        ))
    });
    let http = http_listener.map(|l| tokio::spawn(crate::http::serve(l, Arc::downgrade(&node))));
    let redirect = redirect_listener.map(|l| {
        tokio::spawn(crate::links::redirect::serve(
            l,
            node.clone(),
            shutdown_rx.clone(),
        ))
    });
    let repl = repl_listener
        .map(|l| -> anyhow::Result<_> {
            let _ = node.replication.listen_addr.set(l.local_addr()?);
            Ok(tokio::spawn(crate::replication::listen::serve(
                l,
                node.clone(),
            )))
        })
        .transpose()?;
    node.replication.start_following(&node);
    node.ready.store(true, Ordering::SeqCst);
    // A slot move this node was coordinating when it stopped is resolved
    // in the background (its slot answers TRYAGAIN meanwhile).
    crate::cluster::recover_at_start(&node);
    tracing::info!(%addr, resp = %resp_addr.map(|a| a.to_string()).unwrap_or_else(|| "off".into()), http = %http_addr.map(|a| a.to_string()).unwrap_or_else(|| "off".into()), redirect = %redirect_addr.map(|a| a.to_string()).unwrap_or_else(|| "off".into()), base_url = %node.config.links.base_url, shards = node.shards.len(), node = %node.node_id, "rushd ready");
    Ok(Running {
        node,
        addr,
        http_addr,
        redirect_addr,
        resp_addr,
        shutdown_tx,
        accept,
        resp_accept,
        http,
        redirect,
        repl,
        shard_threads: threads,
    })
}

/// Run until `shutdown` resolves, then shut down gracefully. A promoted
/// replica restarts its serving in place, on the addresses it had bound
/// (`on_start` sees each start).
pub async fn run(
    mut config: Config,
    clock: Clock,
    shutdown: impl std::future::Future<Output = ()>,
    mut on_start: impl FnMut(&Running),
) -> anyhow::Result<()> {
    tokio::pin!(shutdown);
    loop {
        let running = start(config.clone(), clock.clone()).await?;
        on_start(&running);
        let mut restart = running.node.replication.restart.subscribe();
        tokio::select! {
            _ = &mut shutdown => {
                tracing::info!("shutting down: draining connections");
                return running.shutdown().await;
            }
            _ = restart.wait_for(|r| *r) => {
                tracing::info!(
                    role = running.node.replication.role(),
                    "restarting in place (promoted, or made a replica by the cluster map)"
                );
                config.server.listen = running.addr.to_string();
                if let Some(a) = running.http_addr {
                    config.server.http = a.to_string();
                }
                if let Some(a) = running.resp_addr {
                    config.server.resp_listen = Some(a.to_string());
                }
                if let Some(a) = running.redirect_addr {
                    config.links.redirect_listen = a.to_string();
                }
                if let Some(a) = running.replication_addr() {
                    config.replication.listen = a.to_string();
                }
                running.shutdown().await?;
            }
        }
    }
}

/// A listener on `addr`, or none when it is empty (turned off).
async fn bind_if_set(addr: &str, backlog: u32) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    if addr.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        bind(addr, backlog)
            .await
            .with_context(|| format!("binding {addr}"))?,
    ))
}

fn node_id(config: &Config, storage: &Storage) -> anyhow::Result<String> {
    if let Some(id) = &config.node.id {
        return Ok(id.clone());
    }
    if let Some(raw) = storage.meta_get(keys::meta::NODE_ID)? {
        return String::from_utf8(raw).context("stored node id is not UTF-8");
    }
    let id = format!("{:016x}", rand::random::<u64>());
    storage.meta_put(keys::meta::NODE_ID, id.as_bytes())?;
    Ok(id)
}
