//! Frame encode/decode on the hot path: a SET request (16-byte key, 100-byte
//! value, as the kv-set workload sends) and a GET reply carrying the value.
//!
//! `cargo bench -p rush-protocol --bench frame`

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rush_protocol::cmd::{Get, Set};
use rush_protocol::frame::{self, Header};
use rush_protocol::limits::DEFAULT_MAX_FRAME;
use rush_protocol::{Command, Reply, Request, Wire};
use std::hint::black_box;

fn set_request() -> Set {
    Set::new(
        Bytes::from_static(b"key:000000012345"),
        Bytes::from(vec![b'x'; 100]),
    )
}

fn encoded_set(n: u64) -> BytesMut {
    let cmd = set_request();
    let mut buf = BytesMut::new();
    for id in 0..n {
        frame::encode(&mut buf, Header::request(Set::OPCODE.as_u8(), id), |b| {
            cmd.encode(b)
        });
    }
    buf
}

fn frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("frame");
    g.throughput(Throughput::Elements(1));

    let cmd = set_request();
    let mut buf = BytesMut::with_capacity(64 * 1024);
    g.bench_function("encode SET request", |b| {
        b.iter(|| {
            buf.clear();
            frame::encode(&mut buf, Header::request(Set::OPCODE.as_u8(), 7), |o| {
                black_box(&cmd).encode(o)
            });
            black_box(buf.len())
        })
    });

    // Parse + decode, as the server's reader does: check the frame is whole,
    // split it off, decode the request and find its slot.
    let one = encoded_set(1).freeze();
    g.bench_function("parse + decode SET request", |b| {
        b.iter(|| {
            let mut rd = BytesMut::from(&one[..]);
            let f = frame::parse(&mut rd, DEFAULT_MAX_FRAME)
                .expect("valid")
                .expect("whole");
            let req = Request::decode(f.header.opcode, f.body).expect("decodes");
            black_box(req.target().expect("routes"))
        })
    });

    // A read buffer holding 64 pipelined frames, parsed one after another.
    let many = encoded_set(64).freeze();
    g.throughput(Throughput::Elements(64));
    g.bench_function("parse 64 pipelined SET frames", |b| {
        b.iter(|| {
            let mut rd = BytesMut::from(&many[..]);
            let mut n = 0;
            while let Some(f) = frame::parse(&mut rd, DEFAULT_MAX_FRAME).expect("valid") {
                n += f.body.len();
            }
            black_box(n)
        })
    });
    g.throughput(Throughput::Elements(1));

    let reply = Reply::Get(Some(Bytes::from(vec![b'x'; 100])));
    g.bench_function("encode GET reply", |b| {
        b.iter(|| {
            buf.clear();
            frame::encode_ok(&mut buf, Get::OPCODE.as_u8(), 7, |o| {
                black_box(&reply).encode_body(o)
            });
            black_box(buf.len())
        })
    });

    let mut out = BytesMut::new();
    frame::encode_ok(&mut out, Get::OPCODE.as_u8(), 7, |o| reply.encode_body(o));
    let out = out.freeze();
    g.bench_function("parse + decode GET reply", |b| {
        b.iter(|| {
            let mut rd = BytesMut::from(&out[..]);
            let f = frame::parse(&mut rd, DEFAULT_MAX_FRAME)
                .expect("valid")
                .expect("whole");
            let v = frame::decode_response::<<Get as Command>::Reply>(f.body)
                .expect("decodes")
                .expect("ok");
            black_box(v)
        })
    });
    g.finish();
}

criterion_group!(benches, frames);
criterion_main!(benches);
