//! Test support: real daemons (in-process on port 0, or spawned `rushd`
//! processes) on real RocksDB in temporary directories, and real clients.
#![allow(dead_code)]

use rush_client::protocol::cmd::{PolicyDef, Rule, Scope};
use rush_client::protocol::Reply;
use rush_client::{Client, ClientOptions};
use rush_daemon::{Clock, Config, Running};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

#[allow(unused_imports)]
pub use rush_test_support::{fixed_listen_addr, fixed_ports};

/// A config for tests: [`Config::small`] with HTTP on a loopback port 0 and
/// clock control on.
pub fn test_config(dir: &Path) -> Config {
    let mut c = Config::small(dir);
    c.server.http = "127.0.0.1:0".into();
    // Not the default (the protocol port + 2): beside an ephemeral port,
    // that one can be any other socket's, and the RESP listener would be
    // off. A test of the default placement asks for it on fixed ports.
    c.server.resp_listen = Some("127.0.0.1:0".into());
    c.debug.clock_control = true;
    c
}

/// An in-process node with its own data directory and a connected client.
pub struct TestNode {
    pub dir: tempfile::TempDir,
    pub config: Config,
    pub clock: Clock,
    running: Option<Running>,
    pub client: Client,
}

impl TestNode {
    pub async fn start() -> TestNode {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> TestNode {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = test_config(dir.path());
        tweak(&mut config);
        let clock = Clock::system();
        let running = rush_daemon::start(config.clone(), clock.clone())
            .await
            .expect("daemon starts");
        let client = connect_as(running.addr(), admin_token(&config)).await;
        TestNode {
            dir,
            config,
            clock,
            running: Some(running),
            client,
        }
    }

    pub fn running(&self) -> &Running {
        self.running.as_ref().expect("running")
    }

    pub fn addr(&self) -> SocketAddr {
        self.running().addr()
    }

    /// The node's `/metrics` page, which must answer 200.
    pub async fn metrics(&self) -> String {
        let http = self.running().http_addr().expect("an HTTP listener");
        let (status, body) = http_get(http, "/metrics").await;
        assert_eq!(status, 200, "/metrics: {body}");
        body
    }

    /// RocksDB point reads the node has made (`rush_storage_reads_total`).
    pub async fn storage_reads(&self) -> u64 {
        self.metrics()
            .await
            .lines()
            .find_map(|l| l.strip_prefix("rush_storage_reads_total "))
            .expect("rush_storage_reads_total")
            .parse()
            .unwrap()
    }

    /// Every key RocksDB holds, in all shards, once it holds every committed
    /// write (with the shard log, writes reach it in runs, on the shards'
    /// timers: counting without writing back first races them).
    pub async fn stored_keys(&self) -> usize {
        self.running().write_back().await;
        let storage = self.running().storage();
        (0..storage.shards())
            .map(|s| storage.count_raw(s, &[], &[0xff, 0xff, 0xff]).unwrap())
            .sum()
    }

    /// Graceful shutdown and start again on the same directory (new port).
    pub async fn restart(&mut self) {
        self.restart_with(|_| {}).await
    }

    pub async fn restart_with(&mut self, tweak: impl FnOnce(&mut Config)) {
        self.running
            .take()
            .expect("running")
            .shutdown()
            .await
            .expect("clean shutdown");
        tweak(&mut self.config);
        let running = rush_daemon::start(self.config.clone(), self.clock.clone())
            .await
            .expect("daemon restarts");
        self.client = connect_as(running.addr(), admin_token(&self.config)).await;
        self.running = Some(running);
    }

    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await.expect("clean shutdown");
        }
    }
}

pub async fn connect(addr: SocketAddr) -> Client {
    connect_as(addr, None).await
}

/// Connections the node holds open now (its INFO `connections`), the
/// asking client's included.
pub async fn open_connections(client: &Client) -> usize {
    client
        .info()
        .await
        .expect("INFO")
        .get("connections")
        .expect("INFO has connections")
        .parse()
        .expect("a count")
}

/// The seed's purchase check done with generic keys, as its five commands
/// in one atomic BATCH: two items marked bought in the hash `items`, which
/// expires in a day, and the order recorded at `order`, which expires too.
/// The two keys must share a slot (a `{hashtag}`).
pub async fn seed_batch(c: &Client, items: &str, order: &str) -> Vec<Reply> {
    let day = Duration::from_secs(86_400);
    c.batch()
        .hset(items.to_owned(), "sku-1", "1")
        .hset(items.to_owned(), "sku-2", "1")
        .expire(items.to_owned(), day)
        .set(order.to_owned(), "1", Duration::ZERO)
        .expire(order.to_owned(), day)
        .exec()
        .await
        .expect("the seed's batch")
}

/// What [`seed_batch`] answers on keys that did not exist.
pub const SEED_BATCH_REPLIES: [Reply; 5] = [
    Reply::HSet(1),
    Reply::HSet(1),
    Reply::Expire(true),
    Reply::Set(true),
    Reply::Expire(true),
];

/// A purchase-limit policy: `rules` as (name, scope, max, window), the
/// window as in the config ("day", "fixed:60", "sliding:60/6").
pub fn limit_policy(name: &str, rules: &[(&str, Scope, u64, &str)]) -> PolicyDef {
    PolicyDef {
        name: name.into(),
        relaxed: false,
        rules: rules
            .iter()
            .map(|(n, scope, max, w)| Rule {
                name: n.to_string(),
                scope: *scope,
                max: *max,
                window: w.parse().expect("a window"),
            })
            .collect(),
    }
}

/// A client for long admin operations (a slot migration moves hundreds of
/// slots with a few fsyncs each; a loaded machine may take minutes).
pub async fn connect_patient(addr: SocketAddr) -> Client {
    let opts = ClientOptions {
        request_timeout: Duration::from_secs(300),
        ..ClientOptions::default()
    };
    Client::connect_with(&addr.to_string(), opts)
        .await
        .expect("client connects")
}

pub async fn connect_as(addr: SocketAddr, token: Option<String>) -> Client {
    let opts = ClientOptions {
        token,
        ..ClientOptions::default()
    };
    Client::connect_with(&addr.to_string(), opts)
        .await
        .expect("client connects")
}

/// The first admin token of a node's config (`name:secret` lines), so a test
/// node's own client may do everything.
fn admin_token(config: &Config) -> Option<String> {
    let text = std::fs::read_to_string(config.auth.admin_token_file.as_ref()?).ok()?;
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))?;
    Some(
        line.split_once(':')
            .map(|(_, s)| s)
            .unwrap_or(line)
            .to_string(),
    )
}

/// A `rushd` child process.
pub struct Spawned {
    pub child: Child,
    pub addr: SocketAddr,
    pub http: Option<SocketAddr>,
    pub dir: PathBuf,
}

impl Spawned {
    /// Start `rushd` on port 0 with `dir` as its data directory and wait for
    /// its "serving" line.
    pub fn start(dir: &Path, extra: &[&str]) -> Spawned {
        Self::start_on(dir, "127.0.0.1:0", extra)
    }

    /// Like [`Spawned::start`] on a given listen address.
    pub fn start_on(dir: &Path, listen: &str, extra: &[&str]) -> Spawned {
        Self::launch(dir, listen, extra, None)
    }

    /// Like [`Spawned::start`] on a fixed port (see [`fixed_ports`]), so
    /// that it can restart on the same address. A start whose port was
    /// taken between the probe and `rushd`'s own bind (by something
    /// outside this process) asks for another port.
    pub fn start_fixed(dir: &Path, extra: &[&str]) -> Spawned {
        let mut attempt = 0;
        loop {
            match Self::try_launch(dir, &fixed_listen_addr(), extra, None) {
                Ok(s) => return s,
                Err(e) if attempt < 3 && e.contains("Address already in use") => attempt += 1,
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// Like [`Spawned::start`], logging at debug level into `log`.
    pub fn start_logging(dir: &Path, extra: &[&str], log: &Path) -> Spawned {
        Self::launch(dir, "127.0.0.1:0", extra, Some(log))
    }

    fn launch(dir: &Path, listen: &str, extra: &[&str], log: Option<&Path>) -> Spawned {
        Self::try_launch(dir, listen, extra, log).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Start `rushd` and wait for its serving line; if it prints none,
    /// why, with the last lines of its stderr.
    fn try_launch(
        dir: &Path,
        listen: &str,
        extra: &[&str],
        log: Option<&Path>,
    ) -> Result<Spawned, String> {
        let stderr = match log {
            Some(p) => Stdio::from(std::fs::File::create(p).expect("log file")),
            None => Stdio::piped(),
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_rushd"))
            .args(["--listen", listen, "--http", "127.0.0.1:0", "--shards", "2"])
            .arg("--data")
            .arg(dir)
            .args(extra)
            .env("RUSH_LOG", if log.is_some() { "debug" } else { "warn" })
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn rushd");
        // Its stderr is passed on, and its first and last lines kept to
        // explain a start that fails (the error comes first, a backtrace
        // after it).
        let kept = child.stderr.take().map(|err| {
            std::thread::spawn(move || {
                let (mut head, mut tail) = (Vec::new(), std::collections::VecDeque::new());
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    eprintln!("{line}");
                    if head.len() < 10 {
                        head.push(line);
                    } else {
                        if tail.len() == 20 {
                            tail.pop_front();
                        }
                        tail.push_back(line);
                    }
                }
                if !tail.is_empty() {
                    head.push("[…]".into());
                }
                head.extend(tail);
                head.join("\n")
            })
        });
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let line = match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(line) => line,
            Err(e) => {
                let _ = child.kill();
                let status = child.wait();
                // Its stderr has closed: the thread ends.
                let stderr = kept
                    .and_then(|t| t.join().ok())
                    .unwrap_or_else(|| "(in the log file)".into());
                return Err(format!(
                    "rushd on {listen} printed no serving line ({e}); exit {status:?}; stderr:\n{stderr}"
                ));
            }
        };
        // "rushd serving ADDR http ADDR"
        let parts: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(parts.get(1), Some(&"serving"), "unexpected line {line:?}");
        Ok(Spawned {
            child,
            addr: parts[2].parse().expect("addr"),
            http: parts.get(4).and_then(|a| a.parse().ok()),
            dir: dir.to_path_buf(),
        })
    }

    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }

    /// SIGTERM and wait for a clean exit; returns the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        self.child.wait().expect("exits")
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal HTTP/1.1 GET: (status, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("http connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("send");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A prerequisite of a test is missing. With `RUSH_REQUIRE_ALL=1` (CI and
/// `scripts/test` set it) that is a failure naming the fix, so a test can't
/// pass without checking anything; otherwise the test says it was skipped.
pub fn prerequisite_missing(what: &str, fix: &str) {
    if std::env::var("RUSH_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("{what}: {fix} (RUSH_REQUIRE_ALL=1: every test must run)");
    }
    eprintln!("NOTE: skipped: {what}: {fix}");
}

/// One GET with a real HTTP/1.1 client (hyper): status, headers, body.
pub async fn http(
    addr: SocketAddr,
    path: &str,
    user_agent: Option<&str>,
) -> (u16, hyper::HeaderMap, Vec<u8>) {
    use http_body_util::{BodyExt, Empty};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::get(path).header(hyper::header::HOST, addr.to_string());
    if let Some(ua) = user_agent {
        req = req.header(hyper::header::USER_AGENT, ua);
    }
    let resp = sender
        .send_request(req.body(Empty::<bytes::Bytes>::new()).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, headers, body)
}

/// User agents of the three platforms a redirect tells apart.
pub const IPHONE: &str =
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148";
pub const ANDROID: &str =
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 Chrome/124.0 Mobile Safari/537.36";
pub const DESKTOP: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0";

/// The Python of redis-py's virtual environment (`scripts/ensure-deps
/// --redis-py` makes it); None (after saying why) when it is missing.
pub fn venv_python() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/venv-redis-py/bin/python");
    if p.exists() {
        Some(p)
    } else {
        prerequisite_missing(
            "redis-py's virtual environment is missing",
            "run scripts/ensure-deps --redis-py",
        );
        None
    }
}

/// A command of the tests' virtual environment (`scripts/ensure-deps
/// --redis-py` installs redis-py and kubernetes-validate there); None
/// (after saying why) when it is missing.
pub fn venv_tool(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/venv-redis-py/bin")
        .join(name);
    if p.exists() {
        Some(p)
    } else {
        prerequisite_missing(
            &format!("{name} is not in the tests' virtual environment"),
            "run scripts/ensure-deps --redis-py",
        );
        None
    }
}

/// `redis-cli` with these arguments; None (after saying why) when it is
/// not installed.
pub fn redis_cli(addr: SocketAddr, resp3: bool, args: &[&str]) -> Option<String> {
    redis_cli_session(addr, resp3, false, args, "")
}

/// Run each case's arguments through `redis-cli` and assert its output;
/// false (after saying why) when redis-cli is not installed.
pub fn redis_cli_cases(addr: SocketAddr, resp3: bool, cases: &[(Vec<&str>, String)]) -> bool {
    for (args, want) in cases {
        let Some(got) = redis_cli(addr, resp3, args) else {
            return false;
        };
        assert_eq!(
            &got,
            want,
            "redis-cli{} {args:?}",
            if resp3 { " -3" } else { "" }
        );
    }
    true
}

/// `redis-cli` (`-c`: following MOVED) with these arguments, or with
/// `stdin`'s commands on one connection; None (after saying why) when it
/// is not installed.
pub fn redis_cli_session(
    addr: SocketAddr,
    resp3: bool,
    follow: bool,
    args: &[&str],
    stdin: &str,
) -> Option<String> {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()]);
    if resp3 {
        cmd.arg("-3");
    }
    if follow {
        cmd.arg("-c");
    }
    let child = cmd
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        prerequisite_missing(
            "redis-cli is not installed",
            "run scripts/ensure-deps --redis (Debian's redis-tools)",
        );
        return None;
    };
    let mut input = child.stdin.take().expect("stdin");
    std::io::Write::write_all(&mut input, stdin.as_bytes()).expect("commands written");
    drop(input);
    let out = child.wait_with_output().expect("redis-cli runs");
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    Some(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}
