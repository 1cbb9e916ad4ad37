//! PROTOCOL.md's golden vectors must be exactly what this crate encodes, and
//! must decode back to the same values: the document can't drift from the code.
//!
//! Regenerate the hex after a deliberate change with
//! `cargo test -p rush-protocol --test golden -- --ignored --nocapture print`.

use bytes::{Bytes, BytesMut};
use rush_protocol::cmd::*;
use rush_protocol::frame::{self, Header};
use rush_protocol::{Command, ErrorCode, ErrorDetail, Reply, Request, RushError};

fn request<C: Command>(id: u64, cmd: C) -> Vec<u8> {
    let mut b = BytesMut::new();
    frame::encode(&mut b, Header::request(C::OPCODE.as_u8(), id), |b| {
        cmd.encode(b)
    });
    // Decoding the frame gives back the same request.
    let f = frame::parse(&mut b.clone(), 1 << 20).unwrap().unwrap();
    assert_eq!(
        Request::decode(f.header.opcode, f.body).unwrap(),
        cmd.clone().into()
    );
    b.to_vec()
}

fn ok_reply<C: Command>(id: u64, reply: Reply) -> Vec<u8> {
    let mut b = BytesMut::new();
    frame::encode_ok(&mut b, C::OPCODE.as_u8(), id, |b| reply.encode_body(b));
    let f = frame::parse(&mut b.clone(), 1 << 20).unwrap().unwrap();
    assert!(f.header.is_response());
    assert_eq!(Reply::decode(C::OPCODE, f.body.slice(1..)).unwrap(), reply);
    b.to_vec()
}

fn err_reply(opcode: u8, id: u64, e: RushError) -> Vec<u8> {
    let mut b = BytesMut::new();
    frame::encode_error(&mut b, opcode, id, &e);
    let f = frame::parse(&mut b.clone(), 1 << 20).unwrap().unwrap();
    assert_eq!(frame::decode_response::<()>(f.body).unwrap(), Err(e));
    b.to_vec()
}

/// Every golden vector: (name in PROTOCOL.md, bytes).
fn vectors() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "ping-request",
            request(
                1,
                Ping {
                    payload: Bytes::from_static(b"hi"),
                },
            ),
        ),
        (
            "ping-reply",
            ok_reply::<Ping>(
                1,
                Reply::Ping(Pong {
                    payload: Bytes::from_static(b"hi"),
                }),
            ),
        ),
        (
            "hello-request",
            request(
                2,
                Hello {
                    version: 1,
                    token: Some("s3cret".into()),
                    client: "app".into(),
                },
            ),
        ),
        ("shards-request", request(4, Shards {})),
        (
            "shards-reply",
            ok_reply::<Shards>(
                4,
                Reply::Shards(ShardsReply {
                    ranges: vec![
                        SlotRange {
                            start: 0,
                            end: 8191,
                        },
                        SlotRange {
                            start: 8192,
                            end: 16383,
                        },
                    ],
                }),
            ),
        ),
        ("shard-bind-request", request(5, ShardBind { shard: 1 })),
        (
            "shard-bind-reply",
            ok_reply::<ShardBind>(
                5,
                Reply::ShardBind(ShardBindReply {
                    shard: 1,
                    shards: 2,
                    first_slot: 8192,
                    last_slot: 16383,
                }),
            ),
        ),
        (
            "set-request",
            request(
                3,
                Set {
                    key: Bytes::from_static(b"k"),
                    value: Bytes::from_static(b"v"),
                    ttl_ms: 60_000,
                    cond: SetCond::IfAbsent,
                },
            ),
        ),
        ("set-reply", ok_reply::<Set>(3, Reply::Set(true))),
        (
            "get-request",
            request(
                4,
                Get {
                    key: Bytes::from_static(b"k"),
                },
            ),
        ),
        (
            "get-reply",
            ok_reply::<Get>(4, Reply::Get(Some(Bytes::from_static(b"v")))),
        ),
        ("get-reply-missing", ok_reply::<Get>(4, Reply::Get(None))),
        (
            "hincrby-request",
            request(
                5,
                HIncrBy {
                    key: Bytes::from_static(b"{u1}d"),
                    field: Bytes::from_static(b"sku"),
                    delta: -1,
                },
            ),
        ),
        (
            "batch-request",
            request(
                6,
                Batch {
                    ops: vec![
                        Check {
                            key: Bytes::from_static(b"{u}n"),
                            field: None,
                            cond: Cond::Lt(5),
                        }
                        .into(),
                        IncrBy {
                            key: Bytes::from_static(b"{u}n"),
                            delta: 1,
                        }
                        .into(),
                    ],
                },
            ),
        ),
        (
            "batch-reply",
            ok_reply::<Batch>(
                6,
                Reply::Batch(BatchReply {
                    results: vec![Reply::Check(true), Reply::IncrBy(1)],
                }),
            ),
        ),
        (
            "error-condition-failed",
            err_reply(
                0x1f,
                6,
                RushError::new(ErrorCode::ConditionFailed, "no")
                    .with_detail(ErrorDetail::BatchIndex { index: 0 }),
            ),
        ),
        (
            "error-moved",
            err_reply(0x10, 4, RushError::moved(7, "10.0.0.2:7379")),
        ),
        (
            "limit-acquire-request",
            request(
                7,
                LimitAcquire {
                    policy: "flash".into(),
                    user: Bytes::from_static(b"u1"),
                    order_id: "o1".into(),
                    items: vec![OrderItem::new("sku1", 1)],
                },
            ),
        ),
        (
            "limit-acquire-reply",
            ok_reply::<LimitAcquire>(
                7,
                Reply::LimitAcquire(AcquireReply {
                    replayed: false,
                    allowances: vec![
                        Allowance {
                            rule: "item".into(),
                            item: "sku1".into(),
                            count: 1,
                            limit: 1,
                            resets_at_ms: 1_772_380_800_000,
                        },
                        Allowance {
                            rule: "total".into(),
                            item: String::new(),
                            count: 1,
                            limit: 5,
                            resets_at_ms: 1_772_380_800_000,
                        },
                    ],
                }),
            ),
        ),
        (
            "error-limited",
            err_reply(
                0x40,
                7,
                RushError::new(ErrorCode::Limited, "limited").with_detail(ErrorDetail::Limit {
                    rule: "total".into(),
                    item: String::new(),
                    current: 5,
                    limit: 5,
                    requested: 1,
                }),
            ),
        ),
        (
            "limit-policy-set-request",
            request(
                8,
                LimitPolicySet {
                    policy: PolicyDef {
                        name: "flash".into(),
                        relaxed: false,
                        rules: vec![Rule {
                            name: "total".into(),
                            scope: Scope::Total,
                            max: 5,
                            window: Window::Day {
                                tz: "Asia/Shanghai".into(),
                            },
                        }],
                    },
                },
            ),
        ),
        (
            "catalog-put-request",
            request(
                7,
                CatalogPut {
                    owner: Bytes::from_static(b"M1"),
                    record: Record::new("c1")
                        .attr("plan", "gold")
                        .valid(None, Some(1_800_000_000_000)),
                },
            ),
        ),
        (
            "catalog-put-reply",
            ok_reply::<CatalogPut>(7, Reply::CatalogPut(true)),
        ),
        (
            "catalog-query-request",
            request(
                8,
                CatalogQuery {
                    owner: Bytes::from_static(b"M1"),
                    filter: CatalogFilter::default()
                        .attr("plan", "gold")
                        .at(1_790_000_000_000),
                },
            ),
        ),
        (
            "catalog-query-reply",
            ok_reply::<CatalogQuery>(
                8,
                Reply::CatalogQuery(CatalogQueryReply {
                    records: vec![Record::new("c1")
                        .attr("plan", "gold")
                        .valid(None, Some(1_800_000_000_000))],
                }),
            ),
        ),
        (
            "catalog-resolve-request",
            request(
                9,
                CatalogResolve {
                    kind: Bytes::from_static(b"name"),
                    alias: Bytes::from_static(b"Acme"),
                },
            ),
        ),
        (
            "catalog-resolve-reply",
            ok_reply::<CatalogResolve>(9, Reply::CatalogResolve(Some(Bytes::from_static(b"M1")))),
        ),
        (
            "error-shed",
            err_reply(0x54, 8, RushError::unavailable("shed")),
        ),
        // Envelope ids below are sequence 3, day 5, slot 749, "alice"'s slot.
        (
            "envelope-create-request",
            request(
                7,
                EnvelopeCreate {
                    sender: Bytes::from_static(b"alice"),
                    total_cents: 10_000,
                    count: 10,
                    mode: EnvelopeMode::Random,
                    expires_in_ms: 86_400_000,
                    idempotency_key: Some(Bytes::from_static(b"k1")),
                },
            ),
        ),
        (
            "envelope-create-reply",
            ok_reply::<EnvelopeCreate>(
                7,
                Reply::EnvelopeCreate(EnvelopeCreateReply {
                    id: envelope_id(3, 5, 749).unwrap(),
                    expires_at_ms: 1_767_312_000_000,
                }),
            ),
        ),
        (
            "envelope-grab-request",
            request(
                8,
                EnvelopeGrab {
                    id: envelope_id(3, 5, 749).unwrap(),
                    user: Bytes::from_static(b"bob"),
                },
            ),
        ),
        (
            "envelope-grab-reply",
            ok_reply::<EnvelopeGrab>(
                8,
                Reply::EnvelopeGrab(EnvelopeGrabReply {
                    amount_cents: 1234,
                    repeated: false,
                }),
            ),
        ),
        (
            "error-empty",
            err_reply(0x61, 8, RushError::new(ErrorCode::Empty, "empty")),
        ),
        (
            "envelope-refunds-request",
            request(
                9,
                EnvelopeRefunds {
                    after: RefundCursor::START,
                    limit: 100,
                },
            ),
        ),
        (
            "envelope-refunds-reply",
            ok_reply::<EnvelopeRefunds>(
                9,
                Reply::EnvelopeRefunds(EnvelopeRefundsReply {
                    refunds: vec![Refund {
                        cursor: RefundCursor {
                            stamp: 1_767_312_000_000,
                            id: envelope_id(3, 5, 749).unwrap(),
                        },
                        sender: Bytes::from_static(b"alice"),
                        amount_cents: 766,
                        refunded_at_ms: 1_767_312_000_000,
                    }],
                    next: RefundCursor {
                        stamp: 1_767_312_000_000,
                        id: u64::MAX,
                    },
                    more: false,
                }),
            ),
        ),
        (
            "link-shorten-request",
            request(
                7,
                LinkShorten {
                    url: "https://e.com/a".into(),
                    account: Bytes::from_static(b"acme"),
                    length: 7,
                    ttl_ms: Some(86_400_000),
                    reuse: true,
                    ..LinkShorten::default()
                },
            ),
        ),
        (
            "link-shorten-reply",
            ok_reply::<LinkShorten>(
                7,
                Reply::LinkShorten(ShortenReply {
                    code: "3xK9aZq".into(),
                    short_url: "https://s.example/3xK9aZq".into(),
                    reused: false,
                    expires_at: 1_767_225_600_000,
                }),
            ),
        ),
        (
            "link-shorten-batch-request",
            request(
                8,
                LinkShortenBatch {
                    slot: 4321,
                    account: Bytes::new(),
                    items: vec![BatchShortenItem {
                        url: "https://e.com/1".into(),
                        length: 5,
                        ..BatchShortenItem::default()
                    }],
                },
            ),
        ),
        (
            "link-resolve-request",
            request(9, LinkResolve::new("3xK9aZq")),
        ),
        (
            "link-resolve-reply",
            ok_reply::<LinkResolve>(
                9,
                Reply::LinkResolve(ResolveReply {
                    target: "https://e.com/a".into(),
                    ios: Some("app://a".into()),
                    android: None,
                    permanent: false,
                    expires_at: 1_767_225_600_000,
                }),
            ),
        ),
        (
            "error-link-not-found",
            err_reply(0x32, 9, RushError::not_found("no link")),
        ),
        (
            "cluster-setmap-request",
            request(
                10,
                ClusterSetMap {
                    map: ClusterSlotsReply {
                        epoch: 2,
                        nodes: vec![
                            ClusterNode {
                                id: "a".into(),
                                addr: "h:1".into(),
                                ranges: vec![SlotRange {
                                    start: 0,
                                    end: 8191,
                                }],
                            },
                            ClusterNode {
                                id: "b".into(),
                                addr: "h:2".into(),
                                ranges: vec![SlotRange {
                                    start: 8192,
                                    end: 16383,
                                }],
                            },
                        ],
                    },
                },
            ),
        ),
        (
            "cluster-setmap-reply",
            ok_reply::<ClusterSetMap>(10, Reply::ClusterSetMap(2)),
        ),
        (
            "cluster-migrate-request",
            request(
                11,
                ClusterMigrate {
                    slots: vec![SlotRange {
                        start: 100,
                        end: 199,
                    }],
                    to: "b".into(),
                },
            ),
        ),
        (
            "cluster-migrate-reply",
            ok_reply::<ClusterMigrate>(
                11,
                Reply::ClusterMigrate(ClusterMigrateReply {
                    slots: 100,
                    keys: 5000,
                    bytes: 700_000,
                    epoch: 102,
                    unsynced: vec![],
                }),
            ),
        ),
        (
            "migrate-import-request",
            request(
                12,
                MigrateImport {
                    id: 0x0102_0304_0506_0708,
                    slot: 100,
                    seq: 0,
                    from: "a".into(),
                    pairs: vec![ImportPair {
                        key: Bytes::from_static(&[0x00, 0x64, 0x01, b'k']),
                        value: Bytes::from_static(&[1, 0, 0, 0, 0, 0, 0, 0, 0, b'v']),
                        append: false,
                    }],
                },
            ),
        ),
        (
            "error-tryagain",
            err_reply(0x10, 14, RushError::try_again(100)),
        ),
    ]
}

/// `golden NAME` fenced blocks of PROTOCOL.md: name → bytes.
fn document_vectors() -> Vec<(String, Vec<u8>)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/PROTOCOL.md")).unwrap();
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("```golden ") else {
            continue;
        };
        let mut hex = String::new();
        for l in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            hex.extend(
                l.split('#')
                    .next()
                    .unwrap()
                    .chars()
                    .filter(|c| !c.is_whitespace()),
            );
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| {
                u8::from_str_radix(&hex[i..i + 2], 16)
                    .unwrap_or_else(|_| panic!("bad hex in {name}"))
            })
            .collect();
        out.push((name.trim().to_string(), bytes));
    }
    out
}

#[test]
fn document_matches_code() {
    let doc = document_vectors();
    for (name, bytes) in vectors() {
        let found = doc
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("PROTOCOL.md has no golden vector {name:?}"));
        assert_eq!(
            found.1, bytes,
            "golden vector {name:?} differs from the encoder"
        );
    }
    let known: Vec<_> = vectors().into_iter().map(|(n, _)| n).collect();
    for (n, _) in &doc {
        assert!(
            known.contains(&n.as_str()),
            "PROTOCOL.md vector {n:?} is not checked by this test"
        );
    }
}

/// Prints the vectors in PROTOCOL.md's format.
#[test]
#[ignore]
fn print() {
    for (name, bytes) in vectors() {
        println!("```golden {name}");
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        for chunk in hex.chunks(16) {
            println!("{}", chunk.join(" "));
        }
        println!("```\n");
    }
}
