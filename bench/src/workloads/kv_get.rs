//! `kv-get`: GET of a key from the distribution — `redis-benchmark -t get`
//! parity. With `--preload` every key `0..keys` is written first (the
//! `kv-set` keys and value size), and then a missing or wrong value is an
//! error; without it a missing key is counted as a miss.

use crate::stats::{OpError, Outcome};
use crate::workload::{
    filler_value, format_key, redis_bulk, rush_bulk, KeyPicker, Params, RedisConn, RushConn,
    Workload,
};
use crate::workloads::kv_set::PREFIX;
use bytes::Bytes;
use rush_protocol::cmd::{Get, Set};

pub struct KvGet {
    params: Params,
    value: Bytes,
}

impl KvGet {
    fn check(&self, found: Option<usize>) -> Result<Outcome, OpError> {
        match (found, self.params.preload) {
            (Some(len), true) if len != self.params.value_size => Err(OpError::new(
                "WRONG_VALUE",
                format!("preloaded {} bytes, read {len}", self.params.value_size),
            )),
            (Some(_), _) => Ok(Outcome::Done),
            (None, true) => Err(OpError::new("MISSING", "a preloaded key was not found")),
            (None, false) => Ok(Outcome::Miss),
        }
    }
}

impl Workload for KvGet {
    const NAME: &'static str = "kv-get";
    const ABOUT: &'static str =
        "GET key (redis-benchmark parity; --preload writes every key first)";
    const READS_PRELOADED: bool = true;
    const SWEEP: bool = true;
    type Lane = KeyPicker;

    fn new(params: &Params) -> anyhow::Result<Self> {
        Ok(KvGet {
            params: params.clone(),
            value: filler_value(params.value_size),
        })
    }

    fn lane(&self, index: u64) -> KeyPicker {
        KeyPicker::new(&self.params, index)
    }

    async fn preload_rush(&self, conns: &[RushConn]) -> anyhow::Result<u64> {
        rush_bulk(conns, self.params.keys, |i| {
            let mut key = Vec::with_capacity(PREFIX.len() + 12);
            format_key(&mut key, PREFIX, i);
            Set::new(key, self.value.clone())
        })
        .await
    }

    async fn preload_redis(&self, conns: &[RedisConn]) -> anyhow::Result<u64> {
        redis_bulk(conns, self.params.keys, |i, pipe| {
            let mut key = Vec::with_capacity(PREFIX.len() + 12);
            format_key(&mut key, PREFIX, i);
            pipe.cmd("SET").arg(key).arg(&self.value[..]);
        })
        .await
    }

    async fn rush(&self, lane: &mut KeyPicker, conn: &RushConn) -> Result<Outcome, OpError> {
        let key = Bytes::copy_from_slice(lane.next_key(PREFIX));
        let found = conn.call(&Get { key }).await?;
        self.check(found.map(|v| v.len()))
    }

    async fn redis(&self, lane: &mut KeyPicker, conn: &mut RedisConn) -> Result<Outcome, OpError> {
        let found: Option<Vec<u8>> = redis::cmd("GET")
            .arg(lane.next_key(PREFIX))
            .query_async(conn)
            .await?;
        self.check(found.map(|v| v.len()))
    }
}
