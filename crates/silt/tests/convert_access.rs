//! `silt convert --format access`: access-log lines to one sorted Parquet file, with a reject for
//! the line that does not match.

use std::process::Command;

use serde_json::Value;

#[test]
fn convert_reads_access_logs() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("site.log");
    // Out of time order, one line that is not an access-log line.
    std::fs::write(
        &log,
        "10.0.0.2 - - [24/Mar/2024:12:00:05 +0000] \"GET /b HTTP/1.1\" 404 12 \"-\" \"curl/8\"\n\
         10.0.0.1 - - [24/Mar/2024:12:00:01 +0000] \"GET /a HTTP/1.1\" 200 512 \"-\" \"curl/8\"\n\
         this is not an access log line\n\
         10.0.0.3 - bob [24/Mar/2024:12:00:03 +0000] \"POST /c HTTP/2.0\" 201 0 \"https://x/\" \"Mozilla/5.0\"\n",
    )
    .unwrap();
    let out = dir.path().join("site.parquet");
    let o = Command::new(env!("CARGO_BIN_EXE_silt"))
        .args([
            "convert",
            log.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
        .args(["--format", "access", "--log-format", "combined", "--quiet"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("3 rows"), "{stdout}");
    assert!(stdout.contains("1 records rejected"), "{stdout}");

    let o = Command::new(env!("CARGO_BIN_EXE_silt"))
        .args(["inspect", "--json", out.to_str().unwrap()])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rows"], 3);
    assert_eq!(v["metadata"]["silt.table"], "access.site");
    let rg = &v["row_groups"][0];
    // Sorted by the request time: 12:00:01 (status 200) first, 12:00:05 (404) last.
    assert_eq!(rg["sorting_columns"][0]["column"], "time");
    let status = rg["columns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "status")
        .expect("a status column");
    assert_eq!(status["min"], "200", "{status}");
    assert_eq!(status["max"], "404", "{status}");
}
