//! Output control in the lake writer: per-column encoding hints (checked with `inspect`, the
//! JSON behind `silt inspect --json`) and `--partition-by` (a time column override).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{Array, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value;
use silt_core::{meta, Emit, TableName};
use silt_lake::{catalog, EncodingHints, LakeWriter, Partitioning, WriterConfig};

const HOUR: i64 = 3_600_000_000;
const T0: i64 = 1_521_910_800_000_000; // 2018-03-24T17:00:00Z
const N: usize = 5000;

fn schema() -> SchemaRef {
    let fields = vec![
        Field::new("ts", silt_core::time::timestamp_type(), true),
        Field::new("seen", silt_core::time::timestamp_type(), true),
        Field::new("uid", DataType::Utf8, true),
        Field::new("proto", DataType::Utf8, true),
        Field::new("path", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
        Field::new("score", DataType::Float64, true),
    ];
    let md: HashMap<String, String> = [(meta::TIME_COLUMN.to_string(), "ts".to_string())].into();
    Arc::new(Schema::new_with_metadata(fields, md))
}

/// `ts` runs over one hour from T0; `seen` is `ts` shifted back by 30 hours (another day) and in
/// reverse order, so sorting and partitioning by it differ visibly from `ts`.
fn batch() -> RecordBatch {
    let ts: Vec<i64> = (0..N as i64).map(|i| T0 + i * 700_000).collect();
    let seen: Vec<i64> = (0..N as i64)
        .map(|i| T0 - 30 * HOUR + (N as i64 - i) * 1_000_000)
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
            Arc::new(TimestampMicrosecondArray::from(seen).with_timezone("UTC")),
            // distinct: silt's automatic choice is no dictionary
            Arc::new(StringArray::from_iter_values(
                (0..N).map(|i| format!("C{i:08}")),
            )),
            // three values: silt's automatic choice is a dictionary
            Arc::new(StringArray::from_iter_values(
                (0..N).map(|i| ["tcp", "udp", "icmp"][i % 3]),
            )),
            Arc::new(StringArray::from_iter_values(
                (0..N).map(|i| format!("/static/img/{:04}.png", i / 3)),
            )),
            // distinct and in no order: silt's automatic choice is plain (an arithmetic
            // sequence would get deltas)
            Arc::new(Int64Array::from_iter_values((0..N as i64).map(scatter))),
            Arc::new(Float64Array::from_iter_values(
                (0..N).map(|i| i as f64 * 0.37),
            )),
        ],
    )
    .unwrap()
}

/// Distinct values of all 64 bits in no order (a mixing hash of `i`): neither a dictionary nor
/// deltas can make them smaller.
fn scatter(i: i64) -> i64 {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 32;
    x as i64
}

fn write(root: &Path, cfg: WriterConfig) -> anyhow::Result<()> {
    let mut w = LakeWriter::new(root, cfg)?;
    w.batch(&TableName::new("web", "access"), batch())?;
    w.finish()?;
    Ok(())
}

fn files(root: &Path) -> Vec<PathBuf> {
    catalog::data_files(&root.join("web.access"))
        .unwrap()
        .into_iter()
        .map(|f| f.path)
        .collect()
}

/// Encodings per column path of a file's first row group, from the inspect JSON.
fn encodings(file: &Path) -> HashMap<String, Vec<String>> {
    let v: Value = silt_lake::inspect::inspect(file).unwrap();
    v["row_groups"][0]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["path"].as_str().unwrap().to_string(),
                c["encodings"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

fn has_dict(e: &[String]) -> bool {
    e.iter().any(|x| x.contains("DICTIONARY"))
}

#[test]
fn defaults_are_what_the_hints_change() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), WriterConfig::default()).unwrap();
    let f = files(dir.path());
    assert_eq!(f.len(), 1);
    let e = encodings(&f[0]);
    assert!(!has_dict(&e["uid"]), "{:?}", e["uid"]);
    assert!(has_dict(&e["proto"]), "{:?}", e["proto"]);
    assert!(e["ts"].contains(&"DELTA_BINARY_PACKED".to_string()));
    assert!(!e["n"].contains(&"DELTA_BINARY_PACKED".to_string()));
    assert!(!e["score"].contains(&"BYTE_STREAM_SPLIT".to_string()));
}

#[test]
fn encoding_hints_show_in_inspect() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        encodings: EncodingHints {
            dictionary: vec!["uid".into()],
            no_dictionary: vec!["proto".into()],
            delta: vec!["n".into(), "path".into()],
            byte_stream_split: vec!["score".into()],
        },
        ..WriterConfig::default()
    };
    write(dir.path(), cfg).unwrap();
    let f = files(dir.path());
    let e = encodings(&f[0]);
    assert!(has_dict(&e["uid"]), "uid: {:?}", e["uid"]);
    assert!(!has_dict(&e["proto"]), "proto: {:?}", e["proto"]);
    assert!(
        e["n"].contains(&"DELTA_BINARY_PACKED".to_string()) && !has_dict(&e["n"]),
        "n: {:?}",
        e["n"]
    );
    assert!(
        e["path"].contains(&"DELTA_BYTE_ARRAY".to_string()) && !has_dict(&e["path"]),
        "path: {:?}",
        e["path"]
    );
    assert!(
        e["score"].contains(&"BYTE_STREAM_SPLIT".to_string()),
        "score: {:?}",
        e["score"]
    );
    // The values survive the encodings.
    let r = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&f[0]).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut sum_n = 0i64;
    let mut sum_score = 0f64;
    let mut rows = 0;
    for b in r {
        let b = b.unwrap();
        rows += b.num_rows();
        let n = b.column_by_name("n").unwrap();
        let n = n.as_any().downcast_ref::<Int64Array>().unwrap();
        sum_n = n.iter().flatten().fold(sum_n, i64::wrapping_add);
        let s = b.column_by_name("score").unwrap();
        let s = s.as_any().downcast_ref::<Float64Array>().unwrap();
        sum_score += s.iter().flatten().sum::<f64>();
    }
    assert_eq!(rows, N);
    assert_eq!(sum_n, (0..N as i64).map(scatter).fold(0, i64::wrapping_add));
    let want: f64 = (0..N).map(|i| i as f64 * 0.37).sum();
    assert!((sum_score - want).abs() < 1e-6 * want);
}

#[test]
fn encoding_hints_are_validated() {
    let cases: [(EncodingHints, &str); 4] = [
        (
            EncodingHints {
                delta: vec!["nosuch".into()],
                ..Default::default()
            },
            "--delta nosuch: no such column",
        ),
        (
            EncodingHints {
                byte_stream_split: vec!["uid".into()],
                ..Default::default()
            },
            "byte-stream-split takes Float32/Float64",
        ),
        (
            EncodingHints {
                delta: vec!["score".into()],
                ..Default::default()
            },
            "column score is Float64",
        ),
        (
            EncodingHints {
                dictionary: vec!["uid".into()],
                no_dictionary: vec!["uid".into()],
                ..Default::default()
            },
            "both --dictionary and --no-dictionary",
        ),
    ];
    for (hints, msg) in cases {
        let dir = tempfile::tempdir().unwrap();
        let cfg = WriterConfig {
            encodings: hints,
            ..WriterConfig::default()
        };
        let e = write(dir.path(), cfg).unwrap_err();
        assert!(format!("{e:#}").contains(msg), "{e:#} (wanted {msg})");
        // Nothing was written.
        assert!(files(dir.path()).is_empty());
    }
}

fn read_col(file: &Path, col: &str) -> Vec<i64> {
    let r = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(file).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for b in r {
        let b = b.unwrap();
        let a = b.column_by_name(col).unwrap();
        let a = a
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap();
        out.extend(a.iter().flatten());
    }
    out
}

#[test]
fn partition_by_overrides_the_time_column() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        time_column: Some("seen".into()),
        partition: Partitioning::Day.into(),
        ..WriterConfig::default()
    };
    write(dir.path(), cfg).unwrap();
    let f = files(dir.path());
    // `seen` lies 30 hours before T0 (2018-03-24T17:00Z) minus up to N seconds: 2018-03-23,
    // 11:00 down to 09:36, one day partition. `ts` would have given 2018-03-24.
    assert_eq!(f.len(), 1, "{f:?}");
    let rel = f[0].strip_prefix(dir.path()).unwrap();
    assert!(
        rel.starts_with("web.access/dt=2018-03-23"),
        "{}",
        rel.display()
    );
    let seen = read_col(&f[0], "seen");
    assert_eq!(seen.len(), N);
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "sorted by seen");
    // The files' metadata names the new time column, so the catalog reports its range.
    let info = catalog::table_info(dir.path(), &TableName::new("web", "access")).unwrap();
    assert_eq!(info.time_column.as_deref(), Some("seen"));
    assert_eq!(info.first_ts, Some(T0 - 30 * HOUR + 1_000_000));
    assert_eq!(info.last_ts, Some(T0 - 30 * HOUR + N as i64 * 1_000_000));
}

#[test]
fn partition_by_must_name_a_timestamp() {
    for (field, msg) in [
        ("nosuch", "has no column nosuch"),
        ("n", "is Int64, not a timestamp"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = WriterConfig {
            time_column: Some(field.into()),
            ..WriterConfig::default()
        };
        let e = write(dir.path(), cfg).unwrap_err();
        assert!(format!("{e:#}").contains(msg), "{e:#}");
    }
    let cfg = WriterConfig {
        time_column: Some("id.ts".into()),
        ..WriterConfig::default()
    };
    assert!(cfg.validate().unwrap_err().contains("top-level"));
}

/// 60k rows of a string column with 15k distinct 100-byte values: a 1.5 MB dictionary, which
/// shrinks the column (every value repeats four times) but overflows a 1 MiB dictionary page.
/// The default dictionary page (4 MiB) keeps the dictionary; `dictionary_page_bytes = 1 MiB` (the
/// old limit, tied to `--page-size`) writes the column plain.
#[test]
fn string_dictionaries_get_their_own_page_limit() {
    const ROWS: usize = 60_000;
    let md: HashMap<String, String> = [(meta::TIME_COLUMN.to_string(), "ts".to_string())].into();
    let schema = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("ts", silt_core::time::timestamp_type(), true),
            Field::new("query", DataType::Utf8, true),
        ],
        md,
    ));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(
                TimestampMicrosecondArray::from_iter_values((0..ROWS as i64).map(|i| T0 + i))
                    .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from_iter_values(
                (0..ROWS).map(|i| format!("{:0>100}", (i * 7919) % 15_000)),
            )),
        ],
    )
    .unwrap();
    let query_encodings = |cfg: WriterConfig| {
        let dir = tempfile::tempdir().unwrap();
        let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
        w.batch(&TableName::new("dns", "q"), batch.clone()).unwrap();
        w.finish().unwrap();
        let f = catalog::data_files(&dir.path().join("dns.q")).unwrap();
        assert_eq!(f.len(), 1);
        encodings(&f[0].path)["query"].clone()
    };
    let e = query_encodings(WriterConfig::default());
    assert!(has_dict(&e), "default: {e:?}");
    let e = query_encodings(WriterConfig {
        dictionary_page_bytes: 1 << 20,
        ..WriterConfig::default()
    });
    assert!(!has_dict(&e), "1 MiB dictionary page: {e:?}");
}
