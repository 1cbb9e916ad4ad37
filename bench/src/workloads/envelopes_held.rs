//! `envelopes-held`: grabs of envelopes already stored — a chat app's many
//! small envelopes rather than a campaign's few large ones. The preload
//! creates `--keys` envelopes of [`SHARES`] shares ([`CENTS`] cents, random
//! split, a day to live); then every grab, each by a new user, goes to an
//! envelope drawn uniformly from them, so at 10M envelopes almost every grab
//! meets an envelope whose books are on disk, not in memory. It is the
//! envelopes family of the suite's scaling phase; the `envelopes` storm
//! follows it there, its own envelopes created in the large store.
//!
//! A marker key (`bench:envelopes:held`) says how many envelopes are stored,
//! so a bigger `--keys` adds only the rest. Rush issues envelope ids itself:
//! they are remembered in this process (as links-resolve remembers its
//! codes), and a server holding held envelopes this process did not create
//! is refused with an error rather than guessed at.
//!
//! Rush: ENVELOPE_GRAB (serialized on the envelope's shard, exactly once per
//! user, synced before the answer). Redis: the `envelopes` workload's Lua
//! script, one EVALSHA per grab, on hashes `env:{held.N}`.

use super::envelopes::{rush_answer, script_answer, SCRIPT};
use crate::stats::{OpError, Outcome};
use crate::workload::{
    first_conn, recall, redis_bulk_range, remember, run_nonce, rush_bulk_collect, KeyPicker,
    Marker, Params, RedisConn, RushConn, Workload,
};
use bytes::Bytes;
use rand::RngExt;
use rush_protocol::cmd::{EnvelopeCreate, EnvelopeGrab, EnvelopeMode};
use std::sync::{Arc, OnceLock};

/// Shares per held envelope.
pub const SHARES: u32 = 100;
/// Cents per held envelope (100.00).
pub const CENTS: u64 = 10_000;
/// Held envelopes live a day (Rush's default) on both sides.
const EXPIRES_MS: u64 = 86_400_000;
/// How many held envelopes (`0..n`) are stored.
const MARKER: Marker = Marker("bench:envelopes:held");

/// The ids Rush issued for held envelopes `0..len`, in order.
pub struct HeldIds(pub Vec<u64>);

pub struct EnvelopesHeld {
    params: Params,
    /// Grabbers of this run are `g:NONCE:LANE:N`: new users every run.
    nonce: String,
    /// Rush: the ids of the envelopes a run grabs from (set up per run).
    ids: OnceLock<Arc<HeldIds>>,
    script: redis::Script,
}

pub struct Lane {
    keys: KeyPicker,
    index: u64,
    n: u64,
    ids: Option<Arc<HeldIds>>,
}

/// Held envelope `n`'s Redis key (its grabs: the key + `:g`).
fn redis_key(n: u64) -> String {
    format!("env:{{held.{n}}}")
}

impl EnvelopesHeld {
    /// Where this process keeps the ids it created on the target.
    fn remembered_as(&self) -> String {
        format!("{}:rush:{}", Self::NAME, self.params.target)
    }

    /// How many held envelopes the server says it stores, and the ids this
    /// process knows of them; an error when the two disagree.
    async fn held(&self, c: &RushConn) -> anyhow::Result<(u64, Option<Arc<HeldIds>>)> {
        let stored = MARKER.rush(c).await?;
        let known = recall::<HeldIds>(&self.remembered_as());
        let have = known.as_ref().map_or(0, |k| k.0.len());
        if stored != have as u64 {
            return Err(anyhow::anyhow!(
                "envelopes-held: the server holds {stored} held envelopes but this process \
                 knows the ids of {have} (Rush issues them; only the process that created them \
                 knows them): run it on an empty server, or in the same suite run as the preload"
            ));
        }
        Ok((stored, known))
    }

    /// The next grab: an envelope and a new user.
    fn grab(&self, lane: &mut Lane) -> (u64, String) {
        let n = lane.keys.sampler.sample(&mut lane.keys.rng);
        lane.n += 1;
        (n, format!("g:{}:{}:{}", self.nonce, lane.index, lane.n))
    }
}

/// Fewer envelopes stored than the run grabs from.
fn not_preloaded(stored: u64, wanted: u64) -> anyhow::Error {
    anyhow::anyhow!(
        "envelopes-held: {stored} envelopes stored, {wanted} wanted: run it with --preload"
    )
}

impl Workload for EnvelopesHeld {
    const NAME: &'static str = "envelopes-held";
    const ABOUT: &'static str = "Grab a stored envelope: the preload creates --keys envelopes of \
         100 shares, then every grab, by a new user, goes to one of them drawn uniformly (most \
         of them cold at 10M); Redis: the envelopes Lua script on stored hashes";
    const READS_PRELOADED: bool = true;
    type Lane = Lane;

    fn new(params: &Params) -> anyhow::Result<Self> {
        Ok(EnvelopesHeld {
            params: params.clone(),
            nonce: run_nonce(),
            ids: OnceLock::new(),
            script: redis::Script::new(SCRIPT),
        })
    }

    fn lane(&self, index: u64) -> Lane {
        Lane {
            keys: KeyPicker::new(&self.params, index),
            index,
            n: 0,
            ids: self.ids.get().cloned(),
        }
    }

    async fn preload_rush(&self, conns: &[RushConn]) -> anyhow::Result<u64> {
        let c = first_conn(conns)?;
        let (stored, known) = self.held(c).await?;
        let to = self.params.keys;
        if stored >= to {
            return Ok(0);
        }
        let created = rush_bulk_collect(conns, stored, to, 1, |n| EnvelopeCreate {
            sender: Bytes::from(format!("s:held:{n:09}")),
            total_cents: CENTS,
            count: SHARES,
            mode: EnvelopeMode::Random,
            expires_in_ms: EXPIRES_MS,
            idempotency_key: None,
        })
        .await?;
        let mut ids = known.map_or_else(Vec::new, |k| k.0.clone());
        ids.extend(created.into_iter().map(|r| r.id));
        remember(&self.remembered_as(), Arc::new(HeldIds(ids)));
        MARKER.set_rush(c, to).await?;
        Ok(to - stored)
    }

    async fn preload_redis(&self, conns: &[RedisConn]) -> anyhow::Result<u64> {
        let mut c = first_conn(conns)?.clone();
        let have = MARKER.redis(&mut c).await?;
        let to = self.params.keys;
        if have >= to {
            return Ok(0);
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        redis_bulk_range(conns, have, to, |n, pipe| {
            pipe.cmd("HSET")
                .arg(redis_key(n))
                .arg("rem")
                .arg(CENTS)
                .arg("left")
                .arg(SHARES)
                .arg("exp")
                .arg(now_ms + EXPIRES_MS)
                .ignore();
        })
        .await?;
        MARKER.set_redis(&mut c, to).await?;
        Ok(to - have)
    }

    async fn setup_rush(&self, conns: &[RushConn]) -> anyhow::Result<()> {
        let (stored, known) = self.held(first_conn(conns)?).await?;
        match known {
            Some(ids) if stored >= self.params.keys => {
                let _ = self.ids.set(ids);
                Ok(())
            }
            _ => Err(not_preloaded(stored, self.params.keys)),
        }
    }

    async fn setup_redis(&self, conns: &[RedisConn]) -> anyhow::Result<()> {
        let mut c = first_conn(conns)?.clone();
        let stored = MARKER.redis(&mut c).await?;
        if stored < self.params.keys {
            return Err(not_preloaded(stored, self.params.keys));
        }
        self.script.load_async(&mut c).await?;
        Ok(())
    }

    async fn rush(&self, lane: &mut Lane, conn: &RushConn) -> Result<Outcome, OpError> {
        let ids = lane.ids.clone().expect("set up");
        let (n, user) = self.grab(lane);
        let answer = conn
            .request(&EnvelopeGrab {
                id: ids.0[n as usize],
                user: Bytes::from(user),
            })
            .await;
        rush_answer(answer, CENTS)
    }

    async fn redis(&self, lane: &mut Lane, conn: &mut RedisConn) -> Result<Outcome, OpError> {
        let (n, user) = self.grab(lane);
        let key = redis_key(n);
        let random: u32 = lane.keys.rng.random();
        let got: i64 = self
            .script
            .key(&key)
            .key(format!("{key}:g"))
            .arg(user)
            .arg(random)
            .invoke_async(conn)
            .await?;
        script_answer(got, CENTS)
    }
}
