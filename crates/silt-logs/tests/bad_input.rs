//! Bad input: expected reject counts (counted by hand from the inputs), positions, raw bytes kept,
//! and no panic on random bytes for any format.

mod common;

use common::{collect, one_table, strings};
use silt_logs::{LogFormat, LogOptions};

#[test]
fn json_logs_invalid_corpus() {
    let Some(c) = common::corpus() else { return };
    let bytes =
        std::fs::read(c.join("weblogs/docker-json-file/fluent-bit-json-logs-invalid.log")).unwrap();
    // As Docker json-file the record is fine (its `log` is just text)...
    let (out, r) = collect(LogFormat::Docker, &bytes, &LogOptions::default());
    r.unwrap();
    assert_eq!((out.total_rows(), out.rejects.len()), (1, 0));
    // ...but its payload `{"message_id": 20, "word": "yaks"]` read as NDJSON is one reject.
    let log = strings(&one_table(&out), "log").remove(0);
    let (out, r) = collect(LogFormat::Json, log.as_bytes(), &LogOptions::default());
    r.unwrap();
    assert_eq!((out.total_rows(), out.rejects.len()), (0, 1));
    assert!(
        out.rejects[0].reason.starts_with("invalid JSON at column"),
        "{}",
        out.rejects[0].reason
    );
    assert_eq!(out.rejects[0].raw, log.as_bytes());
}

#[test]
fn docker_compose_is_not_json_file() {
    let Some(c) = common::corpus() else { return };
    // `docker compose logs` output: `web-1  | message` lines, none of them JSON.
    let bytes = std::fs::read(c.join("weblogs/lnav-docker_compose.0")).unwrap();
    let lines = bytes
        .split(|b| *b == b'\n')
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .count();
    let (out, r) = collect(LogFormat::Docker, &bytes, &LogOptions::default());
    r.unwrap();
    assert_eq!(out.total_rows(), 0);
    assert_eq!(out.rejects.len(), lines);
}

#[test]
fn ndjson_malformed_and_invalid_utf8() {
    let mut text = Vec::new();
    text.extend_from_slice(b"{\"a\":1}\n");
    text.extend_from_slice(b"{\"a\":\"caf\xe9\"}\n"); // latin-1 byte: invalid UTF-8
    text.extend_from_slice(b"{\"a\":2,}\n"); // trailing comma
    text.extend_from_slice(b"[1,2]\n"); // not an object
    text.extend_from_slice(b"\n"); // blank: skipped
    text.extend_from_slice(b"{\"a\":3}"); // no final newline
    let (out, r) = collect(LogFormat::Json, &text, &LogOptions::default());
    r.unwrap();
    assert_eq!(out.total_rows(), 2);
    let lines: Vec<u64> = out.rejects.iter().map(|r| r.line).collect();
    assert_eq!(lines, [2, 3, 4]);
    assert_eq!(out.rejects[0].raw, b"{\"a\":\"caf\xe9\"}");
    assert!(out.rejects[2].reason.contains("not an object"));
}

#[test]
fn csv_invalid_utf8_and_ragged_rows() {
    let text = b"a,b\n1,ok\n2,caf\xe9\n3\n4,\"multi\nline\"\n";
    let (out, r) = collect(LogFormat::Csv, text, &LogOptions::default());
    r.unwrap();
    let lines: Vec<u64> = out.rejects.iter().map(|r| r.line).collect();
    assert_eq!(lines, [3, 4]);
    assert!(out.rejects[0].reason.contains("invalid UTF-8"));
    assert_eq!(out.rejects[0].raw, b"2,caf\xe9");
    let b = one_table(&out);
    assert_eq!(strings(&b, "b"), ["ok", "multi\nline"]);
}

#[test]
fn msgpack_truncated_and_bad_records() {
    let mut bytes = Vec::new();
    for i in 0..3 {
        bytes.extend(rmp_serde::to_vec_named(&serde_json::json!({"i": i, "s": "x"})).unwrap());
    }
    // Record 4: a string that is not UTF-8 (fixmap 1, key "s", fixstr 2 bytes ff fe).
    bytes.extend_from_slice(&[0x81, 0xa1, b's', 0xa2, 0xff, 0xfe]);
    // Record 5: not a map.
    bytes.extend(rmp_serde::to_vec(&42).unwrap());
    let good_end = bytes.len();
    // Record 6: truncated.
    let last = rmp_serde::to_vec_named(&serde_json::json!({"i": 9, "s": "long string"})).unwrap();
    bytes.extend_from_slice(&last[..last.len() - 4]);
    let (out, r) = collect(LogFormat::Msgpack, &bytes, &LogOptions::default());
    r.unwrap();
    assert_eq!(out.total_rows(), 3);
    let lines: Vec<u64> = out.rejects.iter().map(|r| r.line).collect();
    assert_eq!(lines, [4, 5, 6]);
    assert!(out.rejects[0].reason.contains("not valid UTF-8"));
    assert_eq!(out.rejects[0].raw, [0x81, 0xa1, b's', 0xa2, 0xff, 0xfe]);
    assert!(out.rejects[1].reason.contains("not a map"));
    assert!(
        out.rejects[2]
            .reason
            .contains(&format!("byte offset {good_end}")),
        "{}",
        out.rejects[2].reason
    );
    // An invalid marker stops the stream: one reject for the rest.
    let mut bad = rmp_serde::to_vec_named(&serde_json::json!({"i": 1})).unwrap();
    bad.extend_from_slice(&[0xc1, 0x81, 0xa1, b'i', 0x01]);
    let (out, r) = collect(LogFormat::Msgpack, &bad, &LogOptions::default());
    r.unwrap();
    assert_eq!((out.total_rows(), out.rejects.len()), (1, 1));
    assert!(out.rejects[0].reason.contains("0xc1"));
}

#[test]
fn random_bytes_never_panic() {
    for seed in 0..40u64 {
        let mut bytes = common::noise(seed, 1 + (seed as usize * 977) % 5000);
        // Some inputs start like each format so the readers get past their first checks.
        let prefix: &[u8] = match seed % 5 {
            1 => b"{\"log\":\"x\"}\n",
            2 => &[0x82, 0xa1, b'a', 0x01],
            3 => b"a,b\n",
            4 => b"Obj\x01",
            _ => b"",
        };
        bytes.splice(0..0, prefix.iter().copied());
        for format in LogFormat::ALL {
            let (out, _r) = collect(format, &bytes, &LogOptions::default());
            // Whatever happened, nothing panicked and the outputs are well-formed.
            let _ = out.total_rows();
        }
    }
}
