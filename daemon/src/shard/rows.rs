//! The row cache: recently read or written storage values of one shard, by
//! storage key, so a hot key is answered from a hash map instead of a
//! RocksDB lookup (a memtable skiplist search was the top cost of reads).
//!
//! It is a write-through cache of committed data only: filled by reads that
//! went to storage, updated with a group's writes after its commit
//! succeeded, cleared when a commit fails, when a group deleted a key range,
//! and when slots move (their data changes outside the shard's groups). So it
//! never holds anything storage doesn't. Values keep their header: readers
//! check expiry exactly as they do for storage reads, and "known absent" is
//! cached too.
//!
//! Two generations approximate LRU at O(1) per operation with no per-entry
//! links: each entry carries the generation that last used it. New entries
//! and hits belong to the young generation; when it holds half the budget it
//! becomes the old one and the previous old generation is dropped (one sweep
//! of the table, once per half a budget of inserts). A hit on an old entry
//! moves it to the young generation in place. One table holds both, so a
//! lookup, an insert or a hit is one probe (two tables cost two on each
//! insert and each miss: bench/results/NOTES.md).

use bytes::Bytes;
use hashbrown::HashMap;

/// Per-entry bookkeeping the byte budget counts on top of key and value.
const ENTRY_OVERHEAD: usize = 48;

/// The entry size the table is reserved for at first. Growing a table from
/// empty rehashes every entry at each doubling and faults in fresh pages,
/// and a cold cache fills at the worst moment (the first seconds of a
/// flash sale: bench/results/NOTES.md). Larger than a typical counter or
/// short string, so the reservation stays under the budget.
const RESERVE_ENTRY_BYTES: usize = 256;

struct Row {
    value: Option<Bytes>,
    /// The generation that last used it.
    generation: u32,
}

#[derive(Default)]
pub struct RowCache {
    /// Byte budget; 0 disables the cache.
    cap: usize,
    rows: HashMap<Vec<u8>, Row>,
    /// The young generation's number (the old one is the one before).
    young: u32,
    young_bytes: usize,
    old_bytes: usize,
    pub hits: u64,
    pub misses: u64,
}

fn size(key: &[u8], value: &Option<Bytes>) -> usize {
    key.len() + value.as_ref().map_or(0, Bytes::len) + ENTRY_OVERHEAD
}

impl RowCache {
    pub fn new(cap_bytes: usize) -> Self {
        RowCache {
            cap: cap_bytes,
            rows: HashMap::with_capacity(cap_bytes / 2 / RESERVE_ENTRY_BYTES),
            ..RowCache::default()
        }
    }

    /// `Some(value)` when the key's committed value (or its absence) is known.
    pub fn get(&mut self, key: &[u8]) -> Option<Option<Bytes>> {
        if self.cap == 0 {
            return None;
        }
        let Some(row) = self.rows.get_mut(key) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        let value = row.value.clone();
        if row.generation != self.young {
            row.generation = self.young;
            let n = size(key, &value);
            self.old_bytes = self.old_bytes.saturating_sub(n);
            self.young_bytes += n;
            self.age_if_full();
        }
        Some(value)
    }

    /// Remember a key's committed value (`None`: absent).
    pub fn insert(&mut self, key: Vec<u8>, value: Option<Bytes>) {
        if self.cap == 0 {
            return;
        }
        let n = size(&key, &value);
        if n > self.cap / 16 {
            // Too big to be worth it: make sure no older copy lingers.
            self.remove(&key);
            return;
        }
        let key_len = key.len();
        let row = Row {
            value,
            generation: self.young,
        };
        if let Some(previous) = self.rows.insert(key, row) {
            self.forget(key_len, &previous);
        }
        self.young_bytes += n;
        self.age_if_full();
    }

    /// Forget `key`.
    pub fn remove(&mut self, key: &[u8]) {
        if let Some(previous) = self.rows.remove(key) {
            self.forget(key.len(), &previous);
        }
    }

    /// Take a replaced or removed entry out of its generation's bytes.
    fn forget(&mut self, key_len: usize, row: &Row) {
        let n = key_len + row.value.as_ref().map_or(0, Bytes::len) + ENTRY_OVERHEAD;
        let bytes = if row.generation == self.young {
            &mut self.young_bytes
        } else {
            &mut self.old_bytes
        };
        *bytes = bytes.saturating_sub(n);
    }

    /// When the young generation holds half the budget: drop the old one,
    /// and start a new young one.
    fn age_if_full(&mut self) {
        if self.young_bytes <= self.cap / 2 {
            return;
        }
        let young = self.young;
        // The table keeps its capacity: the next generation neither
        // regrows it (rehashing) nor faults in fresh pages.
        self.rows.retain(|_, row| row.generation == young);
        self.young = young.wrapping_add(1);
        self.old_bytes = std::mem::take(&mut self.young_bytes);
    }

    pub fn clear(&mut self) {
        self.rows.clear();
        self.young_bytes = 0;
        self.old_bytes = 0;
    }

    /// Approximate bytes held.
    pub fn bytes(&self) -> usize {
        self.young_bytes + self.old_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_misses_absence_and_generations() {
        let mut c = RowCache::new(16 * 1024);
        assert_eq!(c.get(b"k"), None);
        c.insert(b"k".to_vec(), Some(Bytes::from_static(b"v")));
        c.insert(b"gone".to_vec(), None);
        assert_eq!(c.get(b"k"), Some(Some(Bytes::from_static(b"v"))));
        assert_eq!(c.get(b"gone"), Some(None));
        c.insert(b"k".to_vec(), Some(Bytes::from_static(b"v2")));
        assert_eq!(c.get(b"k"), Some(Some(Bytes::from_static(b"v2"))));
        // Fill past the budget: old entries age out, kept ones survive while used.
        for i in 0..2_000u32 {
            c.insert(i.to_be_bytes().to_vec(), Some(Bytes::from(vec![0; 40])));
            let _ = c.get(b"k");
        }
        assert_eq!(
            c.get(b"k"),
            Some(Some(Bytes::from_static(b"v2"))),
            "a key in use stays"
        );
        assert_eq!(c.get(&0u32.to_be_bytes()), None, "an unused one ages out");
        assert!(c.bytes() <= 16 * 1024 + 1024);
        c.clear();
        assert_eq!(c.get(b"k"), None);
    }

    #[test]
    fn bytes_follow_replacements_removals_and_aging() {
        let mut c = RowCache::new(64 * 1024);
        let entry = |k: &[u8], v: usize| k.len() + v + ENTRY_OVERHEAD;
        c.insert(b"a".to_vec(), Some(Bytes::from(vec![0; 10])));
        c.insert(b"b".to_vec(), None);
        assert_eq!(c.bytes(), entry(b"a", 10) + entry(b"b", 0));
        c.insert(b"a".to_vec(), Some(Bytes::from(vec![0; 3])));
        c.remove(b"b");
        assert_eq!(
            c.bytes(),
            entry(b"a", 3),
            "a replaced value and a removed key leave"
        );
        // Age "a" into the old generation, then use it: it comes back young
        // and survives the next aging, while the filler of its generation
        // goes.
        let mut i = 0u32;
        while c.young != 1 {
            c.insert(i.to_be_bytes().to_vec(), Some(Bytes::from(vec![0; 100])));
            i += 1;
        }
        assert!(c.get(b"a").is_some());
        while c.young != 2 {
            c.insert((i + 1_000_000).to_be_bytes().to_vec(), None);
            i += 1;
        }
        assert_eq!(c.get(b"a"), Some(Some(Bytes::from(vec![0; 3]))));
        assert_eq!(c.get(&0u32.to_be_bytes()), None);
        let held: usize = c.rows.iter().map(|(k, r)| size(k, &r.value)).sum();
        assert_eq!(
            c.bytes(),
            held,
            "the generations' bytes are what the table holds"
        );
    }

    #[test]
    fn disabled_and_oversized() {
        let mut off = RowCache::default();
        off.insert(b"k".to_vec(), Some(Bytes::from_static(b"v")));
        assert_eq!(off.get(b"k"), None);
        let mut c = RowCache::new(1600);
        c.insert(b"k".to_vec(), Some(Bytes::from_static(b"v")));
        c.insert(b"k".to_vec(), Some(Bytes::from(vec![0; 500])));
        assert_eq!(
            c.get(b"k"),
            None,
            "an oversized value replaces, and isn't cached"
        );
    }
}
