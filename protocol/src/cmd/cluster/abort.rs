use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::BytesMut;

/// `MIGRATE_ABORT id slot` (admin, node to node) → whether an import was
/// dropped.
///
/// The source gives up import `id`: the target deletes what it received and
/// forgets the import (synced). An import that committed is never dropped
/// (CONFLICT); an unknown one answers false.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateAbort {
    pub id: u64,
    pub slot: u16,
}

impl MigrateAbort {
    pub(crate) fn route(&self) -> Result<Target, RushError> {
        Ok(Target::Node)
    }
}

impl Wire for MigrateAbort {
    fn encode(&self, out: &mut BytesMut) {
        super::put_import_ref(out, self.id, self.slot);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let (id, slot) = super::read_import_ref(r)?;
        Ok(MigrateAbort { id, slot })
    }
}
