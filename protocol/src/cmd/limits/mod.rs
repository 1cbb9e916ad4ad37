//! Purchase limits (0x40–0x4f): one atomic, idempotent request per order.
//!
//! A *policy* is a named list of rules ("per item: at most N per window",
//! "total: at most N per window"). `LIMIT_ACQUIRE` checks every rule for
//! every item of an order and records all counts, or none, in the user's slot;
//! the order id makes it idempotent and `LIMIT_RELEASE` gives the counts back.
//! PROTOCOL.md ("Purchase limits") documents the bytes.

mod acquire;
mod policy;
mod policy_get;
mod policy_list;
mod policy_set;
mod release;
mod status;

pub use acquire::{AcquireReply, LimitAcquire, OrderItem};
pub use policy::{PolicyDef, Rule, Scope, Window, DEFAULT_SLIDING_BUCKETS};
pub use policy_get::LimitPolicyGet;
pub use policy_list::{LimitPolicyList, PolicyListReply};
pub use policy_set::{LimitPolicySet, PolicySetReply};
pub use release::{LimitRelease, ReleaseReply};
pub use status::{LimitStatus, StatusReply};

use crate::codec::{DecodeError, Reader, WriteExt};
use crate::limits::{MAX_ID, MAX_KEY, MAX_POLICY_NAME};
use bytes::{BufMut, Bytes, BytesMut};

/// One rule's standing for one item (or for the whole order): what is
/// counted, the limit, and when the count next goes down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    pub rule: String,
    /// The item, or empty for a total rule.
    pub item: String,
    /// Counted in the current window, this order included.
    pub count: u64,
    pub limit: u64,
    /// Unix ms when the count next drops: the window's end for daily and
    /// fixed windows; for a sliding window, when its oldest counted
    /// sub-bucket stops counting (0 when nothing is counted).
    pub resets_at_ms: u64,
}

impl Allowance {
    /// How many more may be acquired now.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.count)
    }

    pub(crate) fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.rule.as_bytes());
        out.put_lp(self.item.as_bytes());
        out.put_u64(self.count);
        out.put_u64(self.limit);
        out.put_u64(self.resets_at_ms);
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Allowance {
            rule: r.string("rule", MAX_POLICY_NAME)?,
            item: r.string("item", MAX_ID)?,
            count: r.u64("count")?,
            limit: r.u64("limit")?,
            resets_at_ms: r.u64("resets at")?,
        })
    }
}

/// Smallest encoded [`Allowance`] (two empty strings and three u64).
pub(crate) const ALLOWANCE_MIN: usize = 4 + 4 + 24;

/// Limit arguments over their bounds are invalid orders: BAD_REQUEST, not
/// TOO_LARGE (see `crate::limits`). The bound is still checked before the
/// reader allocates.
pub(crate) fn over_limit_is_invalid(e: DecodeError) -> DecodeError {
    match e {
        DecodeError::TooLarge { field, len, max } => {
            DecodeError::invalid(field, format!("{len} is over the limit of {max}"))
        }
        e => e,
    }
}

/// A policy or rule name: 1–64 of `[A-Za-z0-9_.-]` (names become metric labels).
pub fn check_name(field: &'static str, name: &str) -> Result<(), DecodeError> {
    if name.is_empty() || name.len() > MAX_POLICY_NAME {
        return Err(DecodeError::invalid(
            field,
            format!("must be 1 to {MAX_POLICY_NAME} bytes"),
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return Err(DecodeError::invalid(
            field,
            format!("{name:?} may only hold letters, digits, '_', '.' and '-'"),
        ));
    }
    Ok(())
}

pub(crate) fn read_name(r: &mut Reader, field: &'static str) -> Result<String, DecodeError> {
    let name = r
        .string(field, MAX_POLICY_NAME)
        .map_err(over_limit_is_invalid)?;
    check_name(field, &name)?;
    Ok(name)
}

/// The user: any 1–1024 bytes. Its slot follows the `{hashtag}` rule.
pub(crate) fn read_user(r: &mut Reader) -> Result<Bytes, DecodeError> {
    let user = r.bytes("user", MAX_KEY).map_err(over_limit_is_invalid)?;
    if user.is_empty() {
        return Err(DecodeError::invalid("user", "must not be empty"));
    }
    Ok(user)
}

/// An order or item id: 1–256 bytes of UTF-8.
pub(crate) fn read_id(r: &mut Reader, field: &'static str) -> Result<String, DecodeError> {
    let id = r.string(field, MAX_ID).map_err(over_limit_is_invalid)?;
    if id.is_empty() {
        return Err(DecodeError::invalid(field, "must not be empty"));
    }
    Ok(id)
}
