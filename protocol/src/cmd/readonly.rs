use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `READONLY on` → whether this connection may read from a replica (Redis
/// Cluster's READONLY / READWRITE). On a replica, a connection that set it
/// has its key reads (GET, EXISTS, TTL, HGET, HGETALL, HLEN) of its
/// primary's slots answered from the replica's copy, which may be behind
/// the primary by its replication lag, instead of MOVED. Anything else —
/// writes, short links, limits, envelopes (money and ID issuance) — is
/// still MOVED to the primary. On a primary it changes nothing. Answers the
/// flag as set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOnly {
    pub on: bool,
}

impl ReadOnly {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for ReadOnly {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.on as u8);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReadOnly { on: r.bool("on")? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn only_a_bool_byte_reads() {
        assert_eq!(
            ReadOnly::decode_body(Bytes::from_static(&[1])).unwrap(),
            ReadOnly { on: true }
        );
        for bad in [&[2u8][..], &[], &[0, 0]] {
            assert!(
                ReadOnly::decode_body(Bytes::copy_from_slice(bad)).is_err(),
                "{bad:?}"
            );
        }
    }
}
