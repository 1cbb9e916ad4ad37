//! rushd: one sharded, disk-backed daemon for short links, purchase limits,
//! Bloom-guarded lookups and red envelopes. See DESIGN.md at the top of the
//! repository for the shape; this crate is the library, `rushd` a thin main.

pub mod auth;
pub mod catalog;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod envelopes;
pub mod http;
pub mod kv;
pub mod limits;
pub mod links;
pub mod metrics;
pub mod segments;
pub mod server;
pub mod shard;
pub mod storage;
pub mod tls;

pub use clock::Clock;
pub use config::Config;
pub use server::{run, start, Running};
