//! The standard `process_*` metrics every Prometheus exporter has, read from
//! `/proc/self` at scrape time as the client libraries do (client_golang's
//! process collector: same names, types and units), so dashboards and
//! alerts written for any exporter work on rushd: CPU seconds, resident and
//! virtual memory, threads, open and maximum file descriptors, start time.
//!
//! A file that can't be read (not Linux, a locked-down /proc) leaves its
//! metrics out of that scrape rather than reporting a made-up value.

use prometheus::core::{Collector, Desc};
use prometheus::proto;
use std::collections::HashMap;

/// What `/proc/self/stat` says, in the units the metrics use.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stat {
    cpu_seconds: f64,
    /// Seconds since boot at which the process started.
    started_after_boot: f64,
    threads: u64,
    virtual_bytes: u64,
    resident_bytes: u64,
}

/// Parse `/proc/PID/stat` (proc(5)): the command name is in parentheses
/// and may itself hold spaces or parentheses, so fields count from the
/// last `)`.
fn parse_stat(text: &str, ticks_per_second: f64, page_bytes: u64) -> Option<Stat> {
    let after = &text[text.rfind(')')? + 1..];
    // Fields after the name, from field 3 (state) on.
    let f: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| -> Option<u64> { f.get(n - 3)?.parse().ok() };
    let (utime, stime) = (field(14)?, field(15)?);
    Some(Stat {
        cpu_seconds: (utime + stime) as f64 / ticks_per_second,
        threads: field(20)?,
        started_after_boot: field(22)? as f64 / ticks_per_second,
        virtual_bytes: field(23)?,
        resident_bytes: field(24)?.saturating_mul(page_bytes),
    })
}

/// Boot time, Unix seconds: the `btime` line of `/proc/stat`.
fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// One family per metric, described once.
pub struct ProcessCollector {
    cpu: Desc,
    resident: Desc,
    virtual_memory: Desc,
    threads: Desc,
    open_fds: Desc,
    max_fds: Desc,
    start_time: Desc,
    ticks_per_second: f64,
    page_bytes: u64,
}

fn desc(name: &str, help: &str) -> Desc {
    Desc::new(name.into(), help.into(), Vec::new(), HashMap::new()).expect("valid metric")
}

impl ProcessCollector {
    pub fn new() -> ProcessCollector {
        // SAFETY: sysconf reads a constant of the running system.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        ProcessCollector {
            cpu: desc(
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds.",
            ),
            resident: desc(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
            ),
            virtual_memory: desc(
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
            ),
            threads: desc("process_threads", "Number of OS threads in the process."),
            open_fds: desc("process_open_fds", "Number of open file descriptors."),
            max_fds: desc(
                "process_max_fds",
                "Maximum number of open file descriptors.",
            ),
            start_time: desc(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
            ),
            // 100 on every Linux of the last decades; sysconf says for sure.
            ticks_per_second: if ticks > 0 { ticks as f64 } else { 100.0 },
            page_bytes: if page > 0 { page as u64 } else { 4096 },
        }
    }
}

impl Default for ProcessCollector {
    fn default() -> Self {
        Self::new()
    }
}

fn one(desc: &Desc, kind: proto::MetricType, value: f64) -> proto::MetricFamily {
    let mut m = proto::Metric::default();
    match kind {
        proto::MetricType::COUNTER => {
            let mut c = proto::Counter::default();
            c.set_value(value);
            m.set_counter(c);
        }
        _ => {
            let mut g = proto::Gauge::default();
            g.set_value(value);
            m.set_gauge(g);
        }
    }
    let mut f = proto::MetricFamily::default();
    f.set_name(desc.fq_name.clone());
    f.set_help(desc.help.clone());
    f.set_field_type(kind);
    f.set_metric(vec![m]);
    f
}

fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

fn max_fds() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0).then_some(lim.rlim_cur)
}

impl Collector for ProcessCollector {
    fn desc(&self) -> Vec<&Desc> {
        vec![
            &self.cpu,
            &self.resident,
            &self.virtual_memory,
            &self.threads,
            &self.open_fds,
            &self.max_fds,
            &self.start_time,
        ]
    }

    fn collect(&self) -> Vec<proto::MetricFamily> {
        use proto::MetricType::{COUNTER, GAUGE};
        let mut out = Vec::with_capacity(7);
        let stat = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|t| parse_stat(&t, self.ticks_per_second, self.page_bytes));
        if let Some(s) = stat {
            out.push(one(&self.cpu, COUNTER, s.cpu_seconds));
            out.push(one(&self.resident, GAUGE, s.resident_bytes as f64));
            out.push(one(&self.virtual_memory, GAUGE, s.virtual_bytes as f64));
            out.push(one(&self.threads, GAUGE, s.threads as f64));
            let boot = std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|t| parse_boot_time(&t));
            if let Some(boot) = boot {
                out.push(one(
                    &self.start_time,
                    GAUGE,
                    boot as f64 + s.started_after_boot,
                ));
            }
        }
        if let Some(n) = open_fds() {
            // read_dir's own descriptor was open while counting.
            out.push(one(&self.open_fds, GAUGE, n.saturating_sub(1) as f64));
        }
        if let Some(n) = max_fds() {
            out.push(one(&self.max_fds, GAUGE, n as f64));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_count_from_the_last_parenthesis() {
        // A command name with spaces and a ')' of its own.
        let line = "4242 (rush d) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 \
                    250 150 0 0 20 0 7 0 12345 987654321 2048 18446744073709551615";
        let s = parse_stat(line, 100.0, 4096).unwrap();
        assert_eq!(
            s,
            Stat {
                cpu_seconds: 4.0,
                started_after_boot: 123.45,
                threads: 7,
                virtual_bytes: 987_654_321,
                resident_bytes: 2048 * 4096,
            }
        );
        assert_eq!(parse_stat("4242 (rushd) S 1 2", 100.0, 4096), None);
        assert_eq!(
            parse_boot_time("cpu 1 2\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_measured() {
        let families = ProcessCollector::new().collect();
        let value = |name: &str| -> f64 {
            let f = families
                .iter()
                .find(|f| f.name() == name)
                .unwrap_or_else(|| panic!("{name} missing"));
            let m = &f.get_metric()[0];
            if f.get_field_type() == proto::MetricType::COUNTER {
                m.get_counter().get_value()
            } else {
                m.get_gauge().get_value()
            }
        };
        assert_eq!(families.len(), 7);
        assert!(value("process_resident_memory_bytes") > 1e6);
        assert!(value("process_virtual_memory_bytes") >= value("process_resident_memory_bytes"));
        assert!(value("process_threads") >= 1.0);
        // stdin, stdout and stderr at least.
        assert!(value("process_open_fds") >= 3.0);
        assert!(value("process_max_fds") >= value("process_open_fds"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{started}"
        );
    }
}
