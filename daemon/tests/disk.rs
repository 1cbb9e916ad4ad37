//! Disk trouble: on a full disk writes answer UNAVAILABLE, reads keep working,
//! nothing acknowledged is lost, and writes resume when space returns.
//! Needs to mount a small tmpfs (root); without it the test fails under
//! `RUSH_REQUIRE_ALL=1` and is skipped with a note otherwise.

mod common;

use common::TestNode;
use rush_client::protocol::ErrorCode;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size_mb: u32) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(at)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fill the file system with a file until writing fails; returns its path.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_disk_refuses_writes_keeps_reads_and_recovers() {
    let root = tempfile::tempdir().unwrap();
    let Some(fs) = Tmpfs::mount(&root.path().join("mnt"), 48) else {
        common::prerequisite_missing(
            "can't mount a tmpfs for the full-disk test",
            "run the tests as root (mount -t tmpfs needs CAP_SYS_ADMIN), or RUSH_REQUIRE_ALL=0 to skip",
        );
        return;
    };
    let data = fs.0.join("data");
    let node = TestNode::start_with(|c| {
        c.storage.data_dir = data.clone();
        c.storage.write_buffer_mb = 4;
    })
    .await;
    // A client that reports UNAVAILABLE at once instead of retrying it.
    let c = &rush_client::Client::connect_with(
        &node.addr().to_string(),
        rush_client::ClientOptions {
            retry_deadline: Duration::ZERO,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let mut acked = Vec::new();
    for i in 0..200 {
        c.set(format!("before:{i}"), "x".repeat(200)).await.unwrap();
        acked.push(format!("before:{i}"));
    }
    let filler = fill(&fs.0);

    // Write until the disk refuses; every refusal is UNAVAILABLE.
    let mut refused = 0;
    for i in 0..20_000 {
        match c.set(format!("during:{i}"), "y".repeat(32 * 1024)).await {
            Ok(_) => acked.push(format!("during:{i}")),
            Err(e) => {
                assert_eq!(e.code(), Some(ErrorCode::Unavailable), "{e}");
                assert!(e.to_string().contains("storage"), "{e}");
                refused += 1;
                if refused == 3 {
                    break;
                }
            }
        }
    }
    assert_eq!(refused, 3, "a full disk must refuse writes");
    // Reads keep working.
    for k in acked.iter().step_by(10) {
        assert!(
            c.get(k.clone()).await.unwrap().is_some(),
            "{k} readable on a full disk"
        );
    }

    // Space comes back: writes resume. RocksDB's file manager polls free
    // space every few seconds and resumes once a memtable's worth is free.
    std::fs::remove_file(filler).unwrap();
    let freed = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(30);
    let recovered = loop {
        match c.set("after", "z").await {
            Ok(_) => break freed.elapsed(),
            Err(e) if Instant::now() < deadline => {
                assert_eq!(e.code(), Some(ErrorCode::Unavailable), "{e}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => {
                let log = std::fs::read_to_string(data.join("LOG")).unwrap_or_default();
                let lines: Vec<&str> = log
                    .lines()
                    .filter(|l| l.contains("rror") || l.contains("space") || l.contains("ecover"))
                    .collect();
                panic!(
                    "writes did not resume after space returned: {e}\n{}",
                    lines.join("\n")
                );
            }
        }
    };
    let mut node = node;
    node.restart().await;
    for k in &acked {
        assert!(
            node.client.get(k.clone()).await.unwrap().is_some(),
            "{k} lost"
        );
    }
    assert!(node.client.exists("after").await.unwrap());
    println!(
        "disk: {} writes acknowledged, {refused} refused on a full disk, writes resumed {:?} after space returned",
        acked.len(),
        recovered
    );
    node.stop().await;
    drop(fs);
}
