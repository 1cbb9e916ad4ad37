//! The catalog: records grouped under an owner key (a merchant code),
//! found by owner or through an alias (name, account, … → owner).
//!
//! Owners route by `key_slot(owner)`; aliases by [`alias_slot`]. A query by
//! alias is two requests — CATALOG_RESOLVE on the alias's slot, then
//! CATALOG_QUERY on the owner's slot — which the reference client makes in
//! one call (`Client::catalog_query_alias`). The daemon never forwards
//! between shards or nodes, so a shard thread never waits on another.

mod alias_del;
mod alias_set;
mod delete;
mod put;
mod query;
mod rebuild;
mod resolve;
mod set;
mod shed;
mod warm;

pub use alias_del::CatalogAliasDel;
pub use alias_set::CatalogAliasSet;
pub use delete::CatalogDelete;
pub use put::CatalogPut;
pub use query::{CatalogFilter, CatalogQuery, CatalogQueryReply};
pub use rebuild::CatalogRebuild;
pub use resolve::CatalogResolve;
pub use set::{RecordRef, RecordSet};
pub use shed::{CatalogShed, ShedMode};
pub use warm::{CatalogWarm, CatalogWarmReply};

use crate::codec::{DecodeError, Reader, Wire, WriteExt};
use crate::limits::{
    MAX_ALIAS_KIND, MAX_ATTRIBUTE, MAX_ATTRIBUTES, MAX_ID, MAX_KEY, MAX_RECORD_BYTES,
};
use crate::slot::parts_slot;
use bytes::{BufMut, Bytes, BytesMut};

/// The slot of an alias: CRC16 of `kind`, a 0 byte, `alias` (no hash tags),
/// so the same alias text under two kinds are two independent keys.
pub fn alias_slot(kind: &[u8], alias: &[u8]) -> u16 {
    parts_slot(&[kind, alias])
}

/// One catalog record. Strings are UTF-8 (checked at decode) but kept as
/// [`Bytes`], so a cached record is answered by reference counting instead
/// of copying.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// Unique within its owner; 1–256 bytes.
    pub id: Bytes,
    /// Attribute name → value. Names are non-empty and unique; at most 64.
    pub attributes: Vec<(Bytes, Bytes)>,
    /// Valid from this unix ms on (inclusive); `None` = always was.
    pub valid_from: Option<u64>,
    /// Valid until this unix ms (exclusive); `None` = never ends.
    pub valid_to: Option<u64>,
}

impl Record {
    pub fn new(id: impl Into<Bytes>) -> Self {
        Record {
            id: id.into(),
            ..Record::default()
        }
    }

    /// Builder: add an attribute.
    pub fn attr(mut self, name: impl Into<Bytes>, value: impl Into<Bytes>) -> Self {
        self.attributes.push((name.into(), value.into()));
        self
    }

    /// Builder: set the validity window (unix ms; `None` = open).
    pub fn valid(mut self, from: Option<u64>, to: Option<u64>) -> Self {
        self.valid_from = from;
        self.valid_to = to;
        self
    }

    /// The value of an attribute.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(n, _)| n.as_ref() == name.as_bytes())
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    /// The id as text (ids are UTF-8 on the wire).
    pub fn id_str(&self) -> &str {
        std::str::from_utf8(&self.id).unwrap_or("")
    }

    /// Valid at `at` (unix ms): `valid_from <= at < valid_to`.
    pub fn is_valid_at(&self, at: u64) -> bool {
        self.valid_from.is_none_or(|from| from <= at) && self.valid_to.is_none_or(|to| at < to)
    }

    /// Does the record pass a query's filter?
    pub fn matches(&self, filter: &CatalogFilter) -> bool {
        filter.valid_at.is_none_or(|at| self.is_valid_at(at))
            && filter
                .attributes
                .iter()
                .all(|(name, value)| self.attributes.iter().any(|(n, v)| n == name && v == value))
    }

    /// Bytes of the wire form (the limits count these).
    pub fn encoded_len(&self) -> usize {
        4 + self.id.len()
            + 4
            + self
                .attributes
                .iter()
                .map(|(n, v)| 8 + n.len() + v.len())
                .sum::<usize>()
            + 1
            + self.valid_from.map_or(0, |_| 8)
            + 1
            + self.valid_to.map_or(0, |_| 8)
    }
}

/// `string id, list<(string name, string value)>, option<u64> valid_from,
/// option<u64> valid_to`.
impl Wire for Record {
    fn encode(&self, out: &mut BytesMut) {
        out.put_lp(&self.id);
        out.put_count(self.attributes.len());
        for (n, v) in &self.attributes {
            out.put_lp(n);
            out.put_lp(v);
        }
        put_opt_u64(out, self.valid_from);
        put_opt_u64(out, self.valid_to);
    }

    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        let id = read_text(r, "record id", MAX_ID)?;
        if id.is_empty() {
            return Err(DecodeError::invalid("record id", "must not be empty"));
        }
        let attributes = r.list("attributes", MAX_ATTRIBUTES, 8, |r| {
            let name = read_text(r, "attribute name", MAX_ATTRIBUTE)?;
            if name.is_empty() {
                return Err(DecodeError::invalid("attribute name", "must not be empty"));
            }
            Ok((name, read_text(r, "attribute value", MAX_ATTRIBUTE)?))
        })?;
        // At most 64 names: the quadratic check is cheaper than sorting.
        for (i, (name, _)) in attributes.iter().enumerate() {
            if attributes[..i].iter().any(|(n, _)| n == name) {
                return Err(DecodeError::invalid(
                    "attributes",
                    format!("{:?} appears twice", String::from_utf8_lossy(name)),
                ));
            }
        }
        let valid_from = r.option("valid_from", |r| r.u64("valid_from"))?;
        let valid_to = r.option("valid_to", |r| r.u64("valid_to"))?;
        if let (Some(from), Some(to)) = (valid_from, valid_to) {
            if from >= to {
                return Err(DecodeError::invalid(
                    "validity",
                    format!("valid_from {from} is not before valid_to {to}"),
                ));
            }
        }
        let record = Record {
            id,
            attributes,
            valid_from,
            valid_to,
        };
        let len = record.encoded_len();
        if len > MAX_RECORD_BYTES {
            return Err(DecodeError::TooLarge {
                field: "record",
                len,
                max: MAX_RECORD_BYTES,
            });
        }
        Ok(record)
    }
}

fn put_opt_u64(out: &mut BytesMut, v: Option<u64>) {
    match v {
        None => out.put_u8(0),
        Some(v) => {
            out.put_u8(1);
            out.put_u64(v);
        }
    }
}

/// Length-prefixed bytes that must be UTF-8, kept as [`Bytes`] (zero-copy).
pub(crate) fn read_text(
    r: &mut Reader,
    field: &'static str,
    max: usize,
) -> Result<Bytes, DecodeError> {
    let b = r.bytes(field, max)?;
    std::str::from_utf8(&b).map_err(|_| DecodeError::invalid(field, "not UTF-8"))?;
    Ok(b)
}

/// An owner key: 1–1024 bytes.
pub(crate) fn read_owner(r: &mut Reader) -> Result<Bytes, DecodeError> {
    let owner = r.bytes("owner", MAX_KEY)?;
    if owner.is_empty() {
        return Err(DecodeError::invalid("owner", "must not be empty"));
    }
    Ok(owner)
}

/// An alias kind (1–64 bytes of UTF-8) and the alias (1–1024 bytes).
pub(crate) fn read_alias(r: &mut Reader) -> Result<(Bytes, Bytes), DecodeError> {
    let kind = read_text(r, "alias kind", MAX_ALIAS_KIND)?;
    if kind.is_empty() {
        return Err(DecodeError::invalid("alias kind", "must not be empty"));
    }
    let alias = r.bytes("alias", MAX_KEY)?;
    if alias.is_empty() {
        return Err(DecodeError::invalid("alias", "must not be empty"));
    }
    Ok((kind, alias))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Request, Wire};
    use proptest::prelude::*;

    fn record() -> impl Strategy<Value = Record> {
        (
            "[a-z0-9]{1,12}",
            proptest::collection::btree_map("[a-z]{1,6}", "[ -~]{0,12}", 0..6),
            proptest::option::of(0u64..1_000),
            proptest::option::of(1_000u64..2_000),
        )
            .prop_map(|(id, attrs, from, to)| Record {
                id: Bytes::from(id),
                attributes: attrs
                    .into_iter()
                    .map(|(n, v)| (Bytes::from(n), Bytes::from(v)))
                    .collect(),
                valid_from: from,
                valid_to: to,
            })
    }

    proptest! {
        #[test]
        fn records_round_trip(r in record()) {
            let bytes = r.to_bytes();
            prop_assert_eq!(bytes.len(), r.encoded_len());
            prop_assert_eq!(Record::decode_body(bytes).unwrap(), r);
        }

        /// No body, however hostile, panics a catalog decoder.
        #[test]
        fn decoders_never_panic(op in 0x50u8..0x5f, body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = Request::decode(op, Bytes::from(body));
        }
    }

    #[test]
    fn validity_window_is_half_open() {
        let r = Record::new("c").valid(Some(10), Some(20));
        assert!(!r.is_valid_at(9) && r.is_valid_at(10) && r.is_valid_at(19) && !r.is_valid_at(20));
        assert!(Record::new("c").is_valid_at(0));
    }

    #[test]
    fn bad_records_are_refused() {
        let enc = |r: &Record| r.to_bytes();
        assert!(Record::decode_body(enc(&Record::new(""))).is_err());
        let dup = Record::new("a").attr("k", "1").attr("k", "2");
        assert!(matches!(
            Record::decode_body(enc(&dup)),
            Err(DecodeError::Invalid { .. })
        ));
        let backwards = Record::new("a").valid(Some(5), Some(5));
        assert!(Record::decode_body(enc(&backwards)).is_err());
        let mut many = Record::new("a");
        for i in 0..=MAX_ATTRIBUTES {
            many = many.attr(format!("k{i}"), "v");
        }
        assert!(matches!(
            Record::decode_body(enc(&many)),
            Err(DecodeError::TooLarge { .. })
        ));
        let mut huge = Record::new("a");
        for i in 0..20 {
            huge = huge.attr(format!("k{i}"), "x".repeat(4000));
        }
        assert!(matches!(
            Record::decode_body(enc(&huge)),
            Err(DecodeError::TooLarge {
                field: "record",
                ..
            })
        ));
        let mut not_utf8 = BytesMut::new();
        not_utf8.put_lp(&[0xff]);
        not_utf8.put_u32(0);
        not_utf8.put_u8(0);
        not_utf8.put_u8(0);
        assert!(Record::decode_body(not_utf8.freeze()).is_err());
    }

    #[test]
    fn alias_kinds_separate_slots_input() {
        assert_eq!(
            alias_slot(b"name", b"acme"),
            parts_slot(&[b"name", b"acme"])
        );
        assert_ne!(alias_slot(b"ab", b"c"), alias_slot(b"a", b"bc"));
    }
}
