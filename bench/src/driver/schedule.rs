//! The run's request schedule: one sequence of tickets, handed out in order
//! to whichever lane is free. In a closed loop a ticket is simply the next
//! request (until the stop); in an open loop each is due at `t0 + k/R`.

use super::Stop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The run's shared request schedule: tickets handed out in order.
pub(super) struct Schedule {
    pub t0: Instant,
    pub next: AtomicU64,
    pub rate: Option<f64>,
    pub stop: Stop,
}

/// One request to send.
pub(super) struct Ticket {
    /// When it is due (open loop only).
    pub due: Option<Instant>,
    /// When it was taken (one clock read serves the stop check and, in a
    /// closed loop, the send time).
    pub taken: Instant,
}

impl Schedule {
    /// A schedule starting now.
    pub fn new(rate: Option<f64>, stop: Stop) -> Schedule {
        Schedule {
            t0: Instant::now(),
            next: AtomicU64::new(0),
            rate,
            stop,
        }
    }

    /// The next request, or `None` when the run is over.
    pub fn take(&self) -> Option<Ticket> {
        let k = self.next.fetch_add(1, Ordering::Relaxed);
        if let Stop::Requests(n) = self.stop {
            if k >= n {
                return None;
            }
        }
        let taken = Instant::now();
        let due = self.rate.map(|r| self.due(k, r));
        if let Stop::Duration(d) = self.stop {
            if due.unwrap_or(taken) >= self.t0 + d {
                return None;
            }
        }
        Some(Ticket { due, taken })
    }

    fn due(&self, k: u64, rate: f64) -> Instant {
        self.t0 + Duration::from_secs_f64(k as f64 / rate)
    }

    /// How far the open-loop schedule is ahead of the sends (zero when on time).
    pub fn lag(&self) -> Duration {
        match self.rate {
            Some(r) => Instant::now()
                .saturating_duration_since(self.due(self.next.load(Ordering::Relaxed), r)),
            None => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_stops_after_requests() {
        let s = Schedule {
            t0: Instant::now(),
            next: AtomicU64::new(0),
            rate: None,
            stop: Stop::Requests(3),
        };
        assert!((0..3).all(|_| s.take().is_some()));
        assert!(s.take().is_none());
    }

    #[test]
    fn open_loop_tickets_are_due_at_the_rate() {
        let t0 = Instant::now();
        let s = Schedule {
            t0,
            next: AtomicU64::new(0),
            rate: Some(1000.0),
            stop: Stop::Duration(Duration::from_millis(10)),
        };
        let dues: Vec<Instant> = std::iter::from_fn(|| s.take().map(|t| t.due.unwrap())).collect();
        assert_eq!(dues.len(), 10);
        assert_eq!(dues[0], t0);
        assert_eq!(dues[5] - t0, Duration::from_millis(5));
    }
}
