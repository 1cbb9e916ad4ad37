use crate::{Client, ClientError};
use bytes::Bytes;
use rush_protocol::cmd::*;
use rush_protocol::Reply;
use std::time::Duration;

/// Builds a BATCH: every operation on keys of one slot (use a `{hashtag}`),
/// applied atomically when [`BatchBuilder::exec`] runs it.
///
/// ```no_run
/// # async fn demo(client: rush_client::Client) -> Result<(), rush_client::ClientError> {
/// use rush_client::protocol::cmd::Cond;
/// // "at most 5 a day": count only if the total is still below 5.
/// let replies = client
///     .batch()
///     .check("{u1}:total", None, Cond::Lt(5))
///     .incr_by("{u1}:total", 1)
///     .expire("{u1}:total", std::time::Duration::from_secs(86_400))
///     .exec()
///     .await?;
/// # Ok(()) }
/// ```
pub struct BatchBuilder {
    client: Client,
    batch: Batch,
}

impl BatchBuilder {
    pub(crate) fn new(client: Client) -> Self {
        BatchBuilder {
            client,
            batch: Batch::default(),
        }
    }

    pub fn get(mut self, key: impl Into<Bytes>) -> Self {
        self.batch.push(Get { key: key.into() });
        self
    }

    pub fn set(mut self, key: impl Into<Bytes>, value: impl Into<Bytes>, ttl: Duration) -> Self {
        self.batch.push(Set {
            key: key.into(),
            value: value.into(),
            ttl_ms: ttl.as_millis() as u64,
            cond: SetCond::Always,
        });
        self
    }

    pub fn del(mut self, key: impl Into<Bytes>) -> Self {
        self.batch.push(Del { key: key.into() });
        self
    }

    pub fn incr_by(mut self, key: impl Into<Bytes>, delta: i64) -> Self {
        self.batch.push(IncrBy {
            key: key.into(),
            delta,
        });
        self
    }

    pub fn expire(mut self, key: impl Into<Bytes>, ttl: Duration) -> Self {
        self.batch.push(Expire {
            key: key.into(),
            ttl_ms: ttl.as_millis() as u64,
        });
        self
    }

    pub fn hset(
        mut self,
        key: impl Into<Bytes>,
        field: impl Into<Bytes>,
        value: impl Into<Bytes>,
    ) -> Self {
        self.batch.push(HSet {
            key: key.into(),
            fields: vec![(field.into(), value.into())],
        });
        self
    }

    pub fn hincr_by(mut self, key: impl Into<Bytes>, field: impl Into<Bytes>, delta: i64) -> Self {
        self.batch.push(HIncrBy {
            key: key.into(),
            field: field.into(),
            delta,
        });
        self
    }

    pub fn hget(mut self, key: impl Into<Bytes>, field: impl Into<Bytes>) -> Self {
        self.batch.push(HGet {
            key: key.into(),
            field: field.into(),
        });
        self
    }

    /// A condition; if it doesn't hold the batch fails with CONDITION_FAILED
    /// and writes nothing.
    pub fn check(mut self, key: impl Into<Bytes>, field: Option<&str>, cond: Cond) -> Self {
        self.batch.push(Check {
            key: key.into(),
            field: field.map(|f| Bytes::copy_from_slice(f.as_bytes())),
            cond,
        });
        self
    }

    /// Any key operation.
    pub fn op(mut self, op: impl Into<rush_protocol::Request>) -> Self {
        self.batch.push(op);
        self
    }

    pub fn into_batch(self) -> Batch {
        self.batch
    }

    pub async fn exec(self) -> Result<Vec<Reply>, ClientError> {
        self.client.exec_batch(self.batch).await
    }
}
