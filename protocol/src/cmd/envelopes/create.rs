use super::{put_name, read_name, EnvelopeMode};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_ID;
use crate::{key_slot, RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `ENVELOPE_CREATE sender total_cents count mode expires_in_ms [idempotency_key]`
/// → the new envelope's id and expiry.
///
/// The envelope lives in the sender's slot (`key_slot(sender)`, so a sender
/// can pick a slot with a `{tag}`). `expires_in_ms` 0 means the node's
/// default (24 h). With an idempotency key, a retry with the same arguments
/// returns the first envelope instead of making a second; the same key with
/// other arguments is CONFLICT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeCreate {
    pub sender: Bytes,
    pub total_cents: u64,
    pub count: u32,
    pub mode: EnvelopeMode,
    pub expires_in_ms: u64,
    pub idempotency_key: Option<Bytes>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvelopeCreateReply {
    pub id: u64,
    /// Unix ms after which grabs are EXPIRED and the rest is refunded.
    pub expires_at_ms: u64,
}

impl EnvelopeCreate {
    pub fn new(sender: impl Into<Bytes>, total_cents: u64, count: u32) -> Self {
        EnvelopeCreate {
            sender: sender.into(),
            total_cents,
            count,
            mode: EnvelopeMode::Random,
            expires_in_ms: 0,
            idempotency_key: None,
        }
    }

    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Slot(key_slot(&self.sender)))
    }
}

impl Wire for EnvelopeCreate {
    fn encode(&self, out: &mut BytesMut) {
        put_name(out, &self.sender);
        out.put_u64(self.total_cents);
        out.put_u32(self.count);
        out.put_u8(self.mode.as_u8());
        out.put_u64(self.expires_in_ms);
        match &self.idempotency_key {
            None => out.put_u8(0),
            Some(k) => {
                out.put_u8(1);
                out.put_lp(k);
            }
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let sender = read_name(r, "sender")?;
        let total_cents = r.u64("total_cents")?;
        let count = r.u32("count")?;
        let mode = EnvelopeMode::decode(r)?;
        let expires_in_ms = r.u64("expires_in_ms")?;
        let idempotency_key = r.option("idempotency key", |r| {
            let k = r.bytes("idempotency key", MAX_ID)?;
            if k.is_empty() {
                return Err(DecodeError::invalid("idempotency key", "empty"));
            }
            Ok(k)
        })?;
        Ok(EnvelopeCreate {
            sender,
            total_cents,
            count,
            mode,
            expires_in_ms,
            idempotency_key,
        })
    }
}

impl Wire for EnvelopeCreateReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.id);
        out.put_u64(self.expires_at_ms);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(EnvelopeCreateReply {
            id: r.u64("id")?,
            expires_at_ms: r.u64("expires_at_ms")?,
        })
    }
}
