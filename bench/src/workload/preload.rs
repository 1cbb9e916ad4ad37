//! Preloading: many requests spread over a run's connections, many in
//! flight on each (Rush: one request per item or batch; Redis: pipelines of
//! commands), and what a preload leaves for later runs in this process.

use super::{RedisConn, RushConn};
use futures_util::stream::{FuturesUnordered, StreamExt};
use rush_protocol::cmd::{Get, Set};
use rush_protocol::Command;
use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Requests in flight per connection while preloading Rush (group commit
/// turns them into a few large synced batches)…
const PRELOAD_DEPTH_RUSH: usize = 512;
/// …counted in items for requests that carry many (batches): enough to keep
/// the shards busy, few enough that each is answered well within the
/// client's timeout.
const PRELOAD_ITEMS_RUSH: u64 = 16_384;
/// Commands per Redis pipeline while preloading, and pipelines in flight per
/// connection.
const PRELOAD_BATCH_REDIS: u64 = 1000;
const PRELOAD_DEPTH_REDIS: usize = 4;

/// Send jobs `0..n` over `conns` — each connection takes the next job
/// whenever it has room, at most `depth` in flight on each — and keep the
/// answers `send` returns `Some` of, in job order. The first error fails the
/// whole preload (a preload must be complete). Connections take jobs from
/// one counter rather than a fixed share, so they finish together: one that
/// ran ahead would otherwise sit idle until the slowest finished, long
/// enough in a 10M-key preload for the server to close it as idle.
async fn spread<'c, C, T, F, Fut>(
    conns: &'c [C],
    n: u64,
    depth: usize,
    send: F,
) -> anyhow::Result<Vec<T>>
where
    F: Fn(&'c C, u64) -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let send = &send;
    let next = &AtomicU64::new(0);
    let per_conn = conns.iter().map(|conn| async move {
        let mut inflight = FuturesUnordered::new();
        let mut got = Vec::new();
        loop {
            while inflight.len() < depth {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let answer = send(conn, i);
                inflight.push(async move { answer.await.map(|a| a.map(|a| (i, a))) });
            }
            match inflight.next().await {
                Some(Ok(Some(pair))) => got.push(pair),
                Some(Ok(None)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(got),
            }
        }
    });
    let mut all: Vec<(u64, T)> = futures_util::future::try_join_all(per_conn)
        .await?
        .into_iter()
        .flatten()
        .collect();
    all.sort_unstable_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, a)| a).collect())
}

/// One preload request to Rush, its error in the preload's words.
async fn rush_call<C: Command>(conn: &RushConn, cmd: C) -> anyhow::Result<C::Reply> {
    conn.call(&cmd)
        .await
        .map_err(|e| anyhow::anyhow!("preload: {}: {}", e.kind, e.message))
}

/// Send requests `make(0..n)` through Rush, spread over `conns`, many in
/// flight on each; fails on the first error (a preload must be complete).
pub async fn rush_bulk<C, F>(conns: &[RushConn], n: u64, make: F) -> anyhow::Result<u64>
where
    C: Command + Send + Sync,
    F: Fn(u64) -> C + Send + Sync,
{
    spread(conns, n, PRELOAD_DEPTH_RUSH, |conn, i| {
        let cmd = make(i);
        async move { rush_call(conn, cmd).await.map(|_| None::<()>) }
    })
    .await?;
    Ok(n)
}

/// Like [`rush_bulk`] for requests `make(from..to)` of `per_request` items
/// each, keeping every answer in order (codes or ids the server issued).
pub async fn rush_bulk_collect<C, F>(
    conns: &[RushConn],
    from: u64,
    to: u64,
    per_request: u64,
    make: F,
) -> anyhow::Result<Vec<C::Reply>>
where
    C: Command + Send + Sync,
    C::Reply: Send,
    F: Fn(u64) -> C + Send + Sync,
{
    let count = conns.len().max(1) as u64;
    let depth = (PRELOAD_ITEMS_RUSH / count / per_request.max(1))
        .clamp(1, PRELOAD_DEPTH_RUSH as u64) as usize;
    spread(conns, to.saturating_sub(from), depth, |conn, i| {
        let cmd = make(from + i);
        async move { rush_call(conn, cmd).await.map(Some) }
    })
    .await
}

/// Add commands for items `0..n` to Redis pipelines (`add(i, pipe)`),
/// [`PRELOAD_BATCH_REDIS`] per round trip, spread over `conns`.
pub async fn redis_bulk<F>(conns: &[RedisConn], n: u64, add: F) -> anyhow::Result<u64>
where
    F: Fn(u64, &mut redis::Pipeline) + Send + Sync,
{
    let batches = n.div_ceil(PRELOAD_BATCH_REDIS);
    spread(conns, batches, PRELOAD_DEPTH_REDIS, |conn, b| {
        let mut pipe = redis::pipe();
        let start = b * PRELOAD_BATCH_REDIS;
        for i in start..(start + PRELOAD_BATCH_REDIS).min(n) {
            add(i, &mut pipe);
        }
        let mut conn = conn.clone();
        async move {
            pipe.query_async::<()>(&mut conn)
                .await
                .map_err(|e| anyhow::anyhow!("preload: {e}"))?;
            Ok(None::<()>)
        }
    })
    .await?;
    Ok(n)
}

/// Like [`redis_bulk`] for items `from..to`.
pub async fn redis_bulk_range<F>(
    conns: &[RedisConn],
    from: u64,
    to: u64,
    add: F,
) -> anyhow::Result<u64>
where
    F: Fn(u64, &mut redis::Pipeline) + Send + Sync,
{
    redis_bulk(conns, to.saturating_sub(from), |i, pipe| {
        add(from + i, pipe)
    })
    .await
}

/// A key on the server saying how many items (`0..n`) a preload loaded, so
/// that a later run — another workload on the same data, a bigger `--keys`
/// — adds only what is missing. Written after the items, so a preload cut
/// short is done again from where the marker says.
pub struct Marker(pub &'static str);

impl Marker {
    /// The count on Rush (0 when unset).
    pub async fn rush(&self, c: &RushConn) -> anyhow::Result<u64> {
        let v = c
            .call(&Get { key: self.0.into() })
            .await
            .map_err(|e| anyhow::anyhow!("reading {}: {}", self.0, e.message))?;
        Ok(count(v.as_deref()))
    }

    pub async fn set_rush(&self, c: &RushConn, n: u64) -> anyhow::Result<()> {
        c.call(&Set::new(self.0, n.to_string()))
            .await
            .map_err(|e| anyhow::anyhow!("writing {}: {}", self.0, e.message))?;
        Ok(())
    }

    /// The count on Redis (0 when unset).
    pub async fn redis(&self, c: &mut RedisConn) -> anyhow::Result<u64> {
        let v: Option<Vec<u8>> = redis::cmd("GET").arg(self.0).query_async(c).await?;
        Ok(count(v.as_deref()))
    }

    pub async fn set_redis(&self, c: &mut RedisConn, n: u64) -> anyhow::Result<()> {
        redis::cmd("SET")
            .arg(self.0)
            .arg(n)
            .query_async::<()>(c)
            .await?;
        Ok(())
    }
}

/// A marker's value as a count; anything else (unset, not a number) is 0.
fn count(v: Option<&[u8]>) -> u64 {
    v.and_then(|b| std::str::from_utf8(b).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Data a preload made that later runs in this process need and cannot
/// derive again: the codes a node issued, which ranges of ids were loaded.
/// Keyed by workload data set and target, so the suite's later runs against
/// the same server (other pipelines, open-loop steps, a bigger key count)
/// find it, and a preload only adds what is missing.
static PRELOADED: Mutex<Option<HashMap<String, Arc<dyn Any + Send + Sync>>>> = Mutex::new(None);

/// Keep `value` under `key` for later runs in this process.
pub fn remember<T: Any + Send + Sync>(key: &str, value: Arc<T>) {
    PRELOADED
        .lock()
        .expect("not poisoned")
        .get_or_insert_with(HashMap::new)
        .insert(key.to_string(), value);
}

/// What [`remember`] kept under `key`, if it is a `T`.
pub fn recall<T: Any + Send + Sync>(key: &str) -> Option<Arc<T>> {
    let any = PRELOADED
        .lock()
        .expect("not poisoned")
        .as_ref()?
        .get(key)?
        .clone();
    any.downcast::<T>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_counts_what_it_says_and_nothing_else() {
        assert_eq!(count(Some(b"10000000")), 10_000_000);
        assert_eq!(count(None), 0);
        assert_eq!(count(Some(b"ten")), 0);
        assert_eq!(count(Some(&[0xff, 0xfe])), 0);
    }

    #[test]
    fn preloaded_data_is_recalled_by_type() {
        remember("test:a", Arc::new(7u64));
        assert_eq!(recall::<u64>("test:a").as_deref(), Some(&7));
        assert!(recall::<String>("test:a").is_none());
        assert!(recall::<u64>("test:b").is_none());
    }
}
