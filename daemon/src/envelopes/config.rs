//! `[envelopes]`: limits, expiry, admission control, refunds and retention.

use serde::Deserialize;

pub const DEFAULT_MAX_COUNT: u32 = 10_000;
/// 1,000,000.00 in cents.
pub const DEFAULT_MAX_TOTAL_CENTS: u64 = 100_000_000;
pub const DEFAULT_EXPIRY_SECS: u64 = 86_400;
pub const DEFAULT_MAX_EXPIRY_SECS: u64 = 7 * 86_400;
pub const DEFAULT_MAX_QUEUED_GRABS: usize = 1_024;
pub const DEFAULT_RETENTION_DAYS: u32 = 31;
pub const DEFAULT_REFUNDS_PER_TICK: usize = 10_000;
pub const DEFAULT_CACHED_ENVELOPES: usize = 100_000;
pub const DEFAULT_ID_STEP: u64 = 1_000;

const DAY_SECS: u64 = 86_400;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvelopeConfig {
    /// Most shares one envelope may have (at most the protocol's 100000).
    pub max_count: u32,
    /// Largest total one envelope may hold, in cents.
    pub max_total_cents: u64,
    /// Expiry when a create doesn't say.
    pub default_expiry_secs: u64,
    /// Longest expiry a create may ask for.
    pub max_expiry_secs: u64,
    /// Grabs one envelope may have waiting on its shard; more are answered
    /// BUSY at once, without touching storage (admission control).
    pub max_queued_grabs: usize,
    /// Keep envelopes (and their grabs) this many days after the day they
    /// were created, then remove the whole day. 0 keeps them forever. Must
    /// outlast `max_expiry_secs` by a day, so an envelope is settled before
    /// its day goes. Unacknowledged refunds are never removed.
    pub retention_days: u32,
    /// Refunds one shard writes per timer run (bounds one group commit).
    pub refunds_per_tick: usize,
    /// Envelopes each shard keeps in memory (books and grabbers); the least
    /// recently used beyond this are dropped and reloaded on their next use.
    /// Also how many pending expiries each shard holds in memory (the
    /// earliest; the rest are read back from storage as those are used).
    pub cached_envelopes: usize,
    /// Envelope ids reserved per durable sequence write.
    pub id_step: u64,
}

impl Default for EnvelopeConfig {
    fn default() -> Self {
        EnvelopeConfig {
            max_count: DEFAULT_MAX_COUNT,
            max_total_cents: DEFAULT_MAX_TOTAL_CENTS,
            default_expiry_secs: DEFAULT_EXPIRY_SECS,
            max_expiry_secs: DEFAULT_MAX_EXPIRY_SECS,
            max_queued_grabs: DEFAULT_MAX_QUEUED_GRABS,
            retention_days: DEFAULT_RETENTION_DAYS,
            refunds_per_tick: DEFAULT_REFUNDS_PER_TICK,
            cached_envelopes: DEFAULT_CACHED_ENVELOPES,
            id_step: DEFAULT_ID_STEP,
        }
    }
}

impl EnvelopeConfig {
    pub fn validate(&self) -> Result<(), String> {
        let ceiling = rush_protocol::limits::MAX_ENVELOPE_COUNT;
        if self.max_count == 0 || self.max_count > ceiling {
            return Err(format!("envelopes.max_count must be within 1..={ceiling}"));
        }
        if self.max_total_cents < self.max_count as u64 {
            return Err("envelopes.max_total_cents must be at least envelopes.max_count".into());
        }
        if self.default_expiry_secs == 0 || self.default_expiry_secs > self.max_expiry_secs {
            return Err(
                "envelopes.default_expiry_secs must be within 1..=envelopes.max_expiry_secs".into(),
            );
        }
        if self.retention_days > 0
            && (self.retention_days as u64 * DAY_SECS) < self.max_expiry_secs + DAY_SECS
        {
            return Err(
                "envelopes.retention_days must exceed envelopes.max_expiry_secs by a day".into(),
            );
        }
        if self.max_queued_grabs == 0 || self.refunds_per_tick == 0 || self.id_step == 0 {
            return Err(
                "envelopes.max_queued_grabs, refunds_per_tick and id_step must be positive".into(),
            );
        }
        if self.cached_envelopes == 0 {
            return Err("envelopes.cached_envelopes must be positive".into());
        }
        Ok(())
    }
}
