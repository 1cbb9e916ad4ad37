//! Property tests: every request and every reply, of every service (a test
//! checks that each opcode has generators), survive encode → decode, and no
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
        Just(Cond::NoTtl),
        Just(Cond::HasTtl),
        any::<i64>().prop_map(Cond::TtlBelow),
        any::<i64>().prop_map(Cond::TtlAbove),
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
        (key(), bytes(64), 0u8..3).prop_map(|(key, value, c)| SetKeepTtl {
            key,
            value,
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
        key().prop_map(|key| HLen { key }.into()),
        (key(), proptest::option::of(bytes(8)), cond()).prop_map(|(key, field, cond)| Check {
            key,
            field,
            cond
        }
        .into()),
    ]
}

/// Non-empty printable text (decoders refuse empty names and non-UTF-8).
fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[a-zA-Z0-9._-]{{1,{max}}}")).unwrap()
}

/// A non-empty identifier as bytes (owners, users, record ids, aliases).
fn name(max: usize) -> impl Strategy<Value = Bytes> {
    text(max).prop_map(Bytes::from)
}

/// A link's target (or an app link).
fn url() -> impl Strategy<Value = String> {
    "https://[a-z]{1,12}\\.example/[a-z0-9]{0,16}"
}

/// A link code or alias.
fn code() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_-]{1,8}"
}

/// 0 (the server's default) or 5–8 characters.
fn code_length() -> impl Strategy<Value = u8> {
    proptest::sample::select(vec![0u8, 5, 6, 7, 8])
}

fn app_link_change() -> impl Strategy<Value = AppLinkChange> {
    prop_oneof![
        Just(AppLinkChange::Keep),
        Just(AppLinkChange::Clear),
        url().prop_map(AppLinkChange::Set),
    ]
}

fn links_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        (
            (
                url(),
                name(8),
                code_length(),
                proptest::option::of(any::<u64>())
            ),
            (
                proptest::option::of(code()),
                proptest::option::of(url()),
                proptest::option::of(url()),
                any::<bool>(),
                any::<bool>()
            )
        )
            .prop_map(
                |((url, account, length, ttl_ms), (alias, ios, android, reuse, permanent))| {
                    LinkShorten {
                        url,
                        account,
                        length,
                        ttl_ms,
                        // Reuse and an alias exclude each other.
                        reuse: reuse && alias.is_none(),
                        alias,
                        ios,
                        android,
                        permanent,
                        // Both values, without a wider tuple.
                        drop_query: length % 2 == 1,
                    }
                    .into()
                }
            ),
        (
            0u16..16384,
            name(8),
            proptest::collection::vec(
                (
                    url(),
                    code_length(),
                    proptest::option::of(any::<u64>()),
                    proptest::option::of(url()),
                    proptest::option::of(url()),
                    any::<bool>()
                )
                    .prop_map(|(url, length, ttl_ms, ios, android, permanent)| {
                        BatchShortenItem {
                            url,
                            length,
                            ttl_ms,
                            ios,
                            android,
                            permanent,
                        }
                    }),
                1..4
            )
        )
            .prop_map(|(slot, account, items)| LinkShortenBatch {
                slot,
                account,
                items
            }
            .into()),
        code().prop_map(|code| LinkResolve { code }.into()),
        code().prop_map(|code| LinkInfo { code }.into()),
        (
            code(),
            proptest::option::of(url()),
            proptest::option::of(any::<u64>()),
            app_link_change(),
            app_link_change(),
            proptest::option::of(any::<bool>())
        )
            .prop_map(|(code, url, ttl_ms, ios, android, permanent)| {
                let mut u = LinkUpdate {
                    code,
                    url,
                    ttl_ms,
                    ios,
                    android,
                    permanent,
                    drop_query: ttl_ms.map(|t| t % 2 == 1),
                };
                // An update changes something.
                if u.url.is_none()
                    && u.ttl_ms.is_none()
                    && u.permanent.is_none()
                    && u.ios == AppLinkChange::Keep
                    && u.android == AppLinkChange::Keep
                {
                    u.ttl_ms = Some(60_000);
                }
                u.into()
            }),
        code().prop_map(|code| LinkDelete { code }.into()),
    ]
}

fn order_items() -> impl Strategy<Value = Vec<OrderItem>> {
    // One line per item.
    proptest::collection::btree_map(text(12), 1u64..=1_000_000, 1..4).prop_map(|m| {
        m.into_iter()
            .map(|(item, qty)| OrderItem { item, qty })
            .collect()
    })
}

fn policy_def() -> impl Strategy<Value = PolicyDef> {
    let window = prop_oneof![
        Just(Window::Day { tz: "UTC".into() }),
        (1u64..=34_560_000).prop_map(|secs| Window::Fixed { secs }),
        (1u64..=34_560_000, 1u32..=1000)
            .prop_map(|(secs, buckets)| Window::Sliding { secs, buckets }),
    ];
    // Rules by name: a policy names each rule once.
    let rules =
        proptest::collection::btree_map(text(12), (any::<bool>(), any::<u64>(), window), 1..4)
            .prop_map(|m| {
                m.into_iter()
                    .map(|(name, (total, max, window))| Rule {
                        name,
                        scope: if total { Scope::Total } else { Scope::Item },
                        max,
                        window,
                    })
                    .collect::<Vec<_>>()
            });
    (text(12), any::<bool>(), rules).prop_map(|(name, relaxed, rules)| PolicyDef {
        name,
        relaxed,
        rules,
    })
}

fn limits_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        (text(12), name(12), text(16), order_items()).prop_map(
            |(policy, user, order_id, items)| LimitAcquire {
                policy,
                user,
                order_id,
                items
            }
            .into()
        ),
        (text(12), name(12), text(16)).prop_map(|(policy, user, order_id)| LimitRelease {
            policy,
            user,
            order_id
        }
        .into()),
        (text(12), name(12)).prop_map(|(policy, user)| LimitStatus { policy, user }.into()),
        policy_def().prop_map(|policy| LimitPolicySet { policy }.into()),
        text(12).prop_map(|name| LimitPolicyGet { name }.into()),
        Just(LimitPolicyList {}.into()),
    ]
}

fn attributes() -> impl Strategy<Value = Vec<(Bytes, Bytes)>> {
    // Distinct names: a record or filter names an attribute once.
    proptest::collection::btree_map(name(8), name(16), 0..4).prop_map(|m| m.into_iter().collect())
}

fn catalog_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        (name(12), record()).prop_map(|(owner, record)| CatalogPut { owner, record }.into()),
        (name(12), name(8))
            .prop_map(|(owner, record_id)| CatalogDelete { owner, record_id }.into()),
        (name(8), name(12), name(12)).prop_map(|(kind, alias, owner)| CatalogAliasSet {
            kind,
            alias,
            owner
        }
        .into()),
        (name(8), name(12)).prop_map(|(kind, alias)| CatalogAliasDel { kind, alias }.into()),
        (name(12), attributes(), proptest::option::of(any::<u64>())).prop_map(
            |(owner, attributes, valid_at)| CatalogQuery {
                owner,
                filter: CatalogFilter {
                    attributes,
                    valid_at
                }
            }
            .into()
        ),
        (name(8), name(12)).prop_map(|(kind, alias)| CatalogResolve { kind, alias }.into()),
        prop_oneof![
            Just(ShedMode::Off),
            Just(ShedMode::On),
            Just(ShedMode::Auto)
        ]
        .prop_map(|mode| CatalogShed { mode }.into()),
        proptest::collection::vec(name(12), 0..4).prop_map(|owners| CatalogWarm { owners }.into()),
        Just(CatalogRebuild {}.into()),
    ]
}

fn cursor() -> impl Strategy<Value = RefundCursor> {
    (any::<u64>(), any::<u64>()).prop_map(|(stamp, id)| RefundCursor { stamp, id })
}

fn envelopes_op() -> impl Strategy<Value = Request> {
    prop_oneof![
        (
            name(12),
            any::<u64>(),
            any::<u32>(),
            any::<bool>(),
            any::<u64>(),
            proptest::option::of(name(16))
        )
            .prop_map(
                |(sender, total_cents, count, fixed, expires_in_ms, idempotency_key)| {
                    EnvelopeCreate {
                        sender,
                        total_cents,
                        count,
                        mode: if fixed {
                            EnvelopeMode::Fixed
                        } else {
                            EnvelopeMode::Random
                        },
                        expires_in_ms,
                        idempotency_key,
                    }
                    .into()
                }
            ),
        (any::<u64>(), name(12)).prop_map(|(id, user)| EnvelopeGrab { id, user }.into()),
        any::<u64>().prop_map(|id| EnvelopeInfo { id }.into()),
        (cursor(), 1u32..=10_000)
            .prop_map(|(after, limit)| EnvelopeRefunds { after, limit }.into()),
        cursor().prop_map(|cursor| EnvelopeRefundsAck { cursor }.into()),
        Just(EnvelopeAudit {}.into()),
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
        Just(Shards {}.into()),
        any::<u16>().prop_map(|shard| ShardBind { shard }.into()),
        Just(DbSize {}.into()),
        any::<bool>().prop_map(|on| ReadOnly { on }.into()),
        links_op(),
        limits_op(),
        catalog_op(),
        envelopes_op(),
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
            (
                "[a-z]{1,8}",
                proptest::collection::vec(slot_range(), 0..4),
                proptest::option::of(1u16..),
                proptest::option::of("[a-z]{0,8}"),
            ),
            0..4,
        ),
    )
        .prop_map(|(epoch, nodes)| ClusterSlotsReply {
            epoch,
            nodes: nodes
                .into_iter()
                .map(|(id, ranges, resp, primary)| ClusterNode {
                    addr: format!("{id}:7379"),
                    resp_addr: resp.map(|p| format!("{id}:{p}")),
                    // "" reads back as none.
                    replica_of: primary.filter(|p| !p.is_empty()),
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
        (any::<u64>(), any::<u32>()).prop_map(|(session, max_bytes)| ReplSnapshot {
            session,
            max_bytes
        }
        .into()),
        (
            any::<u64>(),
            proptest::collection::vec(any::<u64>(), 0..4),
            any::<u64>(),
            any::<u32>(),
            any::<u32>()
        )
            .prop_map(
                |(run_id, positions, meta_version, max_bytes, wait_ms)| ReplFetch {
                    run_id,
                    positions,
                    meta_version,
                    max_bytes,
                    wait_ms
                }
                .into()
            ),
        Just(ReplStatus {}.into()),
        Just(ReplPromote {}.into()),
    ]
}

/// Replies of the replication requests.
fn replication_reply() -> impl Strategy<Value = Reply> {
    let rows = || proptest::collection::vec((text(8), text(8)), 0..3);
    prop_oneof![
        (
            any::<u64>(),
            any::<u64>(),
            proptest::collection::vec(any::<u64>(), 0..4),
            proptest::collection::vec((any::<u16>(), bytes(8), bytes(16)), 0..3),
            any::<bool>()
        )
            .prop_map(|(run_id, session, positions, pairs, done)| {
                Reply::ReplSnapshot(ReplSnapshotReply {
                    run_id,
                    session,
                    positions,
                    pairs: pairs
                        .into_iter()
                        .map(|(family, key, value)| ReplPair { family, key, value })
                        .collect(),
                    done,
                })
            }),
        (
            proptest::collection::vec(any::<u64>(), 0..4),
            proptest::collection::vec((any::<u16>(), any::<u64>(), bytes(16)), 0..3),
            proptest::option::of((
                any::<u64>(),
                proptest::collection::vec((bytes(8), bytes(8)), 0..3)
            )),
            any::<u64>()
        )
            .prop_map(|(heads, records, meta, now_ms)| {
                Reply::ReplFetch(ReplFetchReply {
                    heads,
                    records: records
                        .into_iter()
                        .map(|(shard, seq, body)| ReplRecord { shard, seq, body })
                        .collect(),
                    meta,
                    now_ms,
                })
            }),
        rows().prop_map(|rows| Reply::ReplStatus(InfoReply { rows })),
        rows().prop_map(|rows| Reply::ReplPromote(InfoReply { rows })),
    ]
}

fn allowances() -> impl Strategy<Value = Vec<Allowance>> {
    proptest::collection::vec(
        (text(12), text(12), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(rule, item, count, limit, resets_at_ms)| Allowance {
                rule,
                item,
                count,
                limit,
                resets_at_ms,
            },
        ),
        0..4,
    )
}

fn record() -> impl Strategy<Value = Record> {
    (
        name(8),
        attributes(),
        proptest::option::of(0..u64::MAX),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(id, attributes, valid_from, valid_to)| Record {
            id,
            attributes,
            valid_from,
            // A validity ends after it starts.
            valid_to: match (valid_from, valid_to) {
                (Some(from), Some(to)) => Some(from.saturating_add(1).max(to)),
                (_, to) => to,
            },
        })
}

fn envelope_mode() -> impl Strategy<Value = EnvelopeMode> {
    prop_oneof![Just(EnvelopeMode::Random), Just(EnvelopeMode::Fixed)]
}

/// Replies of the services' requests (and SHARDS / SHARD_BIND).
fn service_reply() -> impl Strategy<Value = Reply> {
    let links = prop_oneof![
        (code(), url(), any::<bool>(), any::<u64>()).prop_map(
            |(code, short_url, reused, expires_at)| Reply::LinkShorten(ShortenReply {
                code,
                short_url,
                reused,
                expires_at,
            })
        ),
        (
            url(),
            proptest::collection::vec(
                (code(), any::<u64>())
                    .prop_map(|(code, expires_at)| BatchLink { code, expires_at }),
                0..4
            )
        )
            .prop_map(
                |(base_url, links)| Reply::LinkShortenBatch(ShortenBatchReply { base_url, links })
            ),
        (
            url(),
            proptest::option::of(url()),
            proptest::option::of(url()),
            any::<bool>(),
            any::<u64>()
        )
            .prop_map(|(target, ios, android, permanent, expires_at)| {
                Reply::LinkResolve(ResolveReply {
                    target,
                    ios,
                    android,
                    permanent,
                    expires_at,
                    drop_query: expires_at % 2 == 1,
                })
            }),
        (
            (
                code(),
                url(),
                url(),
                name(8),
                proptest::option::of(url()),
                proptest::option::of(url())
            ),
            any::<([bool; 2], [u64; 3], [u64; 2])>(),
            proptest::collection::vec((any::<u32>(), any::<u64>()), 0..5)
        )
            .prop_map(
                |(
                    (code, short_url, target, account, ios, android),
                    ([permanent, alias], [created_at, expires_at, ttl_ms], [visits, last_visit]),
                    daily,
                )| {
                    Reply::LinkInfo(LinkInfoReply {
                        code,
                        short_url,
                        target,
                        account,
                        ios,
                        android,
                        permanent,
                        alias,
                        created_at,
                        expires_at,
                        ttl_ms,
                        visits,
                        last_visit,
                        daily,
                        drop_query: visits % 2 == 1,
                    })
                }
            ),
        any::<u64>().prop_map(Reply::LinkUpdate),
        any::<bool>().prop_map(Reply::LinkDelete),
    ];
    let limits = prop_oneof![
        (any::<bool>(), any::<bool>(), allowances()).prop_map(
            |(replayed, released, allowances)| Reply::LimitAcquire(AcquireReply {
                replayed,
                // Released is only ever said of a replayed order.
                released: replayed && released,
                allowances,
            })
        ),
        (any::<bool>(), order_items())
            .prop_map(|(replayed, items)| Reply::LimitRelease(ReleaseReply { replayed, items })),
        (allowances(), any::<bool>()).prop_map(|(allowances, truncated)| Reply::LimitStatus(
            StatusReply {
                allowances,
                truncated
            }
        )),
        (any::<bool>(), policy_def()).prop_map(|(created, policy)| Reply::LimitPolicySet(
            PolicySetReply { created, policy }
        )),
        policy_def().prop_map(Reply::LimitPolicyGet),
        proptest::collection::vec(policy_def(), 0..3)
            .prop_map(|policies| Reply::LimitPolicyList(PolicyListReply { policies })),
    ];
    let catalog = prop_oneof![
        any::<bool>().prop_map(Reply::CatalogPut),
        any::<bool>().prop_map(Reply::CatalogDelete),
        any::<bool>().prop_map(Reply::CatalogAliasSet),
        any::<bool>().prop_map(Reply::CatalogAliasDel),
        proptest::collection::vec(record(), 0..3).prop_map(|records| {
            Reply::CatalogQuery(CatalogQueryReply {
                records: records.into(),
            })
        }),
        proptest::option::of(name(12)).prop_map(Reply::CatalogResolve),
        Just(Reply::CatalogShed(())),
        (any::<u64>(), any::<u64>())
            .prop_map(|(loaded, absent)| Reply::CatalogWarm(CatalogWarmReply { loaded, absent })),
        any::<u64>().prop_map(Reply::CatalogRebuild),
    ];
    let envelopes = prop_oneof![
        (any::<u64>(), any::<u64>()).prop_map(|(id, expires_at_ms)| Reply::EnvelopeCreate(
            EnvelopeCreateReply { id, expires_at_ms }
        )),
        (any::<u64>(), any::<bool>()).prop_map(|(amount_cents, repeated)| Reply::EnvelopeGrab(
            EnvelopeGrabReply {
                amount_cents,
                repeated
            }
        )),
        (
            (any::<u64>(), name(12), envelope_mode(), 0u8..4),
            any::<([u64; 3], [u32; 2])>(),
            (
                any::<[u64; 2]>(),
                proptest::collection::vec(
                    (name(12), any::<u64>(), any::<u64>()).prop_map(
                        |(user, amount_cents, at_ms)| {
                            EnvelopeGrabbed {
                                user,
                                amount_cents,
                                at_ms,
                            }
                        }
                    ),
                    0..4
                )
            )
        )
            .prop_map(
                |(
                    (id, sender, mode, state),
                    ([total_cents, remaining_cents, refunded_cents], [count, grabbed]),
                    ([created_at_ms, expires_at_ms], grabs),
                )| {
                    Reply::EnvelopeInfo(EnvelopeInfoReply {
                        id,
                        sender,
                        mode,
                        state: [
                            EnvelopeState::Open,
                            EnvelopeState::Empty,
                            EnvelopeState::Expired,
                            EnvelopeState::Refunded,
                        ][state as usize],
                        total_cents,
                        remaining_cents,
                        refunded_cents,
                        count,
                        grabbed,
                        created_at_ms,
                        expires_at_ms,
                        grabs,
                    })
                }
            ),
        (
            proptest::collection::vec(
                (cursor(), name(12), any::<u64>(), any::<u64>()).prop_map(
                    |(cursor, sender, amount_cents, refunded_at_ms)| Refund {
                        cursor,
                        sender,
                        amount_cents,
                        refunded_at_ms,
                    }
                ),
                0..4
            ),
            cursor(),
            any::<bool>()
        )
            .prop_map(|(refunds, next, more)| Reply::EnvelopeRefunds(
                EnvelopeRefundsReply {
                    refunds,
                    next,
                    more
                }
            )),
        any::<u64>().prop_map(Reply::EnvelopeRefundsAck),
        (any::<[u64; 5]>(), proptest::collection::vec(text(40), 0..3)).prop_map(
            |([envelopes, grabs, open, in_flight_cents, refunded], problems)| {
                Reply::EnvelopeAudit(EnvelopeAuditReply {
                    envelopes,
                    grabs,
                    open,
                    in_flight_cents,
                    refunded,
                    problem_count: problems.len() as u64,
                    problems,
                })
            }
        ),
    ];
    let shards = prop_oneof![
        // Contiguous ranges in slot order, covering every slot.
        proptest::collection::btree_set(1u16..16384, 0..3).prop_map(|cuts| {
            let mut starts = vec![0u16];
            starts.extend(cuts);
            let ranges = starts
                .iter()
                .enumerate()
                .map(|(i, &start)| SlotRange {
                    start,
                    end: starts.get(i + 1).map_or(16383, |next| next - 1),
                })
                .collect();
            Reply::Shards(ShardsReply { ranges })
        }),
        (any::<u16>(), any::<u16>(), 0u16..16384, 0u16..16384).prop_map(
            |(shard, shards, first_slot, last_slot)| Reply::ShardBind(ShardBindReply {
                shard,
                shards,
                first_slot,
                last_slot,
            })
        ),
    ];
    // The key-value, node and cluster replies the generator below lacks.
    let plain = prop_oneof![
        (any::<u8>(), text(16), text(16), any::<u16>(), any::<bool>()).prop_map(
            |(protocol, server, node_id, shards, admin)| Reply::Hello(HelloReply {
                protocol,
                server,
                node_id,
                shards,
                admin,
            })
        ),
        any::<bool>().prop_map(Reply::Del),
        any::<bool>().prop_map(Reply::Exists),
        any::<bool>().prop_map(Reply::Expire),
        any::<u64>().prop_map(Reply::HSet),
        proptest::option::of(bytes(32)).prop_map(Reply::HGet),
        any::<u64>().prop_map(Reply::HDel),
        any::<u64>().prop_map(Reply::HLen),
        any::<i64>().prop_map(Reply::HIncrBy),
        any::<bool>().prop_map(Reply::Check),
        any::<u64>().prop_map(Reply::ClusterSetMap),
        any::<u64>().prop_map(Reply::MigrateImport),
        any::<u64>().prop_map(Reply::MigrateCommit),
        any::<bool>().prop_map(Reply::MigrateAbort),
        Just(Reply::Compact(())),
        any::<u64>().prop_map(Reply::ClockAdvance),
        any::<u64>().prop_map(Reply::DbSize),
        any::<bool>().prop_map(Reply::ReadOnly),
    ];
    prop_oneof![links, limits, catalog, envelopes, shards, plain]
}

fn any_reply() -> impl Strategy<Value = Reply> {
    prop_oneof![
        service_reply(),
        bytes(32).prop_map(|payload| Reply::Ping(Pong { payload })),
        proptest::option::of(bytes(32)).prop_map(Reply::Get),
        any::<bool>().prop_map(Reply::Set),
        any::<bool>().prop_map(Reply::SetKeepTtl),
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
                        resp_addr: None,
                        replica_of: None,
                    }],
                })
            }),
        proptest::collection::vec(any::<i64>().prop_map(Reply::IncrBy), 0..4)
            .prop_map(|results| Reply::Batch(BatchReply { results })),
        (
            any::<u32>(),
            any::<[u64; 3]>(),
            proptest::collection::vec("[a-z:0-9]{1,12}", 0..3)
        )
            .prop_map(
                |(slots, [keys, bytes, epoch], unsynced)| Reply::ClusterMigrate(
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
        replication_reply(),
    ]
}

/// The opcodes that none of 20,000 values drawn from `strategy` has, by
/// name; `opcodes` says which a value has.
fn never_drawn<S: Strategy>(
    strategy: S,
    opcodes: impl Fn(&S::Value) -> Vec<Opcode>,
) -> Vec<&'static str> {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..20_000 {
        let value = strategy.new_tree(&mut runner).unwrap().current();
        seen.extend(opcodes(&value).into_iter().map(Opcode::as_u8));
    }
    Opcode::ALL
        .iter()
        .filter(|op| !seen.contains(&op.as_u8()))
        .map(|op| op.name())
        .collect()
}

/// Every opcode has a generator above: a request type added without one
/// fails here instead of going untested.
#[test]
fn every_opcode_is_generated() {
    let missing = never_drawn(any_request(), |req| {
        let mut ops = vec![req.opcode()];
        if let Request::Batch(b) = req {
            ops.extend(b.ops.iter().map(Request::opcode));
        }
        ops
    });
    assert!(missing.is_empty(), "no generator makes {missing:?}");
}

/// Every opcode's reply has a generator too.
#[test]
fn every_reply_is_generated() {
    let missing = never_drawn(any_reply(), |reply| vec![reply.opcode()]);
    assert!(
        missing.is_empty(),
        "no generator makes a reply to {missing:?}"
    );
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
            let decoded = Request::decode(req.opcode().as_u8(), short.clone());
            match &req {
                // Without its last field, drop_query (two bytes when set),
                // a LINK_UPDATE is what a sender of the release before
                // sends: it decodes, keeping the link's setting.
                Request::LinkUpdate(u) if u.drop_query.is_some() && cut == 1 => {
                    let older = LinkUpdate { drop_query: None, ..u.clone() };
                    if older == LinkUpdate::new(u.code.clone()) {
                        // Nothing left to change.
                        prop_assert!(decoded.is_err());
                    } else {
                        prop_assert_eq!(decoded.unwrap(), Request::LinkUpdate(older));
                    }
                }
                // A request that ends with a cluster map whose nodes have
                // RESP addresses (a field added after the list of nodes),
                // cut exactly before that field, is what a sender of the
                // release before sends: the map without them.
                Request::ClusterSetMap(_) | Request::MigrateCommit(_)
                    if without_resp_addrs(&req).is_some_and(|older| encoded(&older) == short) =>
                {
                    prop_assert_eq!(decoded.unwrap(), without_resp_addrs(&req).unwrap());
                }
                _ => prop_assert!(decoded.is_err()),
            }
        }
    }
}

fn encoded(req: &Request) -> Bytes {
    let mut buf = BytesMut::new();
    req.encode_body(&mut buf);
    buf.freeze()
}

/// `req` (a CLUSTER_SETMAP or MIGRATE_COMMIT) with its map's RESP addresses
/// left out, when any node has one.
fn without_resp_addrs(req: &Request) -> Option<Request> {
    let strip = |map: &ClusterSlotsReply| {
        map.nodes.iter().any(|n| n.resp_addr.is_some()).then(|| {
            let mut map = map.clone();
            for n in &mut map.nodes {
                n.resp_addr = None;
            }
            map
        })
    };
    match req {
        Request::ClusterSetMap(r) => {
            strip(&r.map).map(|map| Request::ClusterSetMap(ClusterSetMap { map }))
        }
        Request::MigrateCommit(r) => {
            strip(&r.map).map(|map| Request::MigrateCommit(MigrateCommit { map, ..r.clone() }))
        }
        _ => None,
    }
}
