//! Storage: one RocksDB instance per node, one column family per shard plus
//! `meta` for node-wide records.
//!
//! The interface is deliberately small (STYLE 5):
//! - [`Storage::get`] reads one key of one shard (memtable, block cache, disk).
//! - [`Storage::write`] applies one [`WriteBatch`] atomically: every put and
//!   delete in it, across column families, or none. With `sync` it returns
//!   only after the WAL is fsynced — that is what "durable" means in Rush, and
//!   a shard makes one such call per group of requests (group commit).
//! - [`Storage::scan`] iterates a key range (startup rebuilds, audits).
//!
//! Expired values are dropped by a compaction filter that reads the node's
//! [`Clock`], so TTL costs nothing on the write path and disk is reclaimed in
//! the background; readers must still treat expired values as absent.

pub mod inline;
mod layout;
pub mod log;
pub mod merge;
mod ttl;

pub mod keys;
pub mod value;

use keys::cf;
use ttl::TtlFilterFactory;
pub use ttl::HASH_FIELD_GRACE_MS;

use crate::clock::Clock;
use crate::config::{StorageConfig, MEMTABLES_PER_SHARD, MIN_BLOCK_CACHE_MB, MIN_WRITE_BUFFER_MB};
use crate::metrics::local::{Counter, Gauge};
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBPinnableSlice, Direction,
    IngestExternalFileOptions, IteratorMode, Options, ReadOptions, SstFileWriter, WriteOptions, DB,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use rocksdb::WriteBatch;

/// The size of the batches a write back is cut into.
const WRITE_BACK_CHUNK: usize = 1 << 20;

/// Where a shard's run is written as an SST file before RocksDB takes it
/// in (`<data>/ingest/shard-N.sst`; emptied at open).
const INGEST_DIR: &str = "ingest";

/// Level-0 files at which a run's ingestion waits for compaction to catch
/// up (RocksDB's `level0_slowdown_writes_trigger`: where a flush would have
/// slowed writes). An ingestion is never stalled by RocksDB itself, and
/// every level-0 file is one more filter probe for each read of an absent
/// key.
const INGEST_WAIT_L0_FILES: u64 = 20;
/// The longest an ingestion waits for that (then it goes ahead).
const INGEST_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// Index entries between restart points of an SST file's index block.
const INDEX_RESTART_INTERVAL: i32 = 16;

/// A raw key and value.
pub type RawPair = (Vec<u8>, Vec<u8>);

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("rocksdb: {0}")]
    Rocks(#[from] rocksdb::Error),
    #[error(transparent)]
    Corrupt(#[from] value::Corrupt),
    #[error("data directory {dir}: {message}")]
    Layout { dir: PathBuf, message: String },
    #[error("shard log: {0}")]
    Log(#[from] log::LogError),
    #[error("shard log: {0}")]
    Io(#[from] std::io::Error),
}

/// One write of a run written back ([`Storage::write_back`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<'a> {
    Put(&'a [u8]),
    Delete,
    /// An operand for the merge operator (`storage::merge`).
    Merge(&'a [u8]),
}

/// Counters the metrics endpoint reads (per shard: every shard counts on
/// its own cache line, see `metrics::local`).
pub struct StorageStats {
    /// Group commits written: RocksDB batches and shard-log records.
    pub writes: Counter,
    /// Of those, fsynced.
    pub syncs: Counter,
    pub write_errors: Counter,
    pub reads: Counter,
    /// Keys in shard logs that RocksDB doesn't hold yet (`shard::pending`).
    pub pending_keys: Gauge,
    /// Shards writing a run of pending writes to RocksDB, or moving a
    /// landed one into their row cache: background work still owed.
    pub write_backs_running: Gauge,
}

impl StorageStats {
    fn new(shards: usize) -> StorageStats {
        let c = || Counter::detached(shards + 1);
        StorageStats {
            writes: c(),
            syncs: c(),
            write_errors: c(),
            reads: c(),
            pending_keys: Gauge::new(
                "storage_pending_keys",
                "Keys written to shard logs and not yet to RocksDB (storage.commit = \"log\")",
                shards + 1,
            ),
            write_backs_running: Gauge::new(
                "storage_write_backs_running",
                "Shards writing a run of shard-log writes to RocksDB or moving one into their row cache",
                shards + 1,
            ),
        }
    }
}

pub struct Storage {
    /// Plain `DB` (single-threaded column-family mode) is `Send + Sync`; the
    /// column-family set is fixed after `open`, so no locking is needed.
    db: Arc<DB>,
    shard_cfs: Vec<String>,
    dir: PathBuf,
    sync_opts: WriteOptions,
    relaxed_opts: WriteOptions,
    /// Point reads' options, made once (`get_pinned_cf` makes and frees a
    /// C++ `ReadOptions` per read).
    point_read_opts: ReadOptions,
    /// The memtable is one skiplist per slot (see [`Storage::scan`]).
    slot_memtable: bool,
    /// The block cache every shard's column family shares.
    block_cache: Cache,
    /// A shard column family's options, for the SST files runs are
    /// written to ([`Storage::write_back`]): the same table format,
    /// filters and compression as its flushes.
    sst_opts: Options,
    /// Those files are moved into the database, not copied.
    ingest_opts: IngestExternalFileOptions,
    /// Per shard: the last shard-log record its column family holds (every
    /// log was replayed at open, so a shard's new log starts after it).
    log_through: Vec<u64>,
    /// Bumped by every [`Storage::meta_put`]: a replica's primary sends the
    /// node records again when it changed (`replication`).
    meta_version: std::sync::atomic::AtomicU64,
    pub stats: StorageStats,
}

/// A consistent, read-only view of the whole node at one moment (a RocksDB
/// snapshot): what a replica's bootstrap copies ([`Storage::view`]).
pub struct View<'a> {
    storage: &'a Storage,
    snapshot: rocksdb::SnapshotWithThreadMode<'a, DB>,
}

impl View<'_> {
    /// Visit keys in `[from, to)` of a shard as of the view, in order,
    /// until `f` returns false (see [`Storage::scan`]).
    pub fn scan(
        &self,
        shard: usize,
        from: &[u8],
        to: &[u8],
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.storage
            .scan_at(Some(&self.snapshot), shard, from, to, f)
    }

    /// Meta records whose names start with `prefix`, as of the view.
    pub fn meta_scan(&self, prefix: &[u8]) -> Result<Vec<RawPair>, StorageError> {
        self.storage.meta_scan_at(Some(&self.snapshot), prefix)
    }
}

impl Storage {
    /// A small one-shard store in `dir` on the system clock, for unit tests
    /// (8 MiB block cache, 4 MiB memtables; `memtable` as given).
    #[cfg(test)]
    pub fn open_small(dir: &Path, memtable: crate::config::Memtable) -> Storage {
        let cfg = StorageConfig {
            data_dir: dir.to_path_buf(),
            block_cache_mb: 8,
            write_buffer_mb: 4,
            memtable,
            ..StorageConfig::default()
        };
        Storage::open(&cfg, 1, Clock::system()).expect("a small store opens")
    }

    /// Open (or create) the data directory with `shards` shard column
    /// families. A directory written with another shard count is rebalanced:
    /// every key is moved to the column family of its slot's new shard, in
    /// atomic chunks, so a crash in the middle loses nothing and the next
    /// start finishes the job.
    pub fn open(cfg: &StorageConfig, shards: usize, clock: Clock) -> Result<Storage, StorageError> {
        let dir = cfg.data_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::Layout {
            dir: dir.clone(),
            message: format!("can't create: {e}"),
        })?;
        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        db_opts.set_max_background_jobs(2);
        db_opts.set_bytes_per_sync(1 << 20);
        db_opts.set_keep_log_file_num(4);
        if cfg.memtable == crate::config::Memtable::SlotHash {
            // The hash memtable doesn't take concurrent inserts (each shard
            // commits its own batch; RocksDB groups them).
            db_opts.set_allow_concurrent_memtable_write(false);
        }

        let cache = Cache::new_lru_cache(cfg.block_cache_mb.max(MIN_BLOCK_CACHE_MB) << 20);
        // Where the compaction filters find the database (to read hash
        // headers), once it is open.
        let filter_db: ttl::DbSlot = Default::default();
        let shard_opts = |name: &str| {
            let mut o = Options::default();
            let mut block = BlockBasedOptions::default();
            block.set_block_cache(&cache);
            // Point lookups of absent keys (unknown codes, cold owners) mostly
            // stop at the SST filter instead of reading a block.
            block.set_bloom_filter(10.0, false);
            block.set_cache_index_and_filter_blocks(true);
            // Every file's index and filter block stays in the cache (charged
            // to it) for as long as the file lives: data blocks never push
            // them out. Unpinned, 10M catalog owners cost 135 µs of CPU per
            // query, most of it re-reading, checksumming and decompressing
            // index blocks, and a node holding them took 140 s to start;
            // pinned, 17 µs and 7 s, and 10 % less at 1M
            // (bench/results/NOTES.md, with the partitioned index that did
            // as well at 10M and cost 14 % at 1M).
            block.set_unpartitioned_pinning_tier(rocksdb::BlockBasedTablePinningTier::All);
            // A restart point every 16 index entries (RocksDB's default is
            // every entry): a cold read's binary search walks a restart
            // array 16 times smaller, which stays in the CPU's caches, then
            // a few entries side by side. At 10M links the index search fell
            // from 9.4 to 4.9 % of a resolve's CPU; at 1M it is even
            // (bench/results/NOTES.md). Files written before keep theirs.
            block.set_index_block_restart_interval(INDEX_RESTART_INTERVAL);
            o.set_block_based_table_factory(&block);
            o.set_write_buffer_size(cfg.write_buffer_mb.max(MIN_WRITE_BUFFER_MB) << 20);
            // What a memory budget counts on (`config::MEMTABLES_PER_SHARD`).
            o.set_max_write_buffer_number(MEMTABLES_PER_SHARD as i32);
            if cfg.memtable == crate::config::Memtable::SlotHash {
                // Keys start with their big-endian slot: one skiplist per
                // slot, so an insert walks a short list that stays in cache
                // instead of a million-key one. Scans ask for total order.
                o.set_prefix_extractor(rocksdb::SliceTransform::create_fixed_prefix(2));
                o.set_memtable_factory(rocksdb::MemtableFactory::HashSkipList {
                    bucket_count: rush_protocol::SLOTS as usize,
                    height: 8,
                    branching_factor: 4,
                });
            }
            // A Bloom filter over each memtable: most point reads are of
            // keys not in the (large) memtable, and a skiplist search per
            // read was the top cost of GET at a million keys.
            o.set_memtable_prefix_bloom_ratio(0.1);
            o.set_memtable_whole_key_filtering(true);
            o.set_compression_type(rocksdb::DBCompressionType::Lz4);
            // Visit statistics are added to without being read
            // (`storage::merge`).
            o.set_merge_operator_associative(merge::NAME, merge::rocksdb_merge);
            o.set_compaction_filter_factory(TtlFilterFactory {
                clock: clock.clone(),
                db: filter_db.clone(),
                cf: name.to_string(),
            });
            o
        };

        let existing = if dir.join("CURRENT").exists() {
            DB::list_cf(&db_opts, &dir)?
        } else {
            Vec::new()
        };
        let mut names: Vec<String> = vec![cf::META.to_string()];
        names.extend((0..shards).map(cf::shard));
        for name in &existing {
            if name != cf::DEFAULT && !names.contains(name) {
                names.push(name.clone());
            }
        }
        // The default and meta column families hold a few small records: a
        // small memtable keeps RocksDB's no-space recovery (which waits for
        // room to flush the largest memtable) from demanding 64 MiB.
        let small = || {
            let mut o = Options::default();
            o.set_write_buffer_size(1 << 20);
            o
        };
        let mut descriptors = vec![ColumnFamilyDescriptor::new(cf::DEFAULT, small())];
        for name in &names {
            let opts = if name == cf::META {
                small()
            } else {
                shard_opts(name)
            };
            descriptors.push(ColumnFamilyDescriptor::new(name, opts));
        }
        let mut db = DB::open_cf_descriptors(&db_opts, &dir, descriptors)?;

        let mut sync_opts = WriteOptions::default();
        sync_opts.set_sync(true);
        // Before rebalancing: a log holds its shard's keys of the layout
        // the directory was written with.
        replay_logs(&db, &dir, &sync_opts)?;
        layout::settle(&mut db, &names, &existing, shards, &sync_opts, &dir)?;
        let log_through = (0..shards)
            .map(|i| log_marker(&db, &dir, i))
            .collect::<Result<Vec<u64>, StorageError>>()?;

        // A run's file left by a crash is not in the database (its log
        // records were replayed above).
        let ingest = dir.join(INGEST_DIR);
        match std::fs::remove_dir_all(&ingest) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        std::fs::create_dir_all(&ingest)?;
        let sst_opts = shard_opts(&cf::shard(0));
        let mut ingest_opts = IngestExternalFileOptions::default();
        ingest_opts.set_move_files(true);

        let db = Arc::new(db);
        // Only a weak reference: the filters never keep the database open.
        let _ = filter_db.set(Arc::downgrade(&db));
        Ok(Storage {
            db,
            shard_cfs: (0..shards).map(cf::shard).collect(),
            dir,
            sync_opts,
            relaxed_opts: WriteOptions::default(),
            point_read_opts: ReadOptions::default(),
            slot_memtable: cfg.memtable == crate::config::Memtable::SlotHash,
            block_cache: cache,
            sst_opts,
            ingest_opts,
            log_through,
            meta_version: std::sync::atomic::AtomicU64::new(1),
            stats: StorageStats::new(shards),
        })
    }

    /// Shard `shard`'s log directory.
    pub fn log_dir(&self, shard: usize) -> PathBuf {
        log::shard_dir(&self.dir, shard)
    }

    /// The last shard-log record shard `shard`'s column family held at
    /// open: its new log starts after it.
    pub fn log_through(&self, shard: usize) -> u64 {
        self.log_through.get(shard).copied().unwrap_or(0)
    }

    /// Write a shard's pending writes, in the order given (key order: a
    /// sorted run, each key once), then the last log record they reach,
    /// synced: once it returns, that part of the shard's log may go.
    ///
    /// A run written in the background is written as one SST file, synced,
    /// and moved into the shard's column family (RocksDB's external file
    /// ingestion): no WAL (the shard's log already holds the run), no
    /// memtable insert, no flush. Building a WriteBatch, inserting it into
    /// the memtable and flushing that was a fifth of the CPU of every write
    /// workload, and the WAL copy another 5–6 % before it was skipped
    /// (bench/results/NOTES.md). A crash either finds the position with
    /// the run in the database, or the old position and the log records to
    /// replay (which write the same newest values again).
    ///
    /// A run the shard waits for (`through_wal`: a scan that must see
    /// RocksDB whole, a slot move) goes through the WAL instead, unsynced
    /// but for the last batch, with the position: one fsync, where a file
    /// would cost more and leave a small SST file per wait (a link slot's
    /// first load under write traffic waits for one: 168 flushes in 8 s,
    /// and shorten at 0.57× its throughput, when these flushed too). Its
    /// writes sit in the memtable, under the WAL; the next ingested run
    /// flushes them first when their keys overlap (RocksDB does, so that
    /// the newer run stays newer).
    ///
    /// Those batches are about [`WRITE_BACK_CHUNK`] each (one large batch
    /// would grow, copying itself, into fresh memory the kernel must zero
    /// first: a quarter of the CPU in a profile).
    pub fn write_back<'a>(
        &self,
        shard: usize,
        run: impl Iterator<Item = (&'a [u8], Op<'a>)>,
        through: u64,
        through_wal: bool,
    ) -> Result<(), StorageError> {
        let cf = self.cf(shard);
        let mut batch = WriteBatch::with_capacity_bytes(WRITE_BACK_CHUNK + (64 << 10));
        if through_wal {
            for (k, op) in run {
                match op {
                    Op::Put(v) => batch.put_cf(cf, k, v),
                    Op::Delete => batch.delete_cf(cf, k),
                    Op::Merge(v) => batch.merge_cf(cf, k, v),
                }
                if batch.size_in_bytes() >= WRITE_BACK_CHUNK {
                    let full = std::mem::replace(
                        &mut batch,
                        WriteBatch::with_capacity_bytes(WRITE_BACK_CHUNK + (64 << 10)),
                    );
                    self.write_with(full, &self.relaxed_opts)?;
                }
            }
        } else {
            self.ingest(shard, run)?;
        }
        batch.put_cf(
            self.meta_cf(),
            keys::meta::shard_log(shard),
            through.to_be_bytes(),
        );
        self.write_with(batch, &self.sync_opts)
    }

    /// Write `run` (strictly ascending keys) to an SST file and move it
    /// into shard `shard`'s column family. Nothing to write, no file.
    fn ingest<'a>(
        &self,
        shard: usize,
        run: impl Iterator<Item = (&'a [u8], Op<'a>)>,
    ) -> Result<(), StorageError> {
        let mut run = run.peekable();
        if run.peek().is_none() {
            return Ok(());
        }
        let path = self.dir.join(INGEST_DIR).join(format!("shard-{shard}.sst"));
        let mut file = SstFileWriter::create(&self.sst_opts);
        self.counted(file.open(&path))?;
        for (k, op) in run {
            self.counted(match op {
                Op::Put(v) => file.put(k, v),
                Op::Delete => file.delete(k),
                Op::Merge(v) => file.merge(k, v),
            })?;
        }
        // Synced here; moved (linked) by the ingestion, which syncs the
        // directory and the manifest.
        self.counted(file.finish())?;
        page_cache_read_ahead(&path);
        self.wait_for_level0(shard);
        self.counted(self.db.ingest_external_file_cf_opts(
            self.cf(shard),
            &self.ingest_opts,
            vec![&path],
        ))
    }

    /// Wait (at most [`INGEST_WAIT_MAX`]) while shard `shard` has
    /// [`INGEST_WAIT_L0_FILES`] or more level-0 files.
    fn wait_for_level0(&self, shard: usize) {
        let started = std::time::Instant::now();
        let level0 = rocksdb::properties::num_files_at_level(0);
        while let Ok(Some(n)) = self.db.property_int_value_cf(self.cf(shard), &level0) {
            if n < INGEST_WAIT_L0_FILES || started.elapsed() >= INGEST_WAIT_MAX {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    fn write_with(&self, batch: WriteBatch, opts: &WriteOptions) -> Result<(), StorageError> {
        self.counted(self.db.write_opt(batch, opts))
    }

    /// A RocksDB write's outcome, its failure counted.
    fn counted<T>(&self, outcome: Result<T, rocksdb::Error>) -> Result<T, StorageError> {
        outcome.map_err(|e| {
            self.stats.write_errors.inc();
            e.into()
        })
    }

    /// A write that is no group commit (a write back): only a failure is
    /// counted ([`Storage::write`] counts the rest).
    fn write_uncounted(&self, batch: WriteBatch, sync: bool) -> Result<(), StorageError> {
        let opts = if sync {
            &self.sync_opts
        } else {
            &self.relaxed_opts
        };
        self.write_with(batch, opts)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn shards(&self) -> usize {
        self.shard_cfs.len()
    }

    /// The column family handle of a shard (for building batches).
    pub fn cf(&self, shard: usize) -> &ColumnFamily {
        self.db
            .cf_handle(&self.shard_cfs[shard])
            .expect("shard column families exist for the life of Storage")
    }

    fn meta_cf(&self) -> &ColumnFamily {
        self.db
            .cf_handle(cf::META)
            .expect("meta column family exists")
    }

    /// Read one key of a shard.
    pub fn get(
        &self,
        shard: usize,
        key: &[u8],
    ) -> Result<Option<DBPinnableSlice<'_>>, StorageError> {
        self.stats.reads.inc();
        Ok(self
            .db
            .get_pinned_cf_opt(self.cf(shard), key, &self.point_read_opts)?)
    }

    /// Point reads of several keys of a shard in one call: RocksDB's
    /// batched MultiGet, which probes each file's filter and index for all
    /// of them together instead of walking the levels once per key. One
    /// result per key, in order.
    pub fn multi_get<'k>(
        &self,
        shard: usize,
        keys: impl IntoIterator<Item = &'k [u8]>,
    ) -> Vec<Result<Option<DBPinnableSlice<'_>>, StorageError>> {
        let found =
            self.db
                .batched_multi_get_cf_opt(self.cf(shard), keys, false, &self.point_read_opts);
        self.stats.reads.inc_by(found.len() as u64);
        found
            .into_iter()
            .map(|r| r.map_err(StorageError::from))
            .collect()
    }

    /// Apply a batch atomically; with `sync`, durable (WAL fsynced) on return.
    pub fn write(&self, batch: WriteBatch, sync: bool) -> Result<(), StorageError> {
        self.write_uncounted(batch, sync)?;
        self.stats.writes.inc();
        if sync {
            self.stats.syncs.inc();
        }
        Ok(())
    }

    /// Visit keys in `[from, to)` of a shard in order until `f` returns false.
    ///
    /// With the per-slot memtable (`storage.memtable = "slot_hash"`) a range
    /// is read one slot at a time, each a prefix seek: an iterator in total
    /// order over that memtable would first copy all of it into one sorted
    /// list. (Every key starts with its slot, so the concatenation of the
    /// slots' ranges is the range.)
    pub fn scan(
        &self,
        shard: usize,
        from: &[u8],
        to: &[u8],
        f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        self.scan_at(None, shard, from, to, f)
    }

    /// [`Storage::scan`], as of `snapshot` when given.
    fn scan_at(
        &self,
        snapshot: Option<&rocksdb::SnapshotWithThreadMode<'_, DB>>,
        shard: usize,
        from: &[u8],
        to: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StorageError> {
        if !self.slot_memtable {
            return self
                .scan_one(snapshot, shard, from, to, false, &mut f)
                .map(|_| ());
        }
        let first = keys::slot_of_bound(from).min(u32::from(rush_protocol::SLOTS) - 1);
        let last = keys::slot_of_bound(to).min(u32::from(rush_protocol::SLOTS) - 1);
        for slot in first..=last {
            let start = keys::slot_prefix(slot as u16);
            let next = keys::slot_prefix((slot + 1) as u16);
            let lo: &[u8] = if from > &start[..] { from } else { &start };
            let hi: &[u8] = if to < &next[..] { to } else { &next };
            if !self.scan_one(snapshot, shard, lo, hi, true, &mut f)? {
                break;
            }
        }
        Ok(())
    }

    /// One iterator over `[from, to)`; `prefix`: a seek within one slot.
    /// False when `f` stopped it.
    fn scan_one(
        &self,
        snapshot: Option<&rocksdb::SnapshotWithThreadMode<'_, DB>>,
        shard: usize,
        from: &[u8],
        to: &[u8],
        prefix: bool,
        f: &mut impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool, StorageError> {
        if from >= to {
            return Ok(true);
        }
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(to.to_vec());
        ro.fill_cache(false);
        if let Some(s) = snapshot {
            ro.set_snapshot(s);
        }
        if prefix {
            ro.set_prefix_same_as_start(true);
        } else {
            ro.set_total_order_seek(true);
        }
        let iter = self.db.iterator_cf_opt(
            self.cf(shard),
            ro,
            IteratorMode::From(from, Direction::Forward),
        );
        for item in iter {
            let (k, v) = item?;
            if !f(&k, &v) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Raw entries in a range, expired ones included (tests, audits).
    pub fn count_raw(&self, shard: usize, from: &[u8], to: &[u8]) -> Result<usize, StorageError> {
        let mut n = 0;
        self.scan(shard, from, to, |_, _| {
            n += 1;
            true
        })?;
        Ok(n)
    }

    /// Compact a shard's whole column family now (flushes the memtable first).
    pub fn compact(&self, shard: usize) {
        self.db
            .compact_range_cf(self.cf(shard), None::<&[u8]>, None::<&[u8]>);
    }

    pub fn meta_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.db.get_cf(self.meta_cf(), key)?)
    }

    /// Durable write of one meta record.
    pub fn meta_put(&self, key: &[u8], value: &[u8]) -> Result<(), StorageError> {
        let mut b = WriteBatch::default();
        b.put_cf(self.meta_cf(), key, value);
        self.write(b, true)?;
        self.meta_version
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(())
    }

    /// Changes with every [`Storage::meta_put`] (never 0).
    pub fn meta_version(&self) -> u64 {
        self.meta_version.load(std::sync::atomic::Ordering::Acquire)
    }

    /// A consistent view of every column family as of now.
    pub fn view(&self) -> View<'_> {
        View {
            storage: self,
            snapshot: self.db.snapshot(),
        }
    }

    /// The meta column family's handle (for replicated batches).
    pub fn meta_family(&self) -> &ColumnFamily {
        self.meta_cf()
    }

    /// Add a meta record to a batch (so it commits with shard data).
    pub fn batch_meta_put(&self, batch: &mut WriteBatch, key: &[u8], value: &[u8]) {
        batch.put_cf(self.meta_cf(), key, value);
    }

    /// Add the removal of a meta record to a batch.
    pub fn batch_meta_delete(&self, batch: &mut WriteBatch, key: &[u8]) {
        batch.delete_cf(self.meta_cf(), key);
    }

    /// Meta records whose names start with `prefix`.
    pub fn meta_scan(&self, prefix: &[u8]) -> Result<Vec<RawPair>, StorageError> {
        self.meta_scan_at(None, prefix)
    }

    fn meta_scan_at(
        &self,
        snapshot: Option<&rocksdb::SnapshotWithThreadMode<'_, DB>>,
        prefix: &[u8],
    ) -> Result<Vec<RawPair>, StorageError> {
        let mut out = Vec::new();
        let mut ro = ReadOptions::default();
        if let Some(s) = snapshot {
            ro.set_snapshot(s);
        }
        let iter = self.db.iterator_cf_opt(
            self.meta_cf(),
            ro,
            IteratorMode::From(prefix, Direction::Forward),
        );
        for item in iter {
            let (k, v) = item?;
            if !k.starts_with(prefix) {
                break;
            }
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
    }

    /// About how many records the shards hold: RocksDB's estimate, plus
    /// the keys still pending in shard logs.
    pub fn keys_estimate(&self) -> u64 {
        self.property_sum("rocksdb.estimate-num-keys") + self.stats.pending_keys.get().max(0) as u64
    }

    /// Bytes the block cache holds (data, index and filter blocks).
    pub fn block_cache_usage(&self) -> usize {
        self.block_cache.get_usage()
    }

    /// A RocksDB integer property summed over shards (e.g. estimate-num-keys).
    pub fn property_sum(&self, name: &str) -> u64 {
        (0..self.shards())
            .filter_map(|i| {
                self.db
                    .property_int_value_cf(self.cf(i), name)
                    .ok()
                    .flatten()
            })
            .sum()
    }

    /// A RocksDB integer property of the whole database (e.g.
    /// num-running-compactions), 0 when RocksDB doesn't report it.
    pub fn property(&self, name: &str) -> u64 {
        self.db.property_int_value(name).ok().flatten().unwrap_or(0)
    }

    /// Make sure everything acknowledged is on disk (shutdown).
    pub fn flush(&self) -> Result<(), StorageError> {
        self.db.flush_wal(true)?;
        for i in 0..self.shards() {
            self.db.flush_cf(self.cf(i))?;
        }
        Ok(())
    }
}

/// The last shard-log record shard `shard`'s column family holds.
fn log_marker(db: &DB, dir: &Path, shard: usize) -> Result<u64, StorageError> {
    let meta = db.cf_handle(cf::META).expect("meta column family exists");
    match db.get_cf(meta, keys::meta::shard_log(shard))? {
        Some(v) => Ok(u64::from_be_bytes(v.as_slice().try_into().map_err(
            |_| StorageError::Layout {
                dir: dir.to_path_buf(),
                message: format!("shard-log record {shard} is not 8 bytes"),
            },
        )?)),
        None => Ok(0),
    }
}

/// Ask the kernel to read `path` back into the page cache. `SstFileWriter`
/// drops what it wrote from the cache (`POSIX_FADV_DONTNEED` as it writes
/// and when it finishes), so without this the first reads of a run's keys,
/// and the compaction that merges it, wait for the disk; a flushed
/// memtable's file stays cached. One `POSIX_FADV_WILLNEED` reads at most
/// the device's readahead size, so the file is asked for a chunk at a time;
/// the reads are the kernel's, in the background. Best effort.
fn page_cache_read_ahead(path: &Path) {
    use std::os::fd::AsRawFd;
    const CHUNK: u64 = 2 << 20;
    let Ok(file) = std::fs::File::open(path) else {
        return;
    };
    let size = file.metadata().map_or(0, |m| m.len());
    let mut at = 0;
    while at < size {
        // SAFETY: a plain syscall on a descriptor `file` owns.
        let rc = unsafe {
            libc::posix_fadvise(
                file.as_raw_fd(),
                at as libc::off_t,
                CHUNK as libc::off_t,
                libc::POSIX_FADV_WILLNEED,
            )
        };
        if rc != 0 {
            return;
        }
        at += CHUNK;
    }
}

/// Replay every shard log in `dir` into its shard's column family (records
/// after the one the column family holds), synced, then delete the logs.
fn replay_logs(db: &DB, dir: &Path, sync: &WriteOptions) -> Result<(), StorageError> {
    let logs = match std::fs::read_dir(dir.join(log::LOG_DIR)) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(StorageError::Layout {
                dir: dir.to_path_buf(),
                message: format!("can't read {}: {e}", log::LOG_DIR),
            })
        }
    };
    let meta = db.cf_handle(cf::META).expect("meta column family exists");
    for entry in logs.flatten() {
        let name = entry.file_name();
        let Some(shard) = name
            .to_str()
            .and_then(|n| n.strip_prefix("shard-"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let marker = keys::meta::shard_log(shard);
        let after = log_marker(db, dir, shard)?;
        let log_dir = entry.path();
        let Some(cf) = db.cf_handle(&cf::shard(shard)) else {
            if log::replay(&log_dir, after, |_, _| Ok(()))? > after {
                return Err(StorageError::Layout {
                    dir: dir.to_path_buf(),
                    message: format!("a log for shard {shard} but no column family for it"),
                });
            }
            continue;
        };
        let mut batch = WriteBatch::default();
        let mut replayed = 0u64;
        let last = log::replay(&log_dir, after, |seq, entries| {
            for e in entries {
                match e {
                    Ok(log::Entry::Put(k, v)) => batch.put_cf(cf, k, v),
                    Ok(log::Entry::Delete(k)) => batch.delete_cf(cf, k),
                    Ok(log::Entry::Merge(k, v)) => batch.merge_cf(cf, k, v),
                    Err(()) => unreachable!("records are checked whole before replay"),
                }
            }
            replayed += 1;
            if batch.size_in_bytes() > 64 << 20 {
                let mut full = std::mem::take(&mut batch);
                full.put_cf(meta, &marker, seq.to_be_bytes());
                db.write_opt(full, sync).map_err(|e| log::LogError::Io {
                    path: log_dir.clone(),
                    source: std::io::Error::other(e),
                })?;
            }
            Ok(())
        })?;
        batch.put_cf(meta, &marker, last.to_be_bytes());
        db.write_opt(batch, sync)?;
        log::clear(&log_dir).map_err(|e| StorageError::Layout {
            dir: dir.to_path_buf(),
            message: format!("can't clear {}: {e}", log_dir.display()),
        })?;
        if replayed > 0 {
            tracing::info!(
                shard,
                records = replayed,
                through = last,
                "shard log replayed"
            );
        }
    }
    Ok(())
}

impl Drop for Storage {
    /// Stop compactions before the database closes: a compaction filter
    /// holding the database while it reads a hash header must be done with
    /// it first, or the last reference could be dropped on a compaction
    /// thread, which would wait for itself.
    fn drop(&mut self) {
        self.db.cancel_all_background_work(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(slot: u16, name: &str) -> Vec<u8> {
        let mut k = slot.to_be_bytes().to_vec();
        k.extend_from_slice(name.as_bytes());
        k
    }

    fn read(storage: &Storage, k: &[u8]) -> Option<Vec<u8>> {
        storage.get(0, k).unwrap().map(|v| v.to_vec())
    }

    /// A run written in the background lands as one ingested file: its
    /// puts and deletes win over older values in SST files and in the
    /// memtable, its position is recorded, it outlives a reopen without
    /// any log, and no file is left behind in the ingest directory.
    #[test]
    fn an_ingested_run_replaces_what_was_there_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let memtables = [
            crate::config::Memtable::SlotHash,
            crate::config::Memtable::Skiplist,
        ];
        for memtable in memtables {
            let _ = std::fs::remove_dir_all(dir.path());
            {
                let storage = Storage::open_small(dir.path(), memtable);
                // Older values: one flushed to an SST file, one in the
                // memtable (through the WAL, as a waited-for run is).
                let older: [(&[u8], Op); 3] = [
                    (&key(1, "flushed"), Op::Put(b"old")),
                    (&key(3, "x"), Op::Put(b"1")),
                    (&key(5, "stats"), Op::Put(&stats(2, &[(7, 2)]))),
                ];
                storage.write_back(0, older.into_iter(), 1, true).unwrap();
                storage.flush().unwrap();
                let memtable_only: [(&[u8], Op); 3] = [
                    (&key(2, "in-memtable"), Op::Put(b"old")),
                    (&key(5, "stats"), Op::Merge(&stats(1, &[(8, 1)]))),
                    (&key(9, "kept"), Op::Put(b"kept")),
                ];
                storage
                    .write_back(0, memtable_only.into_iter(), 2, true)
                    .unwrap();

                let (a, b, c, d, e, f) = (
                    key(1, "flushed"),
                    key(2, "in-memtable"),
                    key(3, "x"),
                    key(4, "new"),
                    key(5, "stats"),
                    key(6, "stats"),
                );
                let (added, alone) = (stats(4, &[(8, 4)]), stats(3, &[(9, 3)]));
                let run: [(&[u8], Op); 6] = [
                    (&a, Op::Put(b"new")),
                    (&b, Op::Delete),
                    (&c, Op::Put(b"2")),
                    (&d, Op::Put(b"fresh")),
                    (&e, Op::Merge(&added)),
                    (&f, Op::Merge(&alone)),
                ];
                storage.write_back(0, run.into_iter(), 7, false).unwrap();
                // Nothing to write: no file, the position still moves.
                storage.write_back(0, std::iter::empty(), 8, false).unwrap();
                let left = std::fs::read_dir(dir.path().join(INGEST_DIR))
                    .unwrap()
                    .count();
                assert_eq!(left, 0, "the run's file was moved in; none for nothing");
            }
            let storage = Storage::open_small(dir.path(), memtable);
            assert_eq!(storage.log_through(0), 8, "{memtable:?}");
            assert_eq!(
                read(&storage, &key(1, "flushed")).as_deref(),
                Some(&b"new"[..])
            );
            assert_eq!(read(&storage, &key(2, "in-memtable")), None);
            assert_eq!(read(&storage, &key(3, "x")).as_deref(), Some(&b"2"[..]));
            assert_eq!(
                read(&storage, &key(4, "new")).as_deref(),
                Some(&b"fresh"[..])
            );
            assert_eq!(
                read(&storage, &key(9, "kept")).as_deref(),
                Some(&b"kept"[..])
            );
            // Operands through the WAL and in the ingested file add up
            // over the stored value; one with nothing under it stands alone.
            assert_eq!(
                read(&storage, &key(5, "stats")),
                Some(stats(7, &[(7, 2), (8, 5)])),
                "{memtable:?}"
            );
            assert_eq!(read(&storage, &key(6, "stats")), Some(stats(3, &[(9, 3)])));
            storage.flush().unwrap();
            storage.compact(0);
            assert_eq!(
                read(&storage, &key(5, "stats")),
                Some(stats(7, &[(7, 2), (8, 5)])),
                "{memtable:?}: merged by a compaction"
            );
        }
    }

    /// A link's visit statistics as stored: `total` visits over `days`.
    fn stats(total: u64, days: &[(u32, u64)]) -> Vec<u8> {
        let s = crate::links::record::Stats {
            total,
            last_visit: 0,
            days: days.into(),
        };
        value::encode(keys::kind::LINK_STATS, 0, &s.encode())
    }

    /// Every SST file's index and filter blocks are pinned in the block
    /// cache from the moment its table is opened: a read leaves them there
    /// for good, whatever data blocks come after (unpinned, a large data
    /// set pushed them out and every cold read loaded them again:
    /// bench/results/NOTES.md).
    #[test]
    fn index_and_filter_blocks_stay_pinned_in_the_block_cache() {
        let dir = tempfile::tempdir().unwrap();
        let storage = Storage::open_small(dir.path(), crate::config::Memtable::SlotHash);
        let before = storage.block_cache.get_pinned_usage();
        let mut keys: Vec<Vec<u8>> = (0..2000).map(|i| key(i % 64, &format!("k{i}"))).collect();
        keys.sort();
        let value = vec![b'v'; 200];
        let run = keys
            .iter()
            .map(|k| (k.as_slice(), Op::Put(value.as_slice())));
        storage.write_back(0, run, 1, false).unwrap();
        read(&storage, &keys[7]).expect("written");
        let pinned = storage.block_cache.get_pinned_usage();
        assert!(pinned > before, "the file's index and filter are pinned");
        // Reading every key walks its data blocks through the cache; the
        // pinned blocks stay.
        for k in &keys {
            read(&storage, k).expect("written");
        }
        assert!(storage.block_cache.get_pinned_usage() >= pinned);
    }
}
