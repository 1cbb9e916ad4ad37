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
//! One [`Client`] keeps one multiplexed connection per node: clone it freely
//! and call from many tasks; requests are pipelined and answers matched by
//! request id. A lost connection is re-established with backoff; idempotent
//! requests are retried until `retry_deadline`, others fail with
//! [`ClientError::ConnectionLost`] (their outcome is unknown).

mod batch;
mod catalog;
mod connection;
mod duration;
mod envelopes;
mod error;
mod limits;
mod links;

pub use batch::BatchBuilder;
pub use connection::{Connection, Tls};
pub use duration::{format_duration, parse_duration};
pub use error::ClientError;
pub use limits::LimitDenial;
pub use rush_protocol as protocol;

use bytes::Bytes;
use rush_protocol::cmd::*;
use rush_protocol::{Command, ErrorCode, Reply};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Sent in HELLO when the node requires authentication.
    pub token: Option<String>,
    pub client_name: String,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    /// How long idempotent requests are retried across reconnects.
    pub retry_deadline: Duration,
    /// Also retry BUSY answers (the request was not applied) until the deadline.
    pub retry_busy: bool,
    /// Connect over TLS.
    pub tls: Option<Tls>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("server_name", &self.server_name)
            .finish()
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            token: None,
            client_name: "rush-client".into(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            retry_deadline: Duration::from_secs(10),
            retry_busy: false,
            tls: None,
        }
    }
}

struct Inner {
    addr: String,
    opts: ClientOptions,
    /// The live connection; replaced after it breaks. A tokio mutex because
    /// reconnecting awaits while holding it, so only one task reconnects.
    conn: Mutex<Option<Connection>>,
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

const BACKOFF_START: Duration = Duration::from_millis(20);
const BACKOFF_MAX: Duration = Duration::from_millis(1000);

impl Client {
    pub async fn connect(addr: &str) -> Result<Client, ClientError> {
        Self::connect_with(addr, ClientOptions::default()).await
    }

    /// Connect and say HELLO (with the token, if any).
    pub async fn connect_with(addr: &str, opts: ClientOptions) -> Result<Client, ClientError> {
        let client = Client {
            inner: Arc::new(Inner {
                addr: addr.to_string(),
                opts,
                conn: Mutex::new(None),
            }),
        };
        client.connection().await?;
        Ok(client)
    }

    pub fn addr(&self) -> &str {
        &self.inner.addr
    }

    async fn connection(&self) -> Result<Connection, ClientError> {
        let mut slot = self.inner.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            if !c.is_closed() {
                return Ok(c.clone());
            }
        }
        let opts = &self.inner.opts;
        let c = Connection::connect_tls(&self.inner.addr, opts.connect_timeout, opts.tls.as_ref())
            .await?;
        let hello = Hello {
            version: rush_protocol::frame::VERSION,
            token: opts.token.clone(),
            client: opts.client_name.clone(),
        };
        c.call(&hello, opts.request_timeout).await?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Send any request; retry as the options allow.
    pub async fn call<C: Command>(&self, cmd: C) -> Result<C::Reply, ClientError> {
        let opts = &self.inner.opts;
        let deadline = Instant::now() + opts.retry_deadline;
        let mut backoff = BACKOFF_START;
        loop {
            let result = match self.connection().await {
                Ok(c) => c.call(&cmd, opts.request_timeout).await,
                Err(e) => Err(e),
            };
            let retry = match &result {
                Err(ClientError::Connect { .. }) => true,
                Err(ClientError::ConnectionLost(_)) => C::IDEMPOTENT,
                Err(e) if e.code() == Some(ErrorCode::Busy) => opts.retry_busy,
                Err(e) if e.code() == Some(ErrorCode::Unavailable) => C::IDEMPOTENT,
                _ => false,
            };
            if !retry || Instant::now() + backoff > deadline {
                return result;
            }
            tracing::debug!(op = C::OPCODE.name(), ?backoff, "retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    pub async fn ping(&self) -> Result<(), ClientError> {
        self.call(Ping::default()).await.map(|_| ())
    }

    pub async fn info(&self) -> Result<InfoReply, ClientError> {
        self.call(Info {}).await
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
