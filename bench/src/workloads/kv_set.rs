//! `kv-set`: SET of a 100-byte value (by default) to a key from the
//! distribution — `redis-benchmark -t set` parity.
//!
//! Rush acknowledges a SET once it is synced (group commit); the report
//! states each Redis row's `appendfsync`.

use crate::stats::{OpError, Outcome};
use crate::workload::{filler_value, KeyPicker, Params, RedisConn, RushConn, Workload};
use bytes::Bytes;
use rush_protocol::cmd::Set;

/// Shared with `kv-get`, which reads what this writes.
pub const PREFIX: &[u8] = b"key:";

pub struct KvSet {
    params: Params,
    /// One shared buffer: cloning `Bytes` is a reference count, not a copy.
    value: Bytes,
}

impl Workload for KvSet {
    const NAME: &'static str = "kv-set";
    const ABOUT: &'static str = "SET key value (100-byte value, redis-benchmark parity)";
    const SWEEP: bool = true;
    type Lane = KeyPicker;

    fn new(params: &Params) -> anyhow::Result<Self> {
        Ok(KvSet {
            params: params.clone(),
            value: filler_value(params.value_size),
        })
    }

    fn lane(&self, index: u64) -> KeyPicker {
        KeyPicker::new(&self.params, index)
    }

    async fn rush(&self, lane: &mut KeyPicker, conn: &RushConn) -> Result<Outcome, OpError> {
        let key = Bytes::copy_from_slice(lane.next_key(PREFIX));
        conn.call(&Set::new(key, self.value.clone())).await?;
        Ok(Outcome::Done)
    }

    async fn redis(&self, lane: &mut KeyPicker, conn: &mut RedisConn) -> Result<Outcome, OpError> {
        redis::cmd("SET")
            .arg(lane.next_key(PREFIX))
            .arg(&self.value[..])
            .query_async::<()>(conn)
            .await?;
        Ok(Outcome::Done)
    }
}
