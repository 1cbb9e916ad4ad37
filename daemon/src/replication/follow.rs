//! The replica's side: bootstrap from the primary's snapshot, then follow
//! its records, applying each batch of them to RocksDB in one write with
//! the new positions (`meta::REPLICATION_STATE`), so a replica killed at
//! any moment restarts from exactly what it holds.
//!
//! Each fetch's batch is synced before the next fetch, whose positions tell
//! the primary what the replica holds durably: with `replication.min_acks
//! = 1` that is the acknowledgement the primary's answers wait for. (One
//! fsync per fetch: under load a fetch carries many group commits.)
//! Snapshot pages are written unsynced; the write that completes the
//! bootstrap is synced, and with it all before it.
//!
//! The replica's shards serve no slot meanwhile (requests are MOVED to the
//! primary) and run no timers: nothing but this loop writes its data. A
//! promotion restarts the node's serving in place, which rebuilds every
//! in-memory index from what was applied, as any start does.

use crate::cluster::peer::{PeerConn, PeerError, Peers};
use crate::replication::record::{self, Op};
use crate::storage::keys::{self, meta};
use crate::storage::{Storage, WriteBatch};
use rush_protocol::cmd::cluster::replication::META_FAMILY;
use rush_protocol::cmd::{Info, ReplFetch, ReplFetchReply, ReplSnapshot, ReplSnapshotReply};
use rush_protocol::ErrorCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// About how many bytes one fetch or snapshot page asks for.
const PAGE_BYTES: u32 = 4 << 20;
/// How long the primary holds a fetch open when it has nothing new.
const FETCH_WAIT_MS: u32 = 1_000;
/// Reconnect delays.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// What a replica has applied (stored as `meta::REPLICATION_STATE`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Applied {
    /// The primary run the positions are of.
    pub run_id: u64,
    /// The bootstrap finished: the data is the snapshot plus the records
    /// up to `positions`. Until then it is a partial copy.
    pub complete: bool,
    /// The node records' version last copied.
    pub meta_version: u64,
    /// Per shard: the last record applied.
    pub positions: Vec<u64>,
}

impl Applied {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(19 + 8 * self.positions.len());
        out.extend_from_slice(&self.run_id.to_be_bytes());
        out.push(u8::from(self.complete));
        out.extend_from_slice(&self.meta_version.to_be_bytes());
        out.extend_from_slice(&(self.positions.len() as u16).to_be_bytes());
        for p in &self.positions {
            out.extend_from_slice(&p.to_be_bytes());
        }
        out
    }

    fn decode(raw: &[u8]) -> Option<Applied> {
        let u64_at = |at: usize| Some(u64::from_be_bytes(raw.get(at..at + 8)?.try_into().ok()?));
        let n = u16::from_be_bytes(raw.get(17..19)?.try_into().ok()?) as usize;
        if raw.len() != 19 + 8 * n {
            return None;
        }
        Some(Applied {
            run_id: u64_at(0)?,
            complete: raw[8] == 1,
            meta_version: u64_at(9)?,
            positions: (0..n).map(|i| u64_at(19 + 8 * i)).collect::<Option<_>>()?,
        })
    }

    /// What the data directory says (none: nothing applied yet).
    pub fn load(storage: &Storage) -> Option<Applied> {
        let raw = storage.meta_get(meta::REPLICATION_STATE).ok()??;
        let a = Applied::decode(&raw);
        if a.is_none() {
            tracing::warn!("the stored replication state is unreadable: bootstrapping again");
        }
        a
    }
}

/// What INFO and REPL_STATUS show of the follower.
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// connecting, bootstrapping, following, stopped.
    pub state: &'static str,
    pub last_error: Option<String>,
    pub run_id: u64,
    pub positions: Vec<u64>,
    /// The primary's heads at the last fetch.
    pub heads: Vec<u64>,
    /// When the last fetch answered.
    pub last_contact: Option<Instant>,
    /// Since when the replica has been behind (None: caught up).
    pub behind_since: Option<Instant>,
    pub bootstraps: u64,
    pub records_applied: u64,
}

impl Status {
    /// Records the primary holds that this replica doesn't.
    pub fn lag_records(&self) -> u64 {
        self.heads
            .iter()
            .zip(&self.positions)
            .map(|(h, p)| h.saturating_sub(*p))
            .sum()
    }
}

/// The follower's shared face.
pub struct Follow {
    /// The primary's replication listener, or (`from_map`) its node id.
    pub primary: String,
    pub from_map: bool,
    pub status: Mutex<Status>,
}

impl Follow {
    pub fn new(standby: super::Standby) -> Follow {
        Follow {
            primary: standby.primary,
            from_map: standby.from_map,
            status: Mutex::new(Status {
                state: "connecting",
                ..Status::default()
            }),
        }
    }

    pub fn snapshot(&self) -> Status {
        self.status.lock().expect("not poisoned").clone()
    }

    fn set(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.lock().expect("not poisoned"));
    }
}

/// Follow the primary until `stop` turns true. `routing` sends this
/// node's requests to the primary (MOVED).
pub async fn run(
    follow: Arc<Follow>,
    storage: Arc<Storage>,
    peers: Peers,
    routing: Arc<crate::cluster::routing::Routing>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = BACKOFF_MIN;
    while !*stop.borrow() {
        match follow_once(&follow, &storage, &peers, &routing, &mut stop).await {
            Ok(()) => backoff = BACKOFF_MIN,
            Err(e) => {
                tracing::warn!(primary = %follow.primary, error = %e, "replication: will retry");
                follow.set(|s| {
                    s.state = "connecting";
                    s.last_error = Some(e);
                });
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.changed() => {}
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
    follow.set(|s| s.state = "stopped");
}

/// Connect, bootstrap if needed, and follow until the connection fails
/// (`Err`), the primary says to bootstrap again or `stop` turns (`Ok`).
async fn follow_once(
    follow: &Follow,
    storage: &Arc<Storage>,
    peers: &Peers,
    routing: &crate::cluster::routing::Routing,
    stop: &mut watch::Receiver<bool>,
) -> Result<(), String> {
    let addr = if follow.from_map {
        replication_addr(peers, routing).await?
    } else {
        follow.primary.clone()
    };
    let mut conn = peers.connect(&addr).await.map_err(|e| e.to_string())?;
    // Where the primary's clients reach it: this node's MOVED answers
    // send them there.
    let info = conn.call(&Info {}).await.map_err(|e| e.to_string())?;
    // (In a cluster map, the map says where each slot's owner is.)
    if let Some(addr) = info.get("advertise").filter(|a| !a.is_empty()) {
        if routing.map().epoch() == 0 && routing.map().owner(0).1 != addr {
            routing.install(crate::cluster::standby_map(addr))?;
        }
    }
    let mut applied = match Applied::load(storage) {
        Some(a) if a.complete => a,
        _ => bootstrap(follow, storage, &mut conn).await?,
    };
    follow.set(|s| {
        s.state = "following";
        s.run_id = applied.run_id;
        s.positions = applied.positions.clone();
    });
    loop {
        let fetch = ReplFetch {
            run_id: applied.run_id,
            positions: applied.positions.clone(),
            meta_version: applied.meta_version,
            max_bytes: PAGE_BYTES,
            wait_ms: FETCH_WAIT_MS,
        };
        let reply = tokio::select! {
            r = conn.call(&fetch) => r,
            _ = stop.changed() => return Ok(()),
        };
        let reply = match reply {
            Ok(r) => r,
            Err(PeerError::Server(e)) if e.code == ErrorCode::NotFound => {
                tracing::warn!(primary = %follow.primary, reason = %e.message, "replication: bootstrapping again");
                let mut restart = applied.clone();
                restart.complete = false;
                let st = storage.clone();
                blocking(move || write_state(&st, &restart)).await?;
                return Ok(());
            }
            Err(e) => return Err(e.to_string()),
        };
        if reply.heads.len() != applied.positions.len() {
            return Err(format!(
                "the primary now runs {} shards, this replica {}",
                reply.heads.len(),
                applied.positions.len()
            ));
        }
        let n = reply.records.len() as u64;
        let heads = reply.heads.clone();
        if n > 0 || reply.meta.is_some() {
            let st = storage.clone();
            applied = blocking(move || apply(&st, applied, reply)).await?;
        }
        let caught_up = heads.iter().zip(&applied.positions).all(|(h, p)| p >= h);
        follow.set(|s| {
            s.positions = applied.positions.clone();
            s.heads = heads;
            s.last_contact = Some(Instant::now());
            s.records_applied += n;
            s.last_error = None;
            s.behind_since = if caught_up {
                None
            } else {
                s.behind_since.or(Some(Instant::now()))
            };
        });
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("replication task: {e}"))?
}

/// Where to follow the primary the map in force names for this node: the
/// host of its map address, the port of its `replication_listen` (INFO).
async fn replication_addr(
    peers: &Peers,
    routing: &crate::cluster::routing::Routing,
) -> Result<String, String> {
    let map = routing.map();
    let me = routing.me();
    let primary = map
        .map
        .node(me)
        .and_then(|n| n.replica_of.as_deref())
        .and_then(|p| map.map.node(p))
        .ok_or_else(|| {
            format!(
                "the cluster map (epoch {}) no longer names {me} a replica",
                map.epoch()
            )
        })?;
    let info = peers
        .call(&primary.addr, &Info {})
        .await
        .map_err(|e| format!("asking {} where it serves replicas: {e}", primary.id))?;
    let listen = info.get("replication_listen").unwrap_or_default();
    let port = listen
        .rsplit_once(':')
        .map(|(_, p)| p)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            format!(
                "{} serves no replicas (its replication.listen is off)",
                primary.id
            )
        })?;
    let host = primary
        .addr
        .rsplit_once(':')
        .map_or(primary.addr.as_str(), |(h, _)| h);
    Ok(format!("{host}:{port}"))
}

/// Replace this node's data with the primary's snapshot.
async fn bootstrap(
    follow: &Follow,
    storage: &Arc<Storage>,
    conn: &mut PeerConn,
) -> Result<Applied, String> {
    follow.set(|s| {
        s.state = "bootstrapping";
        s.bootstraps += 1;
    });
    let started = Instant::now();
    let mut page = conn
        .call(&ReplSnapshot {
            session: 0,
            max_bytes: PAGE_BYTES,
        })
        .await
        .map_err(|e| format!("starting a snapshot: {e}"))?;
    let shards = storage.shards();
    if page.positions.len() != shards {
        return Err(format!(
            "the primary runs {} shards and this node {shards}: start the replica with --shards {} \
             on an empty data directory",
            page.positions.len(),
            page.positions.len()
        ));
    }
    let applied = Applied {
        run_id: page.run_id,
        complete: false,
        meta_version: 0,
        positions: page.positions.clone(),
    };
    {
        let (st, a) = (storage.clone(), applied.clone());
        blocking(move || clear(&st, &a)).await?;
    }
    let mut pairs = 0usize;
    loop {
        pairs += page.pairs.len();
        let done = page.done;
        let session = page.session;
        let st = storage.clone();
        blocking(move || write_page(&st, page)).await?;
        if done {
            break;
        }
        page = conn
            .call(&ReplSnapshot {
                session,
                max_bytes: PAGE_BYTES,
            })
            .await
            .map_err(|e| format!("reading the snapshot: {e}"))?;
    }
    let mut complete = applied;
    complete.complete = true;
    {
        let (st, a) = (storage.clone(), complete.clone());
        blocking(move || {
            let mut batch = WriteBatch::default();
            st.batch_meta_put(&mut batch, meta::REPLICATION_STATE, &a.encode());
            st.write(batch, true).map_err(|e| e.to_string())
        })
        .await?;
    }
    tracing::info!(primary = %follow.primary, pairs, secs = started.elapsed().as_secs_f64(), positions = ?complete.positions, "replication: bootstrapped");
    Ok(complete)
}

fn write_state(storage: &Storage, a: &Applied) -> Result<(), String> {
    let mut batch = WriteBatch::default();
    storage.batch_meta_put(&mut batch, meta::REPLICATION_STATE, &a.encode());
    storage.write(batch, true).map_err(|e| e.to_string())
}

/// Drop every shard's keys and the copied node records, marking the copy
/// incomplete in the same write.
fn clear(storage: &Storage, a: &Applied) -> Result<(), String> {
    let mut batch = WriteBatch::default();
    let (from, _) = keys::slot_range(0);
    let (_, to) = keys::slot_range(rush_protocol::SLOTS - 1);
    for i in 0..storage.shards() {
        batch.delete_range_cf(storage.cf(i), &from, &to);
    }
    for name in meta::REPLICATED {
        for (k, _) in storage.meta_scan(name).map_err(|e| e.to_string())? {
            storage.batch_meta_delete(&mut batch, &k);
        }
    }
    storage.batch_meta_put(&mut batch, meta::REPLICATION_STATE, &a.encode());
    storage.write(batch, true).map_err(|e| e.to_string())
}

fn write_page(storage: &Storage, page: ReplSnapshotReply) -> Result<(), String> {
    let mut batch = WriteBatch::default();
    for p in &page.pairs {
        if p.family == META_FAMILY {
            if !is_replicated(&p.key) {
                return Err(format!(
                    "the primary sent a node record this node keeps its own: {:?}",
                    String::from_utf8_lossy(&p.key)
                ));
            }
            storage.batch_meta_put(&mut batch, &p.key, &p.value);
        } else if (p.family as usize) < storage.shards() {
            batch.put_cf(storage.cf(p.family as usize), &p.key, &p.value);
        } else {
            return Err(format!("a snapshot pair of shard {}", p.family));
        }
    }
    storage.write(batch, false).map_err(|e| e.to_string())
}

fn is_replicated(name: &[u8]) -> bool {
    meta::REPLICATED.iter().any(|p| name.starts_with(p))
}

/// Apply one fetch's records and node records with the new positions, in
/// one write.
fn apply(storage: &Storage, mut a: Applied, reply: ReplFetchReply) -> Result<Applied, String> {
    let mut batch = WriteBatch::default();
    for r in &reply.records {
        let i = r.shard as usize;
        let Some(pos) = a.positions.get_mut(i) else {
            return Err(format!("a record of shard {i}"));
        };
        if r.seq != *pos + 1 {
            return Err(format!(
                "shard {i}: record {} after {} (a gap): reconnecting",
                r.seq, *pos
            ));
        }
        let cf = storage.cf(i);
        let ops =
            record::decode(&r.body).map_err(|e| format!("shard {i} record {}: {e}", r.seq))?;
        for op in ops {
            match op {
                Op::Put(k, v) => batch.put_cf(cf, k, v),
                Op::Delete(k) => batch.delete_cf(cf, k),
                Op::Merge(k, v) => batch.merge_cf(cf, k, v),
                Op::DeleteRange(from, to) => batch.delete_range_cf(cf, from, to),
            }
        }
        *pos = r.seq;
    }
    if let Some((version, records)) = &reply.meta {
        for (k, v) in records {
            if is_replicated(k) {
                storage.batch_meta_put(&mut batch, k, v);
            }
        }
        a.meta_version = *version;
    }
    storage.batch_meta_put(&mut batch, meta::REPLICATION_STATE, &a.encode());
    // Synced: the next fetch tells the primary these positions are held,
    // which with `min_acks = 1` releases its answers.
    storage.write(batch, true).map_err(|e| e.to_string())?;
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_applied_state_reads_back_and_refuses_damage() {
        let a = Applied {
            run_id: 0xfeed,
            complete: true,
            meta_version: 7,
            positions: vec![1, 0, 99],
        };
        let raw = a.encode();
        assert_eq!(Applied::decode(&raw), Some(a));
        for cut in 0..raw.len() {
            assert_eq!(Applied::decode(&raw[..cut]), None, "cut at {cut}");
        }
    }
}
