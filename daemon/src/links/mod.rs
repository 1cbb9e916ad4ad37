//! Short links: codes issued from in-memory ID segments in the slot they
//! live in, scrambled by a keyed bijection, with sliding expiry, visit
//! statistics, custom aliases, app deep links, recycling of expired codes
//! when a slot's space wraps, and the HTTP redirect listener.
//!
//! Storage (keys in `storage::keys`, all in the code's slot): the link
//! record under its code, its statistics, the reuse index and the indices
//! reserved by aliases. Every link request for a code runs on the shard of
//! `link_slot(code)`; a shorten runs in the slot of (account, url) and
//! issues its code there, so nothing crosses shards.
//!
//! Durability: creating, updating and deleting a link is synced before the
//! answer. Sliding-expiry rewrites and visit statistics are not (see
//! [`visits`]): a crash may lose recent visits and slides, never a link.

pub mod config;
mod delete;
mod info;
mod issue;
pub mod metrics;
pub mod qr;
pub(crate) mod record;
pub mod redirect;
mod resolve;
pub mod scramble;
mod shorten;
mod shorten_batch;
mod update;
pub mod validate;
mod visits;

pub use config::LinksConfig;
pub use metrics::LinkMetrics;

use crate::kv::storage_error;
use crate::metrics::Metrics;
use crate::segments::Segments;
use crate::services::{no_broadcast, Registration};
use crate::shard::service::{Ahead, Cx, ShardService};
use crate::shard::txn::Txn;
use crate::shard::ShardContext;
use crate::storage::keys::kind;
use crate::storage::value::{self, Stored};
use crate::storage::{keys, Storage, StorageError};
use issue::{Issued, Issuer};
use record::LinkRecord;
use rush_protocol::{link_slot, Opcode, Reply, Request, RushError, Service};
use scramble::Scrambler;
use std::sync::Arc;
use validate::UrlRules;
use visits::Visits;

/// Make sure the node has its code-scrambling key (generated once, synced
/// to the meta column family, never changed). Called before shards start.
pub fn ensure_key(storage: &Storage) -> Result<(), StorageError> {
    if storage.meta_get(keys::meta::LINK_CODE_KEY)?.is_none() {
        let key: [u8; 16] = rand::random();
        storage.meta_put(keys::meta::LINK_CODE_KEY, &key)?;
    }
    Ok(())
}

/// What a slot's copy must carry besides its keys when it moves to
/// another node: the code key its codes were scrambled with, unless the slot
/// already carries one (it came from another node before). Without it the
/// new owner would scramble the slot's remaining sequence numbers with its
/// own key, and a new code could repeat a live one.
pub fn export_extras(
    storage: &Storage,
    shard: usize,
    slot: u16,
) -> Result<Option<crate::storage::RawPair>, StorageError> {
    let key = keys::link_code_key(slot);
    if storage.get(shard, &key)?.is_some() {
        return Ok(None);
    }
    let value = value::encode(kind::LINK_CODE_KEY, 0, &read_key(storage)?);
    Ok(Some((key, value)))
}

fn read_key(storage: &Storage) -> Result<[u8; 16], StorageError> {
    let raw = storage
        .meta_get(keys::meta::LINK_CODE_KEY)?
        .ok_or_else(|| value::Corrupt("the short-code key is missing".into()))?;
    raw.as_slice()
        .try_into()
        .map_err(|_| value::Corrupt(format!("the short-code key has {} bytes", raw.len())).into())
}

pub const REGISTRATION: Registration = Registration {
    service: Service::Links,
    build: |ctx, _shard| Ok(Box::new(Links::new(ctx).map_err(|e| e.to_string())?)),
    combine: no_broadcast,
};

impl ShardService for Links {
    fn apply(&mut self, req: &Request, cx: &mut Cx) -> Result<Reply, RushError> {
        self.dispatch(req, cx.now, cx.slot, cx.txn, cx.segments)
    }

    fn memory(&self, into: &mut crate::memory::Use) {
        into.add(crate::memory::Part::HotState, self.visits.bytes());
    }

    /// A resolve reads its link first.
    fn prefetch_key(&mut self, opcode: Opcode, body: &[u8], key: &mut Vec<u8>) -> Ahead {
        if opcode != Opcode::LinkResolve {
            return Ahead::No;
        }
        match rush_protocol::codec::peek_lp(body) {
            Some(code) if code.len() <= u8::MAX as usize => {
                keys::link_into(key, link_slot(code), code);
                Ahead::Row
            }
            _ => Ahead::No,
        }
    }

    /// Timer: buffered visit counters go to storage, every
    /// `links.visits_flush_secs` (or now, when asked to flush).
    fn tick(&mut self, cx: &mut Cx) {
        let due = self.visits_flushed.saturating_add(self.visits_flush_ms);
        if cx.flush || cx.now >= due || cx.now < self.visits_flushed {
            self.visits.flush(cx.now, cx.txn);
            self.visits_flushed = cx.now;
        }
    }

    /// A group commit failed: drop in-memory state that may reflect it.
    fn on_commit_failure(&mut self) {
        self.issuer.clear();
        self.visits.clear();
    }

    /// Slots moved in: their issuing state (reserved indices, the code key
    /// they came with) reloads from their data on first use.
    fn on_slots_imported(&mut self, slots: &[u16], _storage: &Storage) {
        for &slot in slots {
            self.issuer.forget_slot(slot);
        }
    }

    /// Slots moved away: forget their issuing state and visit counters.
    fn on_slots_dropped(&mut self, slots: &[u16]) {
        for &slot in slots {
            self.issuer.forget_slot(slot);
        }
        self.visits.forget_slots(slots);
    }
}

/// The short-link service of one shard. Lives on the shard thread: its
/// in-memory state (segments are the shard's, reserved indices, free lists,
/// visit counters) is never shared, so no request takes a lock.
pub struct Links {
    cfg: LinksConfig,
    /// URL rules with the configured app schemes, built once.
    rules: UrlRules,
    /// Codes: scrambler, aliases' reserved indices, recycling.
    issuer: Issuer,
    /// Visit counters not yet in storage (flushed by the shard's tick).
    visits: Visits,
    metrics: Arc<Metrics>,
    /// `links.default_ttl_secs` in ms.
    default_ttl_ms: u64,
    /// `links.slide_interval_secs` in ms.
    slide_ms: u64,
    /// `links.visits_flush_secs` in ms, and when visits were last flushed.
    visits_flush_ms: u64,
    visits_flushed: u64,
}

/// A live link as read from storage.
struct Loaded {
    /// The slot its code lives in (`link_slot(code)`).
    slot: u16,
    record: LinkRecord,
    expires_at: u64,
    /// The stored value, for rewrites that only move the expiry.
    raw: bytes::Bytes,
}

impl Links {
    pub fn new(ctx: &ShardContext) -> Result<Links, StorageError> {
        let cfg = ctx.config.links.clone();
        let steps = [5, 6, 7, 8].map(|len| cfg.segment_step(len));
        Ok(Links {
            rules: UrlRules::new(&cfg.app_schemes),
            issuer: Issuer::new(Scrambler::new(read_key(&ctx.storage)?), steps),
            visits: Visits::default(),
            metrics: ctx.metrics.clone(),
            default_ttl_ms: cfg.default_ttl_secs.saturating_mul(1000),
            slide_ms: cfg.slide_interval_secs.saturating_mul(1000),
            visits_flush_ms: cfg.visits_flush_secs.saturating_mul(1000),
            visits_flushed: ctx.clock.now_ms(),
            cfg,
        })
    }

    fn dispatch(
        &mut self,
        req: &Request,
        now: u64,
        slot: Option<u16>,
        txn: &mut Txn,
        segments: &mut Segments,
    ) -> Result<Reply, RushError> {
        match req {
            Request::LinkShorten(r) => self.shorten(r, now, slot, txn, segments),
            Request::LinkShortenBatch(r) => self.shorten_batch(r, now, txn, segments),
            Request::LinkResolve(r) => self.resolve(r, now, txn),
            Request::LinkInfo(r) => self.info(r, now, txn),
            Request::LinkUpdate(r) => self.update(r, now, txn),
            Request::LinkDelete(r) => self.delete(r, now, txn),
            other => Err(RushError::internal(format!(
                "{} is not a link request",
                other.opcode().name()
            ))),
        }
    }

    fn short_url(&self, code: &str) -> String {
        format!("{}{code}", self.cfg.base_url)
    }

    fn ttl(&self, requested: Option<u64>) -> u64 {
        requested.unwrap_or(self.default_ttl_ms)
    }

    fn link_metrics(&self) -> &LinkMetrics {
        &self.metrics.links
    }

    /// The live link a request names by `code`, if any.
    fn find(&self, code: &str, now: u64, txn: &Txn) -> Result<Option<Loaded>, RushError> {
        let code = code.as_bytes();
        self.load(link_slot(code), code, now, txn)
    }

    /// The live link a request names by `code`, or NOT_FOUND.
    fn live(&self, code: &str, now: u64, txn: &Txn) -> Result<Loaded, RushError> {
        self.find(code, now, txn)?.ok_or_else(|| no_link(code))
    }

    /// The live link under `code` in `slot`, if any.
    fn load(
        &self,
        slot: u16,
        code: &[u8],
        now: u64,
        txn: &Txn,
    ) -> Result<Option<Loaded>, RushError> {
        let Some(raw) = txn.get(&keys::link(slot, code)).map_err(storage_error)? else {
            return Ok(None);
        };
        let stored = Stored::decode(&raw).map_err(corrupt)?;
        if !stored.is_live(now) {
            return Ok(None);
        }
        if stored.kind != kind::LINK {
            return Err(RushError::internal(format!(
                "link value of kind {}",
                stored.kind
            )));
        }
        let record = LinkRecord::decode(stored.payload).map_err(corrupt)?;
        let expires_at = stored.expires_at;
        Ok(Some(Loaded {
            slot,
            record,
            expires_at,
            raw,
        }))
    }

    /// Write a new link under a freshly issued (or recycled) code, durably.
    fn store_new(
        &mut self,
        slot: u16,
        issued: &Issued,
        record: &LinkRecord,
        expires_at: u64,
        txn: &mut Txn,
    ) {
        let code = issued.code.as_bytes();
        if issued.recycled {
            // The code's previous link may have left statistics and counters.
            txn.delete(keys::link_stats(slot, code));
            self.visits.forget(code);
            self.link_metrics().issued_recycled.inc();
        } else {
            self.link_metrics().issued_new.inc();
        }
        txn.put(
            keys::link(slot, code),
            value::encode_shared(kind::LINK, expires_at, &record.encode()),
        );
        txn.require_sync();
    }

    /// The reuse index entry of (account, target) in `slot`, if it names `code`.
    fn reuse_entry_points_to(&self, key: &[u8], code: &[u8], txn: &Txn) -> Result<bool, RushError> {
        Ok(txn
            .get(key)
            .map_err(storage_error)?
            .as_deref()
            .and_then(|raw| Stored::decode(raw).ok().map(|s| s.payload == code))
            .unwrap_or(false))
    }
}

/// NOT_FOUND for a code that names no live link.
fn no_link(code: &str) -> RushError {
    RushError::not_found(format!("no link {code:?}"))
}

fn corrupt(e: impl std::fmt::Display) -> RushError {
    RushError::internal(e.to_string())
}

/// Absolute expiry `ttl_ms` after `now` (0 = never).
fn expiry(now: u64, ttl_ms: u64) -> u64 {
    if ttl_ms == 0 {
        0
    } else {
        now.saturating_add(ttl_ms)
    }
}

/// `raw` with its header's expiry replaced.
fn with_expiry(raw: &[u8], expires_at: u64) -> Vec<u8> {
    let mut v = raw.to_vec();
    v[1..value::HEADER].copy_from_slice(&expires_at.to_be_bytes());
    v
}
