//! CHECK: a condition on a key or one hash field.

use super::{parse_int, Entry, Kv};
use crate::shard::txn::Txn;
use rush_protocol::cmd::{Check, Cond};
use rush_protocol::{ErrorCode, Reply, RushError};

impl Kv {
    pub(super) fn check(
        &self,
        r: &Check,
        now: u64,
        txn: &mut Txn,
        in_batch: bool,
    ) -> Result<Reply, RushError> {
        let entry = self.load(&r.key, now, txn)?;
        let (holds, shown) = if r.cond.is_ttl() {
            ttl_holds(r, &entry, now)?
        } else {
            let current = self.current(r, entry, txn)?;
            value_holds(r, current)?
        };
        if in_batch && !holds {
            return Err(RushError::new(
                ErrorCode::ConditionFailed,
                format!("condition {:?} does not hold; {shown}", r.cond),
            ));
        }
        Ok(Reply::Check(holds))
    }
}

/// What a CHECK found, for the refusal of one that does not hold.
enum Found {
    Value(Option<Vec<u8>>),
    /// The key's expiry (None: missing; 0: none), as of `now`.
    Expiry(Option<u64>, u64),
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Found::Value(None) => f.write_str("current value (missing)"),
            Found::Value(Some(v)) => write!(
                f,
                "current value {}",
                String::from_utf8_lossy(&v[..v.len().min(64)])
            ),
            Found::Expiry(None, _) => f.write_str("the key is missing"),
            Found::Expiry(Some(0), _) => f.write_str("the key has no expiry"),
            Found::Expiry(Some(at), now) => write!(
                f,
                "the key expires in {} ms",
                i128::from(*at) - i128::from(*now)
            ),
        }
    }
}

impl Kv {
    /// The value a condition on the value is about: the string, or the
    /// named hash field (a whole hash only exists or doesn't).
    fn current(&self, r: &Check, entry: Entry, txn: &Txn) -> Result<Option<Vec<u8>>, RushError> {
        Ok(match (entry, &r.field) {
            (Entry::Missing, _) => None,
            (Entry::String { value, .. }, None) => Some(value.to_vec()),
            (Entry::String { .. }, Some(_)) => {
                return Err(RushError::wrong_type("CHECK with a field on a string"))
            }
            (Entry::Hash { hash, .. }, Some(f)) => {
                self.hash_field(&r.key, &hash, f, txn)?.map(|v| v.to_vec())
            }
            (Entry::Hash { .. }, None) => match r.cond {
                Cond::Exists | Cond::Missing => Some(Vec::new()),
                _ => {
                    return Err(RushError::wrong_type(
                        "CHECK comparing a whole hash; name a field",
                    ))
                }
            },
        })
    }
}

/// Whether a condition on the value holds, and what the value is.
fn value_holds(r: &Check, current: Option<Vec<u8>>) -> Result<(bool, Found), RushError> {
    let int = |v: &Option<Vec<u8>>| v.as_deref().map(parse_int).unwrap_or(Ok(0));
    let holds = match &r.cond {
        Cond::Exists => current.is_some(),
        Cond::Missing => current.is_none(),
        Cond::Eq(b) => current.as_deref() == Some(b.as_ref()),
        Cond::Ne(b) => current.as_deref() != Some(b.as_ref()),
        Cond::Lt(n) => int(&current)? < *n,
        Cond::Le(n) => int(&current)? <= *n,
        Cond::Gt(n) => int(&current)? > *n,
        Cond::Ge(n) => int(&current)? >= *n,
        Cond::NoTtl | Cond::HasTtl | Cond::TtlBelow(_) | Cond::TtlAbove(_) => {
            unreachable!("TTL conditions are checked by ttl_holds")
        }
    };
    Ok((holds, Found::Value(current)))
}

/// Whether a condition on the key's TTL holds (see [`Cond`]), and what the
/// expiry is.
fn ttl_holds(r: &Check, entry: &Entry, now: u64) -> Result<(bool, Found), RushError> {
    if r.field.is_some() {
        return Err(RushError::bad_request(
            "a TTL condition is about the key: it names no field",
        ));
    }
    let expires_at = match entry {
        Entry::Missing => None,
        Entry::String { expires_at, .. } | Entry::Hash { expires_at, .. } => Some(*expires_at),
    };
    // Milliseconds left; None: no expiry (never).
    let left = |at: u64| (at != 0).then(|| i128::from(at) - i128::from(now));
    let holds = match (expires_at.map(left), &r.cond) {
        (None, _) => false,
        (Some(left), Cond::NoTtl) => left.is_none(),
        (Some(left), Cond::HasTtl) => left.is_some(),
        (Some(left), Cond::TtlBelow(ms)) => left.is_some_and(|l| l < i128::from(*ms)),
        (Some(left), Cond::TtlAbove(ms)) => left.is_none_or(|l| l > i128::from(*ms)),
        (Some(_), _) => unreachable!("a value condition"),
    };
    Ok((holds, Found::Expiry(expires_at, now)))
}
