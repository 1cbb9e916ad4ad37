//! BATCH: operations of one slot, all or nothing.

use super::Kv;
use crate::shard::txn::Txn;
use rush_protocol::cmd::{Batch, BatchReply};
use rush_protocol::{ErrorDetail, Reply, RushError};

impl Kv {
    /// Operations run in order and see earlier ones' writes (through the
    /// request's staged writes in [`Txn`]). The first failure is the answer,
    /// tagged with its index; the shard then drops every staged write.
    pub(super) fn batch(
        &mut self,
        b: &Batch,
        routed: Option<u16>,
        now: u64,
        txn: &mut Txn,
    ) -> Result<Reply, RushError> {
        let mut results = Vec::with_capacity(b.ops.len());
        for (i, op) in b.ops.iter().enumerate() {
            match self.op(op, routed, now, txn, true) {
                Ok(r) => results.push(r),
                Err(mut e) => {
                    e.message = format!(
                        "batch operation {i} ({}): {}",
                        op.opcode().name(),
                        e.message
                    );
                    return Err(e.with_detail(ErrorDetail::BatchIndex { index: i as u32 }));
                }
            }
        }
        Ok(Reply::Batch(BatchReply { results }))
    }
}
