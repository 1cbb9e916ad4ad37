use super::{put_name, read_name, RefundCursor};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_REFUNDS_PAGE;
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `ENVELOPE_REFUNDS after limit` (admin) → up to `limit` refunds that come
/// after the cursor `after` in the node's refund stream, in stream order,
/// and the cursor to continue from.
///
/// The stream holds every refund not yet acknowledged (ENVELOPE_REFUNDS_ACK),
/// across all shards, ordered by `(stamp, envelope id)`. A refund written
/// after a read always sorts after the cursor that read returned, so a
/// consumer that keeps passing `next` back never misses one. A cursor the
/// node never handed out (ahead of the stream) is BAD_REQUEST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeRefunds {
    pub after: RefundCursor,
    /// 1 to [`MAX_REFUNDS_PAGE`].
    pub limit: u32,
}

/// One refund: the rest of an expired envelope, owed to its sender.
/// The envelope id identifies the refund: use it as the payment's
/// idempotency key, since a stream is read at least once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refund {
    pub cursor: RefundCursor,
    pub sender: Bytes,
    pub amount_cents: u64,
    /// When the envelope's refund was written (unix ms).
    pub refunded_at_ms: u64,
}

impl Refund {
    pub fn envelope_id(&self) -> u64 {
        self.cursor.id
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeRefundsReply {
    pub refunds: Vec<Refund>,
    /// Pass this as `after` next time (and acknowledge it once paid): every
    /// refund up to it has been returned. It moves on even when no refund
    /// was returned.
    pub next: RefundCursor,
    /// More refunds are ready right now: read again without waiting.
    pub more: bool,
}

impl EnvelopeRefundsReply {
    /// One stream from the streams of parts (a node's shards, or a
    /// cluster's nodes), merged by position `(stamp, id)` up to the lowest
    /// bound any part is complete to, at most `limit` refunds. That bound
    /// is the next cursor: every part promises never to stamp a refund
    /// below it again (a node re-stamps the refunds of a slot that moves to
    /// it), so one cursor serves them all, and acknowledging it removes
    /// exactly what was read from every part. `None` when there are no parts.
    pub fn merge(parts: Vec<EnvelopeRefundsReply>, limit: usize) -> Option<EnvelopeRefundsReply> {
        let bound = parts.iter().map(|p| p.next).min()?;
        let mut more = parts.iter().any(|p| p.more);
        let mut refunds: Vec<Refund> = parts
            .into_iter()
            .flat_map(|p| p.refunds)
            .filter(|r| r.cursor <= bound)
            .collect();
        refunds.sort_unstable_by_key(|r| r.cursor);
        let next = if refunds.len() > limit {
            refunds.truncate(limit);
            more = true;
            refunds.last().map(|r| r.cursor).unwrap_or(bound)
        } else {
            bound
        };
        Some(EnvelopeRefundsReply {
            refunds,
            next,
            more,
        })
    }
}

impl EnvelopeRefunds {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::AllShards)
    }
}

impl Wire for EnvelopeRefunds {
    fn encode(&self, out: &mut BytesMut) {
        self.after.encode(out);
        out.put_u32(self.limit);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let after = RefundCursor::decode(r)?;
        let limit = r.u32("limit")?;
        if limit == 0 || limit as usize > MAX_REFUNDS_PAGE {
            return Err(DecodeError::invalid(
                "limit",
                format!("{limit} is not within 1..={MAX_REFUNDS_PAGE}"),
            ));
        }
        Ok(EnvelopeRefunds { after, limit })
    }
}

impl Wire for Refund {
    fn encode(&self, out: &mut BytesMut) {
        self.cursor.encode(out);
        put_name(out, &self.sender);
        out.put_u64(self.amount_cents);
        out.put_u64(self.refunded_at_ms);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Refund {
            cursor: RefundCursor::decode(r)?,
            sender: read_name(r, "sender")?,
            amount_cents: r.u64("amount_cents")?,
            refunded_at_ms: r.u64("refunded_at_ms")?,
        })
    }
}

impl Wire for EnvelopeRefundsReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_count(self.refunds.len());
        for r in &self.refunds {
            r.encode(out);
        }
        self.next.encode(out);
        out.put_u8(self.more as u8);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(EnvelopeRefundsReply {
            refunds: r.list("refunds", MAX_REFUNDS_PAGE, 37, Refund::decode)?,
            next: RefundCursor::decode(r)?,
            more: r.bool("more")?,
        })
    }
}
