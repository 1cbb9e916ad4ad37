//! Red envelopes: typed calls for the ENVELOPE_* requests.

use crate::{Client, ClientError, BACKOFF_MAX, BACKOFF_START};
use bytes::Bytes;
use rush_protocol::cmd::{
    EnvelopeAudit, EnvelopeAuditReply, EnvelopeCreate, EnvelopeCreateReply, EnvelopeGrab,
    EnvelopeGrabReply, EnvelopeInfo, EnvelopeInfoReply, EnvelopeRefunds, EnvelopeRefundsAck,
    EnvelopeRefundsReply, RefundCursor,
};
use rush_protocol::ErrorCode;
use std::time::Instant;

impl Client {
    /// Create an envelope (see [`EnvelopeCreate`] for every argument).
    ///
    /// With an idempotency key the create is safe to resend, so it is
    /// retried after a lost connection like an idempotent request: the node
    /// answers a retry with the first envelope.
    pub async fn envelope_create(
        &self,
        create: EnvelopeCreate,
    ) -> Result<EnvelopeCreateReply, ClientError> {
        if create.idempotency_key.is_none() {
            return self.call(create).await;
        }
        let deadline = Instant::now() + self.inner.opts.retry_deadline;
        let mut backoff = BACKOFF_START;
        loop {
            let result = self.call(create.clone()).await;
            let retry = match &result {
                Err(ClientError::ConnectionLost(_)) => true,
                Err(e) => e.code() == Some(ErrorCode::Unavailable),
                Ok(_) => false,
            };
            if !retry || Instant::now() + backoff > deadline {
                return result;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// Grab a share of envelope `id` for `user`. A repeat by the same user
    /// answers the same amount with `repeated` set. EMPTY, EXPIRED and BUSY
    /// come back as server errors (see [`ClientError::code`]).
    pub async fn envelope_grab(
        &self,
        id: u64,
        user: impl Into<Bytes>,
    ) -> Result<EnvelopeGrabReply, ClientError> {
        self.call(EnvelopeGrab {
            id,
            user: user.into(),
        })
        .await
    }

    pub async fn envelope_info(&self, id: u64) -> Result<EnvelopeInfoReply, ClientError> {
        self.call(EnvelopeInfo { id }).await
    }

    /// Up to `limit` refunds after `after` (admin). Pass the reply's `next`
    /// back in; acknowledge it once those refunds are paid.
    pub async fn envelope_refunds(
        &self,
        after: RefundCursor,
        limit: u32,
    ) -> Result<EnvelopeRefundsReply, ClientError> {
        self.call(EnvelopeRefunds { after, limit }).await
    }

    /// Refunds up to `cursor` are paid: they leave the stream (admin).
    /// Returns how many were removed.
    pub async fn envelope_refunds_ack(&self, cursor: RefundCursor) -> Result<u64, ClientError> {
        self.call(EnvelopeRefundsAck { cursor }).await
    }

    /// Check every envelope's books on the node (admin).
    pub async fn envelope_audit(&self) -> Result<EnvelopeAuditReply, ClientError> {
        self.call(EnvelopeAudit {}).await
    }
}
