//! CATALOG_SHED: switch load shedding (off, on, auto), and the decision
//! itself: whether a lookup that would read storage answers UNAVAILABLE.

use super::Catalog;
use rush_protocol::cmd::{CatalogShed, ShedMode};
use rush_protocol::{Reply, RushError};

impl Catalog {
    pub(super) fn shed(&mut self, r: &CatalogShed) -> Result<Reply, RushError> {
        self.shed = r.mode;
        tracing::info!(
            shard = self.shard,
            mode = r.mode.name(),
            "catalog shedding switched"
        );
        self.gauges.shedding.set(self.shedding() as i64);
        Ok(Reply::CatalogShed(()))
    }

    /// Whether storage reads are shed right now ("auto": the shard's queue
    /// is deeper than `shed_queue_depth`).
    pub(super) fn shedding(&self) -> bool {
        match self.shed {
            ShedMode::Off => false,
            ShedMode::On => true,
            ShedMode::Auto => self.queue_depth > self.cfg.shed_queue_depth,
        }
    }
}
