//! ID segments: collision-free identifiers without a hot global counter.
//!
//! Every (slot, sequence kind) has a durable high-water mark (HWM). A shard
//! hands out IDs from an in-memory segment `[next, end)` and, when a fifth of
//! the segment is left, reserves the next one by writing a new HWM — in the
//! same group commit as the requests that are using IDs, synced. Because a
//! group commit is atomic, an ID is never acknowledged unless a HWM at or
//! above it is on disk; after a crash the shard resumes from the HWM, so the
//! unused rest of a segment is skipped, never reused.
//!
//! The reservation rides along with writes that are synced anyway, so no
//! request waits for a reservation of its own. A "wait" (counted) is a
//! request that found no prefetched segment — the first ID of a slot after a
//! start, or a step too small for the load.

use crate::shard::txn::Txn;
use crate::storage::keys::kind;
use crate::storage::value;
use crate::storage::{keys, StorageError};
use hashbrown::HashMap;

/// One sequence: which kind, how many IDs a reservation takes, and the size
/// of the ID space (IDs are `0..limit`).
#[derive(Debug, Clone, Copy)]
pub struct SeqSpec {
    pub kind: u8,
    pub step: u64,
    pub limit: u64,
}

#[derive(Debug)]
struct Seq {
    next: u64,
    end: u64,
    /// The persisted (or, within the open group, about-to-be) HWM.
    hwm: u64,
    prefetched: Option<(u64, u64)>,
}

/// All sequences of one shard. Lives on the shard thread.
#[derive(Debug, Default)]
pub struct Segments {
    seqs: HashMap<(u16, u8), Seq>,
    /// Segments reserved since start.
    pub reserved: u64,
    /// IDs that had to reserve their own segment (no prefetch ready).
    pub waits: u64,
}

impl Segments {
    /// The next ID of `spec` in `slot`, or `None` when all of `0..limit`
    /// has been handed out.
    pub fn next(
        &mut self,
        slot: u16,
        spec: &SeqSpec,
        txn: &mut Txn,
    ) -> Result<Option<u64>, StorageError> {
        if !self.seqs.contains_key(&(slot, spec.kind)) {
            let hwm = load_hwm(slot, spec.kind, txn)?;
            self.seqs.insert(
                (slot, spec.kind),
                Seq {
                    next: hwm,
                    end: hwm,
                    hwm,
                    prefetched: None,
                },
            );
        }
        let seq = self
            .seqs
            .get_mut(&(slot, spec.kind))
            .expect("inserted above");
        if seq.next >= seq.end {
            match seq.prefetched.take() {
                Some((start, end)) => {
                    seq.next = start;
                    seq.end = end;
                }
                None => {
                    let Some((start, end)) = reserve(seq, slot, spec, txn) else {
                        return Ok(None);
                    };
                    self.reserved += 1;
                    self.waits += 1;
                    seq.next = start;
                    seq.end = end;
                }
            }
        }
        let id = seq.next;
        seq.next += 1;
        if seq.prefetched.is_none() && seq.end - seq.next <= spec.step / 5 {
            if let Some(next) = reserve(seq, slot, spec, txn) {
                self.reserved += 1;
                seq.prefetched = Some(next);
            }
        }
        Ok(Some(id))
    }

    /// The HWM of a sequence as this shard knows it (persisted or in the
    /// open group): every ID below it may have been handed out.
    pub fn high_water(&self, slot: u16, kind: u8) -> Option<u64> {
        self.seqs.get(&(slot, kind)).map(|s| s.hwm)
    }

    /// Slots moved in or out: forget their sequences. A slot that comes
    /// back (or arrives) resumes from the high-water mark stored in its
    /// data, which moved with it.
    pub fn forget_slots(&mut self, slots: &[u16]) {
        let slots = crate::cluster::routing::SlotSet::of(slots);
        self.seqs.retain(|(slot, _), _| !slots.contains(*slot));
    }

    /// A group commit failed: reservations in it may not be on disk. Forget
    /// everything; sequences reload from their stored HWMs (skipping, never
    /// reusing, whatever was handed out in memory).
    pub fn clear(&mut self) {
        self.seqs.clear();
    }
}

fn load_hwm(slot: u16, kind: u8, txn: &Txn) -> Result<u64, StorageError> {
    let Some(raw) = txn.get(&keys::sequence(slot, kind))? else {
        return Ok(0);
    };
    let stored = value::Stored::decode(&raw)?;
    let bytes: [u8; 8] = stored.payload.try_into().map_err(|_| {
        value::Corrupt(format!(
            "sequence {slot}/{kind} has {} bytes",
            stored.payload.len()
        ))
    })?;
    Ok(u64::from_be_bytes(bytes))
}

/// Reserve `[hwm, hwm + step)` (capped at the limit): the new HWM goes into
/// the open group, synced, whatever becomes of the request that triggered it.
fn reserve(seq: &mut Seq, slot: u16, spec: &SeqSpec, txn: &mut Txn) -> Option<(u64, u64)> {
    if seq.hwm >= spec.limit {
        return None;
    }
    let start = seq.hwm;
    let end = start.saturating_add(spec.step.max(1)).min(spec.limit);
    seq.hwm = end;
    txn.put_unconditional(
        keys::sequence(slot, spec.kind),
        value::encode(kind::SEQUENCE, 0, &end.to_be_bytes()),
        true,
    );
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Storage;

    fn open(dir: &std::path::Path) -> Storage {
        Storage::open_small(dir, Default::default())
    }

    /// Hand out `n` IDs in groups of `group`, committing each group.
    fn issue(
        storage: &Storage,
        segs: &mut Segments,
        spec: &SeqSpec,
        n: usize,
        group: usize,
    ) -> Vec<u64> {
        let mut out = Vec::new();
        while out.len() < n {
            let mut txn = Txn::new(storage, 0);
            for _ in 0..group.min(n - out.len()) {
                match segs.next(7, spec, &mut txn).unwrap() {
                    Some(id) => out.push(id),
                    None => return out,
                }
                txn.finish_request(true);
            }
            if let Some((batch, sync)) = txn.into_commit() {
                assert!(sync, "reservations are always synced");
                storage.write(batch, sync).unwrap();
            }
        }
        out
    }

    #[test]
    fn ids_are_unique_across_restarts_and_prefetched() {
        let dir = tempfile::tempdir().unwrap();
        let spec = SeqSpec {
            kind: 1,
            step: 100,
            limit: 1_000_000,
        };
        let mut seen = std::collections::HashSet::new();
        let mut last_hwm = 0;
        for _restart in 0..3 {
            let storage = open(dir.path());
            let mut segs = Segments::default();
            let ids = issue(&storage, &mut segs, &spec, 1_050, 10);
            assert!(
                ids[0] >= last_hwm,
                "a restart resumes at the stored high-water mark"
            );
            for id in ids {
                assert!(seen.insert(id), "id {id} issued twice");
            }
            // Only the first segment after a start was reserved on demand.
            assert_eq!(segs.waits, 1);
            last_hwm = segs.high_water(7, 1).unwrap();
        }
    }

    #[test]
    fn failed_commit_skips_never_reuses() {
        let dir = tempfile::tempdir().unwrap();
        let storage = open(dir.path());
        let spec = SeqSpec {
            kind: 2,
            step: 10,
            limit: 1_000,
        };
        let mut segs = Segments::default();
        let first = issue(&storage, &mut segs, &spec, 5, 5);
        // A group whose commit "fails": its reservations are never written.
        let mut txn = Txn::new(&storage, 0);
        let lost: Vec<u64> = (0..20)
            .map(|_| segs.next(7, &spec, &mut txn).unwrap().unwrap())
            .collect();
        drop(txn);
        segs.clear();
        let after = issue(&storage, &mut segs, &spec, 30, 3);
        assert!(after[0] > *first.last().unwrap());
        // IDs handed out in the failed group may come again only if they were
        // never acknowledged — and none of the committed ones ever does.
        for id in &first {
            assert!(!after.contains(id));
        }
        let unique: std::collections::HashSet<_> = after.iter().collect();
        assert_eq!(unique.len(), after.len());
        assert!(lost.iter().all(|id| !first.contains(id)));
    }

    #[test]
    fn space_runs_out_cleanly() {
        let dir = tempfile::tempdir().unwrap();
        let storage = open(dir.path());
        let spec = SeqSpec {
            kind: 3,
            step: 7,
            limit: 25,
        };
        let mut segs = Segments::default();
        let ids = issue(&storage, &mut segs, &spec, 100, 4);
        assert_eq!(ids, (0..25).collect::<Vec<_>>());
    }
}
