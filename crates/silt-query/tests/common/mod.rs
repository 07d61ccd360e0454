//! Builds small lakes for the tests by writing Parquet and Feather files directly with the
//! parquet/arrow crates, in the layout silt-lake writes (`<table>/dt=/hour=/<file>`), with the
//! schema metadata silt-lake stores (`silt.time_column`, `silt.table`, `silt.lookup_columns`,
//! field `silt.source_type`).
//!
//! The "small lake" rows are listed literally below, so the expected answers in the golden
//! `.slt` files can be checked by hand against this file.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray, StructArray,
    TimestampMicrosecondArray, UInt16Array, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

/// How a test file is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    Parquet,
    Feather,
}

pub fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// UTC micros of an ISO 8601 time.
pub fn us(s: &str) -> i64 {
    silt_core::time::parse_iso8601(s).unwrap_or_else(|| panic!("bad time {s}"))
}

fn f(name: &str, t: DataType, source: &str) -> Field {
    Field::new(name, t, true)
        .with_metadata(HashMap::from([("silt.source_type".into(), source.into())]))
}

fn table_meta(table: &str, time: &str, lookup: &str) -> HashMap<String, String> {
    HashMap::from([
        ("silt.table".into(), table.into()),
        ("silt.time_column".into(), time.into()),
        ("silt.lookup_columns".into(), lookup.into()),
    ])
}

/// Writes one data file `<lake>/<table>/<rel_dir>/<name>.<ext>`.
/// Parquet files get row groups of `rg_rows` rows, page statistics, and bloom filters on
/// `bloom` columns (dotted paths for struct members).
#[allow(clippy::too_many_arguments)]
pub fn write_file(
    lake: &Path,
    table: &str,
    rel_dir: &str,
    name: &str,
    store: Store,
    batch: &RecordBatch,
    rg_rows: usize,
    bloom: &[&str],
) {
    let dir = lake.join(table).join(rel_dir);
    std::fs::create_dir_all(&dir).unwrap();
    match store {
        Store::Parquet => {
            let mut props = WriterProperties::builder()
                .set_max_row_group_row_count(Some(rg_rows))
                .set_statistics_enabled(EnabledStatistics::Page)
                .set_data_page_row_count_limit(4)
                .set_write_batch_size(4);
            for c in bloom {
                let path = ColumnPath::new(c.split('.').map(str::to_string).collect());
                props = props
                    .set_column_bloom_filter_enabled(path.clone(), true)
                    .set_column_bloom_filter_fpp(path.clone(), 0.0001)
                    .set_column_bloom_filter_max_ndv(path, 1000);
            }
            let file = File::create(dir.join(format!("{name}.parquet"))).unwrap();
            let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props.build())).unwrap();
            // Write row by row group so that the row-group boundaries are exactly `rg_rows`.
            let mut off = 0;
            while off < batch.num_rows() {
                let n = rg_rows.min(batch.num_rows() - off);
                w.write(&batch.slice(off, n)).unwrap();
                w.flush().unwrap();
                off += n;
            }
            w.close().unwrap();
        }
        Store::Feather => {
            let file = File::create(dir.join(format!("{name}.feather"))).unwrap();
            let opts = arrow::ipc::writer::IpcWriteOptions::default()
                .try_with_compression(Some(arrow::ipc::CompressionType::ZSTD))
                .unwrap();
            let mut w =
                arrow::ipc::writer::FileWriter::try_new_with_options(file, &batch.schema(), opts)
                    .unwrap();
            w.write(batch).unwrap();
            w.finish().unwrap();
        }
    }
}

// ---------------------------------------------------------------- zeek.conn

/// One conn row: ts, uid, orig_h, orig_p, resp_h, resp_p, proto, service, duration,
/// orig_bytes, resp_bytes, community_id (v2 only), vlan (v2 only).
pub type Conn = (
    Option<&'static str>,
    &'static str,
    &'static str,
    u16,
    &'static str,
    u16,
    &'static str,
    Option<&'static str>,
    Option<f64>,
    Option<u64>,
    Option<u64>,
    Option<&'static str>,
    Option<i64>,
);

/// File A: 2018-03-24 hour 17, schema v1.
pub const CONN_A: &[Conn] = &[
    (
        Some("2018-03-24T17:00:05Z"),
        "C1",
        "10.0.0.1",
        50001,
        "93.184.216.34",
        80,
        "tcp",
        Some("http"),
        Some(1.5),
        Some(100),
        Some(2000),
        None,
        None,
    ),
    (
        Some("2018-03-24T17:10:00.25Z"),
        "C2",
        "10.0.0.1",
        50002,
        "93.184.216.34",
        443,
        "tcp",
        Some("ssl"),
        Some(3.0),
        Some(300),
        Some(5000),
        None,
        None,
    ),
    (
        Some("2018-03-24T17:20:00Z"),
        "C3",
        "10.0.0.2",
        53000,
        "8.8.8.8",
        53,
        "udp",
        Some("dns"),
        Some(0.25),
        Some(40),
        Some(120),
        None,
        None,
    ),
    (
        Some("2018-03-24T17:59:59.999999Z"),
        "C4",
        "10.0.0.1",
        50003,
        "93.184.216.34",
        80,
        "tcp",
        Some("http"),
        Some(2.0),
        Some(200),
        Some(1000),
        None,
        None,
    ),
];
/// File B: 2018-03-24 hour 18, schema v2 (adds `community_id` and `id.vlan`).
pub const CONN_B: &[Conn] = &[
    (
        Some("2018-03-24T18:05:00Z"),
        "C5",
        "10.0.0.2",
        53001,
        "8.8.8.8",
        53,
        "udp",
        Some("dns"),
        Some(0.125),
        Some(42),
        Some(130),
        Some("1:aaa"),
        Some(10),
    ),
    (
        Some("2018-03-24T18:30:00Z"),
        "C6",
        "2001:db8::1",
        40000,
        "2001:db8::53",
        53,
        "udp",
        Some("dns"),
        Some(0.5),
        Some(50),
        Some(150),
        Some("1:bbb"),
        None,
    ),
    (
        Some("2018-03-24T18:45:00Z"),
        "C7",
        "10.0.0.3",
        50100,
        "93.184.216.34",
        443,
        "tcp",
        Some("ssl"),
        Some(10.0),
        Some(1000),
        Some(20000),
        None,
        Some(20),
    ),
];
/// File C: 2018-03-25 hour 00, schema v1.
pub const CONN_C: &[Conn] = &[
    (
        Some("2018-03-25T00:15:00Z"),
        "C8",
        "10.0.0.1",
        50004,
        "93.184.216.34",
        80,
        "tcp",
        Some("http"),
        Some(1.0),
        Some(150),
        Some(1500),
        None,
        None,
    ),
    (
        Some("2018-03-25T00:45:00Z"),
        "C9",
        "192.168.1.5",
        60000,
        "10.0.0.1",
        22,
        "tcp",
        None,
        Some(30.0),
        Some(5000),
        Some(4000),
        None,
        None,
    ),
];
/// File D: null time, schema v1.
pub const CONN_D: &[Conn] = &[(
    None,
    "C10",
    "10.0.0.4",
    1234,
    "10.0.0.5",
    80,
    "tcp",
    Some("http"),
    None,
    None,
    None,
    None,
    None,
)];

fn id_fields(v2: bool) -> Fields {
    let mut v = vec![
        f("orig_h", DataType::Utf8, "addr"),
        f("orig_p", DataType::UInt16, "port"),
        f("resp_h", DataType::Utf8, "addr"),
        f("resp_p", DataType::UInt16, "port"),
    ];
    if v2 {
        v.push(f("vlan", DataType::Int64, "int"));
    }
    v.into()
}

/// conn rows as a batch; v1 stores `orig_bytes` as UInt32 (an "older writer"), v2 as UInt64
/// and adds `community_id` and `id.vlan`.
pub fn conn_batch(rows: &[Conn], v2: bool) -> RecordBatch {
    let idf = id_fields(v2);
    let mut fields = vec![
        f("ts", ts_type(), "time"),
        f("uid", DataType::Utf8, "string"),
        Field::new("id", DataType::Struct(idf.clone()), true),
        f("proto", DataType::Utf8, "enum"),
        f("service", DataType::Utf8, "string"),
        f("duration", DataType::Float64, "interval"),
        f(
            "orig_bytes",
            if v2 {
                DataType::UInt64
            } else {
                DataType::UInt32
            },
            "count",
        ),
        f("resp_bytes", DataType::UInt64, "count"),
    ];
    if v2 {
        fields.push(f("community_id", DataType::Utf8, "string"));
    }
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        table_meta("zeek.conn", "ts", "uid,id.orig_h,id.resp_h"),
    ));
    let mut id_cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
        Arc::new(UInt16Array::from_iter_values(rows.iter().map(|r| r.3))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.4))),
        Arc::new(UInt16Array::from_iter_values(rows.iter().map(|r| r.5))),
    ];
    if v2 {
        id_cols.push(Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.12))));
    }
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(
            TimestampMicrosecondArray::from_iter(rows.iter().map(|r| r.0.map(us)))
                .with_timezone("UTC"),
        ),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(StructArray::new(idf, id_cols, None)),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.6))),
        Arc::new(StringArray::from_iter(rows.iter().map(|r| r.7))),
        Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.8))),
        if v2 {
            Arc::new(UInt64Array::from_iter(rows.iter().map(|r| r.9)))
        } else {
            Arc::new(UInt32Array::from_iter(
                rows.iter().map(|r| r.9.map(|v| v as u32)),
            ))
        },
        Arc::new(UInt64Array::from_iter(rows.iter().map(|r| r.10))),
    ];
    if v2 {
        cols.push(Arc::new(StringArray::from_iter(rows.iter().map(|r| r.11))));
    }
    RecordBatch::try_new(schema, cols).unwrap()
}

// ---------------------------------------------------------------- zeek.http

/// ts, uid, method, host, uri, status_code.
pub type Http = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    u64,
);

pub const HTTP_17: &[Http] = &[
    (
        "2018-03-24T17:00:05.1Z",
        "C1",
        "GET",
        "example.com",
        "/index.html",
        200,
    ),
    (
        "2018-03-24T17:00:06Z",
        "C1",
        "GET",
        "example.com",
        "/favicon.ico",
        404,
    ),
];
pub const HTTP_18: &[Http] = &[(
    "2018-03-24T18:00:00.5Z",
    "C4",
    "GET",
    "example.com",
    "/a.js",
    200,
)];
pub const HTTP_DAY2: &[Http] = &[
    (
        "2018-03-25T00:15:01Z",
        "C8",
        "POST",
        "api.example.com",
        "/login",
        302,
    ),
    ("2018-03-25T00:16:00Z", "CX", "GET", "other.org", "/", 200),
];

pub fn http_batch(rows: &[Http]) -> RecordBatch {
    let schema = Arc::new(Schema::new_with_metadata(
        vec![
            f("ts", ts_type(), "time"),
            f("uid", DataType::Utf8, "string"),
            f("method", DataType::Utf8, "string"),
            f("host", DataType::Utf8, "string"),
            f("uri", DataType::Utf8, "string"),
            f("status_code", DataType::UInt64, "count"),
        ],
        table_meta("zeek.http", "ts", "uid"),
    ));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(rows.iter().map(|r| us(r.0)))
                    .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.4))),
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.5))),
        ],
    )
    .unwrap()
}

// ---------------------------------------------------------------- suricata

/// timestamp, flow_id, src_ip, dest_ip, signature_id, signature, severity.
pub type Alert = (
    &'static str,
    u64,
    &'static str,
    &'static str,
    i64,
    &'static str,
    i64,
);

pub const ALERTS_17: &[Alert] = &[
    (
        "2018-03-24T17:00:05.5Z",
        1001,
        "10.0.0.1",
        "93.184.216.34",
        2001,
        "ET POLICY curl UA",
        3,
    ),
    (
        "2018-03-24T17:20:00.1Z",
        1002,
        "10.0.0.2",
        "8.8.8.8",
        2002,
        "ET DNS query",
        2,
    ),
];
pub const ALERTS_18: &[Alert] = &[
    (
        "2018-03-24T18:45:00.2Z",
        1003,
        "10.0.0.3",
        "93.184.216.34",
        2001,
        "ET POLICY curl UA",
        3,
    ),
    (
        "2018-03-24T18:46:00Z",
        9999,
        "10.0.0.9",
        "10.0.0.1",
        2003,
        "ET SCAN",
        1,
    ),
];

pub fn alert_batch(rows: &[Alert]) -> RecordBatch {
    let af: Fields = vec![
        Field::new("signature_id", DataType::Int64, true),
        Field::new("signature", DataType::Utf8, true),
        Field::new("severity", DataType::Int64, true),
    ]
    .into();
    let schema = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("timestamp", ts_type(), true),
            Field::new("flow_id", DataType::UInt64, true),
            Field::new("src_ip", DataType::Utf8, true),
            Field::new("dest_ip", DataType::Utf8, true),
            Field::new("alert", DataType::Struct(af.clone()), true),
        ],
        table_meta("suricata.alert", "timestamp", "flow_id"),
    ));
    let alert = StructArray::new(
        af,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.4))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.5))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.6))),
        ],
        None,
    );
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(rows.iter().map(|r| us(r.0)))
                    .with_timezone("UTC"),
            ),
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.3))),
            Arc::new(alert),
        ],
    )
    .unwrap()
}

/// timestamp, flow_id, pkts_toserver, pkts_toclient, bytes_toserver, bytes_toclient.
pub type Flow = (&'static str, u64, i64, i64, i64, i64);

pub const FLOWS_17: &[Flow] = &[
    ("2018-03-24T17:00:10Z", 1001, 10, 12, 1000, 9000),
    ("2018-03-24T17:20:01Z", 1002, 1, 1, 80, 200),
];
pub const FLOWS_18: &[Flow] = &[("2018-03-24T18:50:00Z", 1003, 50, 60, 5000, 70000)];

pub fn flow_batch(rows: &[Flow]) -> RecordBatch {
    let ff: Fields = vec![
        Field::new("pkts_toserver", DataType::Int64, true),
        Field::new("pkts_toclient", DataType::Int64, true),
        Field::new("bytes_toserver", DataType::Int64, true),
        Field::new("bytes_toclient", DataType::Int64, true),
    ]
    .into();
    let schema = Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("timestamp", ts_type(), true),
            Field::new("flow_id", DataType::UInt64, true),
            Field::new("flow", DataType::Struct(ff.clone()), true),
        ],
        table_meta("suricata.flow", "timestamp", "flow_id"),
    ));
    let flow = StructArray::new(
        ff,
        vec![
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.2))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.4))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.5))),
        ],
        None,
    );
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(rows.iter().map(|r| us(r.0)))
                    .with_timezone("UTC"),
            ),
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(flow),
        ],
    )
    .unwrap()
}

const H17: &str = "dt=2018-03-24/hour=17";
const H18: &str = "dt=2018-03-24/hour=18";
const D2H00: &str = "dt=2018-03-25/hour=00";
const NULLP: &str = "dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__";

/// The small lake: zeek.conn (4 files, 2 schemas, a null-time partition), zeek.http (3 files),
/// suricata.alert and suricata.flow (2 files each). `pick(i)` chooses the store of the i-th file
/// written, so one lake can mix Parquet and Feather within a table. Also writes things that are
/// not tables or not data and must be ignored.
pub fn build_small_lake(lake: &Path, pick: impl Fn(usize) -> Store) {
    let mut i = 0;
    let mut w = |table: &str, dir: &str, batch: RecordBatch, bloom: &[&str]| {
        write_file(
            lake,
            table,
            dir,
            &format!("part-{i:03}"),
            pick(i),
            &batch,
            2,
            bloom,
        );
        i += 1;
    };
    w(
        "zeek.conn",
        H17,
        conn_batch(CONN_A, false),
        &["uid", "id.orig_h"],
    );
    w(
        "zeek.conn",
        H18,
        conn_batch(CONN_B, true),
        &["uid", "id.orig_h"],
    );
    w(
        "zeek.conn",
        D2H00,
        conn_batch(CONN_C, false),
        &["uid", "id.orig_h"],
    );
    w(
        "zeek.conn",
        NULLP,
        conn_batch(CONN_D, false),
        &["uid", "id.orig_h"],
    );
    w("zeek.http", H17, http_batch(HTTP_17), &["uid"]);
    w("zeek.http", H18, http_batch(HTTP_18), &["uid"]);
    w("zeek.http", D2H00, http_batch(HTTP_DAY2), &["uid"]);
    w("suricata.alert", H17, alert_batch(ALERTS_17), &["flow_id"]);
    w("suricata.alert", H18, alert_batch(ALERTS_18), &["flow_id"]);
    w("suricata.flow", H17, flow_batch(FLOWS_17), &["flow_id"]);
    w("suricata.flow", H18, flow_batch(FLOWS_18), &["flow_id"]);
    // Must be ignored: an in-progress file, a rejects directory, a hidden directory, a marker.
    let junk = lake.join("zeek.conn").join(H17).join(".part-999.parquet");
    std::fs::write(junk, b"not parquet").unwrap();
    std::fs::create_dir_all(lake.join("_rejects/zeek.conn")).unwrap();
    std::fs::write(lake.join("_rejects/zeek.conn/x.ndjson"), b"{}").unwrap();
    std::fs::create_dir_all(lake.join(".tmp/zeek.conn")).unwrap();
    std::fs::write(lake.join("zeek.conn/_SUCCESS"), b"").unwrap();
}
