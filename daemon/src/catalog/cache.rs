//! Layer 2: the hot cache of one shard, bounded in bytes.
//!
//! Entries map an owner to its whole record set (an empty set means "known
//! to have no records": a Bloom false positive or a deleted owner) and an
//! alias to its owner (or to nothing). The shard thread that writes an
//! owner's records also updates its entry, in the same request, so an entry
//! is never stale; a failed group commit clears the whole cache.
//!
//! Eviction is CLOCK (second chance): entries sit in a slab, a hit sets the
//! entry's reference bit, and the hand sweeping for room evicts the first
//! entry whose bit is clear, clearing bits as it passes. That approximates
//! LRU without touching a list on every hit. The index is a
//! `hashbrown::HashTable` of slab positions keyed by the hash the Bloom
//! filter already computed, so a lookup hashes the key once and allocates
//! nothing.
//!
//! Lifetimes are jittered: an entry lives `ttl·(1 − jitter·u)` for a uniform
//! `u`, so a cache warmed all at once before a sale doesn't expire all at
//! once either (no avalanche onto storage).

use crate::metrics::local::Counter as IntCounter;
use crate::shard::rows::{likely, prefetch, CtrlAt};
use crate::storage::keys::CatalogKey;
use bytes::Bytes;
use hashbrown::HashTable;
use rush_protocol::cmd::RecordSet;
use smallvec::SmallVec;

/// What a cache entry is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    Owner(&'a [u8]),
    Alias { kind: &'a [u8], alias: &'a [u8] },
}

impl<'a> From<CatalogKey<'a>> for Item<'a> {
    /// The item a catalog storage key holds.
    fn from(key: CatalogKey<'a>) -> Item<'a> {
        match key {
            CatalogKey::Records { owner } => Item::Owner(owner),
            CatalogKey::Alias { kind, alias } => Item::Alias { kind, alias },
        }
    }
}

/// An owned [`Item`]: copies of the bytes, so an entry never pins a
/// request's frame. An owner's key sits in the entry when it is short (most
/// are), an alias's pair behind a box (few are cached): the key costs no
/// allocation of its own and the entry stays small (bench/results/NOTES.md).
#[derive(Debug, Clone)]
enum Key {
    Owner(SmallVec<[u8; INLINE_OWNER]>),
    Alias(Box<(Bytes, Bytes)>),
}

/// Owner keys up to this long are held in the entry.
const INLINE_OWNER: usize = 24;

impl Key {
    fn of(item: Item) -> Key {
        match item {
            Item::Owner(o) => Key::Owner(SmallVec::from_slice(o)),
            Item::Alias { kind, alias } => Key::Alias(Box::new((
                Bytes::copy_from_slice(kind),
                Bytes::copy_from_slice(alias),
            ))),
        }
    }

    fn is(&self, item: Item) -> bool {
        match (self, item) {
            (Key::Owner(a), Item::Owner(b)) => a.as_slice() == b,
            (Key::Alias(pair), Item::Alias { kind: k, alias: a }) => {
                pair.0.as_ref() == k && pair.1.as_ref() == a
            }
            _ => false,
        }
    }

    fn item(&self) -> Item<'_> {
        match self {
            Key::Owner(o) => Item::Owner(o),
            Key::Alias(pair) => Item::Alias {
                kind: &pair.0,
                alias: &pair.1,
            },
        }
    }

    /// Bytes the key holds outside the entry.
    fn heap_len(&self) -> usize {
        match self {
            Key::Owner(o) if o.spilled() => o.len(),
            Key::Owner(_) => 0,
            Key::Alias(pair) => std::mem::size_of::<(Bytes, Bytes)>() + pair.0.len() + pair.1.len(),
        }
    }
}

/// A cached answer.
#[derive(Debug, Clone)]
pub enum Cached {
    /// An owner's records, by id; empty = no records. Shared: a query's
    /// answer and the cache hold the same buffer (nothing is copied per hit).
    Records(RecordSet),
    /// The owner an alias points at; `None` = no such alias.
    Alias(Option<Bytes>),
}

impl Cached {
    /// True for "known absent" entries.
    pub fn is_absent(&self) -> bool {
        match self {
            Cached::Records(r) => r.is_empty(),
            Cached::Alias(o) => o.is_none(),
        }
    }
}

/// Memory of an entry beyond its payload bytes: its slab slot, its index
/// slot (4 bytes and a control byte, at most 7/8 full), and the header of
/// the value's buffer.
const ENTRY_OVERHEAD: usize = std::mem::size_of::<Option<Entry>>() + 8 + 16;

/// Approximate bytes an entry holds.
fn entry_bytes(key: &Key, value: &Cached) -> usize {
    ENTRY_OVERHEAD
        + key.heap_len()
        + match value {
            Cached::Records(recs) => recs.wire().len(),
            Cached::Alias(owner) => owner.as_ref().map_or(0, |o| o.len()),
        }
}

#[derive(Debug)]
pub struct Entry {
    hash: u64,
    key: Key,
    pub value: Cached,
    expires_at: u64,
    referenced: bool,
    /// The shard's group number when a storage read filled this entry (0 for
    /// writes and warm-up): a hit in the same group was a single-flight join.
    pub loaded_group: u64,
}

pub struct HotCache {
    index: HashTable<u32>,
    /// Where the index's control bytes are, for [`HotCache::prefetch_index`].
    ctrl: CtrlAt,
    slab: Vec<Option<Entry>>,
    free: Vec<u32>,
    hand: usize,
    bytes: usize,
    budget: usize,
    /// Larger entries are not cached, so one huge owner can't flush the
    /// rest; they are read from storage every time.
    max_entry: usize,
    ttl_ms: u64,
    jitter: f64,
    /// SplitMix64 state for lifetime jitter (no need for a CSPRNG).
    rng: u64,
    evictions: IntCounter,
}

impl HotCache {
    pub fn new(budget: usize, ttl_ms: u64, jitter: f64, evictions: IntCounter) -> HotCache {
        HotCache {
            index: HashTable::new(),
            ctrl: CtrlAt::default(),
            slab: Vec::new(),
            free: Vec::new(),
            hand: 0,
            bytes: 0,
            budget,
            max_entry: budget / 8,
            ttl_ms,
            jitter,
            rng: rand::random(),
            evictions,
        }
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The longest value an entry can hold (larger ones are not cached).
    pub fn largest(&self) -> usize {
        self.max_entry.saturating_sub(ENTRY_OVERHEAD)
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn find(&self, hash: u64, item: Item) -> Option<u32> {
        let slab = &self.slab;
        self.index
            .find(hash, |&i| {
                slab[i as usize].as_ref().is_some_and(|e| e.key.is(item))
            })
            .copied()
    }

    /// Start loading the index's control bytes a lookup of `hash` reads
    /// first. The three `prefetch_*`/[`HotCache::likely`] steps load, each
    /// once the step before has had time to arrive, what a hit waits for
    /// otherwise: the index, the entry, the cached value (their misses came
    /// one after another, a sixth of a catalog-zipf profile:
    /// bench/results/NOTES.md).
    #[inline]
    pub fn prefetch_index(&mut self, hash: u64) {
        self.ctrl.prefetch(&self.index, hash);
    }

    /// Start loading the entry a lookup of `hash` most likely ends at
    /// (reads the index).
    #[inline]
    pub fn prefetch_entry(&self, hash: u64) {
        if let Some(e) = likely(&self.index, hash).and_then(|&i| self.slab.get(i as usize)) {
            let at = std::ptr::from_ref(e).cast::<u8>();
            let size = std::mem::size_of::<Option<Entry>>();
            prefetch(at);
            prefetch(at.wrapping_add(size / 2));
            prefetch(at.wrapping_add(size - 1));
        }
    }

    /// The value of the entry a lookup of `hash` most likely ends at,
    /// whether live or not and whatever its key (reads the index and the
    /// entry): only to start loading what the value points at.
    #[inline]
    pub fn likely(&self, hash: u64) -> Option<&Cached> {
        likely(&self.index, hash)
            .and_then(|&i| self.slab.get(i as usize))
            .and_then(|e| e.as_ref())
            .map(|e| &e.value)
    }

    /// The live entry for `item`, marked as recently used, by its position
    /// (see [`HotCache::entry`]). An expired entry is dropped: a miss.
    pub fn lookup(&mut self, hash: u64, item: Item, now: u64) -> Option<u32> {
        let i = self.find(hash, item)?;
        let e = self.slab[i as usize]
            .as_mut()
            .expect("indexed slot is full");
        if e.expires_at <= now {
            self.remove_at(i);
            return None;
        }
        e.referenced = true;
        Some(i)
    }

    /// The entry at a position [`HotCache::lookup`] returned.
    pub fn entry(&self, i: u32) -> &Entry {
        self.slab[i as usize]
            .as_ref()
            .expect("looked-up slot is full")
    }

    #[cfg(test)]
    fn get(&mut self, hash: u64, item: Item, now: u64) -> Option<&Entry> {
        let i = self.lookup(hash, item, now)?;
        Some(self.entry(i))
    }

    /// Insert or replace the entry for `item`. Returns false when the entry
    /// is too large to cache (any old entry for the item is dropped then).
    pub fn insert(
        &mut self,
        hash: u64,
        item: Item,
        value: Cached,
        now: u64,
        loaded_group: u64,
    ) -> bool {
        if let Some(i) = self.find(hash, item) {
            self.remove_at(i);
        }
        let key = Key::of(item);
        let bytes = entry_bytes(&key, &value);
        if bytes > self.max_entry {
            return false;
        }
        while self.bytes + bytes > self.budget && !self.index.is_empty() {
            self.evict_one(now);
        }
        let entry = Entry {
            hash,
            key,
            value,
            expires_at: now.saturating_add(self.lifetime()),
            // Unreferenced until used again: a one-off lookup (a scan of
            // cold owners) is the first to go.
            referenced: false,
            loaded_group,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = Some(entry);
                i
            }
            None => {
                self.slab.push(Some(entry));
                (self.slab.len() - 1) as u32
            }
        };
        let slab = &self.slab;
        self.index.insert_unique(hash, i, |&j| {
            slab[j as usize]
                .as_ref()
                .expect("indexed slot is full")
                .hash
        });
        self.bytes += bytes;
        true
    }

    /// Keep only the entries whose item passes `keep` (slots moved away).
    pub fn retain(&mut self, mut keep: impl FnMut(Item) -> bool) {
        for i in 0..self.slab.len() {
            let drop = match &self.slab[i] {
                Some(e) => !keep(e.key.item()),
                None => false,
            };
            if drop {
                self.remove_at(i as u32);
            }
        }
    }

    /// Forget everything (a group commit failed).
    pub fn clear(&mut self) {
        self.index.clear();
        self.slab.clear();
        self.free.clear();
        self.hand = 0;
        self.bytes = 0;
    }

    fn remove_at(&mut self, i: u32) {
        let Some(e) = self.slab[i as usize].take() else {
            return;
        };
        if let Ok(found) = self.index.find_entry(e.hash, |&j| j == i) {
            found.remove();
        }
        self.bytes -= entry_bytes(&e.key, &e.value);
        self.free.push(i);
    }

    /// Advance the CLOCK hand to the first expired or unreferenced entry and
    /// evict it. Terminates: a full turn clears every reference bit.
    fn evict_one(&mut self, now: u64) {
        loop {
            if self.hand >= self.slab.len() {
                self.hand = 0;
            }
            let i = self.hand;
            self.hand += 1;
            let Some(e) = self.slab[i].as_mut() else {
                continue;
            };
            if e.referenced && e.expires_at > now {
                e.referenced = false;
                continue;
            }
            self.remove_at(i as u32);
            self.evictions.inc();
            return;
        }
    }

    fn lifetime(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let u = (z >> 11) as f64 / (1u64 << 53) as f64;
        (self.ttl_ms as f64 * (1.0 - self.jitter * u)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rush_protocol::cmd::Record;

    fn counter() -> IntCounter {
        IntCounter::detached(1)
    }

    fn recs(n: usize) -> Cached {
        Cached::Records(
            (0..n)
                .map(|i| Record::new(format!("r{i}")).attr("k", "v"))
                .collect::<Vec<_>>()
                .into(),
        )
    }

    /// A fixed hash per name (the service uses its keyed Bloom hash).
    fn h(s: &str) -> u64 {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        BuildHasherDefault::<DefaultHasher>::default().hash_one(s)
    }

    /// What the look-ahead loads: the value a lookup of the hash would
    /// find, among many entries (the index grows under it) and after the
    /// entry is replaced or removed.
    #[test]
    fn likely_is_the_value_a_lookup_finds() {
        let mut c = HotCache::new(1 << 20, 1_000, 0.0, counter());
        let names: Vec<String> = (0..500).map(|i| format!("o{i}")).collect();
        for (i, n) in names.iter().enumerate() {
            c.prefetch_index(h(n));
            assert!(c.insert(h(n), Item::Owner(n.as_bytes()), recs(1 + i % 3), 0, 0));
        }
        // The first entry whose 7-bit control tag matches: now and then
        // another one (the lookup then reads on).
        let mut right = 0;
        for (i, n) in names.iter().enumerate() {
            c.prefetch_index(h(n));
            c.prefetch_entry(h(n));
            let Some(Cached::Records(r)) = c.likely(h(n)) else {
                panic!("{n}: no likely value");
            };
            right += usize::from(r.len() == 1 + i % 3);
        }
        assert!(right >= 480, "{right} of 500 right");
        assert!(c.insert(h("o7"), Item::Owner(b"o7"), recs(5), 0, 0));
        assert!(matches!(c.likely(h("o7")), Some(Cached::Records(r)) if r.len() == 5));
        c.retain(|item| item != Item::Owner(b"o7"));
        assert!(!matches!(c.likely(h("o7")), Some(Cached::Records(r)) if r.len() == 5));
        c.clear();
        assert!(c.likely(h("o8")).is_none());
        c.prefetch_index(h("o8"));
    }

    #[test]
    fn hit_miss_replace() {
        let mut c = HotCache::new(1 << 20, 1_000, 0.0, counter());
        let a = Item::Owner(b"a");
        assert!(c.get(h("a"), a, 0).is_none());
        assert!(c.insert(h("a"), a, recs(2), 0, 7));
        let e = c.get(h("a"), a, 10).unwrap();
        assert_eq!(e.loaded_group, 7);
        assert!(matches!(&e.value, Cached::Records(r) if r.len() == 2));
        let before = c.bytes();
        assert!(c.insert(h("a"), a, recs(1), 0, 0));
        assert!(c.bytes() < before);
        assert_eq!(c.len(), 1);
        // An alias with the same bytes is another entry.
        let alias = Item::Alias {
            kind: b"",
            alias: b"a",
        };
        assert!(c.get(h("a"), alias, 10).is_none());
    }

    #[test]
    fn bounded_in_bytes_and_prefers_referenced_entries() {
        let ev = counter();
        let mut c = HotCache::new(16 * 1024, u64::MAX / 2, 0.0, ev.clone());
        let names: Vec<String> = (0..500).map(|i| format!("owner{i}")).collect();
        for (i, n) in names.iter().enumerate() {
            c.insert(h(n), Item::Owner(n.as_bytes()), recs(1), 0, 0);
            assert!(c.bytes() <= 16 * 1024);
            // Keep touching owner0: second chance keeps it.
            if i % 4 == 0 {
                assert!(
                    c.get(h("owner0"), Item::Owner(b"owner0"), 0).is_some(),
                    "at {i}"
                );
            }
        }
        assert_eq!(
            ev.get() as usize + c.len(),
            names.len(),
            "each one held or evicted"
        );
        assert!(c.len() * ENTRY_OVERHEAD <= 16 * 1024, "{} held", c.len());
    }

    #[test]
    fn lifetimes_are_jittered_and_expire() {
        let mut c = HotCache::new(1 << 20, 10_000, 0.5, counter());
        let mut lifetimes: Vec<u64> = (0..1000).map(|_| c.lifetime()).collect();
        lifetimes.sort();
        assert!(lifetimes[0] >= 5_000 && lifetimes[999] <= 10_000);
        assert!(lifetimes[999] - lifetimes[0] > 4_000, "spread out");
        c.insert(h("a"), Item::Owner(b"a"), recs(1), 0, 0);
        assert!(c.get(h("a"), Item::Owner(b"a"), 4_999).is_some());
        assert!(c.get(h("a"), Item::Owner(b"a"), 10_000).is_none());
        assert_eq!(c.bytes(), 0);
    }

    /// An owner's key sits in its entry, and the entry is smaller than two
    /// cache lines (it was 160 bytes and a key allocation: a 256 MiB cache
    /// held three quarters of a million bench owners).
    #[test]
    fn entries_are_compact_and_charged_what_they_hold() {
        assert!(std::mem::size_of::<Option<Entry>>() <= 120);
        let mut c = HotCache::new(1 << 20, 1_000, 0.0, counter());
        let owner = Item::Owner(b"owner-1234567");
        let value = recs(3);
        let Cached::Records(set) = &value else {
            unreachable!()
        };
        let wire = set.wire().len();
        assert!(c.insert(h("o"), owner, value, 0, 0));
        assert_eq!(
            c.bytes(),
            ENTRY_OVERHEAD + wire,
            "a short key costs nothing more"
        );
        let long = [b'x'; 40];
        assert!(c.insert(h("l"), Item::Owner(&long), recs(3), 0, 0));
        assert_eq!(
            c.bytes(),
            2 * (ENTRY_OVERHEAD + wire) + 40,
            "a long one is counted"
        );
        let alias = Item::Alias {
            kind: b"phone",
            alias: b"555",
        };
        assert!(c.insert(
            h("a"),
            alias,
            Cached::Alias(Some(Bytes::from_static(b"o"))),
            0,
            0
        ));
        assert!(c.get(h("a"), alias, 0).is_some());
        c.retain(|item| item != owner);
        assert_eq!(c.len(), 2);
        assert!(c.get(h("o"), owner, 0).is_none());
        c.retain(|_| false);
        assert_eq!(c.bytes(), 0, "every entry's charge is given back");
    }

    #[test]
    fn oversized_entries_are_not_cached() {
        let mut c = HotCache::new(8 * 1024, 1_000, 0.0, counter());
        assert!(c.insert(h("a"), Item::Owner(b"a"), recs(1), 0, 0));
        assert!(!c.insert(h("a"), Item::Owner(b"a"), recs(50), 0, 0));
        assert!(
            c.get(h("a"), Item::Owner(b"a"), 0).is_none(),
            "old entry dropped"
        );
        assert_eq!(c.bytes(), 0);
    }
}
