//! Tables partitioned by month (`month=YYYY-MM/`, chosen by `--partition auto` for sparse data or
//! given with `--partition month`): the `month` partition column, time-range pruning of month
//! directories, and tables of other granularities in the same lake keeping their columns.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, Int64Array, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use silt_core::{meta, Emit, TableName};
use silt_lake::{LakeWriter, Partitioning, WriterConfig};
use silt_query::{OutputFormat, QueryResult};

const DAY: i64 = 86_400_000_000;
const T0: i64 = 1_704_067_200_000_000; // 2024-01-01T00:00:00Z

fn batch(ts: &[i64]) -> RecordBatch {
    let md: HashMap<String, String> = [(meta::TIME_COLUMN.to_string(), "ts".to_string())].into();
    let schema = Schema::new_with_metadata(
        vec![
            Field::new("ts", silt_core::time::timestamp_type(), true),
            Field::new("n", DataType::Int64, true),
        ],
        md,
    );
    let cols: Vec<Arc<dyn Array>> = vec![
        Arc::new(TimestampMicrosecondArray::from(ts.to_vec()).with_timezone("UTC")),
        Arc::new(Int64Array::from_iter_values(0..ts.len() as i64)),
    ];
    RecordBatch::try_new(Arc::new(schema), cols).unwrap()
}

fn csv(r: &QueryResult) -> String {
    let mut out = Vec::new();
    r.write(OutputFormat::Csv, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn month_partitions_are_columns_and_prune() {
    let d = tempfile::tempdir().unwrap();
    // One row a day for 100 days from 2024-01-01: 31 in January, 29 in February (leap year),
    // 31 in March, 9 in April.
    let ts: Vec<i64> = (0..100).map(|i| T0 + i * DAY + 3_600_000_000).collect();
    let month = WriterConfig {
        partition: Partitioning::Month.into(),
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(d.path(), month).unwrap();
    w.batch(&TableName::new("zeek", "conn"), batch(&ts))
        .unwrap();
    w.finish().unwrap();
    // Another table, by hour, in the same lake.
    let hour = WriterConfig {
        partition: Partitioning::Hour.into(),
        ..WriterConfig::default()
    };
    let mut w = LakeWriter::new(d.path(), hour).unwrap();
    w.batch(&TableName::new("zeek", "dns"), batch(&ts[..3]))
        .unwrap();
    w.finish().unwrap();

    let s = silt_query::open(d.path()).await.unwrap();
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
    let r = s
        .query("SELECT month, count(*) AS n, min(ts) AS first FROM zeek.conn GROUP BY month ORDER BY month")
        .await
        .unwrap();
    assert_eq!(
        csv(&r),
        "month,n,first\n\
         2024-01,31,2024-01-01T01:00:00.000000Z\n\
         2024-02,29,2024-02-01T01:00:00.000000Z\n\
         2024-03,31,2024-03-01T01:00:00.000000Z\n\
         2024-04,9,2024-04-01T01:00:00.000000Z\n"
    );
    // A time range inside February reads February's directory only.
    let r = s
        .query("SELECT count(*) AS n FROM zeek.conn WHERE ts >= TIMESTAMP '2024-02-10T00:00:00Z' AND ts < TIMESTAMP '2024-02-20T00:00:00Z'")
        .await
        .unwrap();
    assert_eq!(csv(&r), "n\n10\n");
    assert_eq!((r.stats.files_total, r.stats.files_selected), (4, 1));
    // So does a predicate on the partition column.
    let r = s
        .query("SELECT count(*) AS n FROM zeek.conn WHERE month = '2024-03'")
        .await
        .unwrap();
    assert_eq!(csv(&r), "n\n31\n");
    assert_eq!(r.stats.files_selected, 1);
    // The hour table has dt and hour and no month column.
    let r = s
        .query("SELECT dt, hour, count(*) AS n FROM zeek.dns GROUP BY dt, hour ORDER BY dt")
        .await
        .unwrap();
    assert_eq!(
        csv(&r),
        "dt,hour,n\n2024-01-01,1,1\n2024-01-02,1,1\n2024-01-03,1,1\n"
    );
    let e = s
        .query("SELECT month FROM zeek.dns")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("month"), "{e}");
}
