//! A replication record: the writes of one group commit of one shard, as
//! the primary committed them, in the order RocksDB applies them (range
//! deletions, then puts and deletes, then merge operands; see
//! `shard::txn::Finished::batch`):
//!
//! ```text
//! op*  u8 op | u32 LE key length | key | (put, merge, range) u32 LE length | value
//!      op: 1 put, 2 delete, 3 merge (an operand), 4 delete the range [key, value)
//! ```
//!
//! Meta records a shard commits (the cluster map, slot moves) are this
//! node's own and are not carried; the node records a replica needs (code
//! key, purchase-limit policies, refund floors) travel whole beside the
//! records (`REPL_FETCH`'s `meta`).

use super::super::shard::txn::Finished;

const PUT: u8 = 1;
const DELETE: u8 = 2;
const MERGE: u8 = 3;
const RANGE: u8 = 4;

/// One write of a record.
#[derive(Debug, PartialEq, Eq)]
pub enum Op<'a> {
    Put(&'a [u8], &'a [u8]),
    Delete(&'a [u8]),
    Merge(&'a [u8], &'a [u8]),
    /// Every key in `[from, to)`.
    DeleteRange(&'a [u8], &'a [u8]),
}

fn put(out: &mut Vec<u8>, op: u8, key: &[u8], value: Option<&[u8]>) {
    out.push(op);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key);
    if let Some(v) = value {
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
}

/// Append a committed group's writes to `out` (cleared first).
pub fn encode(finished: &Finished, out: &mut Vec<u8>) {
    out.clear();
    for (from, to) in &finished.ranges {
        put(out, RANGE, from, Some(to));
    }
    for (k, v) in &finished.applied {
        match v {
            Some(v) => put(out, PUT, k, Some(v)),
            None => put(out, DELETE, k, None),
        }
    }
    for (k, operand) in &finished.merges {
        put(out, MERGE, k, Some(operand));
    }
}

/// Append one write to a record being built (`out`), for writes made
/// outside a shard's commit (a slot import).
pub fn push(out: &mut Vec<u8>, op: &Op) {
    match *op {
        Op::Put(k, v) => put(out, PUT, k, Some(v)),
        Op::Delete(k) => put(out, DELETE, k, None),
        Op::Merge(k, v) => put(out, MERGE, k, Some(v)),
        Op::DeleteRange(from, to) => put(out, RANGE, from, Some(to)),
    }
}

/// The writes of a record body, or why it is malformed.
pub fn decode(mut body: &[u8]) -> Result<Vec<Op<'_>>, &'static str> {
    fn take<'a>(body: &mut &'a [u8]) -> Result<&'a [u8], &'static str> {
        if body.len() < 4 {
            return Err("a length is cut short");
        }
        let (len, rest) = body.split_at(4);
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        if rest.len() < len {
            return Err("a key or value is cut short");
        }
        let (out, rest) = rest.split_at(len);
        *body = rest;
        Ok(out)
    }
    let mut ops = Vec::new();
    while let Some((&op, rest)) = body.split_first() {
        body = rest;
        let key = take(&mut body)?;
        ops.push(match op {
            PUT => Op::Put(key, take(&mut body)?),
            DELETE => Op::Delete(key),
            MERGE => Op::Merge(key, take(&mut body)?),
            RANGE => Op::DeleteRange(key, take(&mut body)?),
            _ => return Err("an unknown write kind"),
        });
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_its_writes_in_batch_order() {
        let mut f = Finished::empty_for_tests();
        f.ranges
            .push((b"\x00\x01a".to_vec(), b"\x00\x01b".to_vec()));
        f.applied
            .insert(b"k1"[..].into(), Some(bytes::Bytes::from_static(b"v1")));
        f.applied.insert(b"k2"[..].into(), None);
        f.merges.insert(b"m"[..].into(), b"+1".to_vec());
        let mut out = Vec::new();
        encode(&f, &mut out);
        let ops = decode(&out).unwrap();
        assert_eq!(ops[0], Op::DeleteRange(b"\x00\x01a", b"\x00\x01b"));
        assert!(ops[1..3].contains(&Op::Put(b"k1", b"v1")));
        assert!(ops[1..3].contains(&Op::Delete(b"k2")));
        assert_eq!(ops[3], Op::Merge(b"m", b"+1"));
        assert_eq!(ops.len(), 4);
        for cut in 1..out.len() {
            // A record cut anywhere inside a write is refused, not misread.
            if let Ok(ops) = decode(&out[..cut]) {
                assert!(ops.len() < 4, "cut at {cut} read as whole");
            }
        }
        assert!(decode(&[9, 0, 0, 0, 0]).is_err());

        let mut built = Vec::new();
        for op in &ops {
            push(&mut built, op);
        }
        assert_eq!(built, out);
    }
}
