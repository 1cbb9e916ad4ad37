//! The pinned layout (`--pin`): which CPUs the server and the client get,
//! the `taskset` that puts a server on its CPU, and the affinity calls that
//! move this process (the client) onto its own.

use anyhow::{bail, Context};
use std::path::PathBuf;

/// The pinned layout's CPUs and the tool that puts a server on one.
#[derive(Debug, Clone)]
pub(super) struct Pin {
    pub taskset: PathBuf,
    pub server_cpu: usize,
    pub client_cpu: usize,
    /// This process's allowed CPUs before phase 4 (given back after it).
    pub allowed: Vec<usize>,
}

impl Pin {
    /// The first two CPUs this process may run on, and `taskset`; an error
    /// saying what is missing when either is.
    pub fn resolve() -> anyhow::Result<Pin> {
        let allowed = affinity::allowed(0).context("reading this process's CPU affinity")?;
        let (server_cpu, client_cpu) = pin_cpus(&allowed)?;
        let taskset = find_in_path("taskset").context(
            "--pin needs taskset, which is not on PATH: it is in the util-linux package \
             (apt-get install util-linux)",
        )?;
        Ok(Pin {
            taskset,
            server_cpu,
            client_cpu,
            allowed,
        })
    }
}

/// The server's and the client's CPU: the first two of `allowed`.
fn pin_cpus(allowed: &[usize]) -> anyhow::Result<(usize, usize)> {
    let mut cpus = allowed.to_vec();
    cpus.sort_unstable();
    cpus.dedup();
    match cpus[..] {
        [server, client, ..] => Ok((server, client)),
        _ => bail!(
            "--pin needs two CPUs (one for the server, one for the client), but this process \
             may run on {} ({})",
            match cpus.len() {
                1 => "only one".to_string(),
                n => n.to_string(),
            },
            if cpus.is_empty() {
                "none".to_string()
            } else {
                format!(
                    "CPU {}",
                    cpus.iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ),
    }
}

/// `name` in a directory of `$PATH`.
fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// CPU affinity of threads (`sched_getaffinity`/`sched_setaffinity`).
pub(super) mod affinity {
    use std::collections::HashSet;
    use std::io;
    use std::mem::size_of;

    /// CPUs a `cpu_set_t` can name.
    const CPUS: usize = 8 * size_of::<libc::cpu_set_t>();

    /// The CPUs thread `tid` may run on (0: the calling thread; a process
    /// id names its main thread), ascending.
    pub fn allowed(tid: i32) -> io::Result<Vec<usize>> {
        // SAFETY: an all-zero cpu_set_t is the empty set; the call writes
        // at most size_of::<cpu_set_t>() bytes into it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        if unsafe { libc::sched_getaffinity(tid, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: CPU_ISSET reads the set we own, `c` below its size.
        Ok((0..CPUS)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect())
    }

    /// Let thread `tid` (0: the calling thread) run on `cpus` only.
    pub fn set(tid: i32, cpus: &[usize]) -> io::Result<()> {
        // SAFETY: as in `allowed`; CPU_SET writes into the set we own.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            if c >= CPUS {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("CPU {c} is beyond what a cpu_set_t names"),
                ));
            }
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        if unsafe { libc::sched_setaffinity(tid, size_of::<libc::cpu_set_t>(), &set) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Every thread of this process onto `cpus`. A thread started meanwhile
    /// takes its creator's mask, which may be the old one, so passes repeat
    /// until one finds no thread it had not set; threads started after that
    /// are started by pinned threads.
    pub fn set_process(cpus: &[usize]) -> io::Result<()> {
        let mut done = HashSet::new();
        loop {
            let mut new = false;
            for entry in std::fs::read_dir("/proc/self/task")? {
                let name = entry?.file_name();
                let Some(tid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
                    continue;
                };
                if !done.insert(tid) {
                    continue;
                }
                new = true;
                match set(tid, cpus) {
                    // ESRCH: the thread ended meanwhile.
                    Err(e) if e.raw_os_error() != Some(libc::ESRCH) => return Err(e),
                    _ => {}
                }
            }
            if !new {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_cpus_are_the_first_two_allowed() {
        assert_eq!(pin_cpus(&[0, 1]).unwrap(), (0, 1));
        // Not machine-specific: whatever the allowed set is, its first two.
        assert_eq!(pin_cpus(&[3, 5, 7]).unwrap(), (3, 5));
        assert_eq!(pin_cpus(&[9, 2, 4]).unwrap(), (2, 4));
        let one = pin_cpus(&[2]).unwrap_err().to_string();
        assert!(one.contains("needs two CPUs"), "{one}");
        assert!(one.contains("only one (CPU 2)"), "{one}");
        assert!(pin_cpus(&[]).is_err());
    }

    #[test]
    fn affinity_is_read_and_set_per_thread() {
        let all = affinity::allowed(0).expect("sched_getaffinity");
        assert!(!all.is_empty());
        assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
        // Pin a thread of our own; the others keep their mask.
        let first = all[0];
        let pinned = std::thread::spawn(move || {
            affinity::set(0, &[first]).expect("sched_setaffinity");
            affinity::allowed(0).expect("sched_getaffinity")
        })
        .join()
        .unwrap();
        assert_eq!(pinned, [first]);
        assert_eq!(affinity::allowed(0).unwrap(), all);
        assert!(affinity::set(0, &[1 << 20]).is_err());
        // The whole process onto the set it already has: a no-op that works.
        affinity::set_process(&all).expect("every thread");
        assert_eq!(affinity::allowed(0).unwrap(), all);
    }

    #[test]
    fn taskset_is_looked_up_on_path() {
        assert!(find_in_path("sh").is_some());
        assert!(find_in_path("no-such-tool-rush-bench").is_none());
    }
}
