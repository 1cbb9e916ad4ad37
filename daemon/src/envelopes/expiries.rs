//! The index of open envelopes by expiry, bounded in memory.
//!
//! Every open envelope has a pending entry in storage,
//! `(slot, ENVELOPE_PENDING, expires_at, id)`, until the timer has seen it
//! settled. A day's envelopes are all open for a day, so holding every
//! entry in memory grew with the day's traffic: 10M envelopes held ~300 MB
//! outside any budget (bench/results/NOTES.md). Memory now holds only the
//! earliest entries, at most `cap` of them — the ones the timer needs next
//! — and a horizon below which it holds all of them; the rest stay in
//! storage until the held ones are used up, when the next `cap` are read
//! back (one seek per slot of the shard).

use std::collections::BTreeSet;

/// `(expires_at, id)`.
pub(super) type Entry = (u64, u64);

/// Held entries and the horizon: every stored entry below `horizon` is
/// held; those at or above it may be in storage only.
pub(super) struct Expiries {
    held: BTreeSet<Entry>,
    horizon: Entry,
    cap: usize,
}

/// The horizon when every entry is held.
const ALL: Entry = (u64::MAX, u64::MAX);

/// Bytes per held entry in the memory report (a B-tree node's share).
pub(super) const ENTRY_BYTES: usize = 32;

impl Expiries {
    pub fn new(cap: usize) -> Expiries {
        Expiries {
            held: BTreeSet::new(),
            horizon: ALL,
            cap: cap.max(1),
        }
    }

    /// A new stored entry: held when it is below the horizon (the latest
    /// held entry then goes when there are too many, and the horizon comes
    /// down to it).
    pub fn insert(&mut self, e: Entry) {
        if e >= self.horizon {
            return;
        }
        self.held.insert(e);
        if self.held.len() > self.cap {
            if let Some(last) = self.held.pop_last() {
                self.horizon = last;
            }
        }
    }

    pub fn remove(&mut self, e: &Entry) {
        self.held.remove(e);
    }

    /// Up to `n` held entries due at `now` that `keep` accepts, earliest
    /// first.
    pub fn due(&self, now: u64, n: usize, keep: impl Fn(&Entry) -> bool) -> Vec<Entry> {
        self.held
            .range(..=(now, u64::MAX))
            .filter(|e| keep(e))
            .take(n)
            .copied()
            .collect()
    }

    /// No stored entry expires before this (a lower bound; `None`: none is
    /// stored).
    pub fn earliest(&self) -> Option<u64> {
        match self.held.first() {
            Some(&(at, _)) => Some(at),
            None if self.horizon == ALL => None,
            None => Some(self.horizon.0),
        }
    }

    /// Storage holds entries memory doesn't, and none is held: time to read
    /// the next ones ([`Expiries::refill`]).
    pub fn needs_refill(&self) -> bool {
        self.held.is_empty() && self.horizon != ALL
    }

    /// Read the next entries back: `read` visits each slot's stored entries
    /// from the horizon on, in order, until the visitor returns false.
    pub fn refill<E>(
        &mut self,
        mut read: impl FnMut(Entry, &mut dyn FnMut(Entry) -> bool) -> Result<(), E>,
    ) -> Result<(), E> {
        let from = self.horizon;
        let mut horizon = ALL;
        let (held, cap) = (&mut self.held, self.cap);
        read(from, &mut |e| {
            if e >= horizon {
                // This slot's later entries are beyond what is held.
                return false;
            }
            held.insert(e);
            if held.len() > cap {
                if let Some(last) = held.pop_last() {
                    horizon = last;
                }
            }
            true
        })?;
        self.horizon = horizon;
        Ok(())
    }

    /// Keep only the held entries `keep` accepts (slots that left this
    /// shard).
    pub fn retain(&mut self, keep: impl Fn(&Entry) -> bool) {
        self.held.retain(keep);
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for storage: every entry, as the shard's slots hold them.
    fn refill_from(x: &mut Expiries, stored: &BTreeSet<Entry>) {
        x.refill::<()>(|from, visit| {
            for &e in stored.range(from..) {
                if !visit(e) {
                    break;
                }
            }
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn holds_the_earliest_and_reads_the_rest_back_in_order() {
        let mut x = Expiries::new(3);
        let mut stored = BTreeSet::new();
        for e in [(50, 1), (10, 2), (40, 3), (20, 4), (30, 5), (60, 6)] {
            stored.insert(e);
            x.insert(e);
        }
        // The three earliest are held; the horizon is just past them.
        assert_eq!(x.len(), 3);
        assert_eq!(x.earliest(), Some(10));
        assert_eq!(x.due(100, 10, |_| true), vec![(10, 2), (20, 4), (30, 5)]);
        // An entry after the horizon stays in storage only.
        stored.insert((70, 7));
        x.insert((70, 7));
        assert_eq!(x.len(), 3);
        // One before it is held (and pushes the latest out).
        stored.insert((15, 8));
        x.insert((15, 8));
        assert_eq!(x.due(100, 10, |_| true), vec![(10, 2), (15, 8), (20, 4)]);

        // The timer uses them up; then the next three come back.
        let mut seen = Vec::new();
        while x.earliest().is_some() {
            if x.needs_refill() {
                refill_from(&mut x, &stored);
            }
            for e in x.due(100, 2, |_| true) {
                x.remove(&e);
                stored.remove(&e);
                seen.push(e);
            }
        }
        let want: Vec<Entry> = vec![
            (10, 2),
            (15, 8),
            (20, 4),
            (30, 5),
            (40, 3),
            (50, 1),
            (60, 6),
            (70, 7),
        ];
        assert_eq!(seen, want, "every entry once, in order");
        assert!(!x.needs_refill());
    }

    #[test]
    fn nothing_due_before_the_horizon_when_nothing_is_held() {
        let mut x = Expiries::new(1);
        x.insert((30, 1));
        x.insert((20, 2));
        x.remove(&(20, 2));
        // (30, 1) is in storage only: the earliest is at least the horizon.
        assert_eq!(x.earliest(), Some(30));
        assert!(x.needs_refill());
        // Storage turns out to hold nothing more: nothing is due at all.
        x.refill::<()>(|_, _| Ok(())).unwrap();
        assert_eq!(x.earliest(), None);
        assert!(!x.needs_refill());
    }
}
