//! Test helpers: where the corpus is (silt-testkit's rule: `$SILT_CORPUS`, else
//! `../shared/corpus` beside the repository; skipped with a message when absent, a failure
//! under `CI=true`).
#![allow(dead_code)]

use std::path::PathBuf;

pub fn corpus() -> Option<PathBuf> {
    silt_testkit::corpus()
}

pub fn mmdb(name: &str) -> Option<PathBuf> {
    silt_testkit::corpus_path(&format!("mmdb/{name}"))
}
