//! The progress line: once a second, on stderr, each run's throughput so
//! far, its totals, and how far an open loop is behind its schedule
//! (rewritten in place on a terminal, a line a second otherwise).

use super::schedule::Schedule;
use super::{group, ConnTally};
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

/// Print the progress line until `done` changes.
pub(super) async fn progress_loop(
    name: &'static str,
    target: String,
    schedule: Arc<Schedule>,
    tallies: Vec<Arc<ConnTally>>,
    mut done: tokio::sync::watch::Receiver<bool>,
) {
    let tty = std::io::stderr().is_terminal();
    let mut tick = tokio::time::interval_at(
        (schedule.t0 + Duration::from_secs(1)).into(),
        Duration::from_secs(1),
    );
    let mut prev = 0u64;
    let mut secs = 0u64;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = done.changed() => break,
        }
        secs += 1;
        let (mut ok, mut errors, mut denied) = (0, 0, 0);
        for t in &tallies {
            let t = t.inner.lock().expect("not poisoned");
            ok += t.tally.ok;
            errors += t.tally.error_count();
            denied += t.tally.denied;
        }
        let denied = if denied > 0 {
            format!("  denied {denied}")
        } else {
            String::new()
        };
        let lag = schedule.lag();
        let behind = if lag > Duration::from_millis(10) {
            format!("  behind schedule {:.0} ms", lag.as_secs_f64() * 1000.0)
        } else {
            String::new()
        };
        let line = format!(
            "{name} {target} [{secs:>3}s] {:>10} ops/s  total {ok}{denied}  errors {errors}{behind}",
            group(ok - prev)
        );
        prev = ok;
        let mut err = std::io::stderr().lock();
        let _ = if tty {
            write!(err, "\r{line}\x1b[K")
        } else {
            writeln!(err, "{line}")
        };
    }
    if tty {
        let _ = writeln!(std::io::stderr());
    }
}
