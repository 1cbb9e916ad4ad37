//! The services a shard runs, registered in one table.
//!
//! Adding a service: its requests in the protocol crate (an opcode range in
//! `rush_protocol::Service`, one file per request), its folder here with a
//! type implementing [`ShardService`], and one line in [`SERVICES`]. The
//! shard, the listener and the node name no service: they route by the
//! opcode's range and call the trait.

use crate::shard::service::ShardService;
use crate::shard::ShardContext;
use rush_protocol::{Reply, Request, RushError, Service};

/// Builds shard `shard`'s instance of a service.
pub type Build = fn(&ShardContext, usize) -> Result<Box<dyn ShardService>, String>;

/// One service: which opcode range it serves, how a shard builds its
/// instance, and how the answers of a request that ran on every shard are
/// combined into one.
pub struct Registration {
    pub service: Service,
    /// Build shard `shard`'s instance (on the node's thread, before the
    /// shard starts; [`ShardService::open`] runs on the shard thread).
    pub build: Build,
    /// Merge per-shard answers (in shard order) of a request whose target
    /// is every shard.
    pub combine: fn(&Request, Vec<Reply>) -> Result<Reply, RushError>,
}

/// Every service, in the order timers run.
pub const SERVICES: &[Registration] = &[
    crate::kv::REGISTRATION,
    crate::limits::REGISTRATION,
    crate::catalog::REGISTRATION,
    crate::envelopes::REGISTRATION,
    crate::links::REGISTRATION,
];

/// For services with nothing that runs on every shard.
pub fn no_broadcast(req: &Request, _replies: Vec<Reply>) -> Result<Reply, RushError> {
    Err(RushError::internal(format!(
        "{} does not run on every shard",
        req.opcode().name()
    )))
}

/// The registration of the service that serves `service`'s opcodes.
pub fn registration(service: Service) -> Option<&'static Registration> {
    SERVICES.iter().find(|r| r.service == service)
}

/// Merge the per-shard answers of a request that ran on every shard.
pub fn combine(req: &Request, replies: Vec<Reply>) -> Result<Reply, RushError> {
    match registration(req.opcode().service()) {
        Some(r) => (r.combine)(req, replies),
        None => no_broadcast(req, replies),
    }
}
