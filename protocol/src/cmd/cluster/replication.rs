//! Replication (admin, replica to primary; 0x78–0x7b). A replica pulls:
//!
//! 1. [`ReplSnapshot`] with `session = 0` starts a consistent snapshot of
//!    the whole node on the primary (every shard settled and paused at one
//!    moment) and answers its first page, with the primary's `run_id` and
//!    each shard's stream position at the snapshot; more `ReplSnapshot`s
//!    with that session read the rest, page by page, until `done`.
//! 2. [`ReplFetch`] from those positions returns the records each shard
//!    committed after them, in commit order (one record per group commit),
//!    waiting up to `wait_ms` when there are none yet. NOT_FOUND means the
//!    primary no longer holds a position (another run of the primary, or
//!    its backlog moved past it): bootstrap again.
//!
//! [`ReplStatus`] and [`ReplPromote`] are for operators (`rush
//! replication status|promote`) and answer INFO-style rows.

use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{MAX_LIST, MAX_RAW_KEY, MAX_SHARDS};
use crate::{RushError, Target};
use bytes::{BufMut, Bytes, BytesMut};

/// The family of a snapshot pair that is a node record (the meta column
/// family), not a shard's key.
pub const META_FAMILY: u16 = u16::MAX;

/// `REPL_SNAPSHOT session max_bytes` → one page of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplSnapshot {
    /// 0 starts a new snapshot; else the session its first page named.
    pub session: u64,
    /// About how many bytes of pairs a page may carry.
    pub max_bytes: u32,
}

/// One stored key and value of a snapshot, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplPair {
    /// The shard whose column family holds it, or [`META_FAMILY`].
    pub family: u16,
    pub key: Bytes,
    pub value: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplSnapshotReply {
    /// The primary's run (changes at each start of the primary).
    pub run_id: u64,
    pub session: u64,
    /// Each shard's stream position the snapshot holds everything up to
    /// (the first page carries it; later pages repeat it).
    pub positions: Vec<u64>,
    pub pairs: Vec<ReplPair>,
    /// The last page.
    pub done: bool,
}

/// `REPL_FETCH run_id positions meta_version max_bytes wait_ms` → the
/// records after `positions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplFetch {
    pub run_id: u64,
    /// Per shard: the last record the replica holds.
    pub positions: Vec<u64>,
    /// The node records' version the replica holds (0: none).
    pub meta_version: u64,
    pub max_bytes: u32,
    /// How long to wait for a record when there is none yet.
    pub wait_ms: u32,
}

/// One group commit of one shard of the primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplRecord {
    pub shard: u16,
    /// The shard's stream position of this record (1, 2, 3…).
    pub seq: u64,
    /// The writes (the daemon's `replication::record` format).
    pub body: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplFetchReply {
    /// Per shard: the newest record the primary holds (for lag).
    pub heads: Vec<u64>,
    pub records: Vec<ReplRecord>,
    /// The node records (code key, policies…) when their version is not
    /// the one the replica named: (version, records).
    pub meta: Option<(u64, Vec<(Bytes, Bytes)>)>,
    /// The primary's clock (unix ms), for lag in seconds.
    pub now_ms: u64,
}

/// `REPL_STATUS` → rows: role, primary, state, positions, lag.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplStatus {}

/// `REPL_PROMOTE` → a replica stops following and becomes a primary that
/// takes writes (it restarts its serving in place); answers the status
/// rows from before the restart.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplPromote {}

macro_rules! node_target {
    ($($t:ty),*) => {$(
        impl $t {
            pub(crate) fn route(&self) -> Result<Target, RushError> {
                Ok(Target::Node)
            }
        }
    )*};
}
node_target!(ReplSnapshot, ReplFetch, ReplStatus, ReplPromote);

fn put_positions(out: &mut BytesMut, positions: &[u64]) {
    out.put_count(positions.len());
    for p in positions {
        out.put_u64(*p);
    }
}

fn read_positions(r: &mut Reader, field: &'static str) -> Result<Vec<u64>, DecodeError> {
    r.list(field, MAX_SHARDS, 8, |r| r.u64("position"))
}

impl Wire for ReplSnapshot {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.session);
        out.put_u32(self.max_bytes);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReplSnapshot {
            session: r.u64("session")?,
            max_bytes: r.u32("max bytes")?,
        })
    }
}

impl Wire for ReplSnapshotReply {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.run_id);
        out.put_u64(self.session);
        put_positions(out, &self.positions);
        out.put_count(self.pairs.len());
        for p in &self.pairs {
            out.put_u16(p.family);
            out.put_lp(&p.key);
            out.put_lp(&p.value);
        }
        out.put_bool(self.done);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReplSnapshotReply {
            run_id: r.u64("run id")?,
            session: r.u64("session")?,
            positions: read_positions(r, "positions")?,
            pairs: r.list("pairs", MAX_LIST * 10, 10, |r| {
                Ok(ReplPair {
                    family: r.u16("family")?,
                    key: r.bytes("key", MAX_RAW_KEY)?,
                    // Pairs are bounded by the frame as a whole.
                    value: r.bytes("value", usize::MAX)?,
                })
            })?,
            done: r.bool("done")?,
        })
    }
}

impl Wire for ReplFetch {
    fn encode(&self, out: &mut BytesMut) {
        out.put_u64(self.run_id);
        put_positions(out, &self.positions);
        out.put_u64(self.meta_version);
        out.put_u32(self.max_bytes);
        out.put_u32(self.wait_ms);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReplFetch {
            run_id: r.u64("run id")?,
            positions: read_positions(r, "positions")?,
            meta_version: r.u64("meta version")?,
            max_bytes: r.u32("max bytes")?,
            wait_ms: r.u32("wait ms")?,
        })
    }
}

impl Wire for ReplFetchReply {
    fn encode(&self, out: &mut BytesMut) {
        put_positions(out, &self.heads);
        out.put_count(self.records.len());
        for rec in &self.records {
            out.put_u16(rec.shard);
            out.put_u64(rec.seq);
            out.put_lp(&rec.body);
        }
        match &self.meta {
            None => out.put_bool(false),
            Some((version, pairs)) => {
                out.put_bool(true);
                out.put_u64(*version);
                out.put_count(pairs.len());
                for (k, v) in pairs {
                    out.put_lp(k);
                    out.put_lp(v);
                }
            }
        }
        out.put_u64(self.now_ms);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReplFetchReply {
            heads: read_positions(r, "heads")?,
            records: r.list("records", MAX_LIST * 10, 14, |r| {
                Ok(ReplRecord {
                    shard: r.u16("shard")?,
                    seq: r.u64("seq")?,
                    body: r.bytes("body", usize::MAX)?,
                })
            })?,
            meta: r.option("meta", |r| {
                let version = r.u64("meta version")?;
                let pairs = r.list("meta records", MAX_LIST, 8, |r| {
                    Ok((r.bytes("name", MAX_RAW_KEY)?, r.bytes("value", usize::MAX)?))
                })?;
                Ok((version, pairs))
            })?,
            now_ms: r.u64("now ms")?,
        })
    }
}

impl Wire for ReplStatus {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReplStatus {})
    }
}

impl Wire for ReplPromote {
    fn encode(&self, _: &mut BytesMut) {}
    fn decode(_: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ReplPromote {})
    }
}
