use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_TEXT;
use crate::{RushError, Target};
use bytes::{Bytes, BytesMut};

/// `PING payload` → `Pong payload`. Answered by the node, not a shard.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Ping {
    pub payload: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pong {
    pub payload: Bytes,
}

impl Ping {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for Ping {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.payload);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Ping {
            payload: r.bytes("payload", MAX_TEXT)?,
        })
    }
}

impl Wire for Pong {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.payload);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Pong {
            payload: r.bytes("payload", MAX_TEXT)?,
        })
    }
}
