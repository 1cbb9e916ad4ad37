use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

/// `MIGRATE_STATUS id slot` (admin, node to node) → what the target knows of
/// import `id` of `slot`.
///
/// A source that restarts in the middle of a move asks this to decide:
/// committed → finish (drop its copy), anything else → abort (keep the slot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateStatus {
    pub id: u64,
    pub slot: u16,
}

/// The target's view of one import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MigrationState {
    /// Never seen, or aborted: it can never commit any more.
    Unknown,
    /// Chunks received, not committed.
    Importing,
    /// Committed: the target owns the slot's data.
    Committed,
}

impl MigrationState {
    pub fn as_u8(self) -> u8 {
        match self {
            MigrationState::Unknown => 0,
            MigrationState::Importing => 1,
            MigrationState::Committed => 2,
        }
    }
}

impl MigrateStatus {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for MigrateStatus {
    fn encode(&self, out: &mut BytesMut) {
        super::put_import_ref(out, self.id, self.slot);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let (id, slot) = super::read_import_ref(r)?;
        Ok(MigrateStatus { id, slot })
    }
}

impl Wire for MigrationState {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u8(self.as_u8());
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        match r.u8("migration state")? {
            0 => Ok(MigrationState::Unknown),
            1 => Ok(MigrationState::Importing),
            2 => Ok(MigrationState::Committed),
            s => Err(DecodeError::invalid("migration state", format!("{s}"))),
        }
    }
}
