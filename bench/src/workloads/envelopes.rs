//! `envelopes`: a red-envelope storm. Before the clock starts, the run
//! creates enough envelopes of 10,000 shares (10,000.00 in cents, random
//! double-average split: a campaign's envelope, not a chat's); then every
//! lane grabs, each grab by a new user, all on the [`HOT`] envelopes open at
//! the moment (at 50 connections × 16 in flight, ~100 grabbers wait on each
//! at once). When a grab finds its envelope EMPTY, that envelope's stream
//! moves on to its next envelope; the grabs that raced the last share (about
//! one per share in flight on it: ~1 %) are answered EMPTY — a normal
//! outcome, counted as `denied`, not an error.
//!
//! Rush: ENVELOPE_GRAB (every grab of an envelope serialized on its shard,
//! exactly once per user, synced before the answer).
//!
//! Redis: one EVALSHA of a Lua script per grab: duplicate check (the
//! envelope's grabs hash, user → cents), expiry check (server TIME), the
//! double-average amount (from a random number the client passes, so the
//! script stays deterministic), the grab recorded and the envelope's books
//! updated — atomic. Both sides are durable per grab only with Redis's
//! `appendfsync always`, which the issue's target compares against. Redis's
//! side has no refund of expired envelopes (that would be a sweeper job).

use crate::stats::{OpError, Outcome};
use crate::workload::{
    first_conn, redis_bulk, run_nonce, rush_bulk_collect, Params, RedisConn, RushConn, Workload,
};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use rush_client::ClientError;
use rush_protocol::cmd::{EnvelopeCreate, EnvelopeGrab, EnvelopeGrabReply, EnvelopeMode};
use rush_protocol::ErrorCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Envelopes open for grabs at any moment.
pub const HOT: usize = 8;
/// Shares per envelope.
pub const SHARES: u32 = 10_000;
/// Cents per share on average.
const CENTS_PER_SHARE: u64 = 100;
/// Envelopes live a day (Rush's default) on both sides.
const EXPIRES_MS: u64 = 86_400_000;
/// Most envelopes one stream prepares (bounds setup on a fast machine).
const MAX_PER_STREAM: u64 = 5000;

/// One grab, atomically. KEYS[1] the envelope (hash: rem, left, exp ms),
/// KEYS[2] its grabs (user → cents). ARGV[1] the user, ARGV[2] a random
/// number in 0..2^32. Returns the cents granted (≥ 1), 0 empty, -1 expired,
/// -2 no such envelope, -3 this user grabbed before.
pub const SCRIPT: &str = r#"
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return -3 end
local e = redis.call('HMGET', KEYS[1], 'rem', 'left', 'exp')
if not e[1] then return -2 end
local t = redis.call('TIME')
if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) >= tonumber(e[3]) then return -1 end
local rem, left = tonumber(e[1]), tonumber(e[2])
if left <= 0 then return 0 end
local amt = rem
if left > 1 then
  local hi = math.floor(2 * rem / left)
  amt = 1 + math.floor(tonumber(ARGV[2]) / 4294967296 * hi)
  if amt > hi then amt = hi end
  local cap = rem - (left - 1)
  if amt > cap then amt = cap end
end
redis.call('HSETNX', KEYS[2], ARGV[1], amt)
redis.call('HSET', KEYS[1], 'rem', rem - amt, 'left', left - 1)
return amt
"#;

/// The envelopes of one run: `HOT` streams of `per` envelopes each; stream
/// `j` grabs its envelope `gens[j]` until that one is empty.
pub struct Pool {
    /// Rush: envelope ids; Redis: unused (keys are `env:{NONCE.INDEX}`).
    ids: Vec<u64>,
    per: usize,
    gens: [AtomicUsize; HOT],
}

impl Pool {
    fn new(ids: Vec<u64>, per: usize) -> Pool {
        Pool {
            ids,
            per,
            gens: Default::default(),
        }
    }

    /// The envelope (index) stream `j` grabs now, and its generation.
    fn current(&self, j: usize) -> (usize, usize) {
        let g = self.gens[j].load(Ordering::Relaxed);
        (j * self.per + g.min(self.per - 1), g)
    }

    /// Stream `j`'s envelope of generation `g` is empty: move on (once).
    fn emptied(&self, j: usize, g: usize) {
        let _ = self.gens[j].compare_exchange(g, g + 1, Ordering::Relaxed, Ordering::Relaxed);
    }
}

pub struct Envelopes {
    params: Params,
    nonce: String,
    pool: OnceLock<Arc<Pool>>,
    script: redis::Script,
}

pub struct Lane {
    rng: SmallRng,
    index: u64,
    n: u64,
    pool: Option<Arc<Pool>>,
}

impl Envelopes {
    /// Envelopes per stream: enough shares for every operation the run may
    /// send, and one spare.
    fn per_stream(&self) -> u64 {
        (self.params.max_ops / (HOT as u64 * SHARES as u64) + 2).min(MAX_PER_STREAM)
    }

    fn redis_key(&self, index: usize) -> String {
        format!("env:{{{}.{index}}}", self.nonce)
    }

    fn user(lane: &mut Lane) -> String {
        lane.n += 1;
        format!("g{}-{}", lane.index, lane.n)
    }
}

/// What a grab by a new user got from Rush, for an envelope of `total`
/// cents: done with 1..=`total` cents, denied when EMPTY.
pub fn rush_answer(
    answer: Result<EnvelopeGrabReply, ClientError>,
    total: u64,
) -> Result<Outcome, OpError> {
    match answer {
        Ok(r) if r.repeated => Err(OpError::new("REPEATED", "a new user grabbed twice")),
        Ok(r) => granted(r.amount_cents, total),
        Err(e) if e.code() == Some(ErrorCode::Empty) => Ok(Outcome::Denied),
        Err(e) => Err(e.into()),
    }
}

/// The same from [`SCRIPT`]'s answer.
pub fn script_answer(got: i64, total: u64) -> Result<Outcome, OpError> {
    match got {
        0 => Ok(Outcome::Denied),
        c if c > 0 => granted(c as u64, total),
        -1 => Err(OpError::new("EXPIRED", "envelope expired")),
        -2 => Err(OpError::new("NOT_FOUND", "no such envelope")),
        -3 => Err(OpError::new("REPEATED", "a new user grabbed twice")),
        v => Err(OpError::new("WRONG_VALUE", format!("script answered {v}"))),
    }
}

fn granted(cents: u64, total: u64) -> Result<Outcome, OpError> {
    if cents == 0 || cents > total {
        return Err(OpError::new(
            "WRONG_VALUE",
            format!("granted {cents} cents"),
        ));
    }
    Ok(Outcome::Done)
}

impl Workload for Envelopes {
    const NAME: &'static str = "envelopes";
    const ABOUT: &'static str = "Grab a red envelope: 8 hot 10,000-share envelopes at a time, \
         every grab a new user (EMPTY after the last share is a normal outcome, denied); \
         Redis: one EVALSHA Lua script per grab with a duplicate check";
    const SWEEP: bool = true;
    type Lane = Lane;

    fn new(params: &Params) -> anyhow::Result<Self> {
        Ok(Envelopes {
            params: params.clone(),
            nonce: run_nonce(),
            pool: OnceLock::new(),
            script: redis::Script::new(SCRIPT),
        })
    }

    fn lane(&self, index: u64) -> Lane {
        Lane {
            rng: SmallRng::seed_from_u64(0xe7e1_0000 ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            index,
            n: 0,
            pool: self.pool.get().cloned(),
        }
    }

    async fn setup_rush(&self, conns: &[RushConn]) -> anyhow::Result<()> {
        let per = self.per_stream();
        let replies = rush_bulk_collect(conns, 0, HOT as u64 * per, 1, |i| EnvelopeCreate {
            sender: Bytes::from(format!("s:{}:{i}", self.nonce)),
            total_cents: SHARES as u64 * CENTS_PER_SHARE,
            count: SHARES,
            mode: EnvelopeMode::Random,
            expires_in_ms: EXPIRES_MS,
            idempotency_key: None,
        })
        .await?;
        let ids = replies.into_iter().map(|r| r.id).collect();
        let _ = self.pool.set(Arc::new(Pool::new(ids, per as usize)));
        Ok(())
    }

    async fn setup_redis(&self, conns: &[RedisConn]) -> anyhow::Result<()> {
        let per = self.per_stream();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        redis_bulk(conns, HOT as u64 * per, |i, pipe| {
            pipe.cmd("HSET")
                .arg(self.redis_key(i as usize))
                .arg("rem")
                .arg(SHARES as u64 * CENTS_PER_SHARE)
                .arg("left")
                .arg(SHARES)
                .arg("exp")
                .arg(now_ms + EXPIRES_MS)
                .ignore();
        })
        .await?;
        let mut c = first_conn(conns)?.clone();
        self.script.load_async(&mut c).await?;
        let _ = self.pool.set(Arc::new(Pool::new(Vec::new(), per as usize)));
        Ok(())
    }

    async fn rush(&self, lane: &mut Lane, conn: &RushConn) -> Result<Outcome, OpError> {
        let pool = lane.pool.clone().expect("set up");
        let j = lane.rng.random_range(0..HOT);
        let (at, g) = pool.current(j);
        let user = Self::user(lane);
        let answer = conn
            .request(&EnvelopeGrab {
                id: pool.ids[at],
                user: Bytes::from(user),
            })
            .await;
        let outcome = rush_answer(answer, SHARES as u64 * CENTS_PER_SHARE);
        if matches!(outcome, Ok(Outcome::Denied)) {
            pool.emptied(j, g);
        }
        outcome
    }

    async fn redis(&self, lane: &mut Lane, conn: &mut RedisConn) -> Result<Outcome, OpError> {
        let pool = lane.pool.clone().expect("set up");
        let j = lane.rng.random_range(0..HOT);
        let (at, g) = pool.current(j);
        let user = Self::user(lane);
        let key = self.redis_key(at);
        let random: u32 = lane.rng.random();
        let got: i64 = self
            .script
            .key(&key)
            .key(format!("{key}:g"))
            .arg(user)
            .arg(random)
            .invoke_async(conn)
            .await?;
        let outcome = script_answer(got, SHARES as u64 * CENTS_PER_SHARE);
        if matches!(outcome, Ok(Outcome::Denied)) {
            pool.emptied(j, g);
        }
        outcome
    }
}
