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

use super::envelopes::SCRIPT;
use crate::stats::{OpError, Outcome};
use crate::workload::{
    recall, redis_bulk_range, remember, run_nonce, rush_bulk_collect, KeyPicker, Marker, Params,
    RedisConn, RushConn, Workload,
};
use bytes::Bytes;
use rand::RngExt;
use rush_protocol::cmd::{EnvelopeCreate, EnvelopeGrab, EnvelopeMode};
use rush_protocol::ErrorCode;
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

    /// The next grab: an envelope and a new user.
    fn grab(&self, lane: &mut Lane) -> (u64, String) {
        let n = lane.keys.sampler.sample(&mut lane.keys.rng);
        lane.n += 1;
        (n, format!("g:{}:{}:{}", self.nonce, lane.index, lane.n))
    }

    fn check_amount(cents: u64) -> Result<Outcome, OpError> {
        if cents == 0 || cents > CENTS {
            return Err(OpError::new(
                "WRONG_VALUE",
                format!("granted {cents} cents"),
            ));
        }
        Ok(Outcome::Done)
    }
}

/// The error for ids this process does not know.
fn unknown_ids(stored: u64, known: usize) -> anyhow::Error {
    anyhow::anyhow!(
        "envelopes-held: the server holds {stored} held envelopes but this process knows the \
         ids of {known} (Rush issues them; only the process that created them knows them): \
         run it on an empty server, or in the same suite run as the preload"
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
        let c = conns
            .first()
            .ok_or_else(|| anyhow::anyhow!("no connection"))?;
        let stored = MARKER.rush(c).await?;
        let known = recall::<HeldIds>(&self.remembered_as());
        let have = known.as_ref().map_or(0, |k| k.0.len());
        if stored != have as u64 {
            return Err(unknown_ids(stored, have));
        }
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
        let mut c = conns
            .first()
            .ok_or_else(|| anyhow::anyhow!("no connection"))?
            .clone();
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
        let c = conns
            .first()
            .ok_or_else(|| anyhow::anyhow!("no connection"))?;
        let stored = MARKER.rush(c).await?;
        let known = recall::<HeldIds>(&self.remembered_as());
        let have = known.as_ref().map_or(0, |k| k.0.len());
        match known {
            Some(ids) if have as u64 == stored && stored >= self.params.keys => {
                let _ = self.ids.set(ids);
                Ok(())
            }
            _ if stored != have as u64 => Err(unknown_ids(stored, have)),
            _ => Err(anyhow::anyhow!(
                "envelopes-held: {stored} envelopes stored, {} wanted: run it with --preload",
                self.params.keys
            )),
        }
    }

    async fn setup_redis(&self, conns: &[RedisConn]) -> anyhow::Result<()> {
        let mut c = conns
            .first()
            .ok_or_else(|| anyhow::anyhow!("no connection"))?
            .clone();
        let stored = MARKER.redis(&mut c).await?;
        if stored < self.params.keys {
            return Err(anyhow::anyhow!(
                "envelopes-held: {stored} envelopes stored, {} wanted: run it with --preload",
                self.params.keys
            ));
        }
        self.script.load_async(&mut c).await?;
        Ok(())
    }

    async fn rush(&self, lane: &mut Lane, conn: &RushConn) -> Result<Outcome, OpError> {
        let ids = lane.ids.clone().expect("set up");
        let (n, user) = self.grab(lane);
        match conn
            .request(&EnvelopeGrab {
                id: ids.0[n as usize],
                user: Bytes::from(user),
            })
            .await
        {
            Ok(r) if r.repeated => Err(OpError::new("REPEATED", "a new user grabbed twice")),
            Ok(r) => Self::check_amount(r.amount_cents),
            Err(e) if e.code() == Some(ErrorCode::Empty) => Ok(Outcome::Denied),
            Err(e) => Err(e.into()),
        }
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
        match got {
            0 => Ok(Outcome::Denied),
            c if c > 0 => Self::check_amount(c as u64),
            -1 => Err(OpError::new("EXPIRED", "envelope expired")),
            -2 => Err(OpError::new("NOT_FOUND", "no such envelope")),
            -3 => Err(OpError::new("REPEATED", "a new user grabbed twice")),
            v => Err(OpError::new("WRONG_VALUE", format!("script answered {v}"))),
        }
    }
}
