//! Catalog keys: an owner's record set in the owner's slot, an alias in the
//! alias's slot; both keyspaces adjacent, so one scan per slot reads both.

use super::{ks, split, take_part, KeyBuf};

/// The record set of a catalog owner (in the owner's slot).
pub fn catalog_records(slot: u16, owner: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::CATALOG_RECORDS).tail(owner).build()
}

/// A catalog alias (in the alias's slot).
pub fn catalog_alias(slot: u16, kind: &[u8], alias: &[u8]) -> Vec<u8> {
    KeyBuf::new(slot, ks::CATALOG_ALIAS)
        .part(kind)
        .tail(alias)
        .build()
}

/// What a catalog storage key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CatalogKey<'a> {
    Records { owner: &'a [u8] },
    Alias { kind: &'a [u8], alias: &'a [u8] },
}

/// Decode a catalog key (the inverse of [`catalog_records`] and
/// [`catalog_alias`]); `None` for any other key.
pub fn parse_catalog(raw: &[u8]) -> Option<CatalogKey<'_>> {
    let (_, keyspace, rest) = split(raw)?;
    match keyspace {
        ks::CATALOG_RECORDS => Some(CatalogKey::Records { owner: rest }),
        ks::CATALOG_ALIAS => {
            let (kind, alias) = take_part(rest)?;
            Some(CatalogKey::Alias { kind, alias })
        }
        _ => None,
    }
}

/// `[start, end)` covering a slot's catalog records and aliases.
pub fn catalog_range(slot: u16) -> (Vec<u8>, Vec<u8>) {
    let start = KeyBuf::new(slot, ks::CATALOG_RECORDS).build();
    let end = KeyBuf::new(slot, ks::CATALOG_ALIAS + 1).build();
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::keys::kv;

    #[test]
    fn catalog_keys_round_trip_and_share_one_range() {
        let r = catalog_records(9, b"m1");
        let a = catalog_alias(9, b"name", b"Acme Ltd");
        assert_eq!(
            parse_catalog(&r),
            Some(CatalogKey::Records { owner: b"m1" })
        );
        assert_eq!(
            parse_catalog(&a),
            Some(CatalogKey::Alias {
                kind: b"name",
                alias: b"Acme Ltd"
            })
        );
        assert_eq!(parse_catalog(&kv(9, b"m1")), None);
        let (start, end) = catalog_range(9);
        assert!(start <= r && r < end && start <= a && a < end);
        assert!(catalog_records(8, &[0xff; 4]) < start && catalog_records(10, b"") >= end);
        assert!(parse_catalog(&[0, 9, ks::CATALOG_ALIAS, 0]).is_none());
        assert!(parse_catalog(&[0, 9]).is_none());
    }
}
