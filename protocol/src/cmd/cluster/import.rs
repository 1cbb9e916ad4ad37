use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_MIGRATE_PAIRS, MAX_RAW_KEY, MAX_TEXT};
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `MIGRATE_IMPORT id slot seq from pairs` (admin, node to node) → keys
/// written.
///
/// One chunk of a slot's raw storage range, sent by the migrating node to the
/// target. Keys are storage keys (they start with the slot, big-endian) and
/// values stored values (header with the expiry first), copied byte for byte.
/// Chunk 0 starts the import: the target drops whatever it holds in the
/// slot's range and records the import `id` durably; chunk `seq` must follow
/// chunk `seq − 1` of the same `id` (else CONFLICT). Each chunk is synced
/// before the answer. The target does not serve the slot until
/// [`super::MigrateCommit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateImport {
    /// The migration attempt (random, chosen by the source).
    pub id: u64,
    pub slot: u16,
    pub seq: u32,
    /// The source's node id (for the target's records and logs).
    pub from: String,
    pub pairs: Vec<ImportPair>,
}

/// One storage key and (a part of) its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportPair {
    pub key: Bytes,
    pub value: Bytes,
    /// The value continues an earlier pair of the same key (a value larger
    /// than a chunk is sent in parts).
    pub append: bool,
}

impl MigrateImport {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for MigrateImport {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.id);
        out.put_u16(self.slot);
        out.put_u32(self.seq);
        out.put_lp(self.from.as_bytes());
        out.put_count(self.pairs.len());
        for p in &self.pairs {
            out.put_lp(&p.key);
            out.put_lp(&p.value);
            out.put_bool(p.append);
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let id = r.u64("id")?;
        let slot = r.slot("slot")?;
        Ok(MigrateImport {
            id,
            slot,
            seq: r.u32("seq")?,
            from: r.string("from", MAX_TEXT)?,
            pairs: r.list("pairs", MAX_MIGRATE_PAIRS, 9, |r| {
                Ok(ImportPair {
                    key: r.bytes("key", MAX_RAW_KEY)?,
                    // A chunk's pairs are bounded by the frame as a whole.
                    value: r.bytes("value", usize::MAX)?,
                    append: r.bool("append")?,
                })
            })?,
        })
    }
}
