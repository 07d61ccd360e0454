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

/// A column that is an integer in one partition's file and a list in another's (Suricata's
/// `vlan` across EVE versions): silt reads the unification, Spark and DuckDB refuse the table.
/// Compaction rewrites the disagreeing file, alone, with the table's types.
#[test]
fn files_whose_types_disagree_are_rewritten_with_the_tables_types() {
    use arrow::array::{ListArray, TimestampMicrosecondArray};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path();
    let cfg = WriterConfig {
        partition: Partitioning::Hour.into(),
        ..WriterConfig::default()
    };
    let md: std::collections::HashMap<String, String> =
        [(meta::TIME_COLUMN.to_string(), "ts".to_string())].into();
    let ts = |h: i64| -> Arc<dyn Array> {
        Arc::new(
            TimestampMicrosecondArray::from(vec![T0 + h * 3_600_000_000; 2]).with_timezone("UTC"),
        )
    };
    // Hour 0: vlan is an integer.
    let s1 = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("ts", silt_core::time::timestamp_type(), true),
            Field::new("vlan", DataType::Int64, true),
        ],
        md.clone(),
    ));
    let b1 = RecordBatch::try_new(s1, vec![ts(0), Arc::new(Int64Array::from(vec![5, 6]))]).unwrap();
    let mut w = LakeWriter::new(lake, cfg.clone()).unwrap();
    w.batch(&conn(), b1).unwrap();
    w.finish().unwrap();
    // Hour 1, another import: vlan is a list.
    let list = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
        Some(vec![Some(7), Some(8)]),
        Some(vec![Some(9)]),
    ]);
    let s2 = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("ts", silt_core::time::timestamp_type(), true),
            Field::new("vlan", list.data_type().clone(), true),
        ],
        md,
    ));
    let b2 = RecordBatch::try_new(s2, vec![ts(1), Arc::new(list)]).unwrap();
    let mut w = LakeWriter::new(lake, cfg).unwrap();
    w.batch(&conn(), b2).unwrap();
    w.finish().unwrap();

    let types = |lake: &Path| -> Vec<DataType> {
        data_files(&lake.join("zeek.conn"))
            .unwrap()
            .iter()
            .map(|f| {
                ParquetRecordBatchReaderBuilder::try_new(File::open(&f.path).unwrap())
                    .unwrap()
                    .schema()
                    .field_with_name("vlan")
                    .unwrap()
                    .data_type()
                    .clone()
            })
            .collect()
    };
    let before = types(lake);
    assert_eq!(before.len(), 2);
    assert_ne!(before[0], before[1]);
    let rep = compact(lake, &CompactOptions::default(), &mut |_: &GroupResult| {}).unwrap();
    assert_eq!(rep.failed(), 0, "{:?}", rep.groups);
    assert_eq!(
        rep.groups.len(),
        1,
        "only the disagreeing file: {:?}",
        rep.groups
    );
    assert_eq!(rep.groups[0].inputs, 1);
    let after = types(lake);
    assert_eq!(after.len(), 2);
    assert_eq!(after[0], after[1], "one type for every file");
    assert!(matches!(after[0], DataType::List(_)));
    // The integer became a one-element list, the values are all there.
    let mut values: Vec<Vec<i64>> = Vec::new();
    for f in data_files(&lake.join("zeek.conn")).unwrap() {
        for b in read(&f.path, f.store) {
            let l = b
                .column_by_name("vlan")
                .unwrap()
                .as_any()
                .downcast_ref::<ListArray>()
                .unwrap()
                .clone();
            for i in 0..l.len() {
                let v = l.value(i);
                let v = v.as_any().downcast_ref::<Int64Array>().unwrap();
                values.push(v.values().to_vec());
            }
        }
    }
    values.sort();
    assert_eq!(values, vec![vec![5], vec![6], vec![7, 8], vec![9]]);
    // A second run finds nothing to do.
    let rep = compact(lake, &CompactOptions::default(), &mut |_: &GroupResult| {}).unwrap();
    assert!(rep.groups.is_empty(), "{:?}", rep.groups);
}
