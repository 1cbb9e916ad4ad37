//! Expiry: the TTL options of SET and GETEX, EXPIRE / PEXPIRE / EXPIREAT
//! / PEXPIREAT (with NX, XX, GT, LT) and PERSIST. Absolute times are made relative to the daemon's clock when
//! the command is read (the request then runs within the same pass, or
//! the next on another shard: within a millisecond or two).

use super::{arity_error, err, parse_i64, Decoded, Shape};
use bytes::Bytes;
use rush_protocol::cmd::{Batch, Check, Cond, Del, Expire, Ttl};
use rush_protocol::Request;

/// When a key given a TTL option expires, seen from now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lifetime {
    /// In this many milliseconds (> 0).
    In(u64),
    /// Already: an EXAT/PXAT in the past. Redis writes the key and it is
    /// gone at once; Rush writes nothing that lives.
    Past,
}

/// The lifetime an `EX s`, `PX ms`, `EXAT s` or `PXAT ms` option gives
/// (`opt` upper case), refused as Redis refuses it: not an integer, or not
/// above 0 (or overflowing): `invalid expire time in '{command}' command`.
// The error is the refusal itself, returned as the command's answer: it is
// built only for a refused command, so its size costs nothing on the way
// that succeeds.
#[allow(clippy::result_large_err)]
pub(super) fn option(
    opt: &[u8],
    n: &Bytes,
    now_ms: u64,
    command: &str,
) -> Result<Lifetime, Decoded> {
    let Some(n) = parse_i64(n) else {
        return Err(err("ERR value is not an integer or out of range"));
    };
    let invalid = || err(format!("ERR invalid expire time in '{command}' command"));
    if n <= 0 {
        return Err(invalid());
    }
    let ms = match opt {
        b"EX" | b"EXAT" => n.checked_mul(1000).ok_or_else(invalid)?,
        _ => n,
    };
    Ok(match opt {
        b"EXAT" | b"PXAT" => at(ms, now_ms),
        _ => Lifetime::In(ms as u64),
    })
}

/// An absolute Unix time in ms, seen from `now_ms`.
fn at(at_ms: i64, now_ms: u64) -> Lifetime {
    let left = i128::from(at_ms) - i128::from(now_ms);
    if left > 0 {
        Lifetime::In(u64::try_from(left).unwrap_or(u64::MAX))
    } else {
        Lifetime::Past
    }
}

/// `EXPIRE key s`, `PEXPIRE key ms`, `EXPIREAT key unix-s`, `PEXPIREAT
/// key unix-ms`, each with `NX | XX | GT | LT` → `:1` if the TTL was set
/// (or the key deleted: a time already past deletes it, as in Redis), `:0`
/// if the key is missing or an option's condition fails. An absolute time
/// is made relative to `now_ms`.
///
/// With options the command is one BATCH: a TTL CHECK per option, then
/// the EXPIRE (or DEL); a failed CHECK writes nothing. A key without a TTL
/// counts as expiring never, as in Redis: GT never holds for it, LT always.
pub(super) fn expire(a: &[Bytes], name: &str, now_ms: u64) -> Decoded {
    if a.len() < 2 {
        return arity_error(name);
    }
    // Options first, then the time, in Redis's order of refusals.
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for o in &a[2..] {
        match o.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                return err(format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(&o[..o.len().min(128)])
                ))
            }
        }
    }
    if nx && (xx || gt || lt) {
        return err("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return err("ERR GT and LT options at the same time are not compatible");
    }
    let Some(n) = parse_i64(&a[1]) else {
        return err("ERR value is not an integer or out of range");
    };
    let ms = match name {
        "expire" | "expireat" => n.checked_mul(1000),
        _ => Some(n),
    };
    let Some(ms) = ms else {
        return err(format!("ERR invalid expire time in '{name}' command"));
    };
    // Milliseconds from now; ≤ 0: already past.
    let ttl = match name {
        "expireat" | "pexpireat" => {
            let left = i128::from(ms) - i128::from(now_ms);
            left.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
        }
        _ => ms,
    };
    let key = a[0].clone();
    let write: Request = if ttl <= 0 {
        Del { key: key.clone() }.into()
    } else {
        Expire {
            key: key.clone(),
            ttl_ms: ttl as u64,
        }
        .into()
    };
    let conds = [
        nx.then_some(Cond::NoTtl),
        xx.then_some(Cond::HasTtl),
        gt.then_some(Cond::TtlBelow(ttl)),
        lt.then_some(Cond::TtlAbove(ttl)),
    ];
    let mut ops: Vec<Request> = conds
        .into_iter()
        .flatten()
        .map(|cond| {
            Check {
                key: key.clone(),
                field: None,
                cond,
            }
            .into()
        })
        .collect();
    if ops.is_empty() {
        return Decoded::Run(write, Shape::Flag);
    }
    let checks = ops.len();
    ops.push(write);
    Decoded::Run(Batch { ops }.into(), Shape::IfAllHold { checks })
}

/// `PERSIST key` → `:1` if the key had a TTL (now removed), else `:0`:
/// one BATCH [TTL, EXPIRE 0].
pub(super) fn persist(a: &[Bytes]) -> Decoded {
    let key = a[0].clone();
    let ops = vec![
        Ttl { key: key.clone() }.into(),
        Expire { key, ttl_ms: 0 }.into(),
    ];
    Decoded::Run(Batch { ops }.into(), Shape::Persist)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_times_are_relative_to_the_daemons_clock() {
        let n = |s: &'static str| Bytes::from_static(s.as_bytes());
        let now = 1_000_000_000_000;
        assert_eq!(
            option(b"EXAT", &n("1000000005"), now, "set"),
            Ok(Lifetime::In(5000))
        );
        assert_eq!(
            option(b"PXAT", &n("1000000000001"), now, "set"),
            Ok(Lifetime::In(1))
        );
        assert_eq!(
            option(b"PXAT", &n("1000000000000"), now, "set"),
            Ok(Lifetime::Past)
        );
        assert_eq!(option(b"EXAT", &n("1"), now, "set"), Ok(Lifetime::Past));
        assert_eq!(option(b"EX", &n("2"), now, "set"), Ok(Lifetime::In(2000)));
        let error = |d: Result<Lifetime, Decoded>| match d {
            Err(Decoded::Now(super::super::Now::Error(e))) => e,
            _ => panic!("not refused"),
        };
        assert_eq!(
            error(option(b"EXAT", &n("0"), now, "getex")),
            "ERR invalid expire time in 'getex' command"
        );
        assert_eq!(
            error(option(b"EX", &n("9223372036854775807"), now, "set")),
            "ERR invalid expire time in 'set' command"
        );
        assert_eq!(
            error(option(b"PX", &n("soon"), now, "set")),
            "ERR value is not an integer or out of range"
        );
    }
}
