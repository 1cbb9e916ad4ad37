use super::PolicyDef;
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_POLICIES;
use crate::{RushError, Target};
use bytes::BytesMut;

/// `LIMIT_POLICY_LIST` → every policy of the node, sorted by name. Runs on the
/// shard of slot 0 (every shard holds the same table).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LimitPolicyList {}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyListReply {
    pub policies: Vec<PolicyDef>,
}

impl LimitPolicyList {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(0))
    }
}

impl Wire for LimitPolicyList {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LimitPolicyList {})
    }
}

impl Wire for PolicyListReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_count(self.policies.len());
        for p in &self.policies {
            p.encode(out);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(PolicyListReply {
            policies: r.list("policies", MAX_POLICIES, 6, PolicyDef::decode)?,
        })
    }
}
