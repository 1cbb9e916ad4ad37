//! `links-resolve`: visits to short links with Zipf popularity (a few links
//! shared everywhere, a long tail) over the preloaded links (`--keys`, 1M in
//! the full suite).
//!
//! Rush: LINK_RESOLVE (counts the visit, slides the expiry at most once per
//! `links.slide_interval_secs`). Redis: `GETEX l:CODE EX 2592000` — the read
//! and the sliding expiry in one command.
//!
//! Preload: Rush issues the codes (LINK_SHORTEN_BATCH, 1000 links per
//! request), and the bench keeps them for later runs in this process;
//! Redis gets the same links under codes of ID ranges reserved from the
//! shared counter (`INCRBY link:seq N`, then pipelined `SET … EX`), as
//! `links-shorten` makes them. A bigger `--keys` later adds only the missing
//! links (the suite's 1M → 10M scaling rows).

use crate::dist::Dist;
use crate::stats::{OpError, Outcome};
use crate::workload::{
    first_conn, recall, redis_bulk_range, remember, rush_bulk_collect, KeyPicker, Params,
    RedisConn, RushConn, Workload,
};
use crate::workloads::links_shorten::{redis_link_key, url, CODE_LEN, REDIS_SEQ, TTL_SECS};
use anyhow::{bail, Context};
use rush_protocol::cmd::{BatchShortenItem, LinkResolve, LinkShortenBatch};
use rush_protocol::parts_slot;
use std::sync::Arc;

/// Links per LINK_SHORTEN_BATCH while preloading (the protocol's most)…
const BATCH: u64 = 1000;
/// …but at least this many batches, so a small preload still spreads its
/// links over slots (a batch's codes are all issued in one slot).
const MIN_BATCHES: u64 = 64;
/// URL path tag of preloaded links (`https://shop.example.com/p/…`).
const TAG: &str = "p";

/// Codes a Rush node issued to the preload, `CODE_LEN` bytes each, in link
/// order (8 bytes a link at 1M, not a `String` each).
pub struct RushCodes {
    bytes: Vec<u8>,
}

impl RushCodes {
    pub fn len(&self) -> u64 {
        (self.bytes.len() / CODE_LEN) as u64
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn get(&self, i: u64) -> &[u8] {
        let at = i as usize * CODE_LEN;
        &self.bytes[at..at + CODE_LEN]
    }
}

/// The Redis IDs of preloaded links: ranges reserved from `link:seq`, in
/// link order.
pub struct RedisIds {
    ranges: Vec<(u64, u64)>,
}

impl RedisIds {
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|r| r.1).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn id(&self, mut i: u64) -> u64 {
        for &(start, n) in &self.ranges {
            if i < n {
                return start + i;
            }
            i -= n;
        }
        unreachable!("index within the loaded links")
    }
}

fn rush_key(target: &str) -> String {
    format!("links-resolve:rush:{target}")
}

fn redis_key(target: &str) -> String {
    format!("links-resolve:redis:{target}")
}

pub struct LinksResolve {
    params: Params,
    /// Set by setup from what the preload left (this process).
    rush_codes: std::sync::OnceLock<Arc<RushCodes>>,
    redis_ids: std::sync::OnceLock<Arc<RedisIds>>,
}

pub struct Lane {
    keys: KeyPicker,
    codes: Option<Arc<RushCodes>>,
    ids: Option<Arc<RedisIds>>,
    key: Vec<u8>,
}

impl LinksResolve {
    /// Preload (if needed) and remember the links on Rush; returns how many
    /// were added.
    pub async fn load_rush(&self, conns: &[RushConn]) -> anyhow::Result<u64> {
        let have = recall::<RushCodes>(&rush_key(&self.params.target));
        let from = have.as_ref().map_or(0, |c| c.len());
        let to = self.params.keys;
        if from >= to {
            return Ok(0);
        }
        let size = self.params.value_size.max(48);
        let batch = (to / MIN_BATCHES).clamp(1, BATCH);
        let replies = rush_bulk_collect(conns, from / batch, to.div_ceil(batch), batch, |b| {
            let first = b * batch;
            let last = (first + batch).min(to);
            let mut u = String::new();
            let items: Vec<BatchShortenItem> = (first.max(from)..last)
                .map(|k| {
                    url(&mut u, TAG, k, size);
                    BatchShortenItem {
                        url: u.clone(),
                        length: CODE_LEN as u8,
                        ttl_ms: Some(TTL_SECS * 1000),
                        ..BatchShortenItem::default()
                    }
                })
                .collect();
            // The reference client's choice: the slot of (account, first URL).
            let slot = parts_slot(&[&b""[..], items[0].url.as_bytes()]);
            LinkShortenBatch {
                slot,
                account: Default::default(),
                items,
            }
        })
        .await?;
        let mut bytes = have.map_or_else(Vec::new, |c| c.bytes.clone());
        bytes.reserve((to - from) as usize * CODE_LEN);
        for r in replies {
            for l in r.links {
                if l.code.len() != CODE_LEN {
                    bail!("preload: code {:?} is not {CODE_LEN} characters", l.code);
                }
                bytes.extend_from_slice(l.code.as_bytes());
            }
        }
        let codes = RushCodes { bytes };
        anyhow::ensure!(
            codes.len() == to,
            "preload: {} codes for {to} links",
            codes.len()
        );
        remember(&rush_key(&self.params.target), Arc::new(codes));
        Ok(to - from)
    }

    /// Preload (if needed) and remember the links on Redis.
    pub async fn load_redis(&self, conns: &[RedisConn]) -> anyhow::Result<u64> {
        let have = recall::<RedisIds>(&redis_key(&self.params.target));
        let from = have.as_ref().map_or(0, |h| h.len());
        let to = self.params.keys;
        if from >= to {
            return Ok(0);
        }
        let n = to - from;
        let mut c = first_conn(conns)?.clone();
        let end: u64 = redis::cmd("INCRBY")
            .arg(REDIS_SEQ)
            .arg(n)
            .query_async(&mut c)
            .await?;
        let start = end - n;
        let size = self.params.value_size.max(48);
        redis_bulk_range(conns, from, to, |k, pipe| {
            let mut key = Vec::with_capacity(16);
            redis_link_key(&mut key, start + (k - from));
            let mut u = String::new();
            url(&mut u, TAG, k, size);
            pipe.cmd("SET")
                .arg(key)
                .arg(u)
                .arg("EX")
                .arg(TTL_SECS)
                .ignore();
        })
        .await?;
        let mut ranges = have.map_or_else(Vec::new, |h| h.ranges.clone());
        ranges.push((start, n));
        remember(
            &redis_key(&self.params.target),
            Arc::new(RedisIds { ranges }),
        );
        Ok(n)
    }

    /// What the preload of this process left under `key`: all `--keys`
    /// links must be known.
    fn preloaded<T: std::any::Any + Send + Sync>(
        &self,
        key: &str,
        len: fn(&T) -> u64,
    ) -> anyhow::Result<Arc<T>> {
        let found = recall::<T>(key).with_context(|| {
            format!(
                "{}: no preloaded links for {} in this process: run with --preload",
                Self::NAME,
                self.params.target
            )
        })?;
        anyhow::ensure!(
            len(&found) >= self.params.keys,
            "{} links preloaded, {} asked: run with --preload",
            len(&found),
            self.params.keys
        );
        Ok(found)
    }

    /// The links this run reads on Rush.
    pub fn setup_rush_links(&self) -> anyhow::Result<()> {
        let codes = self.preloaded(&rush_key(&self.params.target), RushCodes::len)?;
        let _ = self.rush_codes.set(codes);
        Ok(())
    }

    /// The links this run reads on Redis.
    pub fn setup_redis_links(&self) -> anyhow::Result<()> {
        let ids = self.preloaded(&redis_key(&self.params.target), RedisIds::len)?;
        let _ = self.redis_ids.set(ids);
        Ok(())
    }

    fn check(&self, target_len: Option<usize>) -> Result<Outcome, OpError> {
        let want = self.params.value_size.max(48);
        match target_len {
            Some(n) if n == want => Ok(Outcome::Done),
            Some(n) => Err(OpError::new(
                "WRONG_VALUE",
                format!("preloaded a {want}-byte URL, resolved {n} bytes"),
            )),
            None => Err(OpError::new("MISSING", "a preloaded link was not found")),
        }
    }
}

impl Workload for LinksResolve {
    const NAME: &'static str = "links-resolve";
    const ABOUT: &'static str = "Resolve a short link, Zipf popularity (s = 0.99) over the \
         preloaded links (counts the visit, slides the 30-day expiry); Redis: GETEX l:CODE EX 30d";
    const READS_PRELOADED: bool = true;
    const SWEEP: bool = true;
    const DIST: Dist = Dist::Zipf(0.99);
    type Lane = Lane;

    fn new(params: &Params) -> anyhow::Result<Self> {
        Ok(LinksResolve {
            params: params.clone(),
            rush_codes: Default::default(),
            redis_ids: Default::default(),
        })
    }

    fn lane(&self, index: u64) -> Lane {
        Lane {
            keys: KeyPicker::new(&self.params, index),
            codes: self.rush_codes.get().cloned(),
            ids: self.redis_ids.get().cloned(),
            key: Vec::with_capacity(16),
        }
    }

    async fn preload_rush(&self, conns: &[RushConn]) -> anyhow::Result<u64> {
        self.load_rush(conns).await
    }

    async fn preload_redis(&self, conns: &[RedisConn]) -> anyhow::Result<u64> {
        self.load_redis(conns).await
    }

    async fn setup_rush(&self, _conns: &[RushConn]) -> anyhow::Result<()> {
        self.setup_rush_links()
    }

    async fn setup_redis(&self, _conns: &[RedisConn]) -> anyhow::Result<()> {
        self.setup_redis_links()
    }

    async fn rush(&self, lane: &mut Lane, conn: &RushConn) -> Result<Outcome, OpError> {
        let k = lane.keys.sampler.sample(&mut lane.keys.rng);
        let codes = lane.codes.as_ref().expect("set up");
        // Codes are base62 ASCII.
        let code = String::from_utf8_lossy(codes.get(k)).into_owned();
        match conn.request(&LinkResolve::new(code)).await {
            Ok(r) => self.check(Some(r.target.len())),
            Err(e) if e.code() == Some(rush_protocol::ErrorCode::NotFound) => self.check(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn redis(&self, lane: &mut Lane, conn: &mut RedisConn) -> Result<Outcome, OpError> {
        let k = lane.keys.sampler.sample(&mut lane.keys.rng);
        let id = lane.ids.as_ref().expect("set up").id(k);
        redis_link_key(&mut lane.key, id);
        let found: Option<Vec<u8>> = redis::cmd("GETEX")
            .arg(&lane.key[..])
            .arg("EX")
            .arg(TTL_SECS)
            .query_async(conn)
            .await?;
        self.check(found.map(|v| v.len()))
    }
}
