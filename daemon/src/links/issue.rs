//! Issuing generated codes: segments, the scrambler, aliases' reserved
//! indices and, once a slot's space for a length is used up, recycling.
//!
//! Fresh codes come from the slot's ID segment for the length (see
//! `segments`): sequence number → scrambled index → code. Nothing is looked
//! up in storage to check for a collision: the sequence never repeats (its
//! high-water mark is synced before use) and the scrambler is a bijection.
//! The one exception is an alias with the shape of a generated code: its
//! index is *reserved* (stored, and held in memory per slot, loaded the
//! first time the slot issues or takes an alias), and the issuer skips it.
//!
//! When the sequence reaches the end of the space the slot switches to
//! recycling for that length: it scans the slot's codes of that length (one
//! contiguous key range, in index order) from a cursor, collects a small
//! free list of codes whose links are absent (deleted, or never
//! acknowledged) or expired, and hands those out — re-checking each against
//! the group's view at issue time, so a live link is never overwritten.
//! Deleted codes join the free list directly. If a whole pass finds
//! nothing, the answer is EXHAUSTED and the slot doesn't rescan for a second.

use super::metrics::LinkMetrics;
use super::scramble::Scrambler;
use crate::kv::storage_error;
use crate::segments::{Segments, SeqSpec};
use crate::shard::txn::Txn;
use crate::storage::keys::kind;
use crate::storage::value;
use crate::storage::{keys, StorageError};
use hashbrown::{HashMap, HashSet};
use rush_protocol::cmd::links::code::{codes_per_slot, generated_parts, MIN_CODE_LEN};
use rush_protocol::{Code, ErrorCode, RushError};

/// Free codes collected per recycling scan: enough for a batch of issues,
/// small enough to keep in memory per slot.
const RECYCLE_TARGET: usize = 256;
/// Most candidates one issue examines while recycling (bounds the work of a
/// request on a huge, full space; the scan resumes at its cursor next time).
const RECYCLE_SCAN_MAX: u64 = 1 << 20;
/// After a pass found nothing free, don't rescan for this long (ms).
const RESCAN_AFTER_MS: u64 = 1_000;

pub struct Issued {
    pub code: Code,
    /// The code had a link before (expired or deleted): its leftovers
    /// (statistics, buffered visits) must go.
    pub recycled: bool,
}

/// Per-slot issuing state. Only slots this shard has issued in (or taken
/// an alias in) since start have one.
#[derive(Default)]
struct SlotCodes {
    /// The key this slot's codes are scrambled with when it is not the
    /// node's: the slot moved here from another node, and must keep its
    /// permutation, or a new sequence number could map onto a code issued
    /// before the move (stored in the slot's data, `keys::link_code_key`).
    scrambler: Option<Scrambler>,
    /// (length, index) held by aliases of generated shape.
    reserved: HashSet<(u8, u64)>,
    /// Recycling state per length 5–8, once that space is used up.
    recycle: [Option<Recycle>; 4],
}

#[derive(Default)]
struct Recycle {
    /// Candidate indices; each is re-checked before it is handed out.
    free: Vec<u64>,
    /// Where the next scan starts.
    cursor: u64,
    /// No rescan before this time (unix ms): the last pass found nothing.
    idle_until: u64,
}

pub struct Issuer {
    scrambler: Scrambler,
    /// Segment step per length 5–8.
    steps: [u64; 4],
    slots: HashMap<u16, SlotCodes>,
}

impl Issuer {
    pub fn new(scrambler: Scrambler, steps: [u64; 4]) -> Self {
        Issuer {
            scrambler,
            steps,
            slots: HashMap::new(),
        }
    }

    /// A code of `len` characters in `slot`.
    pub fn issue(
        &mut self,
        slot: u16,
        len: u8,
        now: u64,
        txn: &mut Txn,
        segments: &mut Segments,
        metrics: &LinkMetrics,
    ) -> Result<Issued, RushError> {
        let idx = usize::from(len - MIN_CODE_LEN);
        let n = codes_per_slot(len, slot);
        let step = self.steps[idx];
        let sc = load(&mut self.slots, slot, txn).map_err(storage_error)?;
        if sc.recycle[idx].is_none() {
            let spec = SeqSpec {
                kind: keys::seq::link_code(len),
                step,
                limit: n,
            };
            loop {
                let (reserved, waits) = (segments.reserved, segments.waits);
                let next = segments.next(slot, &spec, txn).map_err(storage_error)?;
                metrics
                    .segments_reserved
                    .inc_by(segments.reserved - reserved);
                metrics.segment_waits.inc_by(segments.waits - waits);
                match next {
                    Some(seq) => {
                        let scrambler = sc.scrambler.as_ref().unwrap_or(&self.scrambler);
                        let index = scrambler.permute(slot, len, n, seq);
                        if sc.reserved.contains(&(len, index)) {
                            continue;
                        }
                        return Ok(Issued {
                            code: Code::generated(slot, len, index),
                            recycled: false,
                        });
                    }
                    None => {
                        tracing::info!(slot, len, "code space used up: recycling expired codes");
                        sc.recycle[idx] = Some(Recycle::default());
                        break;
                    }
                }
            }
        }
        let SlotCodes {
            reserved, recycle, ..
        } = sc;
        let rc = recycle[idx].as_mut().expect("recycling");
        let budget = n.min(RECYCLE_SCAN_MAX);
        let mut examined = 0;
        loop {
            while let Some(index) = rc.free.pop() {
                let code = Code::generated(slot, len, index);
                let raw = txn
                    .get(&keys::link(slot, code.as_bytes()))
                    .map_err(storage_error)?;
                if raw
                    .as_deref()
                    .and_then(value::expiry_of)
                    .is_some_and(|at| value::is_live(at, now))
                {
                    continue;
                }
                // A dead alias of this shape held the index: the hold goes too.
                if reserved.remove(&(len, index)) {
                    txn.delete(keys::link_reserved(slot, len, index));
                }
                return Ok(Issued {
                    code,
                    recycled: true,
                });
            }
            if examined >= budget || now < rc.idle_until {
                break;
            }
            examined +=
                refill(rc, slot, len, n, now, txn, budget - examined).map_err(storage_error)?;
            if rc.free.is_empty() {
                rc.idle_until = now.saturating_add(RESCAN_AFTER_MS);
                break;
            }
        }
        metrics.exhausted.inc();
        Err(RushError::new(
            ErrorCode::Exhausted,
            format!(
                "no free {len}-character code in slot {slot}: its {n} codes belong to live links \
                 (use another length)"
            ),
        ))
    }

    /// An alias of generated shape takes its index: the issuer will skip it.
    pub fn reserve(
        &mut self,
        slot: u16,
        len: u8,
        index: u64,
        alias: &str,
        txn: &mut Txn,
    ) -> Result<(), RushError> {
        let sc = load(&mut self.slots, slot, txn).map_err(storage_error)?;
        sc.reserved.insert((len, index));
        txn.put(
            keys::link_reserved(slot, len, index),
            value::encode(kind::LINK_RESERVED, 0, alias.as_bytes()),
        );
        Ok(())
    }

    /// The alias holding an index is gone.
    pub fn release(
        &mut self,
        slot: u16,
        len: u8,
        index: u64,
        txn: &mut Txn,
    ) -> Result<(), RushError> {
        let sc = load(&mut self.slots, slot, txn).map_err(storage_error)?;
        sc.reserved.remove(&(len, index));
        txn.delete(keys::link_reserved(slot, len, index));
        Ok(())
    }

    /// A generated-shape code's link was deleted: if its space is being
    /// recycled, it is a candidate right away.
    pub fn freed(&mut self, slot: u16, len: u8, index: u64) {
        let idx = usize::from(len - MIN_CODE_LEN);
        if let Some(rc) = self
            .slots
            .get_mut(&slot)
            .and_then(|sc| sc.recycle[idx].as_mut())
        {
            rc.free.push(index);
        }
    }

    /// A slot moved in or out: its state reloads from its data when used.
    pub fn forget_slot(&mut self, slot: u16) {
        self.slots.remove(&slot);
    }

    /// A commit failed: reserved sets may disagree with storage. Reload
    /// lazily (free lists are rebuilt by scanning).
    pub fn clear(&mut self) {
        self.slots.clear();
    }
}

/// The slot's state, loading its reserved indices from storage the first time.
fn load<'a>(
    slots: &'a mut HashMap<u16, SlotCodes>,
    slot: u16,
    txn: &Txn,
) -> Result<&'a mut SlotCodes, StorageError> {
    if !slots.contains_key(&slot) {
        let mut sc = SlotCodes::default();
        if let Some(raw) = txn.get(&keys::link_code_key(slot))? {
            sc.scrambler = Some(Scrambler::new(code_key(&raw)?));
        }
        let (from, to) = keys::keyspace_range(slot, keys::ks::LINK_RESERVED);
        txn.scan_stored(&from, &to, |k, _| {
            if let Some(parts) = keys::link_reserved_parts(k) {
                sc.reserved.insert(parts);
            }
            true
        })?;
        slots.insert(slot, sc);
    }
    Ok(slots.get_mut(&slot).expect("inserted above"))
}

/// The 16-byte key inside a stored code key.
fn code_key(raw: &[u8]) -> Result<[u8; 16], StorageError> {
    let stored = value::Stored::decode(raw)?;
    stored.payload.try_into().map_err(|_| {
        value::Corrupt(format!(
            "a slot's code key has {} bytes",
            stored.payload.len()
        ))
        .into()
    })
}

/// Scan from the cursor for free codes: every index in `0..n` was handed
/// out once the space wrapped, so an index with no link, or a dead one, is
/// free. Examines at most `budget` indices (wrapping around at `n`); returns
/// how many it examined.
fn refill(
    rc: &mut Recycle,
    slot: u16,
    len: u8,
    n: u64,
    now: u64,
    txn: &Txn,
    budget: u64,
) -> Result<u64, StorageError> {
    let (_, end) = keys::link_length_range(slot, len);
    let mut examined = 0u64;
    let mut cur = if rc.cursor >= n { 0 } else { rc.cursor };
    let free = &mut rc.free;
    let full = |free: &Vec<u64>, examined: u64| free.len() >= RECYCLE_TARGET || examined >= budget;
    loop {
        let from = keys::link(slot, Code::generated(slot, len, cur).as_bytes());
        txn.scan_stored(&from, &end, |k, v| {
            let Some((s, l, i)) = keys::link_code(k).and_then(generated_parts) else {
                return true; // an alias of this length but not base62
            };
            if s != slot || l != len || i < cur || i >= n {
                return true;
            }
            // No link at all for the indices before this one.
            while cur < i {
                if full(free, examined) {
                    return false;
                }
                free.push(cur);
                cur += 1;
                examined += 1;
            }
            if full(free, examined) {
                return false;
            }
            if !value::expiry_of(v).is_some_and(|at| value::is_live(at, now)) {
                free.push(i);
            }
            cur = i + 1;
            examined += 1;
            true
        })?;
        // The range ended (or a limit stopped the scan, and then this adds
        // nothing): the rest up to n has no links.
        while cur < n && !full(free, examined) {
            free.push(cur);
            cur += 1;
            examined += 1;
        }
        if cur >= n {
            cur = 0;
        }
        if full(free, examined) {
            break;
        }
    }
    rc.cursor = cur;
    Ok(examined)
}
