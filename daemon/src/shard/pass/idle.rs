//! Between passes: how a shard waits for its next one.
//!
//! A shard with nothing ready sleeps in `epoll_wait` until a client's next
//! bytes wake it: a switch out and one back in, a few microseconds of the
//! shard's CPU each time, and a pass that then holds only what arrived in
//! the meantime. Where clients share the shard's cores (a client on the
//! same machine, the bench's shared layout), that is most of a busy shard's
//! waits: the lull while a client thread had the core.
//!
//! So after a busy pass a shard first *yields* its core (`sched_yield`) and
//! looks again, for at most a share of the time the pass took
//! (`server.yield_before_sleep_pct`): a thread that wants the core runs at
//! once, and the shard then takes what it sent without having slept. A
//! yield that comes straight back says no other thread wanted the core (a
//! shard alone on its core): after two of those the shard sleeps, so it
//! never spins on a core nobody else wants, and after a quiet pass it
//! sleeps at once. bench/results/NOTES.md (eleventh session) has the A/Bs.

use std::io;
use std::time::{Duration, Instant};

/// A pass that ran fewer requests than this sleeps at once when it is done
/// (a lightly loaded shard pays nothing for yielding).
const BUSY_PASS: usize = 8;
/// The longest a shard yields before it sleeps, however long its pass.
const MAX_YIELDING: Duration = Duration::from_micros(50);
/// A yield back sooner than this ran no other thread.
const UNCONTENDED: Duration = Duration::from_micros(3);
/// Uncontended yields after which the shard sleeps.
const UNCONTENDED_YIELDS: u32 = 2;

/// How long the shard may yield before its next sleep.
pub(in crate::shard) struct Idle {
    share_pct: u32,
    budget: Duration,
}

impl Idle {
    /// `share_pct`: the part of a busy pass's time the shard may then spend
    /// yielding (0 turns yielding off).
    pub fn new(share_pct: u8) -> Idle {
        Idle {
            share_pct: u32::from(share_pct),
            budget: Duration::ZERO,
        }
    }

    /// A pass that ran `executed` requests in `took` is done.
    pub fn after_pass(&mut self, executed: usize, took: Duration) {
        self.budget = if executed >= BUSY_PASS {
            (took * self.share_pct / 100).min(MAX_YIELDING)
        } else {
            Duration::ZERO
        };
    }

    /// Fills `events` with what is ready, waiting at most `timeout`:
    /// yielding first while the last pass's budget lasts and other threads
    /// want the core, then sleeping in `epoll_wait`.
    pub fn wait(
        &mut self,
        poll: &mut mio::Poll,
        events: &mut mio::Events,
        timeout: Duration,
    ) -> io::Result<()> {
        let budget = std::mem::take(&mut self.budget).min(timeout);
        if budget.is_zero() {
            return poll.poll(events, Some(timeout));
        }
        let start = Instant::now();
        let until = start + budget;
        let mut uncontended = 0;
        loop {
            poll.poll(events, Some(Duration::ZERO))?;
            if !events.is_empty() {
                return Ok(());
            }
            let before = Instant::now();
            if before >= until {
                break;
            }
            std::thread::yield_now();
            if before.elapsed() < UNCONTENDED {
                uncontended += 1;
                if uncontended == UNCONTENDED_YIELDS {
                    break;
                }
            }
        }
        poll.poll(events, Some(timeout.saturating_sub(start.elapsed())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_busy_pass_earns_a_share_of_its_time_capped() {
        let mut idle = Idle::new(25);
        idle.after_pass(BUSY_PASS - 1, Duration::from_micros(100));
        assert_eq!(idle.budget, Duration::ZERO);
        idle.after_pass(BUSY_PASS, Duration::from_micros(100));
        assert_eq!(idle.budget, Duration::from_micros(25));
        idle.after_pass(512, Duration::from_millis(10));
        assert_eq!(idle.budget, MAX_YIELDING);
        let mut off = Idle::new(0);
        off.after_pass(512, Duration::from_millis(10));
        assert_eq!(off.budget, Duration::ZERO);
    }

    #[test]
    fn a_wait_returns_what_is_ready_and_spends_its_budget() {
        let mut poll = mio::Poll::new().unwrap();
        let waker = mio::Waker::new(poll.registry(), mio::Token(7)).unwrap();
        let mut events = mio::Events::with_capacity(8);
        let mut idle = Idle::new(100);

        // Nothing ready: yields (alone, so soon uncontended), then sleeps
        // out the timeout.
        idle.after_pass(BUSY_PASS, Duration::from_micros(40));
        let t = Instant::now();
        idle.wait(&mut poll, &mut events, Duration::from_millis(20))
            .unwrap();
        assert!(events.is_empty());
        assert!(
            t.elapsed() >= Duration::from_millis(19),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(idle.budget, Duration::ZERO, "a budget is spent by one wait");

        // Something ready: returned at once, not after the timeout.
        idle.after_pass(BUSY_PASS, Duration::from_micros(40));
        waker.wake().unwrap();
        let t = Instant::now();
        idle.wait(&mut poll, &mut events, Duration::from_secs(10))
            .unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!(
            events.iter().map(|e| e.token()).collect::<Vec<_>>(),
            [mio::Token(7)]
        );
    }
}
