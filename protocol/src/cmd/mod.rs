//! One file per request type: the request, its reply and their wire forms.
//! The opcode table is in `lib.rs`; PROTOCOL.md documents every body.

mod batch;
pub mod catalog;
mod check;
pub mod cluster;
mod cluster_slots;
mod compact;
mod dbsize;
mod del;
pub mod envelopes;
mod exists;
mod expire;
mod get;
mod hdel;
mod hello;
mod hget;
mod hgetall;
mod hincrby;
mod hlen;
mod hset;
mod incrby;
mod info;
pub mod limits;
pub mod links;
mod ping;
mod readonly;
mod set;
mod set_keepttl;
mod shard_bind;
mod shards;
mod ttl;

pub use batch::{Batch, BatchReply};
pub use catalog::*;
pub use check::{Check, Cond};
pub use cluster::*;
pub use cluster_slots::{ClusterNode, ClusterSlots, ClusterSlotsReply, SlotRange};
pub use compact::{ClockAdvance, Compact};
pub use dbsize::DbSize;
pub use del::Del;
pub use envelopes::*;
pub use exists::Exists;
pub use expire::Expire;
pub use get::Get;
pub use hdel::HDel;
pub use hello::{Hello, HelloReply};
pub use hget::HGet;
pub use hgetall::{HGetAll, HGetAllReply};
pub use hincrby::HIncrBy;
pub use hlen::HLen;
pub use hset::HSet;
pub use incrby::IncrBy;
pub use info::{Info, InfoReply};
pub use limits::*;
pub use links::*;
pub use ping::{Ping, Pong};
pub use readonly::ReadOnly;
pub use set::{Set, SetCond};
pub use set_keepttl::SetKeepTtl;
pub use shard_bind::{ShardBind, ShardBindReply};
pub use shards::{Shards, ShardsReply};
pub use ttl::{Ttl, TtlReply};

use crate::codec::{DecodeError, Reader};
use crate::limits::{MAX_FIELD, MAX_KEY};
use crate::{key_slot, RushError, Target};
use bytes::Bytes;

/// The target of a single-key request.
pub(crate) fn key_target(key: &[u8]) -> Result<Target, RushError> {
    Ok(Target::Slot(key_slot(key)))
}

pub(crate) fn read_key(r: &mut Reader) -> Result<Bytes, DecodeError> {
    r.bytes("key", MAX_KEY)
}

pub(crate) fn read_field(r: &mut Reader) -> Result<Bytes, DecodeError> {
    r.bytes("field", MAX_FIELD)
}
