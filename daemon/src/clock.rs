//! The one source of time. Production reads the system clock; tests (and a
//! daemon started with `debug.clock_control`) move it forward instead of
//! sleeping. Every expiry, window and refund decision reads this clock, and so
//! does the compaction filter, so an advanced clock expires data end to end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Cheap to clone; all clones share one offset.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// Milliseconds added to the system time. Only ever grows, so time never
    /// runs backwards for the daemon because of a test.
    offset_ms: Arc<AtomicU64>,
}

impl Clock {
    pub fn system() -> Self {
        Clock::default()
    }

    /// Unix time in milliseconds.
    pub fn now_ms(&self) -> u64 {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        wall + self.offset_ms.load(Ordering::Relaxed)
    }

    /// Move time forward by `ms`; returns the new now.
    pub fn advance_ms(&self, ms: u64) -> u64 {
        self.offset_ms.fetch_add(ms, Ordering::Relaxed);
        self.now_ms()
    }

    /// `ttl_ms` from now as an absolute expiry (0 = never), saturating.
    pub fn expiry_after(&self, ttl_ms: u64) -> u64 {
        if ttl_ms == 0 {
            0
        } else {
            self.now_ms().saturating_add(ttl_ms)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_is_shared_by_clones() {
        let a = Clock::system();
        let b = a.clone();
        let before = b.now_ms();
        a.advance_ms(86_400_000);
        assert!(b.now_ms() >= before + 86_400_000);
    }
}
