//! Red envelopes: create, grab (exactly once per user, exact cents), info,
//! exactly-once refunds at expiry as a durable stream, retention by whole
//! days, and an audit of every envelope's books.
//!
//! All requests for one envelope run on the shard that owns its slot, one at
//! a time: the shard thread *is* the envelope's FIFO queue (with a lane per
//! envelope and admission control, see `shard::lanes`), so grabs need no
//! locks, no CAS and no retries, and group commit makes each durable grab
//! cheap.
//!
//! Storage (keys in `storage::keys::envelope`):
//! - `(slot, ENVELOPE, day of month, id, RECORD)` — the envelope's books,
//!   rewritten by every grab and by the refund;
//! - `(slot, ENVELOPE, day of month, id, GRAB, user)` — one per grab;
//! - `(slot, ENVELOPE_PENDING, expires_at, id)` — open envelopes (payload:
//!   remaining cents), so startup finds pending expiries without reading
//!   every envelope;
//! - `(slot, ENVELOPE_REFUND, stamp, id)` — the refund stream (until acked);
//! - `(slot, ENVELOPE_DAY, epoch day)` — first id of each day (retention);
//! - `(slot, ENVELOPE_IDEMPOTENCY, sender, key)` — create retries (TTL).
//!
//! Every write that changes money is one request of a group commit: the grab
//! record, the new books and the pending entry together; the refund record,
//! the "refunded" books and the pending entry's removal together. Synced
//! before the answer.
//!
//! In memory, per shard: the books of recently used envelopes and the
//! grabbers known (loaded on first touch, the books only: a grab looks its
//! own user up; an empty or expired one answers from memory at intake,
//! without queueing or storage work), the earliest pending expiries
//! (`expiries`), the refund stream and the day markers. Memory is changed as requests apply; if a
//! group commit fails, all of it is dropped and reloaded from storage.

mod audit;
pub mod config;
mod create;
pub mod days;
mod expiries;
mod grab;
mod info;
mod load;
pub mod metrics;
pub mod record;
mod refunds;
mod retention;
mod slots;
pub mod split;

pub use config::EnvelopeConfig;
pub use metrics::EnvelopeMetrics;
pub use refunds::merge_refunds;

use crate::metrics::Metrics;
use crate::services::Registration;
use crate::shard::service::{Ahead, Cx, ShardService};
use crate::shard::txn::Txn;
use crate::shard::ShardContext;
use crate::storage::keys;
use crate::storage::Storage;
use days::Days;
use expiries::Expiries;
use hashbrown::HashMap;
use rand::rngs::SmallRng;
use record::{EnvelopeRecord, GrabRecord};
use refunds::StreamEntry;
use rush_protocol::cmd::{envelope_day, envelope_slot, RefundCursor};
use rush_protocol::{Opcode, Reply, Request, RushError, Service};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

pub const REGISTRATION: Registration = Registration {
    service: Service::Envelopes,
    build: |ctx, shard| Ok(Box::new(Envelopes::new(ctx, shard))),
    combine,
};

impl ShardService for Envelopes {
    fn apply(&mut self, req: &Request, cx: &mut Cx) -> Result<Reply, RushError> {
        self.dispatch(req, cx.now, cx.txn, cx.segments)
    }

    /// The books and held expiries in memory: the tables' allocations, and
    /// what each book holds on the heap (its grabs' table, their user keys
    /// counted at [`USER_KEY_ESTIMATE`] bytes, the sender). The books' heap
    /// is measured on a sample of [`MEMORY_SAMPLE`] envelopes and scaled
    /// up: it runs at every tick, and walking 100,000 cached envelopes each
    /// time took more CPU than the grabs (bench/results/NOTES.md). (Counted
    /// by entries rather than by the tables' allocations, the books took
    /// twice what they were counted at: bench/results/NOTES.md.)
    fn memory(&self, into: &mut crate::memory::Use) {
        let heap = |live: &Live| {
            live.grabs.allocation_size()
                + live.grabs.len() * USER_KEY_ESTIMATE
                + live.rec.sender.len()
        };
        let sampled: usize = self.cache.values().take(MEMORY_SAMPLE).map(heap).sum();
        let n = self.cache.len();
        let books = self.cache.allocation_size()
            + if n <= MEMORY_SAMPLE {
                sampled
            } else {
                sampled / MEMORY_SAMPLE * n
            };
        let expiries = self.expiries.len() * expiries::ENTRY_BYTES;
        into.add(crate::memory::Part::HotState, books + expiries);
    }

    /// A grab of an envelope memory doesn't hold reads its books first:
    /// their row-cache row is loaded ahead (envelopes-held at 1M: 17.95 →
    /// 17.40 µs/op, 4 of 4 rounds; reading the lacking books in one batch
    /// with `Ahead::Read` did not pay, as for other keys that are present).
    fn prefetch_key(&mut self, opcode: Opcode, body: &[u8], key: &mut Vec<u8>) -> Ahead {
        if opcode != Opcode::EnvelopeGrab {
            return Ahead::No;
        }
        let Some(id) = body.first_chunk::<8>().map(|b| u64::from_be_bytes(*b)) else {
            return Ahead::No;
        };
        let day = envelope_day(id);
        if self.cache.contains_key(&id) || !(1..=31).contains(&day) {
            return Ahead::No;
        }
        keys::envelope::record_into(key, envelope_slot(id), day, id);
        Ahead::Row
    }

    /// Every request naming an envelope waits in that envelope's lane.
    fn lane(&self, req: &Request) -> Option<u64> {
        match req {
            Request::EnvelopeGrab(g) => Some(g.id),
            Request::EnvelopeInfo(i) => Some(i.id),
            _ => None,
        }
    }

    fn admit(
        &mut self,
        req: &Request,
        queued: usize,
        now: u64,
    ) -> Option<Result<Reply, RushError>> {
        match req {
            Request::EnvelopeGrab(g) => self.admit_grab(g, queued, now),
            _ => None,
        }
    }

    fn tick(&mut self, cx: &mut Cx) {
        self.timers(cx.now, cx.txn);
    }

    fn lane_peaks(&mut self, peaks: &HashMap<u64, usize>) {
        self.publish_queue_depths(peaks);
    }

    fn on_commit_failure(&mut self) {
        self.forget_all();
    }

    fn prepare_import(&mut self, slots: &[u16], cx: &mut Cx) -> Result<(), RushError> {
        for &slot in slots {
            self.restamp_gained(slot, cx.now, cx.txn)?;
        }
        Ok(())
    }

    fn on_slots_imported(&mut self, slots: &[u16], _storage: &Storage) {
        self.slots_imported(slots);
    }

    fn on_slots_dropped(&mut self, slots: &[u16]) {
        self.slots_dropped(slots);
    }
}

/// Envelope state shared by a node's shards: one atomic (no lock).
#[derive(Debug, Default)]
pub struct Shared {
    /// The highest refund stamp any shard has written. Every shard's read
    /// bound is above it, so a refund is readable from the first read after
    /// it was written — even while stamps run ahead of the wall clock (after
    /// it stepped back across a restart; see `refunds`).
    pub highest_stamp: AtomicU64,
}

/// Cached envelopes the memory report looks at (a hash table's order is as
/// good as a random sample).
const MEMORY_SAMPLE: usize = 1024;

/// The bytes a grabber's user key is counted at in the memory report.
const USER_KEY_ESTIMATE: usize = 16;

/// One envelope in memory: its books as stored, and who grabbed what.
struct Live {
    rec: EnvelopeRecord,
    /// user → grab. `Box<[u8]>`, not the request's `Bytes`, so a cached user
    /// doesn't keep a whole receive buffer alive.
    grabs: HashMap<Box<[u8]>, GrabRecord>,
    /// `grabs` holds every grab. An envelope loaded from storage holds
    /// only the grabs looked up since (a grab reads its own user's record,
    /// a point read the key filters mostly answer, instead of a scan of
    /// every grab: a scan per cold envelope was a fifth of a 1M
    /// envelopes-held profile, bench/results/NOTES.md); ENVELOPE_INFO reads
    /// the rest.
    complete: bool,
    /// Last use (unix ms), for evicting the least recently used.
    touched: u64,
}

/// The envelope service of one shard. Lives on the shard thread.
pub struct Envelopes {
    shard: usize,
    shards: usize,
    cfg: EnvelopeConfig,
    storage: Arc<Storage>,
    metrics: Arc<Metrics>,
    shared: Arc<Shared>,
    /// Recently used envelopes. hashbrown: the hot path is one lookup by id.
    cache: HashMap<u64, Live>,
    /// `(expires_at, id)` of envelopes that may still need a refund: the
    /// earliest of them (at most `cached_envelopes`), the rest in storage
    /// (see `expiries`). A superset: entries leave only when the timer has
    /// seen the envelope settled, so an entry whose settling write failed
    /// is looked at again.
    expiries: Expiries,
    /// This shard's part of the refund stream (not yet acknowledged).
    stream: BTreeMap<RefundCursor, StreamEntry>,
    /// Every future refund stamp is at least this (see `refunds`).
    stamp_floor: u64,
    /// The highest floor made durable in the meta column family.
    floor_promise: u64,
    days: Days,
    /// This shard's part of the money-in-flight gauge.
    in_flight: u64,
    /// Random shares. Not cryptographic: a share is not a secret, and a
    /// grabber can't choose their place in the queue.
    rng: SmallRng,
    /// Indexes are loaded from storage (lazily: at the first request or
    /// timer run, and again after a failed commit).
    loaded: bool,
    /// Envelope ids that have a queue-depth series right now.
    hot: Vec<u64>,
    /// Which slots this node owns and serves: indexes and audits cover
    /// owned slots only (a slot being imported, or whose data a new map
    /// left behind, is not this node's business), and timers leave alone a
    /// slot that is being handed over.
    routing: Arc<crate::cluster::routing::Routing>,
}

pub(crate) fn storage_error(e: impl std::fmt::Display) -> RushError {
    RushError::unavailable(format!("storage: {e}"))
}

fn corrupt(e: impl std::fmt::Display) -> RushError {
    RushError::internal(e.to_string())
}

impl Envelopes {
    /// Shard `shard`'s envelope service (its indexes load at the first
    /// request or timer run).
    pub fn new(ctx: &ShardContext, shard: usize) -> Self {
        let metrics = ctx.metrics.clone();
        // The backlog series exists from the start (alerts read it).
        metrics
            .envelopes
            .refunds_pending
            .with_label_values(&[&shard.to_string()])
            .set(0);
        Envelopes {
            routing: ctx.routing.clone(),
            shard,
            shards: ctx.config.shard_count(),
            cfg: ctx.config.envelopes.clone(),
            storage: ctx.storage.clone(),
            metrics,
            shared: ctx.envelopes.clone(),
            cache: HashMap::new(),
            expiries: Expiries::new(ctx.config.envelopes.cached_envelopes),
            stream: BTreeMap::new(),
            stamp_floor: 0,
            floor_promise: 0,
            days: Days::default(),
            in_flight: 0,
            rng: rand::make_rng(),
            loaded: false,
            hot: Vec::new(),
        }
    }

    fn m(&self) -> &EnvelopeMetrics {
        &self.metrics.envelopes
    }

    fn dispatch(
        &mut self,
        req: &Request,
        now: u64,
        txn: &mut Txn,
        segments: &mut crate::segments::Segments,
    ) -> Result<Reply, RushError> {
        self.ensure_loaded(txn)?;
        match req {
            Request::EnvelopeCreate(r) => self.create(r, now, txn, segments),
            Request::EnvelopeGrab(r) => self.grab(r, now, txn),
            Request::EnvelopeInfo(r) => self.info(r, now, txn),
            Request::EnvelopeRefunds(r) => self.read_stream(r, now),
            Request::EnvelopeRefundsAck(r) => self.ack(r, now, txn),
            Request::EnvelopeAudit(_) => self.audit(txn),
            other => Err(RushError::internal(format!(
                "{} is not an envelope request",
                other.opcode().name()
            ))),
        }
    }

    /// Timers: refunds of expired envelopes, then retention, then cache
    /// eviction. Writes are staged in the shard's timer group.
    fn timers(&mut self, now: u64, txn: &mut Txn) {
        if let Err(e) = self.ensure_loaded(txn) {
            tracing::warn!(shard = self.shard, error = %e, "envelope indexes not loaded; retrying next tick");
            return;
        }
        self.refund_due(now, txn);
        self.retention(now, txn);
        self.evict();
        self.metrics
            .envelopes
            .refunds_pending
            .with_label_values(&[&self.shard.to_string()])
            .set(self.stream.len() as i64);
    }

    /// A group commit failed: memory may hold writes that never happened.
    /// Drop it all; the next request or timer reloads from storage.
    fn forget_all(&mut self) {
        self.cache.clear();
        self.loaded = false;
    }

    /// Publish the deepest lanes of hot envelopes (from the shard's lanes)
    /// and retire the series of envelopes that cooled down.
    fn publish_queue_depths(&mut self, peaks: &HashMap<u64, usize>) {
        let gauge = &self.metrics.envelopes.queue_depth;
        for id in self.hot.drain(..) {
            if !peaks.contains_key(&id) {
                let _ = gauge.remove_label_values(&[&id.to_string()]);
            }
        }
        for (&id, &depth) in peaks {
            gauge
                .with_label_values(&[&id.to_string()])
                .set(depth as i64);
            self.hot.push(id);
        }
    }

    fn money_in(&mut self, cents: u64) {
        self.in_flight = self.in_flight.saturating_add(cents);
        self.metrics.envelopes.in_flight_cents.add(cents as i64);
    }

    fn money_out(&mut self, cents: u64) {
        self.in_flight = self.in_flight.saturating_sub(cents);
        self.metrics.envelopes.in_flight_cents.sub(cents as i64);
    }
}

/// Merge the per-shard answers of ENVELOPE_REFUNDS_ACK and ENVELOPE_AUDIT.
pub fn combine(req: &Request, replies: Vec<Reply>) -> Result<Reply, RushError> {
    let opcode = req.opcode();
    let bad = || RushError::internal(format!("unexpected shard answer to {}", opcode.name()));
    match opcode {
        // A page of the merged stream needs the page size.
        Opcode::EnvelopeRefunds => match req {
            Request::EnvelopeRefunds(r) => merge_refunds(replies, r.limit as usize),
            _ => Err(bad()),
        },
        Opcode::EnvelopeRefundsAck => {
            let mut n = 0u64;
            for r in replies {
                match r {
                    Reply::EnvelopeRefundsAck(k) => n += k,
                    _ => return Err(bad()),
                }
            }
            Ok(Reply::EnvelopeRefundsAck(n))
        }
        Opcode::EnvelopeAudit => {
            let mut all = rush_protocol::cmd::EnvelopeAuditReply::default();
            for r in replies {
                let Reply::EnvelopeAudit(a) = r else {
                    return Err(bad());
                };
                all.absorb(a);
            }
            Ok(Reply::EnvelopeAudit(all))
        }
        _ => Err(bad()),
    }
}
