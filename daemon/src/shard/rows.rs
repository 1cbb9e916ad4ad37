//! The row cache: recently read or written storage values of one shard, by
//! storage key, so a hot key is answered from a hash map instead of a
//! RocksDB lookup (a memtable skiplist search was the top cost of reads).
//!
//! It holds committed data only: filled by reads that went to storage
//! (not those of a service that caches what it reads itself:
//! `Txn::get_uncaching`),
//! updated with a group's writes after its commit succeeded, cleared when a
//! commit fails, when a group deleted a key range, and when slots move
//! (their data changes outside the shard's groups). Values keep their
//! header: readers check expiry exactly as they do for storage reads, and
//! "known absent" is cached too.
//!
//! It is also where reads find the shard's pending writes (`pending`:
//! committed to the shard's log, not yet in RocksDB). A pending write is a
//! *dirty* row: it carries the number of the run that writes it back, and
//! stays — whatever the budget says, through eviction and clearing — until
//! that run has landed ([`RowCache::landed`]: no row is touched, the bytes
//! each run holds are counted apart). So a read is one probe whether its
//! key is pending, cached or neither, and a landed run has nothing to move
//! anywhere (pending writes used to be maps of their own, probed before
//! this one, and moved into it once landed: bench/results/NOTES.md).
//!
//! What goes when the cache is past its budget is chosen by CLOCK over the
//! table's own buckets: each row counts its reads (up to [`MAX_USES`]); a
//! hand walks the buckets in order, and a clean row it finds takes one read
//! off, or goes when it has none left. So a row read more often than the
//! hand comes round stays, a row read once goes at the hand's next pass,
//! and the cache holds its whole budget at O(1) per operation with no
//! per-entry links (a new row lands wherever its hash puts it, so it may
//! be passed soon: that, as S3-FIFO's small queue, lets a link clicked once
//! go before the popular ones). It replaced two generations that aged as
//! one and turned over when full, holding 1/5 to 4/5 of the budget: within
//! the same budget, links-resolve's reads miss 30.8 % of the time instead
//! of 35.5 % at 10M links, and 15.1 % instead of 19.8 % at 1M
//! (bench/results/NOTES.md).
//! One table holds every row, so a lookup, an insert or a hit is one probe
//! (two tables cost two on each insert and each miss: bench/results/NOTES.md).

use crate::storage::inline::{self, Held, ValueRef};
use crate::storage::keys;
use crate::storage::keys::{Key, INLINE_KEY};
use bytes::Bytes;
use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};
use std::collections::VecDeque;
use std::hash::BuildHasher;

/// A table slot: the inline key and the row, and the slot's control byte.
const SLOT_BYTES: usize = std::mem::size_of::<(Key, Row)>() + 1;

/// What a row costs beyond its value's bytes and a long key's: its slot at
/// the table's load once rows come and go. Removed rows leave marks that
/// only a rehash clears, which hashbrown does in place only while the table
/// is at most 7/16 full (it doubles it otherwise), so rows are held to that
/// ([`RowCache::max_rows`]) and each comes with 2.29 slots. (Charged 64
/// bytes, a row's real cost was about twice its charge: at 768 MiB, two
/// shards' tables took 187 MiB where the cache counted 60,
/// bench/results/NOTES.md.)
const ENTRY_OVERHEAD: usize = SLOT_BYTES * 9 / 4;

/// The entry size the table is reserved for at first. Growing a table from
/// empty rehashes every entry at each doubling and faults in fresh pages,
/// and a cold cache fills at the worst moment (the first seconds of a
/// flash sale: bench/results/NOTES.md). Larger than a typical counter or
/// short string, so the reservation stays under the budget.
const RESERVE_ENTRY_BYTES: usize = 256;

/// The most reads a row counts: one read more than the hand has taken off
/// keeps it for one more pass, up to this many. (1 is plain CLOCK; 3 missed
/// 0.4 points fewer of a Zipf 0.99 load: bench/results/NOTES.md.)
const MAX_USES: u8 = 3;

// Keys up to `keys::INLINE_KEY` long are held in the table itself: a
// probe compares the key where it found the entry, instead of following a
// pointer to another cache line (`memcmp` on heap keys was a tenth of a
// kv-incr profile: bench/results/NOTES.md).

/// A run number no run has: the row is clean (RocksDB holds its value).
pub const CLEAN: u32 = 0;

struct Row {
    value: Option<Held>,
    /// Reads since the hand last took one off (at most [`MAX_USES`]).
    uses: u8,
    /// The run that writes this value back ([`CLEAN`]: none); dirty while
    /// greater than the last run landed.
    run: u32,
    /// Where in its run the write is (meaningful while dirty).
    index: u32,
}

#[derive(Default)]
pub struct RowCache {
    /// Byte budget for rows; 0 caches nothing read (pending writes are
    /// held all the same).
    cap: usize,
    rows: HashTable<(Key, Row)>,
    hasher: DefaultHashBuilder,
    /// Where the table's control bytes are, for [`RowCache::prefetch_group`].
    ctrl: CtrlAt,
    /// The bucket the CLOCK hand looks at next.
    hand: usize,
    /// [`RowCache::max_rows`] when last worked out.
    max_rows: usize,
    /// What every row is charged ([`size`]), dirty ones included.
    charged: usize,
    /// What the dirty rows are charged, and how many there are: the sums
    /// of `runs`.
    dirty: usize,
    dirty_rows: usize,
    /// What the dirty rows of each run after `landed` are charged, and how
    /// many there are, the next run's first.
    runs: VecDeque<(usize, usize)>,
    /// The last run landed: rows of later runs are dirty.
    landed: u32,
    pub hits: u64,
    pub misses: u64,
}

/// What a row is charged: its slot, a key too long to sit in it, a value
/// too long to sit in it.
fn size(key: &[u8], value: &Option<Held>) -> usize {
    let spilled = if key.len() > INLINE_KEY { key.len() } else { 0 };
    ENTRY_OVERHEAD + spilled + value.as_ref().map_or(0, Held::outside)
}

impl RowCache {
    /// A cache of `cap_bytes`.
    pub fn new(cap_bytes: usize) -> Self {
        let mut cache = RowCache {
            cap: cap_bytes,
            rows: HashTable::with_capacity(cap_bytes / 2 / RESERVE_ENTRY_BYTES),
            ..RowCache::default()
        };
        cache.max_rows = cache.max_rows();
        cache
    }

    /// The hash the table files `key` under.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Start loading the control bytes a probe for `hash` reads first.
    ///
    /// A group commit writes hundreds of random keys of a table far larger
    /// than the CPU's caches: each probe was two cache misses in a row
    /// (control bytes, then the row), a tenth of a kv-set profile
    /// (bench/results/NOTES.md). Callers prefetch a few keys ahead — the
    /// control bytes of one, [`RowCache::prefetch_row`] of a nearer one —
    /// so the misses overlap.
    #[inline]
    pub fn prefetch_group(&mut self, hash: u64) {
        self.ctrl.prefetch(&self.rows, hash);
    }

    /// Start loading the row a probe for `hash` most likely ends at (the
    /// first whose control byte matches), reading the control bytes: call
    /// it a few keys after [`RowCache::prefetch_group`] of the same hash.
    #[inline]
    pub fn prefetch_row(&self, hash: u64) {
        if let Some(row) = likely(&self.rows, hash) {
            let at = row as *const (Key, Row) as *const u8;
            prefetch(at);
            prefetch(at.wrapping_add(64));
        }
    }

    /// Start loading the value of the row [`RowCache::prefetch_row`] of the
    /// same hash loads (its first two cache lines): call it once that row
    /// has had time to arrive, since it reads the row to find the value.
    ///
    /// A row holds a value longer than [`inline::SMALL`] behind a
    /// pointer, so a read that found its row in the cache still waited for
    /// the value's bytes: a tenth of a kv-incr profile, on the load of the
    /// value's header (bench/results/NOTES.md), before short values were
    /// held in the row itself.
    /// A key too long to sit in its row (a user's book under a policy,
    /// often) is loaded too: the probe compares it.
    #[inline]
    pub fn prefetch_value(&self, hash: u64) {
        if let Some((key, row)) = likely(&self.rows, hash) {
            if key.spilled() {
                prefetch(key.as_ptr());
            }
            if let Some(Held::Shared(v)) = &row.value {
                // The reference count a read's clone updates sits right
                // before an inline value (`storage::inline`).
                prefetch(v.as_ptr().wrapping_sub(inline::HEAD));
                prefetch(v.as_ptr());
                if v.len() > 64 {
                    prefetch(v.as_ptr().wrapping_add(64));
                }
            }
        }
    }

    /// Whether the key's committed value (or its absence) is held, without
    /// counting a hit or a miss or a read of the row. `hash` is
    /// [`RowCache::hash`] of `key`.
    #[inline]
    pub fn holds(&self, hash: u64, key: &[u8]) -> bool {
        self.rows.find(hash, |(k, _)| k.as_slice() == key).is_some()
    }

    /// Whether rows read from storage are kept at all (a budget of 0 keeps
    /// only pending writes).
    pub fn caches_reads(&self) -> bool {
        self.cap > 0
    }

    /// `Some(value)` when the key's committed value (or its absence) is known.
    #[inline]
    pub fn get(&mut self, key: &[u8]) -> Option<Option<Bytes>> {
        self.get_with(key, |v| v.map(ValueRef::to_bytes)).ok()
    }

    /// `f` of the key's committed value (`None`: absent) when it is known,
    /// read in place; `f` back when it is not. A read that needs only what
    /// the value says (an INCR's number) leaves its reference count alone:
    /// a clone and its drop are two atomic operations on a line the commit
    /// then updates again (bench/results/NOTES.md).
    #[inline]
    pub fn get_with<R, F: FnOnce(Option<ValueRef<'_>>) -> R>(
        &mut self,
        key: &[u8],
        f: F,
    ) -> Result<R, F> {
        if self.rows.is_empty() {
            return Err(f);
        }
        let hash = self.hash(key);
        let Some((_, row)) = self.rows.find_mut(hash, |(k, _)| k.as_slice() == key) else {
            self.misses += 1;
            return Err(f);
        };
        self.hits += 1;
        if row.uses < MAX_USES {
            row.uses += 1;
        }
        Ok(f(row.value.as_ref().map(Held::view)))
    }

    /// What the row of `key` (`hash`: its hash) holds, if there is one,
    /// without counting a hit or a miss or moving the row.
    pub fn peek(&self, hash: u64, key: &[u8]) -> Option<Option<Bytes>> {
        self.rows
            .find(hash, |(k, _)| k.as_slice() == key)
            .map(|(_, row)| row.value.as_ref().map(|v| v.view().to_bytes()))
    }

    /// Where run `run` holds `key`'s write, if it does (the row is read:
    /// call it once [`RowCache::prefetch_row`] has brought it in).
    #[inline]
    pub fn held_by(&self, hash: u64, key: &[u8], run: u32) -> Option<u32> {
        self.rows
            .find(hash, |(k, _)| k.as_slice() == key)
            .and_then(|(_, row)| (row.run == run).then_some(row.index))
    }

    /// Remember a key's value as RocksDB holds it (`None`: absent).
    pub fn insert(&mut self, key: &[u8], value: Option<Bytes>) {
        let value = value.map(Held::new);
        let n = size(key, &value);
        if n > self.cap / 16 || !self.room_for_reads() {
            // Not cached (too big to be worth it, no cache at all, or
            // pending writes fill it): make sure no older copy lingers — a
            // landed pending write stays until evicted, even with no cache.
            if !self.rows.is_empty() {
                self.remove(key);
            }
            return;
        }
        let hash = self.hash(key);
        match entry(&mut self.rows, &self.hasher, hash, key) {
            Entry::Occupied(mut e) => {
                let row = &mut e.get_mut().1;
                debug_assert!(
                    row.run <= self.landed,
                    "a read never replaces a pending write"
                );
                let was = size(key, &row.value);
                row.value = value;
                self.charged -= was;
            }
            Entry::Vacant(e) => {
                let row = Row {
                    value,
                    uses: 0,
                    run: CLEAN,
                    index: 0,
                };
                e.insert((Key::from_slice(key), row));
            }
        }
        self.charged += n;
        self.evict();
    }

    /// Hold `value` as `key`'s newest committed value, pending until run
    /// `run` has landed. `place` puts the write in the run and says where:
    /// it is given where the run already holds the key, if it does.
    /// `hash` is the key's [`RowCache::hash`] (computed once per commit).
    pub fn write(
        &mut self,
        hash: u64,
        key: &[u8],
        value: Option<Bytes>,
        run: u32,
        place: impl FnOnce(&[u8], Option<&[u8]>, Option<u32>) -> u32,
    ) {
        debug_assert!(run > self.landed);
        let value = value.map(Held::new);
        let n = size(key, &value);
        // A key written once and seldom read goes at the hand's first pass
        // once landed; any other write counts as a read.
        let uses = u8::from(!keys::written_cold(key));
        match entry(&mut self.rows, &self.hasher, hash, key) {
            Entry::Occupied(mut e) => {
                let row = &mut e.get_mut().1;
                let held = (row.run == run).then_some(row.index);
                let index = place(key, value.as_ref().map(Held::bytes), held);
                let was = (size(key, &row.value), row.run);
                row.index = index;
                row.run = run;
                row.value = value;
                row.uses = row.uses.max(uses);
                self.charged -= was.0;
                self.undirty(was.1, was.0);
            }
            Entry::Vacant(e) => {
                let index = place(key, value.as_ref().map(Held::bytes), None);
                let row = Row {
                    value,
                    uses,
                    run,
                    index,
                };
                e.insert((Key::from_slice(key), row));
            }
        }
        self.charged += n;
        self.dirty(run, n);
        self.evict();
    }

    /// A pending write whose run failed to land joins run `run` (its row
    /// keeps its value; `place` puts it in the run and says where), unless
    /// run `run` writes the key already: then that value is newer, and
    /// this one is dropped.
    pub fn requeue(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
        run: u32,
        place: impl FnOnce() -> u32,
    ) {
        let hash = self.hash(key);
        match entry(&mut self.rows, &self.hasher, hash, key) {
            Entry::Occupied(mut e) => {
                let row = &mut e.get_mut().1;
                if row.run != run {
                    let (was, n) = (row.run, size(key, &row.value));
                    row.run = run;
                    row.index = place();
                    self.undirty(was, n);
                    self.dirty(run, n);
                }
            }
            Entry::Vacant(e) => {
                // (Never: a dirty row stays until its run lands.)
                let value = value.map(Held::copy);
                let n = size(key, &value);
                let row = Row {
                    uses: 1,
                    run,
                    index: place(),
                    value,
                };
                e.insert((Key::from_slice(key), row));
                self.charged += n;
                self.dirty(run, n);
            }
        }
    }

    /// Run `run` has landed: RocksDB holds its writes, and so every row of
    /// it or an earlier run is clean.
    pub fn landed(&mut self, run: u32) {
        while self.landed < run {
            let Some((bytes, rows)) = self.runs.pop_front() else {
                self.landed = run;
                break;
            };
            self.dirty -= bytes;
            self.dirty_rows -= rows;
            self.landed += 1;
        }
        if self.charged > self.cap {
            self.evict();
        }
    }

    /// Count `n` bytes of dirty rows in run `run`.
    fn dirty(&mut self, run: u32, n: usize) {
        let at = (run - self.landed - 1) as usize;
        if self.runs.len() <= at {
            self.runs.resize(at + 1, (0, 0));
        }
        self.runs[at].0 += n;
        self.runs[at].1 += 1;
        self.dirty += n;
        self.dirty_rows += 1;
    }

    /// A row of `n` bytes is no longer dirty in run `run` (which may have
    /// landed: then it was not).
    fn undirty(&mut self, run: u32, n: usize) {
        if run > self.landed {
            let at = (run - self.landed - 1) as usize;
            self.runs[at].0 -= n;
            self.runs[at].1 -= 1;
            self.dirty -= n;
            self.dirty_rows -= 1;
        }
    }

    /// Forget `key` (unless a write of it is pending).
    pub fn remove(&mut self, key: &[u8]) {
        let landed = self.landed;
        let hash = self.hash(key);
        let Ok(e) = self.rows.find_entry(hash, |(k, _)| k.as_slice() == key) else {
            return;
        };
        let row = &e.get().1;
        if row.run <= landed {
            let was = size(key, &row.value);
            e.remove();
            self.charged -= was;
        }
    }

    /// Whether pending writes leave room for rows read: a read is not
    /// cached once they hold 7/8 of the budget (of its bytes or its rows),
    /// so that the hand never looks for the few clean rows among many
    /// dirty ones for each row it drops.
    fn room_for_reads(&self) -> bool {
        self.dirty < self.cap / 8 * 7 && self.dirty_rows < self.max_rows / 8 * 7
    }

    /// While the cache is past its budget and holds clean rows: move the
    /// hand on, taking a read off each clean row it passes and dropping
    /// those with none left. Dirty rows are passed by. A row is passed at
    /// most `MAX_USES + 1` times before it goes, so this ends within as
    /// many turns of the table; each row dropped costs about three buckets
    /// looked at (bench/results/NOTES.md).
    fn evict(&mut self) {
        if (self.charged <= self.cap && self.rows.len() <= self.max_rows)
            || self.rows.len() == self.dirty_rows
        {
            return;
        }
        self.max_rows = self.max_rows();
        let landed = self.landed;
        let mut buckets = self.rows.num_buckets();
        let mut at = self.hand;
        // (Bounded all the same: were the dirty bytes ever miscounted, a
        // cache of dirty rows only would keep the hand turning.)
        let mut steps = (usize::from(MAX_USES) + 2) * buckets;
        while (self.charged > self.cap || self.rows.len() > self.max_rows)
            && self.rows.len() > self.dirty_rows
            && steps > 0
        {
            steps -= 1;
            if at >= buckets {
                at = 0;
                if self.shrink() {
                    buckets = self.rows.num_buckets();
                }
            }
            if let Ok(mut e) = self.rows.get_bucket_entry(at) {
                let (key, row) = e.get_mut();
                if row.run <= landed {
                    if row.uses > 0 {
                        row.uses -= 1;
                    } else {
                        let was = size(key, &row.value);
                        e.remove();
                        self.charged -= was;
                    }
                }
            }
            at += 1;
        }
        self.hand = at;
    }

    /// The most rows the budget holds at the values' mean size. hashbrown
    /// rehashes a table in place (clearing the marks removed rows leave)
    /// only while it is at most 7/16 full, and doubles it otherwise; so
    /// rows are held to 7/16 of the largest table that fits the budget
    /// with their values, and the table never grows past it. (Held only to
    /// their charge, rows evicted one at a time doubled the table: 3 slots
    /// a row for links, the cache 40 % over its budget.)
    fn max_rows(&self) -> usize {
        let len = self.rows.len();
        let outside = self
            .charged
            .saturating_sub(len * ENTRY_OVERHEAD)
            .checked_div(len)
            .unwrap_or(0);
        let mut buckets = (self.cap / SLOT_BYTES + 1).next_power_of_two() / 2;
        // (An insert comes before the eviction it may call for, and the
        // table rehashes in place only when that insert leaves it at most
        // half of its 7/8: one row less than that.)
        let most = |buckets: usize| (buckets / 8 * 7 / 2).saturating_sub(1);
        while buckets > 16 && buckets * SLOT_BYTES + most(buckets) * outside > self.cap {
            buckets /= 2;
        }
        most(buckets)
    }

    /// Pending writes are held whatever the budget says, so a burst of
    /// them may have grown the table far past what the budget holds: give
    /// that back (a rehash of what is left, only after a burst; called as
    /// the hand comes round). The most rows the budget holds is when their
    /// values are empty; a table has room for up to about twice its rows,
    /// see `ENTRY_OVERHEAD`, so a table with room for three times what it
    /// needs is left from a burst. True when it shrank.
    fn shrink(&mut self) -> bool {
        let need = self.rows.len().max(self.cap / ENTRY_OVERHEAD);
        if self.rows.capacity() <= 3 * need {
            return false;
        }
        let hasher = &self.hasher;
        self.rows
            .shrink_to(need * 3 / 2, |(k, _)| hasher.hash_one(k.as_slice()));
        true
    }

    /// Forget every clean row (pending writes stay).
    pub fn clear(&mut self) {
        let landed = self.landed;
        if self.dirty_rows == 0 {
            self.rows.clear();
        } else {
            self.rows.retain(|(_, row)| row.run > landed);
        }
        self.charged = self.dirty;
    }

    /// Bytes held: the rows' charge, and the table's slots beyond it (a
    /// table a burst of pending writes grew stays that large until the
    /// hand finds it mostly empty).
    pub fn bytes(&self) -> usize {
        let spare = (self.rows.allocation_size()).saturating_sub(self.rows.len() * ENTRY_OVERHEAD);
        self.charged + spare
    }

    /// The budget for rows is now `cap_bytes`: the shard's share less what
    /// its filters and hot state hold (`Shard::publish_memory`).
    pub fn set_cap(&mut self, cap_bytes: usize) {
        self.cap = cap_bytes;
        self.max_rows = self.max_rows();
        self.evict();
    }
}

/// The table's entry for `key`.
#[inline]
fn entry<'t>(
    rows: &'t mut HashTable<(Key, Row)>,
    hasher: &DefaultHashBuilder,
    hash: u64,
    key: &[u8],
) -> Entry<'t, (Key, Row)> {
    rows.entry(
        hash,
        |(k, _)| k.as_slice() == key,
        |(k, _)| hasher.hash_one(k.as_slice()),
    )
}

/// Start loading the cache line at `at` (a hint: never faults).
#[inline(always)]
pub(crate) fn prefetch(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and never faults,
    // whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(at.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Where a [`HashTable`]'s control bytes start, so that the group of them a
/// probe for a hash reads first can be loaded ahead of the probe
/// ([`CtrlAt::prefetch`]). The address is worked out from the table's
/// layout (entries below the control bytes, the probe starting at
/// `hash & (buckets - 1)`) and found again when the table grows; a prefetch
/// never faults, so were the layout ever different, this would only cost
/// the instruction.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CtrlAt {
    at: usize,
    buckets: usize,
}

impl CtrlAt {
    /// Start loading the control bytes a probe of `table` for `hash` reads
    /// first.
    #[inline]
    pub fn prefetch<T>(&mut self, table: &HashTable<T>, hash: u64) {
        if table.is_empty() {
            return;
        }
        let buckets = table.num_buckets();
        if self.buckets != buckets {
            let Some(i) = table.iter_buckets().next() else {
                return;
            };
            let entry = std::ptr::from_ref(table.get_bucket(i).expect("an occupied bucket"));
            self.at = (entry as usize).wrapping_add((i + 1) * std::mem::size_of::<T>());
            self.buckets = buckets;
        }
        prefetch(self.at.wrapping_add(hash as usize & (buckets - 1)) as *const u8);
    }
}

/// The entry a probe of `table` for `hash` most likely ends at: the first
/// whose control byte matches. Reads the control bytes, not the entries:
/// for loading an entry ahead of its probe, once [`CtrlAt::prefetch`] of
/// the hash has had time to arrive.
#[inline]
pub(crate) fn likely<T>(table: &HashTable<T>, hash: u64) -> Option<&T> {
    table
        .iter_hash_buckets(hash)
        .next()
        .and_then(|i| table.get_bucket(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_misses_absence_and_eviction() {
        let mut c = RowCache::new(16 * 1024);
        assert_eq!(c.get(b"k"), None);
        c.insert(b"k", Some(Bytes::from_static(b"v")));
        c.insert(b"gone", None);
        assert_eq!(c.get(b"k"), Some(Some(Bytes::from_static(b"v"))));
        assert_eq!(c.get(b"gone"), Some(None));
        c.insert(b"k", Some(Bytes::from_static(b"v2")));
        assert_eq!(c.get(b"k"), Some(Some(Bytes::from_static(b"v2"))));
        // Fill past the budget: rows read once go, kept ones survive while used.
        for i in 0..2_000u32 {
            c.insert(&i.to_be_bytes(), Some(Bytes::from(vec![0; 40])));
            let _ = c.get(b"k");
        }
        assert_eq!(
            c.get(b"k"),
            Some(Some(Bytes::from_static(b"v2"))),
            "a key in use stays"
        );
        assert_eq!(c.get(&0u32.to_be_bytes()), None, "an unused one goes");
        assert!(c.charged <= 16 * 1024);
        c.clear();
        assert_eq!(c.get(b"k"), None);
    }

    /// A working set of 9/10 of the budget, read over and over in any
    /// order, stays whole (two generations that turned over when full held
    /// no more than 4/5 of it); a larger one is evicted from, and the cache
    /// stays within its budget.
    #[test]
    fn a_working_set_within_the_budget_stays_whole() {
        let cap = 100 * 1024;
        let entry = size(
            &0u32.to_be_bytes(),
            &Some(Held::new(Bytes::from(vec![0; 36]))),
        );
        let keys = (cap * 9 / 10 / entry) as u32;
        let mut c = RowCache::new(cap);
        for i in 0..keys {
            c.insert(&i.to_be_bytes(), Some(Bytes::from(vec![0; 36])));
        }
        for round in 0..5u32 {
            for j in 0..keys {
                // Every key once per round, in a different order each time.
                let i = (j * 7 + round * 13) % keys;
                assert!(c.get(&i.to_be_bytes()).is_some(), "round {round}: key {i}");
            }
        }
        assert_eq!(c.misses, 0);
        let mut c = RowCache::new(cap);
        for i in 0..20_000u32 {
            c.insert(&i.to_be_bytes(), Some(Bytes::from(vec![0; 36])));
            let _ = c.get(&(i / 2).to_be_bytes());
            assert!(c.charged <= cap, "{} bytes", c.charged);
        }
        assert!(c.rows.len() < 20_000, "evicting");
    }

    /// What the cache reports is about what its table and values take, and
    /// what it takes stays about within its budget.
    #[test]
    fn the_charge_is_what_the_table_and_the_values_take() {
        let cap = 4 << 20;
        for len in [8, 40, 200] {
            let mut c = RowCache::new(cap);
            let value = vec![7u8; len];
            for i in 0..200_000u32 {
                c.insert(&i.to_be_bytes(), Some(inline::copy(&value)));
            }
            let values: usize = c
                .rows
                .iter()
                .map(|(_, r)| {
                    match &r.value {
                        Some(Held::Shared(v)) => (v.len() + inline::HEAD).next_multiple_of(16),
                        // In the row: its slot is the table's.
                        Some(Held::Small { .. }) | None => 0,
                    }
                })
                .sum();
            let real = c.rows.allocation_size() + values;
            let reported = c.bytes();
            assert!(
                reported * 4 >= real * 3 && reported * 3 <= real * 4,
                "{len}-byte values: reported {reported}, real {real}"
            );
            assert!(
                real <= cap * 5 / 4,
                "{len}-byte values: {real} bytes in a {cap}-byte cache"
            );
        }
    }

    /// Pending writes are held past the budget; once landed, the table they
    /// grew is given back as the hand comes round.
    #[test]
    fn a_table_grown_by_pending_writes_shrinks_once_they_land() {
        let cap = 256 * 1024;
        let mut c = RowCache::new(cap);
        let v = Some(Bytes::from_static(b"0123456789"));
        for i in 0..50_000u32 {
            let k = i.to_be_bytes();
            c.write(c.hash(&k), &k, v.clone(), 1, |_, _, _| i);
        }
        assert!(
            c.rows.allocation_size() > 8 * cap,
            "every pending write is held"
        );
        assert!(c.bytes() >= c.rows.allocation_size());
        c.landed(1);
        for i in 0..50_000u32 {
            c.insert(&(i + 1_000_000).to_be_bytes(), v.clone());
        }
        // (A table is kept large enough for as many rows as the budget
        // holds with no values at all.)
        assert!(
            c.rows.allocation_size() <= 2 * cap,
            "{} bytes of table left",
            c.rows.allocation_size()
        );
        assert!(c.bytes() <= 2 * cap, "{} bytes held", c.bytes());
    }

    #[test]
    fn bytes_follow_replacements_removals_and_aging() {
        let mut c = RowCache::new(64 * 1024);
        let entry = |k: &[u8], v: usize| size(k, &Some(Held::new(Bytes::from(vec![0; v]))));
        c.insert(b"a", Some(Bytes::from(vec![0; 10])));
        c.insert(b"b", None);
        assert_eq!(c.charged, entry(b"a", 10) + size(b"b", &None));
        c.insert(b"a", Some(Bytes::from(vec![0; 3])));
        c.remove(b"b");
        assert_eq!(
            c.charged,
            entry(b"a", 3),
            "a replaced value and a removed key leave"
        );
        // A row read between the hand's passes stays while the rows around
        // it, read once, go; once no longer read, it goes too.
        let mut i = 0u32;
        for _ in 0..5_000 {
            c.insert(&i.to_be_bytes(), Some(Bytes::from(vec![0; 100])));
            if i.is_multiple_of(50) {
                assert!(c.get(b"a").is_some(), "after {i} rows");
            }
            i += 1;
        }
        assert_eq!(c.get(b"a"), Some(Some(Bytes::from(vec![0; 3]))));
        assert_eq!(c.get(&0u32.to_be_bytes()), None);
        while c.holds(c.hash(b"a"), b"a") {
            c.insert(&i.to_be_bytes(), None);
            i += 1;
            assert!(i < 10_000, "a row no longer read stays");
        }
        let held: usize = c.rows.iter().map(|(k, r)| size(k, &r.value)).sum();
        assert_eq!(
            c.charged, held,
            "the bytes charged are what the table holds"
        );
    }

    #[test]
    fn pending_writes_stay_until_their_run_lands() {
        // A small budget, no clean rows at all: pending writes are held anyway.
        for cap in [0, 4 * 1024] {
            let mut c = RowCache::new(cap);
            let v = |s: &'static [u8]| Some(Bytes::from_static(s));
            let mut held = Vec::new();
            for (key, value, at) in [(&b"p"[..], v(b"1"), 0), (b"p", v(b"2"), 7), (b"q", None, 1)] {
                c.write(c.hash(key), key, value, 1, |_, _, h| {
                    held.push(h);
                    at
                });
            }
            assert_eq!(
                held,
                vec![None, Some(0), None],
                "a run is told where it holds a key already"
            );
            // Filling and clearing the cache drops clean rows only.
            for i in 0..500u32 {
                c.insert(&i.to_be_bytes(), Some(Bytes::from(vec![0; 40])));
            }
            c.clear();
            assert_eq!(c.get(b"p"), Some(v(b"2")), "cap {cap}");
            assert_eq!(c.get(b"q"), Some(None), "cap {cap}");
            // The next run writes it again: a new write of that run.
            let mut again = Some(Some(0));
            c.write(c.hash(b"p"), b"p", v(b"3"), 2, |_, _, h| {
                again = Some(h);
                0
            });
            assert_eq!(again, Some(None));
            c.landed(1);
            c.clear();
            assert_eq!(c.get(b"p"), Some(v(b"3")), "run 2 has not landed");
            assert_eq!(c.get(b"q"), None, "run 1 has: q is clean, and cleared");
            c.landed(2);
            for i in 0..500u32 {
                let k = i.to_be_bytes();
                c.write(c.hash(&k), &k, None, 3 + i, |_, _, _| 0);
                c.landed(3 + i);
            }
            assert_eq!(c.get(b"p"), None, "a landed write ages out like any row");
            let held: usize = c.rows.iter().map(|(k, r)| size(k, &r.value)).sum();
            assert_eq!(c.charged, held, "cap {cap}");
        }
    }

    /// The bytes of pending writes are counted by run: a rewrite moves
    /// them to its run, a failed run's requeue to the open one, a landed
    /// run makes them clean. A cache full of pending writes keeps no read,
    /// and once they land it is back within its budget.
    #[test]
    fn pending_bytes_are_counted_by_run() {
        let cap = 8 * 1024;
        let mut c = RowCache::new(cap);
        let v = |n: usize| Some(Bytes::from(vec![1; n]));
        let dirty_held = |c: &RowCache| -> usize {
            c.rows
                .iter()
                .filter(|(_, r)| r.run > c.landed)
                .map(|(k, r)| size(k, &r.value))
                .sum()
        };
        for i in 0..100u32 {
            let k = i.to_be_bytes();
            c.write(c.hash(&k), &k, v(50), 1 + i % 3, |_, _, _| i);
        }
        assert!(c.charged > cap);
        assert_eq!((c.dirty, dirty_held(&c)), (c.charged, c.charged));
        assert_eq!(c.dirty_rows, c.rows.len());
        // Rewritten by a later run, longer.
        for i in 0..10u32 {
            let k = i.to_be_bytes();
            c.write(c.hash(&k), &k, v(300), 4, |_, _, _| i);
        }
        assert_eq!(c.dirty, dirty_held(&c));
        // Run 2 failed: its rows join run 5.
        for i in (10..100u32).filter(|i| i % 3 == 1) {
            c.requeue(&i.to_be_bytes(), Some(&[1; 50]), 5, || i);
        }
        assert_eq!(c.dirty, dirty_held(&c));
        c.insert(b"read", v(10));
        assert!(!c.holds(c.hash(b"read"), b"read"), "no room for reads");
        c.landed(1);
        assert_eq!(c.dirty, dirty_held(&c));
        assert!(c.dirty > cap, "runs 2 to 5 still pending");
        assert!(c.rows.iter().all(|(_, r)| r.run > 1), "run 1's rows went");
        c.landed(3);
        assert_eq!(c.dirty, dirty_held(&c));
        c.landed(5);
        assert_eq!((c.dirty, c.dirty_rows), (0, 0));
        assert!(c.charged <= cap, "{}", c.charged);
        c.insert(b"read", v(10));
        assert!(c.holds(c.hash(b"read"), b"read"));
        let held: usize = c.rows.iter().map(|(k, r)| size(k, &r.value)).sum();
        assert_eq!(c.charged, held);
    }

    /// Pending writes of small values can fill the rows the table may hold
    /// long before its bytes: then too no read is cached (each would send
    /// the hand round the table of dirty rows for it: the fault the
    /// scaling run found, bench/results/NOTES.md), and reads are cached
    /// again once the writes land.
    #[test]
    fn pending_writes_filling_the_rows_leave_no_room_for_reads() {
        let cap = 64 * 1024;
        let mut c = RowCache::new(cap);
        let rows = c.max_rows;
        for i in 0..rows as u32 {
            let k = i.to_be_bytes();
            c.write(c.hash(&k), &k, None, 1, |_, _, _| i);
        }
        assert!(c.dirty < cap / 8 * 7, "the bytes leave room");
        c.insert(b"read", Some(Bytes::from_static(b"v")));
        assert!(!c.holds(c.hash(b"read"), b"read"), "the rows do not");
        assert_eq!(c.rows.len(), rows);
        assert!(!c.room_for_reads());
        c.landed(1);
        assert!(c.room_for_reads(), "landed rows are the hand's to drop");
        c.insert(b"read", Some(Bytes::from_static(b"v")));
        assert!(c.rows.len() <= c.max_rows);
    }

    #[test]
    fn records_written_once_are_the_first_rows_to_go() {
        use crate::storage::keys::ks;
        let mut c = RowCache::new(64 * 1024);
        let key = |space: u8| vec![0, 7, space, b'u'];
        let (record, book) = (key(ks::LIMIT_ORDER), key(ks::LIMIT_BOOK));
        for k in [&record, &book] {
            c.write(
                c.hash(k),
                k,
                Some(Bytes::from(vec![1; 100])),
                1,
                |_, _, _| 0,
            );
        }
        c.landed(1);
        let mut i = 0u32;
        while c.holds(c.hash(&record), &record) {
            c.insert(&i.to_be_bytes(), Some(Bytes::from(vec![0; 40])));
            i += 1;
            assert!(i < 10_000, "the record's row never left");
        }
        assert!(
            c.holds(c.hash(&book), &book),
            "the book, written with the record, outlives it"
        );
        let held: usize = c.rows.iter().map(|(k, r)| size(k, &r.value)).sum();
        assert_eq!(c.charged, held);
    }

    #[test]
    fn a_landed_write_never_hides_a_newer_value() {
        // With no cache, a pending write's row outlives its run until aged
        // out; a value written to RocksDB directly after it must replace it.
        for cap in [0, 1600] {
            let mut c = RowCache::new(cap);
            c.write(
                c.hash(b"k"),
                b"k",
                Some(Bytes::from_static(b"old")),
                1,
                |_, _, _| 0,
            );
            c.landed(1);
            c.insert(b"k", Some(Bytes::from(vec![7; 500])));
            assert_ne!(
                c.get(b"k"),
                Some(Some(Bytes::from_static(b"old"))),
                "cap {cap}"
            );
        }
    }

    #[test]
    fn disabled_and_oversized() {
        let mut off = RowCache::default();
        off.insert(b"k", Some(Bytes::from_static(b"v")));
        assert_eq!(off.get(b"k"), None);
        let mut c = RowCache::new(1600);
        c.insert(b"k", Some(Bytes::from_static(b"v")));
        c.insert(b"k", Some(Bytes::from(vec![0; 500])));
        assert_eq!(
            c.get(b"k"),
            None,
            "an oversized value replaces, and isn't cached"
        );
    }
}
