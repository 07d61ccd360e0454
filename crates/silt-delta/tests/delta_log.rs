//! The Delta log over files written the way silt writes them (ArrowWriter into Hive
//! directories, renamed into place), read back through deltalake's snapshot.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, DictionaryArray, ListBuilder, StringArray, StringBuilder, StructArray,
    TimestampMicrosecondArray, UInt16Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Fields, Int32Type, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use serde_json::Value;
use silt_delta::delta::{delta_type, DeltaLog, FileStats, NewFile};

const HOUR: i64 = 3_600_000_000;
/// 2024-03-24T00:00:00Z in microseconds.
const DAY0: i64 = 1_711_238_400_000_000;

fn base_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("port", DataType::UInt16, true),
        Field::new("bytes", DataType::UInt64, true),
        Field::new(
            "proto",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new(
            "tags",
            DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
            true,
        ),
        Field::new(
            "id",
            DataType::Struct(Fields::from(vec![Field::new(
                "orig_h",
                DataType::Utf8,
                true,
            )])),
            true,
        ),
    ]))
}

/// `n` rows starting at `t0`, ports above 32767, byte counts above i64::MAX.
fn batch(schema: &SchemaRef, t0: i64, n: usize) -> RecordBatch {
    let cols: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| -> ArrayRef {
            match f.name().as_str() {
                "ts" => Arc::new(
                    TimestampMicrosecondArray::from_iter_values(
                        (0..n as i64).map(|i| t0 + i * 1_000_001),
                    )
                    .with_timezone("UTC"),
                ),
                "port" => Arc::new(UInt16Array::from_iter_values(
                    (0..n).map(|i| 65_535 - i as u16),
                )),
                "bytes" => Arc::new(UInt64Array::from_iter_values(
                    (0..n).map(|i| u64::MAX - i as u64),
                )),
                "proto" => Arc::new(DictionaryArray::<Int32Type>::from_iter((0..n).map(|i| {
                    if i % 2 == 0 {
                        "tcp"
                    } else {
                        "udp"
                    }
                }))),
                "tags" => {
                    let mut b = ListBuilder::new(StringBuilder::new());
                    for i in 0..n {
                        b.values().append_value(format!("t{i}"));
                        b.append(true);
                    }
                    Arc::new(b.finish())
                }
                "id" => {
                    let DataType::Struct(fs) = f.data_type() else {
                        unreachable!()
                    };
                    let cols: Vec<ArrayRef> = fs
                        .iter()
                        .map(|_| -> ArrayRef {
                            Arc::new(StringArray::from_iter_values(
                                (0..n).map(|i| format!("10.0.0.{i}")),
                            ))
                        })
                        .collect();
                    Arc::new(StructArray::new(fs.clone(), cols, None))
                }
                _ if matches!(f.data_type(), DataType::Timestamp(_, None)) => {
                    Arc::new(TimestampMicrosecondArray::from_iter_values(
                        (0..n as i64).map(|i| t0 + i * HOUR),
                    ))
                }
                _ => Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("x{i}")),
                )),
            }
        })
        .collect();
    RecordBatch::try_new(schema.clone(), cols).unwrap()
}

/// Writes a Parquet file under a hidden name and renames it into place, as silt does.
fn write_file(table: &Path, rel: &str, batch: &RecordBatch) {
    let path = table.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_file_name(format!(
        ".{}.inprogress",
        path.file_name().unwrap().to_string_lossy()
    ));
    let f = std::fs::File::create(&tmp).unwrap();
    let mut w = ArrowWriter::try_new(f, batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    std::fs::rename(&tmp, &path).unwrap();
}

fn add(table: &Path, rel: &str, schema: &SchemaRef, t0: i64, n: usize) -> NewFile {
    write_file(table, rel, &batch(schema, t0, n));
    NewFile::from_parquet(table, rel).unwrap()
}

fn commit_json(table: &Path, version: i64) -> Vec<Value> {
    let p = table.join(format!("_delta_log/{version:020}.json"));
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn action<'a>(actions: &'a [Value], kind: &str) -> Vec<&'a Value> {
    actions.iter().filter_map(|a| a.get(kind)).collect()
}

#[test]
fn open_without_log_is_none() {
    let dir = tempfile::tempdir().unwrap();
    assert!(DeltaLog::open(dir.path()).unwrap().is_none());
}

#[test]
fn types_follow_spark_parquet_inference() {
    let j = |t: DataType| serde_json::to_value(delta_type(&t).unwrap()).unwrap();
    assert_eq!(j(DataType::UInt8), "short");
    assert_eq!(j(DataType::UInt16), "integer");
    assert_eq!(j(DataType::UInt32), "long");
    assert_eq!(j(DataType::UInt64), "decimal(20,0)");
    assert_eq!(j(DataType::Int8), "byte");
    assert_eq!(j(DataType::Int16), "short");
    assert_eq!(j(DataType::Int32), "integer");
    assert_eq!(j(DataType::Int64), "long");
    assert_eq!(j(DataType::Float32), "float");
    assert_eq!(j(DataType::Float64), "double");
    assert_eq!(j(DataType::Boolean), "boolean");
    assert_eq!(j(DataType::Utf8), "string");
    assert_eq!(j(DataType::LargeUtf8), "string");
    assert_eq!(j(DataType::Utf8View), "string");
    assert_eq!(j(DataType::Binary), "binary");
    assert_eq!(j(DataType::Null), "string");
    assert_eq!(j(DataType::Date32), "date");
    assert_eq!(j(DataType::Decimal128(12, 3)), "decimal(12,3)");
    assert_eq!(
        j(DataType::Timestamp(
            TimeUnit::Microsecond,
            Some("UTC".into())
        )),
        "timestamp"
    );
    assert_eq!(
        j(DataType::Timestamp(TimeUnit::Microsecond, None)),
        "timestamp_ntz"
    );
    assert_eq!(
        j(DataType::Dictionary(
            Box::new(DataType::Int32),
            Box::new(DataType::UInt16)
        )),
        "integer"
    );
    assert_eq!(
        j(DataType::List(Arc::new(Field::new(
            "item",
            DataType::UInt16,
            false
        )))),
        serde_json::json!({"type": "array", "elementType": "integer", "containsNull": true})
    );
    let map = DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::UInt64, true),
            ])),
            false,
        )),
        false,
    );
    assert_eq!(
        j(map),
        serde_json::json!({"type": "map", "keyType": "string", "valueType": "decimal(20,0)", "valueContainsNull": true})
    );
    let st = DataType::Struct(Fields::from(vec![Field::new("a", DataType::UInt32, false)]));
    assert_eq!(
        j(st),
        serde_json::json!({"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": true, "metadata": {}}]})
    );
    assert!(delta_type(&DataType::Timestamp(TimeUnit::Nanosecond, None)).is_err());
    assert!(delta_type(&DataType::Duration(TimeUnit::Second)).is_err());
}

#[test]
fn create_append_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("zeek.conn");
    let schema = base_schema();
    let log = DeltaLog::create(&table, &schema, &["dt", "hour"]).unwrap();
    assert_eq!(log.version().unwrap(), 0);
    assert!(log.files().unwrap().is_empty());

    // Version 0: protocol (1, 1) and the mapped schema with the partition columns last.
    let v0 = commit_json(&table, 0);
    let protocol = action(&v0, "protocol")[0];
    assert_eq!(protocol["minReaderVersion"], 1);
    assert_eq!(protocol["minWriterVersion"], 1);
    let meta = action(&v0, "metaData")[0];
    assert_eq!(meta["partitionColumns"], serde_json::json!(["dt", "hour"]));
    let s: Value = serde_json::from_str(meta["schemaString"].as_str().unwrap()).unwrap();
    let types: Vec<(String, Value)> = s["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_string(), f["type"].clone()))
        .collect();
    let names: Vec<&str> = types.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["ts", "port", "bytes", "proto", "tags", "id", "dt", "hour"]
    );
    assert_eq!(types[0].1, "timestamp");
    assert_eq!(types[1].1, "integer");
    assert_eq!(types[2].1, "decimal(20,0)");
    assert_eq!(types[3].1, "string");
    assert_eq!(types[6].1, "string");
    assert_eq!(types[7].1, "integer");

    let files = vec![
        add(
            &table,
            "dt=2024-03-24/hour=07/a.parquet",
            &schema,
            DAY0 + 7 * HOUR,
            100,
        ),
        add(
            &table,
            "dt=2024-03-24/hour=17/b.parquet",
            &schema,
            DAY0 + 17 * HOUR,
            250,
        ),
        add(
            &table,
            "dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__/c.parquet",
            &schema,
            DAY0,
            5,
        ),
    ];
    assert_eq!(files[0].partition_values["hour"], Some("07".to_string()));
    assert_eq!(files[2].partition_values["dt"], None);
    let v = log.append(&files, &schema, "silt import run 1").unwrap();
    assert_eq!(v, 1);

    // Read back through a fresh log: files and rows from the statistics.
    let reader = DeltaLog::open(&table).unwrap().unwrap();
    assert_eq!(
        reader.files().unwrap(),
        [
            "dt=2024-03-24/hour=07/a.parquet",
            "dt=2024-03-24/hour=17/b.parquet",
            "dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__/c.parquet",
        ]
    );
    assert_eq!(reader.num_records().unwrap(), Some(355));

    // The commit: commitInfo with silt's text, adds with canonical partition values and stats.
    let v1 = commit_json(&table, 1);
    let info = action(&v1, "commitInfo")[0];
    assert_eq!(info["userMetadata"], "silt import run 1");
    assert_eq!(info["isBlindAppend"], true);
    assert_eq!(info["operation"], "WRITE");
    let adds = action(&v1, "add");
    assert_eq!(adds.len(), 3);
    assert!(action(&v1, "metaData").is_empty());
    let a = adds
        .iter()
        .find(|a| a["path"].as_str().unwrap().contains("hour=07"))
        .unwrap();
    assert_eq!(
        a["partitionValues"],
        serde_json::json!({"dt": "2024-03-24", "hour": "7"})
    );
    assert_eq!(a["dataChange"], true);
    let stats: Value = serde_json::from_str(a["stats"].as_str().unwrap()).unwrap();
    assert_eq!(stats["numRecords"], 100);
    assert_eq!(stats["minValues"]["port"], 65_436);
    assert_eq!(stats["maxValues"]["port"], 65_535);
    assert_eq!(stats["maxValues"]["bytes"], serde_json::json!(u64::MAX));
    assert_eq!(stats["minValues"]["ts"], "2024-03-24T07:00:00.000Z");
    // 99 × 1.000001 s after 07:00 = 07:01:39.000099, rounded up to the millisecond.
    assert_eq!(stats["maxValues"]["ts"], "2024-03-24T07:01:39.001Z");
    assert_eq!(stats["nullCount"]["port"], 0);
    let c = adds
        .iter()
        .find(|a| a["path"].as_str().unwrap().contains("HIVE"))
        .unwrap();
    assert_eq!(
        c["partitionValues"],
        serde_json::json!({"dt": null, "hour": null})
    );

    // create on an existing table opens it; another partitioning is refused.
    let again = DeltaLog::create(&table, &schema, &["dt", "hour"]).unwrap();
    assert_eq!(again.version().unwrap(), 1);
    assert!(DeltaLog::create(&table, &schema, &["month"]).is_err());
    // Partition values must match the table's columns.
    let mut bad = files[0].clone();
    bad.partition_values.remove("hour");
    assert!(log.append(&[bad], &schema, "x").is_err());
    let mut escape = files[0].clone();
    escape.path = "../x.parquet".into();
    assert!(log.append(&[escape], &schema, "x").is_err());
}

#[test]
fn schema_evolution_adds_columns_and_refuses_type_changes() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("suricata.alert");
    let schema = base_schema();
    let log = DeltaLog::create(&table, &schema, &["dt"]).unwrap();
    let f1 = add(&table, "dt=2024-03-24/a.parquet", &schema, DAY0, 10);
    assert_eq!(log.append(&[f1], &schema, "run 1").unwrap(), 1);

    // New top-level column and a new field inside the struct.
    let mut fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            if f.name() == "id" {
                Field::new(
                    "id",
                    DataType::Struct(Fields::from(vec![
                        Field::new("orig_h", DataType::Utf8, true),
                        Field::new("resp_h", DataType::Utf8, true),
                    ])),
                    true,
                )
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    fields.insert(1, Field::new("extra", DataType::Utf8, true));
    let wider = Arc::new(Schema::new(fields));
    let f2 = add(
        &table,
        "dt=2024-03-25/b.parquet",
        &wider,
        DAY0 + 24 * HOUR,
        20,
    );
    assert_eq!(log.append(&[f2], &wider, "run 2").unwrap(), 2);
    let v2 = commit_json(&table, 2);
    let meta = action(&v2, "metaData");
    assert_eq!(meta.len(), 1);
    assert!(action(&v2, "protocol").is_empty());
    assert_eq!(action(&v2, "commitInfo")[0]["isBlindAppend"], false);
    let s: Value = serde_json::from_str(meta[0]["schemaString"].as_str().unwrap()).unwrap();
    let names: Vec<&str> = s["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["ts", "port", "bytes", "proto", "tags", "id", "dt", "extra"]
    );
    let id = &s["fields"][5]["type"]["fields"];
    assert_eq!(id[1]["name"], "resp_h");
    // The table id is kept.
    let v0 = commit_json(&table, 0);
    assert_eq!(action(&v0, "metaData")[0]["id"], meta[0]["id"]);
    assert_eq!(log.num_records().unwrap(), Some(30));

    // The same schema again: no metadata action. An older (narrower) schema: none either.
    let f3 = add(
        &table,
        "dt=2024-03-25/c.parquet",
        &wider,
        DAY0 + 24 * HOUR,
        1,
    );
    assert_eq!(log.append(&[f3], &wider, "run 3").unwrap(), 3);
    assert!(action(&commit_json(&table, 3), "metaData").is_empty());
    let f4 = add(
        &table,
        "dt=2024-03-25/d.parquet",
        &schema,
        DAY0 + 24 * HOUR,
        1,
    );
    assert_eq!(log.append(&[f4], &schema, "run 4").unwrap(), 4);
    assert!(action(&commit_json(&table, 4), "metaData").is_empty());

    // A type change is refused with the column named.
    let changed = Arc::new(Schema::new(vec![Field::new(
        "port",
        DataType::UInt32,
        true,
    )]));
    let err = log.append(&[], &changed, "run 5").unwrap_err();
    assert!(format!("{err:#}").contains("port"), "{err:#}");
    assert_eq!(log.version().unwrap(), 4);

    // A timestamp without time zone upgrades the protocol to table features in the same commit.
    let ntz = Arc::new(Schema::new(vec![Field::new(
        "local",
        DataType::Timestamp(TimeUnit::Microsecond, None),
        true,
    )]));
    let f6 = add(&table, "dt=2024-03-26/e.parquet", &ntz, 0, 3);
    assert_eq!(log.append(&[f6], &ntz, "run 6").unwrap(), 5);
    let v5 = commit_json(&table, 5);
    let p = action(&v5, "protocol")[0];
    assert_eq!(p["minReaderVersion"], 3);
    assert_eq!(p["minWriterVersion"], 7);
    assert_eq!(p["readerFeatures"], serde_json::json!(["timestampNtz"]));
    assert_eq!(p["writerFeatures"], serde_json::json!(["timestampNtz"]));
    // And the table stays writable by deltalake.
    let f7 = add(&table, "dt=2024-03-26/f.parquet", &ntz, 0, 2);
    assert_eq!(log.append(&[f7], &ntz, "run 7").unwrap(), 6);
    assert_eq!(log.num_records().unwrap(), Some(37));
}

#[test]
fn replace_is_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("zeek.dns");
    let schema = base_schema();
    let log = DeltaLog::create(&table, &schema, &["dt", "hour"]).unwrap();
    let a = add(
        &table,
        "dt=2024-03-24/hour=01/a.parquet",
        &schema,
        DAY0 + HOUR,
        10,
    );
    let b = add(
        &table,
        "dt=2024-03-24/hour=01/b.parquet",
        &schema,
        DAY0 + HOUR,
        20,
    );
    let c = add(
        &table,
        "dt=2024-03-24/hour=02/c.parquet",
        &schema,
        DAY0 + 2 * HOUR,
        5,
    );
    log.append(&[a, b, c], &schema, "import").unwrap();

    // The merged file (30 rows) replaces a and b.
    let m = add(
        &table,
        "dt=2024-03-24/hour=01/m.parquet",
        &schema,
        DAY0 + HOUR,
        30,
    );
    let removed = vec![
        "dt=2024-03-24/hour=01/a.parquet".to_string(),
        "dt=2024-03-24/hour=01/b.parquet".to_string(),
    ];
    let v = log.replace(&removed, &[m], "silt compact").unwrap();
    assert_eq!(v, 2);
    assert_eq!(
        log.files().unwrap(),
        [
            "dt=2024-03-24/hour=01/m.parquet",
            "dt=2024-03-24/hour=02/c.parquet"
        ]
    );
    assert_eq!(log.num_records().unwrap(), Some(35));
    let v2 = commit_json(&table, 2);
    assert_eq!(action(&v2, "commitInfo")[0]["operation"], "OPTIMIZE");
    let removes = action(&v2, "remove");
    assert_eq!(removes.len(), 2);
    assert!(removes.iter().all(|r| r["dataChange"] == false));
    assert!(removes
        .iter()
        .all(|r| r["partitionValues"]["hour"] == "1" && r["size"].as_i64().unwrap() > 0));
    assert!(action(&v2, "add").iter().all(|a| a["dataChange"] == false));

    // Replacing a file that is gone commits nothing.
    let m2 = add(
        &table,
        "dt=2024-03-24/hour=01/m2.parquet",
        &schema,
        DAY0 + HOUR,
        30,
    );
    let err = log.replace(&removed, &[m2], "silt compact").unwrap_err();
    assert!(format!("{err:#}").contains("a.parquet"), "{err:#}");
    assert_eq!(log.version().unwrap(), 2);
}

#[test]
fn remove_is_retention() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("zeek.http");
    let schema = base_schema();
    let log = DeltaLog::create(&table, &schema, &["month"]).unwrap();
    let a = add(
        &table,
        "month=2024-02/a.parquet",
        &schema,
        DAY0 - 40 * 24 * HOUR,
        7,
    );
    let b = add(&table, "month=2024-03/b.parquet", &schema, DAY0, 8);
    log.append(&[a, b], &schema, "import").unwrap();
    let gone = vec!["month=2024-02/a.parquet".to_string()];
    assert_eq!(log.remove(&gone, "silt retain 30d").unwrap(), 2);
    assert_eq!(log.files().unwrap(), ["month=2024-03/b.parquet"]);
    assert_eq!(log.num_records().unwrap(), Some(8));
    let v2 = commit_json(&table, 2);
    assert_eq!(action(&v2, "commitInfo")[0]["operation"], "DELETE");
    let r = action(&v2, "remove")[0];
    assert_eq!(r["dataChange"], true);
    assert!(r["deletionTimestamp"].as_i64().unwrap() > 0);
    // The file stays on disk (readers of version 1 may still read it).
    assert!(table.join("month=2024-02/a.parquet").exists());
    // Removing it again commits nothing.
    assert_eq!(log.remove(&gone, "silt retain 30d").unwrap(), 2);
    assert_eq!(log.version().unwrap(), 2);
}

#[test]
fn concurrent_writers_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let table = Arc::new(dir.path().join("zeek.conn"));
    let schema = base_schema();
    const THREADS: usize = 2;
    const COMMITS: usize = 20;
    // Both threads create the table at the same moment, then append 20 commits each; the second
    // thread widens the schema every fifth commit (a metadata change the other must retry over),
    // and removes one of its own files at the end (a data change every reader conflicts with).
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let table = table.clone();
            let schema = schema.clone();
            std::thread::spawn(move || {
                let log = DeltaLog::create(&table, &schema, &["dt", "hour"]).unwrap();
                let mut versions = Vec::new();
                let mut file_schema = schema.clone();
                for i in 0..COMMITS {
                    if t == 1 && i % 5 == 4 {
                        let mut fields: Vec<Field> = file_schema
                            .fields()
                            .iter()
                            .map(|f| f.as_ref().clone())
                            .collect();
                        fields.push(Field::new(format!("extra{i}"), DataType::Utf8, true));
                        file_schema = Arc::new(Schema::new(fields));
                    }
                    let rel = format!("dt=2024-03-24/hour={:02}/t{t}-{i}.parquet", i % 24);
                    let f = add(
                        &table,
                        &rel,
                        &file_schema,
                        DAY0 + (i as i64 % 24) * HOUR,
                        10,
                    );
                    versions.push(
                        log.append(&[f], &file_schema, &format!("thread {t} commit {i}"))
                            .unwrap(),
                    );
                }
                (log, versions)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut logs = Vec::new();
    for h in handles {
        let (log, versions) = h.join().unwrap();
        all.extend(versions);
        logs.push(log);
    }
    all.sort();
    all.dedup();
    assert_eq!(
        all.len(),
        THREADS * COMMITS,
        "every commit got its own version"
    );
    let reader = DeltaLog::open(&table).unwrap().unwrap();
    assert_eq!(reader.files().unwrap().len(), THREADS * COMMITS);
    assert_eq!(
        reader.num_records().unwrap(),
        Some((THREADS * COMMITS * 10) as u64)
    );
    assert_eq!(reader.version().unwrap(), (THREADS * COMMITS) as i64);
    let names: Vec<String> = reader
        .schema()
        .unwrap()
        .fields()
        .map(|f| f.name().clone())
        .collect();
    for i in [4, 9, 14, 19] {
        assert!(names.contains(&format!("extra{i}")), "{names:?}");
    }
    // How much racing there was: versions deltalake moved past, and operations planned again
    // here (after a metadata change of the other thread).
    let (retries, replans): (u64, u64) = logs
        .iter()
        .map(|l| l.contention())
        .fold((0, 0), |(r, p), c| (r + c.retries, p + c.replans));
    println!("appends racing appends: deltalake retries {retries}, replans {replans}");
    // Exactly one version 0 (one table id) despite two creators.
    let v0 = commit_json(&table, 0);
    assert_eq!(action(&v0, "metaData").len(), 1);

    // Appends racing a retention commit: both land.
    let t2 = table.clone();
    let s2 = schema.clone();
    let before = logs[0].contention();
    let appender = std::thread::spawn(move || {
        let log = DeltaLog::open(&t2).unwrap().unwrap();
        for i in 0..10 {
            let rel = format!("dt=2024-03-25/hour=00/late-{i}.parquet");
            let f = add(&t2, &rel, &s2, DAY0 + 24 * HOUR, 1);
            log.append(&[f], &s2, "late").unwrap();
        }
        log.contention()
    });
    for i in 0..10 {
        let p = format!("dt=2024-03-24/hour={:02}/t0-{i}.parquet", i % 24);
        logs[0].remove(&[p], "retain").unwrap();
    }
    let late = appender.join().unwrap();
    let after = logs[0].contention();
    println!(
        "appends racing removals: appender {late:?}, remover retries {} replans {}",
        after.retries - before.retries,
        after.replans - before.replans
    );
    let files = reader.files().unwrap();
    assert_eq!(files.len(), THREADS * COMMITS - 10 + 10);
    for i in 0..10 {
        let p = format!("dt=2024-03-24/hour={:02}/t0-{i}.parquet", i % 24);
        assert!(!files.contains(&p), "{p} was removed");
    }
    assert_eq!(
        reader.num_records().unwrap(),
        Some((THREADS * COMMITS * 10 - 100 + 10) as u64)
    );
}

#[test]
fn stats_only_rows_when_asked() {
    let s = FileStats::rows(42);
    assert_eq!(s.to_json(), r#"{"numRecords":42}"#);
    let mut pv = BTreeMap::new();
    pv.insert("dt".to_string(), Some("2024-03-24".to_string()));
    let f = NewFile {
        path: "dt=2024-03-24/x.parquet".into(),
        size: 1,
        partition_values: pv,
        stats: Some(s),
    };
    assert_eq!(f.stats.unwrap().num_records, 42);
}

#[test]
fn null_columns_are_left_out_of_files() {
    use silt_delta::delta::{spark_readable, spark_readable_schema};
    let item = Arc::new(Field::new("item", DataType::Null, true));
    let inner = Fields::from(vec![
        Field::new("a", DataType::Utf8, true),
        Field::new("z", DataType::Null, true),
    ]);
    let schema = Arc::new(Schema::new(vec![
        Field::new("n", DataType::UInt16, true),
        Field::new("nothing", DataType::Null, true),
        Field::new("s", DataType::Struct(inner.clone()), true),
        Field::new("l", DataType::List(item.clone()), true),
        Field::new(
            "empty",
            DataType::Struct(Fields::from(vec![Field::new("z", DataType::Null, true)])),
            true,
        ),
    ]));
    let nulls = |n| Arc::new(arrow::array::NullArray::new(n)) as ArrayRef;
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(UInt16Array::from(vec![1, 2])),
            nulls(2),
            Arc::new(StructArray::new(
                inner,
                vec![Arc::new(StringArray::from(vec!["x", "y"])), nulls(2)],
                None,
            )),
            Arc::new(arrow::array::ListArray::new(
                item,
                arrow::buffer::OffsetBuffer::from_lengths([1, 0]),
                nulls(1),
                None,
            )),
            Arc::new(StructArray::new(
                Fields::from(vec![Field::new("z", DataType::Null, true)]),
                vec![nulls(2)],
                None,
            )),
        ],
    )
    .unwrap();
    let out = spark_readable(&batch).unwrap();
    assert_eq!(out.schema().as_ref(), &spark_readable_schema(&schema));
    let names: Vec<String> = out
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["n", "s", "l"]);
    assert_eq!(
        out.schema().field(1).data_type(),
        &DataType::Struct(Fields::from(vec![Field::new("a", DataType::Utf8, true)]))
    );
    assert_eq!(
        out.schema().field(2).data_type(),
        &DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))
    );
    assert_eq!(out.num_rows(), 2);

    // The log refuses files with Null columns, and takes the readable ones.
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("gen.nulls");
    assert!(DeltaLog::create(&table, &schema, &[]).is_err());
    let log = DeltaLog::create(&table, &out.schema(), &[]).unwrap();
    write_file(&table, "x.parquet", &out);
    let f = NewFile::from_parquet(&table, "x.parquet").unwrap();
    let err = log
        .append(std::slice::from_ref(&f), &schema, "x")
        .unwrap_err();
    assert!(format!("{err:#}").contains("nothing"), "{err:#}");
    assert_eq!(log.append(&[f], &out.schema(), "x").unwrap(), 1);
    // Nothing to commit: no version.
    assert_eq!(log.append(&[], &out.schema(), "x").unwrap(), 1);
}

/// A table in an object store (`s3://bucket/prefix/zeek.conn`), given to deltalake as silt's
/// own store: here `object_store`'s in-memory store standing in for the bucket (it lists in key
/// order and has put-if-absent, as S3 does; its local-filesystem store lists unordered, which
/// the Delta kernel accepts only for `file://` tables). Two writers create and append at once,
/// one removes; the commits land at the object keys a Delta reader of the bucket expects.
#[test]
fn a_table_in_an_object_store() {
    use deltalake::logstore::object_store::{memory::InMemory, ObjectStoreExt, PutPayload};
    use deltalake::Path as Key;
    use silt_delta::delta::TableLocation;
    let store = Arc::new(InMemory::new());
    let at = TableLocation::Store {
        store: store.clone(),
        url: url::Url::parse("s3://bucket/prefix/zeek.conn").unwrap(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let schema = base_schema();
    assert!(!at.has_log().unwrap());
    assert!(DeltaLog::open_at(&at).unwrap().is_none());
    let handles: Vec<_> = (0..2)
        .map(|t| {
            let (at, store, schema) = (at.clone(), store.clone(), schema.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let log = DeltaLog::create_at(&at, &schema, &["dt", "hour"]).unwrap();
                for i in 0..5 {
                    let rel = format!("dt=2024-03-24/hour={i:02}/w{t}-{i}.parquet");
                    let mut bytes = Vec::new();
                    let b = batch(&schema, DAY0 + i as i64 * HOUR, 10);
                    let mut w = ArrowWriter::try_new(&mut bytes, b.schema(), None).unwrap();
                    w.write(&b).unwrap();
                    w.close().unwrap();
                    let bytes = bytes::Bytes::from(bytes);
                    let key = Key::from(format!("prefix/zeek.conn/{rel}"));
                    rt.block_on(store.put(&key, PutPayload::from(bytes.clone())))
                        .unwrap();
                    let meta = parquet::arrow::arrow_reader::ArrowReaderMetadata::load(
                        &bytes,
                        Default::default(),
                    )
                    .unwrap();
                    let f = NewFile::from_metadata(&rel, bytes.len() as u64, &meta).unwrap();
                    assert_eq!(f.stats.as_ref().unwrap().num_records, 10);
                    log.append(&[f], &schema, "writer").unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(at.has_log().unwrap());
    let log = DeltaLog::open_at(&at).unwrap().unwrap();
    assert_eq!(log.files().unwrap().len(), 10);
    assert_eq!(log.num_records().unwrap(), Some(100));
    assert_eq!(log.version().unwrap(), 10);
    log.remove(&["dt=2024-03-24/hour=00/w0-0.parquet".into()], "retain")
        .unwrap();
    assert_eq!(log.files().unwrap().len(), 9);
    assert_eq!(log.location().to_string(), "s3://bucket/prefix/zeek.conn");
    // One creation (one table id), and the commit keys where Spark or Trino look for them.
    let v0 = rt
        .block_on(store.get(&Key::from(
            "prefix/zeek.conn/_delta_log/00000000000000000000.json",
        )))
        .unwrap();
    let v0 = String::from_utf8(rt.block_on(v0.bytes()).unwrap().to_vec()).unwrap();
    assert_eq!(v0.matches("\"metaData\"").count(), 1, "{v0}");
    assert!(rt
        .block_on(store.head(&Key::from(
            "prefix/zeek.conn/_delta_log/00000000000000000011.json"
        )))
        .is_ok());
}
