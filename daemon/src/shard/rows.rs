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
//! stays — whatever the budget says, through aging and clearing — until
//! that run has landed ([`RowCache::landed`], one store: no row is touched).
//! So a read is one probe whether its key is pending, cached or neither,
//! and a landed run has nothing to move anywhere (pending writes used to be
//! maps of their own, probed before this one, and moved into it once
//! landed: bench/results/NOTES.md).
//!
//! Two generations approximate LRU at O(1) per operation with no per-entry
//! links: each entry carries the generation that last used it. New entries
//! and hits belong to the young generation. When the cache is full (both
//! generations together past the budget less the young one's share) and
//! the young one holds at least its share (`YOUNG`: a fifth of the budget,
//! or the write-back budget when larger), the young generation becomes the
//! old one and the previous old generation is dropped (one sweep of the
//! table; dirty rows are kept and join the new old generation). So a
//! working set up to the budget less that share (4/5 of it by default) is
//! held whole, whatever the order it is used in, and the two together stay
//! within the budget. (Turning over whenever the young generation held half
//! the budget dropped, under uniform reads, whatever the last half-budget
//! of reads had not touched: a working set over half the budget was never
//! held whole, bench/results/NOTES.md.) A hit on an old entry moves it to
//! the young generation in place. One table holds both, so a lookup, an
//! insert or a hit is one probe (two tables cost two on each insert and
//! each miss: bench/results/NOTES.md).

use crate::storage::inline::{self, Held, ValueRef};
use crate::storage::keys;
use crate::storage::keys::{Key, INLINE_KEY};
use bytes::Bytes;
use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;

/// A table slot: the inline key and the row, and the slot's control byte.
const SLOT_BYTES: usize = std::mem::size_of::<(Key, Row)>() + 1;

/// What a row costs beyond its value's bytes and a long key's: its slot at
/// the table's load once it turns over. A turnover leaves the dropped rows'
/// slots as tombstones, and hashbrown grows a table whose live rows fill
/// more than half of it when the tombstones use up its room; so a table
/// that has turned over is at most half full, and a row comes with more
/// than a spare slot (2.29 slots per row in a cache at its budget).
/// (Charged 64 bytes, a row's real cost was about twice its charge: at
/// 768 MiB, two shards' tables took 187 MiB where the cache counted 60,
/// bench/results/NOTES.md.)
const ENTRY_OVERHEAD: usize = SLOT_BYTES * 9 / 4;

/// The entry size the table is reserved for at first. Growing a table from
/// empty rehashes every entry at each doubling and faults in fresh pages,
/// and a cold cache fills at the worst moment (the first seconds of a
/// flash sale: bench/results/NOTES.md). Larger than a typical counter or
/// short string, so the reservation stays under the budget.
const RESERVE_ENTRY_BYTES: usize = 256;

/// The share of the budget the young generation must hold before it turns
/// over (or the write-back budget, when larger): a sweep of the table comes
/// at most once per that many bytes of inserts. The rest of the budget is
/// what both generations may fill before the older one goes, so the two
/// together stay within it (see the module's documentation).
const YOUNG: (usize, usize) = (1, 5);

// Keys up to `keys::INLINE_KEY` long are held in the table itself: a
// probe compares the key where it found the entry, instead of following a
// pointer to another cache line (`memcmp` on heap keys was a tenth of a
// kv-incr profile: bench/results/NOTES.md).

/// A run number no run has: the row is clean (RocksDB holds its value).
pub const CLEAN: u32 = 0;

struct Row {
    value: Option<Held>,
    /// The generation that last used it.
    generation: u32,
    /// The run that writes this value back ([`CLEAN`]: none); dirty while
    /// greater than the last run landed.
    run: u32,
    /// Where in its run the write is (meaningful while dirty).
    index: u32,
}

#[derive(Default)]
pub struct RowCache {
    /// Byte budget for clean rows; 0 caches nothing read (pending writes
    /// are held all the same).
    cap: usize,
    /// Generations turn over at least every this many bytes of inserts, so
    /// that a table holding many dirty rows is not swept too often.
    min_generation: usize,
    rows: HashTable<(Key, Row)>,
    hasher: DefaultHashBuilder,
    /// Where the table's control bytes are, for [`RowCache::prefetch_group`].
    ctrl: CtrlAt,
    /// The young generation's number (the old one is the one before).
    young: u32,
    young_bytes: usize,
    old_bytes: usize,
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
    /// A cache of `cap_bytes`, next to pending writes of about
    /// `pending_bytes` (the write-back budget; 0 without a log).
    pub fn new(cap_bytes: usize, pending_bytes: usize) -> Self {
        RowCache {
            cap: cap_bytes,
            min_generation: pending_bytes,
            rows: HashTable::with_capacity(cap_bytes / 2 / RESERVE_ENTRY_BYTES),
            ..RowCache::default()
        }
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
    /// counting a hit or a miss or touching its generation. `hash` is
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
        let out = f(row.value.as_ref().map(Held::view));
        if row.generation != self.young {
            row.generation = self.young;
            let n = size(key, &row.value);
            self.old_bytes = self.old_bytes.saturating_sub(n);
            self.young_bytes += n;
            self.age_if_full();
        }
        Ok(out)
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
        if n > self.cap / 16 {
            // Not cached (too big to be worth it, or no cache at all): make
            // sure no older copy lingers — a landed pending write stays
            // until aged out, even with no cache.
            if !self.rows.is_empty() {
                self.remove(key);
            }
            return;
        }
        let young = self.young;
        let hash = self.hash(key);
        match entry(&mut self.rows, &self.hasher, hash, key) {
            Entry::Occupied(mut e) => {
                let row = &mut e.get_mut().1;
                debug_assert!(
                    row.run <= self.landed,
                    "a read never replaces a pending write"
                );
                let was = (size(key, &row.value), row.generation == young);
                row.value = value;
                row.generation = young;
                self.forget(was.0, was.1);
            }
            Entry::Vacant(e) => {
                let row = Row {
                    value,
                    generation: young,
                    run: CLEAN,
                    index: 0,
                };
                e.insert((Key::from_slice(key), row));
            }
        }
        self.young_bytes += n;
        self.age_if_full();
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
        let young = self.young;
        // A key written once and seldom read joins the old generation.
        let cold = keys::written_cold(key);
        let generation = if cold { young.wrapping_sub(1) } else { young };
        match entry(&mut self.rows, &self.hasher, hash, key) {
            Entry::Occupied(mut e) => {
                let row = &mut e.get_mut().1;
                let held = (row.run == run).then_some(row.index);
                let index = place(key, value.as_ref().map(Held::bytes), held);
                row.index = index;
                row.run = run;
                let was = (size(key, &row.value), row.generation == young);
                row.value = value;
                row.generation = generation;
                self.forget(was.0, was.1);
            }
            Entry::Vacant(e) => {
                let index = place(key, value.as_ref().map(Held::bytes), None);
                let row = Row {
                    value,
                    generation,
                    run,
                    index,
                };
                e.insert((Key::from_slice(key), row));
            }
        }
        if cold {
            self.old_bytes += n;
        } else {
            self.young_bytes += n;
        }
        self.age_if_full();
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
                    row.run = run;
                    row.index = place();
                }
            }
            Entry::Vacant(e) => {
                // (Never: a dirty row stays until its run lands.)
                let value = value.map(Held::copy);
                let row = Row {
                    generation: self.young,
                    run,
                    index: place(),
                    value,
                };
                self.young_bytes += size(key, &row.value);
                e.insert((Key::from_slice(key), row));
            }
        }
    }

    /// Run `run` has landed: RocksDB holds its writes, and so every row of
    /// it or an earlier run is clean.
    pub fn landed(&mut self, run: u32) {
        self.landed = self.landed.max(run);
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
            let (was, was_young) = (size(key, &row.value), row.generation == self.young);
            e.remove();
            self.forget(was, was_young);
        }
    }

    /// Take a replaced or removed entry out of its generation's bytes.
    fn forget(&mut self, n: usize, young: bool) {
        let bytes = if young {
            &mut self.young_bytes
        } else {
            &mut self.old_bytes
        };
        *bytes = bytes.saturating_sub(n);
    }

    /// When the cache is full and the young generation holds its share:
    /// drop the old one, and start a new young one. Dirty rows stay, in the
    /// generation that becomes old.
    fn age_if_full(&mut self) {
        let young_floor = (self.cap / YOUNG.1 * YOUNG.0).max(self.min_generation);
        // The old generation is at most this when a turnover makes it old,
        // and the young one turns over once past its floor.
        let full = self.cap.saturating_sub(young_floor);
        if self.young_bytes <= young_floor || self.young_bytes + self.old_bytes <= full {
            return;
        }
        let (young, landed) = (self.young, self.landed);
        let mut kept_dirty = 0;
        // The table keeps its capacity: the next generation neither
        // regrows it (rehashing) nor faults in fresh pages.
        self.rows.retain(|(key, row)| {
            if row.generation == young {
                return true;
            }
            if row.run <= landed {
                return false;
            }
            row.generation = young;
            kept_dirty += size(key, &row.value);
            true
        });
        self.young = young.wrapping_add(1);
        self.old_bytes = std::mem::take(&mut self.young_bytes) + kept_dirty;
        // Pending writes are held whatever the budget says, so a burst of
        // them may have grown the table far past what the budget holds:
        // give that back (a rehash of what is left, only after a burst).
        // (The most rows the budget holds is when their values are empty;
        // a table that turns over has room for about twice its rows, see
        // `ENTRY_OVERHEAD`, so a table with room for three times what it
        // needs is left from a burst.)
        let need = self.rows.len().max(self.cap / ENTRY_OVERHEAD);
        if self.rows.capacity() > 3 * need {
            let hasher = &self.hasher;
            self.rows
                .shrink_to(need * 3 / 2, |(k, _)| hasher.hash_one(k.as_slice()));
        }
    }

    /// Forget every clean row (pending writes stay).
    pub fn clear(&mut self) {
        let landed = self.landed;
        if self.rows.iter().all(|(_, r)| r.run <= landed) {
            self.rows.clear();
            self.young_bytes = 0;
            self.old_bytes = 0;
            return;
        }
        let young = self.young;
        let (mut young_bytes, mut old_bytes) = (0, 0);
        self.rows.retain(|(key, row)| {
            if row.run <= landed {
                return false;
            }
            if row.generation == young {
                young_bytes += size(key, &row.value);
            } else {
                old_bytes += size(key, &row.value);
            }
            true
        });
        self.young_bytes = young_bytes;
        self.old_bytes = old_bytes;
    }

    /// What the rows are charged (what the budget bounds).
    fn charged(&self) -> usize {
        self.young_bytes + self.old_bytes
    }

    /// Bytes held: the rows' charge, and the table's slots beyond it (a
    /// table a burst of pending writes grew stays that large until a
    /// turnover finds it mostly empty).
    pub fn bytes(&self) -> usize {
        let spare = (self.rows.allocation_size()).saturating_sub(self.rows.len() * ENTRY_OVERHEAD);
        self.charged() + spare
    }

    /// The budget for clean rows is now `cap_bytes`: the shard's share
    /// less what its filters and hot state hold (`Shard::publish_memory`).
    pub fn set_cap(&mut self, cap_bytes: usize) {
        self.cap = cap_bytes;
        self.age_if_full();
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
    fn hits_misses_absence_and_generations() {
        let mut c = RowCache::new(16 * 1024, 0);
        assert_eq!(c.get(b"k"), None);
        c.insert(b"k", Some(Bytes::from_static(b"v")));
        c.insert(b"gone", None);
        assert_eq!(c.get(b"k"), Some(Some(Bytes::from_static(b"v"))));
        assert_eq!(c.get(b"gone"), Some(None));
        c.insert(b"k", Some(Bytes::from_static(b"v2")));
        assert_eq!(c.get(b"k"), Some(Some(Bytes::from_static(b"v2"))));
        // Fill past the budget: old entries age out, kept ones survive while used.
        for i in 0..2_000u32 {
            c.insert(&i.to_be_bytes(), Some(Bytes::from(vec![0; 40])));
            let _ = c.get(b"k");
        }
        assert_eq!(
            c.get(b"k"),
            Some(Some(Bytes::from_static(b"v2"))),
            "a key in use stays"
        );
        assert_eq!(c.get(&0u32.to_be_bytes()), None, "an unused one ages out");
        assert!(c.charged() <= 16 * 1024 + 1024);
        c.clear();
        assert_eq!(c.get(b"k"), None);
    }

    /// A working set of 3/4 of the budget, read over and over in any order,
    /// stays whole (turning over at half the budget lost a part of it each
    /// time); a larger one turns over, and the cache stays within its
    /// budget either way, also when the write-back budget sets the young
    /// generation's share.
    #[test]
    fn a_working_set_under_four_fifths_of_the_budget_stays_whole() {
        let cap = 100 * 1024;
        let entry = size(
            &0u32.to_be_bytes(),
            &Some(Held::new(Bytes::from(vec![0; 36]))),
        );
        let keys = (cap * 3 / 4 / entry) as u32;
        let mut c = RowCache::new(cap, 0);
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
        for min_generation in [0, cap / 3] {
            let mut c = RowCache::new(cap, min_generation);
            for i in 0..20_000u32 {
                c.insert(&i.to_be_bytes(), Some(Bytes::from(vec![0; 36])));
                let _ = c.get(&(i / 2).to_be_bytes());
                assert!(
                    c.charged() <= cap + entry,
                    "{min_generation}: {} bytes",
                    c.charged()
                );
            }
            assert!(c.young > 3, "it turned over");
        }
    }

    /// What the cache reports is about what its table and values take, and
    /// what it takes stays about within its budget.
    #[test]
    fn the_charge_is_what_the_table_and_the_values_take() {
        let cap = 4 << 20;
        for len in [8, 40, 200] {
            let mut c = RowCache::new(cap, 0);
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
    /// grew is given back at a turnover.
    #[test]
    fn a_table_grown_by_pending_writes_shrinks_once_they_land() {
        let cap = 256 * 1024;
        let mut c = RowCache::new(cap, 0);
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
        let mut c = RowCache::new(64 * 1024, 0);
        let entry = |k: &[u8], v: usize| size(k, &Some(Held::new(Bytes::from(vec![0; v]))));
        c.insert(b"a", Some(Bytes::from(vec![0; 10])));
        c.insert(b"b", None);
        assert_eq!(c.charged(), entry(b"a", 10) + size(b"b", &None));
        c.insert(b"a", Some(Bytes::from(vec![0; 3])));
        c.remove(b"b");
        assert_eq!(
            c.charged(),
            entry(b"a", 3),
            "a replaced value and a removed key leave"
        );
        // Age "a" into the old generation, then use it: it comes back young
        // and survives the next aging, while the filler of its generation
        // goes.
        let mut i = 0u32;
        while c.young != 1 {
            c.insert(&i.to_be_bytes(), Some(Bytes::from(vec![0; 100])));
            i += 1;
        }
        assert!(c.get(b"a").is_some());
        while c.young != 2 {
            c.insert(&(i + 1_000_000).to_be_bytes(), None);
            i += 1;
        }
        assert_eq!(c.get(b"a"), Some(Some(Bytes::from(vec![0; 3]))));
        assert_eq!(c.get(&0u32.to_be_bytes()), None);
        let held: usize = c.rows.iter().map(|(k, r)| size(k, &r.value)).sum();
        assert_eq!(
            c.charged(),
            held,
            "the generations' bytes are what the table holds"
        );
    }

    #[test]
    fn pending_writes_stay_until_their_run_lands() {
        // A small budget, no clean rows at all: pending writes are held anyway.
        for cap in [0, 4 * 1024] {
            let mut c = RowCache::new(cap, 1024);
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
            assert_eq!(c.charged(), held, "cap {cap}");
        }
    }

    #[test]
    fn records_written_once_are_the_first_rows_to_go() {
        use crate::storage::keys::ks;
        let mut c = RowCache::new(64 * 1024, 0);
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
        assert_eq!(c.charged(), held);
    }

    #[test]
    fn a_landed_write_never_hides_a_newer_value() {
        // With no cache, a pending write's row outlives its run until aged
        // out; a value written to RocksDB directly after it must replace it.
        for cap in [0, 1600] {
            let mut c = RowCache::new(cap, 1 << 20);
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
        let mut c = RowCache::new(1600, 0);
        c.insert(b"k", Some(Bytes::from_static(b"v")));
        c.insert(b"k", Some(Bytes::from(vec![0; 500])));
        assert_eq!(
            c.get(b"k"),
            None,
            "an oversized value replaces, and isn't cached"
        );
    }
}
