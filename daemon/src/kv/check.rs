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
        let current: Option<Vec<u8>> = match (self.load(&r.key, now, txn)?, &r.field) {
            (Entry::Missing, _) => None,
            (Entry::String { value, .. }, None) => Some(value.to_vec()),
            (Entry::String { .. }, Some(_)) => {
                return Err(RushError::wrong_type("CHECK with a field on a string"))
            }
            (Entry::Hash { fields, .. }, Some(f)) => fields.get(f.as_ref()).cloned(),
            (Entry::Hash { .. }, None) => match r.cond {
                Cond::Exists | Cond::Missing => Some(Vec::new()),
                _ => {
                    return Err(RushError::wrong_type(
                        "CHECK comparing a whole hash; name a field",
                    ))
                }
            },
        };
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
        };
        if in_batch && !holds {
            let shown = current
                .as_deref()
                .map(|v| String::from_utf8_lossy(&v[..v.len().min(64)]).into_owned())
                .unwrap_or_else(|| "(missing)".into());
            return Err(RushError::new(
                ErrorCode::ConditionFailed,
                format!(
                    "condition {:?} does not hold; current value {shown}",
                    r.cond
                ),
            ));
        }
        Ok(Reply::Check(holds))
    }
}
