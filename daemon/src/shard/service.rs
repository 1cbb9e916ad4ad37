//! The one interface every service implements, so the shard names none.
//!
//! A service (kv, links, limits, catalog, envelopes…) is a value a shard
//! owns, one per shard, living on the shard thread: its in-memory state is
//! never shared, so nothing here takes a lock. The shard calls it for:
//!
//! - **requests**: [`ShardService::apply`] with the request and a [`Cx`]
//!   (the node clock read once, the pass's [`Txn`], the shard's ID
//!   segments). Reads see every earlier write of the pass; writes are
//!   staged and committed with the pass (one WriteBatch, one fsync when any
//!   request asked for it) before any answer that could depend on them.
//! - **admission and lanes**: [`ShardService::lane`] names the FIFO lane a
//!   request waits in when the shard is behind (e.g. one per envelope, so a
//!   hot envelope can't starve the rest), and [`ShardService::admit`] may
//!   answer a request before it waits or runs (from memory, or BUSY past a
//!   per-key cap).
//! - **timers** ([`ShardService::tick`], every `storage.tick_ms`), with the
//!   same `Cx`: their writes commit like requests'.
//! - **memory**: what it keeps, by part ([`ShardService::memory`]), for
//!   INFO and /metrics.
//! - **commit failure**: memory that may reflect writes that never landed
//!   is dropped ([`ShardService::on_commit_failure`]).
//! - **slots** that arrive or leave (live migration, a new cluster map).
//!
//! How the answers of a request that runs on every shard are combined is
//! the service's [`Registration::combine`](crate::services::Registration).

use super::txn::Txn;
use crate::segments::Segments;
use crate::storage::Storage;
use rush_protocol::{Opcode, Reply, Request, RushError};

/// What a service sees while it applies one request or runs its timers.
pub struct Cx<'a, 's> {
    /// The node clock (unix ms), read once per group.
    pub now: u64,
    /// The group's reads and writes (see [`Txn`]).
    pub txn: &'a mut Txn<'s>,
    /// The slot the request was routed by, computed once when it was read
    /// (`None` for timers, imports and requests not routed by a slot): a
    /// service uses it instead of hashing the key again.
    pub slot: Option<u16>,
    /// The shard's ID segments (short codes, envelope ids).
    pub segments: &'a mut Segments,
    /// Requests waiting on this shard behind the current group (load
    /// shedding decides by it).
    pub backlog: usize,
    /// Timers must write out everything they buffer now (a slot freezes
    /// for a move, the shard stops, a tick was asked for), not when their
    /// own interval says.
    pub flush: bool,
}

/// What the shard does ahead of a request whose key it was told
/// ([`ShardService::prefetch_key`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ahead {
    /// Nothing: no key worth it.
    No,
    /// Start loading the key's row-cache row.
    Row,
    /// That, and when the row cache lacks it, read it from RocksDB in one
    /// batch with the other keys of the read buffer the cache lacks: for
    /// keys that are often absent from storage (a counter's first INCR),
    /// where a batch's filter probes cost less than one walk of the
    /// levels per key. (Present keys were no cheaper read in a batch:
    /// bench/results/NOTES.md.)
    Read,
}

pub trait ShardService: Send {
    /// On the shard thread, before the shard serves anything (build
    /// in-memory indexes from storage).
    fn open(&mut self, _storage: &Storage) {}

    /// Apply one request of this service.
    fn apply(&mut self, req: &Request, cx: &mut Cx) -> Result<Reply, RushError>;

    /// The lane a request waits in while the shard is behind: `None` is the
    /// general lane. Requests for one key must always name the same lane
    /// (their order is kept within a lane).
    fn lane(&self, _req: &Request) -> Option<u64> {
        None
    }

    /// Before a request waits or runs: `Some` answers it now, without
    /// storage (a known outcome from memory, or BUSY when `queued` requests
    /// already wait in its lane). What memory holds here is committed.
    fn admit(
        &mut self,
        _req: &Request,
        _queued: usize,
        _now: u64,
    ) -> Option<Result<Reply, RushError>> {
        None
    }

    /// The storage key a request of this service will read first, written
    /// into `key` from its frame's `body` before the frame is decoded, so
    /// the shard can start loading that row of the row cache while it runs
    /// the requests ahead of it, and how far to go ([`Ahead`]). The body
    /// may also be a RESP command's first argument as the request's body
    /// would begin, or a forwarded request encoded again. A hint:
    /// [`Ahead::No`] (the default) for requests not worth it; a wrong key
    /// costs only a prefetch (or a read). A service may also start loading
    /// memory of its own here and note what it looked at for
    /// [`ShardService::look_ahead_done`] (the catalog does).
    fn prefetch_key(&mut self, _opcode: Opcode, _body: &[u8], _key: &mut Vec<u8>) -> Ahead {
        Ahead::No
    }

    /// The shard has looked at every request of a read buffer (or a
    /// forwarded batch) with [`ShardService::prefetch_key`], and runs them
    /// next: a service that started loading its keys' first lines there can
    /// load what those lines point at now, while they arrive together
    /// instead of one request at a time.
    fn look_ahead_done(&mut self) {}

    /// A group starts: `backlog` requests wait behind it.
    fn begin_group(&mut self, _backlog: usize) {}

    /// Periodic work; writes are staged in `cx.txn` and committed as one
    /// group (each unit of work ends with `cx.txn.finish_request(ok)`).
    fn tick(&mut self, _cx: &mut Cx) {}

    /// Add what this service keeps in memory to `into` (at each tick; see
    /// `memory.rs`): its caches, filters and hot state, by part.
    fn memory(&self, _into: &mut crate::memory::Use) {}

    /// The hot lanes' deepest queues since the last call, for metrics.
    fn lane_peaks(&mut self, _peaks: &hashbrown::HashMap<u64, usize>) {}

    /// A group commit failed: drop in-memory state that may reflect it.
    fn on_commit_failure(&mut self) {}

    /// Slots become this shard's: stage what must be written in the same
    /// commit that makes them so (e.g. envelope refund stamps).
    fn prepare_import(&mut self, _slots: &[u16], _cx: &mut Cx) -> Result<(), RushError> {
        Ok(())
    }

    /// Slots became this shard's (committed): load their state.
    fn on_slots_imported(&mut self, _slots: &[u16], _storage: &Storage) {}

    /// Slots are no longer this shard's: forget their state.
    fn on_slots_dropped(&mut self, _slots: &[u16]) {}
}
