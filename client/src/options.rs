//! [`ClientOptions`]: timeouts, the retry deadline and its hook, TLS, and
//! whether to keep a connection per shard.

use crate::{ClientError, Tls};
use std::sync::Arc;
use std::time::Duration;

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Sent in HELLO when the node requires authentication.
    pub token: Option<String>,
    pub client_name: String,
    /// The most one connection attempt (TCP, TLS, HELLO, shard binding) may
    /// take.
    pub connect_timeout: Duration,
    /// The most one attempt at a request may wait for its answer.
    pub request_timeout: Duration,
    /// How long a call is retried (reconnecting, waiting out TRYAGAIN),
    /// counted from its start. Attempts after the first are cut short at
    /// it, so a call that retries ends within about this long (the first
    /// attempt has the whole `request_timeout`). Zero: no retries.
    pub retry_deadline: Duration,
    /// How long [`Client::connect_with`](crate::Client::connect_with)
    /// keeps trying to reach the node it is given (one that is restarting,
    /// or not listening yet), with the same backoff and `on_retry` notices
    /// as a call's retries. `None`: `retry_deadline`. A tool that takes
    /// addresses from people may want it shorter, so that a mistyped
    /// address fails fast.
    pub seed_deadline: Option<Duration>,
    /// Also retry BUSY answers (the request was not applied) until the deadline.
    pub retry_busy: bool,
    /// Connect over TLS.
    pub tls: Option<Tls>,
    /// Keep one connection per shard of each node and send every request
    /// to the shard that runs it (see [`NodeConnection`](crate::NodeConnection)); otherwise one
    /// connection per node, and the node forwards between its shards.
    pub per_shard: bool,
    /// Called before every retry with what failed and how long the call
    /// will go on trying (e.g. for a command-line tool to say on stderr
    /// what it waits for). Runs on the calling task: keep it quick.
    pub on_retry: Option<RetryHook>,
}

/// A retry about to happen (see [`ClientOptions::on_retry`]).
#[derive(Debug)]
pub struct RetryNotice<'a> {
    /// The request's name (`GET`, `LINK_SHORTEN`…); `HELLO` while
    /// [`Client::connect_with`](crate::Client::connect_with) is reaching the
    /// node it was given.
    pub op: &'static str,
    /// The node the failed attempt went to.
    pub addr: &'a str,
    /// Why the attempt failed.
    pub error: &'a ClientError,
    /// Retries of this call so far, this one included (1 for the first).
    pub attempt: u32,
    /// The wait before the next attempt.
    pub wait: Duration,
    /// Time left until the call's retry deadline.
    pub remaining: Duration,
}

/// A callback for [`ClientOptions::on_retry`].
#[derive(Clone)]
pub struct RetryHook(pub(crate) Arc<dyn Fn(&RetryNotice<'_>) + Send + Sync>);

impl RetryHook {
    pub fn new(f: impl Fn(&RetryNotice<'_>) + Send + Sync + 'static) -> RetryHook {
        RetryHook(Arc::new(f))
    }
}

impl std::fmt::Debug for RetryHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RetryHook")
    }
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
            seed_deadline: None,
            retry_busy: false,
            tls: None,
            per_shard: true,
            on_retry: None,
        }
    }
}
