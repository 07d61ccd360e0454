//! `silt import json --parse-field log=access`: the embedded access-log line becomes typed
//! columns in the lake (parsed on the writer's thread), a line that does not match keeps its raw
//! text, and formats whose records cannot hold a log line refuse the flag.

mod common;

use common::{parquet_files, silt};
use serde_json::Value;

#[test]
fn import_parses_the_embedded_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("web.ndjson");
    let line = |t: u64, l: &str| {
        serde_json::json!({"log_time": t, "container_name": "/web", "log": l}).to_string()
    };
    let text = [
        line(1_711_281_605_000, "10.0.0.2 - - [24/Mar/2024:12:00:05 +0000] \"GET /b HTTP/1.1\" 404 12 \"-\" \"curl/8\""),
        line(1_711_281_601_000, "10.0.0.1 - - [24/Mar/2024:12:00:01 +0000] \"GET /a HTTP/1.1\" 200 512 \"-\" \"curl/8\""),
        line(1_711_281_603_000, "2024/03/24 12:00:03 [error] 7#7: upstream timed out"),
    ]
    .join("\n");
    std::fs::write(&input, text).unwrap();
    let lake = dir.path().join("lake");
    let o = silt(&[
        "import",
        "json",
        input.to_str().unwrap(),
        "--lake",
        lake.to_str().unwrap(),
        "--time-unit",
        "ms",
        "--parse-field",
        "log=access",
        "--quiet",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "{}{stderr}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        stderr.contains("1 of 3 values did not match the access-log format"),
        "{stderr}"
    );
    let files: Vec<_> = parquet_files(&lake.join("json.web"));
    assert_eq!(files.len(), 1, "{files:?}");
    let o = silt(&["inspect", "--json", files[0].to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rows"], 3);
    let col = |name: &str| {
        v["row_groups"][0]["columns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["path"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no column {name}: {v}"))
    };
    assert_eq!(col("status")["min"], "200");
    assert_eq!(col("status")["max"], "404");
    assert_eq!(col("status")["nulls"], 1);
    // The line that did not parse keeps its raw text; the parsed ones leave `log` null.
    assert_eq!(col("log")["nulls"], 2);
}

#[test]
fn formats_without_log_lines_refuse_parse_field() {
    for format in ["zeek", "suricata", "access"] {
        let o = silt(&[
            "import",
            format,
            "-",
            "--lake",
            "unused",
            "--parse-field",
            "log=access",
        ]);
        assert!(!o.status.success(), "{format}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("--parse-field applies to"),
            "{format}: {stderr}"
        );
    }
}
