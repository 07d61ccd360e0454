//! Replays the fuzzers' saved inputs through the fuzz harness (`silt_ingest::fuzz::run`, the same
//! function the afl targets in `fuzz/` call): every file of `fuzz/corpus/<target>/` (small
//! inputs afl found interesting, kept by `bench/fuzz.sh`), `fuzz/regressions/<target>/` (every
//! crash and hang afl found, each fixed since) and `fuzz/seeds/<target>/` (hand-written seeds).
//! Each must decode without a panic, give the same outcome fed in pieces and fed whole, and
//! account for its records (see the harness's documentation).
//!
//! Fails, rather than passing on nothing, when a target has no saved corpus, when the
//! regressions directory is missing, or when a file names no known target. The protocol
//! targets (`PROTOCOL_TARGETS`) are replayed by their own crates.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use silt_ingest::fuzz::{run, target, PROTOCOL_TARGETS, TARGETS};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir/<target>/` for every target directory in `dir`, sorted.
fn inputs(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut all = Vec::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries {
        let e = e.unwrap();
        if !e.file_type().unwrap().is_dir() {
            continue;
        }
        let name = e.file_name().to_string_lossy().to_string();
        if PROTOCOL_TARGETS.contains(&name.as_str()) {
            // Replayed by their protocol's crate (silt-forward's tests/fuzz_replay.rs).
            continue;
        }
        assert!(
            target(&name).is_some(),
            "{}: no fuzz target is called {name:?}",
            e.path().display()
        );
        for f in std::fs::read_dir(e.path()).unwrap() {
            let f = f.unwrap();
            if f.file_type().unwrap().is_file() && !f.file_name().to_string_lossy().starts_with('.')
            {
                all.push((name.clone(), f.path()));
            }
        }
    }
    all.sort();
    all
}

/// Replays `files`; returns how many there were per target and the slowest one.
fn replay(files: &[(String, PathBuf)]) -> (Duration, String) {
    let mut slowest = (Duration::ZERO, String::new());
    for (name, path) in files {
        let data = std::fs::read(path).unwrap();
        let t = target(name).unwrap();
        let start = Instant::now();
        let r = std::panic::catch_unwind(|| run(t, &data));
        let took = start.elapsed();
        assert!(r.is_ok(), "{} failed the {name} harness", path.display());
        // A hang afl saved (> 1 s in an optimised build) must stay fixed; a debug build is
        // slower, hence the margin.
        assert!(
            took < Duration::from_secs(20),
            "{} took {took:?} in the {name} harness",
            path.display()
        );
        if took > slowest.0 {
            slowest = (took, path.display().to_string());
        }
    }
    slowest
}

#[test]
fn every_target_has_a_saved_corpus_and_it_replays() {
    let files = inputs(&fuzz_dir().join("corpus"));
    for t in TARGETS {
        let n = files.iter().filter(|(name, _)| name == t.name).count();
        assert!(
            n > 0,
            "fuzz/corpus/{}/ is missing or empty (bench/fuzz.sh fills it)",
            t.name
        );
    }
    let slowest = replay(&files);
    eprintln!("{} corpus inputs; slowest {slowest:?}", files.len());
}

#[test]
fn every_regression_replays() {
    let dir = fuzz_dir().join("regressions");
    assert!(dir.is_dir(), "{} is missing", dir.display());
    let files = inputs(&dir);
    let slowest = replay(&files);
    eprintln!("{} regression inputs; slowest {slowest:?}", files.len());
}

#[test]
fn every_seed_replays() {
    let files = inputs(&fuzz_dir().join("seeds"));
    for t in TARGETS {
        assert!(
            files.iter().any(|(name, _)| name == t.name),
            "fuzz/seeds/{}/ is missing or empty",
            t.name
        );
    }
    replay(&files);
    // The seeds are real inputs of their formats: each must give rows, or afl would start from
    // inputs the decoder refuses whole.
    for (name, path) in &files {
        let out = run(target(name).unwrap(), &std::fs::read(path).unwrap());
        eprintln!(
            "{}: {} rows, {} rejects",
            path.display(),
            out.total_rows(),
            out.rejects.len()
        );
        assert!(out.total_rows() > 0, "{}: no rows: {out:?}", path.display());
    }
}
