//! Round trips with value checks: LTSV, TSV, Docker json-file (corpus), syslog (hand-written and
//! corpus lines), Avro logical types, `--schema` with Avro and BigQuery schemas, MessagePack
//! fluentd entries. Expected values are written out from the inputs, not taken from the code.

mod common;

use std::sync::Arc;

use apache_avro::types::{Record, Value as AV};
use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Int64Type};
use common::{collect, one_table, strings};
use silt_logs::{LogFormat, LogOptions, TargetSchema, TimeUnit};

#[test]
fn ltsv_values_and_types() {
    let text =
        "time:2024-01-01T00:00:01Z\thost:10.0.0.1\tstatus:200\tsize:123\tua:Mozilla/5.0 (X11)\n\
                time:2024-01-01T00:00:02Z\thost:10.0.0.2\tstatus:404\tsize:\tua:curl/8.0\n\
                no label here\n\
                time:2024-01-01T00:00:03Z\thost:10.0.0.3\tstatus:200\tsize:7\textra:x:y\n";
    let (out, r) = collect(LogFormat::Ltsv, text.as_bytes(), &LogOptions::default());
    r.unwrap();
    assert_eq!(out.rejects.len(), 1);
    assert_eq!(out.rejects[0].line, 3);
    let b = one_table(&out);
    assert_eq!(b.num_rows(), 3);
    assert_eq!(out.batches.keys().next().unwrap().to_string(), "ltsv.input");
    assert_eq!(
        b.schema().field_with_name("status").unwrap().data_type(),
        &DataType::Int64
    );
    assert_eq!(strings(&b, "status"), ["200", "404", "200"]);
    assert_eq!(strings(&b, "size"), ["123", "NULL", "7"]);
    assert_eq!(strings(&b, "ua"), ["Mozilla/5.0 (X11)", "curl/8.0", "NULL"]);
    // The value keeps everything after the first ':'.
    assert_eq!(strings(&b, "extra"), ["NULL", "NULL", "x:y"]);
    assert_eq!(
        strings(&b, "time"),
        [
            "2024-01-01T00:00:01Z",
            "2024-01-01T00:00:02Z",
            "2024-01-01T00:00:03Z"
        ]
    );
    assert_eq!(
        b.schema()
            .metadata()
            .get("silt.time_column")
            .map(String::as_str),
        Some("time")
    );
}

#[test]
fn tsv_values_types_and_bad_rows() {
    let text = "date\tname\tvalue\tflag\n\
                2024-02-01 10:00:00\talpha\t1.5\ttrue\n\
                2024-02-01 11:00:00\tbeta gamma\t2\tfalse\n\
                2024-02-01 12:00:00\tdelta\n\
                2024-02-01 13:00:00\t\"quoted\"\t-3\ttrue\n";
    let (out, r) = collect(LogFormat::Tsv, text.as_bytes(), &LogOptions::default());
    r.unwrap();
    assert_eq!(out.rejects.len(), 1);
    assert_eq!(out.rejects[0].line, 4);
    assert_eq!(out.rejects[0].reason, "expected 4 fields, found 2");
    let b = one_table(&out);
    assert_eq!(b.num_rows(), 3);
    assert_eq!(
        b.schema().field_with_name("value").unwrap().data_type(),
        &DataType::Float64
    );
    assert_eq!(
        b.schema().field_with_name("flag").unwrap().data_type(),
        &DataType::Boolean
    );
    // TSV has no quoting: quotes are data.
    assert_eq!(strings(&b, "name"), ["alpha", "beta gamma", "\"quoted\""]);
    assert_eq!(strings(&b, "value"), ["1.5", "2.0", "-3.0"]);
    assert_eq!(
        strings(&b, "date"),
        [
            "2024-02-01T10:00:00Z",
            "2024-02-01T11:00:00Z",
            "2024-02-01T13:00:00Z"
        ]
    );
}

#[test]
fn csv_no_header_and_delimiter() {
    let text = "1;a;x\n2;b;y\n";
    let lo = LogOptions {
        no_header: true,
        delimiter: Some(b';'),
        ..LogOptions::default()
    };
    let (out, r) = collect(LogFormat::Csv, text.as_bytes(), &lo);
    r.unwrap();
    let b = one_table(&out);
    assert_eq!(strings(&b, "c1"), ["1", "2"]);
    assert_eq!(strings(&b, "c3"), ["x", "y"]);
}

/// Docker json-file samples from the corpus (fluent-bit tests). Expected records were counted
/// by hand from the files (see PROVENANCE.md): partial records join until a `log` ends in `\n`.
#[test]
fn docker_corpus() {
    let Some(c) = common::corpus() else { return };
    let dir = c.join("weblogs/docker-json-file");
    let cases: &[(&str, &[&str])] = &[
        (
            "fluent-bit-apache-logs.log",
            &["20.38.166.115 - - [21/Feb/2018:17:26:53 +0000] \"GET /intra-abdominally HTTP/1.0\" 500 2216"],
        ),
        (
            "fluent-bit-dockermode_splitted_line.log",
            &["2020-03-24 Single line", "2020-03-24 Another single line"],
        ),
        (
            "fluent-bit-dockermode_splitted_multiple_lines.log",
            &[
                "2020-03-24 Multiple lines: ",
                "first bullet point",
                "second bullet point",
                "third bullet point",
                "fourth bullet point",
                "2020-03-24 Single line",
            ],
        ),
        (
            "fluent-bit-stderr_stdout.log",
            &[
                "[2019-04-05T14:54:23.584269761] Simple text",
                "[2019-04-05T14:54:23.584269761] Simple text",
            ],
        ),
    ];
    for (file, logs) in cases {
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let (out, r) = collect(LogFormat::Docker, &bytes, &LogOptions::default());
        r.unwrap();
        assert!(out.rejects.is_empty(), "{file}: {:?}", out.rejects);
        assert_eq!(
            out.batches.keys().next().unwrap().to_string(),
            "docker.logs"
        );
        let b = one_table(&out);
        let got = strings(&b, "log");
        assert_eq!(got, *logs, "{file}");
    }
    // Nanosecond times are truncated to microseconds; streams are kept.
    let bytes = std::fs::read(dir.join("fluent-bit-stderr_stdout.log")).unwrap();
    let (out, _) = collect(LogFormat::Docker, &bytes, &LogOptions::default());
    let b = one_table(&out);
    assert_eq!(strings(&b, "stream"), ["stderr", "stdout"]);
    assert_eq!(
        strings(&b, "time"),
        ["2019-04-01T17:58:33.698656Z", "2019-04-01T17:58:33.598656Z"]
    );
    // Deep escaping survives: the log equals the JSON string value minus its trailing newline.
    for file in [
        "fluent-bit-core_unescaping_json.log",
        "fluent-bit-core_unescaping_text.log",
        "fluent-bit-istio-proxy.log",
        "fluent-bit-merge-log-trim_json.log",
        "fluent-bit-json-logs-invalid.log",
    ] {
        let bytes = std::fs::read(dir.join(file)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let want = v["log"]
            .as_str()
            .unwrap()
            .strip_suffix('\n')
            .unwrap()
            .to_string();
        let (out, r) = collect(LogFormat::Docker, &bytes, &LogOptions::default());
        r.unwrap();
        assert!(out.rejects.is_empty(), "{file}");
        assert_eq!(strings(&one_table(&out), "log"), [want], "{file}");
    }
}

#[test]
fn docker_partials_join_per_stream() {
    let text = r#"{"log":"out-a ","stream":"stdout","time":"2024-01-01T00:00:00.000000001Z"}
{"log":"err-1\n","stream":"stderr","time":"2024-01-01T00:00:01Z"}
{"log":"out-b\n","stream":"stdout","time":"2024-01-01T00:00:02Z"}
{"log":"dangling","stream":"stdout","time":"2024-01-01T00:00:03Z"}
{"stream":"stdout"}
"#;
    let (out, r) = collect(LogFormat::Docker, text.as_bytes(), &LogOptions::default());
    r.unwrap();
    assert_eq!(out.rejects.len(), 1);
    assert_eq!(out.rejects[0].line, 5);
    let b = one_table(&out);
    assert_eq!(strings(&b, "log"), ["err-1", "out-a out-b", "dangling"]);
    // A joined record keeps its first part's time.
    assert_eq!(strings(&b, "time")[1], "2024-01-01T00:00:00Z");
}

#[test]
fn syslog_5424_and_3164() {
    let text = "<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut=\"3\" eventSource=\"Application\"] An application event\n\
                <34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8\n";
    let lo = LogOptions {
        syslog_year: Some(2023),
        ..LogOptions::default()
    };
    let (out, r) = collect(LogFormat::Syslog, text.as_bytes(), &lo);
    r.unwrap();
    assert!(out.rejects.is_empty());
    let b = one_table(&out);
    assert_eq!(
        strings(&b, "timestamp"),
        ["2003-10-11T22:14:15.003Z", "2023-10-11T22:14:15Z"]
    );
    // 165 = local4 (20) * 8 + notice (5); 34 = auth (4) * 8 + crit (2).
    assert_eq!(strings(&b, "facility"), ["local4", "auth"]);
    assert_eq!(strings(&b, "severity"), ["notice", "crit"]);
    assert_eq!(
        strings(&b, "hostname"),
        ["mymachine.example.com", "mymachine"]
    );
    assert_eq!(strings(&b, "appname"), ["evntslog", "su"]);
    assert_eq!(strings(&b, "msgid"), ["ID47", "NULL"]);
    assert_eq!(
        strings(&b, "structured_data")[0],
        r#"{"exampleSDID@32473":{"iut":"3","eventSource":"Application"}}"#
    );
    assert_eq!(
        strings(&b, "message"),
        [
            "An application event",
            "'su root' failed for lonvick on /dev/pts/8"
        ]
    );
}

#[test]
fn syslog_corpus() {
    let Some(c) = common::corpus() else { return };
    let bytes = std::fs::read(c.join("weblogs/lnav-syslog_with_access_log.0")).unwrap();
    let lo = LogOptions {
        syslog_year: Some(2009),
        ..LogOptions::default()
    };
    let (out, r) = collect(LogFormat::Syslog, &bytes, &lo);
    r.unwrap();
    // 5 lines; every one is kept (as a row or a reject).
    assert_eq!(out.total_rows() + out.rejects.len(), 5);
    let b = one_table(&out);
    let hosts = strings(&b, "hostname");
    assert_eq!(
        hosts[..4],
        [
            "veridian",
            "bigproduct-web1",
            "bigproduct-web1",
            "bigproduct-web1"
        ]
    );
    assert_eq!(
        strings(&b, "appname")[..4],
        ["sudo", "tomcat.log", "tomcat.log", "automount"]
    );
    assert_eq!(strings(&b, "procid")[3], "7999");
    assert_eq!(strings(&b, "timestamp")[0], "2009-01-03T09:47:02Z");
    assert_eq!(
        strings(&b, "message")[2],
        "127.0.0.1 - - \"GET /bad.foo HTTP/1.1\" 404 65508 4.386"
    );
}

#[test]
fn avro_logical_types() {
    let schema = apache_avro::Schema::parse_str(
        r#"{"type":"record","name":"r","fields":[
            {"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}},
            {"name":"d","type":{"type":"int","logicalType":"date"}},
            {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
            {"name":"tod","type":{"type":"long","logicalType":"time-micros"}},
            {"name":"n32","type":"int"},
            {"name":"color","type":{"type":"enum","name":"c","symbols":["RED","GREEN"]}},
            {"name":"raw","type":"bytes"},
            {"name":"tags","type":{"type":"array","items":"string"}},
            {"name":"attrs","type":{"type":"map","values":"long"}},
            {"name":"inner","type":{"type":"record","name":"i","fields":[{"name":"x","type":["null","double"]}]}}]}"#,
    )
    .unwrap();
    let mut w = apache_avro::Writer::new(&schema, Vec::new()).unwrap();
    let mut rec = Record::new(&schema).unwrap();
    rec.put("t", AV::TimestampMillis(1_700_000_000_123));
    rec.put("d", AV::Date(19_000));
    rec.put(
        "price",
        AV::Decimal(apache_avro::Decimal::from(vec![0xcf, 0xc7])),
    );
    rec.put("tod", AV::TimeMicros(3_600_000_001));
    rec.put("n32", AV::Int(-7));
    rec.put("color", AV::Enum(1, "GREEN".into()));
    rec.put("raw", AV::Bytes(vec![0xde, 0xad]));
    rec.put(
        "tags",
        AV::Array(vec![AV::String("a".into()), AV::String("b".into())]),
    );
    rec.put(
        "attrs",
        AV::Map([("k".to_string(), AV::Long(1))].into_iter().collect()),
    );
    rec.put(
        "inner",
        AV::Record(vec![("x".into(), AV::Union(1, Box::new(AV::Double(2.5))))]),
    );
    w.append_value(rec).unwrap();
    let bytes = w.into_inner().unwrap();
    let (out, r) = collect(LogFormat::Avro, &bytes, &LogOptions::default());
    r.unwrap();
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let b = one_table(&out);
    let s = b.schema();
    assert_eq!(
        s.metadata().get("silt.time_column").map(String::as_str),
        Some("t")
    );
    assert_eq!(
        s.field_with_name("price").unwrap().data_type(),
        &DataType::Decimal128(10, 2)
    );
    assert_eq!(
        s.field_with_name("d").unwrap().data_type(),
        &DataType::Date32
    );
    assert_eq!(
        s.field_with_name("n32").unwrap().data_type(),
        &DataType::Int32
    );
    assert_eq!(strings(&b, "t"), ["2023-11-14T22:13:20.123Z"]);
    // 19000 days after 1970-01-01.
    assert_eq!(strings(&b, "d"), ["2022-01-08"]);
    // 0xcfc7 = -12345 unscaled, scale 2.
    assert_eq!(strings(&b, "price"), ["-123.45"]);
    assert_eq!(strings(&b, "tod"), ["01:00:00.000001"]);
    assert_eq!(strings(&b, "color"), ["GREEN"]);
    assert_eq!(strings(&b, "raw"), ["dead"]);
    assert_eq!(strings(&b, "tags"), ["[a, b]"]);
    assert_eq!(strings(&b, "attrs"), [r#"{"k":1}"#]);
    assert_eq!(strings(&b, "inner"), ["{x: 2.5}"]);
}

fn schema_records() -> &'static str {
    // line 1 ok; 2: status not an int; 3: path (required) missing; 4: ok with an extra field;
    // 5: log_time does not parse.
    r#"{"log_time":1700000000123,"status":200,"path":"/a","ua":null}
{"log_time":1700000001000,"status":"abc","path":"/b"}
{"log_time":1700000002000,"status":404}
{"log_time":1700000003000,"status":500,"path":"/c","ua":"curl","extra":true}
{"log_time":"soon","status":200,"path":"/d"}
"#
}

fn check_schema_run(schema_text: &str) {
    let ts = TargetSchema::parse(schema_text).unwrap();
    let lo = LogOptions {
        schema: Some(Arc::new(ts)),
        time_field: Some("log_time".into()),
        time_unit: Some(TimeUnit::Millis),
        ..LogOptions::default()
    };
    let (out, r) = collect(LogFormat::Json, schema_records().as_bytes(), &lo);
    r.unwrap();
    let lines: Vec<u64> = out.rejects.iter().map(|r| r.line).collect();
    assert_eq!(lines, [2, 3, 5], "{:?}", out.rejects);
    assert!(
        out.rejects[0].reason.contains("field status"),
        "{}",
        out.rejects[0].reason
    );
    assert!(
        out.rejects[1].reason.contains("field path: required"),
        "{}",
        out.rejects[1].reason
    );
    assert!(
        out.rejects[2].reason.contains("field log_time"),
        "{}",
        out.rejects[2].reason
    );
    let b = one_table(&out);
    let names: Vec<String> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["log_time", "status", "path", "ua"]);
    assert_eq!(
        strings(&b, "log_time"),
        ["2023-11-14T22:13:20.123Z", "2023-11-14T22:13:23Z"]
    );
    assert_eq!(strings(&b, "path"), ["/a", "/c"]);
    assert_eq!(strings(&b, "ua"), ["NULL", "curl"]);
    assert_eq!(
        b.schema()
            .metadata()
            .get("silt.time_column")
            .map(String::as_str),
        Some("log_time")
    );
}

#[test]
fn schema_avsc() {
    check_schema_run(
        r#"{"type":"record","name":"nginx","fields":[
            {"name":"log_time","type":"long"},
            {"name":"status","type":"int"},
            {"name":"path","type":"string"},
            {"name":"ua","type":["null","string"]}]}"#,
    );
}

#[test]
fn schema_bigquery() {
    check_schema_run(
        r#"[{"name":"log_time","type":"INTEGER","mode":"REQUIRED"},
            {"name":"status","type":"INT64"},
            {"name":"path","type":"STRING","mode":"REQUIRED"},
            {"name":"ua","type":"STRING"}]"#,
    );
}

#[test]
fn schema_applies_to_csv_text() {
    let ts = TargetSchema::parse(
        r#"[{"name":"n","type":"INT64"},{"name":"ok","type":"BOOL"},{"name":"s","type":"STRING"}]"#,
    )
    .unwrap();
    let lo = LogOptions {
        schema: Some(Arc::new(ts)),
        ..LogOptions::default()
    };
    let (out, r) = collect(LogFormat::Csv, b"n,ok,s\n1,true,007\nx,false,a\n3,,\n", &lo);
    r.unwrap();
    assert_eq!(out.rejects.len(), 1);
    assert_eq!(out.rejects[0].line, 3);
    let b = one_table(&out);
    assert_eq!(
        b.column(0).as_primitive::<Int64Type>().values().to_vec(),
        [1, 3]
    );
    assert_eq!(strings(&b, "s"), ["007", "NULL"]);
    assert!(b.column(1).is_null(1));
}

#[test]
fn msgpack_fluentd_entries_and_times() {
    // [time, record] entries as fluentd writes them, with an int time.
    let mut bytes = Vec::new();
    for (t, log) in [(1_700_000_000i64, "a"), (1_700_000_001, "b")] {
        let entry = serde_json::json!([t, {"log": log, "n": 1}]);
        bytes.extend(rmp_serde::to_vec(&entry).unwrap());
    }
    let (out, r) = collect(LogFormat::Msgpack, &bytes, &LogOptions::default());
    r.unwrap();
    let b = one_table(&out);
    assert_eq!(
        strings(&b, "time"),
        ["2023-11-14T22:13:20Z", "2023-11-14T22:13:21Z"]
    );
    assert_eq!(strings(&b, "log"), ["a", "b"]);
}

#[test]
fn unparsed_time_kept() {
    let text = "{\"time\":\"2024-01-01T00:00:00Z\",\"a\":1}\n{\"time\":\"garbage\",\"a\":2}\n";
    let (out, r) = collect(LogFormat::Json, text.as_bytes(), &LogOptions::default());
    r.unwrap();
    assert!(out.rejects.is_empty());
    let b = one_table(&out);
    assert_eq!(strings(&b, "time"), ["2024-01-01T00:00:00Z", "NULL"]);
    assert_eq!(strings(&b, "_unparsed"), ["NULL", r#"{"time":"garbage"}"#]);
    assert_eq!(
        b.column_by_name("a")
            .unwrap()
            .as_primitive::<Int64Type>()
            .value(1),
        2
    );
}
