//! A user's book: all of one user's counts under one policy, in one value,
//! so an order reads one key and writes one key for its counts however many
//! rules and items it touches (and the order record beside it). Redis users
//! build the same thing by hand: a hash of the day's counts per user.
//!
//! Value (after the 9-byte header, kind `LIMIT_BOOK`; the header's expiry is
//! the latest of the entries', so TTL compaction drops a book whose every
//! count has ended):
//! `u16 n | n × (u16 len, rule | u16 len, item | u64 expires at | u16 len,
//! counter)`, sorted by (rule, item); the item is empty for a total rule and
//! the counter is in [`Counter::encode_into`]'s form. Entries that count nothing
//! (given back to zero, or ended) are left out when the book is written.

use super::counter::{corrupt, Counter};
use crate::shard::txn::Txn;
use crate::storage::keys::kind;
use crate::storage::value::{self, Corrupt, Cursor, Stored};
use bytes::Bytes;
use rush_protocol::RushError;
use std::borrow::Cow;

/// Live counts one user can hold under one policy (distinct items of its
/// item rules, plus one per total rule): ten times what LIMIT_STATUS lists.
/// Bounds the value an order rewrites (about 45 bytes an entry, so under
/// half a MiB); an order that would go past it is refused with TOO_LARGE.
pub const MAX_BOOK_ENTRIES: usize = 10_000;

/// One count of a book. Its text borrows from the stored book it was read
/// from, or from the request that added it: reading and rewriting a book
/// copies no rule or item name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    pub rule: Cow<'a, str>,
    /// The item, or "" for a total rule.
    pub item: Cow<'a, str>,
    /// When the count ends (the counter's own expiry).
    pub expires_at: u64,
    pub counter: Counter,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Book<'a> {
    /// Sorted by (rule, item).
    entries: Vec<Entry<'a>>,
}

impl<'a> Book<'a> {
    /// Decode a stored book (`None`: there is none, an empty book); entries
    /// that have ended by `now` are dropped.
    pub fn decode(raw: Option<&'a [u8]>, now: u64) -> Result<Book<'a>, RushError> {
        match raw {
            None => Ok(Book::default()),
            Some(raw) => Book::decode_stored(raw, now).map_err(corrupt),
        }
    }

    /// [`Book::decode`] of a stored book.
    pub fn decode_stored(raw: &'a [u8], now: u64) -> Result<Book<'a>, Corrupt> {
        let s = Stored::decode(raw)?;
        if s.kind != kind::LIMIT_BOOK {
            return Err(Corrupt(format!("limit book has value kind {}", s.kind)));
        }
        if !s.is_live(now) {
            return Ok(Book::default());
        }
        let mut p = Cursor::new(s.payload, "a limit book");
        let n = p.u16()? as usize;
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let rule = p.str()?;
            let item = p.str()?;
            let expires_at = p.u64()?;
            let len = p.u16()? as usize;
            let counter = Counter::decode_payload(p.take(len)?)?;
            if value::is_live(expires_at, now) {
                entries.push(Entry {
                    rule: Cow::Borrowed(rule),
                    item: Cow::Borrowed(item),
                    expires_at,
                    counter,
                });
            }
        }
        p.end()?;
        Ok(Book { entries })
    }

    /// The same book, owning its text.
    pub fn into_owned(self) -> Book<'static> {
        Book {
            entries: self
                .entries
                .into_iter()
                .map(|e| Entry {
                    rule: Cow::Owned(e.rule.into_owned()),
                    item: Cow::Owned(e.item.into_owned()),
                    expires_at: e.expires_at,
                    counter: e.counter,
                })
                .collect(),
        }
    }

    pub fn entries(&self) -> &[Entry<'a>] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn find(&self, rule: &str, item: &str) -> Result<usize, usize> {
        self.entries
            .binary_search_by(|e| (&*e.rule, &*e.item).cmp(&(rule, item)))
    }

    /// The counter of (rule, item); empty when the book has none.
    pub fn counter(&self, rule: &str, item: &str) -> &Counter {
        const EMPTY: Counter = Counter::Empty;
        match self.find(rule, item) {
            Ok(i) => &self.entries[i].counter,
            Err(_) => &EMPTY,
        }
    }

    /// When the count of (rule, item) ends, if the book has it.
    pub fn expiry(&self, rule: &str, item: &str) -> Option<u64> {
        self.find(rule, item)
            .ok()
            .map(|i| self.entries[i].expires_at)
    }

    /// Set the counter of (rule, item); one that counts nothing is removed.
    pub fn set(
        &mut self,
        rule: impl Into<Cow<'a, str>>,
        item: impl Into<Cow<'a, str>>,
        counter: Counter,
        expires_at: u64,
    ) {
        let (rule, item) = (rule.into(), item.into());
        match (self.find(&rule, &item), counter.is_zero()) {
            (Ok(i), true) => {
                self.entries.remove(i);
            }
            (Ok(i), false) => {
                self.entries[i].counter = counter;
                self.entries[i].expires_at = expires_at;
            }
            (Err(_), true) => {}
            (Err(i), false) => self.entries.insert(
                i,
                Entry {
                    rule,
                    item,
                    expires_at,
                    counter,
                },
            ),
        }
    }

    /// The stored form; `None` when nothing counts (the key is deleted).
    pub fn encode(&self) -> Option<Bytes> {
        let expires_at = self.entries.iter().map(|e| e.expires_at).max()?;
        let mut p = Vec::with_capacity(2 + self.entries.len() * 48);
        p.extend_from_slice(&(self.entries.len() as u16).to_be_bytes());
        for e in &self.entries {
            for s in [&e.rule, &e.item] {
                p.extend_from_slice(&(s.len() as u16).to_be_bytes());
                p.extend_from_slice(s.as_bytes());
            }
            p.extend_from_slice(&e.expires_at.to_be_bytes());
            // The counter's length goes before it once it is written.
            let at = p.len();
            p.extend_from_slice(&[0, 0]);
            e.counter.encode_into(&mut p);
            let len = (p.len() - at - 2) as u16;
            p[at..at + 2].copy_from_slice(&len.to_be_bytes());
        }
        Some(value::encode_shared(kind::LIMIT_BOOK, expires_at, &p))
    }

    /// Stage the book at `key`: written, or deleted when nothing counts.
    pub fn store(&self, key: Vec<u8>, txn: &mut Txn) {
        match self.encode() {
            Some(raw) => txn.put(key, raw),
            None => txn.delete(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::policy::Pos;

    fn day(start: u64) -> Pos {
        Pos::Window {
            start,
            end: start + 100,
        }
    }

    #[test]
    fn entries_round_trip_sorted_and_end_with_their_windows() {
        let mut b = Book::default();
        assert_eq!(b.encode(), None, "an empty book is no value");
        let c = Counter::Empty.add(&day(0), 2);
        b.set("total", "", c.clone(), 100);
        b.set("item", "sku-b", c.clone(), 100);
        b.set("item", "sku-a", Counter::Empty.add(&day(100), 1), 200);
        let order: Vec<_> = b.entries().iter().map(|e| (&*e.rule, &*e.item)).collect();
        assert_eq!(order, [("item", "sku-a"), ("item", "sku-b"), ("total", "")]);
        let raw = b.encode().unwrap();
        assert_eq!(value::expiry_of(&raw), Some(200), "the latest entry's end");
        assert_eq!(Book::decode_stored(&raw, 50).unwrap(), b);
        // At 150 the day-0 counts have ended; the day-100 one still counts.
        let later = Book::decode_stored(&raw, 150).unwrap();
        assert_eq!(later.len(), 1);
        assert_eq!(later.counter("item", "sku-a").count_at(&day(100)), 1);
        assert_eq!(later.counter("item", "sku-b"), &Counter::Empty);
        assert_eq!(Book::decode_stored(&raw, 200).unwrap(), Book::default());
        // Given back to zero: removed.
        b.set("total", "", Counter::Empty, 100);
        assert_eq!(b.len(), 2);
        assert_eq!(b.expiry("item", "sku-b"), Some(100));
        assert_eq!(b.expiry("total", ""), None);
    }

    #[test]
    fn corrupt_books_are_errors() {
        let mut b = Book::default();
        b.set("r", "i", Counter::Empty.add(&day(0), 1), 100);
        let raw = b.encode().unwrap();
        assert!(Book::decode_stored(&raw[..raw.len() - 1], 0).is_err());
        let mut longer = raw.to_vec();
        longer.push(0);
        assert!(Book::decode_stored(&longer, 0).is_err());
        assert!(Book::decode_stored(&value::encode(kind::LIMIT_ORDER, 0, &[0, 0]), 0).is_err());
    }
}
