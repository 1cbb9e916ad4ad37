//! Which slots this node serves, answered without a lock on every request.
//!
//! One byte per slot ([`SlotState`]), read with one atomic load by the
//! connection that routes a request and again by the shard that applies it
//! (a slot may start moving while the request waits in the queue). The map
//! itself sits behind a `RwLock<Arc<_>>` that only the slow paths read:
//! the address in a MOVED answer, CLUSTER_SLOTS, INFO. Writers (a new map,
//! a slot frozen or released) are serialized by one mutex and are rare.

use rush_protocol::cmd::ClusterSlotsReply;
use rush_protocol::{RushError, SLOTS};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// A set of slots with O(1) membership, for the hooks that sweep large
/// collections (caches, indexes) when many slots come or go at once (a new
/// map can move thousands).
pub struct SlotSet(Box<[bool]>);

impl SlotSet {
    pub fn of(slots: &[u16]) -> SlotSet {
        let mut set = vec![false; SLOTS as usize].into_boxed_slice();
        for &s in slots {
            set[s as usize] = true;
        }
        SlotSet(set)
    }

    #[inline]
    pub fn contains(&self, slot: u16) -> bool {
        self.0[slot as usize]
    }
}

/// What this node does with requests for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SlotState {
    /// Another node owns it: MOVED.
    Elsewhere = 0,
    /// This node owns and serves it.
    Serving = 1,
    /// This node owns it but is handing it to another node right now:
    /// TRYAGAIN (nothing is applied, so even non-idempotent requests may be
    /// resent), and timers leave it alone.
    Frozen = 2,
}

/// A map in force, with each slot's owner precomputed.
#[derive(Debug)]
pub struct Map {
    pub map: ClusterSlotsReply,
    /// Index into `map.nodes` of each slot's owner.
    owners: Vec<u16>,
    /// This node's index in `map.nodes`, if it is in the map.
    pub me: Option<usize>,
}

impl Map {
    /// A checked map, as seen by node `me`.
    pub fn new(map: ClusterSlotsReply, me: &str) -> Result<Map, String> {
        let owners = map.owners()?;
        let me = map.nodes.iter().position(|n| n.id == me);
        Ok(Map { map, owners, me })
    }

    pub fn epoch(&self) -> u64 {
        self.map.epoch
    }

    /// The owner's (id, address) of a slot.
    pub fn owner(&self, slot: u16) -> (&str, &str) {
        let n = &self.map.nodes[self.owners[slot as usize] as usize];
        (&n.id, &n.addr)
    }

    pub fn is_mine(&self, slot: u16) -> bool {
        self.me == Some(self.owners[slot as usize] as usize)
    }

    pub fn owned_count(&self) -> usize {
        match self.me {
            Some(me) => self.owners.iter().filter(|&&o| o as usize == me).count(),
            None => 0,
        }
    }
}

pub struct Routing {
    /// This node's id (whose slots are "mine" in a map).
    me: String,
    /// Gauges kept in step with the map: its epoch, the slots served.
    epoch_gauge: prometheus::IntGauge,
    owned_gauge: prometheus::IntGauge,
    moved: prometheus::IntCounter,
    try_again: prometheus::IntCounter,
    /// `SlotState` per slot.
    slots: Box<[AtomicU8]>,
    map: RwLock<Arc<Map>>,
    /// Slots frozen for a move. Also the writers' lock: every change of
    /// `map` or `slots` happens while holding it.
    frozen: Mutex<BTreeSet<u16>>,
}

impl Routing {
    pub fn new(map: Map, me: &str, metrics: &super::metrics::ClusterMetrics) -> Routing {
        let r = Routing {
            me: me.to_string(),
            epoch_gauge: metrics.epoch.clone(),
            owned_gauge: metrics.slots_owned.clone(),
            moved: metrics.moved.clone(),
            try_again: metrics.try_again.clone(),
            slots: (0..SLOTS).map(|_| AtomicU8::new(0)).collect(),
            map: RwLock::new(Arc::new(map)),
            frozen: Mutex::new(BTreeSet::new()),
        };
        let frozen = r.frozen.lock().expect("not poisoned");
        r.recompute_all(&frozen);
        drop(frozen);
        r
    }

    pub fn state(&self, slot: u16) -> SlotState {
        match self.slots[slot as usize].load(Ordering::Acquire) {
            1 => SlotState::Serving,
            2 => SlotState::Frozen,
            _ => SlotState::Elsewhere,
        }
    }

    /// The routing check: `Ok` when this node serves the slot now, else the
    /// answer to give (MOVED with the owner's address, or TRYAGAIN).
    #[inline]
    pub fn check(&self, slot: u16) -> Result<(), RushError> {
        match self.slots[slot as usize].load(Ordering::Acquire) {
            1 => Ok(()),
            2 => {
                self.try_again.inc();
                Err(RushError::try_again(slot))
            }
            _ => Err(self.moved(slot)),
        }
    }

    #[cold]
    fn moved(&self, slot: u16) -> RushError {
        self.moved.inc();
        let map = self.map();
        RushError::moved(slot, map.owner(slot).1)
    }

    /// This node owns the slot (serving it or handing it over): its data
    /// belongs in this node's indexes and audits.
    pub fn owns(&self, slot: u16) -> bool {
        self.state(slot) != SlotState::Elsewhere
    }

    /// This node serves the slot: requests and timers may change its data.
    pub fn serving(&self, slot: u16) -> bool {
        self.state(slot) == SlotState::Serving
    }

    /// On a replica: whether its copy holds `slot` (the slot is its
    /// primary's). A lone replica's map names its primary for every slot.
    pub fn replica_holds(&self, slot: u16) -> bool {
        let map = self.map();
        if map.epoch() == 0 {
            return true;
        }
        let owner = map.owner(slot).0;
        map.map.node(&self.me).and_then(|n| n.replica_of.as_deref()) == Some(owner)
    }

    /// The map in force.
    pub fn map(&self) -> Arc<Map> {
        self.map.read().expect("not poisoned").clone()
    }

    pub fn me(&self) -> &str {
        &self.me
    }

    /// Put a new map in force (already stored by the caller).
    pub fn install(&self, map: ClusterSlotsReply) -> Result<(), String> {
        let map = Map::new(map, &self.me)?;
        let frozen = self.frozen.lock().expect("not poisoned");
        *self.map.write().expect("not poisoned") = Arc::new(map);
        self.recompute_all(&frozen);
        Ok(())
    }

    pub fn freeze(&self, slot: u16) {
        let mut frozen = self.frozen.lock().expect("not poisoned");
        frozen.insert(slot);
        self.recompute(slot, &self.map(), &frozen);
    }

    pub fn unfreeze(&self, slot: u16) {
        let mut frozen = self.frozen.lock().expect("not poisoned");
        frozen.remove(&slot);
        self.recompute(slot, &self.map(), &frozen);
    }

    fn recompute_all(&self, frozen: &BTreeSet<u16>) {
        let map = self.map();
        for slot in 0..SLOTS {
            self.recompute(slot, &map, frozen);
        }
        self.epoch_gauge.set(map.epoch() as i64);
        self.owned_gauge.set(map.owned_count() as i64);
    }

    fn recompute(&self, slot: u16, map: &Map, frozen: &BTreeSet<u16>) {
        let state = match (map.is_mine(slot), frozen.contains(&slot)) {
            (false, _) => SlotState::Elsewhere,
            (true, false) => SlotState::Serving,
            (true, true) => SlotState::Frozen,
        };
        self.slots[slot as usize].store(state as u8, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rush_protocol::ErrorCode;

    #[test]
    fn states_follow_the_map_and_freezes() {
        let m = ClusterSlotsReply::even(
            1,
            vec![("a".into(), "a:1".into()), ("b".into(), "b:1".into())],
        );
        let metrics = super::super::metrics::ClusterMetrics::new(&prometheus::Registry::new());
        let r = Routing::new(Map::new(m.clone(), "a").unwrap(), "a", &metrics);
        assert!(r.check(0).is_ok());
        let e = r.check(16383).unwrap_err();
        assert_eq!(e.code, ErrorCode::Moved);
        assert!(e.message.contains("b:1"));
        r.freeze(5);
        assert_eq!(r.check(5).unwrap_err().code, ErrorCode::TryAgain);
        assert!(r.owns(5) && !r.serving(5));
        // The slot moves: a new map, still frozen until released.
        r.install(m.with_slot_moved(5, "b", 2).unwrap()).unwrap();
        assert_eq!(r.check(5).unwrap_err().code, ErrorCode::Moved);
        r.unfreeze(5);
        assert_eq!(r.check(5).unwrap_err().code, ErrorCode::Moved);
        assert_eq!(r.map().owned_count(), 8191);
    }
}
