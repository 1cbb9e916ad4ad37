use super::read_name;
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::{key_slot, RushError, Target};
use bytes::BytesMut;

/// `LIMIT_POLICY_GET name` → the policy, or NOT_FOUND.
///
/// Every shard holds every policy, so this runs on the shard of the name's
/// slot (any shard would do; this spreads the reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitPolicyGet {
    pub name: String,
}

impl LimitPolicyGet {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(key_slot(self.name.as_bytes())))
    }
}

impl Wire for LimitPolicyGet {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(self.name.as_bytes());
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LimitPolicyGet {
            name: read_name(r, "policy")?,
        })
    }
}
