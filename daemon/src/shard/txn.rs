//! The write set of one group commit.
//!
//! A shard applies a group of requests one after another; each request reads
//! through the writes of the requests before it (they are not in RocksDB yet)
//! and stages its own writes. A request that succeeds moves its staged writes
//! into the group's batch; one that fails drops them, so a failed request
//! writes nothing. The group then commits as one [`WriteBatch`] — one WAL
//! append, one fsync if any request in it needs durability.

use crate::storage::{Storage, StorageError, WriteBatch};
use hashbrown::HashMap;

/// What [`Txn::scan`] found: (key, value) pairs in key order, and whether
/// the range held more.
pub type Scanned = (Vec<(Vec<u8>, Vec<u8>)>, bool);

pub struct Txn<'s> {
    storage: &'s Storage,
    shard: usize,
    batch: WriteBatch,
    /// Newest value per key written by earlier requests of this group
    /// (`None` = deleted). Consulted before RocksDB.
    applied: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Writes of the request being applied, in order.
    staged: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    staged_ranges: Vec<(Vec<u8>, Vec<u8>)>,
    staged_sync: bool,
    sync: bool,
    has_writes: bool,
}

impl<'s> Txn<'s> {
    pub fn new(storage: &'s Storage, shard: usize) -> Self {
        Txn {
            storage,
            shard,
            batch: WriteBatch::default(),
            applied: HashMap::new(),
            staged: Vec::new(),
            staged_ranges: Vec::new(),
            staged_sync: false,
            sync: false,
            has_writes: false,
        }
    }

    pub fn shard(&self) -> usize {
        self.shard
    }

    pub fn storage(&self) -> &'s Storage {
        self.storage
    }

    /// Read a key as this request sees it.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        if let Some((_, v)) = self.staged.iter().rev().find(|(k, _)| k == key) {
            return Ok(v.clone());
        }
        if let Some(v) = self.applied.get(key) {
            return Ok(v.clone());
        }
        Ok(self.storage.get(self.shard, key)?.map(|v| v.to_vec()))
    }

    /// Up to `max` keys of `[from, to)` as this request sees them — RocksDB
    /// merged with the writes of earlier requests of the group and of this
    /// request — in key order; expired values included (callers check).
    /// The flag says the range held more than was returned. Not for large
    /// ranges: the merge is built in memory.
    pub fn scan(&self, from: &[u8], to: &[u8], max: usize) -> Result<Scanned, StorageError> {
        let mut merged: std::collections::BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            std::collections::BTreeMap::new();
        let mut stored_truncated = false;
        self.storage.scan(self.shard, from, to, |k, v| {
            if merged.len() == max {
                stored_truncated = true;
                return false;
            }
            merged.insert(k.to_vec(), Some(v.to_vec()));
            true
        })?;
        // When RocksDB had more, only overlay writes up to the last key read
        // belong to the returned prefix of the range.
        let bound: &[u8] = match merged.keys().next_back() {
            Some(last) if stored_truncated => last,
            _ => to,
        };
        let bound = bound.to_vec();
        let inside = |k: &[u8]| {
            k >= from
                && if stored_truncated {
                    k <= &bound[..]
                } else {
                    k < to
                }
        };
        for (k, v) in &self.applied {
            if inside(k) {
                merged.insert(k.clone(), v.clone());
            }
        }
        for (k, v) in &self.staged {
            if inside(k) {
                merged.insert(k.clone(), v.clone());
            }
        }
        let live = merged.into_iter().filter_map(|(k, v)| v.map(|v| (k, v)));
        let mut out: Vec<_> = live.take(max + 1).collect();
        let truncated = stored_truncated || out.len() > max;
        out.truncate(max);
        Ok((out, truncated))
    }

    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.staged.push((key, Some(value)));
    }

    pub fn delete(&mut self, key: Vec<u8>) {
        self.staged.push((key, None));
    }

    /// Delete every key in `[from, to)`. Later requests of the same group do
    /// not see this through [`Txn::get`]; use it for data no request reads
    /// (retention of old days).
    pub fn delete_range(&mut self, from: Vec<u8>, to: Vec<u8>) {
        self.staged_ranges.push((from, to));
    }

    /// Write straight into the group, whatever becomes of the current
    /// request. For reservations that must land once made (ID segment
    /// high-water marks): the in-memory state has already moved on.
    pub fn put_unconditional(&mut self, key: Vec<u8>, value: Vec<u8>, sync: bool) {
        self.batch.put_cf(self.storage.cf(self.shard), &key, &value);
        self.applied.insert(key, Some(value));
        self.sync |= sync;
        self.has_writes = true;
    }

    /// The current request must be fsynced before it is answered.
    pub fn require_sync(&mut self) {
        self.staged_sync = true;
    }

    /// End the current request: keep its writes if it succeeded, drop them if
    /// not. Returns whether it wrote anything.
    pub fn finish_request(&mut self, ok: bool) -> bool {
        let wrote = ok && !(self.staged.is_empty() && self.staged_ranges.is_empty());
        if wrote {
            let cf = self.storage.cf(self.shard);
            for (from, to) in self.staged_ranges.drain(..) {
                self.batch.delete_range_cf(cf, &from, &to);
            }
            for (k, v) in self.staged.drain(..) {
                match &v {
                    Some(v) => self.batch.put_cf(cf, &k, v),
                    None => self.batch.delete_cf(cf, &k),
                }
                self.applied.insert(k, v);
            }
            self.sync |= self.staged_sync;
            self.has_writes = true;
        }
        self.staged.clear();
        self.staged_ranges.clear();
        self.staged_sync = false;
        wrote
    }

    /// The batch to commit and whether it must be synced, if anything was written.
    pub fn into_commit(self) -> Option<(WriteBatch, bool)> {
        self.has_writes.then_some((self.batch, self.sync))
    }
}
