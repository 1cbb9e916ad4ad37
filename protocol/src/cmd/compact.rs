use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `COMPACT` (admin): compact every shard's storage now. Expired values are
/// dropped by the compaction filter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Compact {}

impl Compact {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::AllShards)
    }
}

impl Wire for Compact {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Compact {})
    }
}

/// `CLOCK_ADVANCE ms` (admin, test support) → the node's new time in unix ms.
/// Only accepted when the daemon runs with `debug.clock_control = true`; every
/// shard runs its timers (expiry, refunds) before the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockAdvance {
    pub ms: u64,
}

impl ClockAdvance {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::AllShards)
    }
}

impl Wire for ClockAdvance {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.ms);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ClockAdvance { ms: r.u64("ms")? })
    }
}
