//! `silt_lake::ddl`: golden CREATE statements for a small hand-built lake in all four dialects,
//! and DuckDB executing its statement and counting what silt wrote (via `scripts/pyenv.sh`).
//!
//! Golden files live in `tests/ddl/`; the lake's absolute path is written there as `$LAKE`.
//! `SILT_BLESS=1 cargo test -p silt-lake --test ddl` rewrites them (review the diff!).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use arrow::array::{
    BooleanArray, Decimal128Array, Float64Array, ListBuilder, StringArray, StringBuilder,
    StructArray, TimestampMicrosecondArray, UInt16Array, UInt64Array, UInt8Array,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use silt_core::{meta, Emit, TableName};
use silt_lake::ddl::{self, DdlOptions, Dialect};
use silt_lake::{LakeWriter, Partitioning, StoreKind, WriterConfig};

const HOUR: i64 = 3_600_000_000;
/// 2018-03-24T07:00:00Z: the first partition is `hour=07` (a leading zero).
const T0: i64 = 1_521_874_800_000_000;

fn id_fields() -> Fields {
    vec![
        Field::new("orig_h", DataType::Utf8, true),
        Field::new("orig_p", DataType::UInt16, true),
    ]
    .into()
}

fn schema() -> SchemaRef {
    let fields = vec![
        Field::new("ts", silt_core::time::timestamp_type(), true),
        Field::new("uid", DataType::Utf8, true),
        Field::new("id", DataType::Struct(id_fields()), true),
        Field::new("orig_bytes", DataType::UInt64, true),
        Field::new("duration", DataType::Decimal128(18, 6), true),
        Field::new("local_orig", DataType::Boolean, true),
        Field::new_list(
            "tunnel_parents",
            Field::new("item", DataType::Utf8, true),
            true,
        ),
        Field::new("score", DataType::Float64, true),
        Field::new("ttl", DataType::UInt8, true),
    ];
    let md: HashMap<String, String> = [(meta::TIME_COLUMN.to_string(), "ts".to_string())].into();
    Arc::new(Schema::new_with_metadata(fields, md))
}

/// Rows: `hours[i]` hours after T0 plus i seconds (None = null time).
fn batch(hours: &[Option<i64>]) -> RecordBatch {
    let n = hours.len();
    let ts: Vec<Option<i64>> = hours
        .iter()
        .enumerate()
        .map(|(i, h)| h.map(|h| T0 + h * HOUR + i as i64 * 1_000_000))
        .collect();
    let id = StructArray::new(
        id_fields(),
        vec![
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("10.0.0.{}", i % 7)),
            )),
            Arc::new(UInt16Array::from_iter_values(
                (0..n).map(|i| 1000 + i as u16),
            )),
        ],
        None,
    );
    let mut tp = ListBuilder::new(StringBuilder::new());
    for i in 0..n {
        if i % 3 == 0 {
            tp.values().append_value(format!("T{i}"));
            tp.append(true);
        } else {
            tp.append(false);
        }
    }
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("C{i}")),
            )),
            Arc::new(id),
            Arc::new(UInt64Array::from_iter_values((0..n).map(|i| i as u64 * 10))),
            Arc::new(
                Decimal128Array::from_iter_values((0..n).map(|i| i as i128 * 1_500_000))
                    .with_precision_and_scale(18, 6)
                    .unwrap(),
            ),
            Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 2 == 0)))),
            Arc::new(tp.finish()),
            Arc::new(Float64Array::from_iter_values(
                (0..n).map(|i| i as f64 / 4.0),
            )),
            Arc::new(UInt8Array::from_iter_values((0..n).map(|i| (i % 64) as u8))),
        ],
    )
    .unwrap()
}

/// The rows of the test lake: 5 at 07:xx on the 24th, 3 at 17:xx, 4 on the 25th at 00:xx,
/// 1 with a null time. Returned with the counts per (dt, hour) that the tests expect.
fn hours() -> Vec<Option<i64>> {
    let mut h = vec![Some(0); 5];
    h.extend([Some(10); 3]);
    h.extend([Some(17); 4]);
    h.push(None);
    h
}
const ROWS: i64 = 13;

fn build_lake(root: &Path, partition: Partitioning, store: StoreKind) {
    let cfg = WriterConfig {
        partition: partition.into(),
        store,
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(root, cfg).unwrap();
    w.batch(&TableName::new("zeek", "conn"), batch(&hours()))
        .unwrap();
    w.finish().unwrap();
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ddl")
}

fn statement(lake: &Path, dialect: Dialect, location: Option<&str>) -> String {
    let layout = ddl::table_layout(lake, &TableName::new("zeek", "conn")).unwrap();
    let sql = ddl::create_statement(
        &layout,
        &DdlOptions {
            dialect,
            location: location.map(str::to_string),
            name: None,
        },
    )
    .unwrap();
    let abs = std::fs::canonicalize(lake).unwrap();
    sql.replace(&abs.display().to_string(), "$LAKE")
}

fn check_golden(name: &str, got: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("SILT_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with SILT_BLESS=1 to create)", path.display()));
    assert_eq!(got, want, "golden {} differs", path.display());
}

#[test]
fn golden_statements_for_all_dialects() {
    let dir = tempfile::tempdir().unwrap();
    build_lake(dir.path(), Partitioning::Hour, StoreKind::Parquet);
    check_golden(
        "athena.sql",
        &statement(dir.path(), Dialect::Athena, Some("s3://bucket/lake/")),
    );
    check_golden("trino.sql", &statement(dir.path(), Dialect::Trino, None));
    check_golden("spark.sql", &statement(dir.path(), Dialect::Spark, None));
    check_golden("duckdb.sql", &statement(dir.path(), Dialect::DuckDb, None));

    let day = tempfile::tempdir().unwrap();
    build_lake(day.path(), Partitioning::Day, StoreKind::Parquet);
    check_golden(
        "athena_day.sql",
        &statement(day.path(), Dialect::Athena, Some("s3://bucket/lake")),
    );
    let month = tempfile::tempdir().unwrap();
    build_lake(month.path(), Partitioning::Month, StoreKind::Parquet);
    check_golden(
        "athena_month.sql",
        &statement(month.path(), Dialect::Athena, Some("s3://bucket/lake")),
    );
    check_golden(
        "duckdb_month.sql",
        &statement(month.path(), Dialect::DuckDb, None),
    );
    let none = tempfile::tempdir().unwrap();
    build_lake(none.path(), Partitioning::None, StoreKind::Parquet);
    check_golden(
        "spark_none.sql",
        &statement(none.path(), Dialect::Spark, None),
    );
}

#[test]
fn projection_range_and_location_follow_the_lake() {
    let dir = tempfile::tempdir().unwrap();
    build_lake(dir.path(), Partitioning::Hour, StoreKind::Parquet);
    let layout = ddl::table_layout(dir.path(), &TableName::new("zeek", "conn")).unwrap();
    // Rows at 07:xx and 17:xx on the 24th and 00:xx on the 25th; the null partition is not a date.
    assert_eq!(
        layout.dt_range,
        Some(("2018-03-24".to_string(), "2018-03-25".to_string()))
    );
    let sql = statement(dir.path(), Dialect::Athena, Some("s3://b/p"));
    assert!(sql.contains("'projection.dt.range' = '2018-03-24,2018-03-25'"));
    assert!(
        sql.contains("'storage.location.template' = 's3://b/p/zeek.conn/dt=${dt}/hour=${hour}/'")
    );
    assert!(sql.contains("LOCATION 's3://b/p/zeek.conn/'"));
}

#[test]
fn clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    build_lake(dir.path(), Partitioning::Hour, StoreKind::Parquet);
    let layout = ddl::table_layout(dir.path(), &TableName::new("zeek", "conn")).unwrap();
    let opts = |d| DdlOptions {
        dialect: d,
        location: None,
        name: None,
    };
    let e = ddl::create_statement(&layout, &opts(Dialect::Athena)).unwrap_err();
    assert!(e.to_string().contains("--location"), "{e}");
    let e = ddl::table_layout(dir.path(), &TableName::new("zeek", "dns")).unwrap_err();
    assert!(e.to_string().contains("zeek.conn"), "{e}");

    let f = tempfile::tempdir().unwrap();
    build_lake(f.path(), Partitioning::Hour, StoreKind::Feather);
    let layout = ddl::table_layout(f.path(), &TableName::new("zeek", "conn")).unwrap();
    for d in [
        Dialect::Athena,
        Dialect::Trino,
        Dialect::Spark,
        Dialect::DuckDb,
    ] {
        let e = ddl::create_statement(&layout, &opts(d)).unwrap_err();
        assert!(e.to_string().contains("Feather"), "{e}");
    }
}

#[test]
fn schemas_are_unified_over_files() {
    let dir = tempfile::tempdir().unwrap();
    build_lake(dir.path(), Partitioning::Hour, StoreKind::Parquet);
    // A second import adds a column; the statement must have both the old and the new columns.
    let mut fields: Vec<Field> = schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new("extra", DataType::Utf8, true));
    let s2 = Arc::new(Schema::new_with_metadata(
        fields,
        schema().metadata().clone(),
    ));
    let b = batch(&[Some(0), Some(0)]);
    let mut cols = b.columns().to_vec();
    cols.push(Arc::new(StringArray::from(vec!["a", "b"])));
    let b2 = RecordBatch::try_new(s2, cols).unwrap();
    let mut w = LakeWriter::new(dir.path(), WriterConfig::default()).unwrap();
    w.batch(&TableName::new("zeek", "conn"), b2).unwrap();
    w.finish().unwrap();
    let sql = statement(dir.path(), Dialect::Spark, None);
    assert!(sql.contains("`extra` string"), "{sql}");
    assert!(sql.contains("`ttl` smallint"), "{sql}");
}

/// The venv python with duckdb, or None (the test then skips).
fn python() -> Option<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pyenv.sh");
    let out = Command::new("bash").arg(script).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let p = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!p.is_empty()).then_some(p)
}

#[test]
fn duckdb_executes_its_statement() {
    let Some(py) =
        python().or_else(|| silt_testkit::skip("duckdb (scripts/pyenv.sh) is not available"))
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    build_lake(dir.path(), Partitioning::Hour, StoreKind::Parquet);
    let layout = ddl::table_layout(dir.path(), &TableName::new("zeek", "conn")).unwrap();
    let sql = ddl::create_statement(
        &layout,
        &DdlOptions {
            dialect: Dialect::DuckDb,
            location: None,
            name: None,
        },
    )
    .unwrap();
    let sql_file = dir.path().join("create.sql");
    std::fs::write(&sql_file, &sql).unwrap();
    // Counts computed by DuckDB over the view; compared with what this test wrote.
    let code = r#"
import duckdb, sys
con = duckdb.connect()
con.execute(open(sys.argv[1]).read())
q = lambda s: con.execute(s).fetchall()
print(q("SELECT count(*) FROM zeek_conn")[0][0])
print(q("SELECT count(*) FROM zeek_conn WHERE dt = '2018-03-24' AND hour = 7")[0][0])
print(q("SELECT count(*) FROM zeek_conn WHERE dt = '2018-03-24' AND hour = 17")[0][0])
print(q("SELECT count(*) FROM zeek_conn WHERE dt = '2018-03-25' AND hour = 0")[0][0])
print(q("SELECT count(*) FROM zeek_conn WHERE dt IS NULL AND hour IS NULL AND ts IS NULL")[0][0])
print(q("SELECT sum(orig_bytes) FROM zeek_conn")[0][0])
print(q("SELECT count(*) FROM zeek_conn WHERE id.orig_h = '10.0.0.3'")[0][0])
print(q("SELECT typeof(hour) FROM zeek_conn LIMIT 1")[0][0])
"#;
    let out = Command::new(&py)
        .arg("-c")
        .arg(code)
        .arg(&sql_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "duckdb failed on\n{sql}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    // Independent expectations from `hours()` and `batch()`.
    let sum_bytes: i64 = (0..ROWS).map(|i| i * 10).sum();
    let orig_h_3 = (0..ROWS).filter(|i| i % 7 == 3).count();
    // silt's own count, from the file footers, must agree too.
    let silt_rows = silt_lake::catalog::table_info(dir.path(), &TableName::new("zeek", "conn"))
        .unwrap()
        .rows;
    assert_eq!(silt_rows, ROWS as u64);
    assert_eq!(
        lines,
        vec![
            ROWS.to_string(),
            "5".into(),
            "3".into(),
            "4".into(),
            "1".into(),
            sum_bytes.to_string(),
            orig_h_3.to_string(),
            "INTEGER".into(),
        ],
        "statement:\n{sql}"
    );
}

/// A table a retention emptied: DuckDB's view has the columns (typed as read_parquet types
/// them from the files) and no rows, where a glob over no files would fail.
#[test]
fn duckdb_view_of_an_emptied_table_has_its_columns_and_no_rows() {
    let Some(py) =
        python().or_else(|| silt_testkit::skip("duckdb (scripts/pyenv.sh) is not available"))
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    build_lake(dir.path(), Partitioning::Hour, StoreKind::Parquet);
    let table = TableName::new("zeek", "conn");
    let opts = DdlOptions {
        dialect: Dialect::DuckDb,
        location: None,
        name: None,
    };
    let describe = |sql: &str| {
        let file = dir.path().join("create.sql");
        std::fs::write(&file, sql).unwrap();
        let code = r#"
import duckdb, sys
con = duckdb.connect()
con.execute(open(sys.argv[1]).read())
print([tuple(r[:2]) for r in con.execute("DESCRIBE zeek_conn").fetchall()])
print(con.execute("SELECT count(*) FROM zeek_conn").fetchall()[0][0])
"#;
        let out = Command::new(&py)
            .arg("-c")
            .arg(code)
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "duckdb failed on\n{sql}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let layout = ddl::table_layout(dir.path(), &table).unwrap();
    assert!(!layout.empty);
    let full = describe(&ddl::create_statement(&layout, &opts).unwrap());
    assert!(full.ends_with(&format!("\n{ROWS}\n")), "{full}");
    // What `silt retain` leaves of a table whose every partition it dropped.
    silt_lake::emptied::save(dir.path(), &table, &layout.schema, false).unwrap();
    std::fs::remove_dir_all(dir.path().join("zeek.conn")).unwrap();
    let layout = ddl::table_layout(dir.path(), &table).unwrap();
    assert!(layout.empty);
    let sql = ddl::create_statement(&layout, &opts).unwrap();
    assert!(sql.contains("no data files now"), "{sql}");
    let empty = describe(&sql);
    let columns = |s: &str| s.lines().next().unwrap().to_string();
    assert_eq!(columns(&empty), columns(&full), "{sql}");
    assert!(empty.ends_with("\n0\n"), "{empty}");
}

#[test]
fn duckdb_reads_the_types_the_hive_dialects_declare() {
    // DuckDB cannot run Hive DDL, but it can check that the Parquet values fit the declared types
    // (decimal(20,0) for UInt64, int for UInt16, smallint for UInt8, timestamp, ...): cast every
    // column to the Spark/Athena type and compare with the uncast value.
    let Some(py) =
        python().or_else(|| silt_testkit::skip("duckdb (scripts/pyenv.sh) is not available"))
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    build_lake(dir.path(), Partitioning::Hour, StoreKind::Parquet);
    let glob = format!("{}/zeek.conn/**/*.parquet", dir.path().display());
    let code = r#"
import duckdb, sys
con = duckdb.connect()
con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{sys.argv[1]}')")
casts = {"orig_bytes": "DECIMAL(20,0)", "ttl": "SMALLINT", "duration": "DECIMAL(18,6)",
         "ts": "TIMESTAMP", "score": "DOUBLE", "local_orig": "BOOLEAN"}
bad = 0
for c, t in casts.items():
    bad += con.execute(f"SELECT count(*) FROM t WHERE CAST({c} AS {t}) IS DISTINCT FROM {c}").fetchall()[0][0]
print(bad)
print(con.execute("SELECT typeof(id.orig_p) FROM t LIMIT 1").fetchall()[0][0])
"#;
    let out = Command::new(&py)
        .arg("-c")
        .arg(code)
        .arg(&glob)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines[0], "0");
    // UInt16 is declared int: the Parquet column is an unsigned 16-bit integer.
    assert_eq!(lines[1], "USMALLINT");
}

#[test]
fn dialect_names_parse() {
    assert_eq!("Athena".parse::<Dialect>().unwrap(), Dialect::Athena);
    assert_eq!("duckdb".parse::<Dialect>().unwrap(), Dialect::DuckDb);
    assert!("mysql".parse::<Dialect>().is_err());
}

#[test]
fn inspect_shows_decimal_statistics_as_decimals() {
    let dir = tempfile::tempdir().unwrap();
    build_lake(dir.path(), Partitioning::Hour, StoreKind::Parquet);
    let part = dir.path().join("zeek.conn/dt=2018-03-24/hour=07");
    let file = std::fs::read_dir(&part)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "parquet"))
        .unwrap();
    let v = silt_lake::inspect::inspect(&file).unwrap();
    let col = v["row_groups"][0]["columns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "duration")
        .unwrap()
        .clone();
    // Rows 0..5 of the hour=07 partition: durations 0 s .. 6 s in steps of 1.5 s.
    assert_eq!(col["min"], "0.000000");
    assert_eq!(col["max"], "6.000000");
}
