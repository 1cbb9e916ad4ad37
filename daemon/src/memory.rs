//! Where the node's memory goes: each part the budget sizes
//! (`[memory]` in the config, [`crate::config::MemoryConfig`]) with what it
//! holds now and what it may hold, and the parts no setting sizes.
//!
//! RocksDB's parts (block cache, memtables) are read from RocksDB when
//! asked. A shard's own parts (its row cache, its writes held for
//! write-back, what its services keep) live on its thread: the shard
//! publishes them at every tick into cells of its own ([`ShardMemory`]),
//! so a scrape or an INFO reads them without asking the shard anything.
//! INFO's Memory section and `rush_memory_bytes{part}` /
//! `rush_memory_limit_bytes{part}` show them.

use crate::config::{Commit, Config, MEMTABLES_PER_SHARD, WRITE_BACK_BUFFERS};
use crate::storage::Storage;
use std::sync::atomic::{AtomicU64, Ordering};

/// A part of the node's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// RocksDB's block cache: data, index and filter blocks (all shards).
    BlockCache,
    /// RocksDB's memtables.
    Memtables,
    /// The shards' row caches (clean rows and pending writes' rows).
    RowCache,
    /// Writes held for write-back (`storage.commit = "log"`): the runs
    /// being filled and being written.
    WriteBack,
    /// The catalog's hot cache.
    CatalogCache,
    /// The catalog's Bloom filters (sized by the owners they hold).
    CatalogFilters,
    /// Services' state kept in memory (envelope books and their grabs,
    /// links' visit counters not yet written).
    HotState,
    /// Key filters: which keys of a kind a shard may hold, so a read of one
    /// it certainly lacks reads nothing (purchase limits' books and orders;
    /// sized by the keys they hold).
    KeyFilters,
    /// Committed records a primary keeps for its replicas
    /// (`replication.backlog_mb`; nothing until a replica first copies it).
    ReplicationBacklog,
}

impl Part {
    pub const ALL: [Part; 9] = [
        Part::BlockCache,
        Part::Memtables,
        Part::RowCache,
        Part::WriteBack,
        Part::CatalogCache,
        Part::CatalogFilters,
        Part::HotState,
        Part::KeyFilters,
        Part::ReplicationBacklog,
    ];

    /// Its name in INFO rows and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            Part::BlockCache => "block_cache",
            Part::Memtables => "memtables",
            Part::RowCache => "row_cache",
            Part::WriteBack => "write_back",
            Part::CatalogCache => "catalog_cache",
            Part::CatalogFilters => "catalog_filters",
            Part::HotState => "hot_state",
            Part::KeyFilters => "key_filters",
            Part::ReplicationBacklog => "replication_backlog",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The parts no share of the budget sizes: they grow with the data (the
/// filters), with what is in use (hot state) or with the writes replicas
/// have yet to fetch (the backlog, up to its own setting). Under a budget,
/// a shard's row cache yields what they hold (down to a quarter of its
/// share: a backlog larger than the rest goes past the budget).
pub const UNSIZED: [Part; 4] = [
    Part::CatalogFilters,
    Part::HotState,
    Part::KeyFilters,
    Part::ReplicationBacklog,
];

const PARTS: usize = Part::ALL.len();

/// What one shard's parts hold (bytes), as a shard and its services add
/// them up at a tick, and the limits the shard sets itself (the row cache's,
/// which yields to what no share sizes).
#[derive(Clone, Copy, Debug, Default)]
pub struct Use {
    held: [u64; PARTS],
    /// 0: the part's limit is its setting's.
    limits: [u64; PARTS],
}

impl Use {
    pub fn add(&mut self, part: Part, bytes: usize) {
        self.held[part.index()] += bytes as u64;
    }

    pub fn get(&self, part: Part) -> u64 {
        self.held[part.index()]
    }

    /// The part may hold `bytes` on this shard now.
    pub fn set_limit(&mut self, part: Part, bytes: usize) {
        self.limits[part.index()] = bytes as u64;
    }

    pub fn limit(&self, part: Part) -> u64 {
        self.limits[part.index()]
    }
}

#[repr(align(64))]
#[derive(Default)]
struct Cells([AtomicU64; 2 * PARTS]);

/// Each shard's last published [`Use`], one cache line per shard.
pub struct ShardMemory {
    shards: Box<[Cells]>,
}

impl ShardMemory {
    pub fn new(shards: usize) -> ShardMemory {
        ShardMemory {
            shards: (0..shards).map(|_| Cells::default()).collect(),
        }
    }

    /// Shard `shard`'s parts hold `now` (its thread only).
    pub fn publish(&self, shard: usize, now: &Use) {
        if let Some(cells) = self.shards.get(shard) {
            let values = now.held.iter().chain(&now.limits);
            for (cell, &bytes) in cells.0.iter().zip(values) {
                cell.store(bytes, Ordering::Relaxed);
            }
        }
    }

    /// Every shard's, summed.
    fn total(&self) -> Use {
        let mut sum = Use::default();
        for cells in self.shards.iter() {
            let sums = sum.held.iter_mut().chain(sum.limits.iter_mut());
            for (s, cell) in sums.zip(&cells.0) {
                *s += cell.load(Ordering::Relaxed);
            }
        }
        sum
    }
}

/// One part: what it holds, and what it may hold (`None`: no setting sizes
/// it; under a budget the row caches yield what it holds, see [`UNSIZED`]).
/// The row cache's limit is the one its shards set after yielding.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    pub part: Part,
    pub bytes: u64,
    pub limit: Option<u64>,
}

/// The node's memory now.
#[derive(Clone, Debug)]
pub struct Report {
    /// `memory.budget_mb` in bytes (0: no budget).
    pub budget: u64,
    pub rows: Vec<Row>,
    /// The process's resident memory (None off Linux).
    pub rss: Option<u64>,
}

const MIB: u64 = 1 << 20;

/// What each part holds and may hold; `config` is the node's (with its
/// budget applied: [`Config::apply_memory_budget`]).
pub fn report(config: &Config, storage: &Storage, shards: &ShardMemory) -> Report {
    let s = &config.storage;
    let n = shards.shards.len() as u64;
    let held = shards.total();
    let limit = |part| -> Option<u64> {
        if held.limit(part) > 0 {
            // The shards set it themselves.
            return Some(held.limit(part));
        }
        match part {
            Part::BlockCache => Some(s.block_cache_mb as u64 * MIB),
            Part::Memtables => {
                Some(s.write_buffer_mb as u64 * MIB * MEMTABLES_PER_SHARD as u64 * n)
            }
            Part::RowCache => Some(s.row_cache_mb as u64 * MIB),
            Part::WriteBack => Some(match s.commit {
                Commit::Log => s.write_back_mb as u64 * MIB * WRITE_BACK_BUFFERS as u64,
                Commit::Direct => 0,
            }),
            Part::CatalogCache => Some(config.catalog.cache_mb as u64 * MIB),
            Part::ReplicationBacklog => Some(config.replication.backlog_mb as u64 * MIB),
            Part::CatalogFilters | Part::HotState | Part::KeyFilters => None,
        }
    };
    let rows = Part::ALL
        .iter()
        .map(|&part| Row {
            part,
            bytes: match part {
                Part::BlockCache => storage.block_cache_usage() as u64,
                Part::Memtables => storage.property_sum("rocksdb.cur-size-all-mem-tables"),
                _ => held.get(part),
            },
            limit: limit(part),
        })
        .collect();
    Report {
        budget: config.memory.budget_mb as u64 * MIB,
        rows,
        rss: rss_bytes(),
    }
}

impl Report {
    /// INFO rows: `memory_budget_bytes`, `rss_bytes`, then each part's
    /// `memory_<part>_bytes` and, when sized, `memory_<part>_limit_bytes`.
    pub fn info_rows(&self, prefix: &str) -> Vec<(String, String)> {
        let mut rows = vec![(
            format!("{prefix}memory_budget_bytes"),
            self.budget.to_string(),
        )];
        for r in &self.rows {
            rows.push((
                format!("{prefix}memory_{}_bytes", r.part.name()),
                r.bytes.to_string(),
            ));
            if let Some(limit) = r.limit {
                rows.push((
                    format!("{prefix}memory_{}_limit_bytes", r.part.name()),
                    limit.to_string(),
                ));
            }
        }
        rows
    }
}

/// The process's resident memory, from /proc (Linux); None elsewhere.
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().map(|p| p * pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_sums_what_each_shard_published_last() {
        let m = ShardMemory::new(2);
        let mut a = Use::default();
        a.add(Part::RowCache, 100);
        a.add(Part::RowCache, 20);
        a.add(Part::CatalogCache, 7);
        m.publish(0, &a);
        let mut b = Use::default();
        b.add(Part::RowCache, 1);
        m.publish(1, &b);
        // A later publication replaces the shard's earlier one.
        m.publish(1, &b);
        let total = m.total();
        assert_eq!(total.get(Part::RowCache), 121);
        assert_eq!(total.limit(Part::RowCache), 0, "no shard set one");
        assert_eq!(total.get(Part::CatalogCache), 7);
        assert_eq!(total.get(Part::HotState), 0);
        // A shard that doesn't exist publishes nothing (and doesn't panic).
        m.publish(9, &a);
        assert_eq!(m.total().get(Part::RowCache), 121);
        // Limits the shards set are summed too.
        a.set_limit(Part::RowCache, 1000);
        b.set_limit(Part::RowCache, 24);
        m.publish(0, &a);
        m.publish(1, &b);
        assert_eq!(m.total().limit(Part::RowCache), 1024);
        assert_eq!(m.total().get(Part::RowCache), 121);
    }

    #[test]
    fn part_names_are_distinct_labels() {
        let mut names: Vec<_> = Part::ALL.iter().map(|p| p.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Part::ALL.len());
        for (i, p) in Part::ALL.iter().enumerate() {
            assert_eq!(p.index(), i);
        }
    }
}
