//! What the catalog keeps in storage (see the module doc, "Storage"): an
//! owner's record set as one value under `keys::catalog_records`, an alias
//! under `keys::catalog_alias` on the alias's own slot. Their encodings,
//! the read of one item, and the write of a record set.

use super::cache::{Cached, Item};
use super::{corrupt, storage_error, too_large, Catalog};
use crate::shard::rows::prefetch;
use crate::shard::txn::Txn;
use crate::storage::inline;
use crate::storage::keys;
use crate::storage::keys::kind;
use crate::storage::value::{self, Stored, HEADER};
use bytes::Bytes;
use rush_protocol::cmd::{alias_slot, Record, RecordSet};
use rush_protocol::limits::MAX_OWNER_BYTES;
use rush_protocol::{key_slot, RushError};

/// Format byte after the value header of a stored record set.
const RECORDS_FORMAT: u8 = 1;

/// The storage key of an owner's record set (in the owner's slot).
pub(super) fn owner_key(owner: &[u8]) -> Vec<u8> {
    keys::catalog_records(key_slot(owner), owner)
}

/// The storage key of an alias (in the alias's slot).
pub(super) fn alias_key(kind: &[u8], alias: &[u8]) -> Vec<u8> {
    keys::catalog_alias(alias_slot(kind, alias), kind, alias)
}

/// A stored record set: header (kind CATALOG_RECORDS, no expiry), format
/// byte, then `list<record>` exactly as on the wire (PROTOCOL.md), sorted by
/// record id.
pub(super) fn encode_records(records: &[Record]) -> Vec<u8> {
    let set = RecordSet::new(records);
    let mut body = Vec::with_capacity(1 + set.wire().len());
    body.push(RECORDS_FORMAT);
    body.extend_from_slice(set.wire());
    value::encode(kind::CATALOG_RECORDS, 0, &body)
}

/// A stored record set, kept in its wire form: a slice of the value read,
/// so a cached set is one buffer and a query answers it without decoding a
/// record.
pub(super) fn decode_records(raw: Bytes) -> Result<RecordSet, RushError> {
    let stored = Stored::decode(&raw).map_err(corrupt)?;
    if stored.kind != kind::CATALOG_RECORDS || stored.payload.first() != Some(&RECORDS_FORMAT) {
        return Err(corrupt(format!(
            "kind {} format {:?}",
            stored.kind,
            stored.payload.first()
        )));
    }
    RecordSet::from_own(raw.slice(HEADER + 1..)).map_err(corrupt)
}

/// Start loading a cached set's bytes for a query's answer. A set read
/// from storage is a slice of its row's value, whose reference count (the
/// answer's clone updates it) sits [`inline::HEAD`] bytes before the
/// value's header (`storage::inline`); only the first lines are loaded,
/// enough for the sets most owners hold.
pub(super) fn prefetch_records(records: &RecordSet) {
    let at = records.wire().as_ptr();
    prefetch(at.wrapping_sub(HEADER + 1 + inline::HEAD));
    for line in 0..records.wire().len().min(PREFETCHED_BYTES).div_ceil(64) {
        prefetch(at.wrapping_add(line * 64));
    }
}

/// How much of a cached set [`prefetch_records`] loads.
const PREFETCHED_BYTES: usize = 256;

/// Payload bytes of a stored set (what `MAX_OWNER_BYTES` bounds).
fn payload_len(value: &[u8]) -> usize {
    value.len() - HEADER - 1
}

impl Catalog {
    /// Read an item from storage (through the group, so earlier writes of
    /// this group are seen). The row cache keeps only what the hot cache
    /// can't: the hot cache holds the item's answer once a query caches
    /// it, and a copy in the row cache was almost never read (3.6 % of the
    /// catalog's storage reads, bench/results/NOTES.md).
    pub(super) fn load(&self, item: Item, txn: &Txn) -> Result<Cached, RushError> {
        match item {
            Item::Owner(owner) => match txn
                .get_uncaching(&owner_key(owner), self.cache.largest())
                .map_err(storage_error)?
            {
                None => Ok(Cached::Records(RecordSet::default())),
                Some(raw) => decode_records(raw).map(Cached::Records),
            },
            Item::Alias { kind: k, alias } => {
                match txn
                    .get_uncaching(&alias_key(k, alias), self.cache.largest())
                    .map_err(storage_error)?
                {
                    None => Ok(Cached::Alias(None)),
                    Some(raw) => {
                        let stored = Stored::decode(&raw).map_err(corrupt)?;
                        if stored.kind != kind::CATALOG_ALIAS {
                            return Err(corrupt(format!("alias of kind {}", stored.kind)));
                        }
                        Ok(Cached::Alias(Some(Bytes::copy_from_slice(stored.payload))))
                    }
                }
            }
        }
    }

    /// Stage an owner's new record set (all checks passed) and write it
    /// through to the filter and the cache.
    pub(super) fn store_records(
        &mut self,
        hash: u64,
        owner: &[u8],
        records: Vec<Record>,
        now: u64,
        txn: &mut Txn,
    ) -> Result<(), RushError> {
        let key = owner_key(owner);
        let records = if records.is_empty() {
            txn.delete(key);
            self.stale += 1;
            RecordSet::default()
        } else {
            let value = encode_records(&records);
            if payload_len(&value) > MAX_OWNER_BYTES {
                return Err(too_large(format!(
                    "the owner's records would take {} bytes, over the limit of {MAX_OWNER_BYTES}",
                    payload_len(&value)
                )));
            }
            // Cache the stored value's own bytes (one buffer, its count
            // inline: `storage::inline`) rather than records that point
            // into request frames and older sets.
            let value = crate::storage::inline::copy(&value);
            let compact = decode_records(value.clone())?;
            txn.put(key, value);
            self.bloom_insert(hash);
            compact
        };
        txn.require_sync();
        self.cache
            .insert(hash, Item::Owner(owner), Cached::Records(records), now, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stored form is pinned: a change to the wire form of records must
    /// not silently change what is on disk.
    #[test]
    fn stored_record_sets_are_pinned() {
        let records = vec![Record::new("c1").attr("k", "v").valid(Some(1), None)];
        let raw = encode_records(&records);
        let expected: &[u8] = &[
            0x30, 0, 0, 0, 0, 0, 0, 0, 0, // kind CATALOG_RECORDS, no expiry
            1, // format
            0, 0, 0, 1, // one record
            0, 0, 0, 2, b'c', b'1', // id
            0, 0, 0, 1, 0, 0, 0, 1, b'k', 0, 0, 0, 1, b'v', // k = v
            1, 0, 0, 0, 0, 0, 0, 0, 1, // valid_from 1
            0, // valid_to absent
        ];
        assert_eq!(raw, expected);
        assert_eq!(
            decode_records(raw.clone().into()).unwrap().to_vec(),
            records
        );
        let mut wrong_format = raw.clone();
        wrong_format[HEADER] = 2;
        assert!(decode_records(wrong_format.into()).is_err());
        assert!(decode_records(raw[..raw.len() - 1].to_vec().into()).is_err());
        assert!(decode_records(value::encode(kind::STRING, 0, b"x").into()).is_err());
    }
}
