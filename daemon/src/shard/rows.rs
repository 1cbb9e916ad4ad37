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
//! Two generations of hash maps approximate LRU at O(1) per operation with no
//! per-entry links: entries go to the young map; when it holds half the
//! budget it becomes the old map (the previous old one is dropped), and a hit
//! in the old map moves the entry back to the young one.

use bytes::Bytes;
use hashbrown::HashMap;

/// Per-entry bookkeeping the byte budget counts on top of key and value.
const ENTRY_OVERHEAD: usize = 48;

/// The entry size the first generation's table is reserved for. Growing a
/// table from empty rehashes every entry at each doubling and faults in
/// fresh pages, and a cold cache fills at the worst moment (the first
/// seconds of a flash sale: bench/results/NOTES.md). Larger than a typical
/// counter or short string, so the reservation stays under the budget.
const RESERVE_ENTRY_BYTES: usize = 256;

#[derive(Default)]
pub struct RowCache {
    /// Byte budget; 0 disables the cache.
    cap: usize,
    young: HashMap<Vec<u8>, Option<Bytes>>,
    old: HashMap<Vec<u8>, Option<Bytes>>,
    young_bytes: usize,
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
            young: HashMap::with_capacity(cap_bytes / 2 / RESERVE_ENTRY_BYTES),
            ..RowCache::default()
        }
    }

    /// `Some(value)` when the key's committed value (or its absence) is known.
    pub fn get(&mut self, key: &[u8]) -> Option<Option<Bytes>> {
        if self.cap == 0 {
            return None;
        }
        if let Some(v) = self.young.get(key) {
            self.hits += 1;
            return Some(v.clone());
        }
        match self.old.remove_entry(key) {
            Some((k, v)) => {
                self.hits += 1;
                self.insert(k, v.clone());
                Some(v)
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Remember a key's committed value (`None`: absent).
    pub fn insert(&mut self, key: Vec<u8>, value: Option<Bytes>) {
        if self.cap == 0 {
            return;
        }
        let n = size(&key, &value);
        if n > self.cap / 16 {
            // Too big to be worth it: make sure no older copy lingers.
            self.young.remove(&key);
            self.old.remove(&key);
            return;
        }
        self.old.remove(&key);
        let key_len = key.len();
        if let Some(previous) = self.young.insert(key, value) {
            let was = key_len + previous.as_ref().map_or(0, Bytes::len) + ENTRY_OVERHEAD;
            self.young_bytes = self.young_bytes.saturating_sub(was);
        }
        self.young_bytes += n;
        if self.young_bytes > self.cap / 2 {
            // The next generation reuses the table of the one that is
            // dropped: emptied, it keeps its capacity, so the young map
            // neither regrows (rehashing) nor faults in fresh pages.
            // The first time there is none to reuse: the table is sized
            // for as many entries as the generation just filled.
            let mut recycled = std::mem::take(&mut self.old);
            recycled.clear();
            if recycled.capacity() < self.young.len() {
                recycled = HashMap::with_capacity(self.young.len());
            }
            self.old = std::mem::replace(&mut self.young, recycled);
            self.young_bytes = 0;
        }
    }

    /// Forget `key`.
    pub fn remove(&mut self, key: &[u8]) {
        if let Some(v) = self.young.remove(key) {
            self.young_bytes = self.young_bytes.saturating_sub(size(key, &v));
        }
        self.old.remove(key);
    }

    pub fn clear(&mut self) {
        self.young.clear();
        self.old.clear();
        self.young_bytes = 0;
    }

    /// Approximate bytes held.
    pub fn bytes(&self) -> usize {
        self.young_bytes + self.old.iter().map(|(k, v)| size(k, v)).sum::<usize>()
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
