//! LakeWriter end to end: layout, sortedness, runs, schema evolution, stores, codec levels.

mod common;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::{FileReader, SerializedFileReader};
use silt_core::{Emit, Reject, TableName};
use silt_lake::catalog;
use silt_lake::{Codec, LakeWriter, Partitioning, StoreKind, WriterConfig};

const HOUR: i64 = 3_600_000_000;
const T0: i64 = 1_521_910_800_000_000; // 2018-03-24T17:00:00Z

fn schema(extra: bool) -> SchemaRef {
    common::conn_schema(extra)
}

fn batch(ts: &[Option<i64>], extra: bool) -> RecordBatch {
    let s = schema(extra);
    let mut cols: Vec<Arc<dyn Array>> = vec![
        Arc::new(TimestampMicrosecondArray::from(ts.to_vec()).with_timezone("UTC")),
        Arc::new(StringArray::from_iter_values(
            ts.iter().map(|t| format!("C{}", t.unwrap_or(-1))),
        )),
        Arc::new(Int64Array::from_iter_values(
            ts.iter().map(|t| t.unwrap_or(0) % 1000),
        )),
    ];
    if extra {
        cols.push(Arc::new(StringArray::from_iter_values(
            ts.iter().map(|_| "x"),
        )));
    }
    RecordBatch::try_new(s, cols).unwrap()
}

fn read_ts(path: &Path) -> Vec<Option<i64>> {
    let r = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for b in r {
        let b = b.unwrap();
        let a = b
            .column_by_name("ts")
            .unwrap()
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .unwrap()
            .clone();
        out.extend(a.iter());
    }
    out
}

fn conn() -> TableName {
    TableName::new("zeek", "conn")
}

#[test]
fn partitions_sorts_and_publishes_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let hour = WriterConfig {
        partition: Partitioning::Hour.into(),
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir.path(), hour).unwrap();
    // Two hours, out of order, plus a null time.
    let ts: Vec<Option<i64>> = vec![
        Some(T0 + 5),
        Some(T0 + HOUR + 1),
        Some(T0 + 1),
        None,
        Some(T0 + 3),
    ];
    w.batch(&conn(), batch(&ts, false)).unwrap();
    w.reject(Reject {
        source: "x.log".into(),
        line: 7,
        reason: "bad".into(),
        raw: b"junk".to_vec(),
        table: Some(conn()),
    })
    .unwrap();
    let s = w.finish().unwrap();
    assert_eq!(s.tables[&conn()].events, 5);
    assert_eq!(s.tables[&conn()].rows_written, 5);
    assert_eq!(s.tables[&conn()].rejects, 1);
    assert_eq!(s.tables[&conn()].files, 3);

    let files = catalog::data_files(&dir.path().join("zeek.conn")).unwrap();
    let rel: Vec<String> = files
        .iter()
        .map(|f| {
            f.path
                .strip_prefix(dir.path())
                .unwrap()
                .parent()
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    assert_eq!(
        rel,
        vec![
            "zeek.conn/dt=2018-03-24/hour=17",
            "zeek.conn/dt=2018-03-24/hour=18",
            "zeek.conn/dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__",
        ]
    );
    assert_eq!(
        read_ts(&files[0].path),
        vec![Some(T0 + 1), Some(T0 + 3), Some(T0 + 5)]
    );
    // No temp files are left behind.
    let leftovers = walk(dir.path())
        .into_iter()
        .filter(|p| p.contains(".inprogress"))
        .count();
    assert_eq!(leftovers, 0);
    // Metadata and sorting columns are in the footer; bloom filter on the lookup column.
    let r = SerializedFileReader::new(File::open(&files[0].path).unwrap()).unwrap();
    let md = r.metadata();
    let kv = md.file_metadata().key_value_metadata().unwrap();
    assert!(kv
        .iter()
        .any(|k| k.key == "silt.time_column" && k.value.as_deref() == Some("ts")));
    assert!(kv
        .iter()
        .any(|k| k.key == "silt.table" && k.value.as_deref() == Some("zeek.conn")));
    let rg = md.row_group(0);
    assert_eq!(rg.sorting_columns().unwrap()[0].column_idx, 0);
    assert!(
        rg.column(1).bloom_filter_offset().is_some(),
        "uid has a bloom filter"
    );
    assert!(rg.column(2).bloom_filter_offset().is_none(), "n has none");
    // Rejects were kept.
    let rej = s.rejects_files[0].clone();
    assert!(std::fs::read_to_string(rej)
        .unwrap()
        .contains("\"reason\":\"bad\""));
    // Catalog figures.
    let info = catalog::table_info(dir.path(), &conn()).unwrap();
    assert_eq!(info.rows, 5);
    assert_eq!(info.first_ts, Some(T0 + 1));
    assert_eq!(info.last_ts, Some(T0 + HOUR + 1));
}

fn walk(d: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path().display().to_string());
        }
    }
    out
}

#[test]
fn nearly_sorted_stream_gives_one_sorted_file_and_late_rows_a_second_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        sort_buffer_bytes: 64 * 1024,
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
    // 20k rows in one hour, each batch locally shuffled (disorder smaller than the buffer).
    let mut expected = Vec::new();
    for b in 0..20 {
        let mut ts: Vec<Option<i64>> = (0..1000)
            .map(|i| Some(T0 + (b * 1000 + i) * 1000))
            .collect();
        ts.reverse();
        expected.extend(ts.iter().copied());
        w.batch(&conn(), batch(&ts, false)).unwrap();
    }
    let s = w.finish().unwrap();
    assert_eq!(
        s.tables[&conn()].files,
        1,
        "disorder within the buffer keeps one file"
    );
    let files = catalog::data_files(&dir.path().join("zeek.conn")).unwrap();
    let got = read_ts(&files[0].path);
    expected.sort();
    assert_eq!(got, expected);

    // Now a very late row after much newer data: it must go to a second sorted run.
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        sort_buffer_bytes: 16 * 1024,
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
    for b in 0..10 {
        let ts: Vec<Option<i64>> = (0..1000)
            .map(|i| Some(T0 + 10_000_000 + (b * 1000 + i) * 1000))
            .collect();
        w.batch(&conn(), batch(&ts, false)).unwrap();
    }
    w.batch(&conn(), batch(&[Some(T0)], false)).unwrap();
    let s = w.finish().unwrap();
    assert_eq!(s.tables[&conn()].rows_written, 10_001);
    let files = catalog::data_files(&dir.path().join("zeek.conn")).unwrap();
    assert_eq!(files.len(), 2);
    for f in &files {
        let ts = read_ts(&f.path);
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "every file is sorted");
    }
}

#[test]
fn schema_change_starts_new_files_and_keeps_all_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = LakeWriter::new(dir.path(), WriterConfig::default()).unwrap();
    w.batch(&conn(), batch(&[Some(T0), Some(T0 + 2)], false))
        .unwrap();
    w.batch(&conn(), batch(&[Some(T0 + 1)], true)).unwrap();
    let s = w.finish().unwrap();
    assert_eq!(s.tables[&conn()].rows_written, 3);
    let files = catalog::data_files(&dir.path().join("zeek.conn")).unwrap();
    let total: usize = files.iter().map(|f| read_ts(&f.path).len()).sum();
    assert_eq!(total, 3);
}

#[test]
fn feather_store_and_day_partitioning() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        store: StoreKind::Feather,
        codec: Codec::Zstd,
        level: Some(3),
        partition: Partitioning::Day.into(),
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
    w.batch(&conn(), batch(&[Some(T0 + HOUR), Some(T0)], false))
        .unwrap();
    w.finish().unwrap();
    let files = catalog::data_files(&dir.path().join("zeek.conn")).unwrap();
    assert_eq!(files.len(), 1);
    assert!(files[0]
        .path
        .to_string_lossy()
        .contains("zeek.conn/dt=2018-03-24/"));
    assert!(files[0].path.to_string_lossy().ends_with(".feather"));
    let info = catalog::table_info(dir.path(), &conn()).unwrap();
    assert_eq!(
        (info.rows, info.first_ts, info.last_ts),
        (2, Some(T0), Some(T0 + HOUR))
    );
    // A second import with another partitioning is refused with a useful message.
    let hour = WriterConfig {
        partition: Partitioning::Hour.into(),
        store: StoreKind::Feather,
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir.path(), hour).unwrap();
    let err = w.batch(&conn(), batch(&[Some(T0)], false)).unwrap_err();
    assert!(format!("{err:#}").contains("--partition day"), "{err:#}");
}

#[test]
fn negative_zstd_levels_take_effect() {
    let rows: Vec<Option<i64>> = (0..50_000).map(|i| Some(T0 + i * 37 % 1_000_003)).collect();
    let size = |level: i32| {
        let dir = tempfile::tempdir().unwrap();
        let cfg = WriterConfig {
            level: Some(level),
            bloom_lookup_columns: false,
            ..WriterConfig::default()
        };
        let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
        w.batch(&conn(), batch(&rows, false)).unwrap();
        w.finish().unwrap().total_bytes_out()
    };
    let fast = size(-7);
    let normal = size(3);
    assert!(
        fast > normal,
        "level -7 ({fast} B) must compress less than level 3 ({normal} B)"
    );
}

#[test]
fn row_groups_reach_the_byte_target() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        row_group_bytes: 64 * 1024,
        codec: Codec::None,
        bloom_lookup_columns: false,
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
    for b in 0..10 {
        let ts: Vec<Option<i64>> = (0..10_000)
            .map(|i| Some(T0 + (b * 10_000 + i) * 1000))
            .collect();
        w.batch(&conn(), batch(&ts, false)).unwrap();
    }
    w.finish().unwrap();
    let files = catalog::data_files(&dir.path().join("zeek.conn")).unwrap();
    let r = SerializedFileReader::new(File::open(&files[0].path).unwrap()).unwrap();
    let md = r.metadata();
    assert!(
        md.num_row_groups() > 3,
        "{} row groups",
        md.num_row_groups()
    );
    let sizes: Vec<i64> = md
        .row_groups()
        .iter()
        .map(|rg| rg.compressed_size())
        .collect();
    eprintln!("row group sizes: {sizes:?}");
    // Not even the first row group (encoded on lane threads before anything is known about
    // the data's size) may run far past the target.
    assert!(
        sizes.iter().all(|&c| c <= 96 * 1024),
        "a row group over 1.5x the 64 KiB target: {sizes:?}"
    );
    // The first row group calibrates the size estimate; the last one ends with the file.
    for &c in &sizes[1..sizes.len() - 1] {
        assert!(
            (56 * 1024..=75 * 1024).contains(&c),
            "row group of {c} bytes for a 64 KiB target"
        );
    }
}

/// Rows that compress to a few bytes each must not make one huge row group: readers give a row
/// group to one core. The row cap cuts them before the byte target does, at exactly the cap.
#[test]
fn row_groups_stop_at_the_row_cap_before_the_byte_target() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        row_group_rows: 7_000,
        bloom_lookup_columns: false,
        ..WriterConfig::default()
    };
    assert_eq!(WriterConfig::default().row_group_rows, 1 << 20);
    let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
    // Batches that do not divide the cap, so slices must be cut inside a batch.
    for b in 0..5 {
        let ts: Vec<Option<i64>> = (0..6_000)
            .map(|i| Some(T0 + (b * 6_000 + i) * 1000))
            .collect();
        w.batch(&conn(), batch(&ts, false)).unwrap();
    }
    w.finish().unwrap();
    let files = catalog::data_files(&dir.path().join("zeek.conn")).unwrap();
    assert_eq!(files.len(), 1);
    let r = SerializedFileReader::new(File::open(&files[0].path).unwrap()).unwrap();
    let rows: Vec<i64> = r
        .metadata()
        .row_groups()
        .iter()
        .map(|rg| rg.num_rows())
        .collect();
    assert_eq!(rows, vec![7_000, 7_000, 7_000, 7_000, 2_000]);
    assert_eq!(read_ts(&files[0].path).len(), 30_000);
    let bad = WriterConfig {
        row_group_rows: 0,
        ..WriterConfig::default()
    };
    assert!(bad.validate().unwrap_err().contains("--row-group-rows"));
}

#[test]
fn table_without_time_column_is_written_unsorted_in_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = LakeWriter::new(
        dir.path(),
        WriterConfig {
            sort_buffer_bytes: 1024,
            ..WriterConfig::default()
        },
    )
    .unwrap();
    let s = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
    for i in 0..5 {
        let b = RecordBatch::try_new(
            s.clone(),
            vec![Arc::new(Int64Array::from_iter_values(
                i * 1000..(i + 1) * 1000,
            ))],
        )
        .unwrap();
        w.batch(&TableName::new("suricata", "stats"), b).unwrap();
    }
    let sum = w.finish().unwrap();
    let t = &sum.tables[&TableName::new("suricata", "stats")];
    assert_eq!((t.rows_written, t.files), (5000, 1));
    // Nothing to partition by: `auto` puts the file directly into the table directory.
    let table = dir.path().join("suricata.stats");
    let files = catalog::data_files(&table).unwrap();
    assert_eq!(files[0].path.parent(), Some(table.as_path()));
    assert_eq!(t.partitioning.as_deref(), Some("none"));
}

/// The input of [`any_order_any_buffer_keeps_every_row_sorted`]: per batch, its timestamps
/// (seconds into the hour; `None` is a null ts) and whether it carries the extra column.
type Input = Vec<(Vec<Option<i64>>, bool)>;

fn inputs() -> impl proptest::strategy::Strategy<Value = (Input, usize)> {
    use proptest::prelude::*;
    // Batches drift forward in time with local disorder of up to `jitter` seconds (at least 1:
    // nearly in order; 3600: any order in the hour), so the sort buffer sees every mix of
    // waiting and new rows.
    let batch = |base: i64, jitter: i64| {
        (
            prop::collection::vec(
                prop_oneof![
                    20 => (0..=jitter).prop_map(move |j| Some((base + j).min(3599))),
                    1 => Just(None),
                ],
                1..300,
            ),
            prop::bool::weighted(0.1),
        )
    };
    (
        prop_oneof![Just(0i64), Just(5), Just(60), Just(3600)],
        1usize..14,
    )
        .prop_flat_map(move |(jitter, n)| {
            let batches: Vec<_> = (0..n)
                .map(|i| batch(i as i64 * 200, jitter.max(1)))
                .collect();
            (batches, 2usize..64)
        })
        .prop_map(|(b, kib)| (b, kib * 1024))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// Whatever the order of the input and the size of the sort buffer (rows waiting in it
    /// across spills, late rows moving to the second tier, null times, a schema change while
    /// rows wait): every row is written exactly once and every file is sorted.
    #[test]
    fn any_order_any_buffer_keeps_every_row_sorted((input, buffer) in inputs()) {
        let dir = tempfile::tempdir().unwrap();
        let cfg = WriterConfig { sort_buffer_bytes: buffer, ..WriterConfig::default() };
        let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
        let mut expected = Vec::new();
        let mut k = 0i64;
        for (secs, extra) in &input {
            // Unique n per row, so that a row written twice or lost shows.
            let ts: Vec<Option<i64>> = secs.iter().map(|s| s.map(|s| T0 + s * 1_000_000)).collect();
            let b = batch(&ts, *extra);
            let n: Vec<i64> = (k..k + ts.len() as i64).collect();
            k += ts.len() as i64;
            let mut cols = b.columns().to_vec();
            cols[2] = Arc::new(Int64Array::from(n.clone()));
            let b = RecordBatch::try_new(b.schema(), cols).unwrap();
            for (t, n) in ts.iter().zip(&n) {
                expected.push((*t, *n, extra.then(|| "x".to_string())));
            }
            w.batch(&conn(), b).unwrap();
        }
        let s = w.finish().unwrap();
        proptest::prop_assert_eq!(s.tables[&conn()].rows_written, expected.len() as u64);
        let mut got = Vec::new();
        for f in catalog::data_files(&dir.path().join("zeek.conn")).unwrap() {
            let r = ParquetRecordBatchReaderBuilder::try_new(File::open(&f.path).unwrap())
                .unwrap()
                .build()
                .unwrap();
            let mut file_ts = Vec::new();
            for b in r {
                let b = b.unwrap();
                let ts = b.column_by_name("ts").unwrap().as_any()
                    .downcast_ref::<TimestampMicrosecondArray>().unwrap().clone();
                let n = b.column_by_name("n").unwrap().as_any()
                    .downcast_ref::<Int64Array>().unwrap().clone();
                let extra = b.column_by_name("extra").map(|c| {
                    c.as_any().downcast_ref::<StringArray>().unwrap().clone()
                });
                for i in 0..b.num_rows() {
                    let x = extra.as_ref().and_then(|e| e.is_valid(i).then(|| e.value(i).to_string()));
                    got.push((ts.is_valid(i).then(|| ts.value(i)), n.value(i), x));
                    file_ts.push(ts.is_valid(i).then(|| ts.value(i)));
                }
            }
            proptest::prop_assert!(file_ts.windows(2).all(|w| w[0] <= w[1]), "{} is not sorted", f.path.display());
        }
        got.sort_by_key(|r| r.1);
        expected.sort_by_key(|r| r.1);
        proptest::prop_assert_eq!(got, expected);
    }
}

#[test]
fn commit_publishes_what_was_received_and_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = LakeWriter::new(dir.path(), WriterConfig::default()).unwrap();
    w.batch(&conn(), batch(&[Some(T0 + 2), Some(T0 + 1)], false))
        .unwrap();
    w.reject(Reject {
        source: "a.log".into(),
        line: 1,
        reason: "first".into(),
        raw: b"x".to_vec(),
        table: None,
    })
    .unwrap();
    // Nothing is visible before the commit: rows are buffered.
    assert!(catalog::data_files(&dir.path().join("zeek.conn"))
        .unwrap()
        .is_empty());
    let c = w.commit(std::time::SystemTime::now()).unwrap();
    assert_eq!(c.files.len(), 1);
    assert_eq!(c.files[0].rows, 2);
    let first_rejects = c.rejects_file.expect("rejects published");
    assert!(std::fs::read_to_string(&first_rejects)
        .unwrap()
        .contains("first"));
    let files = catalog::data_files(&dir.path().join("zeek.conn")).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(read_ts(&files[0].path), vec![Some(T0 + 1), Some(T0 + 2)]);

    // The writer goes on: a later batch and reject land in new files.
    w.batch(&conn(), batch(&[Some(T0 + 3)], false)).unwrap();
    w.reject(Reject {
        source: "b.log".into(),
        line: 2,
        reason: "second".into(),
        raw: b"y".to_vec(),
        table: None,
    })
    .unwrap();
    let c2 = w.commit(std::time::SystemTime::now()).unwrap();
    assert_eq!(c2.files.len(), 1);
    assert_ne!(c2.files[0].path, files[0].path);
    let second_rejects = c2.rejects_file.expect("second rejects file");
    assert_ne!(second_rejects, first_rejects);
    // A commit with nothing new publishes nothing.
    let c3 = w.commit(std::time::SystemTime::now()).unwrap();
    assert!(c3.files.is_empty() && c3.rejects_file.is_none());
    let s = w.finish().unwrap();
    assert_eq!(s.tables[&conn()].rows_written, 3);
    assert_eq!(s.rejects_files, vec![first_rejects, second_rejects]);
    let all: usize = catalog::data_files(&dir.path().join("zeek.conn"))
        .unwrap()
        .iter()
        .map(|f| read_ts(&f.path).len())
        .sum();
    assert_eq!(all, 3);
}

#[test]
fn a_failing_table_does_not_abandon_the_others() {
    let dir = tempfile::tempdir().unwrap();
    // Table x.nouid cannot be written: where its directory would go there is a file.
    let mut w = LakeWriter::new(dir.path(), WriterConfig::default()).unwrap();
    let other = TableName::new("x", "nouid");
    std::fs::write(dir.path().join("x.nouid"), b"in the way").unwrap();
    let no_uid = {
        let s = Arc::new(Schema::new(vec![Field::new(
            "ts",
            silt_core::time::timestamp_type(),
            true,
        )]));
        RecordBatch::try_new(
            s,
            vec![Arc::new(
                TimestampMicrosecondArray::from(vec![Some(T0)]).with_timezone("UTC"),
            )],
        )
        .unwrap()
    };
    w.batch(&conn(), batch(&[Some(T0 + 1)], false)).unwrap();
    w.batch(&other, no_uid.clone()).unwrap();
    w.batch(&conn(), batch(&[Some(T0 + 2)], false)).unwrap();
    w.batch(&other, no_uid).unwrap();
    let s = w.finish().unwrap();
    let ok = &s.tables[&conn()];
    assert_eq!(
        (ok.events, ok.rows_written, ok.error.as_deref()),
        (2, 2, None)
    );
    let bad = &s.tables[&other];
    // Both batches were buffered; writing them at the end failed once.
    assert_eq!((bad.events, bad.rows_written, bad.errors), (2, 0, 1));
    assert!(
        bad.error.as_deref().unwrap().contains("x.nouid"),
        "{:?}",
        bad.error
    );
    assert_eq!(s.failed_tables().count(), 1);
    assert!(s
        .to_string()
        .contains("error: table x.nouid: 2 of 2 events not written"));
    assert_eq!(
        catalog::data_files(&dir.path().join("zeek.conn"))
            .unwrap()
            .len(),
        1
    );
}

/// Data files (not temp files) under the lake so far.
fn published(dir: &Path) -> usize {
    walk(dir)
        .iter()
        .filter(|p| p.ends_with(".parquet") && !p.contains("/_silt/"))
        .count()
}

#[test]
fn partitions_the_input_left_behind_are_finished_however_few_rows_they_hold() {
    // Sparse input in time order: every batch is a new hour, a few rows each (a small site's
    // archive in hour partitions). Hours no batch touches any more are written and published as
    // the import goes, not held until the end.
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        partition: Partitioning::Hour.into(),
        ..WriterConfig::default()
    };
    let max_open = cfg.max_open_partitions;
    let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
    for h in 0..200i64 {
        let ts: Vec<Option<i64>> = (0..5).map(|i| Some(T0 + h * HOUR + i)).collect();
        w.batch(&conn(), batch(&ts, false)).unwrap();
        let held = (h + 1) as usize - published(dir.path());
        assert!(
            held <= max_open + 5,
            "after hour {h}: {held} partitions held"
        );
    }
    let s = w.finish().unwrap();
    assert_eq!(s.tables[&conn()].rows_written, 1000);
    assert_eq!(s.tables[&conn()].files, 200);

    // Input in no time order over more partitions than that: every batch touches every hour,
    // so none is finished early (one file per hour at the end, not one per batch).
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        partition: Partitioning::Hour.into(),
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
    for round in 0..20i64 {
        let ts: Vec<Option<i64>> = (0..100)
            .rev()
            .map(|h| Some(T0 + h * HOUR + round))
            .collect();
        w.batch(&conn(), batch(&ts, false)).unwrap();
        assert_eq!(published(dir.path()), 0, "round {round}");
    }
    let s = w.finish().unwrap();
    assert_eq!(s.tables[&conn()].rows_written, 2000);
    assert_eq!(s.tables[&conn()].files, 100);
}

#[test]
fn under_the_memory_bound_partitions_left_behind_are_finished_before_the_others() {
    // Dense input in time order over eight days, fewer partitions than `max_open_partitions`:
    // each day's file stays open until memory runs short. An open file holds its columns'
    // compression state (zstd's context, ~0.56 MiB per column at level 1 once its pages pass
    // 256 kB), which the bound must count; the days the input has left go first, and every day
    // still ends up in one file.
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        partition: Partitioning::Day.into(),
        sort_buffer_bytes: 256 << 10,
        memory_bytes: 12 << 20,
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
    const DAY: i64 = 24 * HOUR;
    let (days, batches, rows) = (8i64, 10i64, 4000i64);
    for d in 0..days {
        for b in 0..batches {
            let ts: Vec<Option<i64>> = (0..rows)
                .map(|i| Some(T0 + d * DAY + (b * rows + i) * 1000))
                .collect();
            w.batch(&conn(), batch(&ts, false)).unwrap();
        }
    }
    // Six with the codecs counted, three without (2026-12-06).
    let early = published(dir.path());
    assert!(
        early >= 5,
        "{early} of the {days} days published before the end: the days left behind were \
         kept open"
    );
    let s = w.finish().unwrap();
    let t = &s.tables[&conn()];
    assert_eq!(t.rows_written, (days * batches * rows) as u64);
    assert_eq!(t.files, days as u64, "one file per day");
    assert_eq!(t.memory_note, None);
}

#[test]
fn a_file_whose_codecs_alone_exceed_the_memory_bound_is_noted() {
    // zstd level 19 keeps several MiB of context per column once its pages reach a few hundred
    // kB (17 MiB for 1 MiB pages): three such columns are more than half of a 16 MiB bound. The
    // import still writes every row, and says why its files are smaller than usual and what to
    // change.
    let dir = tempfile::tempdir().unwrap();
    let cfg = WriterConfig {
        partition: Partitioning::Day.into(),
        codec: Codec::Zstd,
        level: Some(19),
        sort_buffer_bytes: 256 << 10,
        memory_bytes: 16 << 20,
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir.path(), cfg).unwrap();
    let ts: Vec<Option<i64>> = (0..20_000).map(|i| Some(T0 + i * 1000)).collect();
    for chunk in ts.chunks(4000) {
        w.batch(&conn(), batch(chunk, false)).unwrap();
    }
    let s = w.finish().unwrap();
    let t = &s.tables[&conn()];
    assert_eq!(t.rows_written, 20_000);
    let note = t
        .memory_note
        .as_deref()
        .expect("a note on the codecs' memory");
    assert!(
        note.contains("zstd level 19 can hold up to")
            && note.contains("more than half of --memory (16.8 MB)")
            && note.contains("a lower --level or a larger --memory"),
        "{note}"
    );
    assert!(s
        .to_string()
        .contains(&format!("note: table zeek.conn: {note}")));
    let files = catalog::data_files(&dir.path().join("zeek.conn")).unwrap();
    let rows: usize = files.iter().map(|f| read_ts(&f.path).len()).sum();
    assert_eq!(rows, 20_000);
}
