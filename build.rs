//! Stamps the binary with the git revision it was built from, for `fabrik --version`
//! (README "Install on a jump host"). `FABRIK_GIT_REV` in the environment wins (a build from
//! a source tarball, a packager); without it, `git rev-parse` in the source tree; without
//! git, `unknown`. A tree whose files that go into the binary (`BUILT_FROM`) differ from
//! the commit gets `-dirty`. Cargo runs this again when HEAD moves (a checkout, a commit) or
//! any of those files changes, so the mark is exact for every build.

use std::path::Path;
use std::process::Command;

/// What the binary is built from: its source, the files it embeds, its manifest.
const BUILT_FROM: &[&str] =
    &["src", "build.rs", "Cargo.toml", "Cargo.lock", "themes", "keymaps", "proto", "tests/fixtures/mig-parted"];

fn main() {
    println!("cargo::rerun-if-env-changed=FABRIK_GIT_REV");
    for p in BUILT_FROM {
        println!("cargo::rerun-if-changed={p}");
    }
    let rev = std::env::var("FABRIK_GIT_REV").ok().filter(|r| !r.trim().is_empty()).or_else(git_rev);
    println!("cargo::rustc-env=FABRIK_GIT_REV={}", rev.as_deref().unwrap_or("unknown"));
}

fn git_rev() -> Option<String> {
    let git_dir = git(&["rev-parse", "--git-dir"])?;
    let git_dir = Path::new(&git_dir);
    println!("cargo::rerun-if-changed={}", git_dir.join("HEAD").display());
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        // A packed ref has no file of its own; the packed-refs file then changes instead.
        println!("cargo::rerun-if-changed={}", git_dir.join(&head_ref).display());
        // (Only paths that exist: cargo runs the script on every build for a missing one.)
        let packed = git_dir.join("packed-refs");
        if packed.exists() {
            println!("cargo::rerun-if-changed={}", packed.display());
        }
    }
    let rev = git(&["rev-parse", "--short=12", "HEAD"])?;
    // diff-index trusts the index's file times; refresh them so a touched file is not dirty.
    let _ = Command::new("git").args(["update-index", "-q", "--refresh"]).output();
    let dirty = Command::new("git")
        .args(["diff-index", "--quiet", "HEAD", "--"])
        .args(BUILT_FROM)
        .status()
        .map(|s| s.code() == Some(1))
        .unwrap_or(false);
    Some(if dirty { format!("{rev}-dirty") } else { rev })
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}
