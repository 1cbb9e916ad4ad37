//! The tables and the layout they promise: no two services' keys overlap,
//! every value kind decodes, and every byte stays the number on disk.

use super::*;
use crate::storage::value::{self, Stored};
use rush_protocol::cmd::links::code::{MAX_CODE_LEN, MIN_CODE_LEN};
use rush_protocol::SLOTS;

/// The service whose range holds `byte`.
fn service_of(byte: u8) -> &'static str {
    let owners: Vec<_> = SERVICES
        .iter()
        .filter(|(_, range)| range.contains(&byte))
        .map(|(name, _)| *name)
        .collect();
    assert_eq!(
        owners.len(),
        1,
        "byte {byte:#04x} is in the range of {owners:?}"
    );
    owners[0]
}

fn assert_unique(what: &str, bytes: impl IntoIterator<Item = u8>) {
    let mut seen = std::collections::BTreeSet::new();
    for b in bytes {
        assert!(seen.insert(b), "two {what} share the byte {b:#04x}");
    }
}

#[test]
fn service_ranges_do_not_overlap() {
    for (i, (a, ra)) in SERVICES.iter().enumerate() {
        for (b, rb) in &SERVICES[i + 1..] {
            assert!(
                ra.end() < rb.start() || rb.end() < ra.start(),
                "{a} and {b} share bytes"
            );
        }
    }
}

/// Every number is on disk: this pins them all. A failure here means
/// existing data directories would no longer read.
#[test]
fn the_tables_are_pinned() {
    assert_eq!(
        ks::ALL,
        &[
            ("KV", 0x01),
            ("SEQUENCE", 0x02),
            ("HASH_FIELD", 0x03),
            ("LINK", 0x10),
            ("LINK_REUSE", 0x11),
            ("LINK_RESERVED", 0x12),
            ("LINK_STATS", 0x13),
            ("LINK_CODE_KEY", 0x14),
            ("LIMIT_COUNTER", 0x20),
            ("LIMIT_ORDER", 0x21),
            ("LIMIT_BOOK", 0x22),
            ("CATALOG_RECORDS", 0x30),
            ("CATALOG_ALIAS", 0x31),
            ("ENVELOPE", 0x40),
            ("ENVELOPE_REFUND", 0x41),
            ("ENVELOPE_PENDING", 0x42),
            ("ENVELOPE_DAY", 0x43),
            ("ENVELOPE_IDEMPOTENCY", 0x44),
        ]
    );
    // Kind, byte, and the keyspace its values are stored in (the numbers
    // part from the keyspaces' at ENVELOPE_GRAB: see `kind`).
    assert_eq!(
        kind::ALL,
        &[
            ("STRING", 0x01, ks::KV),
            ("HASH", 0x02, ks::KV),
            ("SEQUENCE", 0x03, ks::SEQUENCE),
            ("HASH_HEAD", 0x04, ks::KV),
            ("HASH_FIELD", 0x05, ks::HASH_FIELD),
            ("LINK", 0x10, ks::LINK),
            ("LINK_REUSE", 0x11, ks::LINK_REUSE),
            ("LINK_RESERVED", 0x12, ks::LINK_RESERVED),
            ("LINK_STATS", 0x13, ks::LINK_STATS),
            ("LINK_CODE_KEY", 0x14, ks::LINK_CODE_KEY),
            ("LIMIT_COUNTER", 0x20, ks::LIMIT_COUNTER),
            ("LIMIT_ORDER", 0x21, ks::LIMIT_ORDER),
            ("LIMIT_BOOK", 0x22, ks::LIMIT_BOOK),
            ("CATALOG_RECORDS", 0x30, ks::CATALOG_RECORDS),
            ("CATALOG_ALIAS", 0x31, ks::CATALOG_ALIAS),
            ("ENVELOPE", 0x40, ks::ENVELOPE),
            ("ENVELOPE_GRAB", 0x41, ks::ENVELOPE),
            ("ENVELOPE_REFUND", 0x42, ks::ENVELOPE_REFUND),
            ("ENVELOPE_PENDING", 0x43, ks::ENVELOPE_PENDING),
            ("ENVELOPE_DAY", 0x44, ks::ENVELOPE_DAY),
            ("ENVELOPE_IDEMPOTENCY", 0x45, ks::ENVELOPE_IDEMPOTENCY),
        ]
    );
    assert_eq!(
        seq::ALL,
        &[
            ("LINK_CODE_5", 0x15),
            ("LINK_CODE_6", 0x16),
            ("LINK_CODE_7", 0x17),
            ("LINK_CODE_8", 0x18),
            ("ENVELOPE_ID", 0x40),
        ]
    );
    assert_eq!(
        (cf::DEFAULT, cf::META, cf::shard(3)),
        ("default", "meta", "shard-3".into())
    );
    assert_eq!(meta::cluster_import(7), b"cluster/import/7");
    assert_eq!(meta::cluster_imported(7), b"cluster/imported/7");
    assert_eq!(meta::envelope_refund_floor(2), b"envelope-refund-floor/2");
}

#[test]
fn every_table_entry_is_unique_and_in_its_services_range() {
    assert_unique("keyspaces", ks::ALL.iter().map(|k| k.1));
    assert_unique("value kinds", kind::ALL.iter().map(|k| k.1));
    assert_unique("sequence kinds", seq::ALL.iter().map(|k| k.1));
    for (name, byte) in ks::ALL.iter().chain(seq::ALL) {
        service_of(*byte);
        assert!(!name.is_empty());
    }
    for (name, byte, keyspace) in kind::ALL {
        assert!(
            ks::ALL.iter().any(|k| k.1 == *keyspace),
            "value kind {name} is stored in keyspace {keyspace:#04x}, which the table lacks"
        );
        assert_eq!(
            service_of(*byte),
            service_of(*keyspace),
            "value kind {name} belongs to another service than its keyspace"
        );
    }
    // Every keyspace holds values of some kind (the header is everywhere).
    for (name, keyspace) in ks::ALL {
        assert!(
            kind::ALL.iter().any(|k| k.2 == *keyspace),
            "keyspace {name} has no value kind"
        );
    }
    for len in MIN_CODE_LEN..=MAX_CODE_LEN {
        let s = seq::link_code(len);
        assert!(
            seq::ALL.iter().any(|k| k.1 == s),
            "no sequence for codes of {len}"
        );
        assert_eq!(service_of(s), "short links");
    }
    assert_eq!(service_of(seq::ENVELOPE_ID), "red envelopes");
}

#[test]
fn every_value_kind_decodes() {
    for (name, byte, _) in kind::ALL {
        let raw = value::encode(*byte, 1234, name.as_bytes());
        let stored = Stored::decode(&raw).unwrap();
        assert_eq!(
            (stored.kind, stored.expires_at, stored.payload),
            (*byte, 1234, name.as_bytes())
        );
        assert_eq!(kind::name(stored.kind), Some(*name));
        assert!(Stored::decode(&raw[..value::HEADER - 1]).is_err());
    }
    for byte in 0..=u8::MAX {
        if !kind::ALL.iter().any(|k| k.1 == byte) {
            assert_eq!(kind::name(byte), None);
        }
    }
}

/// One key from every key builder, labelled with its service.
fn sample_keys(slot: u16) -> Vec<(&'static str, Vec<u8>)> {
    let counters = limit_counters(slot, b"u", "p");
    vec![
        ("core", kv(slot, b"k").to_vec()),
        ("core", kv(slot, b"").to_vec()),
        ("core", sequence(slot, seq::ENVELOPE_ID)),
        ("short links", link(slot, b"abcde")),
        ("short links", link_reuse(slot, b"acct", b"https://e.com")),
        ("short links", link_reserved(slot, 5, 42)),
        ("short links", link_stats(slot, b"abcde")),
        ("short links", link_code_key(slot)),
        ("purchase limits", counters.clone()),
        ("purchase limits", limit_counter(&counters, "r", "i")),
        ("purchase limits", limit_order(slot, b"u", "p", "o")),
        ("purchase limits", limit_book(slot, b"u", b"p")),
        ("catalog", catalog_records(slot, b"owner")),
        ("catalog", catalog_alias(slot, b"name", b"alias")),
        ("red envelopes", envelope::record(slot, 5, 9)),
        ("red envelopes", envelope::grab(slot, 5, 9, b"user")),
        ("red envelopes", envelope::refund(slot, 1, 9)),
        ("red envelopes", envelope::pending(slot, 1, 9)),
        ("red envelopes", envelope::day_marker(slot, 20_000)),
        ("red envelopes", envelope::idempotency(slot, b"s", b"k")),
    ]
}

/// The range of keys a service may use in `slot`.
fn service_range(slot: u16, service: &str) -> (Vec<u8>, Vec<u8>) {
    let (_, bytes) = SERVICES.iter().find(|(n, _)| *n == service).unwrap();
    (
        KeyBuf::new(slot, *bytes.start()).build(),
        keyspace_range(slot, *bytes.end()).1,
    )
}

#[test]
fn no_two_services_keys_overlap() {
    for slot in [0, 1, 0x00ff, 0x0100, 7629, SLOTS - 1] {
        let keys = sample_keys(slot);
        for (service, key) in &keys {
            let (s, keyspace, _) = split(key).unwrap();
            assert_eq!(s, slot);
            assert!(ks::ALL.iter().any(|k| k.1 == keyspace));
            assert_eq!(service_of(keyspace), *service, "key {key:02x?}");
            let (from, to) = service_range(slot, service);
            assert!(
                from <= *key && *key < to,
                "{service} key {key:02x?} outside its range"
            );
        }
        for (a, ka) in &keys {
            for (b, kb) in &keys {
                if a != b {
                    assert!(
                        !kb.starts_with(ka) && !ka.starts_with(kb),
                        "a {a} key is a prefix of a {b} key: {ka:02x?} {kb:02x?}"
                    );
                }
            }
        }
        // No keyspace's prefix is a prefix of another's.
        for (a, x) in ks::ALL {
            for (b, y) in ks::ALL {
                if a != b {
                    assert!(!KeyBuf::new(slot, *y)
                        .build()
                        .starts_with(&KeyBuf::new(slot, *x).build()));
                }
            }
        }
        // The ranges services scan stay inside their own service's range.
        let scanned = [
            ("catalog", catalog_range(slot)),
            ("purchase limits", limits_range(slot)),
            ("red envelopes", envelope::everything(slot)),
            (
                "red envelopes",
                envelope::envelope_range(slot, 31, u64::MAX),
            ),
            ("short links", link_length_range(slot, 8)),
        ];
        for (service, (from, to)) in scanned {
            let (lo, hi) = service_range(slot, service);
            assert!(lo <= from && to <= hi, "a {service} scan leaves its range");
        }
    }
}

#[test]
fn meta_names_are_never_prefixes_of_each_other() {
    // A prefix scan of one family (`meta_scan`) never returns another's.
    for a in meta::ALL {
        for b in meta::ALL {
            if a != b {
                assert!(!b.starts_with(a), "{:?} is a prefix of {:?}", a, b);
            }
        }
    }
}

#[test]
fn column_family_names_parse_back() {
    assert_eq!(cf::parse_shard(&cf::shard(0)), Some(0));
    assert_eq!(cf::parse_shard(&cf::shard(63)), Some(63));
    assert_eq!(cf::parse_shard(cf::META), None);
    assert_eq!(cf::parse_shard(cf::DEFAULT), None);
    assert_eq!(cf::parse_shard("shard-x"), None);
}

#[test]
fn slot_prefix_round_trips_and_orders() {
    let a = kv(5, b"zzz").to_vec();
    let b = kv(6, b"aaa").to_vec();
    assert!(a < b, "slot order comes before key order");
    assert_eq!(slot_of(&a), Some(5));
    assert_eq!(split(&a), Some((5, ks::KV, &b"zzz"[..])));
    assert_eq!(split(&a[..2]), None);
    assert_eq!(slot_of(&a[..1]), None);
    let (start, end) = slot_range(5);
    assert!(start <= a && a < end && b >= end);
    let (start, end) = slot_range(SLOTS - 1);
    let last = kv(SLOTS - 1, &[0xff; 8]).to_vec();
    assert!(start <= last && last < end);
    assert_eq!(slot_of_bound(&a), 5);
    assert_eq!(slot_of_bound(&[1]), 256);
    assert_eq!(slot_of_bound(&[]), 0);
}

#[test]
fn parts_do_not_run_together() {
    let x = KeyBuf::new(1, 9).part(b"ab").part(b"c").build();
    let y = KeyBuf::new(1, 9).part(b"a").part(b"bc").build();
    assert_ne!(x, y);
}

#[test]
fn big_endian_integers_sort_numerically() {
    let k = |n| KeyBuf::new(1, 2).u64(n).build();
    assert!(k(255) < k(256) && k(256) < k(1 << 40));
}

#[test]
fn hash_fields_of_one_version_are_one_range_that_parses_back() {
    let k = hash_field(9, b"user:1", 7, b"name");
    assert_eq!(
        parse_hash_field(&k),
        Some((9, &b"user:1"[..], 7, &b"name"[..]))
    );
    // An empty field name is a field too.
    let empty = hash_field(9, b"user:1", 7, b"");
    assert_eq!(
        parse_hash_field(&empty),
        Some((9, &b"user:1"[..], 7, &b""[..]))
    );
    let (start, end) = hash_fields(9, b"user:1", 7);
    assert!(start <= empty && empty < k && k < end);
    // Another version, another key (even one the first is a prefix of) and
    // another keyspace are outside it.
    for other in [
        hash_field(9, b"user:1", 8, b"name"),
        hash_field(9, b"user:1", 6, &[0xff; 4]),
        hash_field(9, b"user:10", 7, b"name"),
        hash_field(9, b"user:", 7, b"1name"),
        kv(9, b"user:1").to_vec(),
    ] {
        assert!(other < start || other >= end, "{other:?}");
    }
    assert_eq!(parse_hash_field(&kv(9, b"user:1")), None);
    assert_eq!(parse_hash_field(&k[..k.len() - 5]), None);
}

#[test]
fn keys_written_into_a_buffer_are_the_built_ones() {
    let mut out = b"left over".to_vec();
    for (slot, key) in [(0u16, &b""[..]), (16383, b"user:1"), (42, &[0xff; 40][..])] {
        kv_into(&mut out, slot, key);
        assert_eq!(out[..], kv(slot, key)[..]);
        link_into(&mut out, slot, key);
        assert_eq!(out, link(slot, key));
        assert!(limit_book_into(&mut out, slot, key, b"policy"));
        assert_eq!(out, limit_book(slot, key, b"policy"));
        assert!(limit_order_into(&mut out, slot, key, b"policy", b"order-7"));
        assert_eq!(out, limit_order(slot, key, "policy", "order-7"));
    }
    assert!(!limit_book_into(&mut out, 1, &[0; 70_000], b"p"));
    assert!(!limit_order_into(&mut out, 1, b"u", &[0; 70_000], b"o"));
    // An order's record: the user and the policy as parts, then the id.
    let mut want = vec![0, 9, ks::LIMIT_ORDER, 0, 2];
    want.extend_from_slice(b"u1\0\x01po-1");
    assert_eq!(limit_order(9, b"u1", "p", "o-1"), want);
}
