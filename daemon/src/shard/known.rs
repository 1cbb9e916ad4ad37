//! Which keys of one kind a shard may hold: a Bloom filter over their
//! storage keys, so a read of a key the shard certainly doesn't have — a
//! new order's record, a new user's book, a new counter — is answered
//! "absent" without reading anything. (Reading an absent key costs
//! a probe of the row cache, the write-back runs, RocksDB's memtables and a
//! filter check in every SST level: about a fifth of the shard's time in
//! the limits bench before this filter; see bench/results/NOTES.md.)
//!
//! A service keeps one per shard for the keys of a per-slot range
//! ([`KeyFilter::new`]'s `range`) and must give it every key it holds:
//! - built from storage before the shard serves, when the keyspace is
//!   small; a large one is built on after the start, a slice per timer tick
//!   ([`SlotWalk`]), so it doesn't hold up the start (until it is built
//!   every key "may" be held and is read);
//! - given every key the service writes in that range, when it is staged,
//!   before the commit (a key whose commit then fails is a false positive,
//!   never a miss);
//! - given every key of a slot that becomes the shard's, when it does.
//!
//! Nothing leaves it: keys deleted or ended stay until it is rebuilt. When
//! it has grown to more than [`MAX_LAYERS`] layers (three times what it was
//! sized for, which was half again what was live at its last build) it is
//! rebuilt from storage in the background, a slice per timer tick, taking
//! every key written meanwhile too. Until a build
//! succeeds (storage failing at start or at a slot import), every key "may"
//! be held and is read.

use crate::bloom::ScalableBloom;
use crate::shard::txn::Txn;
use crate::shard::walk::SlotWalk;
use crate::storage::value::Stored;
use crate::storage::Storage;
use hashbrown::DefaultHashBuilder;
use prometheus::{IntCounter, IntGauge};
use std::cell::Cell;
use std::hash::BuildHasher;

/// The filter's false-positive rate: one new order in a hundred reads its
/// (absent) record anyway.
const FP_RATE: f64 = 0.01;
/// The smallest filter (items; about 1.4 MiB), so a shard that starts
/// empty takes three million keys before its first rebuild.
const MIN_CAPACITY: u64 = 1 << 20;
/// Layers past which the filter is rebuilt: each is twice the one before,
/// so two hold three times the first's items at about 11 bytes per item of
/// the first's capacity.
const MAX_LAYERS: usize = 2;
/// What a build reads per tick, in units of a key or of 256 bytes of keys
/// and values, whichever is more: about 2 ms of the shard's time for small
/// values (20 000 keys, the catalog's default, raised the limits bench's
/// p99 from 26 to 44 ms), at most about 1.3 MB for large ones.
const BUILD_COST_PER_TICK: usize = 5_000;
/// What the build at open reads at most before the shard serves: a
/// million small keys, or about 256 MB of larger ones (its time at open
/// was not measured).
const OPEN_BUILD_COST: usize = 1_000_000;
/// Slots a rebuild reads per tick at most (each is a seek, even when empty).
const REBUILD_SLOTS_PER_TICK: usize = 1024;

pub struct KeyFilter {
    /// What the filter holds, for logs ("purchase-limit").
    what: &'static str,
    /// The range of one slot's keys of this kind.
    range: fn(u16) -> (Vec<u8>, Vec<u8>),
    hasher: DefaultHashBuilder,
    filter: ScalableBloom,
    /// False until a build from storage succeeded: every key may be held.
    ready: bool,
    /// The last hashes [`KeyFilter::may_hold`] probed and whether the
    /// filter held them, so that [`KeyFilter::add`] of the same keys (a
    /// request reads its keys, then writes them) doesn't probe every layer
    /// again. The filter only grows, so "held" stays true; it is emptied
    /// when the filter is replaced.
    probed: Cell<[Probed; 2]>,
    /// A rebuild in progress: the new filter and how far the walk is.
    rebuild: Option<(ScalableBloom, SlotWalk)>,
    /// The shard's slots.
    first: u16,
    last: u16,
    shard: usize,
    pub gauges: Gauges,
}

/// A hash [`KeyFilter::may_hold`] probed, and what the filter said.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Probed {
    hash: u64,
    /// 0: nothing probed here; 1: absent; 2: held.
    said: u8,
}

/// The filter's size and builds (`Metrics::key_filter`).
pub struct Gauges {
    pub items: IntGauge,
    pub bytes: IntGauge,
    pub builds: IntCounter,
}

impl KeyFilter {
    /// The filter of shard `shard` of `shards` over the keys of
    /// `range(slot)` in each of its slots.
    pub fn new(
        what: &'static str,
        range: fn(u16) -> (Vec<u8>, Vec<u8>),
        shard: usize,
        shards: usize,
        gauges: Gauges,
    ) -> KeyFilter {
        let slots = crate::shard::route::slots_of_shard(shard, shards);
        KeyFilter {
            what,
            range,
            hasher: DefaultHashBuilder::default(),
            filter: ScalableBloom::blocked(MIN_CAPACITY, FP_RATE),
            ready: false,
            probed: Cell::default(),
            rebuild: None,
            first: *slots.start(),
            last: *slots.end(),
            shard,
            gauges,
        }
    }

    /// The hash the filter keeps of `key`.
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Might the shard hold the key of `hash`? False means certainly not.
    #[inline]
    pub fn may_hold(&self, hash: u64) -> bool {
        if !self.ready {
            return true;
        }
        let held = self.filter.contains(hash);
        let [_, last] = self.probed.get();
        let said = if held { 2 } else { 1 };
        self.probed.set([last, Probed { hash, said }]);
        held
    }

    /// Has a build from storage succeeded (until then every key may be
    /// held)?
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Start loading what [`KeyFilter::may_hold`] or [`KeyFilter::add`] of
    /// `hash` will read, so that a request a little later finds it in the
    /// CPU's cache (a shard's filter is larger than the cache, and each
    /// layer's probe is a trip to memory otherwise).
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        if self.ready {
            self.filter.prefetch(hash);
        }
    }

    /// A key is being written.
    pub fn add(&mut self, hash: u64) {
        let mut probed = self.probed.get();
        match probed.iter_mut().find(|p| p.said != 0 && p.hash == hash) {
            Some(p) if p.said == 2 => {}
            Some(p) => {
                self.filter.insert_absent(hash);
                p.said = 2;
                self.probed.set(probed);
            }
            None => {
                self.filter.insert(hash);
            }
        }
        if let Some((next, _)) = &mut self.rebuild {
            next.insert(hash);
        }
    }

    /// Before the shard serves: build the filter at once if the keyspace
    /// is small (up to [`OPEN_BUILD_COST`]); a larger one is built on from
    /// there by the timer, so it doesn't hold up the start.
    pub fn open(&mut self, storage: &Storage) {
        self.start_rebuild();
        let txn = Txn::new(storage, self.shard);
        self.step(&txn, 0, OPEN_BUILD_COST, usize::MAX);
    }

    /// Slots became the shard's: their keys join the filter.
    pub fn import(&mut self, storage: &Storage, slots: &[u16]) {
        for &slot in slots {
            let (from, to) = (self.range)(slot);
            let mut hashes = Vec::new();
            let scanned = storage.scan(self.shard, &from, &to, |k, _| {
                hashes.push(self.hash(k));
                true
            });
            if let Err(e) = scanned {
                // Without the slot's keys the filter could deny them: read
                // every key until a rebuild succeeds.
                tracing::error!(shard = self.shard, slot, error = %e, "reading an imported slot's {} keys failed; filter off until rebuilt", self.what);
                self.ready = false;
                return;
            }
            for h in hashes {
                self.add(h);
            }
        }
        self.refresh_gauges();
    }

    /// Timer: start a build if the filter was never built (or a build
    /// failed) or has grown past its layers, and advance the one running.
    pub fn tick(&mut self, txn: &Txn, now: u64) {
        if self.rebuild.is_none() && (!self.ready || self.filter.layers() > MAX_LAYERS) {
            tracing::debug!(
                shard = self.shard,
                items = self.filter.items(),
                layers = self.filter.layers(),
                "rebuilding the {} key filter",
                self.what
            );
            self.start_rebuild();
        }
        if self.rebuild.is_some() {
            self.step(txn, now, BUILD_COST_PER_TICK, REBUILD_SLOTS_PER_TICK);
        }
        self.refresh_gauges();
    }

    /// A new filter sized for half again what the old one holds, and a walk
    /// over the shard's slots to fill it.
    fn start_rebuild(&mut self) {
        let live = if self.ready { self.filter.items() } else { 0 };
        let capacity = live.saturating_add(live / 2).max(MIN_CAPACITY);
        self.rebuild = Some((
            ScalableBloom::blocked(capacity, FP_RATE),
            SlotWalk::new(self.first, self.last),
        ));
    }

    /// Walk a slice; when the walk is done the new filter replaces the old.
    /// Keys that have ended by `now` are left out.
    fn step(&mut self, txn: &Txn, now: u64, budget: usize, slots: usize) {
        let Some((next, walk)) = &mut self.rebuild else {
            return;
        };
        let hasher = &self.hasher;
        let walked = walk.step(txn, budget, slots, self.range, |k, v| {
            // A value that doesn't decode is kept: reading it reports it.
            if !Stored::decode(v).is_ok_and(|s| !s.is_live(now)) {
                next.insert(hasher.hash_one(k));
            }
            ((k.len() + v.len()) / 256).max(1)
        });
        match walked {
            Ok(false) => {}
            Ok(true) => {
                let (next, _) = self.rebuild.take().expect("a rebuild runs");
                self.filter = next;
                self.probed.take();
                self.ready = true;
                self.gauges.builds.inc();
            }
            Err(e) => {
                tracing::warn!(shard = self.shard, error = %e, "{} key filter rebuild failed; retrying", self.what);
                self.rebuild = None;
            }
        }
    }

    /// Bytes the filter takes, with the one a rebuild is filling.
    pub fn bytes(&self) -> usize {
        let rebuilding = self.rebuild.as_ref().map_or(0, |(f, _)| f.bytes());
        self.filter.bytes() + rebuilding
    }

    fn refresh_gauges(&self) {
        self.gauges.items.set(self.filter.items() as i64);
        self.gauges.bytes.set(self.bytes() as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::keys;
    use crate::storage::keys::kind;
    use crate::storage::value;
    use rush_protocol::key_slot;

    fn gauges() -> Gauges {
        Gauges {
            items: IntGauge::new("items", "items").unwrap(),
            bytes: IntGauge::new("bytes", "bytes").unwrap(),
            builds: IntCounter::new("builds", "builds").unwrap(),
        }
    }

    fn record(user: &str, order: &str) -> Vec<u8> {
        keys::limit_order(key_slot(user.as_bytes()), user.as_bytes(), "p", order)
    }

    fn book(user: &str) -> Vec<u8> {
        keys::limit_book(key_slot(user.as_bytes()), user.as_bytes(), b"p")
    }

    /// Write `keys` (each ending at its expiry) in one commit.
    fn write(storage: &Storage, keys: &[(Vec<u8>, u64)]) {
        let mut txn = Txn::new(storage, 0);
        for (k, expires_at) in keys {
            txn.put(
                k.clone(),
                value::encode(kind::LIMIT_ORDER, *expires_at, b"x"),
            );
        }
        txn.finish_request(true);
        let (batch, sync) = txn.into_commit().unwrap();
        storage.write(batch, sync).unwrap();
    }

    fn held(known: &KeyFilter, keys: &[(Vec<u8>, u64)]) -> usize {
        keys.iter()
            .filter(|(k, _)| known.may_hold(known.hash(k)))
            .count()
    }

    /// A key written after the filter was asked about it is added without
    /// a second probe, and held afterwards; a held one is not counted twice.
    #[test]
    fn a_key_asked_about_then_written_is_held_and_counted_once() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open_small(dir.path(), Default::default());
        let mut known = KeyFilter::new("purchase-limit", keys::limits_range, 0, 1, gauges());
        let txn = Txn::new(&storage, 0);
        while !known.ready {
            known.tick(&txn, 0);
        }
        let (order, user_book) = (record("u", "o1"), book("u"));
        let (r, b) = (known.hash(&order), known.hash(&user_book));
        // A request reads both, then writes both.
        assert!(!known.may_hold(r) && !known.may_hold(b));
        known.add(r);
        known.add(b);
        assert!(known.may_hold(r) && known.may_hold(b));
        assert_eq!(known.filter.items(), 2);
        // The next order of the same user: its book is held, its record new.
        let r2 = known.hash(&record("u", "o2"));
        assert!(!known.may_hold(r2));
        assert!(known.may_hold(b));
        known.add(r2);
        known.add(b);
        known.add(b);
        assert!(known.may_hold(r2));
        assert_eq!(known.filter.items(), 3, "the book once");
        // A key never asked about is probed before it is added.
        let r3 = known.hash(&record("u", "o3"));
        known.add(r3);
        known.add(r3);
        assert!(known.may_hold(r3));
        assert_eq!(known.filter.items(), 4);
    }

    /// What is stored is held after the build, what was never written is
    /// (but for false positives) not; a rebuild keeps every live key —
    /// those written while it walks included — and leaves out the ended.
    #[test]
    fn holds_every_stored_key_and_a_rebuild_drops_the_ended() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open_small(dir.path(), Default::default());
        let live: Vec<(Vec<u8>, u64)> = (0..2_000)
            .map(|i| (record(&format!("u{i}"), "o"), 0))
            .chain((0..500).map(|i| (book(&format!("u{i}")), 1_000_000)))
            .collect();
        let ended: Vec<(Vec<u8>, u64)> = (0..2_000)
            .map(|i| (record(&format!("u{i}"), "old"), 500))
            .collect();
        let never: Vec<(Vec<u8>, u64)> = (0..2_000)
            .map(|i| (record(&format!("u{i}"), "never"), 0))
            .collect();
        write(&storage, &live);
        write(&storage, &ended);

        let mut known = KeyFilter::new("purchase-limit", keys::limits_range, 0, 1, gauges());
        assert_eq!(
            held(&known, &never),
            never.len(),
            "unbuilt: everything may be held"
        );
        // Built on the timer, as of before anything ended.
        let txn = Txn::new(&storage, 0);
        while !known.ready {
            known.tick(&txn, 0);
        }
        assert_eq!(held(&known, &live), live.len());
        assert_eq!(
            held(&known, &ended),
            ended.len(),
            "the build keeps the ended"
        );
        assert!(
            held(&known, &never) < 100,
            "{} false positives",
            held(&known, &never)
        );

        // Grow it past its layers: a rebuild starts on the next tick.
        for i in 0..4 * MIN_CAPACITY {
            known.add(known.hash(format!("grown{i}").as_bytes()));
        }
        assert!(known.filter.layers() > MAX_LAYERS);
        let now = 1_000;
        known.tick(&txn, now);
        assert!(known.rebuild.is_some(), "a rebuild runs");
        // A key written after the walk passed its slot (the first tick
        // walked the first 1024 slots).
        let user = (0..)
            .map(|i| format!("late{i}"))
            .find(|u| key_slot(u.as_bytes()) < 1024)
            .unwrap();
        let late = vec![(record(&user, "o"), 0)];
        write(&storage, &late);
        known.add(known.hash(&late[0].0));
        let mut ticks = 1;
        while known.rebuild.is_some() {
            known.tick(&txn, now);
            ticks += 1;
            assert!(ticks < 100, "the rebuild ends");
        }
        assert!(ticks > 1, "the rebuild took more than one tick");
        assert_eq!(
            known.gauges.builds.get(),
            2,
            "the build at start and the rebuild"
        );
        assert_eq!(known.filter.layers(), 1);
        assert_eq!(held(&known, &live), live.len());
        assert_eq!(held(&known, &late), 1);
        assert!(
            held(&known, &ended) < 100,
            "{} ended keys kept",
            held(&known, &ended)
        );
        // Items a false positive hid are not counted.
        let items = known.gauges.items.get() as usize;
        assert!(
            (live.len() - 50..=live.len() + 1).contains(&items),
            "{items} items"
        );
    }
}
