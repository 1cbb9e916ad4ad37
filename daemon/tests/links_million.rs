//! A million short codes through a real daemon and client: all distinct,
//! spread over both shards, and every one resolves to its URL.

mod common;

use common::TestNode;
use rush_client::protocol::cmd::BatchShortenItem;
use rush_client::protocol::link_slot;
use rush_daemon::shard::route::shard_of_slot;
use std::collections::HashSet;
use std::time::Instant;

const CODES: usize = 1_000_000;
const PER_BATCH: usize = 1_000;
/// Requests in flight at once (over two connections).
const IN_FLIGHT: usize = 256;

fn url(i: usize) -> String {
    format!("https://example.com/m/{i}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_codes_are_distinct_and_all_resolve() {
    // The production default cache (the test config's 16 MB thrashes on the
    // filter and index blocks of a million links' SST files).
    let node = TestNode::start_with(|c| {
        c.storage.block_cache_mb = rush_daemon::config::DEFAULT_BLOCK_CACHE_MB
    })
    .await;
    // (Patient clients: a million writes bring RocksDB write stalls.)
    let clients = [
        common::connect_patient(node.addr()).await,
        common::connect_patient(node.addr()).await,
    ];
    let started = Instant::now();

    // Issue: a thousand batch shortens, several in flight at once.
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..8 {
        let c = clients[w % 2].clone();
        tasks.spawn(async move {
            let mut out = Vec::new();
            for b in (w..CODES / PER_BATCH).step_by(8) {
                let items = (b * PER_BATCH..(b + 1) * PER_BATCH)
                    .map(|i| BatchShortenItem::new(url(i)))
                    .collect();
                let reply = c.shorten_batch("", items).await.expect("batch shorten");
                assert_eq!(reply.links.len(), PER_BATCH);
                out.push((b, reply.links));
            }
            out
        });
    }
    let mut codes = vec![String::new(); CODES];
    while let Some(done) = tasks.join_next().await {
        for (b, links) in done.unwrap() {
            for (k, l) in links.into_iter().enumerate() {
                codes[b * PER_BATCH + k] = l.code;
            }
        }
    }
    let issued_in = started.elapsed();
    let distinct: HashSet<&str> = codes.iter().map(|c| c.as_str()).collect();
    assert_eq!(distinct.len(), CODES, "every code is distinct");
    let mut per_shard = [0usize; 2];
    let mut slots = HashSet::new();
    for c in &codes {
        let slot = link_slot(c.as_bytes());
        slots.insert(slot);
        per_shard[shard_of_slot(slot, 2)] += 1;
    }
    assert!(
        per_shard.iter().all(|&n| n > CODES / 4),
        "both shards issued: {per_shard:?}"
    );
    assert!(
        slots.len() > 900,
        "batches spread over {} slots",
        slots.len()
    );
    let m = &node.running().metrics().links;
    assert_eq!(m.issued_new.get(), CODES as u64);
    assert!(
        m.segment_waits.get() <= slots.len() as u64,
        "only each slot's first code waited"
    );

    // Resolve every one of them, pipelined.
    let resolving = Instant::now();
    let codes = std::sync::Arc::new(codes);
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..IN_FLIGHT {
        let c = clients[w % 2].clone();
        let codes = codes.clone();
        tasks.spawn(async move {
            for i in (w..CODES).step_by(IN_FLIGHT) {
                let r = c.resolve(codes[i].clone()).await.expect("resolves");
                assert_eq!(r.target, url(i));
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert_eq!(m.resolve_hit.get(), CODES as u64);
    eprintln!(
        "issued {CODES} codes in {:.1?}, resolved them in {:.1?}",
        issued_in,
        resolving.elapsed()
    );
    node.stop().await;
}
