//! Every Suricata EVE file of the shared corpus, read through `suricata::read` and checked against
//! expectations computed independently here (serde_json + chrono + std::net), line by line:
//! row and reject counts, per-table row counts, reject line numbers, every `timestamp`,
//! `flow_id`, `src_ip`/`dest_ip`, and a semantic round trip of every row through arrow's JSON
//! writer. Skips when the corpus is absent.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{DataType, TimeUnit, TimestampMicrosecondType, UInt64Type};
use serde_json::Value as J;
use silt_core::{meta, CollectEmit, ReadOptions, SourceInfo, TableName};
use silt_readers::suricata;

#[path = "suricata_support.rs"]
mod support;
use support::{canonical, chrono_micros, rows_as_json, same_row, unified};

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn bytes_of(p: &Path) -> Vec<u8> {
    let raw = std::fs::read(p).unwrap();
    if p.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        raw
    }
}

/// What the test expects of one line.
enum Expect {
    Skip,
    Reject,
    Row(TableName, J),
}

fn expect_line(line: &[u8]) -> Expect {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Expect::Skip;
    }
    let Ok(v) = serde_json::from_slice::<J>(line) else {
        return Expect::Reject;
    };
    let Some(obj) = v.as_object() else {
        return Expect::Reject;
    };
    let et = match obj.get("event_type") {
        Some(J::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => return Expect::Reject,
    };
    for id in ["flow_id", "parent_id"] {
        match obj.get(id) {
            None | Some(J::Null) => {}
            Some(J::Number(n)) if n.as_u64().is_some() => {}
            Some(J::String(s))
                if !s.is_empty()
                    && s.bytes().all(|b| b.is_ascii_digit())
                    && s.parse::<u64>().is_ok() => {}
            _ => return Expect::Reject,
        }
    }
    Expect::Row(TableName::new("suricata", &et), v)
}

fn check_file(path: &Path, batch_rows: usize) -> (usize, usize) {
    let data = bytes_of(path);
    let name = path.display().to_string();
    let mut expected: BTreeMap<TableName, Vec<J>> = BTreeMap::new();
    let mut expected_rejects = Vec::new();
    let mut nonempty = 0;
    let lines: Vec<&[u8]> = if data.is_empty() {
        vec![]
    } else {
        data.strip_suffix(b"\n")
            .unwrap_or(&data)
            .split(|&c| c == b'\n')
            .collect()
    };
    for (i, line) in lines.iter().enumerate() {
        match expect_line(line) {
            Expect::Skip => {}
            Expect::Reject => {
                nonempty += 1;
                expected_rejects.push(i as u64 + 1);
            }
            Expect::Row(t, v) => {
                nonempty += 1;
                expected.entry(t).or_default().push(v);
            }
        }
    }

    let mut out = CollectEmit::default();
    let opts = ReadOptions { batch_rows };
    suricata::read(
        &mut &data[..],
        &SourceInfo::from_path(path),
        &opts,
        &mut out,
    )
    .unwrap();

    let rows = out.total_rows();
    assert_eq!(
        rows + out.rejects.len(),
        nonempty,
        "{name}: rows + rejects != non-empty lines"
    );
    let got_reject_lines: Vec<u64> = out.rejects.iter().map(|r| r.line).collect();
    assert_eq!(
        got_reject_lines, expected_rejects,
        "{name}: reject line numbers"
    );
    for r in &out.rejects {
        assert_eq!(r.source, name);
        let raw_line = lines[r.line as usize - 1];
        assert_eq!(
            &r.raw[..],
            raw_line.strip_suffix(b"\r").unwrap_or(raw_line),
            "{name}: reject raw bytes"
        );
        assert!(!r.reason.is_empty());
    }
    assert_eq!(out.bytes, data.len() as u64, "{name}: progress bytes");

    let got_tables: Vec<&TableName> = out.batches.keys().collect();
    let want_tables: Vec<&TableName> = expected.keys().collect();
    assert_eq!(got_tables, want_tables, "{name}: tables");

    for (table, want) in &expected {
        let batches = &out.batches[table];
        assert_eq!(
            batches.iter().map(RecordBatch::num_rows).sum::<usize>(),
            want.len(),
            "{name}: rows of {table}"
        );
        assert!(batches.iter().all(|b| b.num_rows() <= batch_rows));
        for b in batches {
            let s = b.schema();
            assert_eq!(s.field(0).name(), "timestamp");
            assert_eq!(
                s.field(0).data_type(),
                &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
            );
            assert_eq!(meta::time_column(&s), Some("timestamp"));
            assert_eq!(s.metadata().get(meta::TABLE), Some(&table.to_string()));
            let lookups = meta::lookup_columns(&s);
            for c in ["flow_id", "community_id", "src_ip", "dest_ip"] {
                assert_eq!(
                    lookups.contains(&c.to_string()),
                    s.field_with_name(c).is_ok(),
                    "{name}: lookup {c}"
                );
            }
            if let Ok(f) = s.field_with_name("flow_id") {
                assert!(
                    matches!(f.data_type(), DataType::UInt64 | DataType::Null),
                    "{name}: flow_id type"
                );
            }
        }
        let all = unified(&batches.iter().collect::<Vec<_>>());
        let ts = all
            .column_by_name("timestamp")
            .unwrap()
            .as_primitive::<TimestampMicrosecondType>();
        for (i, v) in want.iter().enumerate() {
            let expect_ts = v
                .get("timestamp")
                .and_then(J::as_str)
                .and_then(chrono_micros);
            let got = ts.is_valid(i).then(|| ts.value(i));
            assert_eq!(
                got,
                expect_ts,
                "{name}: {table} row {i} timestamp {:?}",
                v.get("timestamp")
            );
        }
        if let Some(fid) = all.column_by_name("flow_id") {
            if fid.data_type() == &DataType::UInt64 {
                let fid = fid.as_primitive::<UInt64Type>();
                for (i, v) in want.iter().enumerate() {
                    let expect = v.get("flow_id").and_then(J::as_u64);
                    assert_eq!(
                        fid.is_valid(i).then(|| fid.value(i)),
                        expect,
                        "{name}: {table} row {i} flow_id"
                    );
                }
            }
        }
        for col in ["src_ip", "dest_ip"] {
            let Some(c) = all.column_by_name(col) else {
                continue;
            };
            if c.data_type() != &DataType::Utf8 {
                continue;
            }
            let c = c.as_string::<i32>();
            for (i, v) in want.iter().enumerate() {
                let expect = v.get(col).and_then(J::as_str).map(canonical);
                assert_eq!(
                    c.is_valid(i).then(|| c.value(i).to_string()),
                    expect,
                    "{name}: {table} row {i} {col}"
                );
            }
        }
        for (i, (orig, got)) in want.iter().zip(rows_as_json(&all)).enumerate() {
            if let Err(e) = same_row(orig, &got) {
                panic!("{name}: {table} row {i}: {e}");
            }
        }
    }
    (rows, out.rejects.len())
}

#[test]
fn every_corpus_file_reads_and_matches_independent_counts() {
    let Some(dir) = support::corpus_dir() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let mut files = Vec::new();
    walk(&dir, &mut files);
    files.sort();
    let mut seen = BTreeMap::new();
    let mut total_rows = 0;
    for f in &files {
        // A small batch size exercises schema growth across batches; the default one, single batches.
        let small = check_file(f, 7);
        let big = check_file(f, ReadOptions::default().batch_rows);
        assert_eq!(small, big);
        total_rows += small.0;
        seen.insert(f.file_name().unwrap().to_string_lossy().to_string(), small);
    }
    assert_eq!(seen["surevego-eve_broken.json"].1, 6);
    assert_eq!(seen["fever-jsonparse_eve_broken1.json"].1, 1);
    assert_eq!(seen["fever-jsonparse_eve_empty.json"], (0, 0));
    assert_eq!(seen["surevego-eve.json"], (266, 0));
    assert_eq!(seen["vast-example-pcap-eve.json.gz"], (1183, 0));
    // Counted with Python's json module over the corpus as of this writing (91 files).
    assert_eq!(files.len(), 91);
    assert_eq!(total_rows, 4057);
}
