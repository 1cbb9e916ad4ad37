//! Visit counting without a write per visit.
//!
//! A resolve adds to an in-memory counter of its code; every
//! `links.visits_flush_secs` (and at once when a slot freezes for a move,
//! the shard stops or a tick is asked for) the shard's timer adds the
//! counters to each link's stored statistics in one group commit, not
//! synced, as merge operands (`storage::merge`): one write per link per
//! interval however often it is visited, and no read of what is stored.
//! What a crash may lose: the visits counted since the last flush
//! (≤ `visits_flush_secs`) on a kill -9, plus unsynced log writes on a
//! power loss. Reads (LINK_INFO) add what memory holds, so they are never
//! behind.
//! Link creation, update and delete are synced and lose nothing.
//!
//! Bounded memory: past [`MAX_PENDING`] distinct codes between two ticks, a
//! visit to a new code is merged into storage at once instead.

use super::record::{DayCounts, Stats};
use crate::kv::storage_error;
use crate::shard::txn::Txn;
use crate::storage::keys;
use crate::storage::keys::kind;
use crate::storage::value::{self, Stored};
use hashbrown::HashMap;
use rush_protocol::{link_slot, RushError};

/// Most distinct codes buffered between two ticks per shard.
pub const MAX_PENDING: usize = 100_000;
const DAY_MS: u64 = 86_400_000;

pub fn day_of(ms: u64) -> u32 {
    (ms / DAY_MS) as u32
}

/// Visits to one code not yet in storage.
#[derive(Debug, Clone, Default)]
pub struct Pending {
    pub count: u64,
    pub last: u64,
    /// (day, visits); almost always one day.
    pub days: DayCounts,
    /// The link's expiry as of its last visit (its statistics expire with it).
    pub expires_at: u64,
}

impl Pending {
    fn add(&mut self, now: u64, expires_at: u64) {
        self.count += 1;
        self.last = self.last.max(now);
        self.expires_at = expires_at;
        let day = day_of(now);
        match self.days.iter_mut().find(|(d, _)| *d == day) {
            Some((_, n)) => *n += 1,
            None => self.days.push((day, 1)),
        }
    }

    /// Fold into stored statistics.
    pub fn merge_into(&self, stats: &mut Stats, today: u32) {
        for &(day, n) in &self.days {
            stats.add(day, n, self.last, today);
        }
        stats.prune(today);
    }
}

/// A code as a counter's key: a generated code (5–8 characters) and most
/// aliases sit in the table's slot, so a probe compares them there.
type CodeKey = smallvec::SmallVec<[u8; 16]>;

#[derive(Default)]
pub struct Visits {
    /// Code → visits since the last flush. Keyed by the code alone: it
    /// determines the slot.
    pending: HashMap<CodeKey, Pending>,
    /// A merge operand being built (reused: past [`MAX_PENDING`] codes,
    /// every visit to a new code writes one).
    operand: Vec<u8>,
}

impl Visits {
    /// Count a visit to `code` (in `slot`) whose link now expires at `expires_at`.
    pub fn record(
        &mut self,
        slot: u16,
        code: &[u8],
        now: u64,
        expires_at: u64,
        txn: &mut Txn,
    ) -> Result<(), RushError> {
        if let Some(p) = self.pending.get_mut(code) {
            p.add(now, expires_at);
            return Ok(());
        }
        let mut p = Pending::default();
        p.add(now, expires_at);
        if self.pending.len() < MAX_PENDING {
            self.pending.insert(CodeKey::from_slice(code), p);
            Ok(())
        } else {
            write(slot, code, &p, now, &mut self.operand, txn)
        }
    }

    /// Bytes the counters hold: their table (codes longer than its slot's
    /// room, and a counter's third day, are rare and not counted).
    pub fn bytes(&self) -> usize {
        self.pending.allocation_size() + self.operand.capacity()
    }

    pub fn pending(&self, code: &[u8]) -> Option<&Pending> {
        self.pending.get(code)
    }

    /// Slots moved away: their counters go (they were written out when the
    /// slot froze; none can have come in since).
    pub fn forget_slots(&mut self, slots: &[u16]) {
        let slots = crate::cluster::routing::SlotSet::of(slots);
        self.pending
            .retain(|code, _| !slots.contains(link_slot(code)));
    }

    /// The link is gone (deleted, or its code taken by a new link).
    pub fn forget(&mut self, code: &[u8]) {
        self.pending.remove(code);
    }

    /// The link's expiry changed (LINK_UPDATE).
    pub fn set_expiry(&mut self, code: &[u8], expires_at: u64) {
        if let Some(p) = self.pending.get_mut(code) {
            p.expires_at = expires_at;
        }
    }

    /// Merge every buffered counter into storage, one request per code.
    pub fn flush(&mut self, now: u64, txn: &mut Txn) {
        for (code, p) in self.pending.drain() {
            let ok = write(link_slot(&code), &code, &p, now, &mut self.operand, txn);
            if let Err(e) = &ok {
                tracing::warn!(code = %String::from_utf8_lossy(&code), error = %e, "visit statistics not written");
            }
            txn.finish_request(ok.is_ok());
        }
    }

    /// Forget everything (a commit failed: counters may belong to links
    /// whose creation never reached the disk).
    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

/// Stored statistics of a code, whatever their header's expiry says (the
/// link's own liveness decides; leftovers of an earlier link under the same
/// code are removed when the code is taken again).
pub fn load_stats(slot: u16, code: &[u8], txn: &Txn) -> Result<Stats, RushError> {
    match txn
        .get(&keys::link_stats(slot, code))
        .map_err(storage_error)?
    {
        None => Ok(Stats::default()),
        Some(raw) => {
            let s = Stored::decode(&raw).map_err(|e| RushError::internal(e.to_string()))?;
            if s.kind != kind::LINK_STATS {
                return Err(RushError::internal(format!(
                    "link stats of kind {}",
                    s.kind
                )));
            }
            Stats::decode(s.payload).map_err(|e| RushError::internal(e.to_string()))
        }
    }
}

pub fn store_stats(slot: u16, code: &[u8], stats: &Stats, expires_at: u64, txn: &mut Txn) {
    txn.put(
        keys::link_stats(slot, code),
        value::encode(kind::LINK_STATS, expires_at, &stats.encode()),
    );
}

/// Add `p`'s visits to the stored statistics without reading them: a
/// merge operand (`storage::merge`), so a flush costs no read per link.
/// The operand is built in `operand` (a buffer kept between calls).
fn write(
    slot: u16,
    code: &[u8],
    p: &Pending,
    now: u64,
    operand: &mut Vec<u8>,
    txn: &mut Txn,
) -> Result<(), RushError> {
    let mut added = Stats::default();
    p.merge_into(&mut added, day_of(now));
    operand.clear();
    value::put_header(operand, kind::LINK_STATS, p.expires_at);
    added.encode_into(operand);
    txn.merge(keys::link_stats(slot, code), operand);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Storage;

    /// Past the table's room every visit to a new code is a merge operand
    /// of its own, built in the one reused buffer: each code's statistics
    /// add up to its own visits.
    #[test]
    fn visits_past_the_table_merge_each_codes_own_count() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open_small(dir.path(), crate::config::Memtable::default());
        let mut txn = Txn::new(&storage, 0);
        let mut visits = Visits::default();
        let now = 20 * DAY_MS + 1_000;
        let mut visit = |code: &[u8], at: u64, txn: &mut Txn| {
            visits
                .record(link_slot(code), code, at, 0, txn)
                .expect("a visit is counted");
            txn.finish_request(true);
        };
        for i in 0..MAX_PENDING {
            visit(format!("held{i}").as_bytes(), now, &mut txn);
        }
        let long = b"an-alias-longer-than-sixteen-bytes";
        for (code, at) in [
            (&b"Abc12"[..], now),
            (long, now),
            (b"Abc12", now + DAY_MS),
            (b"Abc12", now + DAY_MS),
        ] {
            visit(code, at, &mut txn);
        }
        let (batch, sync) = txn.into_commit().unwrap();
        storage.write(batch, sync).unwrap();

        let txn = Txn::new(&storage, 0);
        let short = load_stats(link_slot(b"Abc12"), b"Abc12", &txn).unwrap();
        assert_eq!(short.total, 3);
        assert_eq!(&short.days[..], &[(20, 1), (21, 2)]);
        assert_eq!(short.last_visit, now + DAY_MS);
        let alias = load_stats(link_slot(long), long, &txn).unwrap();
        assert_eq!((alias.total, &alias.days[..]), (1, &[(20, 1)][..]));
        // The held codes are not in storage until a flush.
        assert_eq!(
            load_stats(link_slot(b"held7"), b"held7", &txn)
                .unwrap()
                .total,
            0
        );
        assert_eq!(visits.pending(b"held7").map(|p| p.count), Some(1));
        // What INFO counts as hot state: at least the table's slots.
        assert!(visits.bytes() >= MAX_PENDING * std::mem::size_of::<(CodeKey, Pending)>());
    }
}
