//! The compaction filter that drops expired values: TTL costs nothing on
//! the write path, and disk is reclaimed in the background.

use super::value;
use crate::clock::Clock;
use rocksdb::compaction_filter::{CompactionFilter, Decision};
use rocksdb::compaction_filter_factory::{CompactionFilterContext, CompactionFilterFactory};
use std::ffi::CStr;

/// Drops expired values. One filter per compaction run, with "now" read once
/// when the run starts (the factory itself holds only the shared clock).
pub(super) struct TtlFilterFactory {
    pub clock: Clock,
}

pub(super) struct TtlFilter {
    now_ms: u64,
}

impl CompactionFilter for TtlFilter {
    fn filter(&mut self, _level: u32, _key: &[u8], value: &[u8]) -> Decision {
        match value::expiry_of(value) {
            Some(at) if !value::is_live(at, self.now_ms) => Decision::Remove,
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
        }
    }

    fn name(&self) -> &CStr {
        c"rush-ttl-factory"
    }
}
