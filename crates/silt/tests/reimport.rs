//! Importing twice never duplicates rows (issue 21): a re-run skips inputs already imported
//! (`--force` imports them again), an input that gave no rows can be imported again with the
//! right format, and an import killed with SIGKILL at any moment is cleaned up by the next one,
//! which then leaves the lake equal to a clean import (same rows, each once).

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{ok, p, silt};
use serde_json::Value;

/// Rows per table (`silt tables --json`).
fn rows(lake: &Path) -> Vec<(String, u64)> {
    let v: Value = serde_json::from_str(&ok(&["tables", "--lake", p(lake), "--json"])).unwrap();
    let mut out: Vec<(String, u64)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["table"].as_str().unwrap().to_string(),
                t["rows"].as_u64().unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// A content fingerprint of zeek.conn: rows, distinct uids, byte sums (every row once).
fn conn_fingerprint(lake: &Path) -> String {
    common::query_csv(
        lake,
        "SELECT count(*), count(DISTINCT uid), sum(orig_bytes), sum(resp_bytes), min(ts), max(ts) FROM zeek.conn",
    )
}

fn generate(dir: &Path, events: &str) {
    ok(&["generate", "zeek", "--events", events, "-o", p(dir)]);
}

#[test]
fn a_second_import_skips_what_the_lake_holds_and_force_imports_again() {
    let t = tempfile::tempdir().unwrap();
    let logs = t.path().join("logs");
    generate(&logs, "3000");
    let lake = t.path().join("lake");
    ok(&["import", "zeek", p(&logs), "--lake", p(&lake), "-q"]);
    let first = rows(&lake);
    assert!(first.iter().any(|(t, n)| t == "zeek.conn" && *n > 0));

    let again = ok(&["import", "zeek", p(&logs), "--lake", p(&lake), "-q"]);
    assert!(again.contains("skipped"), "{again}");
    assert!(again.contains("--force"), "{again}");
    assert!(again.contains("nothing new to import"), "{again}");
    assert_eq!(rows(&lake), first, "a re-run must not add rows");

    // A copy under another name is the same content.
    let copy = t.path().join("copy-of-conn.log");
    std::fs::copy(logs.join("conn.log"), &copy).unwrap();
    let out = ok(&["import", "zeek", p(&copy), "--lake", p(&lake), "-q"]);
    assert!(out.contains("conn.log"), "{out}");
    assert_eq!(rows(&lake), first);

    // --force imports again: every table doubles.
    ok(&[
        "import",
        "zeek",
        p(&logs),
        "--lake",
        p(&lake),
        "-q",
        "--force",
    ]);
    let doubled: Vec<(String, u64)> = first.iter().map(|(t, n)| (t.clone(), 2 * n)).collect();
    assert_eq!(rows(&lake), doubled);
}

#[test]
fn a_log_that_grew_since_its_import_is_not_imported_again_without_force() {
    let t = tempfile::tempdir().unwrap();
    let logs = t.path().join("logs");
    generate(&logs, "3000");
    let log = logs.join("conn.log");
    let whole = std::fs::read(&log).unwrap();
    // The first import reads the log when it held the first half of its lines.
    let cut = whole.len() / 2
        + whole[whole.len() / 2..]
            .iter()
            .position(|&b| b == b'\n')
            .unwrap()
        + 1;
    let grown = t.path().join("grown");
    std::fs::create_dir(&grown).unwrap();
    let path = grown.join("conn.log");
    std::fs::write(&path, &whole[..cut]).unwrap();
    let lake = t.path().join("lake");
    ok(&["import", "zeek", p(&path), "--lake", p(&lake), "-q"]);
    let first = rows(&lake);
    // Zeek appended the rest.
    std::fs::write(&path, &whole).unwrap();
    let o = silt(&["import", "zeek", p(&path), "--lake", p(&lake), "-q"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(err.contains("grew since an earlier import"), "{err}");
    assert!(
        err.contains(&format!("its first {cut} bytes of {}", whole.len())),
        "{err}"
    );
    assert!(
        err.contains("silt serve --tail") && err.contains("--force"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing imported"));
    assert_eq!(
        rows(&lake),
        first,
        "the imported half must not be added again"
    );
    // A log that merely starts alike (its first lines changed) is a new input.
    let mut other = whole.clone();
    let at = other.iter().position(|&b| b == b'\n').unwrap() + 10;
    other[at] = if other[at] == b'x' { b'y' } else { b'x' };
    let elsewhere = t.path().join("other.log");
    std::fs::write(&elsewhere, &other).unwrap();
    let o = silt(&["import", "zeek", p(&elsewhere), "--lake", p(&lake), "-q"]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("grew since"));
    // --force imports the grown log whole.
    let lake2 = t.path().join("lake2");
    ok(&["import", "zeek", p(&path), "--lake", p(&lake2), "-q"]);
    let full = conn_fingerprint(&lake2);
    ok(&[
        "import",
        "zeek",
        p(&grown),
        "--lake",
        p(&lake2),
        "-q",
        "--force",
    ]);
    let n = |fp: &str| {
        fp.lines()
            .last()
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!(n(&conn_fingerprint(&lake2)), 2 * n(&full));
}

#[test]
fn an_empty_directory_or_an_empty_conversion_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let empty = t.path().join("empty");
    std::fs::create_dir_all(empty.join(".hidden")).unwrap();
    std::fs::write(empty.join(".hidden/conn.log"), b"x").unwrap();
    let o = silt(&[
        "import",
        "zeek",
        p(&empty),
        "--lake",
        p(&t.path().join("lake")),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("holds no files to read"), "{err}");
    // convert: inputs without rows write nothing, keep an earlier output, and say so (exit 4).
    let out = t.path().join("out.parquet");
    std::fs::write(&out, b"earlier").unwrap();
    let nothing = t.path().join("nothing.json");
    std::fs::write(&nothing, b"").unwrap();
    let convert = |more: &[&str]| {
        let mut args = vec![
            "convert",
            p(&nothing),
            "--format",
            "json",
            "-o",
            p(&out),
            "-q",
        ];
        args.extend(more);
        silt(&args)
    };
    let o = convert(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("is left as it was"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"earlier");
    // A table directory without files (an import killed before its first one): said as such,
    // not "not in the lake" next to a list that names it.
    let lake = t.path().join("lake");
    let logs = t.path().join("logs");
    generate(&logs, "200");
    ok(&[
        "import",
        "zeek",
        p(&logs.join("conn.log")),
        "--lake",
        p(&lake),
        "-q",
    ]);
    std::fs::create_dir_all(lake.join("zeek.dns")).unwrap();
    let o = silt(&["query", "--lake", p(&lake), "SELECT count(*) FROM zeek.dns"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("table zeek.dns has no readable data files"),
        "{err}"
    );
    assert_eq!(convert(&["--allow-empty"]).status.code(), Some(0));
}

#[test]
fn an_input_that_gave_no_rows_is_not_recorded_as_imported() {
    let t = tempfile::tempdir().unwrap();
    let logs = t.path().join("eve");
    ok(&["generate", "suricata", "--events", "200", "-o", p(&logs)]);
    let lake = t.path().join("lake");
    // EVE given as pcap: not a capture, one whole-input reject, no rows (exit 4).
    let o = silt(&["import", "pcap", p(&logs), "--lake", p(&lake), "-q"]);
    assert_eq!(
        o.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // The right format is not skipped.
    let out = ok(&["import", "suricata", p(&logs), "--lake", p(&lake), "-q"]);
    assert!(!out.contains("skipped"), "{out}");
    assert!(rows(&lake)
        .iter()
        .any(|(t, n)| t.starts_with("suricata.") && *n > 0));
}

#[test]
fn an_import_killed_at_any_moment_is_resumed_without_duplicates() {
    let t = tempfile::tempdir().unwrap();
    let logs = t.path().join("logs");
    generate(&logs, "150000");
    // Small memory bound: files are published while the import runs, so a kill finds some.
    let args = |lake: &Path| -> Vec<String> {
        [
            "import",
            "zeek",
            p(&logs),
            "--lake",
            p(lake),
            "-q",
            "--memory",
            "4MiB",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let clean = t.path().join("clean");
    let a = args(&clean);
    ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let want_rows = rows(&clean);
    let want = conn_fingerprint(&clean);

    let mut killed_with_files = 0;
    for (i, ms) in [150u64, 400, 900, 1500, 2500].into_iter().enumerate() {
        let lake = t.path().join(format!("killed-{i}"));
        let a = args(&lake);
        let mut child = Command::new(env!("CARGO_BIN_EXE_silt"))
            .args(&a)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(ms));
        // SIGKILL: no chance to clean up.
        let _ = child.kill();
        let _ = child.wait();
        let published = common::parquet_files(&lake.join("zeek.conn")).len();
        if published > 0 {
            killed_with_files += 1;
        }
        // The re-run cleans up after the killed one and imports to the end.
        let out = ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        if published > 0 {
            assert!(
                out.contains("recovered") || out.contains("skipped"),
                "after a kill with {published} files published: {out}"
            );
        }
        assert_eq!(rows(&lake), want_rows, "kill after {ms} ms");
        assert_eq!(conn_fingerprint(&lake), want, "kill after {ms} ms");
        // And a further run changes nothing.
        ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(rows(&lake), want_rows, "re-run after kill at {ms} ms");
    }
    assert!(
        killed_with_files > 0,
        "no kill happened after files were published: the test checked no recovery"
    );
}
