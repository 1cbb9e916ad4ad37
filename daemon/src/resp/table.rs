//! Every command the RESP listener answers, once: its arity and key
//! positions as Redis's `COMMAND` reports them (what `redis-cli`'s hints and
//! cluster-aware clients read to find a command's keys). A command added to
//! [`super::command::decode`] gets its row here; a test checks that the two
//! agree.

use hashbrown::HashMap;
use std::sync::LazyLock;

/// One command's facts, in `COMMAND INFO`'s terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// Lower case, as Redis reports it.
    pub name: &'static str,
    /// Arguments including the name; negative: at least that many.
    pub arity: i32,
    /// `write`, `readonly`, `fast`, `loading`, `stale`, `noscript`...
    pub flags: &'static [&'static str],
    /// Position of the first key (0: none), of the last (-1: the last
    /// argument), and the step between keys.
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
}

impl Spec {
    /// Whether a command of `argc` arguments (its name included) has as
    /// many as the command takes.
    pub fn arity_admits(&self, argc: usize) -> bool {
        let n = self.arity.unsigned_abs() as usize;
        if self.arity < 0 {
            argc >= n
        } else {
            argc == n
        }
    }
}

const W: &[&str] = &["write", "fast"];
const WM: &[&str] = &["write", "denyoom"];
const R: &[&str] = &["readonly", "fast"];
const C: &[&str] = &["fast", "loading", "stale"];
/// The transaction commands.
const T: &[&str] = &["noscript", "loading", "stale", "fast"];
/// Admin-only service commands (they run on every shard).
const AW: &[&str] = &["admin", "write"];
const AR: &[&str] = &["admin", "readonly"];
/// Node commands that may take longer (they build text or lists).
const N: &[&str] = &["loading", "stale"];

const fn spec(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: (i32, i32, i32),
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
    }
}

const NONE: (i32, i32, i32) = (0, 0, 0);
const ONE: (i32, i32, i32) = (1, 1, 1);
const ALL: (i32, i32, i32) = (1, -1, 1);
/// Every other argument from the first: MSET's keys.
const PAIRS: (i32, i32, i32) = (1, -1, 2);
/// The second argument (LIMIT.*'s user, after the policy).
const SECOND: (i32, i32, i32) = (2, 2, 1);

/// Sorted by name. Service commands (services/) declare a key only where
/// the slot is that argument's CRC16; the others rely on MOVED.
pub const SPECS: &[Spec] = &[
    spec("auth", -2, C, NONE),
    spec("catalog.alias", -4, &["write"], NONE),
    spec("catalog.del", 3, W, ONE),
    spec("catalog.put", -3, WM, ONE),
    spec("catalog.query", -2, &["readonly"], ONE),
    spec("catalog.shed", 2, AW, NONE),
    spec("client", -2, N, NONE),
    spec("cluster", -2, N, NONE),
    spec("command", -1, N, NONE),
    spec("config", -2, N, NONE),
    spec("dbsize", 1, &["readonly"], NONE),
    spec("decr", 2, W, ONE),
    spec("decrby", 3, W, ONE),
    spec("del", -2, W, ALL),
    spec("discard", 1, T, NONE),
    spec("echo", 2, C, NONE),
    spec("envelope.ack", 2, AW, NONE),
    spec("envelope.audit", 1, AR, NONE),
    spec("envelope.create", -4, WM, ONE),
    spec("envelope.grab", 3, W, NONE),
    spec("envelope.info", 2, R, NONE),
    spec("envelope.refunds", -1, AR, NONE),
    spec("exec", 1, &["noscript", "loading", "stale"], NONE),
    spec("exists", -2, R, ALL),
    spec("expire", -3, W, ONE),
    spec("expireat", -3, W, ONE),
    spec("get", 2, R, ONE),
    spec("getdel", 2, W, ONE),
    spec("getex", -2, W, ONE),
    spec("hdel", -3, W, ONE),
    spec("hello", -1, C, NONE),
    spec("hexists", 3, R, ONE),
    spec("hget", 3, R, ONE),
    spec("hgetall", 2, &["readonly"], ONE),
    spec("hincrby", 4, W, ONE),
    spec("hlen", 2, R, ONE),
    spec("hmget", -3, R, ONE),
    spec("hset", -4, W, ONE),
    spec("hsetnx", 4, W, ONE),
    spec("incr", 2, W, ONE),
    spec("incrby", 3, W, ONE),
    spec("info", -1, N, NONE),
    spec("limit.acquire", -6, W, SECOND),
    spec("limit.policy", -2, &["write"], NONE),
    spec("limit.release", 4, W, SECOND),
    spec("limit.status", 3, R, SECOND),
    spec("link.alias", -3, WM, NONE),
    spec("link.delete", 2, W, NONE),
    spec("link.info", 2, R, NONE),
    spec("link.resolve", 2, W, NONE),
    spec("link.shorten", -2, WM, NONE),
    spec("link.update", -3, W, NONE),
    spec("mget", -2, R, ALL),
    spec("mset", -3, WM, PAIRS),
    spec("msetnx", -3, WM, PAIRS),
    spec("multi", 1, T, NONE),
    spec("persist", 2, W, ONE),
    spec("pexpire", -3, W, ONE),
    spec("pexpireat", -3, W, ONE),
    spec("ping", -1, C, NONE),
    spec("psetex", 4, WM, ONE),
    spec("pttl", 2, R, ONE),
    spec("quit", -1, C, NONE),
    spec("readonly", 1, C, NONE),
    spec("readwrite", 1, C, NONE),
    spec("select", 2, C, NONE),
    spec("set", -3, WM, ONE),
    spec("setex", 4, WM, ONE),
    spec("setnx", 3, W, ONE),
    spec("time", 1, C, NONE),
    spec("ttl", 2, R, ONE),
    spec("unlink", -2, W, ALL),
    spec("unwatch", 1, T, NONE),
    spec("watch", -2, T, ALL),
];

/// The row of a command, by its lower-case name. Every command a client
/// sends is looked up here: one hash and one comparison (a binary search
/// of the table's names was 4.5 % of a pipelined GET's CPU).
pub fn find(name: &str) -> Option<&'static Spec> {
    static BY_NAME: LazyLock<HashMap<&'static str, &'static Spec>> =
        LazyLock::new(|| SPECS.iter().map(|s| (s.name, s)).collect());
    BY_NAME.get(name).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::command::{Decoded, Now};
    use crate::resp::RespConn;
    use bytes::Bytes;

    #[test]
    fn rows_are_sorted_and_unique() {
        for w in SPECS.windows(2) {
            assert!(w[0].name < w[1].name, "{} before {}", w[0].name, w[1].name);
        }
    }

    /// Every row names a command `decode` answers (a command without a row
    /// is unknown to `decode`, so its own tests fail).
    #[test]
    fn every_row_is_a_command() {
        for s in SPECS {
            // Enough arguments for the arity check; the command's own checks
            // may still refuse them, but not as unknown.
            let argc = s.arity.unsigned_abs() as usize;
            let args = std::iter::once(Bytes::from_static(s.name.as_bytes()))
                .chain((1..argc).map(|_| Bytes::from_static(b"1")))
                .collect();
            let mut conn = RespConn::default();
            if let Decoded::Now(Now::Error(e)) = conn.decode(args, true, false, 0) {
                assert!(!e.contains("unknown command"), "{}: {e}", s.name);
            }
            assert!(s.arity != 0 && s.step >= 0, "{}", s.name);
        }
    }

    /// Cluster clients route by these positions (redis-py's RedisCluster
    /// reads them from COMMAND): each row's keys are the arguments the
    /// request it becomes routes by. A command whose keys sit at the
    /// positions gets one slot; arguments anywhere else hash elsewhere.
    #[test]
    fn key_positions_are_the_keys_requests_route_by() {
        use rush_protocol::Target;
        let mut checked = 0;
        for s in SPECS.iter().filter(|s| s.first_key > 0) {
            // The fewest arguments the command takes, two more when its
            // keys run to the end (so the step is exercised).
            let argc = s.arity.unsigned_abs() as usize + if s.last_key < 0 { 2 } else { 0 };
            let keys = crate::resp::node::key_positions(s, argc);
            assert!(!keys.is_empty(), "{}: no key position", s.name);
            let args: Vec<Bytes> = (0..argc)
                .map(|i| match i {
                    0 => Bytes::from_static(s.name.as_bytes()),
                    i if keys.contains(&i) => Bytes::from(format!("{{tag}}k{i}")),
                    // Numbers, so options parse; each hashes elsewhere.
                    i => Bytes::from(format!("{}", 10 + i)),
                })
                .collect();
            let want = rush_protocol::key_slot(b"{tag}");
            // Commands that want other arguments than numbers (or run no
            // request) are checked by their own tests.
            if let Decoded::Run(request, _) =
                crate::resp::command::decode(args.clone(), true, false, 0)
            {
                match request.target() {
                    Ok(Target::Slot(slot)) => assert_eq!(slot, want, "{}: {args:?}", s.name),
                    other => panic!("{}: routes to {other:?}", s.name),
                }
                checked += 1;
            }
        }
        // At least the first slice's keyed commands (GET, SET, DEL, HSET...).
        assert!(checked >= 18, "{checked} rows checked");
    }
}
