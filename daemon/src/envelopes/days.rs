//! Calendar days (UTC) and retention by whole days.
//!
//! Envelopes are stored under their creation day *of month* (1–31), as the
//! issue asks (the WeChat tables are id-hash × day of month). A day of month
//! comes back every 28–31 days, so with a retention of 31 days the bucket of
//! "the 5th" can hold two different days at once: 5 February (still kept)
//! and 5 January (due for removal). Deleting the whole bucket would lose the
//! newer day; deleting nothing would keep the older one forever.
//!
//! What makes it exact: within one slot, ids grow with creation time (they
//! come from the slot's sequence, handed out in order on one thread), so a
//! bucket holds its days as consecutive id ranges, oldest first. Each slot
//! remembers, per calendar day, the first id created that day (a small
//! marker record, written with that first envelope). Removing day X of a
//! slot deletes, in its day-of-month bucket, everything below the first id
//! of the next calendar day that shares the bucket — or the whole bucket if
//! no such later day exists yet. One range delete per (slot, day).

use hashbrown::HashMap;
use std::collections::{BTreeMap, BTreeSet};

pub const DAY_MS: u64 = 86_400_000;

/// Days since 1970-01-01 (UTC) of a unix time in ms.
pub fn epoch_day(ms: u64) -> u32 {
    (ms / DAY_MS).min(u32::MAX as u64) as u32
}

/// The day of month (1–31) of a day since the epoch (UTC).
///
/// Days past 9999-12-31, the end of jiff's calendar, can't come from a real
/// clock; they fold to that last day so that no input panics.
pub fn day_of_month(epoch_day: u32) -> u8 {
    let day = jiff::Span::new()
        .try_days(i64::from(epoch_day))
        .ok()
        .and_then(|span| EPOCH.checked_add(span).ok())
        .unwrap_or(jiff::civil::Date::MAX);
    day.day() as u8
}

const EPOCH: jiff::civil::Date = jiff::civil::date(1970, 1, 1);

/// Every slot's day markers on one shard: which calendar days have
/// envelopes, and the first id of each.
#[derive(Debug, Default)]
pub struct Days {
    by_slot: HashMap<u16, BTreeMap<u32, u64>>,
    /// (day, slot), oldest first: what retention looks at.
    order: BTreeSet<(u32, u16)>,
}

/// One calendar day of one slot to remove: delete `[from id 0, before)` in
/// its day-of-month bucket (`before = None`: the whole bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removal {
    pub slot: u16,
    pub day: u32,
    pub bucket: u8,
    pub before: Option<u64>,
}

impl Days {
    pub fn clear(&mut self) {
        self.by_slot.clear();
        self.order.clear();
    }

    pub fn contains(&self, slot: u16, day: u32) -> bool {
        self.by_slot
            .get(&slot)
            .is_some_and(|m| m.contains_key(&day))
    }

    pub fn insert(&mut self, slot: u16, day: u32, first_id: u64) {
        self.by_slot.entry(slot).or_default().insert(day, first_id);
        self.order.insert((day, slot));
    }

    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The oldest (slot, day) whose day is at or before `last_day`, and how
    /// to remove it.
    pub fn oldest_due(&self, last_day: u32) -> Option<Removal> {
        let &(day, slot) = self.order.first()?;
        if day > last_day {
            return None;
        }
        let bucket = day_of_month(day);
        let before = self.by_slot.get(&slot).and_then(|m| {
            m.range(day + 1..)
                .find(|(d, _)| day_of_month(**d) == bucket)
                .map(|(_, first)| *first)
        });
        Some(Removal {
            slot,
            day,
            bucket,
            before,
        })
    }

    /// Forget every day of a slot (it moved away).
    pub fn remove_slot(&mut self, slot: u16) {
        if let Some(m) = self.by_slot.remove(&slot) {
            for day in m.keys() {
                self.order.remove(&(*day, slot));
            }
        }
    }

    pub fn remove(&mut self, slot: u16, day: u32) {
        self.order.remove(&(day, slot));
        if let Some(m) = self.by_slot.get_mut(&slot) {
            m.remove(&day);
            if m.is_empty() {
                self.by_slot.remove(&slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Days since the epoch of a civil date.
    fn days(y: i16, m: i8, d: i8) -> u32 {
        let span = EPOCH.until(jiff::civil::date(y, m, d)).unwrap();
        span.get_days() as u32
    }

    #[test]
    fn days_of_month() {
        assert_eq!(day_of_month(0), 1); // 1970-01-01
        assert_eq!(days(1970, 1, 1), 0);
        assert_eq!(day_of_month(days(2024, 2, 29)), 29);
        assert_eq!(day_of_month(days(2024, 3, 1)), 1);
        assert_eq!(day_of_month(days(2026, 12, 31)), 31);
        assert_eq!(epoch_day(DAY_MS * 3 + 5), 3);
        assert_eq!(
            day_of_month(u32::MAX),
            31,
            "past 9999 folds to its last day"
        );
        // Every day in four centuries: the day of month goes up by one or
        // starts over at 1 after 28–31 days.
        let mut prev = day_of_month(days(2000, 1, 1));
        for d in days(2000, 1, 1) + 1..days(2400, 1, 1) {
            let dom = day_of_month(d);
            assert!(dom == prev + 1 || (dom == 1 && (28..=31).contains(&prev)));
            prev = dom;
        }
    }

    #[test]
    fn a_bucket_shared_by_two_months_is_cut_at_the_newer_day() {
        let mut d = Days::default();
        let (jan5, feb5, mar5) = (days(2026, 1, 5), days(2026, 2, 5), days(2026, 3, 5));
        let feb6 = days(2026, 2, 6);
        d.insert(9, jan5, 100);
        d.insert(9, feb5, 500);
        d.insert(9, feb6, 600);
        d.insert(9, mar5, 900);
        // 31 days of retention: on 5 February, 5 January goes — only up to
        // the first id of 5 February, which shares the bucket.
        let r = d.oldest_due(feb5 - 31).unwrap();
        assert_eq!(
            r,
            Removal {
                slot: 9,
                day: jan5,
                bucket: 5,
                before: Some(500)
            }
        );
        d.remove(9, jan5);
        // 5 March (28 days after 5 February): 5 February is kept...
        assert_eq!(d.oldest_due(mar5 - 31), None);
        // ...until 8 March, when it goes up to 5 March's first id.
        let r = d.oldest_due(days(2026, 3, 8) - 31).unwrap();
        assert_eq!((r.day, r.before), (feb5, Some(900)));
        d.remove(9, feb5);
        // 6 February has no later day in its bucket: the whole bucket.
        let r = d.oldest_due(days(2026, 3, 9) - 31).unwrap();
        assert_eq!((r.day, r.bucket, r.before), (feb6, 6, None));
        d.remove(9, feb6);
        assert_eq!(d.len(), 1);
        assert!(d.contains(9, mar5) && !d.contains(9, feb5));
    }
}
