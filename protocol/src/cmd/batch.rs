use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_BATCH_OPS, MAX_VALUE};
use crate::{ErrorCode, Opcode, Reply, Request, RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// `BATCH op…`: key operations on keys of ONE slot, applied atomically — all
/// of them or none, in one storage write. Operations run in order and see the
/// effects of earlier ones. A CHECK that doesn't hold, or an operation that
/// fails (WRONG_TYPE, overflow), aborts the batch: the answer is that error
/// with detail `BatchIndex` and nothing is written.
///
/// Wire: `u32 count`, then per operation `u8 opcode, u32 length, body` where
/// the body is exactly the standalone request's body.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Batch {
    pub ops: Vec<Request>,
}

/// One reply per operation, in order, each tagged like the requests.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BatchReply {
    pub results: Vec<Reply>,
}

impl Batch {
    /// The opcodes a batch may carry: the generic key operations.
    pub fn allows(op: Opcode) -> bool {
        matches!(
            op,
            Opcode::Get
                | Opcode::Set
                | Opcode::Del
                | Opcode::Exists
                | Opcode::IncrBy
                | Opcode::Expire
                | Opcode::Ttl
                | Opcode::HSet
                | Opcode::HGet
                | Opcode::HDel
                | Opcode::HIncrBy
                | Opcode::HGetAll
                | Opcode::Check
        )
    }

    pub fn push(&mut self, op: impl Into<Request>) -> &mut Self {
        self.ops.push(op.into());
        self
    }

    pub(crate) fn route(&self) -> Result<Target, RushError> {
        let mut slot = None;
        for (i, op) in self.ops.iter().enumerate() {
            match op.target()? {
                Target::Slot(s) => match slot {
                    None => slot = Some(s),
                    Some(first) if first != s => {
                        return Err(RushError::new(
                            ErrorCode::CrossSlot,
                            format!(
                                "batch operation {i} is in slot {s}, operation 0 in slot {first}: \
                                 use a {{hashtag}} so all keys share a slot"
                            ),
                        ))
                    }
                    Some(_) => {}
                },
                other => {
                    return Err(RushError::bad_request(format!(
                        "batch operation {i} has target {other:?}"
                    )))
                }
            }
        }
        slot.map(Target::Slot)
            .ok_or_else(|| RushError::bad_request("a batch needs at least one operation"))
    }
}

fn put_tagged(out: &mut BytesMut, opcode: Opcode, body: impl FnOnce(&mut BytesMut)) {
    out.put_u8(opcode.as_u8());
    let at = out.len();
    out.put_u32(0);
    body(out);
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_be_bytes());
}

impl Wire for Batch {
    fn encode(&self, out: &mut BytesMut) {
        out.put_count(self.ops.len());
        for op in &self.ops {
            put_tagged(out, op.opcode(), |out| op.encode_body(out));
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let ops = r.list("operations", MAX_BATCH_OPS, 5, |r| {
            let code = r.u8("operation opcode")?;
            let body = r.bytes("operation body", MAX_VALUE + 4096)?;
            match Opcode::from_u8(code) {
                Some(op) if Batch::allows(op) => Request::decode(code, body)
                    .map_err(|e| DecodeError::invalid("batch operation", e.message)),
                _ => Err(DecodeError::invalid(
                    "batch operation",
                    format!("opcode 0x{code:02x} is not allowed in a batch"),
                )),
            }
        })?;
        if ops.is_empty() {
            return Err(DecodeError::invalid(
                "operations",
                "a batch needs at least one",
            ));
        }
        Ok(Batch { ops })
    }
}

impl Wire for BatchReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_count(self.results.len());
        for reply in &self.results {
            put_tagged(out, reply.opcode(), |out| reply.encode_body(out));
        }
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let results = r.list("results", MAX_BATCH_OPS, 5, |r| {
            let code = r.u8("result opcode")?;
            let body: Bytes = r.bytes("result body", usize::MAX)?;
            let op = Opcode::from_u8(code)
                .ok_or_else(|| DecodeError::invalid("result opcode", format!("0x{code:02x}")))?;
            Reply::decode(op, body)
        })?;
        Ok(BatchReply { results })
    }
}
