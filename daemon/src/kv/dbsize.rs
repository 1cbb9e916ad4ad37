//! DBSIZE: the generic keys in the node's slots. Not a shard request: the
//! node counts on a blocking thread of its own (`server::node_cmds`), so
//! no shard waits while every key is read.

use super::storage_error;
use crate::storage::keys::{self, ks};
use crate::storage::{value, Storage};
use rush_protocol::RushError;

/// Live generic keys (strings and hashes) of every slot `owns` admits,
/// over `shards` shards, as of `now_ms`. Expired values the compaction
/// filter has not dropped yet are not counted.
pub fn count(
    storage: &Storage,
    shards: usize,
    owns: impl Fn(u16) -> bool,
    now_ms: u64,
) -> Result<u64, RushError> {
    let mut n = 0u64;
    for shard in 0..shards {
        for slot in crate::shard::route::slots_of_shard(shard, shards).filter(|&s| owns(s)) {
            let (from, to) = keys::keyspace_range(slot, ks::KV);
            storage
                .scan(shard, &from, &to, |_, v| {
                    if value::expiry_of(v).is_some_and(|at| value::is_live(at, now_ms)) {
                        n += 1;
                    }
                    true
                })
                .map_err(storage_error)?;
        }
    }
    Ok(n)
}
