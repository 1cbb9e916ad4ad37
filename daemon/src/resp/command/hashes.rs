//! HMGET, HEXISTS, HLEN, HSETNX: the hash commands Redis has beside HSET, HGET, HDEL, HINCRBY and HGETALL.

use super::{arity_error, err, Decoded, Shape};
use bytes::Bytes;
use rush_protocol::cmd::{Batch, Check, Cond, HGet, HLen, HSet};
use rush_protocol::limits::MAX_BATCH_OPS;

/// `HMGET key f [f ...]` → array of bulk or null: one BATCH of HGETs.
pub(super) fn hmget(a: &[Bytes]) -> Decoded {
    if a.len() < 2 {
        return arity_error("hmget");
    }
    if a.len() - 1 > MAX_BATCH_OPS {
        return err(format!("ERR hmget takes at most {MAX_BATCH_OPS} fields"));
    }
    let ops = a[1..]
        .iter()
        .map(|f| {
            HGet {
                key: a[0].clone(),
                field: f.clone(),
            }
            .into()
        })
        .collect();
    Decoded::Run(Batch { ops }.into(), Shape::Values)
}

/// `HEXISTS key f` → `:1` / `:0`: a CHECK that the field exists, which
/// answers without carrying the field's value.
pub(super) fn hexists(a: &[Bytes]) -> Decoded {
    let check = Check {
        key: a[0].clone(),
        field: Some(a[1].clone()),
        cond: Cond::Exists,
    };
    Decoded::Run(check.into(), Shape::Flag)
}

/// `HLEN key` → how many fields: HLEN, which reads only the hash's header.
pub(super) fn hlen(a: &[Bytes]) -> Decoded {
    Decoded::Run(HLen { key: a[0].clone() }.into(), Shape::Integer)
}

/// `HSETNX key f v` → `:1` if the field was set, `:0` if it was there:
/// BATCH [CHECK field Missing, HSET], which the CHECK aborts.
pub(super) fn hsetnx(a: &[Bytes]) -> Decoded {
    let ops = vec![
        Check {
            key: a[0].clone(),
            field: Some(a[1].clone()),
            cond: Cond::Missing,
        }
        .into(),
        HSet {
            key: a[0].clone(),
            fields: vec![(a[1].clone(), a[2].clone())],
        }
        .into(),
    ];
    Decoded::Run(Batch { ops }.into(), Shape::IfAllHold { checks: 1 })
}
