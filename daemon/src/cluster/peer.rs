//! Node-to-node requests (a migrating node talks to its target and pushes
//! maps to the others): one plain connection, one request at a time, each
//! with a deadline. The daemon does not use the client library (which
//! depends on the daemon for its tests); this is the few lines it needs.
//!
//! Peers authenticate with the first token of this node's
//! `auth.admin_token_file` (nodes of one cluster share their admin tokens),
//! and speak TLS, trusting `cluster.peer_ca_file`, when that is set.

use bytes::BytesMut;
use rush_protocol::cmd::Hello;
use rush_protocol::frame::{self, Header, VERSION};
use rush_protocol::limits::MAX_FRAME_CEILING;
use rush_protocol::{Command, RushError};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Why a peer request has no answer.
#[derive(Debug, Clone)]
pub enum PeerError {
    /// No connection: the request was certainly not applied.
    Unreachable(String),
    /// Sent, but no answer (connection lost, deadline): it may have been.
    Lost(String),
    /// The peer answered with an error.
    Server(RushError),
}

impl std::fmt::Display for PeerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeerError::Unreachable(m) => write!(f, "unreachable: {m}"),
            PeerError::Lost(m) => write!(f, "no answer: {m}"),
            PeerError::Server(e) => write!(f, "{e}"),
        }
    }
}

impl From<PeerError> for RushError {
    fn from(e: PeerError) -> RushError {
        match e {
            PeerError::Server(e) => e,
            other => RushError::unavailable(format!("peer {other}")),
        }
    }
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// Idle connections kept per peer for [`Peers::call_pooled`].
const POOL_PER_PEER: usize = 16;

/// How to reach peers.
#[derive(Clone)]
pub struct Peers {
    token: Option<String>,
    tls: Option<tokio_rustls::TlsConnector>,
    timeout: Duration,
    name: String,
    /// Idle connections by address, for requests forwarded on behalf of
    /// clients (HTTP redirects of codes another node serves). A plain mutex:
    /// held for a push or pop, never across an await.
    idle: Arc<std::sync::Mutex<std::collections::HashMap<String, Vec<PeerConn>>>>,
}

impl Peers {
    pub fn new(
        node_id: &str,
        token: Option<String>,
        ca_file: Option<&std::path::Path>,
        timeout: Duration,
    ) -> anyhow::Result<Peers> {
        let tls = match ca_file {
            None => None,
            Some(path) => Some(connector(path)?),
        };
        Ok(Peers {
            token,
            tls,
            timeout,
            name: format!("rushd/{node_id}"),
            idle: Default::default(),
        })
    }

    /// As `[cluster]` says: its CA file and peer timeout.
    pub fn of_cluster(
        node_id: &str,
        token: Option<String>,
        cfg: &super::ClusterConfig,
    ) -> anyhow::Result<Peers> {
        Peers::new(
            node_id,
            token,
            cfg.peer_ca_file.as_deref(),
            Duration::from_millis(cfg.peer_timeout_ms),
        )
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Connect and say HELLO.
    pub async fn connect(&self, addr: &str) -> Result<PeerConn, PeerError> {
        let unreachable = |m: String| PeerError::Unreachable(format!("{addr}: {m}"));
        let tcp = tokio::time::timeout(self.timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| unreachable("connect timed out".into()))?
            .map_err(|e| unreachable(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Stream> = match &self.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let host = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr);
                let name = rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| unreachable(format!("server name {host:?}: {e}")))?;
                let s = tokio::time::timeout(self.timeout, tls.connect(name, tcp))
                    .await
                    .map_err(|_| unreachable("TLS handshake timed out".into()))?
                    .map_err(|e| unreachable(format!("TLS handshake: {e}")))?;
                Box::new(s)
            }
        };
        let mut conn = PeerConn {
            stream,
            buf: BytesMut::with_capacity(64 * 1024),
            next_id: 1,
            timeout: self.timeout,
            addr: addr.to_string(),
        };
        let hello = Hello {
            version: VERSION,
            token: self.token.clone(),
            client: self.name.clone(),
        };
        match conn.call(&hello).await {
            Ok(_) => Ok(conn),
            // Nothing but HELLO was sent: whatever failed, no request ran.
            Err(PeerError::Lost(m)) => Err(PeerError::Unreachable(m)),
            Err(e) => Err(e),
        }
    }

    /// One request on a fresh connection.
    pub async fn call<C: Command>(&self, addr: &str, cmd: &C) -> Result<C::Reply, PeerError> {
        self.connect(addr).await?.call(cmd).await
    }

    /// One idempotent request on a pooled connection (kept for the next
    /// one). A pooled connection the peer closed meanwhile is replaced once.
    pub async fn call_pooled<C: Command>(
        &self,
        addr: &str,
        cmd: &C,
    ) -> Result<C::Reply, PeerError> {
        debug_assert!(C::IDEMPOTENT);
        for _ in 0..2 {
            let pooled = self
                .idle
                .lock()
                .expect("not poisoned")
                .get_mut(addr)
                .and_then(Vec::pop);
            let fresh = pooled.is_none();
            let mut conn = match pooled {
                Some(c) => c,
                None => self.connect(addr).await?,
            };
            match conn.call(cmd).await {
                Err(PeerError::Lost(m)) if !fresh => {
                    tracing::debug!(addr, error = %m, "pooled peer connection was closed; reconnecting");
                }
                result => {
                    if !matches!(result, Err(PeerError::Lost(_))) {
                        let mut idle = self.idle.lock().expect("not poisoned");
                        let list = idle.entry(addr.to_string()).or_default();
                        if list.len() < POOL_PER_PEER {
                            list.push(conn);
                        }
                    }
                    return result;
                }
            }
        }
        Err(PeerError::Lost(format!("{addr}: connection closed twice")))
    }
}

/// One connection to a peer; requests go one at a time.
pub struct PeerConn {
    stream: Box<dyn Stream>,
    buf: BytesMut,
    next_id: u64,
    timeout: Duration,
    addr: String,
}

impl PeerConn {
    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub async fn call<C: Command>(&mut self, cmd: &C) -> Result<C::Reply, PeerError> {
        let timeout = self.timeout;
        let addr = self.addr.clone();
        let lost = |m: String| PeerError::Lost(format!("{addr}: {m}"));
        let id = self.next_id;
        self.next_id += 1;
        let mut out = BytesMut::new();
        frame::encode(&mut out, Header::request(C::OPCODE.as_u8(), id), |b| {
            cmd.encode(b)
        });
        let exchange = async {
            self.stream.write_all(&out).await?;
            loop {
                if let Some(f) = frame::parse(&mut self.buf, MAX_FRAME_CEILING)
                    .map_err(|e| std::io::Error::other(e.to_string()))?
                {
                    if f.header.request_id == id {
                        return Ok::<_, std::io::Error>(f);
                    }
                    continue;
                }
                if self.stream.read_buf(&mut self.buf).await? == 0 {
                    return Err(std::io::Error::other("closed by the peer"));
                }
            }
        };
        let f = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| lost(format!("no answer within {timeout:?}")))?
            .map_err(|e| lost(e.to_string()))?;
        match frame::decode_response::<C::Reply>(f.body) {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(e)) => Err(PeerError::Server(e)),
            Err(e) => Err(lost(format!("undecodable answer: {e}"))),
        }
    }
}

fn connector(ca_file: &std::path::Path) -> anyhow::Result<tokio_rustls::TlsConnector> {
    use anyhow::Context;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca_file)
        .with_context(|| format!("reading {}", ca_file.display()))?
    {
        roots.add(cert.with_context(|| format!("reading {}", ca_file.display()))?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}
