//! `limits`: a flash sale's purchase limits — one order of 1–3 distinct
//! items (from 10,000 SKUs) per operation, for users drawn Zipf(0.8) from
//! `--keys` users (the hottest places thousands of orders in a run), under
//! the seed's rule: **each item at most once a day, at most 5 items a day**
//! (UTC days).
//!
//! **Outcomes.** An order over a limit is answered LIMITED and records
//! nothing. That is the point of the service and, with hot users, a steady
//! share of answers (the hot users reach the daily 5 within seconds), so it
//! is counted as a normal outcome — `denied` in the report, not an error.
//! The skew is chosen so that most orders are allowed (about 70–80 % over a
//! 10-second run at 1M users), keeping the atomic write path the bulk of the
//! work. Both sides see the same order stream and decide alike; a side that
//! gets through more orders in its run sees a slightly larger denied share
//! (hot users fill up), which the report shows per row. Users (and order
//! ids) are fresh per run, so every run starts from empty counts.
//!
//! `limits-held` places the same orders for users whose books are already
//! stored: its preload gives each of `--keys` users (`u:held:N`) one order of
//! one item today, so an order reads a book from storage (most of them
//! cold at 10M users) before it writes. A marker key
//! (`bench:limits:held-users`) says how many users are loaded, so a bigger
//! `--keys` adds only the rest. It is the limits family of the suite's
//! scaling phase; plain `limits` follows it there, fresh users' books
//! written into the large store.
//!
//! Rush: LIMIT_ACQUIRE against the policy `bench-flash` (set in setup with
//! LIMIT_POLICY_SET): every rule checked and every count written atomically
//! in the user's slot, synced before the answer, idempotent by order id.
//!
//! Redis: one EVALSHA of a Lua script per order, keys hashtagged by user
//! (`lim:{USER}:dDAY`, a hash of the day's counts, `t` total and `i:SKU` per
//! item; `lim:{USER}:o:ORDER`, the order id): replay check, all rules
//! checked, then every count incremented, the day hash expiring at the
//! window's end and the order id remembered for a day — atomic, idempotent.

use crate::dist::Dist;
use crate::stats::{OpError, Outcome};
use crate::workload::{
    first_conn, redis_bulk_range, run_nonce, rush_bulk, KeyPicker, Marker, Params, RedisConn,
    RushConn, Workload,
};
use bytes::Bytes;
use rand::RngExt;
use rush_protocol::cmd::{LimitAcquire, LimitPolicySet, OrderItem, PolicyDef, Rule, Scope, Window};
use rush_protocol::ErrorCode;

/// The policy's name on Rush.
pub const POLICY: &str = "bench-flash";
/// Each item at most this many per day, per user.
pub const ITEM_MAX: u64 = 1;
/// At most this many items per day in all, per user.
pub const TOTAL_MAX: u64 = 5;
/// Items orders choose from.
const SKUS: u64 = 10_000;
/// An order id is remembered this long on Redis (Rush: the policy's day).
const ORDER_RETENTION_SECS: u64 = 86_400;
/// `limits-held`: how many users (`0..n`) have a book.
const HELD_MARKER: Marker = Marker("bench:limits:held-users");

/// The order, atomically. KEYS[1] the user's day counts (hash: `t` total,
/// `i:SKU` per item), KEYS[2] the order id. ARGV: window end (unix s), item
/// max, total max, order retention (s), then item, qty pairs. Returns 1
/// allowed, 0 limited, 2 replayed (an order id seen before: nothing counted).
pub const SCRIPT: &str = r#"
if redis.call('EXISTS', KEYS[2]) == 1 then return 2 end
local item_max, total_max = tonumber(ARGV[2]), tonumber(ARGV[3])
local fields = {'t'}
for i = 5, #ARGV, 2 do fields[#fields + 1] = 'i:' .. ARGV[i] end
local have = redis.call('HMGET', KEYS[1], unpack(fields))
local total = 0
for i = 5, #ARGV, 2 do
  local q = tonumber(ARGV[i + 1])
  if (tonumber(have[(i - 5) / 2 + 2]) or 0) + q > item_max then return 0 end
  total = total + q
end
if (tonumber(have[1]) or 0) + total > total_max then return 0 end
for i = 5, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], 'i:' .. ARGV[i], ARGV[i + 1]) end
redis.call('HINCRBY', KEYS[1], 't', total)
redis.call('EXPIREAT', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], table.concat(ARGV, ',', 5), 'EX', ARGV[4])
return 1
"#;

/// The policy set on Rush: the seed's flash-sale rule in UTC days.
pub fn policy() -> PolicyDef {
    let day = Window::Day { tz: "UTC".into() };
    PolicyDef {
        name: POLICY.into(),
        relaxed: false,
        rules: vec![
            Rule {
                name: "item".into(),
                scope: Scope::Item,
                max: ITEM_MAX,
                window: day.clone(),
            },
            Rule {
                name: "total".into(),
                scope: Scope::Total,
                max: TOTAL_MAX,
                window: day,
            },
        ],
    }
}

/// `limits` (users fresh per run), or with `HELD` `limits-held` (users
/// whose books the preload stored).
pub struct Limits<const HELD: bool = false> {
    params: Params,
    /// Order ids of this run, `NONCE-LANE-N`, and (`limits`) its users,
    /// `u:NONCE:N`.
    nonce: String,
    script: redis::Script,
}

pub type LimitsHeld = Limits<true>;

pub struct Lane {
    keys: KeyPicker,
    index: u64,
    n: u64,
}

/// One order: the user, the order id, 1–3 distinct items of quantity 1.
struct Order {
    user: String,
    id: String,
    items: Vec<u64>,
}

/// A held user's key, and the id of its preloaded order.
fn held_user(n: u64) -> (String, String) {
    (format!("u:held:{n:09}"), format!("held-{n}"))
}

/// Redis's keys of an order: the user's day counts and the order id.
fn redis_keys(user: &str, order_id: &str, day: u64) -> [String; 2] {
    [
        format!("lim:{{{user}}}:d{day}"),
        format!("lim:{{{user}}}:o:{order_id}"),
    ]
}

impl<const HELD: bool> Limits<HELD> {
    fn order(&self, lane: &mut Lane) -> Order {
        let u = lane.keys.sampler.sample(&mut lane.keys.rng);
        lane.n += 1;
        let count = lane.keys.rng.random_range(1..=3usize);
        let mut items: Vec<u64> = Vec::with_capacity(count);
        while items.len() < count {
            let sku = lane.keys.rng.random_range(0..SKUS);
            if !items.contains(&sku) {
                items.push(sku);
            }
        }
        Order {
            user: if HELD {
                held_user(u).0
            } else {
                format!("u:{}:{u:09}", self.nonce)
            },
            id: format!("{}-{}-{}", self.nonce, lane.index, lane.n),
            items,
        }
    }
}

fn sku(n: u64) -> String {
    format!("sku-{n:05}")
}

/// The end of the current UTC day, unix seconds, and its day number.
fn day_end() -> (u64, u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let day = now / 86_400;
    ((day + 1) * 86_400, day)
}

impl<const HELD: bool> Workload for Limits<HELD> {
    const NAME: &'static str = if HELD { "limits-held" } else { "limits" };
    const ABOUT: &'static str = if HELD {
        "limits for users whose books are stored: the preload gives each of --keys users one \
         order today, then the same orders as limits, each reading its user's book first"
    } else {
        "One order of 1-3 items for a Zipf(0.8)-hot user: each item at most once a day, at \
         most 5 a day (LIMITED answers are a normal outcome, counted as denied); Redis: one \
         EVALSHA Lua script per order, keys hashtagged by user, order-id idempotency key"
    };
    const READS_PRELOADED: bool = HELD;
    const DIST: Dist = Dist::Zipf(0.8);
    type Lane = Lane;

    fn new(params: &Params) -> anyhow::Result<Self> {
        Ok(Limits {
            params: params.clone(),
            nonce: run_nonce(),
            script: redis::Script::new(SCRIPT),
        })
    }

    fn lane(&self, index: u64) -> Lane {
        Lane {
            keys: KeyPicker::new(&self.params, index),
            index,
            n: 0,
        }
    }

    async fn preload_rush(&self, conns: &[RushConn]) -> anyhow::Result<u64> {
        if !HELD {
            return Ok(0);
        }
        self.setup_rush(conns).await?;
        let c = first_conn(conns)?;
        let have = HELD_MARKER.rush(c).await?;
        let to = self.params.keys;
        if have >= to {
            return Ok(0);
        }
        // A replayed order (a preload cut short before its marker) is
        // answered as before: nothing counted twice.
        rush_bulk(conns, to - have, |i| {
            let (user, order_id) = held_user(have + i);
            LimitAcquire {
                policy: POLICY.into(),
                user: Bytes::from(user),
                order_id,
                items: vec![OrderItem::new(sku((have + i) % SKUS), 1)],
            }
        })
        .await?;
        HELD_MARKER.set_rush(c, to).await?;
        Ok(to - have)
    }

    async fn preload_redis(&self, conns: &[RedisConn]) -> anyhow::Result<u64> {
        if !HELD {
            return Ok(0);
        }
        let mut c = first_conn(conns)?.clone();
        let have = HELD_MARKER.redis(&mut c).await?;
        let to = self.params.keys;
        if have >= to {
            return Ok(0);
        }
        self.script.load_async(&mut c).await?;
        let (end, day) = day_end();
        let hash = self.script.get_hash();
        redis_bulk_range(conns, have, to, |n, pipe| {
            let (user, order_id) = held_user(n);
            pipe.cmd("EVALSHA")
                .arg(hash)
                .arg(2)
                .arg(&redis_keys(&user, &order_id, day))
                .arg(end)
                .arg(ITEM_MAX)
                .arg(TOTAL_MAX)
                .arg(ORDER_RETENTION_SECS)
                .arg(sku(n % SKUS))
                .arg(1)
                .ignore();
        })
        .await?;
        HELD_MARKER.set_redis(&mut c, to).await?;
        Ok(to - have)
    }

    async fn setup_rush(&self, conns: &[RushConn]) -> anyhow::Result<()> {
        let c = first_conn(conns)?;
        c.call(&LimitPolicySet { policy: policy() })
            .await
            .map_err(|e| anyhow::anyhow!("LIMIT_POLICY_SET: {}: {}", e.kind, e.message))?;
        Ok(())
    }

    async fn setup_redis(&self, conns: &[RedisConn]) -> anyhow::Result<()> {
        let mut c = first_conn(conns)?.clone();
        // SCRIPT LOAD once, so every order is an EVALSHA.
        self.script.load_async(&mut c).await?;
        Ok(())
    }

    async fn rush(&self, lane: &mut Lane, conn: &RushConn) -> Result<Outcome, OpError> {
        let o = self.order(lane);
        let req = LimitAcquire {
            policy: POLICY.into(),
            user: Bytes::from(o.user),
            order_id: o.id,
            items: o.items.iter().map(|&s| OrderItem::new(sku(s), 1)).collect(),
        };
        match conn.request(&req).await {
            Ok(r) if r.replayed => Err(OpError::new("REPLAYED", "a fresh order id was replayed")),
            Ok(_) => Ok(Outcome::Done),
            Err(e) if e.code() == Some(ErrorCode::Limited) => Ok(Outcome::Denied),
            Err(e) => Err(e.into()),
        }
    }

    async fn redis(&self, lane: &mut Lane, conn: &mut RedisConn) -> Result<Outcome, OpError> {
        let o = self.order(lane);
        let (end, day) = day_end();
        let mut inv = self.script.prepare_invoke();
        inv.key(&redis_keys(&o.user, &o.id, day))
            .arg(end)
            .arg(ITEM_MAX)
            .arg(TOTAL_MAX)
            .arg(ORDER_RETENTION_SECS);
        for &s in &o.items {
            inv.arg(sku(s)).arg(1);
        }
        match inv.invoke_async::<i64>(conn).await? {
            1 => Ok(Outcome::Done),
            0 => Ok(Outcome::Denied),
            2 => Err(OpError::new("REPLAYED", "a fresh order id was replayed")),
            v => Err(OpError::new("WRONG_VALUE", format!("script answered {v}"))),
        }
    }
}
