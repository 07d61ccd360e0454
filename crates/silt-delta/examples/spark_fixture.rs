//! Builds two Delta tables for checking with other engines (`verify_spark.py`,
//! `verify_duckdb.py`), the way silt would: Parquet files renamed into Hive directories, then
//! committed to the log. Prints what the engines should see, as JSON.
//!
//! `cargo run --example spark_fixture -- <dir>` writes `<dir>/zeek.conn` and `<dir>/gen.local`.
//!
//! zeek.conn, partitioned by dt/hour (ts, port UInt16, bytes UInt64, proto, tags, id struct):
//! - v0 create;
//! - v1 append 3 files: hour=17 (100 rows), hour=18 (50 rows), the null partition (5 rows, ts null);
//! - v2 append 1 file with a new column `service` into hour=18 (20 rows);
//! - v3 replace the two hour=18 files by one merged file (70 rows): compaction;
//! - v4 remove the hour=17 file: retention.
//!
//! gen.local, unpartitioned, with a timestamp without time zone (protocol 3/7, timestampNtz).

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, DictionaryArray, ListBuilder, StringArray, StringBuilder, StructArray,
    TimestampMicrosecondArray, UInt16Array, UInt64Array,
};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Fields, Int32Type, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use silt_delta::delta::{DeltaLog, NewFile};

const HOUR: i64 = 3_600_000_000;
/// 2024-03-24T00:00:00Z in microseconds.
const DAY0: i64 = 1_711_238_400_000_000;

fn schema(with_service: bool) -> SchemaRef {
    let mut fields = vec![
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
    ];
    if with_service {
        fields.push(Field::new("service", DataType::Utf8, true));
    }
    Arc::new(Schema::new(fields))
}

/// `n` rows one second apart from `t0` (null times when `t0` is None); port 65535 - i,
/// bytes u64::MAX - i.
fn batch(schema: &SchemaRef, t0: Option<i64>, n: usize) -> RecordBatch {
    let cols: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| -> ArrayRef {
            match f.name().as_str() {
                "ts" => Arc::new(
                    TimestampMicrosecondArray::from_iter(
                        (0..n as i64).map(|i| t0.map(|t| t + i * 1_000_000)),
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
                    let hosts: ArrayRef = Arc::new(StringArray::from_iter_values(
                        (0..n).map(|i| format!("10.0.0.{i}")),
                    ));
                    Arc::new(StructArray::new(fs.clone(), vec![hosts], None))
                }
                "service" => Arc::new(StringArray::from_iter_values((0..n).map(|_| "dns"))),
                other => panic!("no data for {other}"),
            }
        })
        .collect();
    RecordBatch::try_new(schema.clone(), cols).unwrap()
}

fn write(table: &Path, rel: &str, batch: &RecordBatch) -> NewFile {
    let path = table.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let tmp = path.with_file_name(format!(
        ".{}.inprogress",
        path.file_name().unwrap().to_string_lossy()
    ));
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(&tmp).unwrap(), batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    NewFile::from_parquet(table, rel).unwrap()
}

/// The batch widened to `to` (missing columns null), as silt's compaction unifies inputs.
fn widen(b: &RecordBatch, to: &SchemaRef) -> RecordBatch {
    let cols = to
        .fields()
        .iter()
        .map(|f| match b.schema().index_of(f.name()) {
            Ok(i) => b.column(i).clone(),
            Err(_) => arrow::array::new_null_array(f.data_type(), b.num_rows()),
        })
        .collect();
    RecordBatch::try_new(to.clone(), cols).unwrap()
}

fn main() -> anyhow::Result<()> {
    let dir =
        std::path::PathBuf::from(std::env::args().nth(1).expect("usage: spark_fixture <dir>"));
    let conn = dir.join("zeek.conn");
    let _ = std::fs::remove_dir_all(&conn);
    let s1 = schema(false);
    let s2 = schema(true);
    let log = DeltaLog::create(&conn, &s1, &["dt", "hour"])?;
    let b17 = batch(&s1, Some(DAY0 + 17 * HOUR), 100);
    let b18 = batch(&s1, Some(DAY0 + 18 * HOUR), 50);
    let files = vec![
        write(&conn, "dt=2024-03-24/hour=17/a.parquet", &b17),
        write(&conn, "dt=2024-03-24/hour=18/b.parquet", &b18),
        write(
            &conn,
            "dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__/n.parquet",
            &batch(&s1, None, 5),
        ),
    ];
    let v1 = log.append(&files, &s1, "silt import run 1")?;
    let c18 = batch(&s2, Some(DAY0 + 18 * HOUR + 60 * 1_000_000), 20);
    let v2 = log.append(
        &[write(&conn, "dt=2024-03-24/hour=18/c.parquet", &c18)],
        &s2,
        "silt import run 2",
    )?;
    let merged = concat_batches(&s2, &[widen(&b18, &s2), c18.clone()])?;
    let m = write(&conn, "dt=2024-03-24/hour=18/m.parquet", &merged);
    let v3 = log.replace(
        &[
            "dt=2024-03-24/hour=18/b.parquet".into(),
            "dt=2024-03-24/hour=18/c.parquet".into(),
        ],
        &[m],
        "silt compact",
    )?;
    let v4 = log.remove(
        &["dt=2024-03-24/hour=17/a.parquet".into()],
        "silt retain 30d",
    )?;

    let local = dir.join("gen.local");
    let _ = std::fs::remove_dir_all(&local);
    let ls = Arc::new(Schema::new(vec![
        Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("n", DataType::UInt64, true),
    ]));
    let lb = RecordBatch::try_new(
        ls.clone(),
        vec![
            Arc::new(TimestampMicrosecondArray::from(vec![
                DAY0,
                DAY0 + HOUR,
                DAY0 + 2 * HOUR,
            ])),
            Arc::new(UInt64Array::from(vec![1, u64::MAX, 3])),
        ],
    )?;
    let llog = DeltaLog::create(&local, &ls, &[])?;
    let lv = llog.append(&[write(&local, "x.parquet", &lb)], &ls, "silt import run 3")?;
    assert_eq!(lb.column(0).len(), 3);

    // Columns only ever seen as JSON null (Arrow Null: parquet-rs writes INT32 with the UNKNOWN
    // logical type, which Spark cannot read as a Delta type): `spark_readable` leaves them out
    // (top level, struct fields) or makes them Utf8 (list elements). A later file with values
    // for `nothing` adds it with their type.
    let nulls = dir.join("gen.nulls");
    let _ = std::fs::remove_dir_all(&nulls);
    let item = Arc::new(Field::new("item", DataType::Null, true));
    let ns = Arc::new(Schema::new(vec![
        Field::new("n", DataType::UInt16, true),
        Field::new("nothing", DataType::Null, true),
        Field::new(
            "s",
            DataType::Struct(Fields::from(vec![
                Field::new("a", DataType::Utf8, true),
                Field::new("z", DataType::Null, true),
            ])),
            true,
        ),
        Field::new("l", DataType::List(item.clone()), true),
    ]));
    let s_col = StructArray::new(
        Fields::from(vec![
            Field::new("a", DataType::Utf8, true),
            Field::new("z", DataType::Null, true),
        ]),
        vec![
            Arc::new(StringArray::from(vec!["x", "y"])),
            Arc::new(arrow::array::NullArray::new(2)),
        ],
        None,
    );
    let l_col = arrow::array::ListArray::new(
        item,
        arrow::buffer::OffsetBuffer::from_lengths([1, 0]),
        Arc::new(arrow::array::NullArray::new(1)),
        None,
    );
    let nb = RecordBatch::try_new(
        ns.clone(),
        vec![
            Arc::new(UInt16Array::from(vec![1, 2])),
            Arc::new(arrow::array::NullArray::new(2)),
            Arc::new(s_col),
            Arc::new(l_col),
        ],
    )?;
    let readable = silt_delta::delta::spark_readable(&nb)?;
    let nlog = DeltaLog::create(&nulls, &readable.schema(), &[])?;
    nlog.append(
        &[write(&nulls, "x.parquet", &readable)],
        &readable.schema(),
        "silt import run 4",
    )?;
    let later = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("n", DataType::UInt16, true),
            Field::new("nothing", DataType::Int64, true),
        ])),
        vec![
            Arc::new(UInt16Array::from(vec![3])),
            Arc::new(arrow::array::Int64Array::from(vec![7])),
        ],
    )?;
    nlog.append(
        &[write(&nulls, "y.parquet", &later)],
        &later.schema(),
        "silt import run 5",
    )?;

    let expect = serde_json::json!({
        "zeek.conn": {
            "versions": {"0": 0, v1.to_string(): 155, v2.to_string(): 175, v3.to_string(): 175, v4.to_string(): 75},
            "files": log.files()?,
        },
        "gen.local": {"versions": {lv.to_string(): 3}, "files": llog.files()?},
    });
    println!("{}", serde_json::to_string_pretty(&expect)?);
    Ok(())
}
