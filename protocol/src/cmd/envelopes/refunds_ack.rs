use super::RefundCursor;
use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::BytesMut;

/// `ENVELOPE_REFUNDS_ACK cursor` (admin) → how many refunds it removed.
///
/// The payment system has paid every refund up to and including `cursor`:
/// they leave the stream for good (durably, before the answer), so a
/// consumer that restarts reads on from there. Acknowledging again is
/// harmless. A cursor ahead of the stream is BAD_REQUEST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeRefundsAck {
    pub cursor: RefundCursor,
}

impl EnvelopeRefundsAck {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::AllShards)
    }
}

impl Wire for EnvelopeRefundsAck {
    fn encode(&self, out: &mut BytesMut) {
        self.cursor.encode(out);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(EnvelopeRefundsAck {
            cursor: RefundCursor::decode(r)?,
        })
    }
}
