//! Micro-benchmarks of the daemon's per-request arithmetic: issuing a
//! short-link code (keyed scramble + base62), probing a Bloom filter, and
//! splitting a red envelope.
//!
//! `cargo bench -p rush-daemon --bench hot`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rush_daemon::bloom::ScalableBloom;
use rush_daemon::envelopes::split::next_share;
use rush_daemon::links::scramble::Scrambler;
use rush_protocol::cmd::links::code::codes_per_slot;
use rush_protocol::cmd::EnvelopeMode;
use rush_protocol::Code;
use std::hint::black_box;

fn codes(c: &mut Criterion) {
    let mut g = c.benchmark_group("code");
    g.throughput(Throughput::Elements(1));
    let s = Scrambler::new(*b"0123456789abcdef");
    for len in [5u8, 7, 8] {
        let slot = 1234;
        let n = codes_per_slot(len, slot);
        let mut i = 0u64;
        g.bench_function(format!("scramble + base62, {len} chars"), |b| {
            b.iter(|| {
                i = (i + 1) % n;
                let index = s.permute(slot, len, n, black_box(i));
                black_box(Code::generated(slot, len, index))
            })
        });
    }
    g.finish();
}

fn bloom(c: &mut Criterion) {
    let mut g = c.benchmark_group("bloom");
    g.throughput(Throughput::Elements(1));
    let mut f = ScalableBloom::new(1_000_000, 0.01);
    for h in 0..1_000_000u64 {
        f.insert(h.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    }
    let mut i = 0u64;
    g.bench_function("probe, present (1M items)", |b| {
        b.iter(|| {
            i = (i + 1) % 1_000_000;
            black_box(f.contains(black_box(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))))
        })
    });
    let mut j = 0u64;
    g.bench_function("probe, absent (1M items)", |b| {
        b.iter(|| {
            j += 1;
            black_box(f.contains(black_box(j.wrapping_mul(0xD6E8_FEB8_6659_FD93) | 1)))
        })
    });
    g.finish();
}

fn split(c: &mut Criterion) {
    let mut g = c.benchmark_group("envelope split");
    g.throughput(Throughput::Elements(1));
    let mut rng = SmallRng::seed_from_u64(7);
    for (name, mode) in [
        ("random", EnvelopeMode::Random),
        ("fixed", EnvelopeMode::Fixed),
    ] {
        g.bench_function(format!("{name}, 10000 cents among 100"), |b| {
            let mut left = (10_000u64, 100u32);
            b.iter(|| {
                if left.1 == 0 {
                    left = (10_000, 100);
                }
                let share = next_share(mode, 10_000, 100, left.0, left.1, &mut rng);
                left = (left.0 - share, left.1 - 1);
                black_box(share)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, codes, bloom, split);
criterion_main!(benches);
