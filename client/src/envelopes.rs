//! Red envelopes: typed calls for the ENVELOPE_* requests.

use crate::{Client, ClientError};
use bytes::Bytes;
use rush_protocol::cmd::{
    EnvelopeAudit, EnvelopeAuditReply, EnvelopeCreate, EnvelopeCreateReply, EnvelopeGrab,
    EnvelopeGrabReply, EnvelopeInfo, EnvelopeInfoReply, EnvelopeRefunds, EnvelopeRefundsAck,
    EnvelopeRefundsReply, RefundCursor,
};

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
        // `call` knows a create with a key is safe to resend.
        self.call(create).await
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
    ///
    /// Against a cluster this reads every node and merges their streams:
    /// one cursor for the whole cluster (see the `routing` module for why
    /// that is sound, and what a slot move means for delivery). To follow
    /// one node's stream only, send [`EnvelopeRefunds`] with
    /// [`Client::call_on`].
    pub async fn envelope_refunds(
        &self,
        after: RefundCursor,
        limit: u32,
    ) -> Result<EnvelopeRefundsReply, ClientError> {
        self.call(EnvelopeRefunds { after, limit }).await
    }

    /// Refunds up to `cursor` are paid: they leave the stream (admin).
    /// Returns how many were removed (on every node of a cluster).
    pub async fn envelope_refunds_ack(&self, cursor: RefundCursor) -> Result<u64, ClientError> {
        self.call(EnvelopeRefundsAck { cursor }).await
    }

    /// Check every envelope's books (admin): on every node of a cluster,
    /// summed. [`Client::call_on`] audits one node.
    pub async fn envelope_audit(&self) -> Result<EnvelopeAuditReply, ClientError> {
        self.call(EnvelopeAudit {}).await
    }
}
