//! What the suite reads from the machine and the servers: a process's
//! resident memory, a directory's bytes, Redis's own memory accounting, the
//! load average, the data directories' filesystem, the rushd build's
//! profile, and the machine's facts for the top of the report.

use super::servers::Server;
use super::{Footprint, Machine, ServerKind};
use crate::target::{Side, Target};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// Memory and disk of `server` holding `items` items of `workload`'s data
/// (links, or owners; after a compaction on Rush, so the disk figure is
/// settled data, not WAL and memtables); `empty`: the same server's figures
/// before anything was loaded.
pub(super) fn footprint(
    rt: &tokio::runtime::Runtime,
    server: &Server,
    kind: ServerKind,
    workload: &str,
    items: u64,
    empty: Option<&Footprint>,
) -> anyhow::Result<Footprint> {
    let rss_bytes = rss_of(server.child.id())?;
    let (used_memory, keys) = match kind.side() {
        Side::Redis => {
            let (used, keys) = rt.block_on(redis_memory(&server.target))?;
            (Some(used), Some(keys))
        }
        Side::Rush => {
            rt.block_on(async {
                let c = rush_client::Client::connect(&server.target.addr).await?;
                c.compact().await?;
                anyhow::Ok(())
            })?;
            (None, None)
        }
    };
    Ok(Footprint {
        server: kind,
        workload: workload.into(),
        links: items,
        keys,
        rss_bytes,
        rss_empty_bytes: empty.map_or(rss_bytes, |e| e.rss_bytes),
        disk_bytes: dir_bytes(server.dir.path()),
        disk_empty_bytes: empty.map_or(0, |e| e.disk_bytes),
        used_memory,
        used_memory_empty: empty.and_then(|e| e.used_memory).or(used_memory),
    })
}

/// Resident memory of process `pid` (VmRSS), bytes.
fn rss_of(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .context("no VmRSS line")
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Redis `INFO memory` used_memory and DBSIZE.
async fn redis_memory(target: &Target) -> anyhow::Result<(u64, u64)> {
    let client = redis::Client::open(format!("redis://{}/", target.addr))?;
    let mut c = client.get_multiplexed_async_connection().await?;
    let info: String = redis::cmd("INFO").arg("memory").query_async(&mut c).await?;
    let used = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")?;
    let keys: u64 = redis::cmd("DBSIZE").query_async(&mut c).await?;
    Ok((used, keys))
}

/// The 1-minute load average now.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

/// Where the servers' data directories go: the given parent, else the
/// system temp directory unless it is in memory (tmpfs would make every
/// fsync free and the durability comparison meaningless), else `.`.
pub(super) fn data_parent(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = given {
        std::fs::create_dir_all(p)?;
        return Ok(p.to_path_buf());
    }
    let tmp = std::env::temp_dir();
    if fs_type(&tmp) == "tmpfs" {
        eprintln!(
            "{} is tmpfs (fsync would be free): keeping server data in .",
            tmp.display()
        );
        return Ok(PathBuf::from("."));
    }
    Ok(tmp)
}

/// The filesystem `path` is on (`ext4`, `tmpfs`, …), by statfs(2).
fn fs_type(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return "unknown".into();
    };
    // SAFETY: statfs writes into the zeroed struct we own.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return "unknown".into();
    }
    match st.f_type as i64 {
        0xEF53 => "ext4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x794C_7630 => "overlayfs".into(),
        0x2FC1_2FC1 => "zfs".into(),
        other => format!("0x{other:x}"),
    }
}

/// Facts about this machine for the top of the report.
pub fn machine(data_parent: &Path) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: f64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        memory_gib: mem_kib / (1024.0 * 1024.0),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        load_average: load_average(),
        data_fs: fs_type(data_parent),
    }
}

/// `release` or `debug`: the Cargo profile a binary was built with, from
/// its path (`target/release/rushd`).
pub(super) fn profile_of(bin: &Path) -> String {
    let parts: Vec<_> = bin
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect();
    if parts.iter().any(|p| p == "release") {
        "release".into()
    } else if parts.iter().any(|p| p == "debug") {
        "debug".into()
    } else {
        "unknown".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_from_path() {
        assert_eq!(profile_of(Path::new("target/release/rushd")), "release");
        assert_eq!(profile_of(Path::new("/x/target/debug/rushd")), "debug");
        assert_eq!(profile_of(Path::new("/usr/bin/rushd")), "unknown");
    }

    #[test]
    fn machine_facts_are_read() {
        let m = machine(&std::env::temp_dir());
        assert!(m.cores >= 1);
        assert!(!m.cpu.is_empty());
    }
}
