use super::PolicyDef;
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{RushError, Target};
use bytes::BytesMut;

/// `LIMIT_POLICY_SET policy` (admin) → whether it is new, and the policy as
/// stored.
///
/// Creates or replaces a policy on every shard of the node and stores it
/// durably, so it outlives restarts (a stored policy overrides one of the same
/// name in the config file). The node fills in defaults first (a daily
/// window's time zone, a sliding window's buckets); an unknown time zone is
/// BAD_REQUEST. Counts already recorded stay: they are keyed by rule name, so
/// a rule keeps its counts across a replacement that keeps its name and
/// window. Needs admin rights, like every request that runs on all shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitPolicySet {
    pub policy: PolicyDef,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicySetReply {
    /// No policy of this name existed before.
    pub created: bool,
    pub policy: PolicyDef,
}

impl LimitPolicySet {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::AllShards)
    }
}

impl Wire for LimitPolicySet {
    fn encode(&self, out: &mut BytesMut) {
        self.policy.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LimitPolicySet {
            policy: PolicyDef::decode(r)?,
        })
    }
}

impl Wire for PolicySetReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_bool(self.created);
        self.policy.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(PolicySetReply {
            created: r.bool("created")?,
            policy: PolicyDef::decode(r)?,
        })
    }
}
