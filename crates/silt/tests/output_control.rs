//! The `silt` binary's output-control flags end to end: encoding hints seen through
//! `silt inspect --json`, `--partition-by`, and `silt ddl` (DuckDB runs the statement it prints);
//! and a `--lake` that is a file refused up front by every command that takes one.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{ok, silt};
use serde_json::Value;

fn err(args: &[&str]) -> String {
    let o = silt(args);
    assert!(!o.status.success(), "silt {args:?} should fail");
    String::from_utf8(o.stderr).unwrap()
}

const ROWS: usize = 600;

/// A Zeek TSV conn-style log: `ROWS` rows over two hours of 2018-03-24 (17:00 and 18:00 UTC),
/// unique uids, three protocols, a second time column `seen` one day earlier.
fn write_log(dir: &Path) -> PathBuf {
    let mut s = String::from(
        "#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#unset_field\t-\n#path\tconn\n\
#fields\tts\tuid\tid.orig_h\tid.orig_p\tproto\torig_bytes\tseen\n\
#types\ttime\tstring\taddr\tport\tenum\tcount\ttime\n",
    );
    let t0 = 1_521_910_800i64; // 2018-03-24T17:00:00Z
    for i in 0..ROWS {
        let ts = t0 + (i as i64) * 12; // 600 rows * 12 s = two hours
        s.push_str(&format!(
            "{ts}.000000\tC{i:06}\t10.0.{}.{}\t{}\t{}\t{}\t{}.500000\n",
            i % 3,
            i % 200,
            1024 + i,
            ["tcp", "udp", "icmp"][i % 3],
            i * 7,
            ts - 86_400
        ));
    }
    let p = dir.join("conn.log");
    std::fs::write(&p, s).unwrap();
    p
}

fn parquet_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn encoding_hints_show_in_inspect_json() {
    let dir = tempfile::tempdir().unwrap();
    let log = write_log(dir.path());
    let lake = dir.path().join("lake");
    let (log, lake_s) = (log.to_str().unwrap(), lake.to_str().unwrap());
    ok(&[
        "import",
        "zeek",
        log,
        "--lake",
        lake_s,
        "-q",
        // Two hour partitions, two files (the automatic choice would make one file).
        "--partition",
        "hour",
        "--dictionary",
        "uid",
        "--no-dictionary",
        "proto",
        "--delta",
        "id.orig_p,id.orig_h",
    ]);
    let files = parquet_files(&lake.join("zeek.conn"));
    assert_eq!(files.len(), 2, "two hours: {files:?}");
    for f in &files {
        let v: Value =
            serde_json::from_str(&ok(&["inspect", "--json", f.to_str().unwrap()])).unwrap();
        let rg = &v["row_groups"][0];
        for key in [
            "offset",
            "rows",
            "compressed_bytes",
            "uncompressed_bytes",
            "sorting_columns",
        ] {
            assert!(!rg[key].is_null(), "row group {key} missing");
        }
        assert_eq!(rg["sorting_columns"][0]["column"], "ts");
        let enc = |path: &str| -> Vec<String> {
            let c = rg["columns"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["path"] == path)
                .unwrap_or_else(|| panic!("no column {path}"));
            for key in ["min", "max", "compressed_bytes", "uncompressed_bytes"] {
                assert!(!c[key].is_null(), "{path}: {key} missing");
            }
            c["encodings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap().to_string())
                .collect()
        };
        let dict = |e: &[String]| e.iter().any(|x| x.contains("DICTIONARY"));
        // uid is unique per row: without the hint silt would not build a dictionary.
        assert!(dict(&enc("uid")), "uid {:?}", enc("uid"));
        assert!(!dict(&enc("proto")), "proto {:?}", enc("proto"));
        let p = enc("id.orig_p");
        assert!(
            p.contains(&"DELTA_BINARY_PACKED".into()) && !dict(&p),
            "{p:?}"
        );
        let h = enc("id.orig_h");
        assert!(h.contains(&"DELTA_BYTE_ARRAY".into()) && !dict(&h), "{h:?}");
    }
    // Bad hints fail before anything is written, naming the column.
    let lake2 = dir.path().join("lake2");
    let e = err(&[
        "import",
        "zeek",
        log,
        "--lake",
        lake2.to_str().unwrap(),
        "-q",
        "--byte-stream-split",
        "uid",
    ]);
    assert!(e.contains("--byte-stream-split uid"), "{e}");
    assert!(parquet_files(&lake2).is_empty());
}

#[test]
fn partition_by_a_second_time_column() {
    let dir = tempfile::tempdir().unwrap();
    let log = write_log(dir.path());
    let lake = dir.path().join("lake");
    let (log, lake_s) = (log.to_str().unwrap(), lake.to_str().unwrap());
    let e = err(&[
        "import",
        "zeek",
        log,
        "--lake",
        lake_s,
        "--partition-by",
        "seen:day",
        "--partition",
        "hour",
    ]);
    assert!(e.contains("cannot be used with"), "{e}");
    ok(&[
        "import",
        "zeek",
        log,
        "--lake",
        lake_s,
        "-q",
        "--partition-by",
        "seen:day",
    ]);
    // `seen` is one day before `ts`: everything lands in dt=2018-03-23, no hour directories.
    let files = parquet_files(&lake.join("zeek.conn"));
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        files[0].parent().unwrap().file_name().unwrap(),
        "dt=2018-03-23"
    );
    let v: Value =
        serde_json::from_str(&ok(&["inspect", "--json", files[0].to_str().unwrap()])).unwrap();
    assert_eq!(v["metadata"]["silt.time_column"], "seen");
    assert_eq!(v["row_groups"][0]["sorting_columns"][0]["column"], "seen");
    assert_eq!(v["rows"], ROWS);
}

fn python() -> Option<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pyenv.sh");
    let out = Command::new("bash").arg(script).output().ok()?;
    out.status.success().then_some(())?;
    let p = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!p.is_empty()).then_some(p)
}

#[test]
fn ddl_for_duckdb_runs() {
    let dir = tempfile::tempdir().unwrap();
    let log = write_log(dir.path());
    let lake = dir.path().join("lake");
    let lake_s = lake.to_str().unwrap();
    ok(&[
        "import",
        "zeek",
        log.to_str().unwrap(),
        "--lake",
        lake_s,
        "-q",
        "--partition",
        "hour",
    ]);
    let e = err(&["ddl", "--dialect", "athena", "zeek.conn", "--lake", lake_s]);
    assert!(e.contains("--location"), "{e}");
    let athena = ok(&[
        "ddl",
        "--dialect",
        "athena",
        "zeek.conn",
        "--lake",
        lake_s,
        "--location",
        "s3://b/l",
    ]);
    assert!(athena.contains("'projection.dt.range' = '2018-03-24,2018-03-24'"));
    assert!(athena.contains("`orig_bytes` bigint"), "{athena}");
    let sql = ok(&[
        "ddl",
        "--dialect",
        "duckdb",
        "zeek.conn",
        "--lake",
        lake_s,
        "--name",
        "zeek.conn",
    ]);
    let Some(py) = python() else {
        eprintln!("duckdb (scripts/pyenv.sh) not available, skipping the DuckDB part");
        return;
    };
    let code = r#"
import duckdb, sys
con = duckdb.connect()
con.execute(sys.argv[1])
print(con.execute("SELECT count(*), count(DISTINCT hour), sum(orig_bytes) FROM zeek.conn").fetchall()[0])
"#;
    let out = Command::new(py).args(["-c", code, &sql]).output().unwrap();
    assert!(
        out.status.success(),
        "{sql}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sum: usize = (0..ROWS).map(|i| i * 7).sum();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("({ROWS}, 2, {sum})")
    );
}

/// `silt tables | head -1`: the reader goes away after one line; silt stops quietly (status 0, no
/// panic message) instead of panicking on the broken pipe.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    ok(&[
        "generate",
        "zeek",
        "--events",
        "3000",
        "-o",
        logs.to_str().unwrap(),
    ]);
    let lake = dir.path().join("lake");
    ok(&[
        "import",
        "zeek",
        logs.to_str().unwrap(),
        "--lake",
        lake.to_str().unwrap(),
        "-q",
    ]);
    let l = lake.to_str().unwrap();
    let file = common::parquet_files(&lake).into_iter().next().unwrap();
    let again = dir.path().join("lake2");
    for args in [
        vec!["tables", "--lake", l],
        // `println!` panicked on the closed pipe in these.
        vec!["inspect", file.to_str().unwrap()],
        vec!["ddl", "--dialect", "spark", "zeek.conn", "--lake", l],
        vec![
            "import",
            "zeek",
            logs.to_str().unwrap(),
            "--lake",
            again.to_str().unwrap(),
        ],
        // An error wrapped by arrow's CSV writer ("Csv error: Broken pipe").
        vec![
            "query",
            "--lake",
            l,
            "--format",
            "csv",
            "SELECT * FROM zeek.conn",
        ],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_silt"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The read end is closed before silt writes, so its write fails (EPIPE); with a panic
        // or an error on it, this test fails.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.status.success(), "{args:?}: {:?}: {err}", out.status);
    }
}

#[test]
fn a_lake_that_is_a_file_is_refused_by_every_command() {
    let d = tempfile::tempdir().unwrap();
    let log = write_log(d.path());
    let file = d.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let f = file.to_str().unwrap();
    let under = format!("{f}/lake");
    let l = log.to_str().unwrap();
    for args in [
        vec!["import", "zeek", l, "--lake", f],
        vec!["import", "zeek", l, "--lake", &under],
        vec!["query", "--lake", f, "SELECT 1"],
        vec!["tables", "--lake", f],
        vec!["compact", "--lake", f],
    ] {
        let o = silt(&args);
        let e = String::from_utf8_lossy(&o.stderr);
        // A usage error (clap's status 2), naming the file, before anything is written.
        assert_eq!(o.status.code(), Some(2), "silt {args:?}: {e}");
        assert!(e.contains(&format!("{f} is a file")), "silt {args:?}: {e}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}
