//! The lake is read by the engines users already run (issue 25): Spark (pyspark, local mode) and
//! DuckDB read a silt lake with the same answers as silt, through a glob over the files and
//! through the CREATE statements `silt ddl` prints, executed by those engines; and Trino (476,
//! started by `scripts/trino.sh` from Maven Central, Hive connector with a file metastore)
//! executes `silt ddl --dialect trino` and answers the same. The checks are
//! `scripts/interop/engines.py` (counts, sums of every numeric column and nested field, distinct
//! lookup values, time ranges as the same instants, the smallest uid's row by value, `id.orig_h`
//! as a nested field); the Python environment is `scripts/spark.sh`'s.
//!
//! Lakes: generated Zeek logs (all six logs) and the corpus's packet captures with flows. Zeek
//! counts must read as BIGINT in Spark (not decimal(20,0)). A lake of Delta tables
//! (`--table-format delta`, two imports, then a compaction and a retention) is read by Spark
//! as Delta tables (`format("delta")`, and `silt ddl --dialect spark`'s `USING DELTA`) and by
//! Trino's Delta Lake connector (`silt ddl --dialect trino`'s `register_table`), with the same
//! answers as silt and a DuckDB glob.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{ok, p};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Spark venv's python, or None after a skip message (a failure in CI).
fn spark_python() -> Option<String> {
    let out = Command::new("bash")
        .arg(root().join("scripts/spark.sh"))
        .output()
        .ok()?;
    let py = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if out.status.success() && !py.is_empty() {
        Some(py)
    } else {
        silt_testkit::skip(&format!(
            "pyspark (scripts/spark.sh) is not available: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ))
    }
}

/// A running Trino's URL (scripts/trino.sh), or None after a skip message (a failure in CI).
fn trino() -> Option<String> {
    let out = Command::new("bash")
        .arg(root().join("scripts/trino.sh"))
        .arg("start")
        .output()
        .ok()?;
    let url = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_string();
    if out.status.success() && url.starts_with("http://") {
        Some(url)
    } else {
        silt_testkit::skip(&format!(
            "Trino (scripts/trino.sh) did not start: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ))
    }
}

/// Runs the checker on `lake` (with Trino when `trino` is given); returns its JSON summary after
/// asserting every value is equal.
fn check(py: &str, lake: &Path, trino: Option<&str>) -> serde_json::Value {
    let mut cmd = Command::new(py);
    cmd.arg(root().join("scripts/interop/engines.py")).args([
        "--silt",
        env!("CARGO_BIN_EXE_silt"),
        "--lake",
        p(lake),
        "--json",
    ]);
    if let Some(url) = trino {
        cmd.args(["--trino", url]);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "engines.py did not print JSON ({e}): {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let diffs: Vec<String> = v["tables"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| {
            t["differences"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |d| format!("{}: {}", t["table"], d))
        })
        .collect();
    assert!(
        out.status.success() && diffs.is_empty(),
        "engines disagree on {}:\n{}",
        lake.display(),
        diffs.join("\n")
    );
    assert!(v["checks"].as_u64().unwrap() > 100, "{v}");
    if trino.is_some() {
        // Trino ran every table's statement and answered the DDL checks.
        for t in v["tables"].as_array().unwrap() {
            assert!(
                t["ddl_checks"]["trino"].as_u64().unwrap_or(0) >= 3,
                "{}: {}",
                t["table"],
                t["ddl_checks"]
            );
        }
    }
    v
}

#[test]
fn spark_and_duckdb_read_the_lake_as_silt_does() {
    let Some(py) = spark_python() else { return };
    let trino = trino();
    let d = tempfile::tempdir().unwrap();
    let logs = d.path().join("logs");
    ok(&["generate", "zeek", "--events", "20000", "-o", p(&logs)]);
    let lake = d.path().join("zeek");
    ok(&["import", "zeek", p(&logs), "--lake", p(&lake), "-q"]);
    let v = check(&py, &lake, trino.as_deref());
    assert_eq!(v["tables"].as_array().unwrap().len(), 6, "{v}");
    // Zeek counts are BIGINT for Spark: no decimal(20,0) anywhere in the Zeek tables.
    for t in v["tables"].as_array().unwrap() {
        for f in t["type_findings"].as_array().unwrap() {
            assert!(
                !f["spark"].as_str().unwrap_or("").contains("decimal(20,0)"),
                "{}: {f}",
                t["table"]
            );
        }
    }

    let Some(pcaps) = silt_testkit::corpus_path("pcap") else {
        return;
    };
    let lake = d.path().join("pcap");
    let o = common::silt(&[
        "import",
        "pcap",
        p(&pcaps),
        "--flows",
        "--lake",
        p(&lake),
        "-q",
    ]);
    assert!(
        o.status.code().is_some_and(|c| c == 0 || c == 4),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    check(&py, &lake, trino.as_deref());
}

/// The start (Unix seconds) of each `dt=…/hour=…` partition of a table, sorted.
fn hour_partitions(table: &Path) -> Vec<i64> {
    let mut out = Vec::new();
    for dt in std::fs::read_dir(table).unwrap().flatten() {
        let name = dt.file_name().to_string_lossy().into_owned();
        let Some(day) = name.strip_prefix("dt=") else {
            continue;
        };
        for h in std::fs::read_dir(dt.path()).unwrap().flatten() {
            let hn = h.file_name().to_string_lossy().into_owned();
            let Some(hour) = hn.strip_prefix("hour=") else {
                continue;
            };
            let t = chrono::NaiveDateTime::parse_from_str(
                &format!("{day} {hour}:00:00"),
                "%Y-%m-%d %H:%M:%S",
            )
            .unwrap();
            out.push(t.and_utc().timestamp());
        }
    }
    out.sort();
    out
}

#[test]
fn spark_and_trino_read_delta_tables_as_silt_does_after_imports_compaction_and_retention() {
    let Some(py) = spark_python() else { return };
    let d = tempfile::tempdir().unwrap();
    let lake = d.path().join("lake");
    // The second run's events reach into a second hour (about 6 events a second).
    for (seed, events) in [("1", "5000"), ("2", "25000")] {
        let logs = d.path().join(format!("logs{seed}"));
        ok(&[
            "generate",
            "zeek",
            "--events",
            events,
            "--seed",
            seed,
            "-o",
            p(&logs),
        ]);
        ok(&[
            "import",
            "zeek",
            p(&logs),
            "--lake",
            p(&lake),
            "--table-format",
            "delta",
            "--partition",
            "hour",
            "-q",
        ]);
    }
    ok(&["compact", "--lake", p(&lake), "--older-than", "0s"]);
    // A window that drops zeek.conn's first hour but not the others.
    let hours = hour_partitions(&lake.join("zeek.conn"));
    assert!(hours.len() >= 2, "{hours:?}");
    let first_end = hours[0] + 3600;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let keep = format!("zeek.conn={}s", now - first_end - 120);
    ok(&["retain", "--lake", p(&lake), "--table", &keep]);
    assert_eq!(hour_partitions(&lake.join("zeek.conn")), hours[1..]);
    for t in ["zeek.conn", "zeek.dns", "zeek.http"] {
        assert!(
            lake.join(t).join("_delta_log").is_dir(),
            "{t} has no Delta log"
        );
    }
    // Trino reads them through its Delta Lake connector (`silt ddl --dialect trino` prints the
    // register_table call), timestamps compared at its milliseconds.
    let trino = trino();
    let v = check(&py, &lake, trino.as_deref());
    assert_eq!(v["tables"].as_array().unwrap().len(), 6, "{v}");
    // `silt ddl --dialect spark` (CREATE TABLE ... USING DELTA) ran in Spark and answered.
    for t in v["tables"].as_array().unwrap() {
        assert!(
            t["ddl_checks"]["spark"].as_u64().unwrap_or(0) >= 3,
            "{}: {}",
            t["table"],
            t["ddl_checks"]
        );
    }
}
