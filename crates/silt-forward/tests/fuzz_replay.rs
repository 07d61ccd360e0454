//! Replays the saved inputs of the `forward` fuzz target through its harness, as the afl target
//! (`fuzz/src/bin/forward.rs`) runs each input: `silt_forward::fuzz::run` (a whole connection,
//! sent in pieces and whole, with and without a shared key), then every accepted frame's entries
//! through `silt_ingest::fuzz::check_entries` (the `msgpack` decoder `silt serve` uses). The
//! inputs: `fuzz/corpus/forward/` (kept by `bench/fuzz.sh` from afl's queue),
//! `fuzz/regressions/forward/` (crashes and hangs afl found, each fixed since) and
//! `fuzz/seeds/forward/` (written by `fuzz/seeds/make_seeds.py`).
//!
//! Fails, rather than passing on nothing, when the corpus or the seeds are missing, and when a
//! seed gives no event (the seeds are valid traffic: afl must start from frames the server
//! takes).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn files(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz")
        .join(kind)
        .join("forward");
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().to_string();
            if e.file_type().unwrap().is_file() && !name.starts_with('.') {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Replays one input as the afl target does; returns the events accepted.
fn replay(path: &Path) -> usize {
    let data = std::fs::read(path).unwrap();
    let start = Instant::now();
    let events = std::panic::catch_unwind(|| {
        let out = silt_forward::fuzz::run(&data);
        for f in &out.frames {
            silt_ingest::fuzz::check_entries(&f.entries, f.events);
        }
        out.frames.iter().map(|f| f.events).sum::<usize>()
    });
    let took = start.elapsed();
    let Ok(events) = events else {
        panic!("{} failed the forward harness", path.display());
    };
    // A hang afl saved (> 1 s in an optimised build) must stay fixed; a debug build is slower.
    assert!(
        took < Duration::from_secs(20),
        "{} took {took:?}",
        path.display()
    );
    events
}

#[test]
fn the_saved_corpus_replays() {
    let corpus = files("corpus");
    assert!(
        !corpus.is_empty(),
        "fuzz/corpus/forward/ is missing or empty (bench/fuzz.sh fills it)"
    );
    for f in &corpus {
        replay(f);
    }
    eprintln!("{} corpus inputs", corpus.len());
}

#[test]
fn every_regression_replays() {
    for f in files("regressions") {
        replay(&f);
    }
}

#[test]
fn every_seed_replays_and_is_taken() {
    let seeds = files("seeds");
    assert!(!seeds.is_empty(), "fuzz/seeds/forward/ is missing or empty");
    for f in &seeds {
        let events = replay(f);
        eprintln!("{}: {events} events", f.display());
        assert!(events > 0, "{}: no event accepted", f.display());
    }
}
