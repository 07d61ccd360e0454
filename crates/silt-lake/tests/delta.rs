//! Tables with a Delta Lake log (`--table-format delta`, `silt_lake::delta`): the log names
//! exactly the files silt's readers see after every import, a dead run's recovery, compaction,
//! retention and vacuum; a plain Hive table is converted when a Delta run first writes to it;
//! columns only ever null never reach a Delta table's files; a type change is refused.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arrow::array::{Array, Int64Array, NullArray, StringArray, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use silt_core::{Emit, TableName};
use silt_lake::compact::{compact, CompactOptions, GroupResult};
use silt_lake::delta::DeltaLog;
use silt_lake::imports::ImportLog;
use silt_lake::layout::data_files;
use silt_lake::publish::DirectoryPublisher;
use silt_lake::retain::{retain, RetainOptions};
use silt_lake::vacuum::{vacuum, VacuumOptions};
use silt_lake::{LakeWriter, Partitioning, TableFormat, WriterConfig};

const T0: i64 = 1_521_910_800_000_000; // 2018-03-24T17:00:00Z

fn conn() -> TableName {
    TableName::new("zeek", "conn")
}

/// Rows `first..first+n` over two hours (17:00 and 18:00), with `extra` a later column.
fn batch(first: i64, n: i64, extra: bool) -> RecordBatch {
    let ts: Vec<i64> = (first..first + n)
        .map(|i| T0 + (i * 7919 % 7200) * 1_000_000 + i)
        .collect();
    let mut cols: Vec<Arc<dyn Array>> = vec![
        Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
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
    RecordBatch::try_new(common::conn_schema(extra), cols).unwrap()
}

/// `n` with another type than [`batch`]'s.
fn batch_with_float_n(first: i64, n: i64) -> RecordBatch {
    let b = batch(first, n, false);
    let schema = Schema::new_with_metadata(
        vec![
            b.schema().field(0).clone(),
            b.schema().field(1).clone(),
            Field::new("n", DataType::Float64, true),
        ],
        b.schema().metadata().clone(),
    );
    let n: arrow::array::Float64Array = (first..first + n).map(|i| Some(i as f64)).collect();
    RecordBatch::try_new(
        Arc::new(schema),
        vec![b.column(0).clone(), b.column(1).clone(), Arc::new(n)],
    )
    .unwrap()
}

/// A batch of `app.events` whose `note` column was only ever null (Arrow `Null`).
fn events(n: usize) -> (TableName, RecordBatch) {
    let b = batch(0, n as i64, false);
    let mut fields: Vec<Field> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("note", DataType::Null, true));
    let mut cols = b.columns().to_vec();
    cols.push(Arc::new(NullArray::new(n)));
    let schema = Schema::new_with_metadata(fields, b.schema().metadata().clone());
    (
        TableName::new("app", "events"),
        RecordBatch::try_new(Arc::new(schema), cols).unwrap(),
    )
}

fn cfg(format: TableFormat) -> WriterConfig {
    WriterConfig {
        partition: Partitioning::Hour.into(),
        table_format: format,
        ..WriterConfig::default()
    }
}

/// One import run (journaled, as `silt import` does) of `batches`, finished, or left to die
/// after its files are committed to the Delta logs when `die` is set. Returns its files
/// relative to the lake.
fn run(
    lake: &Path,
    format: TableFormat,
    batches: &[(TableName, RecordBatch)],
    die: bool,
) -> anyhow::Result<Vec<String>> {
    let log = ImportLog::open(lake)?.with_table_format(format);
    let r = log.begin()?;
    let mut w = LakeWriter::new(lake, cfg(format))?
        .with_publisher(r.publisher(Box::new(DirectoryPublisher))?);
    for (t, b) in batches {
        w.batch(t, b.clone())?;
    }
    let s = w.finish()?;
    let rels: Vec<String> = s
        .files
        .iter()
        .map(|f| {
            f.path
                .strip_prefix(lake)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    if die {
        // What the run had done when a crash stopped it just before recording itself as done.
        silt_lake::delta::commit_published(
            silt_lake::delta::Lake::Dir(lake),
            &rels,
            format == TableFormat::Delta,
            &HashSet::new(),
            "test",
        )?;
        drop(r);
    } else {
        r.finish(vec![], &s.files)?;
    }
    Ok(rels)
}

/// The files on disk that silt's readers see, relative to the table directory.
fn listed(lake: &Path, table: &str) -> Vec<String> {
    let dir = lake.join(table);
    let mut v: Vec<String> = data_files(&dir)
        .unwrap()
        .into_iter()
        .map(|f| {
            f.path
                .strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    v.sort();
    v
}

fn log_of(lake: &Path, table: &str) -> DeltaLog {
    DeltaLog::open(&lake.join(table))
        .unwrap()
        .expect("the table has a Delta log")
}

/// The log names exactly the listed files and holds `rows` records.
fn assert_log_true(lake: &Path, table: &str, rows: u64) {
    let log = log_of(lake, table);
    assert_eq!(log.files().unwrap(), listed(lake, table), "{table}");
    assert_eq!(log.num_records().unwrap(), Some(rows), "{table}");
}

#[test]
fn imports_commit_their_files_and_recovery_takes_a_dead_runs_files_out() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path();
    run(
        lake,
        TableFormat::Delta,
        &[(conn(), batch(0, 100, false)), events(50)],
        false,
    )
    .unwrap();
    assert_log_true(lake, "zeek.conn", 100);
    assert_log_true(lake, "app.events", 50);
    // Two hour partitions, as Delta partition columns.
    let log = log_of(lake, "zeek.conn");
    let names: Vec<String> = log
        .schema()
        .unwrap()
        .fields()
        .map(|f| f.name().to_string())
        .collect();
    assert_eq!(names, ["ts", "uid", "n", "dt", "hour"]);
    // The column only ever null is in neither the files nor the log.
    let events_log = log_of(lake, "app.events");
    assert!(events_log.schema().unwrap().field("note").is_none());
    for f in data_files(&lake.join("app.events")).unwrap() {
        let file = std::fs::File::open(&f.path).unwrap();
        let md = parquet::arrow::arrow_reader::ArrowReaderMetadata::load(&file, Default::default())
            .unwrap();
        assert!(md.schema().field_with_name("note").is_err());
    }

    // A later run without --table-format delta still commits (the table has a log), and its new
    // column widens the table's schema.
    let v = log.version().unwrap();
    run(
        lake,
        TableFormat::Hive,
        &[(conn(), batch(100, 100, true))],
        false,
    )
    .unwrap();
    assert_log_true(lake, "zeek.conn", 200);
    let log = log_of(lake, "zeek.conn");
    assert_eq!(
        log.version().unwrap(),
        v + 1,
        "one commit per run and table"
    );
    assert!(log.schema().unwrap().field("extra").is_some());

    // A run that died after its commit: recovery takes its files out of the log, then deletes
    // them (its inputs are imported again).
    let dead = run(
        lake,
        TableFormat::Hive,
        &[(conn(), batch(200, 100, false))],
        true,
    )
    .unwrap();
    assert_eq!(log_of(lake, "zeek.conn").num_records().unwrap(), Some(300));
    let rec = ImportLog::open(lake).unwrap().recover().unwrap();
    assert_eq!(rec.files, dead.len());
    assert_log_true(lake, "zeek.conn", 200);

    // A column whose type changes cannot be committed: the run fails and says which table.
    let err = run(
        lake,
        TableFormat::Hive,
        &[(conn(), batch_with_float_n(300, 10))],
        false,
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("zeek.conn"), "{err:#}");
    ImportLog::open(lake).unwrap().recover().unwrap();
    assert_log_true(lake, "zeek.conn", 200);
}

#[test]
fn a_hive_table_is_converted_when_a_delta_run_first_writes_to_it() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path();
    run(
        lake,
        TableFormat::Hive,
        &[(conn(), batch(0, 100, false))],
        false,
    )
    .unwrap();
    assert!(DeltaLog::open(&lake.join("zeek.conn")).unwrap().is_none());
    run(
        lake,
        TableFormat::Delta,
        &[(conn(), batch(100, 100, false))],
        false,
    )
    .unwrap();
    assert_log_true(lake, "zeek.conn", 200);
    // Spark, Trino and Athena are told to read it as a Delta table; DuckDB reads its
    // directories.
    use silt_lake::ddl::{create_statement, table_layout, DdlOptions, Dialect};
    let layout = table_layout(lake, &conn()).unwrap();
    let stmt_at = |dialect, location: Option<&str>, name: Option<&str>| {
        create_statement(
            &layout,
            &DdlOptions {
                dialect,
                location: location.map(str::to_string),
                name: name.map(str::to_string),
            },
        )
        .unwrap()
    };
    let stmt = |dialect| stmt_at(dialect, None, None);
    let spark = stmt(Dialect::Spark);
    assert!(
        spark.contains("USING DELTA") && spark.contains("/zeek.conn'"),
        "{spark}"
    );
    assert!(!spark.contains("MSCK"), "{spark}");
    let trino = stmt(Dialect::Trino);
    let location = format!(
        "table_location => 'file://{}/zeek.conn'",
        std::fs::canonicalize(lake).unwrap().display()
    );
    assert!(
        trino.contains(
            "CALL system.register_table(schema_name => CURRENT_SCHEMA, table_name => 'zeek_conn', "
        ) && trino.contains(&location)
            && !trino.contains("external_location"),
        "{trino}"
    );
    let trino = stmt_at(Dialect::Trino, None, Some("sec.conn"));
    assert!(
        trino.contains("schema_name => 'sec', table_name => 'conn'"),
        "{trino}"
    );
    let athena = stmt_at(Dialect::Athena, Some("s3://b/lake/"), None);
    assert_eq!(
        athena,
        "CREATE EXTERNAL TABLE IF NOT EXISTS `zeek_conn`\nLOCATION 's3://b/lake/zeek.conn/'\nTBLPROPERTIES ('table_type' = 'DELTA');\n"
    );
    // Not `**`: the log's Parquet checkpoints are no data files.
    let duck = stmt(Dialect::DuckDb);
    assert!(
        duck.contains("/zeek.conn/dt=*/hour=*/*.parquet'") && !duck.contains("**"),
        "{duck}"
    );
}

#[test]
fn compaction_retention_and_vacuum_keep_the_log_true() {
    let d = tempfile::tempdir().unwrap();
    let lake = d.path();
    for f in 0..6 {
        run(
            lake,
            TableFormat::Delta,
            &[(conn(), batch(f * 100, 100, f >= 3))],
            false,
        )
        .unwrap();
    }
    assert_eq!(listed(lake, "zeek.conn").len(), 12, "two hours per run");
    let rep = compact(lake, &CompactOptions::default(), &mut |_: &GroupResult| {}).unwrap();
    assert_eq!(rep.failed(), 0, "{:?}", rep.groups);
    assert_eq!(listed(lake, "zeek.conn").len(), 2);
    assert_log_true(lake, "zeek.conn", 600);

    // Retention one hour after 18:00 ended drops hour 17, keeps hour 18.
    let now = SystemTime::UNIX_EPOCH
        + Duration::from_micros(T0 as u64)
        + Duration::from_secs(2 * 3600 + 1800);
    let opts = RetainOptions {
        keep: Some(Duration::from_secs(3600)),
        per_table: BTreeMap::new(),
        dry_run: false,
    };
    let rep = retain(lake, &opts, now).unwrap();
    assert_eq!(rep.dropped.len(), 1, "{:?}", rep.dropped);
    let left = listed(lake, "zeek.conn");
    assert_eq!(left.len(), 1);
    assert!(left[0].contains("hour=18"), "{left:?}");
    let rows = log_of(lake, "zeek.conn").num_records().unwrap().unwrap();
    assert!(rows > 0 && rows < 600, "{rows}");
    assert_log_true(lake, "zeek.conn", rows);

    // A file the log does not name (another tool's, or one whose commit was lost) goes with
    // vacuum once past the grace period; the table's own files stay.
    let stray = lake
        .join("zeek.conn")
        .join(&left[0])
        .with_file_name("stray.parquet");
    std::fs::copy(lake.join("zeek.conn").join(&left[0]), &stray).unwrap();
    // Recovery of an old replacement record whose output was replaced again since (its inputs
    // are gone from the log) commits nothing.
    let stray_rel = format!(
        "zeek.conn/{}",
        stray
            .strip_prefix(lake.join("zeek.conn"))
            .unwrap()
            .display()
    );
    let v = log_of(lake, "zeek.conn").version().unwrap();
    silt_lake::delta::commit_replacement(
        silt_lake::delta::Lake::Dir(lake),
        &stray_rel,
        &["zeek.conn/gone.parquet".to_string()],
        "test",
    )
    .unwrap();
    assert_eq!(log_of(lake, "zeek.conn").version().unwrap(), v);
    let opts = VacuumOptions {
        grace: Duration::from_secs(3600),
        dry_run: false,
    };
    let rep = vacuum(lake, &opts, SystemTime::now()).unwrap();
    assert_eq!(rep.unreferenced, 0, "within the grace period");
    let rep = vacuum(lake, &opts, SystemTime::now() + Duration::from_secs(7200)).unwrap();
    assert_eq!(rep.unreferenced, 1);
    assert!(!stray.exists());
    assert_log_true(lake, "zeek.conn", rows);
}
