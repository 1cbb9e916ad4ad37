//! SET and the string commands composed of SET, GET, DEL and EXPIRE:
//! SETNX, SETEX, PSETEX, GETDEL, GETEX, MSET, MSETNX.

use super::expiry::{self, Lifetime};
use super::{arity_error, err, parse_i64, Decoded, Shape};
use bytes::Bytes;
use rush_protocol::cmd::{Batch, Check, Cond, Del, Exists, Expire, Get, Set, SetCond, SetKeepTtl};
use rush_protocol::limits::MAX_BATCH_OPS;
use rush_protocol::Request;

/// `SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]`.
/// Options are read first and then the time, so a syntax error is
/// reported before a bad number, as Redis does.
pub(super) fn set(a: &[Bytes], now_ms: u64) -> Decoded {
    if a.len() < 2 {
        return arity_error("set");
    }
    let mut cond = SetCond::Always;
    let mut get = false;
    let mut ttl: Option<(Vec<u8>, &Bytes)> = None;
    let mut keep_ttl = false;
    let mut i = 2;
    while i < a.len() {
        let opt = a[i].to_ascii_uppercase();
        let next = a.get(i + 1);
        match (opt.as_slice(), next) {
            (b"NX", _) if cond != SetCond::IfPresent => cond = SetCond::IfAbsent,
            (b"XX", _) if cond != SetCond::IfAbsent => cond = SetCond::IfPresent,
            (b"GET", _) => get = true,
            (b"EX" | b"PX" | b"EXAT" | b"PXAT", Some(v)) if ttl.is_none() && !keep_ttl => {
                ttl = Some((opt.clone(), v));
                i += 1;
            }
            (b"KEEPTTL", _) if ttl.is_none() => keep_ttl = true,
            _ => return err("ERR syntax error"),
        }
        i += 1;
    }
    let lifetime = match ttl {
        None => Lifetime::In(0),
        Some((opt, n)) => match expiry::option(&opt, n, now_ms, "set") {
            Ok(l) => l,
            Err(refused) => return refused,
        },
    };
    let key = a[0].clone();
    let (write, shape): (Request, Shape) = match (lifetime, cond) {
        _ if keep_ttl => (
            SetKeepTtl {
                key: key.clone(),
                value: a[1].clone(),
                cond,
            }
            .into(),
            Shape::SetOk,
        ),
        (Lifetime::In(ttl_ms), cond) => (
            Set {
                key: key.clone(),
                value: a[1].clone(),
                ttl_ms,
                cond,
            }
            .into(),
            Shape::SetOk,
        ),
        // Written and expired at once: what is left is that the key is
        // gone, if the condition let the SET write.
        (Lifetime::Past, SetCond::Always) => (Del { key: key.clone() }.into(), Shape::Ok),
        (Lifetime::Past, SetCond::IfPresent) => (Del { key: key.clone() }.into(), Shape::SetOk),
        (Lifetime::Past, SetCond::IfAbsent) => (Exists { key: key.clone() }.into(), Shape::SetOk),
    };
    if get {
        // The old value and the write in one atomic batch.
        let ops = vec![Get { key }.into(), write];
        Decoded::Run(Batch { ops }.into(), Shape::SetGet)
    } else {
        Decoded::Run(write, shape)
    }
}

/// `SETNX key value` → `:1` if it was set, `:0` if the key exists.
pub(super) fn setnx(a: &[Bytes]) -> Decoded {
    let set = Set {
        key: a[0].clone(),
        value: a[1].clone(),
        ttl_ms: 0,
        cond: SetCond::IfAbsent,
    };
    Decoded::Run(set.into(), Shape::Flag)
}

/// `SETEX key s value`, `PSETEX key ms value` → `+OK`.
pub(super) fn setex(a: &[Bytes], name: &str) -> Decoded {
    let Some(n) = parse_i64(&a[1]) else {
        return err("ERR value is not an integer or out of range");
    };
    let ms = if name == "setex" {
        n.checked_mul(1000)
    } else {
        Some(n)
    };
    match ms {
        Some(ms) if ms > 0 => Decoded::Run(
            Set {
                key: a[0].clone(),
                value: a[2].clone(),
                ttl_ms: ms as u64,
                cond: SetCond::Always,
            }
            .into(),
            Shape::SetOk,
        ),
        _ => err(format!("ERR invalid expire time in '{name}' command")),
    }
}

/// `GETDEL key` → the value or null, and the key is gone: BATCH [GET, DEL]
/// (a key holding a hash answers WRONGTYPE and stays, as in Redis).
pub(super) fn getdel(a: &[Bytes]) -> Decoded {
    let key = a[0].clone();
    let ops = vec![Get { key: key.clone() }.into(), Del { key }.into()];
    Decoded::Run(Batch { ops }.into(), Shape::SetGet)
}

/// `GETEX key [EX s|PX ms|EXAT s|PXAT ms|PERSIST]` → the value or null;
/// with an option, BATCH [GET, EXPIRE] (a time already past: DEL).
pub(super) fn getex(a: &[Bytes], now_ms: u64) -> Decoded {
    if a.is_empty() {
        return arity_error("getex");
    }
    let key = a[0].clone();
    let then: Request = match &a[1..] {
        [] => return Decoded::Run(Get { key }.into(), Shape::Bulk),
        [opt] if opt.eq_ignore_ascii_case(b"PERSIST") => Expire {
            key: key.clone(),
            ttl_ms: 0,
        }
        .into(),
        [opt, n] => {
            let opt = opt.to_ascii_uppercase();
            if !matches!(opt.as_slice(), b"EX" | b"PX" | b"EXAT" | b"PXAT") {
                return err("ERR syntax error");
            }
            match expiry::option(&opt, n, now_ms, "getex") {
                Ok(Lifetime::In(ttl_ms)) => Expire {
                    key: key.clone(),
                    ttl_ms,
                }
                .into(),
                Ok(Lifetime::Past) => Del { key: key.clone() }.into(),
                Err(refused) => return refused,
            }
        }
        _ => return err("ERR syntax error"),
    };
    let ops = vec![Get { key }.into(), then];
    Decoded::Run(Batch { ops }.into(), Shape::SetGet)
}

/// `MSET k v [k v ...]` → `+OK`: one BATCH of SETs, so the keys must share
/// a slot. `MSETNX`: `:1` if no key existed and all were set, else `:0`
/// and nothing is written — BATCH [CHECK Missing × n, SET × n].
pub(super) fn mset(a: &[Bytes], nx: bool) -> Decoded {
    let name = if nx { "msetnx" } else { "mset" };
    if a.len() < 2 || !a.len().is_multiple_of(2) {
        return arity_error(name);
    }
    let pairs = a.len() / 2;
    // MSETNX's batch holds a CHECK and a SET per key.
    let most = if nx { MAX_BATCH_OPS / 2 } else { MAX_BATCH_OPS };
    if pairs > most {
        return err(format!("ERR {name} takes at most {most} keys"));
    }
    let sets = a
        .chunks(2)
        .map(|p| Set::new(p[0].clone(), p[1].clone()).into());
    if !nx {
        return Decoded::Run(
            Batch {
                ops: sets.collect(),
            }
            .into(),
            Shape::Ok,
        );
    }
    let checks = a.chunks(2).map(|p| {
        Check {
            key: p[0].clone(),
            field: None,
            cond: Cond::Missing,
        }
        .into()
    });
    let ops = checks.chain(sets).collect();
    Decoded::Run(Batch { ops }.into(), Shape::IfAllHold { checks: pairs })
}
