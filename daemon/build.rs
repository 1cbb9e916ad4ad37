//! The commit rushd is built from, for `rush_build_info{commit}`:
//! `RUSH_BUILD_COMMIT` when the build sets it (a container build, whose
//! context has no `.git`), else `git rev-parse` of this repository, else
//! "unknown" (a source tarball builds like any other).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RUSH_BUILD_COMMIT");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let commit = std::env::var("RUSH_BUILD_COMMIT")
        .ok()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .or_else(|| git_commit(&manifest))
        .filter(|c| c.len() <= 64 && c.chars().all(|c| c.is_ascii_alphanumeric()))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=RUSH_BUILD_COMMIT={commit}");
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// HEAD's commit, if this crate is in a git checkout of the workspace (not
/// a tarball unpacked inside some other repository), and the files that
/// move when HEAD does, so the next build picks up a new commit.
fn git_commit(manifest: &Path) -> Option<String> {
    let top = PathBuf::from(git(manifest, &["rev-parse", "--show-toplevel"])?);
    let workspace = manifest.parent()?;
    if top.canonicalize().ok()? != workspace.canonicalize().ok()? {
        return None;
    }
    let commit = git(manifest, &["rev-parse", "--short=12", "HEAD"])?;
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(manifest, &["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(manifest, &["rev-parse", "--git-path", &name]) {
            let path = manifest.join(path);
            // A path that doesn't exist would rerun this script every build.
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    Some(commit)
}
