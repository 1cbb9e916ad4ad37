//! The servers under test: rushd and redis-server started on loopback with
//! temporary data directories (optionally under `taskset`), waited on until
//! they answer, and stopped — gracefully, on drop, or by the signal handler
//! when the suite is interrupted.

use super::{ServerKind, SuiteOptions};
use crate::target::Target;
use anyhow::{bail, Context};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The server running now (pid and data directory), for the signal handler:
/// an interrupted suite kills it and removes its data before exiting.
static ACTIVE: Mutex<Option<(u32, PathBuf)>> = Mutex::new(None);

/// On SIGINT/SIGTERM: kill the running server, remove its data directory,
/// exit 130. (Drop would not run: the signal ends the process.)
pub(super) fn install_signal_handler(rt: &tokio::runtime::Runtime) {
    rt.spawn(async {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        eprintln!("rush-bench suite: interrupted; stopping the server");
        if let Some((pid, dir)) = ACTIVE.lock().expect("not poisoned").take() {
            // SAFETY: kill/waitpid on our own child.
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
                libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
            }
            let _ = std::fs::remove_dir_all(dir);
        }
        std::process::exit(130);
    });
}

/// A server process on loopback with its own temporary data directory.
/// Dropping it kills the process; [`Server::stop`] stops it gracefully.
pub(super) struct Server {
    pub child: Child,
    pub target: Target,
    /// rushd's HTTP listener (`/metrics`).
    pub http: Option<String>,
    /// `HOST:PORT` speaking RESP: rushd's RESP listener, redis-server itself.
    pub resp: Option<String>,
    pub name: &'static str,
    /// Removed when the server is dropped (after the process is gone).
    pub dir: tempfile::TempDir,
}

impl Server {
    /// `on`: start it under `taskset -c CPU` (the taskset binary and the
    /// CPU); `rushd_args`: more arguments for rushd (after the suite's own;
    /// redis-server is given none of them).
    pub fn start(
        kind: ServerKind,
        opts: &SuiteOptions,
        shards: Option<usize>,
        data_parent: &Path,
        on: Option<(&Path, usize)>,
        rushd_args: &[String],
    ) -> anyhow::Result<Server> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("rush-bench-{}-", kind.key()))
            .tempdir_in(data_parent)
            .context("creating a data directory")?;
        let server = match kind {
            ServerKind::Rush => {
                let mut cmd = server_command(&opts.rushd, on);
                rushd_command(&mut cmd, shards, rushd_args, dir.path());
                start_rushd(cmd, dir)
            }
            ServerKind::RedisEverysec => {
                start_redis(server_command(&opts.redis_server, on), "everysec", dir)
            }
            ServerKind::RedisAlways => {
                start_redis(server_command(&opts.redis_server, on), "always", dir)
            }
        }?;
        *ACTIVE.lock().expect("not poisoned") =
            Some((server.child.id(), server.dir.path().to_path_buf()));
        Ok(server)
    }

    /// SIGTERM, then wait (SIGKILL after 20 s).
    pub fn stop(mut self) -> anyhow::Result<()> {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait()? {
                if !status.success() {
                    eprintln!("{} exited with {status}", self.name);
                }
                return Ok(());
            }
            if Instant::now() > deadline {
                eprintln!("{} did not stop within 20 s: killing it", self.name);
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        ACTIVE.lock().expect("not poisoned").take();
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Spawn `cmd` so that it is killed if this process dies (PR_SET_PDEATHSIG):
/// no server outlives an interrupted suite.
fn spawn_tied(cmd: &mut Command) -> std::io::Result<Child> {
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn()
}

/// The command that runs server binary `bin`: the binary itself, or
/// `taskset -c CPU bin` (taskset sets the mask and execs it: the same pid,
/// and every thread the server starts inherits the CPU).
fn server_command(bin: &Path, on: Option<(&Path, usize)>) -> Command {
    match on {
        None => Command::new(bin),
        Some((taskset, cpu)) => {
            let mut cmd = Command::new(taskset);
            cmd.arg("-c").arg(cpu.to_string()).arg(bin);
            cmd
        }
    }
}

/// The program a server command runs, for messages.
fn program(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .take_while(|a| !a.to_string_lossy().starts_with("--"))
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// rushd's arguments: loopback listeners on free ports, quiet logs, the
/// data directory `data`, `--shards` when given, then `extra`.
fn rushd_command(cmd: &mut Command, shards: Option<usize>, extra: &[String], data: &Path) {
    cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        // The RESP listener, for redis-benchmark (an explicit address must bind).
        "--resp",
        "127.0.0.1:0",
        "--log",
        "warn",
        "--data",
    ])
    .arg(data)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    if let Some(n) = shards {
        cmd.arg("--shards").arg(n.to_string());
    }
    cmd.args(extra);
}

/// Run rushd's `cmd` (see [`rushd_command`]) on data directory `dir` and
/// wait for its serving line.
fn start_rushd(mut cmd: Command, dir: tempfile::TempDir) -> anyhow::Result<Server> {
    let mut child = spawn_tied(&mut cmd).with_context(|| format!("running {}", program(&cmd)))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    // The first line is "rushd serving ADDR http ADDR redirect ADDR resp
    // ADDR"; later ones (logs)
    // are passed on, so the pipe never fills.
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
        if let Some(first) = lines.next() {
            let _ = tx.send(first);
        }
        for line in lines {
            eprintln!("rushd: {line}");
        }
    });
    let line = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(l) => l,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            bail!("rushd did not print its serving line within 60 s");
        }
    };
    let parts: Vec<&str> = line.split_whitespace().collect();
    if parts.get(1) != Some(&"serving") || parts.len() < 3 {
        let _ = child.kill();
        let _ = child.wait();
        bail!("unexpected first line from rushd: {line:?}");
    }
    let target: Target = format!("rush://{}", parts[2])
        .parse()
        .map_err(|e: String| anyhow::anyhow!(e))?;
    let http = listener(&parts, "http");
    let resp = listener(&parts, "resp");
    Ok(Server {
        child,
        target,
        http,
        resp,
        name: "rushd",
        dir,
    })
}

/// The address after `name` in rushd's serving line (`None` when "off" or absent).
fn listener(parts: &[&str], name: &str) -> Option<String> {
    let i = parts.iter().skip(3).position(|p| *p == name)? + 3;
    parts
        .get(i + 1)
        .filter(|a| **a != "off")
        .map(|a| a.to_string())
}

fn start_redis(mut cmd: Command, fsync: &str, dir: tempfile::TempDir) -> anyhow::Result<Server> {
    // A free loopback port (the small race with other processes is harmless:
    // the readiness check below would fail loudly).
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let log = dir.path().join("redis.log");
    cmd.arg("--port")
        .arg(port.to_string())
        .args([
            "--bind",
            "127.0.0.1",
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
        ])
        .args(["--appendonly", "yes", "--appendfsync", fsync])
        // RDB snapshots off: the AOF is the durability under test, and a
        // background save mid-run would only add noise.
        .args(["--save", ""])
        .arg("--dir")
        .arg(dir.path())
        .arg("--logfile")
        .arg(&log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let mut child = spawn_tied(&mut cmd).with_context(|| format!("running {}", program(&cmd)))?;
    let addr = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if redis_ping(&addr) {
            break;
        }
        if let Some(status) = child.try_wait()? {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            bail!("redis-server exited with {status}:\n{tail}");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("redis-server did not answer PING on {addr} within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Server {
        child,
        target: format!("redis://{addr}")
            .parse()
            .map_err(|e: String| anyhow::anyhow!(e))?,
        http: None,
        resp: Some(addr.clone()),
        name: "redis-server",
        dir,
    })
}

/// True when a Redis on `addr` answers PING (and has loaded its data).
fn redis_ping(addr: &str) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

pub(super) fn redis_version(bin: &Path) -> anyhow::Result<String> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .with_context(|| {
            format!(
                "running {} --version (is redis-server installed?)",
                bin.display()
            )
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or(text.trim())
        .to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_listeners_from_the_serving_line() {
        let line =
            "rushd serving 127.0.0.1:4000 http 127.0.0.1:4001 redirect off resp 127.0.0.1:4002";
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(listener(&parts, "http").as_deref(), Some("127.0.0.1:4001"));
        assert_eq!(listener(&parts, "resp").as_deref(), Some("127.0.0.1:4002"));
        assert_eq!(listener(&parts, "redirect"), None);
        // An older rushd's line has no resp.
        let old: Vec<&str> = "rushd serving 127.0.0.1:4000 http 127.0.0.1:4001"
            .split_whitespace()
            .collect();
        assert_eq!(listener(&old, "resp"), None);
        assert_eq!(listener(&old, "http").as_deref(), Some("127.0.0.1:4001"));
    }

    #[test]
    fn pinned_servers_start_under_taskset() {
        let plain = server_command(Path::new("/b/rushd"), None);
        assert_eq!(plain.get_program(), "/b/rushd");
        assert_eq!(plain.get_args().count(), 0);
        let mut pinned = server_command(Path::new("/b/rushd"), Some((Path::new("/t/taskset"), 3)));
        assert_eq!(pinned.get_program(), "/t/taskset");
        let args: Vec<_> = pinned.get_args().collect();
        assert_eq!(args, ["-c", "3", "/b/rushd"]);
        pinned.args(["--listen", "127.0.0.1:0"]);
        assert_eq!(program(&pinned), "/t/taskset -c 3 /b/rushd");
    }

    #[test]
    fn rushd_gets_the_phase_arguments_after_its_own() {
        let mut cmd = server_command(Path::new("/b/rushd"), None);
        let extra = ["--memory-mb".to_string(), "256".to_string()];
        rushd_command(&mut cmd, Some(2), &extra, Path::new("/d"));
        let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy()).collect();
        let at = |flag: &str| args.iter().position(|a| a == flag).expect(flag);
        assert_eq!(args[at("--data") + 1], "/d");
        assert_eq!(args[at("--shards") + 1], "2");
        assert_eq!(args[at("--memory-mb") + 1], "256");
        assert_eq!(args.last().map(|a| a.as_ref()), Some("256"));
        // Without any: the suite's own arguments only.
        let mut plain = server_command(Path::new("/b/rushd"), None);
        rushd_command(&mut plain, None, &[], Path::new("/d"));
        assert!(!plain
            .get_args()
            .any(|a| a == "--memory-mb" || a == "--shards"));
    }
}
