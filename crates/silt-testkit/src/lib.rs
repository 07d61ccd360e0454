//! Test support shared by every silt crate (a dev-dependency only).
//!
//! Tests that need the real test corpus (`../shared/corpus` next to the repository, or
//! `$SILT_CORPUS`) or a reference tool (tshark, chromium, Python with DuckDB) ask here. On a
//! developer's machine without them the test skips with a message saying what is missing and how
//! to get it. In CI (`SILT_REQUIRE_ALL=1`, which `.ci/run` sets, or `CI=true`) a missing
//! corpus or tool is a failure instead, so a test can never pass there without checking anything.
//!
//! Touches nothing: it looks at the environment and the file system.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether skips must fail: `CI=true` or `SILT_REQUIRE_ALL=1`.
pub fn strict() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
        || std::env::var("SILT_REQUIRE_ALL").is_ok_and(|v| v == "1" || v == "true")
}

/// Skips (returns `None` after saying why) or, in CI, fails the test.
pub fn skip<T>(what: &str) -> Option<T> {
    assert!(
        !strict(),
        "{what}, and skipping is not allowed here (CI=true or SILT_REQUIRE_ALL=1)"
    );
    eprintln!("skipping: {what}");
    None
}

/// The corpus root: `$SILT_CORPUS`, else `shared/corpus` beside the repository.
fn corpus_root() -> PathBuf {
    if let Some(p) = std::env::var_os("SILT_CORPUS") {
        return PathBuf::from(p);
    }
    // This crate lives at <repo>/crates/silt-testkit; the corpus at <repo>/../shared/corpus.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus")
}

/// The corpus directory, or `None` after a skip message (a failure in CI).
pub fn corpus() -> Option<PathBuf> {
    let p = corpus_root();
    if p.is_dir() {
        Some(p)
    } else {
        skip(&format!(
            "the test corpus is not at {} (set SILT_CORPUS to its directory)",
            p.display()
        ))
    }
}

/// A file or directory below the corpus (`zeek-tsv/vast/conn.log`), or `None` after a skip
/// message; a corpus without it is a failure everywhere (the corpus is incomplete).
pub fn corpus_path(rel: &str) -> Option<PathBuf> {
    let p = corpus()?.join(rel);
    assert!(p.exists(), "{} is missing from the corpus", p.display());
    Some(p)
}

/// The first of `names` that runs with `--version`, or `None` after a skip message (a failure
/// in CI). `how` says how to install it.
pub fn tool(names: &[&str], how: &str) -> Option<String> {
    for n in names {
        if Command::new(n)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return Some(n.to_string());
        }
    }
    skip(&format!("{} is not installed ({how})", names.join(" / ")))
}

/// A Python interpreter that imports `modules` (`"fluent.sender, msgpack"`): `$SILT_PYTHON`, the
/// project's virtualenv from scripts/pyenv.sh (`~/.cache/silt-venv`), or `python3`, the first
/// that does; `None` if none does (the caller skips or, in CI, fails).
pub fn python_with(modules: &str) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Ok(p) = std::env::var("SILT_PYTHON") {
        candidates.push(PathBuf::from(p));
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(Path::new(&home).join(".cache/silt-venv/bin/python"));
    }
    candidates.push("python3".into());
    candidates.into_iter().find(|p| {
        Command::new(p)
            .args(["-c", &format!("import {modules}")])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}
