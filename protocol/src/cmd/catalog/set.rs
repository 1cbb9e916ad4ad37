//! An owner's records in their wire form, shared.
//!
//! A node keeps an owner's record set as the bytes a reply carries
//! (`list<record>`, PROTOCOL.md), so answering a cached owner is one copy of
//! one buffer, a set read from storage is answered without decoding a
//! record, and a filter is checked on the records in place.

use super::{CatalogFilter, Record};
use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::MAX_RECORDS_PER_OWNER;
use bytes::{Bytes, BytesMut};
use std::fmt;

/// A counted list of records, encoded; cloning shares the buffer.
#[derive(Clone, PartialEq, Eq)]
pub struct RecordSet {
    /// The count, then each record's encoding.
    wire: Bytes,
    len: usize,
}

impl RecordSet {
    /// The encoding of `records`, in their order.
    pub fn new(records: &[Record]) -> RecordSet {
        let mut out =
            BytesMut::with_capacity(4 + records.iter().map(Record::encoded_len).sum::<usize>());
        out.put_count(records.len());
        for r in records {
            r.encode(&mut out);
        }
        RecordSet {
            wire: out.freeze(),
            len: records.len(),
        }
    }

    /// A set from bytes this node encoded itself (its storage): the layout
    /// is checked — every length within the buffer, every tag 0 or 1,
    /// nothing left over — but not the rules [`Record`]'s decoder enforces
    /// on a peer's bytes (UTF-8, limits, unique names), which held when the
    /// set was written. Allocates nothing.
    pub fn from_own(wire: Bytes) -> Result<RecordSet, DecodeError> {
        let mut at = Cursor { buf: &wire, pos: 0 };
        let len = at.u32("records")? as usize;
        for _ in 0..len {
            RecordRef::read(&mut at)?;
        }
        if at.pos != wire.len() {
            return Err(DecodeError::Trailing(wire.len() - at.pos));
        }
        Ok(RecordSet { wire, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The encoding: count, then the records.
    pub fn wire(&self) -> &Bytes {
        &self.wire
    }

    /// The records, read in place.
    pub fn iter(&self) -> impl Iterator<Item = RecordRef<'_>> {
        let mut at = Cursor {
            buf: &self.wire,
            pos: 4,
        };
        (0..self.len).map(move |_| RecordRef::read(&mut at).expect("checked when the set was made"))
    }

    /// The records as values; their strings share this set's buffer.
    pub fn to_vec(&self) -> Vec<Record> {
        self.iter().map(|r| r.to_record(&self.wire)).collect()
    }

    /// The records that pass `filter`: this set itself when all of them do.
    pub fn filtered(&self, filter: &CatalogFilter) -> RecordSet {
        if filter.attributes.is_empty() && filter.valid_at.is_none() {
            return self.clone();
        }
        let mut out = BytesMut::new();
        out.put_count(0);
        let mut len = 0;
        for r in self.iter().filter(|r| r.matches(filter)) {
            out.extend_from_slice(r.wire);
            len += 1;
        }
        if len == self.len {
            return self.clone();
        }
        out[..4].copy_from_slice(&(len as u32).to_be_bytes());
        RecordSet {
            wire: out.freeze(),
            len,
        }
    }
}

impl Default for RecordSet {
    /// No records: a static buffer, so every empty answer shares it without
    /// touching a reference count.
    fn default() -> Self {
        RecordSet {
            wire: Bytes::from_static(&[0; 4]),
            len: 0,
        }
    }
}

impl From<Vec<Record>> for RecordSet {
    fn from(records: Vec<Record>) -> Self {
        RecordSet::new(&records)
    }
}

impl fmt::Debug for RecordSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.to_vec()).finish()
    }
}

/// `list<record>`: a peer's bytes are decoded record by record with every
/// rule checked, then kept as they came.
impl Wire for RecordSet {
    fn encode(&self, out: &mut BytesMut) {
        out.extend_from_slice(&self.wire);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let start = r.position();
        let len = r.count("records", MAX_RECORDS_PER_OWNER, 11)?;
        for _ in 0..len {
            Record::decode(r)?;
        }
        Ok(RecordSet {
            wire: r.since(start),
            len,
        })
    }
}

/// One record of a [`RecordSet`], borrowed from its buffer.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    pub id: &'a [u8],
    /// `count` (name, value) pairs, each two length-prefixed strings.
    attributes: &'a [u8],
    count: usize,
    pub valid_from: Option<u64>,
    pub valid_to: Option<u64>,
    /// The record's whole encoding.
    wire: &'a [u8],
}

impl<'a> RecordRef<'a> {
    fn read(at: &mut Cursor<'a>) -> Result<RecordRef<'a>, DecodeError> {
        let start = at.pos;
        let id = at.lp("record id")?;
        let count = at.u32("attributes")? as usize;
        let from = at.pos;
        for _ in 0..count {
            at.lp("attribute name")?;
            at.lp("attribute value")?;
        }
        let attributes = &at.buf[from..at.pos];
        let valid_from = at.opt_u64("valid_from")?;
        let valid_to = at.opt_u64("valid_to")?;
        Ok(RecordRef {
            id,
            attributes,
            count,
            valid_from,
            valid_to,
            wire: &at.buf[start..at.pos],
        })
    }

    /// How many attributes it has.
    pub fn attribute_count(&self) -> usize {
        self.count
    }

    /// The (name, value) pairs.
    pub fn attributes(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        let mut at = Cursor {
            buf: self.attributes,
            pos: 0,
        };
        (0..self.count).map(move |_| {
            let name = at.lp("").expect("checked when read");
            (name, at.lp("").expect("checked when read"))
        })
    }

    /// Does the record pass a query's filter? (As [`Record::matches`].)
    pub fn matches(&self, filter: &CatalogFilter) -> bool {
        filter.valid_at.is_none_or(|at| {
            self.valid_from.is_none_or(|from| from <= at) && self.valid_to.is_none_or(|to| at < to)
        }) && filter.attributes.iter().all(|(name, value)| {
            self.attributes()
                .any(|(n, v)| n == name.as_ref() && v == value.as_ref())
        })
    }

    /// The record as a value, its strings slices of `buf` (the buffer it
    /// was read from).
    fn to_record(self, buf: &Bytes) -> Record {
        Record {
            id: buf.slice_ref(self.id),
            attributes: self
                .attributes()
                .map(|(n, v)| (buf.slice_ref(n), buf.slice_ref(v)))
                .collect(),
            valid_from: self.valid_from,
            valid_to: self.valid_to,
        }
    }
}

/// A read position in a buffer known to hold records.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or(DecodeError::Truncated(field))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let b = self.take(4, field)?;
        Ok(u32::from_be_bytes(b.try_into().expect("4 bytes")))
    }

    fn lp(&mut self, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.u32(field)? as usize;
        self.take(n, field)
    }

    fn opt_u64(&mut self, field: &'static str) -> Result<Option<u64>, DecodeError> {
        match self.take(1, field)?[0] {
            0 => Ok(None),
            1 => {
                let b = self.take(8, field)?;
                Ok(Some(u64::from_be_bytes(b.try_into().expect("8 bytes"))))
            }
            t => Err(DecodeError::invalid(field, format!("presence tag {t}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records() -> Vec<Record> {
        vec![
            Record::new("a")
                .attr("tier", "gold")
                .valid(Some(10), Some(20)),
            Record::new("b").attr("tier", "silver").attr("x", ""),
            Record::new("c"),
        ]
    }

    #[test]
    fn a_set_is_the_wire_form_of_its_records() {
        let set = RecordSet::new(&records());
        assert_eq!(set.len(), 3);
        assert_eq!(set.to_vec(), records());
        // The same bytes as the records encoded one by one.
        let mut want = BytesMut::new();
        want.put_count(3);
        for r in records() {
            r.encode(&mut want);
        }
        assert_eq!(set.wire()[..], want[..]);
        assert_eq!(RecordSet::decode_body(set.wire().clone()).unwrap(), set);
        assert_eq!(RecordSet::from_own(set.wire().clone()).unwrap(), set);
        assert!(RecordSet::default().is_empty());
        assert_eq!(RecordSet::default(), RecordSet::new(&[]));
    }

    #[test]
    fn filters_match_as_records_do() {
        let set = RecordSet::new(&records());
        let filters = [
            CatalogFilter::default(),
            CatalogFilter::default().attr("tier", "gold"),
            CatalogFilter::default().attr("x", ""),
            CatalogFilter::default().attr("tier", "bronze"),
            CatalogFilter::default().at(15),
            CatalogFilter::default().at(20),
            CatalogFilter::default().at(15).attr("tier", "silver"),
        ];
        for f in filters {
            let want: Vec<Record> = records().into_iter().filter(|r| r.matches(&f)).collect();
            let got = set.filtered(&f);
            assert_eq!(got.to_vec(), want, "{f:?}");
            assert_eq!(got, RecordSet::new(&want), "{f:?}");
        }
    }

    #[test]
    fn own_bytes_with_a_broken_layout_are_refused() {
        let wire = RecordSet::new(&records()).wire().clone();
        for cut in 0..wire.len() {
            assert!(
                RecordSet::from_own(wire.slice(..cut)).is_err(),
                "cut at {cut}"
            );
        }
        let mut longer = wire.to_vec();
        longer.push(0);
        assert!(matches!(
            RecordSet::from_own(longer.into()),
            Err(DecodeError::Trailing(1))
        ));
        let mut bad_tag = wire.to_vec();
        let last = bad_tag.len() - 1; // record c's valid_to tag
        bad_tag[last] = 2;
        assert!(RecordSet::from_own(bad_tag.into()).is_err());
    }

    #[test]
    fn a_peers_set_is_checked_record_by_record() {
        let dup = RecordSet::new(&[Record::new("a").attr("k", "1").attr("k", "2")]);
        assert!(RecordSet::decode_body(dup.wire().clone()).is_err());
        let mut too_many = BytesMut::new();
        too_many.put_count(MAX_RECORDS_PER_OWNER + 1);
        assert!(RecordSet::decode_body(too_many.freeze()).is_err());
    }
}
