//! Helpers shared by the tests that run the `silt` binary.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Runs the `silt` binary of this build.
pub fn silt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_silt"))
        .args(args)
        .output()
        .expect("run silt")
}

/// Runs silt, asserts it succeeded (printing its output if not), and returns its stdout.
pub fn ok(args: &[&str]) -> String {
    let o = silt(args);
    assert!(
        o.status.success(),
        "silt {args:?} failed ({}): {}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// A path as the `&str` an argument list needs.
pub fn p(x: &Path) -> &str {
    x.to_str().unwrap()
}
