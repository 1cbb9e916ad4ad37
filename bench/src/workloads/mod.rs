//! One file per workload: its Rush side and its Redis side (see
//! [`crate::workload::Workload`]). Register each in `workload::WORKLOADS`.

pub mod catalog;
pub mod envelopes;
pub mod envelopes_held;
pub mod kv_get;
pub mod kv_incr;
pub mod kv_set;
pub mod limits;
pub mod links_resolve;
pub mod links_shorten;
pub mod mixed;
