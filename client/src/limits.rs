//! Purchase limits: one atomic, idempotent request per order.
//!
//! ```no_run
//! # async fn demo(client: rush_client::Client) -> Result<(), rush_client::ClientError> {
//! use rush_client::protocol::cmd::OrderItem;
//! match client
//!     .limit_acquire("flash-sale", "user-42", "order-1001", [OrderItem::new("sku-1", 1)])
//!     .await
//! {
//!     Ok(reply) => println!("allowed; replayed: {}", reply.replayed),
//!     Err(e) => match e.limit_denial() {
//!         Some(d) => println!("limited by rule {} on {:?}", d.rule, d.item),
//!         None => return Err(e),
//!     },
//! }
//! # Ok(()) }
//! ```

use crate::{Client, ClientError};
use bytes::Bytes;
use rush_protocol::cmd::*;
use rush_protocol::{ErrorDetail, LimitDenial};

/// Why LIMIT_ACQUIRE said LIMITED: the first rule and item that failed.
impl ClientError {
    /// The denial, when this is a LIMITED answer.
    pub fn limit_denial(&self) -> Option<LimitDenial> {
        match self {
            ClientError::Server(e) => match &e.detail {
                ErrorDetail::Limit(denial) => Some(denial.clone()),
                _ => None,
            },
            _ => None,
        }
    }
}

impl Client {
    /// Count an order against a policy, all rules and items at once; LIMITED
    /// (see [`ClientError::limit_denial`]) records nothing. Safe to retry:
    /// the same order id is counted once. Retried automatically after a lost
    /// connection.
    pub async fn limit_acquire(
        &self,
        policy: impl Into<String>,
        user: impl Into<Bytes>,
        order_id: impl Into<String>,
        items: impl IntoIterator<Item = OrderItem>,
    ) -> Result<AcquireReply, ClientError> {
        self.call(LimitAcquire {
            policy: policy.into(),
            user: user.into(),
            order_id: order_id.into(),
            items: items.into_iter().collect(),
        })
        .await
    }

    /// Give an order's counts back (once; a repeat answers `replayed`).
    pub async fn limit_release(
        &self,
        policy: impl Into<String>,
        user: impl Into<Bytes>,
        order_id: impl Into<String>,
    ) -> Result<ReleaseReply, ClientError> {
        self.call(LimitRelease {
            policy: policy.into(),
            user: user.into(),
            order_id: order_id.into(),
        })
        .await
    }

    /// A user's counts and resets under a policy.
    pub async fn limit_status(
        &self,
        policy: impl Into<String>,
        user: impl Into<Bytes>,
    ) -> Result<StatusReply, ClientError> {
        self.call(LimitStatus {
            policy: policy.into(),
            user: user.into(),
        })
        .await
    }

    /// Create or replace a policy on the node (admin).
    pub async fn limit_policy_set(&self, policy: PolicyDef) -> Result<PolicySetReply, ClientError> {
        self.call(LimitPolicySet { policy }).await
    }

    pub async fn limit_policy_get(
        &self,
        name: impl Into<String>,
    ) -> Result<PolicyDef, ClientError> {
        self.call(LimitPolicyGet { name: name.into() }).await
    }

    pub async fn limit_policy_list(&self) -> Result<Vec<PolicyDef>, ClientError> {
        self.call(LimitPolicyList {}).await.map(|r| r.policies)
    }
}
