//! What a write costs in RocksDB under each memtable and option set, without
//! the network, the protocol or the fsync: groups of puts of random keys laid
//! out as the shards lay them out (`slot | keyspace | key`), committed as one
//! WriteBatch each, then point reads. It prints the writing thread's CPU per
//! operation (the insert path: WAL append, memtable insert) and the whole
//! process's (flushes and compactions too), so a storage option is chosen on
//! a figure that a noisy machine doesn't move much.
//!
//! `cargo bench -p rush-daemon --bench storage -- [--keys N] [--ops N]
//! [--group N] [--value N] [VARIANT...]`; `--list` names the variants.

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, MemtableFactory, Options, SliceTransform,
    WriteBatch, WriteOptions, DB,
};
use std::hint::black_box;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Variant {
    name: &'static str,
    about: &'static str,
    apply: fn(&mut Options, &mut Options),
    /// How a group reaches RocksDB.
    mode: Mode,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Each group as it comes, one WriteBatch with the WAL.
    Batches,
    /// Groups gathered into runs of `RUN` keys, sorted, written without
    /// the WAL (a log of Rush's own would make them durable).
    SortedRuns,
    /// The same, with the WAL (not synced).
    SortedRunsWal,
    /// Runs sorted and written as SST files, ingested (no memtable at all).
    Ingest,
}

/// Keys per sorted run.
const RUN: usize = 131_072;

fn slot_hash(db: &mut Options, cf: &mut Options) {
    db.set_allow_concurrent_memtable_write(false);
    cf.set_prefix_extractor(SliceTransform::create_fixed_prefix(2));
    cf.set_memtable_factory(MemtableFactory::HashSkipList {
        bucket_count: 16384,
        height: 8,
        branching_factor: 4,
    });
    cf.set_memtable_prefix_bloom_ratio(0.1);
    cf.set_memtable_whole_key_filtering(true);
}

const VARIANTS: &[Variant] = &[
    Variant {
        name: "slot_hash",
        about: "today's default: a skiplist per slot, memtable Bloom filter",
        apply: slot_hash,
        mode: Mode::Batches,
    },
    Variant {
        name: "slot_hash_nobloom",
        about: "a skiplist per slot, no memtable Bloom filter",
        apply: |db, cf| {
            slot_hash(db, cf);
            cf.set_memtable_prefix_bloom_ratio(0.0);
            cf.set_memtable_whole_key_filtering(false);
        },
        mode: Mode::Batches,
    },
    Variant {
        name: "skiplist",
        about: "RocksDB's default: one skiplist, concurrent inserts, memtable Bloom filter",
        apply: |_, cf| {
            cf.set_memtable_prefix_bloom_ratio(0.1);
            cf.set_memtable_whole_key_filtering(true);
        },
        mode: Mode::Batches,
    },
    Variant {
        name: "key_hash",
        about: "a hash of the whole key (fixed-length keys only): the bound of a hashed memtable",
        apply: |db, cf| {
            db.set_allow_concurrent_memtable_write(false);
            cf.set_prefix_extractor(SliceTransform::create_fixed_prefix(KEY_LEN));
            cf.set_memtable_factory(MemtableFactory::HashLinkList {
                bucket_count: 1 << 20,
            });
        },
        mode: Mode::Batches,
    },
    Variant {
        name: "slot_hash_small",
        about: "a skiplist per slot, 16 MiB write buffers",
        apply: |db, cf| {
            slot_hash(db, cf);
            cf.set_write_buffer_size(16 << 20);
        },
        mode: Mode::Batches,
    },
    Variant {
        name: "slot_hash_big",
        about: "a skiplist per slot, 256 MiB write buffers",
        apply: |db, cf| {
            slot_hash(db, cf);
            cf.set_write_buffer_size(256 << 20);
        },
        mode: Mode::Batches,
    },
    Variant {
        name: "sorted_runs",
        about: "runs sorted in Rust, one skiplist, written without the WAL with insert hints",
        apply: |_, cf| {
            cf.set_memtable_prefix_bloom_ratio(0.1);
            cf.set_memtable_whole_key_filtering(true);
        },
        mode: Mode::SortedRuns,
    },
    Variant {
        name: "sorted_runs_wal",
        about: "runs sorted in Rust, one skiplist, written with the WAL (not synced)",
        apply: |_, cf| {
            cf.set_memtable_prefix_bloom_ratio(0.1);
            cf.set_memtable_whole_key_filtering(true);
        },
        mode: Mode::SortedRunsWal,
    },
    Variant {
        name: "sorted_runs_slot_hash",
        about: "runs sorted in Rust, a skiplist per slot, written without the WAL",
        apply: slot_hash,
        mode: Mode::SortedRuns,
    },
    Variant {
        name: "ingest",
        about: "runs sorted in Rust, written as SST files and ingested (no memtable)",
        apply: |_, _| {},
        mode: Mode::Ingest,
    },
];

/// `slot (2) | keyspace (1) | "key:" | 12 digits`: the bench's kv keys.
const KEY_LEN: usize = 2 + 1 + 4 + 12;

fn key(n: u64, out: &mut [u8; KEY_LEN]) {
    let text = format!("key:{n:012}");
    let slot = rush_protocol::key_slot(text.as_bytes());
    out[..2].copy_from_slice(&slot.to_be_bytes());
    out[2] = 0x01;
    out[3..].copy_from_slice(text.as_bytes());
}

fn cpu(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec it is given.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

struct Args {
    keys: u64,
    ops: u64,
    group: u64,
    value: usize,
    variants: Vec<String>,
}

fn args() -> Args {
    let mut a = Args {
        keys: 1_000_000,
        ops: 2_000_000,
        group: 200,
        value: 100,
        variants: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut num = || -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{arg} needs a number"))
        };
        match arg.as_str() {
            "--keys" => a.keys = num(),
            "--ops" => a.ops = num(),
            "--group" => a.group = num(),
            "--value" => a.value = num() as usize,
            "--bench" => {}
            "--list" => {
                for v in VARIANTS {
                    println!("{:20} {}", v.name, v.about);
                }
                std::process::exit(0);
            }
            other => a.variants.push(other.to_string()),
        }
    }
    if a.variants.is_empty() {
        a.variants = VARIANTS.iter().map(|v| v.name.to_string()).collect();
    }
    a
}

/// A tiny xorshift: the same key sequence for every variant.
struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn run(v: &Variant, a: &Args) {
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = Cache::new_lru_cache(256 << 20);
    let mut db_opts = Options::default();
    db_opts.create_if_missing(true);
    db_opts.create_missing_column_families(true);
    db_opts.set_max_background_jobs(2);
    db_opts.set_bytes_per_sync(1 << 20);
    let mut cf = Options::default();
    let mut block = BlockBasedOptions::default();
    block.set_block_cache(&cache);
    block.set_bloom_filter(10.0, false);
    block.set_cache_index_and_filter_blocks(true);
    cf.set_block_based_table_factory(&block);
    cf.set_write_buffer_size(64 << 20);
    cf.set_compression_type(rocksdb::DBCompressionType::Lz4);
    (v.apply)(&mut db_opts, &mut cf);
    let db = DB::open_cf_descriptors(
        &db_opts,
        dir.path(),
        vec![ColumnFamilyDescriptor::new("shard-0", cf)],
    )
    .expect("open");
    let handle = db.cf_handle("shard-0").expect("cf");
    let wo = WriteOptions::default();
    let value = vec![7u8; a.value];
    let mut k = [0u8; KEY_LEN];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    let (p0, t0, w0) = (
        cpu(libc::CLOCK_PROCESS_CPUTIME_ID),
        cpu(libc::CLOCK_THREAD_CPUTIME_ID),
        Instant::now(),
    );
    let mut done = 0;
    let mut run: Vec<[u8; KEY_LEN]> = Vec::with_capacity(RUN);
    let mut nowal = WriteOptions::default();
    nowal.disable_wal(true);
    nowal.set_memtable_insert_hint_per_batch(true);
    let mut files = 0;
    while done < a.ops {
        if v.mode == Mode::Batches {
            let mut batch = WriteBatch::default();
            for _ in 0..a.group {
                key(rng.next(a.keys), &mut k);
                batch.put_cf(&handle, k, &value);
            }
            db.write_opt(batch, &wo).expect("write");
        } else {
            for _ in 0..a.group {
                key(rng.next(a.keys), &mut k);
                run.push(k);
            }
        }
        done += a.group;
        if run.len() >= RUN || (done >= a.ops && !run.is_empty()) {
            run.sort_unstable();
            run.dedup();
            if v.mode != Mode::Ingest {
                let mut batch = WriteBatch::default();
                for k in &run {
                    batch.put_cf(&handle, k, &value);
                }
                let opts = if v.mode == Mode::SortedRuns {
                    &nowal
                } else {
                    &wo
                };
                db.write_opt(batch, opts).expect("write");
            } else {
                let path = dir.path().join(format!("run-{files}.sst"));
                files += 1;
                let sst_opts = Options::default();
                let mut w = rocksdb::SstFileWriter::create(&sst_opts);
                w.open(&path).expect("sst open");
                for k in &run {
                    w.put(k, &value).expect("sst put");
                }
                w.finish().expect("sst finish");
                db.ingest_external_file_cf(&handle, vec![&path])
                    .expect("ingest");
            }
            run.clear();
        }
    }
    db.flush_wal(false).expect("flush wal");
    // What the writes left to flush and compact is part of their cost.
    settle(&db);
    let (p1, t1, w1) = (
        cpu(libc::CLOCK_PROCESS_CPUTIME_ID),
        cpu(libc::CLOCK_THREAD_CPUTIME_ID),
        Instant::now(),
    );
    let ops = done as f64;
    let mut found = 0u64;
    let reads = a.ops.min(1_000_000);
    for _ in 0..reads {
        key(rng.next(a.keys * 2), &mut k);
        if db.get_pinned_cf(&handle, k).expect("get").is_some() {
            found += 1;
        }
    }
    let (t2, w2) = (cpu(libc::CLOCK_THREAD_CPUTIME_ID), Instant::now());
    println!(
        "{:20} put: thread {:5.2} µs/op, process {:5.2} µs/op, {:8.0} op/s | get (half absent): thread {:5.2} µs/op, {:8.0} op/s ({} found)",
        v.name,
        (t1 - t0) / ops,
        (p1 - p0) / ops,
        ops / (w1 - w0).as_secs_f64(),
        (t2 - t1) / reads as f64,
        reads as f64 / (w2 - w1).as_secs_f64(),
        black_box(found),
    );
}

/// Wait until RocksDB owes no flush or compaction.
fn settle(db: &DB) {
    let owed = |name: &str| db.property_int_value(name).ok().flatten().unwrap_or(0);
    loop {
        let busy = owed("rocksdb.num-running-compactions")
            + owed("rocksdb.num-running-flushes")
            + owed("rocksdb.mem-table-flush-pending")
            + owed("rocksdb.compaction-pending");
        if busy == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn main() {
    let a = args();
    println!(
        "{} puts of {} random keys out of {}, {} B values, one WriteBatch per {} (WAL, no fsync)",
        a.ops, a.ops, a.keys, a.value, a.group
    );
    for name in &a.variants {
        match VARIANTS.iter().find(|v| v.name == name) {
            Some(v) => run(v, &a),
            None => eprintln!("unknown variant {name} (--list names them)"),
        }
    }
}
