//! How long to wait before a retry: exponential growth with jitter.
//!
//! Without jitter every client that lost its node at the same moment (a
//! rolling restart, a node killed under load) retries at the same moments,
//! 20 ms, 40 ms, 80 ms… after it, and the returning node takes every
//! reconnect in the same millisecond. "Decorrelated jitter" (Marc Brooker,
//! "Exponential Backoff And Jitter", AWS Architecture Blog, 2015) spreads
//! them: each wait is drawn uniformly from `[base, 3 × the previous wait]`,
//! capped at `max`. It grows like doubling on average, never waits less
//! than `base` (a retry storm can't form), and keeps clients that started
//! together apart from the first retry on.

use std::time::Duration;

/// The wait before each retry of one call.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    base: Duration,
    max: Duration,
    prev: Duration,
}

impl Backoff {
    /// Waits of at least `base` and at most `max` (`max` below `base` is
    /// taken as `base`).
    pub fn new(base: Duration, max: Duration) -> Backoff {
        Backoff {
            base,
            max: max.max(base),
            prev: base,
        }
    }

    /// The next wait, drawn from the thread's random generator.
    pub fn next_wait(&mut self) -> Duration {
        self.next_with(|lo, hi| rand::random_range(lo..=hi))
    }

    /// The next wait, with `pick(lo, hi)` choosing a number of microseconds
    /// in `lo..=hi` (tests pass their own).
    fn next_with(&mut self, pick: impl FnOnce(u64, u64) -> u64) -> Duration {
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let lo = micros(self.base);
        let hi = micros(self.prev).saturating_mul(3).min(micros(self.max));
        let wait = Duration::from_micros(pick(lo, hi.max(lo)).clamp(lo, hi.max(lo)));
        self.prev = wait;
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: Duration = Duration::from_millis(20);
    const MAX: Duration = Duration::from_millis(1000);

    #[test]
    fn waits_stay_within_base_three_times_the_last_and_max() {
        for _ in 0..200 {
            let mut b = Backoff::new(BASE, MAX);
            let mut prev = BASE;
            for _ in 0..30 {
                let w = b.next_wait();
                assert!(w >= BASE, "{w:?} below the base");
                assert!(w <= MAX, "{w:?} over the cap");
                assert!(w <= prev * 3, "{w:?} more than 3 × {prev:?}");
                prev = w;
            }
        }
    }

    #[test]
    fn waits_are_jittered() {
        // Two clients that start together: their first waits differ (all
        // 100 pairs equal would mean no jitter; the chance is ~1e-400).
        let firsts: std::collections::HashSet<Duration> = (0..100)
            .map(|_| Backoff::new(BASE, MAX).next_wait())
            .collect();
        assert!(firsts.len() > 50, "{} distinct first waits", firsts.len());
        assert!(firsts.iter().all(|w| *w >= BASE && *w <= BASE * 3));
    }

    #[test]
    fn the_extremes_grow_to_the_cap_and_stay_at_the_base() {
        let mut top = Backoff::new(BASE, MAX);
        let tops: Vec<Duration> = (0..6).map(|_| top.next_with(|_, hi| hi)).collect();
        assert_eq!(
            tops,
            [60, 180, 540, 1000, 1000, 1000].map(Duration::from_millis)
        );
        let mut bottom = Backoff::new(BASE, MAX);
        assert!((0..10).all(|_| bottom.next_with(|lo, _| lo) == BASE));
        // A pick outside the range is clamped into it.
        let mut wild = Backoff::new(BASE, MAX);
        assert_eq!(wild.next_with(|_, _| u64::MAX), Duration::from_millis(60));
        assert_eq!(wild.next_with(|_, _| 0), BASE);
        // A cap below the base: every wait is the base.
        let mut flat = Backoff::new(BASE, Duration::ZERO);
        assert_eq!(flat.next_wait(), BASE);
    }
}
