//! `--partition auto` (the default): a new table's time partitioning is chosen from the density
//! of its first rows, recorded in the lake, followed by later imports, and shown in the summary.
//!
//! The row-group target is set to 64 KiB so that the thresholds (a quarter of it, 16 KiB per
//! partition) are reached by small test tables; the densities below keep a wide margin for any
//! compressed row size between 3 and 39 bytes (these rows compress to about 10).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use silt_core::{meta, Emit, TableName};
use silt_lake::granularity::{self, TableRecord};
use silt_lake::{catalog, ImportSummary, LakeWriter, Partitioning, WriterConfig};

const HOUR: i64 = 3_600_000_000;
const T0: i64 = 1_521_910_800_000_000; // 2018-03-24T17:00:00Z

fn conn() -> TableName {
    TableName::new("zeek", "conn")
}

fn batch(ts: &[Option<i64>], timed: bool) -> RecordBatch {
    let mut fields = vec![
        Field::new("uid", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ];
    let mut cols: Vec<Arc<dyn Array>> = vec![
        Arc::new(StringArray::from_iter_values(
            ts.iter().map(|t| format!("C{}", t.unwrap_or(-1))),
        )),
        Arc::new(Int64Array::from_iter_values(
            ts.iter().map(|t| t.unwrap_or(0) % 1000),
        )),
    ];
    let mut md = HashMap::new();
    if timed {
        fields.insert(0, Field::new("ts", silt_core::time::timestamp_type(), true));
        cols.insert(
            0,
            Arc::new(TimestampMicrosecondArray::from(ts.to_vec()).with_timezone("UTC")),
        );
        md.insert(meta::TIME_COLUMN.to_string(), "ts".to_string());
    }
    RecordBatch::try_new(Arc::new(Schema::new_with_metadata(fields, md)), cols).unwrap()
}

/// `n` times evenly spread over `span` microseconds from T0.
fn spread(n: usize, span: i64) -> Vec<Option<i64>> {
    (0..n)
        .map(|i| Some(T0 + (span as i128 * i as i128 / n as i128) as i64))
        .collect()
}

fn cfg() -> WriterConfig {
    WriterConfig {
        row_group_bytes: 64 << 10,
        ..WriterConfig::default()
    }
}

/// Writes `ts` in batches of 5,000 rows with `cfg`.
fn import(root: &std::path::Path, cfg: WriterConfig, ts: &[Option<i64>]) -> ImportSummary {
    let mut w = LakeWriter::new(root, cfg).unwrap();
    for chunk in ts.chunks(5_000) {
        w.batch(&conn(), batch(chunk, true)).unwrap();
    }
    w.finish().unwrap()
}

/// The partition directories of the table's files (relative to the table).
fn dirs(root: &std::path::Path) -> Vec<String> {
    let table = root.join("zeek.conn");
    let mut v: Vec<String> = catalog::data_files(&table)
        .unwrap()
        .iter()
        .map(|f| {
            f.path
                .parent()
                .unwrap()
                .strip_prefix(&table)
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    v.dedup();
    v
}

fn record(root: &std::path::Path) -> TableRecord {
    granularity::read_record(root, &conn()).unwrap().unwrap()
}

#[test]
fn density_chooses_hour_day_month_or_none() {
    let cases = [
        // 20,000 rows in one hour: hour.
        (20_000, HOUR, Partitioning::Hour, "dt=2018-03-24/hour=17"),
        // 20,000 rows over two days (417 an hour): day.
        (20_000, 48 * HOUR, Partitioning::Day, "dt=2018-03-24"),
        // 20,000 rows over 60 days (14 an hour): month.
        (20_000, 60 * 24 * HOUR, Partitioning::Month, "month=2018-03"),
        // 100 rows over 1,000 days: one directory.
        (100, 1000 * 24 * HOUR, Partitioning::None, ""),
    ];
    for (n, span, want, first_dir) in cases {
        let d = tempfile::tempdir().unwrap();
        let s = import(d.path(), cfg(), &spread(n, span));
        let t = &s.tables[&conn()];
        assert_eq!(t.rows_written, n as u64, "{want}: every row written");
        assert_eq!(t.partitioning.as_deref(), Some(want.name()));
        let why = t.partition_choice.as_deref().unwrap();
        assert!(why.starts_with(&format!("{want} (auto: ~")), "{why}");
        let rec = record(d.path());
        assert_eq!(
            (rec.partitioning().unwrap(), rec.chosen_by.as_str()),
            (want, "auto")
        );
        let e = rec.estimate.unwrap();
        assert_eq!((e.rows, e.timed_rows), (n as u64, n as u64));
        // The estimate behind the choice is what the data says: n rows over the span (the
        // 1st..99th percentile of it, at least an hour).
        let expect_rate = n as f64 / (span as f64 / HOUR as f64).max(1.0);
        assert!(
            (e.rows_per_hour / expect_rate - 1.0).abs() < 0.05,
            "{want}: {} rows/hour, expected about {expect_rate}",
            e.rows_per_hour
        );
        assert!(
            (3.0..39.0).contains(&e.bytes_per_row),
            "{}",
            e.bytes_per_row
        );
        let ds = dirs(d.path());
        assert_eq!(ds[0], first_dir, "{want}: {ds:?}");
        // The summary says what was chosen and that it is recorded.
        let text = s.to_string();
        assert!(
            text.contains(&format!("new table zeek.conn: partitioned by {want} (auto")),
            "{text}"
        );
    }
}

#[test]
fn later_imports_follow_the_record() {
    let d = tempfile::tempdir().unwrap();
    // A sparse first import: month.
    import(d.path(), cfg(), &spread(20_000, 60 * 24 * HOUR));
    assert_eq!(record(d.path()).partition, "month");
    // A dense second import (which alone would be hour) follows the record.
    let s = import(d.path(), cfg(), &spread(20_000, HOUR));
    let t = &s.tables[&conn()];
    assert_eq!(t.partitioning.as_deref(), Some("month"));
    assert_eq!(t.partition_choice, None, "nothing chosen by this import");
    assert!(dirs(d.path()).iter().all(|p| p.starts_with("month=2018-")));
    // Asking for another granularity is refused with what to do.
    let mut w = LakeWriter::new(
        d.path(),
        WriterConfig {
            partition: Partitioning::Hour.into(),
            ..cfg()
        },
    )
    .unwrap();
    let e = w
        .batch(&conn(), batch(&spread(10, HOUR), true))
        .unwrap_err();
    let msg = format!("{e:#}");
    assert!(
        msg.contains("partitioned by month, not hour")
            && msg.contains("--partition month (or auto)"),
        "{msg}"
    );
}

/// The record keeps the format of the table's files; an import in another format is refused
/// with what to do (a table whose files mix Parquet and Feather is one that Spark, Trino, Athena
/// and a Parquet glob see only part of). A record from before the format was recorded takes
/// it from the table's files, and so does a lake without a record.
#[test]
fn later_imports_keep_the_table_s_file_format() {
    use silt_lake::StoreKind;
    let d = tempfile::tempdir().unwrap();
    let feather = || WriterConfig {
        store: StoreKind::Feather,
        ..cfg()
    };
    import(d.path(), feather(), &spread(1_000, HOUR));
    assert_eq!(record(d.path()).store.as_deref(), Some("feather"));
    import(d.path(), feather(), &spread(1_000, HOUR));
    let refused = |root: &std::path::Path, cfg: WriterConfig| {
        let mut w = LakeWriter::new(root, cfg).unwrap();
        let e = w
            .batch(&conn(), batch(&spread(10, HOUR), true))
            .unwrap_err();
        format!("{e:#}")
    };
    let msg = refused(d.path(), cfg());
    assert!(
        msg.contains("stored as feather files, not parquet")
            && msg.contains("import with --store feather"),
        "{msg}"
    );
    let files = catalog::data_files(&d.path().join("zeek.conn")).unwrap();
    assert_eq!(files.len(), 2);
    assert!(files.iter().all(|f| f.store == StoreKind::Feather));

    // A record written before silt recorded the format: the files say, and the record learns it.
    let mut old = record(d.path());
    old.store = None;
    granularity::write_record(d.path(), &old).unwrap();
    assert!(refused(d.path(), cfg()).contains("stored as feather files"));
    assert_eq!(record(d.path()).store.as_deref(), Some("feather"));

    // No record at all: the files say, and nothing is written.
    std::fs::remove_file(granularity::record_path(d.path(), &conn())).unwrap();
    assert!(refused(d.path(), cfg()).contains("stored as feather files"));
    import(d.path(), feather(), &spread(1_000, HOUR));
    assert_eq!(
        catalog::data_files(&d.path().join("zeek.conn"))
            .unwrap()
            .len(),
        3
    );

    // The other way round: a Parquet table refuses Feather.
    let p = tempfile::tempdir().unwrap();
    import(p.path(), cfg(), &spread(1_000, HOUR));
    assert_eq!(record(p.path()).store.as_deref(), Some("parquet"));
    let msg = refused(p.path(), feather());
    assert!(msg.contains("import with --store parquet"), "{msg}");
}

#[test]
fn a_given_granularity_is_recorded_too() {
    let d = tempfile::tempdir().unwrap();
    let s = import(
        d.path(),
        WriterConfig {
            partition: Partitioning::Day.into(),
            ..cfg()
        },
        &spread(1_000, HOUR),
    );
    assert_eq!(s.tables[&conn()].partitioning.as_deref(), Some("day"));
    let rec = record(d.path());
    assert_eq!(
        (rec.partition.as_str(), rec.chosen_by.as_str()),
        ("day", "user")
    );
    // auto then follows it.
    let s = import(d.path(), cfg(), &spread(1_000, 2000 * 24 * HOUR));
    assert_eq!(s.tables[&conn()].partitioning.as_deref(), Some("day"));
}

#[test]
fn lakes_without_a_record_keep_their_directories() {
    let d = tempfile::tempdir().unwrap();
    import(
        d.path(),
        WriterConfig {
            partition: Partitioning::Hour.into(),
            ..cfg()
        },
        &spread(100, HOUR),
    );
    // A lake written before records existed: only the directories tell.
    std::fs::remove_file(granularity::record_path(d.path(), &conn())).unwrap();
    let s = import(d.path(), cfg(), &spread(100, 1000 * 24 * HOUR));
    assert_eq!(s.tables[&conn()].partitioning.as_deref(), Some("hour"));
    assert!(dirs(d.path()).iter().all(|p| p.starts_with("dt=")));
}

#[test]
fn no_time_column_or_no_times_means_no_partitions() {
    let d = tempfile::tempdir().unwrap();
    let mut w = LakeWriter::new(d.path(), cfg()).unwrap();
    w.batch(&conn(), batch(&spread(100, HOUR), false)).unwrap();
    let s = w.finish().unwrap();
    assert_eq!(
        s.tables[&conn()].partition_choice.as_deref(),
        Some("none (auto: no time column)")
    );
    assert_eq!(dirs(d.path()), [""]);

    let d = tempfile::tempdir().unwrap();
    let s = import(d.path(), cfg(), &[None; 50]);
    assert_eq!(
        s.tables[&conn()].partition_choice.as_deref(),
        Some("none (auto: no event times)")
    );
    assert_eq!(dirs(d.path()), [""]);
}

#[test]
fn the_choice_is_made_mid_stream_without_losing_or_reordering_rows() {
    // More rows than the writer looks at before choosing, in shuffled order within the hour: the
    // held-back rows and the rest end up sorted in the same files.
    let d = tempfile::tempdir().unwrap();
    let n = granularity::PROBE_ROWS + 30_000;
    let mut ts = spread(n, HOUR);
    // A fixed permutation: reverse every block of 7 rows.
    for c in ts.chunks_mut(7) {
        c.reverse();
    }
    let s = import(d.path(), cfg(), &ts);
    let t = &s.tables[&conn()];
    assert_eq!(t.partitioning.as_deref(), Some("hour"));
    assert_eq!((t.events, t.rows_written), (n as u64, n as u64));
    let files = catalog::data_files(&d.path().join("zeek.conn")).unwrap();
    let mut seen = 0usize;
    for f in files {
        let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&f.path).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        let mut last = i64::MIN;
        for b in r {
            let b = b.unwrap();
            let a = b
                .column_by_name("ts")
                .unwrap()
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .unwrap()
                .clone();
            for v in a.iter().flatten() {
                assert!(v >= last, "{} is not sorted", f.path.display());
                last = v;
                seen += 1;
            }
        }
    }
    assert_eq!(seen, n);
}
