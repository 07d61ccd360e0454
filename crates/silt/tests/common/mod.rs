//! Helpers shared by the tests that run the `silt` binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
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

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The environment of a running MinIO (scripts/minio.sh start), or None after a skip message
/// (a failure in CI).
pub fn minio() -> Option<Vec<(String, String)>> {
    let out = Command::new("bash")
        .arg(repo().join("scripts/minio.sh"))
        .arg("start")
        .output()
        .ok()?;
    if !out.status.success() {
        return silt_testkit::skip(&format!(
            "MinIO (scripts/minio.sh start) did not start: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    let env: Vec<(String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert!(
        env.iter().any(|(k, _)| k == "AWS_ENDPOINT_URL"),
        "scripts/minio.sh start printed no environment: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    Some(env)
}

/// A new bucket for one test.
pub fn bucket(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let name = format!("silt-{tag}-{}-{nanos:x}", std::process::id());
    let out = Command::new("bash")
        .arg(repo().join("scripts/minio.sh"))
        .args(["bucket", &name])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    name
}
