use rush_protocol::{ErrorCode, RushError};
use std::time::Duration;

/// Everything a client call can fail with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The node was not reached, or the connection was not set up:
    /// nothing was sent.
    #[error("connecting to {addr}: {message}")]
    Connect {
        addr: String,
        message: String,
        /// Whether trying again may help: true for what passes when a
        /// node comes (back) up — refused, unreachable, timed out, closed
        /// during the TLS handshake; false when TLS said no (a certificate
        /// it can't trust, a peer that doesn't speak TLS) or the TLS
        /// settings are unusable. Retries are made only when true.
        transient: bool,
    },
    /// The connection broke before the answer arrived: the request may or may
    /// not have been applied. Idempotent requests are retried automatically.
    #[error("connection lost: {0}")]
    ConnectionLost(String),
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The server sent bytes this client can't decode.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server answered with an error. Transparent: the server's error
    /// is this error's whole text, so a report that walks the source chain
    /// (anyhow's `{:#}`) says it once, not twice.
    #[error(transparent)]
    Server(#[from] RushError),
    /// A cluster operation can't go ahead (the nodes disagree, a map is
    /// invalid); nothing was changed.
    #[error("cluster: {0}")]
    Cluster(String),
}

impl ClientError {
    /// The server's error code, if the server answered with an error.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Server(e) => Some(e.code),
            _ => None,
        }
    }

    /// True when the request certainly was not applied and may be resent.
    pub fn not_applied(&self) -> bool {
        matches!(self, ClientError::Connect { .. })
            || matches!(
                self.code(),
                Some(ErrorCode::Busy | ErrorCode::Moved | ErrorCode::TryAgain)
            )
    }
}
