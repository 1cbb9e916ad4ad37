//! Every command the RESP listener answers, once: its arity and key
//! positions as Redis's `COMMAND` reports them (what `redis-cli`'s hints and
//! cluster-aware clients read to find a command's keys). A command added to
//! [`super::command::decode`] gets its row here; a test checks that the two
//! agree.

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

/// Sorted by name.
pub const SPECS: &[Spec] = &[
    spec("auth", -2, C, NONE),
    spec("client", -2, N, NONE),
    spec("cluster", -2, N, NONE),
    spec("command", -1, N, NONE),
    spec("config", -2, N, NONE),
    spec("decr", 2, W, ONE),
    spec("decrby", 3, W, ONE),
    spec("del", -2, W, ALL),
    spec("echo", 2, C, NONE),
    spec("exists", -2, R, ALL),
    spec("expire", -3, W, ONE),
    spec("get", 2, R, ONE),
    spec("hdel", -3, W, ONE),
    spec("hello", -1, C, NONE),
    spec("hget", 3, R, ONE),
    spec("hgetall", 2, &["readonly"], ONE),
    spec("hincrby", 4, W, ONE),
    spec("hset", -4, W, ONE),
    spec("incr", 2, W, ONE),
    spec("incrby", 3, W, ONE),
    spec("info", -1, N, NONE),
    spec("mget", -2, R, ALL),
    spec("pexpire", -3, W, ONE),
    spec("ping", -1, C, NONE),
    spec("pttl", 2, R, ONE),
    spec("quit", -1, C, NONE),
    spec("readonly", 1, C, NONE),
    spec("readwrite", 1, C, NONE),
    spec("select", 2, C, NONE),
    spec("set", -3, WM, ONE),
    spec("time", 1, C, NONE),
    spec("ttl", 2, R, ONE),
];

/// The row of a command, by its lower-case name.
pub fn find(name: &str) -> Option<&'static Spec> {
    SPECS
        .binary_search_by(|s| s.name.cmp(name))
        .ok()
        .map(|i| &SPECS[i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::command::{decode, Decoded, Now};
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
            if let Decoded::Now(Now::Error(e)) = decode(args, true, false) {
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
            if let Decoded::Run(request, _) = decode(args.clone(), true, false) {
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
