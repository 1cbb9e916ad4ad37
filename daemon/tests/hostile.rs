//! Hostile and slow clients: the daemon stays responsive to everyone else,
//! bounds its memory, and times the offenders out. Figures are printed.

mod common;

use bytes::{BufMut, BytesMut};
use common::Spawned;
use rush_client::protocol::frame::{self, Header};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024.0
}

fn get_frame(id: u64, key: &[u8]) -> BytesMut {
    let mut b = BytesMut::new();
    frame::encode(&mut b, Header::request(0x10, id), |out| {
        out.put_u32(key.len() as u32);
        out.put_slice(key);
    });
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_clients_leave_the_daemon_responsive_and_bounded() {
    // This test holds thousands of sockets too.
    assert!(rush_daemon::server::raise_fd_limit());
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("rushd.toml");
    std::fs::write(
        &conf,
        "[server]\nidle_timeout_secs = 15\nframe_timeout_secs = 15\nwrite_timeout_secs = 3\n\
         max_output_bytes = 8388608\nmax_connections = 5000\n[storage]\nblock_cache_mb = 32\n",
    )
    .unwrap();
    let data = dir.path().join("data");
    let daemon = Spawned::start(&data, &["--config", conf.to_str().unwrap()]);
    let pid = daemon.child.id();
    // BUSY means "not done, retry later": a well-behaved client retries it.
    let good = rush_client::Client::connect_with(
        &daemon.addr.to_string(),
        rush_client::ClientOptions {
            retry_busy: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    good.set("big", vec![b'x'; 512 * 1024]).await.unwrap();
    for _ in 0..50 {
        good.get("big").await.unwrap();
    }
    let baseline = rss_mib(pid);
    // The well-behaved client's own connections (one per shard).
    let own = common::open_connections(&good).await;

    // 1. Thousands of connections that say nothing, in waves of 100 that
    // the accept loop catches up with (a burst past the listen backlog has
    // the kernel drop SYNs, and a connect then waits a second to retry: on
    // a slow machine the first would reach their 15 s timeout before the
    // last were made).
    let started = Instant::now();
    let mut hostile = Vec::new();
    let mut open = 0;
    for wave in 1..=20 {
        for _ in 0..100 {
            hostile.push(TcpStream::connect(daemon.addr).await.unwrap());
        }
        while open < wave * 100 && started.elapsed() < Duration::from_secs(12) {
            open = common::open_connections(&good).await - own;
            if open < wave * 100 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    let per_idle_kib = (rss_mib(pid) - baseline) * 1024.0 / open.max(1) as f64;

    // 2. Half a frame, then silence.
    for _ in 0..200 {
        let mut s = TcpStream::connect(daemon.addr).await.unwrap();
        s.write_all(&get_frame(1, b"big")[..7]).await.unwrap();
        hostile.push(s);
    }
    // 3. Clients that pipeline 2,000 GETs of a 512 KiB value and never read.
    for c in 0..10 {
        let mut s = TcpStream::connect(daemon.addr).await.unwrap();
        let mut burst = BytesMut::new();
        for i in 0..2_000 {
            burst.extend_from_slice(&get_frame(c * 10_000 + i, b"big"));
        }
        s.write_all(&burst).await.unwrap();
        hostile.push(s);
    }
    // 4. A 4 GiB frame announced.
    let mut s = TcpStream::connect(daemon.addr).await.unwrap();
    let mut b = BytesMut::new();
    b.put_u32(u32::MAX);
    s.write_all(&b).await.unwrap();
    hostile.push(s);
    let connecting = started.elapsed();
    let held = hostile.len();
    // Meanwhile a well-behaved client is served, promptly.
    let mut worst = Duration::ZERO;
    let mut peak = baseline;
    for i in 0..300 {
        let t = Instant::now();
        good.set(format!("k{i}"), "v").await.unwrap();
        assert_eq!(
            good.get(format!("k{i}")).await.unwrap().as_deref(),
            Some(&b"v"[..])
        );
        worst = worst.max(t.elapsed());
        if i % 20 == 0 {
            peak = peak.max(rss_mib(pid));
        }
    }
    peak = peak.max(rss_mib(pid));

    // The offenders are timed out or cut off; only the good client remains.
    let deadline = Instant::now() + Duration::from_secs(30);
    let remaining = loop {
        let n = common::open_connections(&good).await;
        if n <= own || Instant::now() > deadline {
            break n;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let after = rss_mib(pid);
    println!(
        "hostile: {held} hostile connections made in {connecting:?} ({open} idle ones open at once, \
         {per_idle_kib:.1} KiB each), RSS baseline {baseline:.0} MiB, \
         peak {peak:.0} MiB, after cleanup {after:.0} MiB; well-behaved worst round trip {worst:?}"
    );
    assert_eq!(open, 2_000, "the daemon held the idle connections");
    assert!(
        per_idle_kib < 32.0,
        "an idle connection costs {per_idle_kib:.1} KiB"
    );
    assert_eq!(
        remaining, own,
        "idle, stalled and non-reading connections were closed"
    );
    // 10 non-readers asked for 10 GB of answers; each may hold at most its
    // 8 MiB output budget plus its in-flight requests.
    assert!(
        peak - baseline < 200.0,
        "RSS grew by {:.0} MiB",
        peak - baseline
    );
    assert!(
        worst < Duration::from_secs(5),
        "a well-behaved request took {worst:?}"
    );
    drop(hostile);
}
