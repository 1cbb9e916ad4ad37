//! Where a run sends its requests: `rush://HOST:PORT` or `redis://HOST:PORT`,
//! and how one benchmark connection to each is opened. A Rush cluster is
//! `rush://A,B,C` (or `--target` given once per node): the bench then uses
//! rush-client's routing `Client` (it loads the cluster map from a node and
//! sends each request to the node serving its slot) instead of one node's
//! `Connection`.

use crate::workload::{RedisConn, RushConn};
use anyhow::{bail, Context};
use rush_client::{Client, ClientOptions, NodeConnection};
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
    /// `host:port` of the (first) node.
    pub addr: String,
    /// Every node named, `addr` first. More than one: a Rush cluster.
    pub nodes: Vec<String>,
}

impl Target {
    /// True when requests go through the routing client (a Rush cluster).
    pub fn is_cluster(&self) -> bool {
        self.nodes.len() > 1
    }

    /// One target naming every node of `targets` (all of one side):
    /// `--target` given several times.
    pub fn merge(targets: &[Target]) -> Result<Target, String> {
        let Some(first) = targets.first() else {
            return Err("no target given".into());
        };
        let mut nodes: Vec<String> = Vec::new();
        for t in targets {
            if t.side != first.side {
                return Err("targets must all be rush:// or all redis://".into());
            }
            for n in &t.nodes {
                if !nodes.contains(n) {
                    nodes.push(n.clone());
                }
            }
        }
        if first.side == Side::Redis && nodes.len() > 1 {
            return Err("one redis:// target only (Redis Cluster is not supported)".into());
        }
        Ok(Target {
            side: first.side,
            addr: nodes[0].clone(),
            nodes,
        })
    }
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
                "target {s:?} must be rush://HOST:PORT[,HOST:PORT…] or redis://HOST:PORT"
            ));
        };
        let mut nodes = Vec::new();
        for addr in rest.trim_end_matches('/').split(',') {
            match addr.rsplit_once(':') {
                Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {}
                _ => return Err(format!("target {s:?}: expected HOST:PORT after the scheme")),
            }
            if !nodes.iter().any(|n| n == addr) {
                nodes.push(addr.to_string());
            }
        }
        if side == Side::Redis && nodes.len() > 1 {
            return Err(format!(
                "target {s:?}: one Redis node only (Redis Cluster is not supported)"
            ));
        }
        Ok(Target {
            side,
            addr: nodes[0].clone(),
            nodes,
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.side.name(), self.nodes.join(","))
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
    /// Sockets behind this connection (a shard-aware Rush connection has
    /// one per shard of the node).
    pub fn sockets(&self) -> usize {
        match self {
            Conn::Rush(c) => c.sockets(),
            Conn::Redis(_) => 1,
        }
    }

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
            Side::Rush if self.is_cluster() => {
                // The first node that answers is the seed; the client loads
                // the map from it and connects to the others as requests need.
                let opts = ClientOptions {
                    client_name: "rush-bench".into(),
                    connect_timeout: timeout,
                    request_timeout: timeout,
                    // A bench reports failures; it doesn't hide them behind
                    // retries. (MOVED is still followed: routing.)
                    retry_deadline: Duration::ZERO,
                    ..ClientOptions::default()
                };
                let mut last = None;
                for seed in &self.nodes {
                    match Client::connect_with(seed, opts.clone()).await {
                        Ok(c) => {
                            if c.cluster_map().is_none() {
                                bail!("{self}: {seed} runs no cluster map (one node? name one address)");
                            }
                            return Ok(Conn::Rush(RushConn::cluster(c, timeout)));
                        }
                        Err(e) => last = Some(e),
                    }
                }
                Err(anyhow::anyhow!(
                    "connecting to {self}: {}",
                    last.map_or("no node".into(), |e| e.to_string())
                ))
            }
            Side::Rush => {
                // What `Client` does first; a node with a token would refuse
                // everything else (the bench doesn't take one yet). Then one
                // connection per shard of the node, each bound to its shard,
                // as rush-client does (`RUSH_BENCH_PER_SHARD=0`: one
                // connection, the node forwards between its shards).
                let hello = rush_protocol::cmd::Hello {
                    version: rush_protocol::frame::VERSION,
                    token: None,
                    client: "rush-bench".into(),
                };
                let per_shard = std::env::var("RUSH_BENCH_PER_SHARD").map_or(true, |v| v != "0");
                let (c, _) = NodeConnection::connect(&self.addr, timeout, None, &hello, per_shard)
                    .await
                    .with_context(|| format!("connecting to {self}"))?;
                Ok(Conn::Rush(RushConn::node(c, timeout)))
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

    #[test]
    fn parses_clusters() {
        let t: Target = "rush://a:1,b:2,a:1".parse().unwrap();
        assert!(t.is_cluster());
        assert_eq!(t.addr, "a:1");
        assert_eq!(t.nodes, vec!["a:1", "b:2"]);
        assert_eq!(t.to_string(), "rush://a:1,b:2");
        let one: Target = "rush://c:3".parse().unwrap();
        assert!(!one.is_cluster());
        let m = Target::merge(&[t.clone(), one]).unwrap();
        assert_eq!(m.nodes, vec!["a:1", "b:2", "c:3"]);
        assert!("rush://a:1,".parse::<Target>().is_err());
        assert!("redis://a:1,b:2".parse::<Target>().is_err());
        let r: Target = "redis://a:1".parse().unwrap();
        assert!(Target::merge(&[t, r]).is_err());
    }
}
