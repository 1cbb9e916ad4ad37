//! CPU time (user + system) of processes, in seconds: the server's, by
//! pid, and this process's (the bench client).
//!
//! A server's CPU time includes the processes it forks, because their work
//! is the server's: Redis rewrites its AOF in a forked child (its
//! counterpart of rushd's compactions, which run on rushd's own threads).
//! A child the server has waited for is in the server's `cutime` and
//! `cstime`; one still running is found by its parent pid and read itself.

use std::collections::HashMap;

/// One process's figures from `/proc/PID/stat`, in clock ticks.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stat {
    ppid: u32,
    /// utime + stime: the process's own threads.
    own: u64,
    /// cutime + cstime: the children it has waited for.
    reaped: u64,
}

/// Parse the text of `/proc/PID/stat`.
fn parse(stat: &str) -> Option<Stat> {
    // The command name (field 2) may hold spaces: count from after ')'.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Field 4 (ppid) is the 2nd after ')'; fields 14 to 17 (utime, stime,
    // cutime, cstime) the 12th to the 15th.
    let n = |i: usize| f.get(i)?.parse::<u64>().ok();
    Some(Stat {
        ppid: n(1)? as u32,
        own: n(11)? + n(12)?,
        reaped: n(13)? + n(14)?,
    })
}

fn read(pid: u32) -> Option<Stat> {
    parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process's figures, by pid.
fn every_process() -> HashMap<u32, Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        Some((pid, read(pid)?))
    })
    .collect()
}

/// Ticks of `pid`'s running descendants, theirs and their reaped children's.
fn running_descendants(pid: u32, all: &HashMap<u32, Stat>) -> u64 {
    let mut ticks = 0;
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for (&child, s) in all.iter().filter(|(&p, s)| s.ppid == parent && p != parent) {
            ticks += s.own + s.reaped;
            parents.push(child);
        }
    }
    ticks
}

/// Process `pid`'s CPU time so far, its children's included.
pub fn process(pid: Option<u32>) -> Option<f64> {
    let (own, children) = own_and_children(pid?)?;
    Some((own + children) as f64 / clock_ticks())
}

/// Ticks of `pid`'s own threads, and of its children (reaped and running).
fn own_and_children(pid: u32) -> Option<(u64, u64)> {
    let mut before = read(pid)?;
    // A child reaped between reading the server and listing its children
    // would be counted in neither (or, the other way round, in both): list
    // again until the server's reaped time holds still across the listing.
    let mut ticks = (0, 0);
    for _ in 0..5 {
        let running = running_descendants(pid, &every_process());
        let after = read(pid)?;
        ticks = (after.own, after.reaped + running);
        if after.reaped == before.reaped {
            break;
        }
        before = after;
    }
    Some(ticks)
}

/// Names of a server's threads whose time is background work: RocksDB's
/// flushes and compactions (`rocksdb:low`, `rocksdb:high`, …).
const BACKGROUND_THREADS: &str = "rocksdb:";

/// The part of [`process`] that is background work, not requests: the
/// server's RocksDB threads (rushd's flushes and compactions) and the
/// processes it forks (Redis's AOF rewrites). A row whose server time is
/// mostly this paid for earlier writes (the suite's runs share one server:
/// bench/results/NOTES.md).
pub fn background(pid: Option<u32>) -> Option<f64> {
    let pid = pid?;
    let (_, children) = own_and_children(pid)?;
    Some((background_threads(pid)? + children) as f64 / clock_ticks())
}

/// Ticks of `pid`'s threads named [`BACKGROUND_THREADS`].
fn background_threads(pid: u32) -> Option<u64> {
    let threads = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let ticks = threads
        .filter_map(|t| {
            let tid = t.ok()?.file_name();
            let stat =
                std::fs::read_to_string(format!("/proc/{pid}/task/{}/stat", tid.to_str()?)).ok()?;
            let name = stat.split_once('(')?.1.rsplit_once(')')?.0;
            name.starts_with(BACKGROUND_THREADS)
                .then(|| parse(&stat).map(|s| s.own))
                .flatten()
        })
        .sum();
    Some(ticks)
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
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
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    #[test]
    fn reads_cpu_times() {
        let me = super::process(Some(std::process::id())).expect("own stat");
        assert!(me >= 0.0);
        assert!(super::this_process().expect("rusage") >= 0.0);
        assert!(super::process(None).is_none());
    }

    /// Time on a thread named as RocksDB names its background threads is
    /// background; time on other threads is not. (Forked children are
    /// background too: [`background`] adds them as [`process`] does, which
    /// the test above covers; other tests' children would blur this one.)
    #[test]
    fn counts_threads_named_rocksdb_as_background() {
        let pid = std::process::id();
        let me =
            || super::background_threads(pid).expect("own threads") as f64 / super::clock_ticks();
        let burn = |secs: f64| {
            let until = std::time::Instant::now() + Duration::from_secs_f64(secs);
            let mut x = 0u64;
            while std::time::Instant::now() < until {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        };
        // A thread's time is in /proc while the thread lives: each one
        // burns, then waits to be let go until its time has been read.
        let busy = |name: &str| {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            let worker = std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    burn(0.4);
                    let _ = done_tx.send(());
                    let _ = rx.recv();
                })
                .unwrap();
            done_rx.recv().unwrap();
            (tx, worker)
        };
        let before = me();
        let (other_tx, other) = busy("rush-test-busy");
        let after_other = me();
        let (tx, worker) = busy("rocksdb:test");
        let during = me();
        for (tx, worker) in [(other_tx, other), (tx, worker)] {
            drop(tx);
            worker.join().unwrap();
        }
        assert!(
            after_other - before < 0.2,
            "another thread's time is not background: {before} -> {after_other}"
        );
        assert!(
            during - after_other >= 0.3,
            "a rocksdb: thread's time is background: {after_other} -> {during}"
        );
    }

    #[test]
    fn parses_a_command_name_with_spaces_and_parens() {
        let line = "4242 (redis (server) x) S 17 4242 4242 0 -1 4194560 \
                    100 0 0 0 250 50 30 12 20 0 4 0 1000 0 0";
        let s = super::parse(line).expect("parsed");
        assert_eq!(s.ppid, 17);
        assert_eq!(s.own, 300);
        assert_eq!(s.reaped, 42);
    }

    /// A parent that does nothing but wait: all of its CPU time is its
    /// child's, counted while the child runs and after the parent reaps it.
    #[test]
    fn counts_a_forked_childs_time_running_and_reaped() {
        use std::io::{BufRead, BufReader, Write};
        let dir = tempfile::tempdir().unwrap();
        let mut shell = Command::new("sh")
            .args([
                "-c",
                // The child burns CPU until the file `stop` appears; the
                // parent reaps it, says so, and waits for its stdin to close.
                "(while [ ! -e \"$1/stop\" ]; do :; done) & wait; echo reaped; read _",
                "sh",
            ])
            .arg(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh");
        let pid = Some(shell.id());
        let deadline = Instant::now() + Duration::from_secs(30);
        let running = loop {
            let t = super::process(pid).expect("stat");
            if t >= 0.3 || Instant::now() > deadline {
                break t;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        std::fs::write(dir.path().join("stop"), b"").unwrap();
        let mut line = String::new();
        BufReader::new(shell.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "reaped");
        let reaped = super::process(pid).expect("stat");
        let mut stdin = shell.stdin.take().unwrap();
        let _ = stdin.write_all(b"\n");
        drop(stdin);
        shell.wait().expect("wait");
        assert!(running >= 0.3, "a running child's CPU counted: {running}");
        assert!(
            reaped >= running,
            "the reaped child's time ({reaped}) holds what was seen running ({running})"
        );
    }
}
