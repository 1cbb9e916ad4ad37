//! Property tests: every request and reply survives encode → decode, and no
//! byte string makes a decoder panic.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use rush_protocol::cmd::*;
use rush_protocol::frame::{self, Header};
use rush_protocol::{Opcode, Reply, Request, Wire};

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn key() -> impl Strategy<Value = Bytes> {
    // Keys of one slot so batches of them are valid.
    bytes(24).prop_map(|k| {
        let mut v = b"{t}".to_vec();
        v.extend_from_slice(&k);
        Bytes::from(v)
    })
}

fn cond() -> impl Strategy<Value = Cond> {
    prop_oneof![
        Just(Cond::Exists),
        Just(Cond::Missing),
        bytes(16).prop_map(Cond::Eq),
        bytes(16).prop_map(Cond::Ne),
        any::<i64>().prop_map(Cond::Lt),
        any::<i64>().prop_map(Cond::Le),
        any::<i64>().prop_map(Cond::Gt),
        any::<i64>().prop_map(Cond::Ge),
    ]
}

fn key_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        key().prop_map(|key| Get { key }.into()),
        (key(), bytes(64), any::<u64>(), 0u8..3).prop_map(|(key, value, ttl_ms, c)| Set {
            key,
            value,
            ttl_ms,
            cond: [SetCond::Always, SetCond::IfAbsent, SetCond::IfPresent][c as usize],
        }
        .into()),
        key().prop_map(|key| Del { key }.into()),
        key().prop_map(|key| Exists { key }.into()),
        (key(), any::<i64>()).prop_map(|(key, delta)| IncrBy { key, delta }.into()),
        (key(), any::<u64>()).prop_map(|(key, ttl_ms)| Expire { key, ttl_ms }.into()),
        key().prop_map(|key| Ttl { key }.into()),
        (
            key(),
            proptest::collection::vec((bytes(8), bytes(16)), 1..5)
        )
            .prop_map(|(key, fields)| HSet { key, fields }.into()),
        (key(), bytes(8)).prop_map(|(key, field)| HGet { key, field }.into()),
        (key(), proptest::collection::vec(bytes(8), 1..5)).prop_map(|(key, fields)| HDel {
            key,
            fields
        }
        .into()),
        (key(), bytes(8), any::<i64>()).prop_map(|(key, field, delta)| HIncrBy {
            key,
            field,
            delta
        }
        .into()),
        key().prop_map(|key| HGetAll { key }.into()),
        (key(), proptest::option::of(bytes(8)), cond()).prop_map(|(key, field, cond)| Check {
            key,
            field,
            cond
        }
        .into()),
    ]
}

fn any_request() -> impl Strategy<Value = Request> {
    prop_oneof![
        bytes(32).prop_map(|payload| Ping { payload }.into()),
        (
            any::<u8>(),
            proptest::option::of("[a-z]{0,12}"),
            "[a-z]{0,12}"
        )
            .prop_map(|(version, token, client)| Hello {
                version,
                token,
                client
            }
            .into()),
        Just(Info {}.into()),
        Just(ClusterSlots {}.into()),
        Just(Compact {}.into()),
        any::<u64>().prop_map(|ms| ClockAdvance { ms }.into()),
        key_op(),
        proptest::collection::vec(key_op(), 1..8).prop_map(|ops| Batch { ops }.into()),
        cluster_op(),
    ]
}

fn slot_range() -> impl Strategy<Value = SlotRange> {
    (0u16..16384, 0u16..300).prop_map(|(s, l)| SlotRange {
        start: s,
        end: (s + l).min(16383),
    })
}

fn cluster_map() -> impl Strategy<Value = ClusterSlotsReply> {
    (
        any::<u64>(),
        proptest::collection::vec(
            ("[a-z]{1,8}", proptest::collection::vec(slot_range(), 0..4)),
            0..4,
        ),
    )
        .prop_map(|(epoch, nodes)| ClusterSlotsReply {
            epoch,
            nodes: nodes
                .into_iter()
                .map(|(id, ranges)| ClusterNode {
                    addr: format!("{id}:7379"),
                    id,
                    ranges,
                })
                .collect(),
        })
}

fn cluster_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        cluster_map().prop_map(|map| ClusterSetMap { map }.into()),
        (proptest::collection::vec(slot_range(), 0..4), "[a-z]{1,8}")
            .prop_map(|(slots, to)| ClusterMigrate { slots, to }.into()),
        (
            any::<u64>(),
            0u16..16384,
            any::<u32>(),
            proptest::collection::vec((bytes(32), bytes(64), any::<bool>()), 0..6)
        )
            .prop_map(|(id, slot, seq, pairs)| MigrateImport {
                id,
                slot,
                seq,
                from: "a".into(),
                pairs: pairs
                    .into_iter()
                    .map(|(key, value, append)| ImportPair { key, value, append })
                    .collect(),
            }
            .into()),
        (
            any::<u64>(),
            0u16..16384,
            any::<u32>(),
            any::<u64>(),
            cluster_map()
        )
            .prop_map(|(id, slot, chunks, keys, map)| MigrateCommit {
                id,
                slot,
                chunks,
                keys,
                map
            }
            .into()),
        (any::<u64>(), 0u16..16384).prop_map(|(id, slot)| MigrateAbort { id, slot }.into()),
        (any::<u64>(), 0u16..16384).prop_map(|(id, slot)| MigrateStatus { id, slot }.into()),
    ]
}

fn any_reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        bytes(32).prop_map(|payload| Reply::Ping(Pong { payload })),
        proptest::option::of(bytes(32)).prop_map(Reply::Get),
        any::<bool>().prop_map(Reply::Set),
        any::<i64>().prop_map(Reply::IncrBy),
        prop_oneof![
            Just(TtlReply::Missing),
            Just(TtlReply::Persistent),
            (0u64..i64::MAX as u64).prop_map(TtlReply::Remaining)
        ]
        .prop_map(Reply::Ttl),
        proptest::collection::vec((bytes(8), bytes(16)), 0..5)
            .prop_map(|fields| Reply::HGetAll(HGetAllReply { fields })),
        proptest::collection::vec(("[a-z]{1,8}", "[ -~]{0,12}"), 0..5)
            .prop_map(|rows| Reply::Info(InfoReply { rows })),
        (
            any::<u64>(),
            proptest::collection::vec((0u16..16384, 0u16..100), 0..4)
        )
            .prop_map(|(epoch, rs)| {
                Reply::ClusterSlots(ClusterSlotsReply {
                    epoch,
                    nodes: vec![ClusterNode {
                        id: "n".into(),
                        addr: "127.0.0.1:1".into(),
                        ranges: rs
                            .into_iter()
                            .map(|(s, l)| SlotRange {
                                start: s,
                                end: (s + l).min(16383),
                            })
                            .collect(),
                    }],
                })
            }),
        proptest::collection::vec(any::<i64>().prop_map(Reply::IncrBy), 0..4)
            .prop_map(|results| Reply::Batch(BatchReply { results })),
        (
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec("[a-z:0-9]{1,12}", 0..3)
        )
            .prop_map(
                |(slots, keys, bytes, epoch, unsynced)| Reply::ClusterMigrate(
                    ClusterMigrateReply {
                        slots,
                        keys,
                        bytes,
                        epoch,
                        unsynced
                    }
                )
            ),
        prop_oneof![
            Just(MigrationState::Unknown),
            Just(MigrationState::Importing),
            Just(MigrationState::Committed)
        ]
        .prop_map(Reply::MigrateStatus),
    ]
}

proptest! {
    #[test]
    fn requests_round_trip(req in any_request(), id in any::<u64>()) {
        let mut buf = BytesMut::new();
        frame::encode(&mut buf, Header::request(req.opcode().as_u8(), id), |b| req.encode_body(b));
        let f = frame::parse(&mut buf, usize::MAX >> 1).unwrap().unwrap();
        prop_assert!(buf.is_empty());
        prop_assert_eq!(f.header.request_id, id);
        prop_assert_eq!(Request::decode(f.header.opcode, f.body).unwrap(), req);
    }

    #[test]
    fn replies_round_trip(reply in any_reply()) {
        let mut buf = BytesMut::new();
        reply.encode_body(&mut buf);
        prop_assert_eq!(Reply::decode(reply.opcode(), buf.freeze()).unwrap(), reply);
    }

    #[test]
    fn no_byte_string_panics_a_decoder(op in any::<u8>(), body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Request::decode(op, Bytes::from(body.clone()));
        if let Some(op) = Opcode::from_u8(op) {
            let _ = Reply::decode(op, Bytes::from(body.clone()));
        }
        let _ = rush_protocol::RushError::decode_body(Bytes::from(body));
    }

    #[test]
    fn truncated_bodies_are_errors_not_panics(req in any_request(), cut in 0usize..64) {
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf);
        let full = buf.freeze();
        if cut < full.len() {
            let short = full.slice(..full.len() - cut - 1);
            prop_assert!(Request::decode(req.opcode().as_u8(), short).is_err());
        }
    }
}
