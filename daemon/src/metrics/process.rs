//! The standard `process_*` families: the prometheus crate's process
//! collector (memory, descriptors, threads, start time), except for
//! `process_cpu_seconds_total`, which that collector counts in whole
//! seconds (an integer division of the clock ticks). Here it is read from
//! `getrusage` in microseconds, so a `rate()` over a scrape interval shows
//! the CPU a node spent in it, not 0 or 1.

use prometheus::core::{Collector, Desc};
use prometheus::process_collector::ProcessCollector;
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Opts};

const CPU: &str = "process_cpu_seconds_total";

pub struct Process {
    inner: ProcessCollector,
}

impl Process {
    pub fn for_self() -> Process {
        Process {
            inner: ProcessCollector::for_self(),
        }
    }
}

/// User and system CPU time of the whole process, in seconds.
pub fn cpu_seconds() -> Option<f64> {
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid
    // rusage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(secs(usage.ru_utime) + secs(usage.ru_stime))
}

impl Collector for Process {
    fn desc(&self) -> Vec<&Desc> {
        // The inner collector's descriptions name the same families,
        // the CPU counter included.
        self.inner.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut families = self.inner.collect();
        families.retain(|f| f.name() != CPU);
        if let Some(secs) = cpu_seconds() {
            let help = "Total user and system CPU time spent in seconds.";
            let cpu = Counter::with_opts(Opts::new(CPU, help)).expect("a valid metric name");
            cpu.inc_by(secs);
            families.extend(cpu.collect());
        }
        families
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_fractional_and_grows_with_work() {
        let collected = || {
            let families = Process::for_self().collect();
            let cpu: Vec<_> = families.iter().filter(|f| f.name() == CPU).collect();
            assert_eq!(cpu.len(), 1, "one CPU family");
            cpu[0].get_metric()[0].get_counter().get_value()
        };
        let before = collected();
        // About 20 ms of work: more than one clock tick, far less than
        // the whole second the crate's own collector would need to show it.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let after = collected();
        assert!(after > before, "{before} → {after}");
        assert!(after - before < 1.0, "{before} → {after}");
    }
}
