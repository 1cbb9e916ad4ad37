//! Support for tests of real `rushd` clusters: nodes as processes on fixed
//! loopback ports (so they restart where the map says they are), with
//! stable ids and optional crash points.
#![allow(dead_code)]

use crate::common::Spawned;
use rush_client::protocol::cmd::Get;
use rush_client::protocol::{key_slot, ErrorCode};
use rush_client::{Client, ClientError, ClientOptions, Connection};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct Node {
    pub id: String,
    pub dir: PathBuf,
    pub addr: SocketAddr,
    pub proc: Option<Spawned>,
    /// Where this node's crash-point config goes.
    conf: PathBuf,
}

impl Node {
    /// Start node `id` with its data in `root/id`, on a free port that it
    /// can come back to.
    pub fn start(root: &Path, id: &str, crash: Option<&str>) -> Node {
        let dir = root.join(id);
        let conf = root.join(format!("{id}.toml"));
        let mut n = Node {
            id: id.to_string(),
            dir,
            addr: "127.0.0.1:0".parse().unwrap(),
            proc: None,
            conf,
        };
        n.launch(None, crash);
        n
    }

    /// Launch on `listen`, or on a fresh fixed port.
    fn launch(&mut self, listen: Option<&str>, crash: Option<&str>) {
        // Small chunks, so a slot of a test moves in several of them.
        let mut conf = "[cluster]\nmigrate_chunk_keys = 16\n".to_string();
        if let Some(point) = crash {
            conf.push_str(&format!("[debug]\ncrash_point = {point:?}\n"));
        }
        std::fs::write(&self.conf, conf).unwrap();
        let extra = [
            "--node-id".to_string(),
            self.id.clone(),
            "--config".into(),
            self.conf.display().to_string(),
        ];
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let p = match listen {
            Some(listen) => Spawned::start_on(&self.dir, listen, &extra),
            None => Spawned::start_fixed(&self.dir, &extra),
        };
        self.addr = p.addr;
        self.proc = Some(p);
    }

    /// Start again on the same port (after it stopped).
    pub fn restart(&mut self, crash: Option<&str>) {
        assert!(self.proc.is_none(), "stop it first");
        let listen = self.addr.to_string();
        self.launch(Some(&listen), crash);
    }

    /// SIGTERM: a graceful drain; must exit 0.
    pub fn terminate(&mut self) {
        let mut p = self.proc.take().expect("running");
        let status = p.terminate();
        assert!(status.success(), "node {} exited with {status:?}", self.id);
    }

    pub fn kill9(&mut self) {
        self.proc.take().expect("running").kill9();
    }

    /// Wait for the process to end by itself (a crash point).
    pub fn wait_exit(&mut self, within: Duration) {
        let mut p = self.proc.take().expect("running");
        let until = Instant::now() + within;
        loop {
            if p.child.try_wait().unwrap().is_some() {
                return;
            }
            assert!(Instant::now() < until, "node {} did not exit", self.id);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn addr(&self) -> String {
        self.addr.to_string()
    }
}

pub fn opts() -> ClientOptions {
    ClientOptions {
        retry_deadline: Duration::from_secs(30),
        ..ClientOptions::default()
    }
}

/// A cluster of `ids` with the slots shared evenly in that order.
pub async fn create(nodes: &[&Node]) -> rush_client::protocol::cmd::ClusterSlotsReply {
    let addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    rush_client::cluster::create(&addrs, false, opts())
        .await
        .expect("cluster created")
}

/// `n` keys (with `prefix`) whose slots are in `slots`.
pub fn keys_in(prefix: &str, slots: std::ops::RangeInclusive<u16>, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|k| slots.contains(&key_slot(k.as_bytes())))
        .take(n)
        .collect()
}

/// Who answers for `key` now, asking `addr` directly: `Ok(())` when it
/// serves it, else the error code (MOVED, TRYAGAIN).
pub async fn served_by(addr: &str, key: &str) -> Result<(), ErrorCode> {
    let c = Connection::connect(addr, Duration::from_secs(5))
        .await
        .map_err(|_| ErrorCode::Unavailable)?;
    match c
        .call(
            &Get {
                key: key.to_string().into(),
            },
            Duration::from_secs(5),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(ClientError::Server(e)) => Err(e.code),
        Err(_) => Err(ErrorCode::Unavailable),
    }
}

/// Wait until `addr` no longer answers TRYAGAIN (or can't be reached) for
/// `key`: a frozen slot was resolved.
pub async fn wait_settled(addr: &str, key: &str, within: Duration) -> Result<(), ErrorCode> {
    let until = Instant::now() + within;
    loop {
        match served_by(addr, key).await {
            Err(ErrorCode::TryAgain | ErrorCode::Unavailable) if Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            other => return other,
        }
    }
}

/// The envelope audit of one node: no problems.
pub async fn audit_clean(c: &Client, addr: &str) -> u64 {
    let a = c
        .call_on(addr, rush_client::protocol::cmd::EnvelopeAudit {})
        .await
        .expect("audit");
    assert_eq!(a.problem_count, 0, "node {addr}: {:?}", a.problems);
    a.envelopes
}
