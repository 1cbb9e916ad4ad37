use super::{read_name, read_user, Allowance, ALLOWANCE_MIN};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_POLICY_RULES, MAX_STATUS_ENTRIES};
use crate::{key_slot, RushError, Target};
use bytes::{Bytes, BytesMut};

/// `LIMIT_STATUS policy user` → the user's counts under the policy.
///
/// One entry per total rule (count 0 when nothing is counted) and one per
/// item that has a live count under a per-item rule, rules in policy order,
/// items in byte order. At most `MAX_STATUS_ENTRIES` item entries;
/// `truncated` says some were left out. Reads only; never writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitStatus {
    pub policy: String,
    pub user: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusReply {
    pub allowances: Vec<Allowance>,
    pub truncated: bool,
}

impl StatusReply {
    /// The entry of `rule` for `item` ("" for a total rule).
    pub fn get(&self, rule: &str, item: &str) -> Option<&Allowance> {
        self.allowances
            .iter()
            .find(|a| a.rule == rule && a.item == item)
    }

    /// The count of `rule` for `item`, 0 when it has no entry.
    pub fn count(&self, rule: &str, item: &str) -> u64 {
        self.get(rule, item).map(|a| a.count).unwrap_or(0)
    }
}

impl LimitStatus {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(key_slot(&self.user)))
    }
}

impl Wire for LimitStatus {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.policy.as_bytes());
        out.put_lp(&self.user);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LimitStatus {
            policy: read_name(r, "policy")?,
            user: read_user(r)?,
        })
    }
}

/// `list<allowance>, bool truncated`.
impl Wire for StatusReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_count(self.allowances.len());
        for a in &self.allowances {
            a.encode(out);
        }
        out.put_bool(self.truncated);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(StatusReply {
            allowances: r.list(
                "allowances",
                MAX_STATUS_ENTRIES + MAX_POLICY_RULES,
                ALLOWANCE_MIN,
                Allowance::decode,
            )?,
            truncated: r.bool("truncated")?,
        })
    }
}
