use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::BytesMut;

/// `DBSIZE` → how many generic keys (strings and hashes) the node holds in
/// the slots it owns; expired keys are not counted. The node counts them on
/// a thread of its own, never a shard's, slot by slot while writes go on:
/// it costs a read of every key (as Kvrocks' `DBSIZE SCAN`), not a lookup
/// as in Redis.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DbSize {}

impl DbSize {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for DbSize {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(DbSize {})
    }
}
