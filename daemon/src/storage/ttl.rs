//! The compaction filter that drops expired values — TTL costs nothing on
//! the write path, and disk is reclaimed in the background — and the fields
//! of hashes that are gone (see `kv::hash`).

use super::keys::{self, kind};
use super::value;
use crate::clock::Clock;
use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};
use rocksdb::DB;
use std::ffi::CStr;
use std::sync::{Arc, OnceLock, Weak};

/// How long after a hash's expiry its header and fields are still kept. A pass that
/// read the clock just before the expiry may still extend the TTL (EXPIRE,
/// PERSIST rewrite only the header) while a compaction that read it just
/// after runs: without the margin it could drop the fields of a hash that
/// lives on. Expired hashes read as missing either way; this only delays
/// reclaiming their disk.
pub const HASH_FIELD_GRACE_MS: u64 = 60_000;

/// The database a filter reads hash headers from: set once it is open
/// (until then, and once it is closing, every hash field is kept).
pub(super) type DbSlot = Arc<OnceLock<Weak<DB>>>;

/// Drops expired values and dead hash fields. One filter per compaction
/// run, with "now" read once when the run starts (the factory holds only
/// the shared clock and where to find the database).
pub(super) struct TtlFilterFactory {
    pub clock: Clock,
    pub db: DbSlot,
    /// The column family this factory's compactions run in.
    pub cf: String,
}

pub(super) struct TtlFilter {
    now_ms: u64,
    db: DbSlot,
    cf: String,
    /// The last hash header looked up: its storage key, and the version its
    /// fields live under (`None`: no live hash). A hash's fields are
    /// adjacent in key order, so one lookup serves all of them.
    last_head: Option<(keys::Key, Option<u64>)>,
}

impl TtlFilter {
    /// Whether a hash field's hash still holds it.
    fn field_is_live(&mut self, raw_key: &[u8]) -> bool {
        let Some((slot, key, version, _)) = keys::parse_hash_field(raw_key) else {
            return true;
        };
        let head = keys::kv(slot, key);
        if let Some((k, live)) = &self.last_head {
            if *k == head {
                return *live == Some(version);
            }
        }
        let Some(live) = self.live_version(&head) else {
            // The database can't be read: keep the field, a later
            // compaction decides.
            return true;
        };
        self.last_head = Some((head, live));
        live == Some(version)
    }

    /// The version of the live hash whose header is at `head`: `Some(None)`
    /// when there is none, `None` when the database can't say.
    fn live_version(&self, head: &[u8]) -> Option<Option<u64>> {
        let db = self.db.get()?.upgrade()?;
        let cf = db.cf_handle(&self.cf)?;
        let raw = db.get_pinned_cf(cf, head).ok()?;
        let Some(raw) = raw else {
            return Some(None);
        };
        Some(match value::Stored::decode(&raw) {
            Ok(s)
                if s.kind == kind::HASH_HEAD
                    && s.is_live(self.now_ms.saturating_sub(HASH_FIELD_GRACE_MS)) =>
            {
                s.payload.first_chunk::<8>().map(|v| u64::from_be_bytes(*v))
            }
            _ => None,
        })
    }
}

impl CompactionFilter for TtlFilter {
    fn filter(&mut self, _level: u32, key: &[u8], value: &[u8]) -> Decision {
        // A hash's header stays through the grace too: while it is there its
        // fields are kept (see `HASH_FIELD_GRACE_MS`).
        let now = if value.first() == Some(&kind::HASH_HEAD) {
            self.now_ms.saturating_sub(HASH_FIELD_GRACE_MS)
        } else {
            self.now_ms
        };
        match value::expiry_of(value) {
            Some(at) if !value::is_live(at, now) => Decision::Remove,
            _ if keys::split(key).is_some_and(|(_, ks, _)| ks == keys::ks::HASH_FIELD)
                && !self.field_is_live(key) =>
            {
                Decision::Remove
            }
            _ => Decision::Keep,
        }
    }

    fn name(&self) -> &CStr {
        c"rush-ttl"
    }
}

impl CompactionFilterFactory for TtlFilterFactory {
    type Filter = TtlFilter;

    fn create(&mut self, _context: CompactionFilterContext) -> TtlFilter {
        TtlFilter {
            now_ms: self.clock.now_ms(),
            db: self.db.clone(),
            cf: self.cf.clone(),
            last_head: None,
        }
    }

    fn name(&self) -> &CStr {
        c"rush-ttl-factory"
    }
}
