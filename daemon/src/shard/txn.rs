//! The write set of one group commit.
//!
//! A shard applies a group of requests one after another; each request reads
//! through the writes of the requests before it (they are not committed yet)
//! and stages its own writes. A request that succeeds moves its staged writes
//! into the group's; one that fails drops them, so a failed request writes
//! nothing. The group then commits as one unit (`Shard::commit`): one record
//! of the shard's log, or one RocksDB [`WriteBatch`] — one append, one fsync
//! if any request in it needs durability.
//!
//! Reads look, in order, at the request's own staged writes, the group's,
//! the row cache (which holds the shard's pending writes too: committed to
//! its log, not yet in RocksDB, `shard::pending`), and RocksDB.

use super::pending::Pending;
use super::rows::RowCache;
use super::write_back::Writer;
use crate::storage::inline::{self, ValueRef};
use crate::storage::keys::Key;
use crate::storage::merge::merge;
use crate::storage::{Storage, StorageError, WriteBatch};
use bytes::Bytes;
use hashbrown::HashMap;
use std::cell::RefCell;

/// What [`Txn::scan`] found: (key, value) pairs in key order, and whether
/// the range held more.
pub type Scanned = (Vec<(Vec<u8>, Vec<u8>)>, bool);

pub struct Txn<'s> {
    storage: &'s Storage,
    shard: usize,
    /// Newest value per key written by earlier requests of this group
    /// (`None` = deleted). Consulted before RocksDB; what the group commits.
    applied: HashMap<Key, Option<Bytes>>,
    /// Key ranges deleted by the group's requests, in order (committed
    /// before `applied`: a write that came before a range's deletion was
    /// taken out of `applied` when the deletion was).
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
    /// Meta records the group writes (`None`: removes), in order.
    meta: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    /// Operands added to keys no request of the group wrote
    /// ([`Txn::merge`]), one combined operand per key.
    merges: HashMap<Key, Vec<u8>>,
    /// Writes of the request being applied, in order.
    staged: Vec<(Key, Option<Bytes>)>,
    staged_ranges: Vec<(Vec<u8>, Vec<u8>)>,
    staged_sync: bool,
    sync: bool,
    has_writes: bool,
    /// The shard's row cache, lent to this group (see [`Txn::with_rows`]).
    rows: Option<RefCell<RowCache>>,
    /// The shard's pending writes, lent to this group, and the thread that
    /// writes them back.
    pending: Option<RefCell<Pending>>,
    writer: Option<std::sync::Arc<Writer>>,
    /// A key range was deleted: the row cache can't tell which keys.
    ranges_deleted: bool,
    /// Keys the next requests will read, to read together ([`Txn::expect_read`]).
    ahead: RefCell<ReadAhead>,
}

/// Storage keys the next requests will read, with their row-cache hashes:
/// the keys back to back and where each ends. Lent to each group like the
/// row cache, for its buffers.
#[derive(Default)]
pub struct ReadAhead {
    keys: Vec<u8>,
    ends: Vec<usize>,
    hashes: Vec<u64>,
}

impl ReadAhead {
    fn clear(&mut self) {
        self.keys.clear();
        self.ends.clear();
        self.hashes.clear();
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .zip(&self.hashes)
            .map(|((from, &to), &hash)| (&self.keys[from..to], hash))
    }
}

/// A finished group: what to commit, and the row cache and pending writes
/// to hand back.
pub struct Finished {
    /// Anything to commit at all.
    pub has_writes: bool,
    /// Must be fsynced before any of it is answered.
    pub sync: bool,
    pub applied: HashMap<Key, Option<Bytes>>,
    pub ranges: Vec<(Vec<u8>, Vec<u8>)>,
    pub meta: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    pub merges: HashMap<Key, Vec<u8>>,
    pub rows: Option<RowCache>,
    pub pending: Option<Pending>,
    pub ahead: ReadAhead,
    ranges_deleted: bool,
}

impl Finished {
    /// Nothing written yet (unit tests build one by hand).
    #[cfg(test)]
    pub fn empty_for_tests() -> Finished {
        Finished {
            has_writes: false,
            sync: false,
            applied: Default::default(),
            ranges: Vec::new(),
            meta: Vec::new(),
            merges: Default::default(),
            rows: None,
            pending: None,
            ahead: Default::default(),
            ranges_deleted: false,
        }
    }

    /// Only key writes of the shard's own column family: what its log can
    /// hold (meta records and range deletions go to RocksDB directly).
    pub fn loggable(&self) -> bool {
        self.ranges.is_empty() && self.meta.is_empty()
    }

    /// The group as one RocksDB batch, if it wrote anything.
    pub fn batch(&self, storage: &Storage, shard: usize) -> Option<WriteBatch> {
        if !self.has_writes {
            return None;
        }
        let cf = storage.cf(shard);
        let mut batch = WriteBatch::default();
        for (from, to) in &self.ranges {
            batch.delete_range_cf(cf, from, to);
        }
        for (k, v) in &self.applied {
            match v {
                Some(v) => batch.put_cf(cf, k, v),
                None => batch.delete_cf(cf, k),
            }
        }
        for (k, operand) in &self.merges {
            batch.merge_cf(cf, k, operand);
        }
        for (k, v) in &self.meta {
            match v {
                Some(v) => storage.batch_meta_put(&mut batch, k, v),
                None => storage.batch_meta_delete(&mut batch, k),
            }
        }
        Some(batch)
    }

    /// The row cache after a commit straight to RocksDB: updated with the
    /// group's writes when it succeeded, emptied when it failed (memory may
    /// reflect writes that never happened) or when a range was deleted.
    pub fn settle_rows(&mut self, rows: &mut RowCache, committed: bool) {
        if !committed || self.ranges_deleted {
            rows.clear();
        }
        if committed {
            for (k, v) in self.applied.drain() {
                rows.insert(&k, v);
            }
        }
        // What RocksDB now makes of a merged key is read when asked for.
        for (k, _) in self.merges.drain() {
            rows.remove(&k);
        }
    }
}

/// Which values read from RocksDB the row cache keeps.
#[derive(Clone, Copy)]
enum Keep {
    Always,
    /// Only values longer than this (not absences).
    Over(usize),
}

impl Keep {
    #[inline]
    fn wants(self, v: &Option<Bytes>) -> bool {
        match self {
            Keep::Always => true,
            Keep::Over(n) => v.as_ref().is_some_and(|v| v.len() > n),
        }
    }
}

impl<'s> Txn<'s> {
    pub fn new(storage: &'s Storage, shard: usize) -> Self {
        Txn {
            storage,
            shard,
            applied: HashMap::new(),
            ranges: Vec::new(),
            meta: Vec::new(),
            merges: HashMap::new(),
            staged: Vec::new(),
            staged_ranges: Vec::new(),
            staged_sync: false,
            sync: false,
            has_writes: false,
            rows: None,
            pending: None,
            writer: None,
            ranges_deleted: false,
            ahead: RefCell::default(),
        }
    }

    /// Read through (and fill) the shard's row cache during this group.
    pub fn with_rows(mut self, rows: RowCache) -> Self {
        self.rows = Some(RefCell::new(rows));
        self
    }

    /// Read through the shard's pending writes during this group (and
    /// have `writer` write them back when a scan needs RocksDB whole).
    pub fn with_pending(
        mut self,
        pending: Option<Pending>,
        writer: Option<std::sync::Arc<Writer>>,
    ) -> Self {
        self.pending = pending.map(RefCell::new);
        self.writer = writer;
        self
    }

    /// Lend the shard's read-ahead buffers to this group, emptied: keys
    /// noted in one pass are not read in the next, whose slots may have
    /// moved in between.
    pub fn with_read_ahead(mut self, mut ahead: ReadAhead) -> Self {
        ahead.clear();
        self.ahead = RefCell::new(ahead);
        self
    }

    /// The row cache's hash of storage key `key` (`None`: no row cache).
    pub fn row_hash(&self, key: &[u8]) -> Option<u64> {
        self.rows.as_ref().map(|rows| rows.borrow().hash(key))
    }

    /// Start loading the row-cache rows of the keys whose
    /// [`Txn::row_hash`]es are `hashes` (keys the next requests will read),
    /// so their cache misses overlap instead of coming one request at a
    /// time: every key's control bytes first, then, with those on their
    /// way, the rows they point at, then the values those rows point at.
    pub fn prefetch_rows(&self, hashes: &[u64]) {
        let Some(rows) = &self.rows else {
            return;
        };
        let mut rows = rows.borrow_mut();
        for &hash in hashes {
            rows.prefetch_group(hash);
        }
        for &hash in hashes {
            rows.prefetch_row(hash);
        }
        // By now the first rows are arriving: the values they point at.
        for &hash in hashes {
            rows.prefetch_value(hash);
        }
    }

    /// Note that a coming request will read storage key `key` (its
    /// [`Txn::row_hash`] is `hash`), and that when it misses the row cache,
    /// the other keys so noted that the cache lacks are to be read with it
    /// ([`Txn::read_expected`]).
    pub fn expect_read(&self, key: &[u8], hash: u64) {
        let mut ahead = self.ahead.borrow_mut();
        ahead.keys.extend_from_slice(key);
        let end = ahead.keys.len();
        ahead.ends.push(end);
        ahead.hashes.push(hash);
    }

    /// Forget the keys noted by [`Txn::expect_read`].
    pub fn forget_expected(&self) {
        self.ahead.borrow_mut().clear();
    }

    /// `key` missed the row cache. If it is one of the keys noted by
    /// [`Txn::expect_read`], read those of them the row cache lacks from
    /// storage in one batched MultiGet and cache what it says (values and
    /// absences alike): each of their requests then finds its row instead
    /// of walking RocksDB's levels on its own (a pipeline of new
    /// counters). A key the cache holds — a pending write among
    /// them — is not read: the row cache only ever lacks keys whose
    /// committed value RocksDB holds. The noted keys are read once; a
    /// single one lacking is left to its request's own read, and so is a
    /// read that fails (its request reports the error). Whether anything
    /// was read. Out of line: every row-cache miss calls it, and only a
    /// noted key's first miss has work for it.
    #[cold]
    #[inline(never)]
    fn read_expected(&self, key: &[u8]) -> bool {
        let Some(rows) = &self.rows else {
            return false;
        };
        let mut ahead = self.ahead.borrow_mut();
        if ahead.hashes.len() < 2 {
            return false;
        }
        let mut rows = rows.borrow_mut();
        let hash = rows.hash(key);
        if !rows.caches_reads() || !ahead.iter().any(|(k, h)| h == hash && k == key) {
            return false;
        }
        let mut lacking: smallvec::SmallVec<[&[u8]; 16]> = smallvec::SmallVec::new();
        let pending = self.pending.as_ref().map(RefCell::borrow);
        let merged = |k: &[u8], h: u64| {
            pending.as_ref().is_some_and(|p| {
                let m = p.merges_of(k, h);
                m.in_flight || m.open.is_some()
            })
        };
        for (k, h) in ahead.iter() {
            if !rows.holds(h, k) && !lacking.contains(&k) && !merged(k, h) {
                lacking.push(k);
            }
        }
        let read = lacking.len() >= 2;
        if read {
            let found = self.storage.multi_get(self.shard, lacking.iter().copied());
            for (&k, value) in lacking.iter().zip(found) {
                if let Ok(value) = value {
                    rows.insert(k, value.map(|v| inline::copy(&v)));
                }
            }
        }
        drop(lacking);
        ahead.clear();
        read
    }

    pub fn shard(&self) -> usize {
        self.shard
    }

    pub fn storage(&self) -> &'s Storage {
        self.storage
    }

    /// Read a key as this request sees it. A value longer than
    /// [`inline::SMALL`] is shared, not copied (a hot key's read is a
    /// reference count); a shorter one is copied out of its row.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>, StorageError> {
        self.read(key, |v| v.map(ValueRef::to_bytes))
    }

    /// As [`Txn::get`], but a value read from RocksDB is kept in the row
    /// cache only when longer than `cached_up_to` bytes: for a service that
    /// caches what it reads itself up to that length (the catalog's hot
    /// cache), whose second copy the row cache would hold for nothing
    /// (bench/results/NOTES.md).
    pub fn get_uncaching(
        &self,
        key: &[u8],
        cached_up_to: usize,
    ) -> Result<Option<Bytes>, StorageError> {
        self.read_keeping(key, Keep::Over(cached_up_to), |v| v.map(ValueRef::to_bytes))
    }

    /// `f` of `key`'s value as [`Txn::get`] finds it, read in place when
    /// the group or the row cache holds it (no clone: see
    /// [`RowCache::get_with`]). `f` is given the value only: it can't read
    /// through the group while it runs.
    pub fn read<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<ValueRef<'_>>) -> R,
    ) -> Result<R, StorageError> {
        self.read_keeping(key, Keep::Always, f)
    }

    /// [`Txn::read`], keeping a value read from RocksDB in the row cache
    /// as `keep` says.
    #[inline]
    fn read_keeping<R>(
        &self,
        key: &[u8],
        keep: Keep,
        f: impl FnOnce(Option<ValueRef<'_>>) -> R,
    ) -> Result<R, StorageError> {
        if let Some((_, v)) = self.staged.iter().rev().find(|(k, _)| **k == *key) {
            return Ok(f(v.as_ref().map(ValueRef::Shared)));
        }
        if let Some(v) = self.applied.get(key) {
            return Ok(f(v.as_ref().map(ValueRef::Shared)));
        }
        if let Some(operand) = self.merges.get(key) {
            let base = self.get_committed(key)?;
            let whole = Bytes::from(merge(base.as_deref(), operand));
            return Ok(f(Some(ValueRef::Shared(&whole))));
        }
        let f = match self.get_cached(key, f) {
            Ok(r) => return Ok(r),
            Err(f) => f,
        };
        Ok(f(self
            .get_stored(key, keep)?
            .as_ref()
            .map(ValueRef::Shared)))
    }

    /// `f` of `key`'s row in the row cache (pending writes included), if
    /// it has one, reading the keys noted ahead with it when it has none;
    /// `f` back when it still has none.
    fn get_cached<R, F: FnOnce(Option<ValueRef<'_>>) -> R>(
        &self,
        key: &[u8],
        f: F,
    ) -> Result<R, F> {
        let Some(rows) = &self.rows else {
            return Err(f);
        };
        let f = match rows.borrow_mut().get_with(key, f) {
            Ok(r) => return Ok(r),
            Err(f) => f,
        };
        if self.read_expected(key) {
            return rows.borrow_mut().get_with(key, f);
        }
        Err(f)
    }

    /// A key as the group's commit finds it: in the row cache (pending
    /// writes included) or in RocksDB.
    fn get_committed(&self, key: &[u8]) -> Result<Option<Bytes>, StorageError> {
        match self.get_cached(key, |v| v.map(ValueRef::to_bytes)) {
            Ok(v) => Ok(v),
            Err(_) => self.get_stored(key, Keep::Always),
        }
    }

    /// A key the row cache lacks: from RocksDB (with the operands pending
    /// writes hold for it), kept in the row cache as `keep` says.
    fn get_stored(&self, key: &[u8], keep: Keep) -> Result<Option<Bytes>, StorageError> {
        if self
            .pending
            .as_ref()
            .is_some_and(|p| p.borrow().holds_merges())
        {
            return self.get_merged(key, keep);
        }
        let v = self.storage.get(self.shard, key)?.map(|v| inline::copy(&v));
        if let (Some(rows), true) = (&self.rows, keep.wants(&v)) {
            rows.borrow_mut().insert(key, v.clone());
        }
        Ok(v)
    }

    /// [`Txn::get`] of a key the row cache lacks while runs hold merge
    /// writes: RocksDB's value with the operands it doesn't have yet (the
    /// run in flight is waited for when it holds one: until its landing is
    /// seen, RocksDB may or may not hold it). A value with an operand of
    /// the open run added is not cached: RocksDB doesn't hold it.
    #[cold]
    #[inline(never)]
    fn get_merged(&self, key: &[u8], keep: Keep) -> Result<Option<Bytes>, StorageError> {
        let (Some(pending), Some(rows)) = (&self.pending, &self.rows) else {
            unreachable!("merge writes are held with pending writes and rows");
        };
        let hash = rows.borrow().hash(key);
        if pending.borrow().merges_of(key, hash).in_flight {
            if let Some(writer) = &self.writer {
                let mut pending = pending.borrow_mut();
                let before = pending.len();
                let landed = pending.wait_in_flight(writer, &mut rows.borrow_mut());
                self.storage
                    .stats
                    .pending_keys
                    .sub(before.saturating_sub(pending.len()) as i64);
                landed?;
            }
        }
        let stored = self.storage.get(self.shard, key)?;
        let pending = pending.borrow();
        match pending.merges_of(key, hash).open {
            Some(operand) => Ok(Some(merge(stored.as_deref(), operand).into())),
            None => {
                let v = stored.map(|v| inline::copy(&v));
                if keep.wants(&v) {
                    rows.borrow_mut().insert(key, v.clone());
                }
                Ok(v)
            }
        }
    }

    /// Make RocksDB hold every committed write in `[from, to)`, so that a
    /// scan of it is whole: the shard's pending writes are written back
    /// (and waited for) when any of them is in the range's slots.
    fn settle_range(&self, from: &[u8], to: &[u8]) -> Result<(), StorageError> {
        let (Some(pending), Some(writer), Some(rows)) = (&self.pending, &self.writer, &self.rows)
        else {
            return Ok(());
        };
        if !pending.borrow().touches(from, to) {
            return Ok(());
        }
        let mut pending = pending.borrow_mut();
        let before = pending.len();
        let settled = pending.settle(writer, &mut rows.borrow_mut());
        let landed = before - pending.len();
        self.storage.stats.pending_keys.sub(landed as i64);
        settled.map(|_| ())
    }

    /// Visit the committed keys of `[from, to)` in RocksDB in order until
    /// `f` returns false. Writes of this group are not seen (use
    /// [`Txn::scan`] for those).
    pub fn scan_stored(
        &self,
        from: &[u8],
        to: &[u8],
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.settle_range(from, to)?;
        self.storage.scan(self.shard, from, to, f)
    }

    /// Visit every committed key of `[from, to)` at least once, with its
    /// value, in no particular order: RocksDB's, then those still pending
    /// write-back (without waiting for the write-back, as
    /// [`Txn::scan_stored`] would). Keys the pending writes delete may be
    /// visited (from RocksDB), and one may be visited twice: for indexes
    /// that must hold every key and may hold more (the key filters).
    pub fn scan_committed(
        &self,
        from: &[u8],
        to: &[u8],
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), StorageError> {
        self.storage.scan(self.shard, from, to, |k, v| {
            f(k, v);
            true
        })?;
        if let Some(pending) = &self.pending {
            for (k, v) in pending.borrow().in_range(from, to) {
                if let Some(v) = v {
                    f(k, v);
                }
            }
        }
        Ok(())
    }

    /// Up to `max` keys of `[from, to)` as this request sees them — RocksDB
    /// merged with the writes of earlier requests of the group and of this
    /// request — in key order; expired values included (callers check).
    /// The flag says the range held more than was returned. Not for large
    /// ranges: the merge is built in memory.
    pub fn scan(&self, from: &[u8], to: &[u8], max: usize) -> Result<Scanned, StorageError> {
        use std::collections::BTreeMap;
        let inside = |k: &[u8]| k >= from && k < to;
        // Committed writes RocksDB doesn't hold yet, then the group's writes
        // in range; later writes win (pending, then applied, then staged).
        let pending = self.pending.as_ref().map(RefCell::borrow);
        let mut overlay: BTreeMap<&[u8], Option<&[u8]>> = BTreeMap::new();
        if let Some(p) = &pending {
            for (k, v) in p.in_range(from, to) {
                overlay.insert(k, v);
            }
        }
        for (k, v) in self
            .applied
            .iter()
            .chain(self.staged.iter().map(|(k, v)| (k, v)))
        {
            if inside(k) {
                overlay.insert(k, v.as_deref());
            }
        }
        // Each deletion can hide one stored key: read that many more, so a
        // truncated answer still holds `max` keys.
        let hidden = overlay.values().filter(|v| v.is_none()).count();
        let mut stored: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut stored_truncated = false;
        self.storage.scan(self.shard, from, to, |k, v| {
            if stored.len() == max + hidden {
                stored_truncated = true;
                return false;
            }
            stored.insert(k.to_vec(), v.to_vec());
            true
        })?;
        // When RocksDB had more, only overlay keys up to the last key read
        // belong to the returned prefix of the range.
        let last = stored_truncated
            .then(|| stored.keys().next_back().cloned())
            .flatten();
        for (k, v) in overlay {
            if last.as_deref().is_some_and(|last| k > last) {
                continue;
            }
            match v {
                Some(v) => stored.insert(k.to_vec(), v.to_vec()),
                None => stored.remove(k),
            };
        }
        let truncated = stored_truncated || stored.len() > max;
        Ok((stored.into_iter().take(max).collect(), truncated))
    }

    pub fn put(&mut self, key: impl Into<Key>, value: impl Into<Bytes>) {
        self.staged.push((key.into(), Some(value.into())));
    }

    /// Add `operand` to `key` without reading it (`storage::merge`): logged
    /// and committed with the group like a write, written to RocksDB as a
    /// merge operand. Over a write of the key by this group, it goes on
    /// that write (and shares the fate of its request); otherwise it is
    /// the group's, whatever becomes of the current request (for counts
    /// kept outside requests: link visits).
    pub fn merge(&mut self, key: impl Into<Key>, operand: &[u8]) {
        let key = key.into();
        if let Some((_, v)) = self.staged.iter().rev().find(|(k, _)| *k == key) {
            let whole = merge(v.as_deref(), operand);
            self.staged.push((key, Some(whole.into())));
            return;
        }
        if let Some(v) = self.applied.get(&key) {
            let whole = merge(v.as_deref(), operand);
            self.applied.insert(key, Some(whole.into()));
            self.has_writes = true;
            return;
        }
        match self.merges.entry(key) {
            hashbrown::hash_map::Entry::Occupied(mut e) => {
                let combined = merge(Some(e.get()), operand);
                *e.get_mut() = combined;
            }
            hashbrown::hash_map::Entry::Vacant(e) => {
                e.insert(operand.to_vec());
            }
        }
        self.has_writes = true;
    }

    pub fn delete(&mut self, key: impl Into<Key>) {
        self.staged.push((key.into(), None));
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
    pub fn put_unconditional(&mut self, key: impl Into<Key>, value: Vec<u8>, sync: bool) {
        self.applied.insert(key.into(), Some(value.into()));
        self.sync |= sync;
        self.has_writes = true;
    }

    /// Write a meta record in the same atomic, synced commit (cluster map
    /// changes that must land together with shard data).
    pub fn put_meta(&mut self, key: &[u8], value: &[u8]) {
        self.meta.push((key.to_vec(), Some(value.to_vec())));
        self.sync = true;
        self.has_writes = true;
    }

    /// Remove a meta record in the same atomic, synced commit.
    pub fn delete_meta(&mut self, key: &[u8]) {
        self.meta.push((key.to_vec(), None));
        self.sync = true;
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
            for (from, to) in self.staged_ranges.drain(..) {
                // An earlier write inside the range is deleted by it.
                let outside =
                    |k: &Key| !(k.as_slice() >= from.as_slice() && k.as_slice() < to.as_slice());
                self.applied.retain(|k, _| outside(k));
                self.merges.retain(|k, _| outside(k));
                self.ranges.push((from, to));
                self.ranges_deleted = true;
            }
            for (k, v) in self.staged.drain(..) {
                if !self.merges.is_empty() {
                    // Written after it: what was added is overwritten.
                    self.merges.remove(&k);
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

    /// Has any finished request of this group written anything?
    pub fn has_writes(&self) -> bool {
        self.has_writes
    }

    /// The batch to commit and whether it must be synced, if anything was written.
    pub fn into_commit(self) -> Option<(WriteBatch, bool)> {
        let (storage, shard) = (self.storage, self.shard);
        let f = self.finish();
        f.batch(storage, shard).map(|b| (b, f.sync))
    }

    /// End the group: what to commit, and the row cache and pending writes
    /// to hand back once the commit's outcome is known.
    pub fn finish(self) -> Finished {
        Finished {
            has_writes: self.has_writes,
            sync: self.sync,
            applied: self.applied,
            ranges: self.ranges,
            meta: self.meta,
            merges: self.merges,
            rows: self.rows.map(RefCell::into_inner),
            pending: self.pending.map(RefCell::into_inner),
            ahead: self.ahead.into_inner(),
            ranges_deleted: self.ranges_deleted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key of slot 5 (`a…`) or 6 (`b…`): storage keys start with their slot.
    fn k(s: &[u8]) -> Vec<u8> {
        let slot: u8 = if s.first() == Some(&b'b') { 6 } else { 5 };
        [0, slot].iter().chain(s).copied().collect()
    }

    #[test]
    fn scan_sees_the_groups_writes_over_storage() {
        for memtable in [
            crate::config::Memtable::SlotHash,
            crate::config::Memtable::Skiplist,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let storage = Storage::open_small(dir.path(), memtable);
            let mut txn = Txn::new(&storage, 0);
            for key in [&b"a1"[..], b"a2", b"a3", b"b1"] {
                txn.put(k(key), key.to_vec());
            }
            txn.finish_request(true);
            let (batch, sync) = txn.into_commit().unwrap();
            storage.write(batch, sync).unwrap();

            let mut txn = Txn::new(&storage, 0);
            // An earlier request of the group deletes a2 and adds a4...
            txn.delete(k(b"a2"));
            txn.put(k(b"a4"), b"new".to_vec());
            txn.finish_request(true);
            // ...a failed one writes nothing...
            txn.put(k(b"a5"), b"lost".to_vec());
            txn.finish_request(false);
            // ...and the current one changes a1.
            txn.put(k(b"a1"), b"mine".to_vec());
            let (found, truncated) = txn.scan(&[0, 5], &[0, 6], 10).unwrap();
            let found: Vec<(Vec<u8>, Vec<u8>)> = found;
            assert_eq!(
                found,
                vec![
                    (k(b"a1"), b"mine".to_vec()),
                    (k(b"a3"), b"a3".to_vec()),
                    (k(b"a4"), b"new".to_vec())
                ],
                "{memtable:?}"
            );
            assert!(!truncated);
            let (found, truncated) = txn.scan(&[0, 5], &[0, 6], 2).unwrap();
            assert_eq!(found.len(), 2);
            assert!(truncated);
            // A range over several slots (read slot by slot with the
            // per-slot memtable) sees both, in order.
            let mut seen = Vec::new();
            storage
                .scan(0, &[], &[0xff, 0xff, 0xff], |key, _| {
                    seen.push(key.to_vec());
                    true
                })
                .unwrap();
            assert_eq!(
                seen,
                vec![k(b"a1"), k(b"a2"), k(b"a3"), k(b"b1")],
                "{memtable:?}"
            );
        }
    }

    /// What a service that caches its own reads asks for: the row cache
    /// keeps only values longer than that service takes, and no absence;
    /// a row it holds (a pending write) and the group's writes are read as
    /// by `get`.
    #[test]
    fn uncaching_reads_leave_the_row_cache_what_the_service_cant_hold() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open_small(dir.path(), crate::config::Memtable::SlotHash);
        let mut txn = Txn::new(&storage, 0);
        txn.put(k(b"short"), b"tiny".to_vec());
        txn.put(k(b"long"), vec![7u8; 100]);
        txn.put(k(b"pending"), b"old".to_vec());
        txn.finish_request(true);
        let (batch, sync) = txn.into_commit().unwrap();
        storage.write(batch, sync).unwrap();

        let mut rows = RowCache::new(1 << 20);
        rows.insert(&k(b"pending"), Some(Bytes::from_static(b"newer")));
        let mut txn = Txn::new(&storage, 0).with_rows(rows);
        let reads = || storage.stats.reads.get();
        let before = reads();
        let get = |txn: &Txn, key: &[u8]| txn.get_uncaching(&k(key), 50).unwrap();
        assert_eq!(get(&txn, b"short").as_deref(), Some(&b"tiny"[..]));
        assert_eq!(get(&txn, b"long").map(|v| v.len()), Some(100));
        assert_eq!(get(&txn, b"absent"), None);
        assert_eq!(get(&txn, b"pending").as_deref(), Some(&b"newer"[..]));
        assert_eq!(reads() - before, 3);
        // Read again: only the long value came from the row cache.
        get(&txn, b"short");
        get(&txn, b"long");
        get(&txn, b"absent");
        assert_eq!(reads() - before, 5);
        // `get` keeps what it reads.
        txn.get(&k(b"short")).unwrap();
        txn.get(&k(b"short")).unwrap();
        assert_eq!(reads() - before, 6);
        // The group's own write is seen first.
        txn.put(k(b"absent"), b"now".to_vec());
        assert_eq!(get(&txn, b"absent").as_deref(), Some(&b"now"[..]));
        assert_eq!(reads() - before, 6);
    }

    #[test]
    fn a_read_buffers_lacking_keys_are_read_together_once() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open_small(dir.path(), crate::config::Memtable::SlotHash);
        let mut txn = Txn::new(&storage, 0);
        for key in [&b"a1"[..], b"a2", b"a3"] {
            txn.put(k(key), key.to_vec());
        }
        txn.finish_request(true);
        let (batch, sync) = txn.into_commit().unwrap();
        storage.write(batch, sync).unwrap();

        // The row cache holds a3 with a newer value than RocksDB's, as it
        // holds a pending write.
        let mut rows = RowCache::new(1 << 20);
        rows.insert(&k(b"a3"), Some(Bytes::from_static(b"newer")));
        let txn = Txn::new(&storage, 0).with_rows(rows);
        let expect = |key: &[u8]| txn.expect_read(&k(key), txn.row_hash(&k(key)).unwrap());
        for key in [&b"a1"[..], b"a2", b"a3", b"a4", b"a1"] {
            expect(key);
        }
        let reads = || storage.stats.reads.get();
        let before = reads();

        // The first miss reads a1 (once), a2 and a4 in one batch; not a3,
        // which the cache holds, nor b1, which was not noted.
        assert_eq!(txn.get(&k(b"a2")).unwrap().as_deref(), Some(&b"a2"[..]));
        assert_eq!(reads() - before, 3);
        // Their requests find their rows, absence included.
        assert_eq!(txn.get(&k(b"a1")).unwrap().as_deref(), Some(&b"a1"[..]));
        assert_eq!(txn.get(&k(b"a4")).unwrap(), None);
        assert_eq!(txn.get(&k(b"a3")).unwrap().as_deref(), Some(&b"newer"[..]));
        assert_eq!(reads() - before, 3);
        // b1 is read by its own request.
        assert_eq!(txn.get(&k(b"b1")).unwrap(), None);
        assert_eq!(reads() - before, 4);

        // The noted keys are read once: a miss after that reads alone, and
        // so does a single lacking key.
        txn.forget_expected();
        expect(b"a1");
        expect(b"a5");
        assert_eq!(txn.get(&k(b"a5")).unwrap(), None);
        assert_eq!(reads() - before, 5);
        txn.forget_expected();
        expect(b"a6");
        expect(b"a7");
        assert_eq!(txn.get(&k(b"a6")).unwrap(), None);
        assert_eq!(reads() - before, 7);
        assert_eq!(txn.get(&k(b"a8")).unwrap(), None);
        assert_eq!(txn.get(&k(b"a7")).unwrap(), None);
        assert_eq!(reads() - before, 8);
    }
}
