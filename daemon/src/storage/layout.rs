//! The data directory's layout record (its format and shard count) and
//! rebalancing: a directory written with another shard count has every key
//! moved to the column family of its slot's new shard.

use super::keys::{self, cf};
use super::{value, StorageError};
use rocksdb::{IteratorMode, ReadOptions, WriteBatch, WriteOptions, DB};
use std::path::Path;

const LAYOUT_FORMAT: u8 = 1;
/// Keys moved per atomic batch while rebalancing shards.
const REBALANCE_CHUNK: usize = 10_000;

/// Make the directory's layout `shards` shard column families: record it
/// in a new directory, rebalance one written with another count (in atomic
/// chunks, so a crash in the middle loses nothing and the next start
/// finishes the job). `names`: the column families opened; `existing`: those
/// the directory had.
pub(super) fn settle(
    db: &mut DB,
    names: &[String],
    existing: &[String],
    shards: usize,
    sync_opts: &WriteOptions,
    dir: &Path,
) -> Result<(), StorageError> {
    let layout = read_layout(db)?;
    let stale: Vec<usize> = names.iter().filter_map(|n| cf::parse_shard(n)).collect();
    match layout {
        Some(Layout {
            shards: old,
            rebalancing: false,
        }) if old == shards && stale.iter().all(|&i| i < shards) => {}
        Some(layout) => {
            tracing::warn!(
                from = layout.shards,
                to = shards,
                dir = %dir.display(),
                "data directory was written with another shard count: rebalancing"
            );
            let moving = Layout {
                rebalancing: true,
                ..layout
            };
            write_layout(db, sync_opts, moving)?;
            let moved = rebalance(db, &stale, shards, sync_opts)?;
            for i in stale.iter().copied().filter(|&i| i >= shards) {
                db.drop_cf(&cf::shard(i))?;
            }
            write_layout(db, sync_opts, Layout::settled(shards))?;
            tracing::warn!(moved, shards, "rebalancing finished");
        }
        None => {
            if existing.iter().any(|n| cf::parse_shard(n).is_some()) {
                return Err(StorageError::Layout {
                    dir: dir.to_path_buf(),
                    message: "has shard data but no layout record; refusing to guess".into(),
                });
            }
            write_layout(db, sync_opts, Layout::settled(shards))?;
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
struct Layout {
    shards: usize,
    /// Set while keys are being moved; a restart finishes the move.
    rebalancing: bool,
}

impl Layout {
    /// `shards` shard column families, no keys being moved.
    fn settled(shards: usize) -> Layout {
        Layout {
            shards,
            rebalancing: false,
        }
    }
}

fn read_layout(db: &DB) -> Result<Option<Layout>, StorageError> {
    let cf = db.cf_handle(cf::META).expect("meta column family exists");
    let Some(raw) = db.get_cf(cf, keys::meta::LAYOUT)? else {
        return Ok(None);
    };
    if raw.len() != 6 || raw[0] != LAYOUT_FORMAT {
        return Err(value::Corrupt(format!("layout record {raw:?}")).into());
    }
    Ok(Some(Layout {
        shards: u32::from_be_bytes(raw[1..5].try_into().expect("4 bytes")) as usize,
        rebalancing: raw[5] != 0,
    }))
}

fn write_layout(db: &DB, sync: &WriteOptions, layout: Layout) -> Result<(), StorageError> {
    let cf = db.cf_handle(cf::META).expect("meta column family exists");
    let mut raw = vec![LAYOUT_FORMAT];
    raw.extend_from_slice(&(layout.shards as u32).to_be_bytes());
    raw.push(layout.rebalancing as u8);
    let mut b = WriteBatch::default();
    b.put_cf(cf, keys::meta::LAYOUT, raw);
    db.write_opt(b, sync)?;
    Ok(())
}

/// Move every key whose slot now belongs to another shard. Each chunk puts
/// the keys into their new column family and deletes them from the old one in
/// one atomic, synced batch: idempotent, so an interrupted run is finished by
/// the next start.
fn rebalance(
    db: &DB,
    cfs: &[usize],
    shards: usize,
    sync: &WriteOptions,
) -> Result<u64, StorageError> {
    let mut moved = 0u64;
    for &from in cfs {
        let from_cf = db.cf_handle(&cf::shard(from)).expect("opened above");
        let mut batch = WriteBatch::default();
        let mut n = 0u64;
        // The iterator reads a snapshot, so writing chunks while iterating is safe.
        let mut ro = ReadOptions::default();
        ro.set_total_order_seek(true);
        for item in db.iterator_cf_opt(from_cf, ro, IteratorMode::Start) {
            let (k, v) = item?;
            let Some(slot) = keys::slot_of(&k) else {
                continue;
            };
            let to = crate::shard::route::shard_of_slot(slot, shards);
            if to == from {
                continue;
            }
            let to_cf = db
                .cf_handle(&cf::shard(to))
                .expect("all target shards opened");
            batch.put_cf(to_cf, &k, &v);
            batch.delete_cf(from_cf, &k);
            n += 1;
            if (n as usize).is_multiple_of(REBALANCE_CHUNK) {
                db.write_opt(std::mem::take(&mut batch), sync)?;
            }
        }
        db.write_opt(batch, sync)?;
        moved += n;
    }
    Ok(moved)
}
