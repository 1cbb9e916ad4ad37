//! Where a run sends its requests: `rush://HOST:PORT` or `redis://HOST:PORT`,
//! and how one benchmark connection to each is opened.

use crate::workload::{RedisConn, RushConn};
use anyhow::{bail, Context};
use rush_client::Connection;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Which server a target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Rush,
    Redis,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Rush => "rush",
            Side::Redis => "redis",
        }
    }
}

/// A parsed `--target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub side: Side,
    /// `host:port`.
    pub addr: String,
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Target, String> {
        let (side, rest) = if let Some(r) = s.strip_prefix("rush://") {
            (Side::Rush, r)
        } else if let Some(r) = s.strip_prefix("redis://") {
            (Side::Redis, r)
        } else {
            return Err(format!(
                "target {s:?} must be rush://HOST:PORT or redis://HOST:PORT"
            ));
        };
        let addr = rest.trim_end_matches('/');
        match addr.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {}
            _ => return Err(format!("target {s:?}: expected HOST:PORT after the scheme")),
        }
        Ok(Target {
            side,
            addr: addr.to_string(),
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.side.name(), self.addr)
    }
}

/// One benchmark connection. Both kinds are multiplexed: clones share the
/// socket, and concurrent requests on it are written together and answered
/// in flight, so P lanes on one connection are P requests pipelined on it.
#[derive(Clone)]
pub enum Conn {
    /// rush-client's multiplexed connection (answers matched by request id).
    Rush(RushConn),
    /// redis-rs's multiplexed connection: the same model (concurrent commands
    /// are queued, written in batches and answered in order), which is how a
    /// skilled user gets pipelining from many tasks without hand-built batches.
    Redis(RedisConn),
}

impl Conn {
    pub fn rush(&self) -> Option<RushConn> {
        match self {
            Conn::Rush(c) => Some(c.clone()),
            Conn::Redis(_) => None,
        }
    }

    pub fn redis(&self) -> Option<RedisConn> {
        match self {
            Conn::Redis(c) => Some(c.clone()),
            Conn::Rush(_) => None,
        }
    }
}

impl Target {
    /// Open one connection, ready for requests.
    pub async fn connect(&self, timeout: Duration) -> anyhow::Result<Conn> {
        match self.side {
            Side::Rush => {
                let c = Connection::connect(&self.addr, timeout)
                    .await
                    .with_context(|| format!("connecting to {self}"))?;
                // What `Client` does first; a node with a token would refuse
                // everything else (the bench doesn't take one yet).
                let hello = rush_protocol::cmd::Hello {
                    version: rush_protocol::frame::VERSION,
                    token: None,
                    client: "rush-bench".into(),
                };
                c.call(&hello, timeout)
                    .await
                    .with_context(|| format!("HELLO to {self}"))?;
                Ok(Conn::Rush(RushConn { conn: c, timeout }))
            }
            Side::Redis => {
                let client = redis::Client::open(format!("redis://{}/", self.addr))
                    .with_context(|| format!("redis target {self}"))?;
                // redis-rs times requests out after 500 ms by default; give
                // Redis the same patience as Rush (`--timeout`), so a slow
                // fsync counts as latency, not as an error on one side only.
                let config = redis::AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout));
                let mut c = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .with_context(|| format!("connecting to {self}"))?;
                let pong: String = redis::cmd("PING")
                    .query_async(&mut c)
                    .await
                    .with_context(|| format!("PING to {self}"))?;
                if pong != "PONG" {
                    bail!("{self} answered PING with {pong:?}");
                }
                Ok(Conn::Redis(c))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        let t: Target = "rush://127.0.0.1:7379".parse().unwrap();
        assert_eq!(t.side, Side::Rush);
        assert_eq!(t.addr, "127.0.0.1:7379");
        assert_eq!(t.to_string(), "rush://127.0.0.1:7379");
        let t: Target = "redis://localhost:6379/".parse().unwrap();
        assert_eq!(t.side, Side::Redis);
        assert_eq!(t.addr, "localhost:6379");
        assert!("http://x:1".parse::<Target>().is_err());
        assert!("rush://nohost".parse::<Target>().is_err());
        assert!("rush://:80".parse::<Target>().is_err());
        assert!("redis://h:99999".parse::<Target>().is_err());
    }
}
