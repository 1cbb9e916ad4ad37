//! CPU time (user + system) of processes, in seconds: the server's, by
//! pid, and this process's (the bench client).

/// Process `pid`'s CPU time so far, from `/proc/PID/stat`.
pub fn process(pid: Option<u32>) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // The command name (field 2) may hold spaces: count from after ')'.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are the 12th and 13th after ')'.
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(ticks / if hz > 0 { hz as f64 } else { 100.0 })
}

/// This process's CPU time so far (the bench client).
pub fn this_process() -> Option<f64> {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return None;
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    Some(t(u.ru_utime) + t(u.ru_stime))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_cpu_times() {
        let me = super::process(Some(std::process::id())).expect("own stat");
        assert!(me >= 0.0);
        assert!(super::this_process().expect("rusage") >= 0.0);
        assert!(super::process(None).is_none());
    }
}
