//! Step 2 of a slot move: the slot's range streamed to the target in
//! chunks of at most `migrate_chunk_keys` pairs and about
//! `migrate_chunk_bytes`; a larger value goes in parts.

use crate::cluster::peer::{PeerConn, PeerError};
use crate::cluster::shard_of;
use crate::cluster::store::MigrationRecord;
use crate::server::NodeShared;
use crate::storage::{keys, Storage, StorageError};
use bytes::Bytes;
use rush_protocol::cmd::{ImportPair, MigrateImport};

/// Step 2: stream the slot's range to the target. Returns (chunks, pairs,
/// bytes) as the target must have received them.
pub(super) async fn copy(
    node: &NodeShared,
    conn: &mut PeerConn,
    rec: &MigrationRecord,
) -> Result<(u32, u64, u64), PeerError> {
    let c = &node.cluster;
    let slot = rec.slot;
    let shard = shard_of(node, slot);
    let (start, end) = keys::slot_range(slot);
    let mut cursor = Some(Cursor {
        key: start,
        offset: 0,
    });
    let (max_keys, max_bytes) = (c.config.migrate_chunk_keys, c.config.migrate_chunk_bytes);
    let (mut seq, mut pairs_sent, mut bytes_sent) = (0u32, 0u64, 0u64);
    while let Some(cur) = cursor.take() {
        let storage = c.storage.clone();
        let end = end.clone();
        let first = seq == 0;
        let (mut pairs, next) = tokio::task::spawn_blocking(move || {
            let mut pairs = Vec::new();
            if first {
                if let Some((k, v)) = crate::links::export_extras(&storage, shard, slot)? {
                    pairs.push(ImportPair {
                        key: Bytes::from(k),
                        value: Bytes::from(v),
                        append: false,
                    });
                }
            }
            let next = read_chunk(&storage, shard, &cur, &end, max_keys, max_bytes, &mut pairs)?;
            Ok::<_, StorageError>((pairs, next))
        })
        .await
        .map_err(|e| PeerError::Unreachable(format!("read task: {e}")))?
        .map_err(|e| PeerError::Unreachable(format!("reading slot {slot}: {e}")))?;
        let n = pairs.len() as u64;
        bytes_sent += pairs
            .iter()
            .map(|p| (p.key.len() + p.value.len()) as u64)
            .sum::<u64>();
        let chunk = MigrateImport {
            id: rec.id,
            slot,
            seq,
            from: c.node_id.clone(),
            pairs: std::mem::take(&mut pairs),
        };
        conn.call(&chunk).await?;
        c.crash_point("source-after-chunk");
        seq += 1;
        pairs_sent += n;
        cursor = next;
    }
    Ok((seq, pairs_sent, bytes_sent))
}

/// Where the next chunk starts: a key, and how much of its value was sent.
struct Cursor {
    key: Vec<u8>,
    offset: usize,
}

/// Read one chunk from `cur` (up to `max_keys` pairs and about `max_bytes`;
/// a value larger than that goes in parts, one per chunk). Returns where
/// the next chunk starts, or `None` at the end of the slot.
fn read_chunk(
    storage: &Storage,
    shard: usize,
    cur: &Cursor,
    end: &[u8],
    max_keys: usize,
    max_bytes: usize,
    pairs: &mut Vec<ImportPair>,
) -> Result<Option<Cursor>, StorageError> {
    let mut size = pairs
        .iter()
        .map(|p| p.key.len() + p.value.len())
        .sum::<usize>();
    let mut next = None;
    storage.scan(shard, &cur.key, end, |k, v| {
        let offset = if k == cur.key.as_slice() {
            cur.offset
        } else {
            0
        };
        let rest = &v[offset.min(v.len())..];
        if !pairs.is_empty() && (pairs.len() >= max_keys || size + k.len() + rest.len() > max_bytes)
        {
            next = Some(Cursor {
                key: k.to_vec(),
                offset,
            });
            return false;
        }
        let part = &rest[..rest.len().min(max_bytes)];
        size += k.len() + part.len();
        pairs.push(ImportPair {
            key: Bytes::copy_from_slice(k),
            value: Bytes::copy_from_slice(part),
            append: offset > 0,
        });
        if part.len() < rest.len() {
            next = Some(Cursor {
                key: k.to_vec(),
                offset: offset + part.len(),
            });
            return false;
        }
        true
    })?;
    Ok(next)
}
