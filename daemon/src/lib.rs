//! rushd: one sharded, disk-backed daemon for short links, purchase limits,
//! the Bloom-guarded catalog and red envelopes. See ARCHITECTURE.md at the top
//! of the repository for the map; this crate is the library, `rushd` a thin
//! main.
//!
//! # The request path
//!
//! The listener ([`server`]) only accepts; each connection is handed to a
//! shard, and that shard's thread serves it from then on ([`shard`]): it
//! reads the socket, parses frames in place, runs requests for its own
//! slots inline (routing in [`shard::route`]), forwards the others to their
//! shard in one batch per pass, commits the pass's writes as one group (one
//! record of the shard's own log, fsynced: [`storage::log`]; a write-back
//! thread writes them to RocksDB later, in sorted runs:
//! [`shard::pending`], [`shard::write_back`]) and writes each connection's
//! answers with one write. A shard-aware client
//! (SHARDS, SHARD_BIND in PROTOCOL.md) keeps a connection per shard, so
//! nothing is forwarded. Per-request metrics are per-shard cells
//! ([`metrics::local`]), merged when `/metrics` is scraped.
//!
//! # Adding a service
//!
//! A service is a type that implements [`shard::service::ShardService`]
//! (apply, lanes and admission, timers, commit failure, slots imported and
//! dropped, and optionally the look-ahead: `prefetch_key` names the key a
//! request will read before the shard runs it, `look_ahead_done` loads what
//! those keys lead to), one instance per shard, living on the shard thread.
//! To add one:
//!
//! 1. **Protocol.** Pick a free opcode range in `rush_protocol::Service`
//!    and write one file per request in `protocol/src/cmd/<service>/` (the
//!    request, its reply, their wire forms and the slot it runs in), one
//!    line per request in the `commands!` table of `protocol/src/lib.rs`,
//!    its section in PROTOCOL.md with golden vectors, and its round trip in
//!    `protocol/tests/roundtrip.rs`.
//! 2. **Its folder here** (`daemon/src/<service>/`): the state type, its
//!    `ShardService` impl (read and write through the pass's
//!    [`shard::txn::Txn`]: writes commit with the pass; call
//!    `txn.require_sync()` for anything that must be fsynced before its
//!    answer; scan through `txn.scan` or `txn.scan_stored`, never
//!    `Storage::scan` on the shard thread, which doesn't see the writes
//!    still pending in the shard log; a service that caches what it reads
//!    itself reads with `txn.get_uncaching`, so the row cache holds no
//!    second copy), a `REGISTRATION` constant saying how a shard builds it and
//!    how answers of a request that runs on every shard combine, one file
//!    per request as in the protocol crate, its storage layout in
//!    [`storage::keys`] (keyspace bytes, value kinds and any sequence kinds
//!    from its range in each table, its key builders in a file of its own
//!    there), its config section and its metrics (per-shard counters from
//!    [`metrics::local`]).
//! 3. **One registration line** in [`services::SERVICES`].
//!
//! The shard, the listener and the node name no service: they route by the
//! opcode's range and call the trait.

pub mod auth;
pub mod bloom;
pub mod catalog;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod envelopes;
pub mod http;
pub mod kv;
pub mod limits;
pub mod links;
pub mod memory;
pub mod metrics;
pub mod replication;
pub mod resp;
pub mod segments;
pub mod server;
pub mod services;
pub mod shard;
pub mod storage;
pub mod tls;

pub use clock::Clock;
pub use config::Config;
pub use server::{run, start, Running};
