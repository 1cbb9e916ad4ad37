//! PROTOCOL.md's golden vectors must be exactly what this crate encodes, and
//! must decode back to the same values: the document can't drift from the
//! code. The vectors also tell one story (a link made, updated, resolved,
//! read and deleted; an envelope created, grabbed and refunded; a policy set
//! and an order counted under it; a map installed and slots moved), and
//! `vectors_agree_with_each_other` checks what the document's rules say
//! about their values — an id's slot and day, a code's slot, a MOVED slot,
//! the rules a reply names — with the crate's own functions.
//!
//! Regenerate the hex after a deliberate change with
//! `cargo test --workspace --test golden -- --ignored --nocapture print`.

use bytes::{Bytes, BytesMut};
use rush_protocol::cmd::links::code::generated_parts;
use rush_protocol::cmd::*;
use rush_protocol::frame::{self, FrameError, Header, VERSION};
use rush_protocol::{
    key_slot, link_slot, parts_slot, Command, ErrorCode, ErrorDetail, LimitDenial, Reply, Request,
    RushError, Target,
};

fn request<C: Command>(id: u64, cmd: C) -> Vec<u8> {
    let mut b = BytesMut::new();
    frame::encode(&mut b, Header::request(C::OPCODE.as_u8(), id), |b| {
        cmd.encode(b)
    });
    // Decoding the frame gives back the same request.
    let f = frame::parse(&mut b.clone(), 1 << 20).unwrap().unwrap();
    assert_eq!(f.header.request_flags_error(), None);
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

const DAY_MS: u64 = 86_400_000;

// ── The values several vectors share ────────────────────────────────────

/// The node the connection-level vectors talk to: node "a" of the map.
fn hello_reply() -> HelloReply {
    HelloReply {
        protocol: VERSION,
        server: "0.1.0".into(),
        node_id: "a".into(),
        shards: 2,
        // "s3cret" is a client token.
        admin: false,
    }
}

fn shards_reply() -> ShardsReply {
    ShardsReply {
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
    }
}

fn shard_bind_reply() -> ShardBindReply {
    ShardBindReply {
        shard: 1,
        shards: 2,
        first_slot: 8192,
        last_slot: 16383,
    }
}

/// Two nodes at epoch 2: "a" (h:1) has 0–8191, "b" (h:2) 8192–16383.
fn map() -> ClusterSlotsReply {
    ClusterSlotsReply {
        epoch: 2,
        nodes: vec![
            ClusterNode {
                id: "a".into(),
                addr: "h:1".into(),
                ranges: vec![SlotRange {
                    start: 0,
                    end: 8191,
                }],
                resp_addr: None,
                replica_of: None,
            },
            ClusterNode {
                id: "b".into(),
                addr: "h:2".into(),
                ranges: vec![SlotRange {
                    start: 8192,
                    end: 16383,
                }],
                resp_addr: None,
                replica_of: None,
            },
        ],
    }
}

/// [`map`] where "a" says its RESP address ("h:6") and "b" doesn't.
fn map_with_resp() -> ClusterSlotsReply {
    let mut m = map();
    m.nodes[0].resp_addr = Some("h:6".into());
    m
}

/// "c" at "h:3", a replica of "a".
fn map_with_replica() -> ClusterSlotsReply {
    let mut m = map();
    m.nodes.push(ClusterNode {
        id: "c".into(),
        addr: "h:3".into(),
        ranges: Vec::new(),
        resp_addr: None,
        replica_of: Some("a".into()),
    });
    m
}

fn info_reply() -> InfoReply {
    let rows = [
        ("version", "0.1.0"),
        ("protocol", "1"),
        ("node_id", "a"),
        ("uptime_seconds", "3600"),
        ("shards", "2"),
        ("connections", "3"),
        ("data_dir", "/var/lib/rush"),
        ("keys_estimate", "5000"),
        ("sst_bytes", "1048576"),
        ("memtable_bytes", "65536"),
        // Storage settled: no background work owed.
        ("compactions_running", "0"),
        ("flushes_running", "0"),
        ("flushes_pending", "0"),
        ("compaction_pending_bytes", "0"),
        ("write_backs_running", "0"),
        ("queued_requests", "0"),
        ("clock_ms", "1767225600000"),
        ("cluster_epoch", "2"),
        ("cluster_nodes", "2"),
        ("cluster_slots_owned", "8192"),
        ("advertise", "h:1"),
        // The map gives "a" no RESP address: the default, port + 2.
        ("resp_advertise", "h:3"),
        // A primary no replica has fetched from.
        ("role", "primary"),
        ("replication_listen", "h:4"),
        ("replication_run", "5c3b0a7f61e2d401"),
        ("replication_heads", "0,0"),
        ("replication_backlog_bytes", "0"),
        ("replication_replica_lag_records", ""),
        ("replication_replica_last_fetch_seconds", "never"),
        ("replication_replica_lag_bytes", ""),
        ("rss_bytes", "536870912"),
        ("memory_budget_bytes", "1073741824"),
        ("memory_block_cache_bytes", "104857600"),
        ("memory_block_cache_limit_bytes", "322122547"),
        ("memory_memtables_bytes", "65536"),
        ("memory_memtables_limit_bytes", "107374182"),
        ("memory_row_cache_bytes", "52428800"),
        ("memory_row_cache_limit_bytes", "161061273"),
        ("memory_write_back_bytes", "0"),
        ("memory_write_back_limit_bytes", "107374182"),
        ("memory_catalog_cache_bytes", "1048576"),
        ("memory_catalog_cache_limit_bytes", "161061273"),
        ("memory_catalog_filters_bytes", "1198080"),
        ("memory_hot_state_bytes", "0"),
        ("memory_key_filters_bytes", "2396160"),
        ("memory_replication_backlog_bytes", "0"),
        ("memory_replication_backlog_limit_bytes", "67108864"),
    ];
    InfoReply {
        rows: rows
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
    }
}

fn get_k() -> Get {
    Get {
        key: Bytes::from_static(b"k"),
    }
}

/// MOVED for the GET of "k" (slot 7629).
fn moved() -> RushError {
    RushError::moved(7629, "10.0.0.2:7379")
}

/// A two-rule policy: each item at most once a day, five a day in total,
/// days in Shanghai.
fn flash() -> PolicyDef {
    let day = || Window::Day {
        tz: "Asia/Shanghai".into(),
    };
    PolicyDef {
        name: "flash".into(),
        relaxed: false,
        rules: vec![
            Rule {
                name: "item".into(),
                scope: Scope::Item,
                max: 1,
                window: day(),
            },
            Rule {
                name: "total".into(),
                scope: Scope::Total,
                max: 5,
                window: day(),
            },
        ],
    }
}

fn acquire() -> LimitAcquire {
    LimitAcquire {
        policy: "flash".into(),
        user: Bytes::from_static(b"u1"),
        order_id: "o1".into(),
        items: vec![OrderItem::new("sku1", 1)],
    }
}

/// 2026-03-02 00:00 in Shanghai.
const SHANGHAI_MIDNIGHT: u64 = 1_772_380_800_000;

fn acquire_reply() -> AcquireReply {
    AcquireReply {
        replayed: false,
        released: false,
        allowances: vec![
            Allowance {
                rule: "item".into(),
                item: "sku1".into(),
                count: 1,
                limit: 1,
                resets_at_ms: SHANGHAI_MIDNIGHT,
            },
            Allowance {
                rule: "total".into(),
                item: String::new(),
                count: 1,
                limit: 5,
                resets_at_ms: SHANGHAI_MIDNIGHT,
            },
        ],
    }
}

fn limited() -> RushError {
    RushError::new(ErrorCode::Limited, "limited").with_detail(ErrorDetail::Limit(LimitDenial {
        rule: "total".into(),
        item: String::new(),
        current: 5,
        limit: 5,
        requested: 1,
    }))
}

fn catalog_record() -> Record {
    Record::new("c1")
        .attr("plan", "gold")
        .valid(None, Some(1_800_000_000_000))
}

fn catalog_query() -> CatalogQuery {
    CatalogQuery {
        owner: Bytes::from_static(b"M1"),
        filter: CatalogFilter::default()
            .attr("plan", "gold")
            .at(1_790_000_000_000),
    }
}

/// Created 2026-01-01 00:00 UTC, for a day.
fn envelope_create() -> EnvelopeCreate {
    EnvelopeCreate {
        sender: Bytes::from_static(b"alice"),
        total_cents: 10_000,
        count: 10,
        mode: EnvelopeMode::Random,
        expires_in_ms: DAY_MS,
        idempotency_key: Some(Bytes::from_static(b"k1")),
    }
}

/// Sequence 3, day 1, slot 749 ("alice"'s).
const ENVELOPE_ID: u64 = 1_589_997;

fn envelope_create_reply() -> EnvelopeCreateReply {
    EnvelopeCreateReply {
        id: ENVELOPE_ID,
        expires_at_ms: 1_767_312_000_000,
    }
}

fn envelope_grab() -> EnvelopeGrab {
    EnvelopeGrab {
        id: ENVELOPE_ID,
        user: Bytes::from_static(b"bob"),
    }
}

fn envelope_grab_reply() -> EnvelopeGrabReply {
    EnvelopeGrabReply {
        amount_cents: 1234,
        repeated: false,
    }
}

/// What was left at expiry, refunded on the first timer run after it.
fn envelope_refunds_reply() -> EnvelopeRefundsReply {
    EnvelopeRefundsReply {
        refunds: vec![Refund {
            cursor: RefundCursor {
                stamp: 1_767_312_000_000,
                id: ENVELOPE_ID,
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
    }
}

/// 2025-12-31 00:00 UTC: the link is made, with a TTL of a day.
const LINK_MADE: u64 = 1_767_139_200_000;
/// A generated code of 7 characters in the slot of (acme, https://e.com/a).
const CODE: &str = "ZbssL9d";

fn shorten() -> LinkShorten {
    LinkShorten {
        url: "https://e.com/a".into(),
        account: Bytes::from_static(b"acme"),
        length: 7,
        ttl_ms: Some(DAY_MS),
        reuse: true,
        ..LinkShorten::default()
    }
}

fn shorten_reply() -> ShortenReply {
    ShortenReply {
        code: CODE.into(),
        short_url: format!("https://s.example/{CODE}"),
        reused: false,
        expires_at: LINK_MADE + DAY_MS,
    }
}

fn shorten_batch() -> LinkShortenBatch {
    LinkShortenBatch {
        // The slot of ("", https://e.com/1), as the reference client picks.
        slot: 14063,
        account: Bytes::new(),
        items: vec![BatchShortenItem {
            url: "https://e.com/1".into(),
            length: 5,
            ..BatchShortenItem::default()
        }],
    }
}

/// 30 s after it was made the link gets an iOS app URL (the node allows
/// the `app` scheme: `links.app_schemes = ["app"]`); no new TTL, so the
/// expiry stays.
fn link_update() -> LinkUpdate {
    LinkUpdate {
        ios: AppLinkChange::Set("app://a".into()),
        ..LinkUpdate::new(CODE)
    }
}

/// A minute after it was made the link is visited: too soon to slide the
/// expiry (a TTL of a day slides at most every 12 hours).
const LINK_VISITED: u64 = LINK_MADE + 60_000;

fn resolve_reply() -> ResolveReply {
    ResolveReply {
        target: "https://e.com/a".into(),
        ios: Some("app://a".into()),
        android: None,
        permanent: false,
        expires_at: LINK_MADE + DAY_MS,
        drop_query: false,
    }
}

fn link_info_reply() -> LinkInfoReply {
    LinkInfoReply {
        code: CODE.into(),
        short_url: format!("https://s.example/{CODE}"),
        target: "https://e.com/a".into(),
        account: Bytes::from_static(b"acme"),
        ios: Some("app://a".into()),
        android: None,
        permanent: false,
        alias: false,
        created_at: LINK_MADE,
        expires_at: LINK_MADE + DAY_MS,
        ttl_ms: DAY_MS,
        visits: 1,
        last_visit: LINK_VISITED,
        daily: vec![((LINK_VISITED / DAY_MS) as u32, 1)],
        drop_query: false,
    }
}

fn migrate() -> ClusterMigrate {
    ClusterMigrate {
        slots: vec![SlotRange {
            start: 100,
            end: 199,
        }],
        to: "b".into(),
    }
}

fn migrate_reply() -> ClusterMigrateReply {
    ClusterMigrateReply {
        slots: 100,
        keys: 5000,
        bytes: 700_000,
        epoch: 102,
        unsynced: vec![],
    }
}

fn migrate_import() -> MigrateImport {
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
    }
}

/// The answer to a frame whose length can't hold a header.
fn frame_too_short() -> RushError {
    let e = FrameError::TooShort { len: 3 };
    RushError::bad_request(format!("{e}; closing the connection"))
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
        (
            "hello-reply",
            ok_reply::<Hello>(2, Reply::Hello(hello_reply())),
        ),
        ("info-request", request(3, Info {})),
        ("info-reply", ok_reply::<Info>(3, Reply::Info(info_reply()))),
        ("cluster-slots-request", request(4, ClusterSlots {})),
        (
            "cluster-slots-reply",
            ok_reply::<ClusterSlots>(4, Reply::ClusterSlots(map())),
        ),
        (
            "cluster-slots-reply-resp",
            ok_reply::<ClusterSlots>(4, Reply::ClusterSlots(map_with_resp())),
        ),
        (
            "cluster-slots-reply-replica",
            ok_reply::<ClusterSlots>(4, Reply::ClusterSlots(map_with_replica())),
        ),
        ("shards-request", request(4, Shards {})),
        (
            "shards-reply",
            ok_reply::<Shards>(4, Reply::Shards(shards_reply())),
        ),
        ("dbsize-request", request(8, DbSize {})),
        ("dbsize-reply", ok_reply::<DbSize>(8, Reply::DbSize(1234))),
        ("readonly-request", request(9, ReadOnly { on: true })),
        (
            "readonly-reply",
            ok_reply::<ReadOnly>(9, Reply::ReadOnly(true)),
        ),
        ("shard-bind-request", request(5, ShardBind { shard: 1 })),
        (
            "shard-bind-reply",
            ok_reply::<ShardBind>(5, Reply::ShardBind(shard_bind_reply())),
        ),
        ("error-frame-too-short", err_reply(0, 0, frame_too_short())),
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
            "set-keepttl-request",
            request(
                6,
                SetKeepTtl {
                    key: Bytes::from_static(b"k"),
                    value: Bytes::from_static(b"v"),
                    cond: SetCond::IfPresent,
                },
            ),
        ),
        ("get-request", request(4, get_k())),
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
            "hlen-request",
            request(
                6,
                HLen {
                    key: Bytes::from_static(b"{u1}d"),
                },
            ),
        ),
        ("hlen-reply", ok_reply::<HLen>(6, Reply::HLen(3))),
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
            "check-ttl-request",
            request(
                7,
                Check {
                    key: Bytes::from_static(b"k"),
                    field: None,
                    cond: Cond::TtlBelow(60_000),
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
        ("error-moved", err_reply(0x10, 4, moved())),
        ("limit-acquire-request", request(7, acquire())),
        (
            "limit-acquire-reply",
            ok_reply::<LimitAcquire>(7, Reply::LimitAcquire(acquire_reply())),
        ),
        ("error-limited", err_reply(0x40, 7, limited())),
        (
            "limit-policy-set-request",
            request(8, LimitPolicySet { policy: flash() }),
        ),
        (
            "catalog-put-request",
            request(
                7,
                CatalogPut {
                    owner: Bytes::from_static(b"M1"),
                    record: catalog_record(),
                },
            ),
        ),
        (
            "catalog-put-reply",
            ok_reply::<CatalogPut>(7, Reply::CatalogPut(true)),
        ),
        ("catalog-query-request", request(8, catalog_query())),
        (
            "catalog-query-reply",
            ok_reply::<CatalogQuery>(
                8,
                Reply::CatalogQuery(CatalogQueryReply {
                    records: vec![catalog_record()].into(),
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
        ("envelope-create-request", request(7, envelope_create())),
        (
            "envelope-create-reply",
            ok_reply::<EnvelopeCreate>(7, Reply::EnvelopeCreate(envelope_create_reply())),
        ),
        ("envelope-grab-request", request(8, envelope_grab())),
        (
            "envelope-grab-reply",
            ok_reply::<EnvelopeGrab>(8, Reply::EnvelopeGrab(envelope_grab_reply())),
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
            ok_reply::<EnvelopeRefunds>(9, Reply::EnvelopeRefunds(envelope_refunds_reply())),
        ),
        ("link-shorten-request", request(7, shorten())),
        (
            "link-shorten-reply",
            ok_reply::<LinkShorten>(7, Reply::LinkShorten(shorten_reply())),
        ),
        ("link-shorten-batch-request", request(8, shorten_batch())),
        ("link-resolve-request", request(9, LinkResolve::new(CODE))),
        (
            "link-resolve-reply",
            ok_reply::<LinkResolve>(9, Reply::LinkResolve(resolve_reply())),
        ),
        (
            "error-link-not-found",
            err_reply(0x32, 9, RushError::not_found("no link")),
        ),
        ("link-info-request", request(10, LinkInfo::new(CODE))),
        (
            "link-info-reply",
            ok_reply::<LinkInfo>(10, Reply::LinkInfo(link_info_reply())),
        ),
        ("link-update-request", request(11, link_update())),
        (
            "link-update-reply",
            ok_reply::<LinkUpdate>(11, Reply::LinkUpdate(LINK_MADE + DAY_MS)),
        ),
        ("link-delete-request", request(12, LinkDelete::new(CODE))),
        (
            "link-delete-reply",
            ok_reply::<LinkDelete>(12, Reply::LinkDelete(true)),
        ),
        (
            "cluster-setmap-request",
            request(10, ClusterSetMap { map: map() }),
        ),
        (
            "cluster-setmap-reply",
            ok_reply::<ClusterSetMap>(10, Reply::ClusterSetMap(2)),
        ),
        ("cluster-migrate-request", request(11, migrate())),
        (
            "cluster-migrate-reply",
            ok_reply::<ClusterMigrate>(11, Reply::ClusterMigrate(migrate_reply())),
        ),
        ("migrate-import-request", request(12, migrate_import())),
        (
            "repl-fetch-request",
            request(
                13,
                ReplFetch {
                    run_id: 0x0102_0304_0506_0708,
                    positions: vec![5, 0],
                    meta_version: 3,
                    max_bytes: 4 << 20,
                    wait_ms: 1000,
                },
            ),
        ),
        (
            "error-tryagain",
            err_reply(0x10, 14, RushError::try_again(100)),
        ),
    ]
}

/// The UTC day of month of a unix time in ms (the civil calendar, from
/// days since 1970-01-01).
fn utc_day_of_month(ms: u64) -> u8 {
    let z = (ms / DAY_MS) as i64 + 719_468;
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    (doy - (153 * mp + 2) / 5 + 1) as u8
}

fn slot_of(target: Result<Target, RushError>) -> u16 {
    match target {
        Ok(Target::Slot(s)) => s,
        other => panic!("not a slot: {other:?}"),
    }
}

#[test]
fn vectors_agree_with_each_other() {
    // The node: HELLO, INFO, SHARDS, SHARD_BIND and the map describe node
    // "a" of one two-node cluster.
    let (hello, info, shards, bind, map) = (
        hello_reply(),
        info_reply(),
        shards_reply(),
        shard_bind_reply(),
        map(),
    );
    let me = map.nodes.iter().find(|n| n.id == hello.node_id).unwrap();
    let owned: u32 = me.ranges.iter().map(|r| (r.end - r.start) as u32 + 1).sum();
    for (name, value) in [
        ("protocol", VERSION.to_string()),
        ("version", hello.server.clone()),
        ("node_id", hello.node_id.clone()),
        ("shards", hello.shards.to_string()),
        ("cluster_epoch", map.epoch.to_string()),
        ("cluster_nodes", map.nodes.len().to_string()),
        ("cluster_slots_owned", owned.to_string()),
        ("advertise", me.addr.clone()),
        ("resp_advertise", me.resp_addr()),
    ] {
        assert_eq!(info.get(name), Some(value.as_str()), "INFO {name}");
    }
    assert_eq!(shards.ranges.len(), hello.shards as usize);
    let bound = shards.ranges[bind.shard as usize];
    assert_eq!(
        (bind.shards, bind.first_slot, bind.last_slot),
        (hello.shards, bound.start, bound.end)
    );
    assert_eq!(map.owners().unwrap().len(), 16384, "the map is valid");

    // MOVED names the slot of the request it answers.
    let ErrorDetail::Redirect { slot, .. } = moved().detail else {
        panic!("MOVED without a redirect")
    };
    assert_eq!(slot, slot_of(get_k().target()), "MOVED's slot");

    // A short code carries the slot of (account, url) it was issued in.
    let (shorten, reply) = (shorten(), shorten_reply());
    let shorten_slot = parts_slot(&[&shorten.account, shorten.url.as_bytes()]);
    assert_eq!(slot_of(shorten.target()), shorten_slot);
    let (code_slot, len, _) = generated_parts(reply.code.as_bytes()).expect("a generated code");
    assert_eq!(code_slot, shorten_slot, "{} is in another slot", reply.code);
    assert_eq!(link_slot(reply.code.as_bytes()), shorten_slot);
    assert_eq!(len, shorten.length);
    assert!(reply.short_url.ends_with(&reply.code));
    assert_eq!(reply.expires_at, LINK_MADE + shorten.ttl_ms.unwrap());
    // The batch uses the slot the reference client picks.
    let batch = shorten_batch();
    assert_eq!(
        batch.slot,
        parts_slot(&[&batch.account, batch.items[0].url.as_bytes()])
    );
    // Update, resolve and info are of that link.
    let (update, resolve, info) = (link_update(), resolve_reply(), link_info_reply());
    assert_eq!(update.code, reply.code);
    assert_eq!(update.ttl_ms, None, "the expiry stays");
    let AppLinkChange::Set(ios) = &update.ios else {
        panic!("the update sets the iOS URL")
    };
    assert_eq!(resolve.target, shorten.url);
    assert_eq!(resolve.ios.as_ref(), Some(ios));
    assert_eq!(resolve.permanent, shorten.permanent);
    assert_eq!(resolve.expires_at, reply.expires_at);
    assert_eq!(
        (&info.code, &info.short_url, &info.target, &info.account),
        (
            &reply.code,
            &reply.short_url,
            &shorten.url,
            &shorten.account
        )
    );
    assert_eq!((&info.ios, &info.android), (&resolve.ios, &resolve.android));
    assert_eq!(
        (info.created_at + info.ttl_ms, info.expires_at),
        (reply.expires_at, reply.expires_at)
    );
    assert_eq!(
        info.daily.iter().map(|d| d.1).sum::<u64>(),
        info.visits,
        "the days add up"
    );
    assert_eq!(
        info.daily.last().unwrap().0 as u64,
        info.last_visit / DAY_MS
    );

    // An envelope id carries its sender's slot and its UTC day of creation.
    let (create, created) = (envelope_create(), envelope_create_reply());
    assert_eq!(envelope_slot(created.id), key_slot(&create.sender));
    assert_eq!(slot_of(create.target()), envelope_slot(created.id));
    let created_at = created.expires_at_ms - create.expires_in_ms;
    assert_eq!(envelope_day(created.id), utc_day_of_month(created_at));
    assert_eq!(envelope_grab().id, created.id);
    let grabbed = envelope_grab_reply().amount_cents;
    let refunds = envelope_refunds_reply();
    let refund = &refunds.refunds[0];
    assert_eq!(refund.envelope_id(), created.id);
    assert_eq!(refund.sender, create.sender);
    assert!(refund.amount_cents + grabbed <= create.total_cents);
    assert!(refund.cursor.stamp >= created.expires_at_ms);
    assert!(refund.refunded_at_ms >= created.expires_at_ms);
    assert!(
        refunds.next >= refund.cursor,
        "the page is complete past it"
    );

    // The rules an acquire names are the policy's, in the documented order:
    // per item for each per-item rule, then one per total rule.
    let (policy, order) = (flash(), acquire());
    assert_eq!(order.policy, policy.name);
    let mut expected = Vec::new();
    for rule in &policy.rules {
        match rule.scope {
            Scope::Item => {
                for i in &order.items {
                    expected.push((rule.name.clone(), i.item.clone(), rule.max));
                }
            }
            Scope::Total => expected.push((rule.name.clone(), String::new(), rule.max)),
        }
    }
    let answered: Vec<_> = acquire_reply()
        .allowances
        .iter()
        .map(|a| (a.rule.clone(), a.item.clone(), a.limit))
        .collect();
    assert_eq!(answered, expected);
    for a in acquire_reply().allowances {
        // Daily windows in Shanghai (UTC+8, no DST) end at its midnight.
        assert_eq!((a.resets_at_ms + 8 * 3_600_000) % DAY_MS, 0, "{}", a.rule);
    }
    let ErrorDetail::Limit(LimitDenial {
        rule, item, limit, ..
    }) = limited().detail
    else {
        panic!("LIMITED without its detail")
    };
    let denying = policy.rules.iter().find(|r| r.name == rule).unwrap();
    assert_eq!(denying.max, limit);
    assert_eq!(item.is_empty(), denying.scope == Scope::Total);

    // The catalog query finds the record that was put.
    let (record, query) = (catalog_record(), catalog_query());
    assert!(record.matches(&query.filter));

    // The migration: "a" moves 100 of its slots to "b", one epoch each.
    let (m, moved) = (migrate(), migrate_reply());
    let range = m.slots[0];
    assert_eq!(moved.slots as u16, range.end - range.start + 1);
    assert_eq!(moved.epoch, map.epoch + moved.slots as u64);
    assert_eq!(map.node_for(range.start).unwrap().id, "a");
    assert_eq!(map.node_for(range.end).unwrap().id, "a");
    assert!(map.nodes.iter().any(|n| n.id == m.to));
    let import = migrate_import();
    assert!(range.contains(import.slot));
    assert_eq!(import.from, "a");
    for p in &import.pairs {
        assert_eq!(
            p.key[..2],
            import.slot.to_be_bytes(),
            "keys start with the slot"
        );
    }
}

#[test]
fn the_calendar_helper_is_right() {
    assert_eq!(utc_day_of_month(0), 1);
    assert_eq!(utc_day_of_month(1_767_225_600_000), 1); // 2026-01-01
    assert_eq!(utc_day_of_month(1_767_225_600_000 - 1), 31); // 2025-12-31
    assert_eq!(utc_day_of_month(1_709_164_800_000), 29); // 2024-02-29
}

/// `golden NAME` fenced blocks of PROTOCOL.md: name → bytes.
fn document_vectors() -> Vec<(String, Vec<u8>)> {
    let doc = protocol_md();
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

fn protocol_md() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/PROTOCOL.md")).unwrap()
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

/// The INFO vector has the rows PROTOCOL.md lists for INFO, in that order
/// (the order the server sends them).
#[test]
fn info_vector_has_the_documented_rows() {
    let doc = protocol_md();
    let listed = doc
        .split("### INFO (0x03)")
        .nth(1)
        .and_then(|s| s.split("in that order").next())
        .expect("an INFO section listing its rows");
    let names: Vec<&str> = listed
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect();
    let info = info_reply();
    let rows: Vec<&str> = info.rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(rows, names);
}

/// PROTOCOL.md's "Compatibility" rules, on the document's own vectors: a
/// reply (or error, or BATCH result) followed by a later release's field
/// reads as before; LINK_RESOLVE and LINK_INFO answers of the release
/// before, which end before `drop_query`, read as dropping queries; a
/// request with bytes after its body is still refused.
#[test]
fn replies_may_grow_at_the_end_and_requests_may_not() {
    let doc = document_vectors();
    let body = |name: &str| -> Vec<u8> {
        let (_, bytes) = doc
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("PROTOCOL.md has no golden vector {name:?}"));
        let f = frame::parse(&mut BytesMut::from(&bytes[..]), 1 << 20)
            .unwrap()
            .unwrap();
        f.body.to_vec()
    };
    let later = |name: &str| Bytes::from([body(name), vec![0xff, 0x01]].concat());
    let older = |name: &str| {
        let b = body(name);
        Bytes::copy_from_slice(&b[..b.len() - 1])
    };

    // Fields of a later release: ignored.
    assert_eq!(
        frame::decode_response::<ResolveReply>(later("link-resolve-reply")).unwrap(),
        Ok(resolve_reply())
    );
    assert_eq!(
        frame::decode_response::<()>(later("error-link-not-found")).unwrap(),
        Err(RushError::not_found("no link"))
    );
    // A BATCH whose one result (CHECK: true) carries a later field.
    let batch = Bytes::from_static(&[0, 0, 0, 0, 1, 0x1e, 0, 0, 0, 2, 1, 0xff]);
    assert_eq!(
        frame::decode_response::<BatchReply>(batch).unwrap(),
        Ok(BatchReply {
            results: vec![Reply::Check(true)]
        })
    );

    // The release before: no `drop_query`, and it dropped every query.
    let resolve = frame::decode_response::<ResolveReply>(older("link-resolve-reply"))
        .unwrap()
        .unwrap();
    assert_eq!(
        resolve,
        ResolveReply {
            drop_query: true,
            ..resolve_reply()
        }
    );
    let info = frame::decode_response::<LinkInfoReply>(older("link-info-reply"))
        .unwrap()
        .unwrap();
    assert_eq!(
        info,
        LinkInfoReply {
            drop_query: true,
            ..link_info_reply()
        }
    );

    // Requests stay strict.
    let e = Request::decode(0x32, later("link-resolve-request")).unwrap_err();
    assert_eq!(e.code, ErrorCode::BadRequest, "{e}");
    // LINK_UPDATE's added field: left out when kept (the vector), accepted
    // when sent, refused when followed by anything more.
    let update = body("link-update-request");
    let with = |tail: &[u8]| Request::decode(0x34, Bytes::from([&update[..], tail].concat()));
    assert_eq!(with(&[]).unwrap(), link_update().into());
    assert_eq!(with(&[0]).unwrap(), link_update().into());
    assert_eq!(
        with(&[1, 1]).unwrap(),
        LinkUpdate {
            drop_query: Some(true),
            ..link_update()
        }
        .into()
    );
    assert_eq!(with(&[1, 1, 0]).unwrap_err().code, ErrorCode::BadRequest);
}

/// The error table lists every code by its number and name, and the
/// retired ones as retired.
#[test]
fn document_error_table_matches_code() {
    let doc = protocol_md();
    let table = doc
        .split("## Error codes")
        .nth(1)
        .expect("an Error codes section");
    let rows: Vec<(u8, String)> = table
        .lines()
        .skip_while(|l| !l.starts_with("| code"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (
                cells[1].parse().expect("a code number"),
                cells[2].to_string(),
            )
        })
        .collect();
    for &code in ErrorCode::ALL {
        let row = rows.iter().find(|(n, _)| *n == code.as_u8());
        assert_eq!(
            row.map(|r| r.1.as_str()),
            Some(code.name()),
            "code {}",
            code.as_u8()
        );
    }
    for (n, name) in &rows {
        if ErrorCode::RETIRED.contains(n) {
            assert!(name.contains("retired"), "code {n} is retired: {name}");
        } else {
            assert_eq!(ErrorCode::from_u8(*n).name(), name, "code {n}");
        }
    }
    let listed: Vec<u8> = rows.iter().map(|r| r.0).collect();
    assert!(listed.windows(2).all(|w| w[0] + 1 == w[1]), "{listed:?}");
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
