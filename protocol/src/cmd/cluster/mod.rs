//! Cluster map and slot migration (0x70–0x7f). Every request here is admin
//! and runs on the node it is sent to (`Target::Node`); `CLUSTER_SLOTS`
//! (0x04), which anyone may read, is in `cluster_slots.rs`.
//!
//! - [`ClusterSetMap`]: an operator (or `rush cluster create|apply`, or a
//!   migrating node) installs a whole map; only a newer epoch is accepted.
//! - [`ClusterMigrate`]: sent to the node that owns the slots; it moves
//!   them to another node, slot by slot, and coordinates everything else.
//! - [`MigrateImport`], [`MigrateCommit`], [`MigrateAbort`],
//!   [`MigrateStatus`]: what the migrating (source) node sends the target.
//!
//! - [`ReplSnapshot`], [`ReplFetch`]: what a replica asks its primary
//!   (see [`replication`]); [`ReplStatus`], [`ReplPromote`] for operators.
//!
//! [`map`] holds what clients and nodes both need to reason about a map:
//! validation, slot specs ("100-199"), the owner of each slot.

mod abort;
mod commit;
#[cfg(feature = "map-file")]
pub mod file;
mod import;
pub mod map;
mod migrate;
pub mod replication;
mod set_map;
mod status;

pub use abort::MigrateAbort;
pub use commit::MigrateCommit;
pub use import::{ImportPair, MigrateImport};
pub use map::{parse_slot_spec, parse_slot_specs, ranges_of};
pub use migrate::{ClusterMigrate, ClusterMigrateReply};
pub use replication::{
    ReplFetch, ReplFetchReply, ReplPair, ReplPromote, ReplRecord, ReplSnapshot, ReplSnapshotReply,
    ReplStatus,
};
pub use set_map::ClusterSetMap;
pub use status::{MigrateStatus, MigrationState};

use crate::codec::{DecodeError, Reader};
use bytes::{BufMut, BytesMut};

/// The import a node-to-node request is about, as it starts every such
/// body: the migration `id`, then its slot. [`MigrateAbort`] and
/// [`MigrateStatus`] carry nothing else.
fn put_import_ref(out: &mut BytesMut, id: u64, slot: u16) {
    out.put_u64(id);
    out.put_u16(slot);
}

/// Reads what [`put_import_ref`] wrote: `(id, slot)`.
fn read_import_ref(r: &mut Reader) -> Result<(u64, u16), DecodeError> {
    Ok((r.u64("id")?, r.slot("slot")?))
}
