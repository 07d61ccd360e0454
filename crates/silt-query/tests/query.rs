//! Integration tests over lakes written by the tests themselves: pruning and its statistics,
//! bloom-filter lookups, schema evolution (including silt's rules 5 and 6), layouts, Parquet
//! and Feather agreement, and every output format.

mod common;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Fields, Int64Type, Schema};
use common::*;
use silt_query::{OutputFormat, QueryResult, SiltSession};

const HOUR_US: i64 = 3_600_000_000;

async fn q(s: &SiltSession, sql: &str) -> QueryResult {
    s.query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e:#}"))
}

fn csv(r: &QueryResult) -> String {
    let mut out = Vec::new();
    r.write(OutputFormat::Csv, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn dir_bytes(p: &Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().to_string();
        if e.file_type().unwrap().is_dir() {
            n += dir_bytes(&e.path());
        } else if !name.starts_with('.') && !name.starts_with('_') {
            n += e.metadata().unwrap().len();
        }
    }
    n
}

// ------------------------------------------------------------------ a table for pruning tests

/// `zeek.dns`: one file per hour 17, 18, 19 of 2018-03-24, 100 rows each, one row every 30 s,
/// row groups of 10 rows. In row group k (rows 10k..10k+9), row j has
/// `uid = H<hour>U<20j+2k>` (three digits): every row group spans almost the whole uid range of
/// its file, so statistics cannot find a uid, only bloom filters can. All even numbers
/// 0..=198 occur once per file; odd numbers never.
fn dns_batch(hour: i64) -> RecordBatch {
    let start = us("2018-03-24T00:00:00Z") + hour * HOUR_US;
    let ts: Vec<i64> = (0..100).map(|i| start + i * 30_000_000).collect();
    let uid: Vec<String> = (0..100)
        .map(|i| format!("H{hour}U{:03}", (i % 10) * 20 + (i / 10) * 2))
        .collect();
    let schema = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("ts", ts_type(), true),
            Field::new("uid", DataType::Utf8, true),
            Field::new("query", DataType::Utf8, true),
        ],
        [
            ("silt.time_column".to_string(), "ts".to_string()),
            ("silt.table".to_string(), "zeek.dns".to_string()),
            ("silt.lookup_columns".to_string(), "uid".to_string()),
        ]
        .into(),
    ));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(TimestampMicrosecondArray::from(ts).with_timezone("UTC")),
            Arc::new(StringArray::from(uid)),
            Arc::new(StringArray::from_iter_values(
                (0..100).map(|i| format!("q{i}.example")),
            )),
        ],
    )
    .unwrap()
}

fn build_dns_lake(lake: &Path, store: Store, layout: &str) {
    for (n, hour) in [17i64, 18, 19].into_iter().enumerate() {
        let dir = match layout {
            "hour" => format!("dt=2018-03-24/hour={hour}"),
            "day" => "dt=2018-03-24".to_string(),
            _ => String::new(),
        };
        write_file(
            lake,
            "zeek.dns",
            &dir,
            &format!("f{n}"),
            store,
            &dns_batch(hour),
            10,
            &["uid"],
        );
    }
}

#[tokio::test]
async fn time_predicate_prunes_partitions_and_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    build_dns_lake(dir.path(), Store::Parquet, "hour");
    let s = silt_query::open(dir.path()).await.unwrap();
    let total_bytes = dir_bytes(&dir.path().join("zeek.dns"));

    let all = q(&s, "SELECT count(*) FROM zeek.dns").await;
    assert_eq!(csv(&all), "count(*)\n300\n");
    assert_eq!(all.stats.files_total, 3);
    assert_eq!(all.stats.files_scanned, 3);
    assert_eq!(all.stats.row_groups_total, 30);
    assert_eq!(all.stats.bytes_total, total_bytes);

    // 17:10:00 <= ts < 17:15:00 holds rows 20..29 of the 17:00 file: row group 2 only.
    let r = q(
        &s,
        "SELECT min(uid), max(uid), count(*) FROM zeek.dns \
         WHERE ts >= TIMESTAMP '2018-03-24 17:10:00' AND ts < TIMESTAMP '2018-03-24 17:15:00'",
    )
    .await;
    assert_eq!(
        csv(&r),
        "min(zeek.dns.uid),max(zeek.dns.uid),count(*)\nH17U004,H17U184,10\n"
    );
    let st = &r.stats;
    assert_eq!(
        (st.files_total, st.files_selected, st.files_scanned),
        (3, 1, 1)
    );
    assert_eq!(st.row_groups_total, 30);
    assert_eq!(st.row_groups_selected, 10);
    assert_eq!(st.row_groups_pruned_statistics, 9);
    assert_eq!(st.row_groups_scanned, 1);
    assert!(
        st.bytes_scanned > 0 && st.bytes_scanned < total_bytes / 3,
        "{st}"
    );

    // A window across an hour boundary reads two files (each file's last row is at hh:49:30).
    let r = q(
        &s,
        "SELECT count(*) FROM zeek.dns WHERE ts BETWEEN '2018-03-24T17:49:30Z' AND '2018-03-24T18:00:00Z'",
    )
    .await;
    assert_eq!(csv(&r), "count(*)\n2\n");
    assert_eq!((r.stats.files_selected, r.stats.files_scanned), (2, 2));
    // Footer statistics prune within an hour directory: the 17:00 file ends at 17:49:30.
    let r = q(
        &s,
        "SELECT count(*) FROM zeek.dns WHERE ts BETWEEN '2018-03-24T17:50:00Z' AND '2018-03-24T17:59:59Z'",
    )
    .await;
    assert_eq!(csv(&r), "count(*)\n0\n");
    assert_eq!(r.stats.files_selected, 0);

    // A window with no data reads nothing at all.
    let r = q(
        &s,
        "SELECT count(*) FROM zeek.dns WHERE ts < TIMESTAMP '2018-03-24 17:00:00'",
    )
    .await;
    assert_eq!(csv(&r), "count(*)\n0\n");
    assert_eq!((r.stats.files_selected, r.stats.bytes_scanned), (0, 0));

    // Filters on the partition columns prune too.
    let r = q(&s, "SELECT count(*) FROM zeek.dns WHERE hour = 19").await;
    assert_eq!(csv(&r), "count(*)\n100\n");
    assert_eq!(r.stats.files_selected, 1);

    // The display names what happened.
    let text = r.stats.to_string();
    assert!(text.contains("1 of 3 scanned"), "{text}");
}

#[tokio::test]
async fn bloom_filter_finds_needles() {
    let dir = tempfile::tempdir().unwrap();
    build_dns_lake(dir.path(), Store::Parquet, "hour");
    let s = silt_query::open(dir.path()).await.unwrap();

    // Present: row j=5 of row group 0 in the 18:00 file (ts 18:02:30).
    let r = q(&s, "SELECT uid, ts FROM zeek.dns WHERE uid = 'H18U100'").await;
    assert_eq!(csv(&r), "uid,ts\nH18U100,2018-03-24T18:02:30.000000Z\n");
    let st = &r.stats;
    // The other two files' uids sort entirely below/above the needle: their footer bounds
    // leave them out unopened; in the 18:00 file every row group's min/max spans the needle,
    // so only the bloom filters can drop 9 of its 10.
    assert_eq!(st.files_selected, 1, "{st}");
    assert_eq!(st.row_groups_pruned_statistics, 0, "{st}");
    assert_eq!(st.row_groups_pruned_bloom_filter, 9, "{st}");
    assert_eq!(st.row_groups_scanned, 1, "{st}");
    assert_eq!(st.files_scanned, 1, "{st}");

    // Absent (odd numbers never occur): nothing read past the filters.
    let r = q(&s, "SELECT count(*) FROM zeek.dns WHERE uid = 'H18U101'").await;
    assert_eq!(csv(&r), "count(*)\n0\n");
    assert_eq!(r.stats.files_selected, 1);
    assert_eq!(r.stats.row_groups_pruned_bloom_filter, 10);
    assert_eq!(r.stats.row_groups_scanned, 0);
    assert_eq!(r.stats.files_scanned, 0);

    // Ranges and disjunctions prune by the bounds too (the file of hour H holds uids HhhU*).
    let r = q(&s, "SELECT count(*) FROM zeek.dns WHERE uid < 'H18'").await;
    assert_eq!(csv(&r), "count(*)\n100\n");
    assert_eq!(r.stats.files_selected, 1, "{}", r.stats);
    let r = q(
        &s,
        "SELECT count(*) FROM zeek.dns WHERE uid < 'H18' OR uid > 'H19'",
    )
    .await;
    assert_eq!(csv(&r), "count(*)\n200\n");
    assert_eq!(r.stats.files_selected, 2, "{}", r.stats);
}

#[tokio::test]
async fn day_and_flat_layouts_prune_by_directory_and_footer() {
    for layout in ["day", "none"] {
        let dir = tempfile::tempdir().unwrap();
        build_dns_lake(dir.path(), Store::Parquet, layout);
        let s = silt_query::open(dir.path()).await.unwrap();
        let r = q(
            &s,
            "SELECT count(*), min(hour), min(dt) FROM zeek.dns WHERE ts >= TIMESTAMP '2018-03-24 18:30:00'",
        )
        .await;
        let dt = if layout == "day" { "2018-03-24" } else { "" };
        assert_eq!(
            csv(&r),
            format!("count(*),min(zeek.dns.hour),min(zeek.dns.dt)\n140,,{dt}\n"),
            "{layout}"
        );
        // 18:30:00..18:49:30 (40 rows) and all of 19:00 (100). Footer statistics of the time
        // column leave only the 18:00 and 19:00 files.
        assert_eq!(r.stats.files_selected, 2, "{layout}");
    }
}

#[tokio::test]
async fn null_time_partition_is_pruned_by_time_predicates_only() {
    let dir = tempfile::tempdir().unwrap();
    build_small_lake(dir.path(), |_| Store::Parquet);
    let s = silt_query::open(dir.path()).await.unwrap();
    let r = q(
        &s,
        "SELECT count(*) FROM zeek.conn WHERE ts >= TIMESTAMP '2000-01-01 00:00:00'",
    )
    .await;
    assert_eq!(csv(&r), "count(*)\n9\n");
    assert_eq!((r.stats.files_total, r.stats.files_selected), (4, 3));
    // Only one file has null times (the others' footers count none): the others are left out
    // by their bounds, not by the time predicate.
    let r = q(&s, "SELECT uid FROM zeek.conn WHERE ts IS NULL").await;
    assert_eq!(csv(&r), "uid\nC10\n");
    assert_eq!(r.stats.files_selected, 1);
    // now() - interval is folded before the scan sees it: nothing in the future.
    let r = q(
        &s,
        "SELECT count(*) FROM zeek.conn WHERE ts > now() - INTERVAL '1 hour'",
    )
    .await;
    assert_eq!(csv(&r), "count(*)\n0\n");
    assert_eq!(r.stats.files_selected, 0);
}

#[tokio::test]
async fn ignores_non_tables_hidden_and_in_progress_files() {
    let dir = tempfile::tempdir().unwrap();
    build_small_lake(dir.path(), |_| Store::Parquet);
    let s = silt_query::open(dir.path()).await.unwrap();
    let names: Vec<String> = s.tables().iter().map(|t| t.to_string()).collect();
    assert_eq!(
        names,
        ["suricata.alert", "suricata.flow", "zeek.conn", "zeek.http"]
    );
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
    // A damaged data file is left out and reported, not silently dropped.
    std::fs::write(
        dir.path()
            .join("zeek.http/dt=2018-03-24/hour=17/bad.parquet"),
        b"junk",
    )
    .unwrap();
    let s = silt_query::open(dir.path()).await.unwrap();
    assert_eq!(s.warnings().len(), 1);
    assert!(s.warnings()[0].contains("bad.parquet"));
    assert_eq!(
        csv(&q(&s, "SELECT count(*) FROM zeek.http").await),
        "count(*)\n5\n"
    );
}

// ------------------------------------------------------------------ Parquet vs Feather

const COMPARE: &[&str] = &[
    "SELECT * FROM zeek.conn ORDER BY uid",
    "SELECT * FROM suricata.alert ORDER BY timestamp",
    "SELECT id.orig_h, sum(resp_bytes) FROM zeek.conn GROUP BY 1 ORDER BY 1",
    "SELECT uid, id FROM zeek.conn WHERE ts >= TIMESTAMP '2018-03-24 18:00:00' ORDER BY ts",
    "SELECT count(*) FROM zeek.conn WHERE id.vlan IS NULL",
    "SELECT h.uri, c.duration FROM zeek.http h LEFT JOIN zeek.conn c USING (uid) ORDER BY h.ts",
];

#[tokio::test]
async fn parquet_and_feather_lakes_agree() {
    let pq = tempfile::tempdir().unwrap();
    let fe = tempfile::tempdir().unwrap();
    build_small_lake(pq.path(), |_| Store::Parquet);
    build_small_lake(fe.path(), |_| Store::Feather);
    let sp = silt_query::open(pq.path()).await.unwrap();
    let sf = silt_query::open(fe.path()).await.unwrap();
    for sql in COMPARE {
        let a = q(&sp, sql).await;
        let b = q(&sf, sql).await;
        assert!(a.num_rows() > 0, "{sql}");
        assert_eq!(csv(&a), csv(&b), "{sql}");
        assert_eq!(a.schema.fields(), b.schema.fields(), "{sql}");
        // Feather has no row groups to prune; everything selected is scanned.
        assert_eq!(b.stats.row_groups_total, 0);
        assert_eq!(b.stats.files_scanned, b.stats.files_selected);
    }
}

// ------------------------------------------------------------------ silt's rules 5 and 6

/// `suricata.dns`: file 1 has `vlan: Int64`, `answers: {rrname}`, `tx: {id: Int64}`;
/// file 2 has `vlan: List<Int64>`, `answers: Utf8`, `tx: {id: List<Int64>}`. Unified:
/// `vlan` and `tx.id` lists, `answers` text (JSON for the struct rows).
fn write_evolving_eve(lake: &Path, store1: Store, store2: Store) {
    let meta: std::collections::HashMap<String, String> =
        [("silt.time_column".to_string(), "timestamp".to_string())].into();
    let ans: Fields = vec![Field::new("rrname", DataType::Utf8, true)].into();
    let tx1: Fields = vec![Field::new("id", DataType::Int64, true)].into();
    let s1 = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("timestamp", ts_type(), true),
            Field::new("vlan", DataType::Int64, true),
            Field::new("answers", DataType::Struct(ans.clone()), true),
            Field::new("tx", DataType::Struct(tx1.clone()), true),
        ],
        meta.clone(),
    ));
    let b1 = RecordBatch::try_new(
        s1,
        vec![
            Arc::new(
                TimestampMicrosecondArray::from(vec![
                    us("2018-03-24T17:00:00Z"),
                    us("2018-03-24T17:00:01Z"),
                ])
                .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from(vec![Some(100), None])),
            Arc::new(StructArray::new(
                ans,
                vec![Arc::new(StringArray::from(vec!["a.example", "b.example"])) as ArrayRef],
                None,
            )),
            Arc::new(StructArray::new(
                tx1,
                vec![Arc::new(Int64Array::from(vec![7, 8])) as ArrayRef],
                None,
            )),
        ],
    )
    .unwrap();
    let list = DataType::List(Arc::new(Field::new("item", DataType::Int64, true)));
    let tx2: Fields = vec![Field::new("id", list.clone(), true)].into();
    let s2 = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("timestamp", ts_type(), true),
            Field::new("vlan", list.clone(), true),
            Field::new("answers", DataType::Utf8, true),
            Field::new("tx", DataType::Struct(tx2.clone()), true),
        ],
        meta,
    ));
    let b2 = RecordBatch::try_new(
        s2,
        vec![
            Arc::new(
                TimestampMicrosecondArray::from(vec![us("2018-03-24T18:00:00Z")])
                    .with_timezone("UTC"),
            ),
            Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
                Some(vec![Some(200), Some(300)]),
            ])),
            Arc::new(StringArray::from(vec!["c.example"])),
            Arc::new(StructArray::new(
                tx2,
                vec![
                    Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
                        Some(vec![Some(9)]),
                    ])) as ArrayRef,
                ],
                None,
            )),
        ],
    )
    .unwrap();
    write_file(
        lake,
        "suricata.dns",
        "dt=2018-03-24/hour=17",
        "a",
        store1,
        &b1,
        10,
        &[],
    );
    write_file(
        lake,
        "suricata.dns",
        "dt=2018-03-24/hour=18",
        "b",
        store2,
        &b2,
        10,
        &[],
    );
}

#[tokio::test]
async fn scalar_to_list_and_conflicts_to_json_text() {
    for (s1, s2) in [
        (Store::Parquet, Store::Parquet),
        (Store::Feather, Store::Feather),
        (Store::Parquet, Store::Feather),
    ] {
        let dir = tempfile::tempdir().unwrap();
        write_evolving_eve(dir.path(), s1, s2);
        let s = silt_query::open(dir.path()).await.unwrap();
        let r = q(
            &s,
            "SELECT vlan, answers, tx.id FROM suricata.dns ORDER BY timestamp",
        )
        .await;
        let want = "vlan,answers,tx.id\n\
                    [100],\"{\"\"rrname\"\":\"\"a.example\"\"}\",[7]\n\
                    ,\"{\"\"rrname\"\":\"\"b.example\"\"}\",[8]\n\
                    \"[200,300]\",c.example,[9]\n";
        assert_eq!(csv(&r), want, "{s1:?}/{s2:?}");
        // Predicates on adapted columns see the adapted values.
        let r = q(
            &s,
            "SELECT count(*) FROM suricata.dns WHERE answers LIKE '%a.example%' OR array_has(vlan, 300)",
        )
        .await;
        assert_eq!(csv(&r), "count(*)\n2\n", "{s1:?}/{s2:?}");
    }
}

// ------------------------------------------------------------------ output formats

#[tokio::test]
async fn output_formats() {
    let dir = tempfile::tempdir().unwrap();
    build_small_lake(dir.path(), |_| Store::Parquet);
    let s = silt_query::open(dir.path()).await.unwrap();
    let r = q(
        &s,
        "SELECT uid, ts, id, service, duration FROM zeek.conn WHERE uid IN ('C1', 'C10') ORDER BY uid",
    )
    .await;
    let out = |f: OutputFormat| {
        let mut v = Vec::new();
        r.write(f, &mut v).unwrap();
        v
    };
    let text = |f| String::from_utf8(out(f)).unwrap();

    assert_eq!(
        text(OutputFormat::Csv),
        "uid,ts,id,service,duration\n\
         C1,2018-03-24T17:00:05.000000Z,\"{\"\"orig_h\"\":\"\"10.0.0.1\"\",\"\"orig_p\"\":50001,\"\"resp_h\"\":\"\"93.184.216.34\"\",\"\"resp_p\"\":80}\",http,1.5\n\
         C10,,\"{\"\"orig_h\"\":\"\"10.0.0.4\"\",\"\"orig_p\"\":1234,\"\"resp_h\"\":\"\"10.0.0.5\"\",\"\"resp_p\"\":80}\",http,\n"
    );

    let row1 = r#"{"uid":"C1","ts":"2018-03-24T17:00:05.000000Z","id":{"orig_h":"10.0.0.1","orig_p":50001,"resp_h":"93.184.216.34","resp_p":80,"vlan":null},"service":"http","duration":1.5}"#;
    let row2 = r#"{"uid":"C10","ts":null,"id":{"orig_h":"10.0.0.4","orig_p":1234,"resp_h":"10.0.0.5","resp_p":80,"vlan":null},"service":"http","duration":null}"#;
    assert_eq!(text(OutputFormat::Ndjson), format!("{row1}\n{row2}\n"));
    let json: serde_json::Value = serde_json::from_str(&text(OutputFormat::Json)).unwrap();
    let expect: serde_json::Value = serde_json::from_str(&format!("[{row1},{row2}]")).unwrap();
    assert_eq!(json, expect);

    let table = text(OutputFormat::Table);
    assert!(
        table.starts_with("+-----+-----------------------------+"),
        "{table}"
    );
    assert!(
        table.contains("| C10 | NULL                        |"),
        "{table}"
    );
    assert!(table.contains("| 2018-03-24T17:00:05.000000Z |"), "{table}");

    // Parquet: read back, same rows and types.
    let pq_path = dir.path().join("out.parquet");
    std::fs::write(&pq_path, out(OutputFormat::Parquet)).unwrap();
    let file = std::fs::File::open(&pq_path).unwrap();
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(file, 1024).unwrap();
    let back: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    let back = arrow::compute::concat_batches(&back[0].schema(), &back).unwrap();
    let orig = arrow::compute::concat_batches(&r.schema, &r.batches).unwrap();
    assert_eq!(back.columns(), orig.columns());

    // Streaming gives the same bytes and the same statistics.
    for f in OutputFormat::ALL {
        let sql = "SELECT uid, ts, id, service, duration FROM zeek.conn WHERE uid IN ('C1', 'C10') ORDER BY uid";
        let mut v = Vec::new();
        let (rows, stats) = s.query_to_writer(sql, f, &mut v).await.unwrap();
        assert_eq!(rows, 2);
        assert_eq!(stats.files_selected, r.stats.files_selected);
        if f != OutputFormat::Parquet {
            assert_eq!(v, out(f), "{f}");
        }
    }

    // Empty results keep their header.
    let e = q(&s, "SELECT uid, ts FROM zeek.conn WHERE uid = 'nope'").await;
    let mut v = Vec::new();
    e.write(OutputFormat::Csv, &mut v).unwrap();
    assert_eq!(String::from_utf8(v).unwrap(), "uid,ts\n");
    let mut v = Vec::new();
    e.write(OutputFormat::Json, &mut v).unwrap();
    assert_eq!(String::from_utf8(v).unwrap(), "[]\n");
    let mut v = Vec::new();
    e.write(OutputFormat::Table, &mut v).unwrap();
    assert!(String::from_utf8(v).unwrap().contains("| uid | ts |"));
}

#[tokio::test]
async fn many_files() {
    // Enough files for the footers to be read on several threads; every one must be found.
    let dir = tempfile::tempdir().unwrap();
    for i in 0..70 {
        let store = if i % 3 == 0 {
            Store::Feather
        } else {
            Store::Parquet
        };
        let b = http_batch(&HTTP_DAY2[..1 + i % 2]);
        write_file(
            dir.path(),
            "zeek.http",
            "",
            &format!("f{i:02}"),
            store,
            &b,
            10,
            &[],
        );
    }
    let s = silt_query::open(dir.path()).await.unwrap();
    let r = q(&s, "SELECT count(*), count(DISTINCT uid) FROM zeek.http").await;
    // 35 files with one row, 35 with two.
    assert_eq!(csv(&r), "count(*),count(DISTINCT zeek.http.uid)\n105,2\n");
    assert_eq!(r.stats.files_total, 70);
}

#[tokio::test]
async fn queries_are_read_only_unless_writing_is_allowed() {
    let dir = tempfile::tempdir().unwrap();
    build_small_lake(dir.path(), |_| Store::Parquet);
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("copy.parquet");
    let copy = format!(
        "COPY (SELECT uid FROM zeek.conn) TO '{}' STORED AS PARQUET",
        target.display()
    );
    let s = silt_query::open(dir.path()).await.unwrap();
    for sql in [
        copy.as_str(),
        "CREATE EXTERNAL TABLE pw (line VARCHAR) STORED AS CSV LOCATION '/etc/passwd'",
        "CREATE TABLE t AS SELECT 1",
        "DROP TABLE zeek.conn",
        "SET datafusion.execution.batch_size = 1",
    ] {
        let e = s.query(sql).await.expect_err(sql);
        assert!(
            format!("{e:#}").contains("queries are read-only"),
            "{sql}: {e:#}"
        );
    }
    assert!(!target.exists(), "a refused COPY wrote nothing");
    // Reading stays allowed, EXPLAIN too.
    q(&s, "SELECT count(*) FROM zeek.conn").await;
    q(&s, "EXPLAIN SELECT count(*) FROM zeek.conn").await;
    // With writing allowed, COPY writes the file the user named; DDL is still refused.
    let s = silt_query::open(dir.path())
        .await
        .unwrap()
        .allow_write(true);
    q(&s, &copy).await;
    assert!(target.exists());
    assert!(s
        .query("CREATE EXTERNAL TABLE pw (line VARCHAR) STORED AS CSV LOCATION '/etc/passwd'")
        .await
        .is_err());
}

/// Files are left out by their footer bounds only where the bounds speak for the table's type:
/// a file storing a column as another type (unified to the table's), a file without the
/// column, and files with only nulls in it are all answered right, and the needles still find
/// their file.
#[tokio::test]
async fn file_bounds_prune_only_what_cannot_match() {
    let dir = tempfile::tempdir().unwrap();
    let batch = |cols: Vec<(&str, ArrayRef)>| {
        let fields: Vec<Field> = cols
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            cols.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap()
    };
    let name = |v: &[&str]| -> ArrayRef { Arc::new(StringArray::from(v.to_vec())) };
    let files: Vec<(&str, RecordBatch)> = vec![
        // x as Int32 here, Int64 elsewhere: the table's x is Int64.
        (
            "a",
            batch(vec![
                ("x", Arc::new(arrow::array::Int32Array::from(vec![1, 2, 3]))),
                ("n", name(&["a1", "a2", "a3"])),
            ]),
        ),
        (
            "b",
            batch(vec![
                ("x", Arc::new(Int64Array::from(vec![100, 101, 102]))),
                ("n", name(&["b1", "b2", "b3"])),
            ]),
        ),
        // No x at all.
        ("c", batch(vec![("n", name(&["c1", "c2"]))])),
        // Only nulls in x.
        (
            "d",
            batch(vec![
                ("x", Arc::new(Int64Array::from(vec![None, None]))),
                ("n", name(&["d1", "d2"])),
            ]),
        ),
    ];
    for (f, b) in &files {
        write_file(dir.path(), "t.b", "", f, Store::Parquet, b, 10, &[]);
    }
    let s = silt_query::open(dir.path()).await.unwrap();
    for (sql, want, files) in [
        ("SELECT n FROM t.b WHERE x = 2", "n\na2\n", 1),
        // The Int32 file's bounds are not used: it is always read for x.
        ("SELECT n FROM t.b WHERE x = 101", "n\nb2\n", 2),
        (
            "SELECT n FROM t.b WHERE x > 2 AND x < 101 ORDER BY n",
            "n\na3\nb1\n",
            2,
        ),
        ("SELECT n FROM t.b WHERE x = 7", "n\n", 1),
        ("SELECT count(*) AS c FROM t.b WHERE x IS NULL", "c\n4\n", 3),
        ("SELECT n FROM t.b WHERE n = 'c2'", "n\nc2\n", 1),
        (
            "SELECT n FROM t.b WHERE n = 'c2' OR x = 100 ORDER BY n",
            "n\nb1\nc2\n",
            3,
        ),
    ] {
        let r = q(&s, sql).await;
        assert_eq!(csv(&r), want, "{sql}");
        assert_eq!(r.stats.files_selected, files, "{sql}: {}", r.stats);
    }
}

/// Prepared statements' parameters: `?` and `$n` placeholders, their inferred types, values
/// bound (and cast) per execution, and the errors for unbound or wrong values.
#[tokio::test]
async fn parameters_are_typed_bound_and_checked() {
    use futures::TryStreamExt;
    let dir = tempfile::tempdir().unwrap();
    build_dns_lake(dir.path(), Store::Parquet, "hour");
    let s = silt_query::open(dir.path()).await.unwrap();
    let sql = "SELECT uid, query FROM zeek.dns WHERE uid = ? OR query = ? -- a '?' here stays";
    let (schema, params) = s.prepare(sql).await.unwrap();
    assert_eq!(
        schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect::<Vec<_>>(),
        ["uid", "query"]
    );
    assert_eq!(
        params
            .iter()
            .map(|f| (f.name().as_str(), f.data_type().clone()))
            .collect::<Vec<_>>(),
        [("$1", DataType::Utf8), ("$2", DataType::Utf8)]
    );
    let bound = |a: &str, b: &str| {
        RecordBatch::try_from_iter([
            ("a", Arc::new(StringArray::from(vec![a])) as ArrayRef),
            ("b", Arc::new(StringArray::from(vec![b])) as ArrayRef),
        ])
        .unwrap()
    };
    let rows = |values: RecordBatch| {
        let s = &s;
        async move {
            let (_, stream) = s.query_stream(sql, Some(&values)).await?;
            let batches: Vec<RecordBatch> = stream.try_collect().await?;
            anyhow::Ok(batches.iter().map(RecordBatch::num_rows).sum::<usize>())
        }
    };
    assert_eq!(rows(bound("H17U000", "nothing")).await.unwrap(), 1);
    assert_eq!(rows(bound("H18U002", "q5.example")).await.unwrap(), 4);
    assert_eq!(
        s.schema_of(sql, Some(&bound("x", "y"))).await.unwrap(),
        schema
    );
    // Unbound, too few values, two rows: errors that say so.
    let e = format!("{:#}", s.query(sql).await.unwrap_err());
    assert!(e.contains("has parameters ($1, $2)"), "{e}");
    let one =
        RecordBatch::try_from_iter([("a", Arc::new(StringArray::from(vec!["x"])) as ArrayRef)])
            .unwrap();
    let e = format!("{:#}", rows(one).await.unwrap_err());
    assert!(e.contains("2 parameter(s) and 1 value(s)"), "{e}");
    let two = RecordBatch::try_from_iter([
        ("a", Arc::new(StringArray::from(vec!["x", "y"])) as ArrayRef),
        ("b", Arc::new(StringArray::from(vec!["x", "y"])) as ArrayRef),
    ])
    .unwrap();
    let e = format!("{:#}", rows(two).await.unwrap_err());
    assert!(e.contains("bind one row per execution"), "{e}");
    // `$n` as DataFusion writes them; an integer value for a string parameter is cast, a
    // string that is no timestamp for a timestamp parameter is refused with the reason.
    let (_, p) = s
        .prepare("SELECT count(*) FROM zeek.dns WHERE ts >= $1 AND uid <> $2")
        .await
        .unwrap();
    assert_eq!(p.len(), 2);
    assert!(matches!(p[0].data_type(), DataType::Timestamp(..)), "{p:?}");
    let values = RecordBatch::try_from_iter([
        (
            "t",
            Arc::new(StringArray::from(vec!["2018-03-24T19:00:00Z"])) as ArrayRef,
        ),
        ("u", Arc::new(Int64Array::from(vec![5])) as ArrayRef),
    ])
    .unwrap();
    let (_, st) = s
        .query_stream(
            "SELECT count(*) AS n FROM zeek.dns WHERE ts >= $1 AND uid <> $2",
            Some(&values),
        )
        .await
        .unwrap();
    let b: Vec<RecordBatch> = st.try_collect().await.unwrap();
    let n = b[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert_eq!(n.value(0), 100);
    let bad = RecordBatch::try_from_iter([
        (
            "t",
            Arc::new(StringArray::from(vec!["yesterday"])) as ArrayRef,
        ),
        ("u", Arc::new(StringArray::from(vec!["x"])) as ArrayRef),
    ])
    .unwrap();
    let e = format!(
        "{:#}",
        s.schema_of(
            "SELECT 1 FROM zeek.dns WHERE ts >= ? AND uid <> ?",
            Some(&bad)
        )
        .await
        .unwrap_err()
    );
    assert!(e.contains("parameter $1") && e.contains("yesterday"), "{e}");
}
