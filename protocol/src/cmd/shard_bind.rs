use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `SHARD_BIND shard` → this connection is served by that shard of the
/// node from now on (its answer already comes from there). Requests for
/// the shard's own slots then run on the thread that reads them; others
/// still work (the node forwards them between its shards). Must be sent
/// with no other request in flight on the connection (CONFLICT otherwise);
/// a shard the node doesn't run is BAD_REQUEST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardBind {
    pub shard: u16,
}

/// The shard the connection is bound to, how many the node runs, and the
/// bound shard's slots (`first_slot..=last_slot`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardBindReply {
    pub shard: u16,
    pub shards: u16,
    pub first_slot: u16,
    pub last_slot: u16,
}

impl ShardBind {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for ShardBind {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u16(self.shard);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ShardBind {
            shard: r.u16("shard")?,
        })
    }
}

impl Wire for ShardBindReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u16(self.shard);
        out.put_u16(self.shards);
        out.put_u16(self.first_slot);
        out.put_u16(self.last_slot);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ShardBindReply {
            shard: r.u16("shard")?,
            shards: r.u16("shards")?,
            first_slot: r.u16("first slot")?,
            last_slot: r.u16("last slot")?,
        })
    }
}
