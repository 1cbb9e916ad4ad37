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
                | Opcode::SetKeepTtl
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
                | Opcode::HLen
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
                // A field over its limit is TOO_LARGE inside a batch as it
                // is outside; anything else wrong with an operation is an
                // invalid batch.
                Some(op) if Batch::allows(op) => {
                    Request::decode_as(op, body).map_err(|e| match e {
                        e @ DecodeError::TooLarge { .. } => e,
                        e => DecodeError::invalid("batch operation", e.to_string()),
                    })
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::{Get, Ping, Set};
    use crate::ErrorCode;

    fn decode(b: Batch) -> Result<Request, RushError> {
        Request::decode(Opcode::Batch.as_u8(), b.to_bytes())
    }

    fn body(r: &Request) -> Bytes {
        let mut b = BytesMut::new();
        r.encode_body(&mut b);
        b.freeze()
    }

    fn get(key: &[u8]) -> Request {
        Get {
            key: Bytes::copy_from_slice(key),
        }
        .into()
    }

    #[test]
    fn empty_nested_and_foreign_operations_are_bad_requests() {
        let nested = Batch {
            ops: vec![get(b"k")],
        };
        for (what, b) in [
            ("no operations", Batch::default()),
            (
                "a batch in a batch",
                Batch {
                    ops: vec![get(b"k"), nested.into()],
                },
            ),
            (
                "a PING",
                Batch {
                    ops: vec![Ping::default().into()],
                },
            ),
        ] {
            let e = decode(b).unwrap_err();
            assert_eq!(e.code, ErrorCode::BadRequest, "{what}: {e}");
        }
    }

    #[test]
    fn an_operation_over_a_limit_is_too_large_as_it_is_alone() {
        let key = vec![b'k'; crate::limits::MAX_KEY + 1];
        let alone = Request::decode(Opcode::Get.as_u8(), body(&get(&key))).unwrap_err();
        assert_eq!(alone.code, ErrorCode::TooLarge);
        let e = decode(Batch {
            ops: vec![
                Set {
                    key: "{k}a".into(),
                    value: "v".into(),
                    ttl_ms: 0,
                    cond: Default::default(),
                }
                .into(),
                get(&key),
            ],
        })
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::TooLarge, "{e}");
        // Anything else wrong inside an operation is BAD_REQUEST.
        let mut truncated = BytesMut::new();
        truncated.put_u32(1);
        put_tagged(&mut truncated, Opcode::Get, |b| b.put_u32(7));
        let e = Request::decode(Opcode::Batch.as_u8(), truncated.freeze()).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest, "{e}");
    }
}
