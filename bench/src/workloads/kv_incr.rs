//! `kv-incr`: INCR of a counter from the distribution — `redis-benchmark -t
//! incr` parity. Counters live under their own prefix (as in
//! redis-benchmark), so a previous `kv-set` never makes them WRONG_TYPE.

use crate::stats::{OpError, Outcome};
use crate::workload::{KeyPicker, Params, RedisConn, RushConn, Workload};
use bytes::Bytes;
use rush_protocol::cmd::IncrBy;

const PREFIX: &[u8] = b"counter:";

pub struct KvIncr {
    params: Params,
}

impl Workload for KvIncr {
    const NAME: &'static str = "kv-incr";
    const ABOUT: &'static str = "INCR counter (redis-benchmark parity)";
    type Lane = KeyPicker;

    fn new(params: &Params) -> anyhow::Result<Self> {
        Ok(KvIncr {
            params: params.clone(),
        })
    }

    fn lane(&self, index: u64) -> KeyPicker {
        KeyPicker::new(&self.params, index)
    }

    async fn rush(&self, lane: &mut KeyPicker, conn: &RushConn) -> Result<Outcome, OpError> {
        let key = Bytes::copy_from_slice(lane.next_key(PREFIX));
        conn.call(&IncrBy { key, delta: 1 }).await?;
        Ok(Outcome::Done)
    }

    async fn redis(&self, lane: &mut KeyPicker, conn: &mut RedisConn) -> Result<Outcome, OpError> {
        redis::cmd("INCR")
            .arg(lane.next_key(PREFIX))
            .query_async::<i64>(conn)
            .await?;
        Ok(Outcome::Done)
    }
}
