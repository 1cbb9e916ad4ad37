use crate::codec::{DecodeError, Reader, Wire};
use crate::{RushError, Target};
use bytes::{BufMut, BytesMut};

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
        out.put_u64(self.id);
        out.put_u16(self.slot);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let id = r.u64("id")?;
        let slot = r.slot("slot")?;
        Ok(MigrateAbort { id, slot })
    }
}
