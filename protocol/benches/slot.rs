//! Key → slot hashing (CRC16/XMODEM of the hash tag), done by every client
//! and server for every keyed request.
//!
//! `cargo bench -p rush-protocol --bench slot`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rush_protocol::key_slot;
use rush_protocol::slot::parts_slot;
use std::hint::black_box;

fn slots(c: &mut Criterion) {
    let mut g = c.benchmark_group("slot");
    g.throughput(Throughput::Elements(1));
    let cases: [(&str, &[u8]); 3] = [
        ("16-byte key", b"key:000000012345"),
        ("hash-tagged key", b"mall:sale:freq:ctrl:{860000000000001}"),
        ("100-byte key", &[b'k'; 100]),
    ];
    for (name, key) in cases {
        g.bench_function(name, |b| b.iter(|| black_box(key_slot(black_box(key)))));
    }
    let parts: [&[u8]; 2] = [b"account-42", b"https://example.com/some/long/path?q=1"];
    g.bench_function("two parts", |b| {
        b.iter(|| black_box(parts_slot(black_box(&parts))))
    });
    g.finish();
}

criterion_group!(benches, slots);
criterion_main!(benches);
