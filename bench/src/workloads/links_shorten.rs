//! `links-shorten`: one user shortens one URL — one LINK_SHORTEN per
//! operation (7-character code, 30-day sliding TTL, a 100-byte URL).
//!
//! Rush issues the code from the slot's in-memory ID segment and acknowledges
//! once the link is synced (group commit).
//!
//! Redis, the way it is done at scale: the client reserves IDs in segments
//! (`INCRBY link:seq 1000`, one round trip per thousand links per lane),
//! scrambles each ID into a 7-character base62 code with a bijection (so
//! codes are unique and not guessable in order), and stores the link with
//! `SET l:CODE URL EX 2592000` — one round trip per shorten except
//! reservations, whose cost is counted in the shorten that triggers it.

use crate::stats::{OpError, Outcome};
use crate::workload::{Params, RedisConn, RushConn, Workload};
use rush_protocol::cmd::LinkShorten;

/// Links live 30 days after their last visit, on both sides.
pub const TTL_SECS: u64 = 30 * 86_400;
/// Generated codes are this long on both sides.
pub const CODE_LEN: usize = 7;
/// Redis key prefix of a link (`l:` + code: short keys are a Redis habit).
pub const REDIS_PREFIX: &str = "l:";
/// The Redis ID counter every client reserves segments from.
pub const REDIS_SEQ: &str = "link:seq";
/// IDs a Redis client reserves per INCRBY.
pub const REDIS_SEGMENT: u64 = 1000;

/// 62^7: the 7-character code space.
const SPACE: u64 = 3_521_614_606_208;
/// Multiplier of the Redis side's code bijection `id → (id·A + B) mod 62^7`:
/// coprime to 62 (odd, not a multiple of 31), so distinct IDs give distinct
/// codes; large, so neighbouring IDs give unrelated codes.
const SCRAMBLE_A: u64 = 2_305_843_009_213;
// Coprime with 62^7 = 2^7 · 31^7, so the affine map is a bijection.
const _: () = assert!(!SCRAMBLE_A.is_multiple_of(2) && !SCRAMBLE_A.is_multiple_of(31));
const SCRAMBLE_B: u64 = 1_234_567_890_123;

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// The Redis side's code for ID `id`, as its key `l:CODE`, into `buf`.
pub fn redis_link_key(buf: &mut Vec<u8>, id: u64) {
    let mut v = ((id as u128 * SCRAMBLE_A as u128 + SCRAMBLE_B as u128) % SPACE as u128) as u64;
    buf.clear();
    buf.extend_from_slice(REDIS_PREFIX.as_bytes());
    let start = buf.len();
    buf.resize(start + CODE_LEN, b'0');
    for i in (0..CODE_LEN).rev() {
        buf[start + i] = BASE62[(v % 62) as usize];
        v /= 62;
    }
}

/// A URL of exactly `size` bytes (at least 48) naming `tag` and `n`, like a
/// product page with tracking parameters: `https://shop.example.com/item/…`.
pub fn url(buf: &mut String, tag: &str, n: u64, size: usize) {
    use std::fmt::Write;
    buf.clear();
    let _ = write!(
        buf,
        "https://shop.example.com/{tag}/{n:012}?utm_source=share&x="
    );
    while buf.len() < size {
        buf.push(char::from(b'a' + (buf.len() % 26) as u8));
    }
    buf.truncate(size.max(48));
}

pub struct LinksShorten {
    params: Params,
}

pub struct Lane {
    index: u64,
    /// Shortens this lane made (numbers its URLs).
    n: u64,
    url: String,
    key: Vec<u8>,
    /// Redis: the lane's reserved IDs `next..end`.
    next: u64,
    end: u64,
}

impl LinksShorten {
    fn next_url(&self, lane: &mut Lane) {
        lane.n += 1;
        url(
            &mut lane.url,
            "item",
            (lane.index << 32) | lane.n,
            self.params.value_size.max(48),
        );
    }
}

impl Workload for LinksShorten {
    const NAME: &'static str = "links-shorten";
    const ABOUT: &'static str = "Shorten one 100-byte URL (7-character code, 30-day sliding TTL); \
         Redis: client-reserved ID segments (INCRBY 1000) + SET l:CODE URL EX 30d";
    type Lane = Lane;

    fn new(params: &Params) -> anyhow::Result<Self> {
        Ok(LinksShorten {
            params: params.clone(),
        })
    }

    fn lane(&self, index: u64) -> Lane {
        Lane {
            index,
            n: 0,
            url: String::with_capacity(self.params.value_size.max(48)),
            key: Vec::with_capacity(16),
            next: 0,
            end: 0,
        }
    }

    async fn rush(&self, lane: &mut Lane, conn: &RushConn) -> Result<Outcome, OpError> {
        self.next_url(lane);
        let req = LinkShorten {
            url: lane.url.clone(),
            length: CODE_LEN as u8,
            ttl_ms: Some(TTL_SECS * 1000),
            ..LinkShorten::default()
        };
        let reply = conn.call(&req).await?;
        if reply.code.len() != CODE_LEN {
            return Err(OpError::new(
                "WRONG_VALUE",
                format!("code {:?} is not {CODE_LEN} characters", reply.code),
            ));
        }
        Ok(Outcome::Done)
    }

    async fn redis(&self, lane: &mut Lane, conn: &mut RedisConn) -> Result<Outcome, OpError> {
        if lane.next == lane.end {
            let end: u64 = redis::cmd("INCRBY")
                .arg(REDIS_SEQ)
                .arg(REDIS_SEGMENT)
                .query_async(conn)
                .await?;
            lane.next = end - REDIS_SEGMENT;
            lane.end = end;
        }
        let id = lane.next;
        lane.next += 1;
        self.next_url(lane);
        redis_link_key(&mut lane.key, id);
        redis::cmd("SET")
            .arg(&lane.key[..])
            .arg(lane.url.as_bytes())
            .arg("EX")
            .arg(TTL_SECS)
            .query_async::<()>(conn)
            .await?;
        Ok(Outcome::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_codes_are_a_bijection_of_ids() {
        assert_eq!(62u64.pow(7), SPACE);
        let mut seen = std::collections::HashSet::new();
        let mut k = Vec::new();
        for id in 0..20_000 {
            redis_link_key(&mut k, id);
            assert_eq!(k.len(), 2 + CODE_LEN);
            assert!(k[2..].iter().all(u8::is_ascii_alphanumeric));
            assert!(seen.insert(k.clone()), "id {id} repeats a code");
        }
    }

    #[test]
    fn urls_have_the_asked_size() {
        let mut u = String::new();
        url(&mut u, "item", 42, 100);
        assert_eq!(u.len(), 100);
        assert!(u.starts_with("https://shop.example.com/item/000000000042?"));
        url(&mut u, "p", 1, 10);
        assert_eq!(u.len(), 48);
    }
}
