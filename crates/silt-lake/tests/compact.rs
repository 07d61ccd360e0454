//! Compaction end to end on a lake of many small files (as `silt serve` makes): every row is kept
//! exactly once with its values, outputs are sorted and carry the same metadata as a fresh
//! import, schema changes between the small files are merged, files of an import still in flight
//! and files younger than `older_than` are left alone, the target size splits a partition.

mod common;

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arrow::array::{Array, Int64Array, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::file::properties::ReaderProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::serialized_reader::ReadOptionsBuilder;
use silt_core::{meta, Emit, TableName};
use silt_lake::compact::{compact, CompactOptions, GroupResult};
use silt_lake::layout::data_files;
use silt_lake::{LakeWriter, Partitioning, StoreKind, WriterConfig};

const T0: i64 = 1_521_910_800_000_000; // 2018-03-24T17:00:00Z

fn schema(extra: bool) -> SchemaRef {
    common::conn_schema(extra)
}

/// Rows `first..first+n`: times spread over two hours and shuffled a little, so that flushes
/// overlap in time (late rows) like real streams.
fn batch(first: i64, n: i64, extra: bool) -> RecordBatch {
    let ts: Vec<i64> = (first..first + n)
        .map(|i| T0 + (i * 7919 % 7200) * 1_000_000 + i)
        .collect();
    let mut cols: Vec<Arc<dyn Array>> = vec![
        Arc::new(TimestampMicrosecondArray::from(ts.clone()).with_timezone("UTC")),
        Arc::new(StringArray::from_iter_values(
            (first..first + n).map(|i| format!("C{i}")),
        )),
        Arc::new(Int64Array::from_iter_values(first..first + n)),
    ];
    if extra {
        cols.push(Arc::new(StringArray::from_iter_values(
            (first..first + n).map(|i| format!("x{i}")),
        )));
    }
    RecordBatch::try_new(schema(extra), cols).unwrap()
}

fn conn() -> TableName {
    TableName::new("zeek", "conn")
}

/// A lake of `flushes` small files per partition (two hour partitions), the later half with an
/// extra column.
fn small_files_lake(dir: &Path, store: StoreKind, flushes: i64) {
    let cfg = WriterConfig {
        partition: Partitioning::Hour.into(),
        store,
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(dir, cfg).unwrap();
    for f in 0..flushes {
        w.batch(&conn(), batch(f * 100, 100, f >= flushes / 2))
            .unwrap();
        w.commit(SystemTime::now()).unwrap();
    }
    w.finish().unwrap();
}

/// One row: (n, uid, ts, extra).
type Row = (i64, String, i64, Option<String>);

/// Every row of the table, sorted by n; and the files read.
fn rows(lake: &Path) -> (Vec<Row>, usize) {
    let files = data_files(&lake.join("zeek.conn")).unwrap();
    let mut out = Vec::new();
    for f in &files {
        for b in read(&f.path, f.store) {
            let n = b.column_by_name("n").unwrap();
            let n = n.as_any().downcast_ref::<Int64Array>().unwrap();
            let uid = b.column_by_name("uid").unwrap();
            let uid = uid.as_any().downcast_ref::<StringArray>().unwrap();
            let ts = b.column_by_name("ts").unwrap();
            let ts = ts
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .unwrap();
            let extra = b.column_by_name("extra");
            let extra = extra
                .as_ref()
                .map(|e| e.as_any().downcast_ref::<StringArray>().unwrap());
            for i in 0..b.num_rows() {
                out.push((
                    n.value(i),
                    uid.value(i).to_string(),
                    ts.value(i),
                    extra.and_then(|e| e.is_valid(i).then(|| e.value(i).to_string())),
                ));
            }
        }
    }
    out.sort();
    (out, files.len())
}

fn read(path: &Path, store: StoreKind) -> Vec<RecordBatch> {
    let f = File::open(path).unwrap();
    match store {
        StoreKind::Parquet => ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap()
            .map(Result::unwrap)
            .collect(),
        StoreKind::Feather => arrow::ipc::reader::FileReader::try_new(f, None)
            .unwrap()
            .map(Result::unwrap)
            .collect(),
    }
}

fn is_sorted_by_ts(path: &Path, store: StoreKind) -> bool {
    let ts: Vec<i64> = read(path, store)
        .iter()
        .flat_map(|b| {
            let c = b.column_by_name("ts").unwrap();
            c.as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .unwrap()
                .values()
                .to_vec()
        })
        .collect();
    ts.windows(2).all(|w| w[0] <= w[1])
}

#[test]
fn merges_small_files_keeping_every_row_once() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path();
    small_files_lake(lake, StoreKind::Parquet, 30);
    let (before, files_before) = rows(lake);
    assert_eq!(before.len(), 3000);
    assert!(files_before >= 40, "{files_before} files");

    let mut seen = 0;
    let rep = compact(lake, &CompactOptions::default(), &mut |_: &GroupResult| {
        seen += 1
    })
    .unwrap();
    assert_eq!(rep.failed(), 0, "{:?}", rep.groups);
    assert_eq!(rep.groups.len(), 2, "one group per hour partition");
    assert_eq!(seen, 2);
    assert_eq!(rep.groups.iter().map(|g| g.rows).sum::<u64>(), 3000);

    let (after, files_after) = rows(lake);
    assert_eq!(files_after, 2);
    assert_eq!(after, before, "same rows, each once, same values");
    // The inputs are gone from disk too (other engines' globs see the same), the outputs are
    // sorted, say so in their metadata, and keep bloom filters and the page index.
    for f in data_files(&lake.join("zeek.conn")).unwrap() {
        assert!(is_sorted_by_ts(&f.path, f.store));
        let r = SerializedFileReader::new_with_options(
            File::open(&f.path).unwrap(),
            ReadOptionsBuilder::new()
                .with_page_index()
                .with_reader_properties(
                    ReaderProperties::builder()
                        .set_read_bloom_filter(true)
                        .build(),
                )
                .build(),
        )
        .unwrap();
        let md = r.metadata();
        assert!(md
            .row_group(0)
            .sorting_columns()
            .is_some_and(|c| !c.is_empty()));
        assert!(md.offset_index().is_some(), "page index");
        let uid = md
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .position(|c| c.path().string() == "uid")
            .unwrap();
        let first_uid = read(&f.path, f.store)[0]
            .column_by_name("uid")
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .value(0)
            .to_string();
        let bf = r
            .get_row_group(0)
            .unwrap()
            .get_column_bloom_filter(uid)
            .cloned();
        let kv = md.file_metadata().key_value_metadata().cloned();
        let bf = bf.unwrap_or_else(|| panic!("bloom filter on uid: {kv:?}"));
        assert!(bf.check(first_uid.as_str()));
        assert!(!bf.check("no such uid"));
        // The embedded schema is the merged one (the extra column of the later files).
        let b = ParquetRecordBatchReaderBuilder::try_new_with_options(
            File::open(&f.path).unwrap(),
            ArrowReaderOptions::new(),
        )
        .unwrap();
        assert!(b.schema().field_with_name("extra").is_ok());
        assert_eq!(b.schema().metadata().get(meta::TIME_COLUMN).unwrap(), "ts");
    }
    let on_disk = walk_files(&lake.join("zeek.conn"));
    assert_eq!(on_disk, 2, "inputs removed from disk");

    // Nothing left to do the second time.
    let rep = compact(lake, &CompactOptions::default(), &mut |_: &GroupResult| {}).unwrap();
    assert!(rep.groups.is_empty());
}

fn walk_files(d: &Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(d).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            n += walk_files(&e.path());
        } else {
            n += 1;
        }
    }
    n
}

#[test]
fn feather_tables_compact_to_feather() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path();
    small_files_lake(lake, StoreKind::Feather, 10);
    let (before, n) = rows(lake);
    assert!(n >= 10);
    let rep = compact(lake, &CompactOptions::default(), &mut |_: &GroupResult| {}).unwrap();
    assert_eq!(rep.failed(), 0, "{:?}", rep.groups);
    let (after, n) = rows(lake);
    assert_eq!(n, 2);
    assert_eq!(after, before);
    for f in data_files(&lake.join("zeek.conn")).unwrap() {
        assert_eq!(f.store, StoreKind::Feather);
        assert!(is_sorted_by_ts(&f.path, f.store));
    }
}

#[test]
fn target_size_in_flight_files_and_age_are_respected() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path();
    small_files_lake(lake, StoreKind::Parquet, 30);
    let (before, files_before) = rows(lake);

    // Younger than --older-than: untouched.
    let young = CompactOptions {
        older_than: Duration::from_secs(3600),
        ..CompactOptions::default()
    };
    let rep = compact(lake, &young, &mut |_: &GroupResult| {}).unwrap();
    assert!(rep.groups.is_empty());

    // A dry run plans and changes nothing.
    let dry = CompactOptions {
        dry_run: true,
        ..CompactOptions::default()
    };
    let rep = compact(lake, &dry, &mut |_: &GroupResult| {}).unwrap();
    assert_eq!(rep.groups.len(), 2);
    assert_eq!(rows(lake).1, files_before);

    // A file of an import that is still running (its journal is locked) is left alone.
    let files = data_files(&lake.join("zeek.conn")).unwrap();
    let live = files[0].path.clone();
    let log = silt_lake::imports::ImportLog::open(lake).unwrap();
    let run = log.begin().unwrap();
    std::fs::write(
        lake.join(format!("_silt/imports/{}.journal", run.id)),
        format!("{}\n", live.strip_prefix(lake).unwrap().display()),
    )
    .unwrap();
    // A small target splits each partition into several groups.
    let total: u64 = files.iter().map(|f| f.bytes).sum();
    let small = CompactOptions {
        target_bytes: total / 6,
        ..CompactOptions::default()
    };
    let rep = compact(lake, &small, &mut |_: &GroupResult| {}).unwrap();
    assert_eq!(rep.failed(), 0);
    assert_eq!(rep.in_flight, 1);
    assert_eq!(rep.dead_import_files, 0);
    assert!(rep.groups.len() >= 4, "{} groups", rep.groups.len());
    for g in &rep.groups {
        assert!(g.bytes_in <= small.target_bytes, "{g:?}");
        assert_eq!(g.error, None);
    }
    assert!(live.exists(), "the live import's file is untouched");
    let (after, files_after) = rows(lake);
    assert!(files_after < files_before);
    assert_eq!(after, before);
    drop(run);
}
