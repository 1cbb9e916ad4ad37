//! The cluster's durable records, all in the meta column family:
//!
//! - `cluster/map`: the map this node accepted last (format byte, then the
//!   map exactly as CLUSTER_SLOTS encodes it);
//! - `cluster/migration`: the slot move this node coordinates, while one is
//!   in progress ([`MigrationRecord`]) — what a restarted source resolves;
//! - `cluster/import/{slot}`: an import this node receives ([`ImportMarker`]);
//! - `cluster/imported/{slot}`: the id of the last import of the slot that
//!   committed here — what MIGRATE_STATUS answers from.

use crate::storage::keys::meta;
use crate::storage::{value::Corrupt, Storage, StorageError};
use bytes::{BufMut, Bytes, BytesMut};
use rush_protocol::cmd::ClusterSlotsReply;
use rush_protocol::limits::MAX_TEXT;
use rush_protocol::{Reader, Wire, WriteExt};

const FORMAT: u8 = 1;

fn corrupt(what: &str, e: impl std::fmt::Display) -> StorageError {
    Corrupt(format!("stored {what}: {e}")).into()
}

/// The bytes stored for a map.
pub fn encode_map(map: &ClusterSlotsReply) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_u8(FORMAT);
    map.encode(&mut b);
    b.to_vec()
}

fn decode_map(raw: &[u8]) -> Result<ClusterSlotsReply, StorageError> {
    match raw.split_first() {
        Some((&FORMAT, rest)) => ClusterSlotsReply::decode_body(Bytes::copy_from_slice(rest))
            .map_err(|e| corrupt("cluster map", e)),
        _ => Err(corrupt("cluster map", "unknown format")),
    }
}

/// The map this node stored last, if any.
pub fn load_map(storage: &Storage) -> Result<Option<ClusterSlotsReply>, StorageError> {
    storage
        .meta_get(meta::CLUSTER_MAP)?
        .map(|raw| decode_map(&raw))
        .transpose()
}

/// Where a coordinated slot move stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Copying: the target cannot have committed (COMMIT was not sent), so a
    /// restart may simply give the slot back to service here.
    Copy,
    /// COMMIT may have been sent: only the target knows the outcome.
    Commit,
}

/// The slot move this node (the source) is coordinating.
#[derive(Debug, Clone, PartialEq)]
pub struct MigrationRecord {
    pub id: u64,
    pub slot: u16,
    pub phase: Phase,
    pub target_id: String,
    pub target_addr: String,
    /// The map once the slot has moved (epoch + 1).
    pub new_map: ClusterSlotsReply,
}

impl MigrationRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_u8(FORMAT);
        b.put_u64(self.id);
        b.put_u16(self.slot);
        b.put_u8(match self.phase {
            Phase::Copy => 1,
            Phase::Commit => 2,
        });
        b.put_lp(self.target_id.as_bytes());
        b.put_lp(self.target_addr.as_bytes());
        self.new_map.encode(&mut b);
        b.to_vec()
    }

    pub fn decode(raw: &[u8]) -> Result<MigrationRecord, StorageError> {
        let bad = |e: &dyn std::fmt::Display| corrupt("migration record", e);
        let mut r = Reader::new(Bytes::copy_from_slice(raw));
        let mut go = || -> Result<MigrationRecord, rush_protocol::DecodeError> {
            if r.u8("format")? != FORMAT {
                return Err(rush_protocol::DecodeError::invalid("format", "unknown"));
            }
            Ok(MigrationRecord {
                id: r.u64("id")?,
                slot: r.u16("slot")?,
                phase: match r.u8("phase")? {
                    1 => Phase::Copy,
                    _ => Phase::Commit,
                },
                target_id: r.string("target id", MAX_TEXT)?,
                target_addr: r.string("target addr", MAX_TEXT)?,
                new_map: ClusterSlotsReply::decode(&mut r)?,
            })
        };
        go().map_err(|e| bad(&e))
    }

    pub fn load(storage: &Storage) -> Result<Option<MigrationRecord>, StorageError> {
        storage
            .meta_get(meta::CLUSTER_MIGRATION)?
            .map(|raw| Self::decode(&raw))
            .transpose()
    }

    /// Store durably (synced) before acting on it.
    pub fn store(&self, storage: &Storage) -> Result<(), StorageError> {
        storage.meta_put(meta::CLUSTER_MIGRATION, &self.encode())
    }
}

/// An import in progress on this node (the target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportMarker {
    pub id: u64,
    /// The chunk expected next.
    pub next_seq: u32,
    /// Pairs received so far.
    pub keys: u64,
    pub from: String,
}

impl ImportMarker {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_u8(FORMAT);
        b.put_u64(self.id);
        b.put_u32(self.next_seq);
        b.put_u64(self.keys);
        b.put_lp(self.from.as_bytes());
        b.to_vec()
    }

    pub fn decode(raw: &[u8]) -> Result<ImportMarker, StorageError> {
        let mut r = Reader::new(Bytes::copy_from_slice(raw));
        let mut go = || -> Result<ImportMarker, rush_protocol::DecodeError> {
            if r.u8("format")? != FORMAT {
                return Err(rush_protocol::DecodeError::invalid("format", "unknown"));
            }
            Ok(ImportMarker {
                id: r.u64("id")?,
                next_seq: r.u32("seq")?,
                keys: r.u64("keys")?,
                from: r.string("from", MAX_TEXT)?,
            })
        };
        go().map_err(|e| corrupt("import marker", e))
    }

    pub fn load(storage: &Storage, slot: u16) -> Result<Option<ImportMarker>, StorageError> {
        storage
            .meta_get(&meta::cluster_import(slot))?
            .map(|raw| Self::decode(&raw))
            .transpose()
    }
}

/// The id of the last import of `slot` that committed here.
pub fn committed_import(storage: &Storage, slot: u16) -> Result<Option<u64>, StorageError> {
    match storage.meta_get(&meta::cluster_imported(slot))? {
        None => Ok(None),
        Some(raw) => <[u8; 8]>::try_from(raw.as_slice())
            .map(|b| Some(u64::from_be_bytes(b)))
            .map_err(|_| corrupt("import id", "not 8 bytes")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let map = ClusterSlotsReply::even(7, vec![("a".into(), "a:1".into())]);
        assert_eq!(decode_map(&encode_map(&map)).unwrap(), map);
        let rec = MigrationRecord {
            id: 42,
            slot: 9,
            phase: Phase::Commit,
            target_id: "b".into(),
            target_addr: "b:1".into(),
            new_map: map,
        };
        assert_eq!(MigrationRecord::decode(&rec.encode()).unwrap(), rec);
        let m = ImportMarker {
            id: 1,
            next_seq: 3,
            keys: 99,
            from: "a".into(),
        };
        assert_eq!(ImportMarker::decode(&m.encode()).unwrap(), m);
        assert!(ImportMarker::decode(&[9]).is_err());
    }
}
