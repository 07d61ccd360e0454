//! Acceptance 1 of issue 4: the same records given as JSON, MessagePack, CSV and Avro convert to
//! Parquet files with identical content (schema and values), and the content is what the records
//! say (checked against the records themselves, not against one of the outputs).

mod common;

use apache_avro::types::{Record, Value as AV};
use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type, TimestampMicrosecondType};
use serde_json::json;
use silt_core::TableName;
use silt_logs::{LogFormat, LogOptions};

/// A dozen records: ints, floats, bools, awkward strings, nulls and a timestamp.
fn records() -> Vec<serde_json::Value> {
    let msgs = [
        "plain",
        "with \"quotes\"",
        "with, commas",
        "line one\nline two",
        "unicode: héllo wörld ✓ 日本語",
        "tab\there",
        "single 'quote'",
        "back\\slash",
        "trailing space ",
        "emoji 🦀",
        "semi;colon",
        "{\"json\": [1, 2]}",
    ];
    (0..12)
        .map(|i: i64| {
            json!({
                "ts": format!("2024-03-05T12:{:02}:{:02}.{:06}Z", i * 4, (i * 7) % 60, i * 1111),
                "id": i * 1000 - 3000,
                "score": (i as f64) * 1.25 + 0.5,
                "ok": i % 3 == 0,
                "msg": msgs[i as usize],
                "note": if i % 4 == 1 { serde_json::Value::Null } else { json!(format!("note-{i}")) },
                "count": if i % 5 == 2 { serde_json::Value::Null } else { json!(i * i) },
            })
        })
        .collect()
}

const COLUMNS: [&str; 7] = ["ts", "id", "score", "ok", "msg", "note", "count"];

fn as_json(recs: &[serde_json::Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        out.extend_from_slice(serde_json::to_string(r).unwrap().as_bytes());
        out.push(b'\n');
    }
    out
}

fn as_msgpack(recs: &[serde_json::Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in recs {
        out.extend_from_slice(&rmp_serde::to_vec_named(r).unwrap());
    }
    out
}

fn as_csv(recs: &[serde_json::Value]) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(COLUMNS).unwrap();
    for r in recs {
        let row: Vec<String> = COLUMNS
            .iter()
            .map(|c| match &r[*c] {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        w.write_record(&row).unwrap();
    }
    w.into_inner().unwrap()
}

fn as_avro(recs: &[serde_json::Value]) -> Vec<u8> {
    let schema = apache_avro::Schema::parse_str(
        r#"{"type":"record","name":"rec","fields":[
            {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
            {"name":"id","type":"long"},
            {"name":"score","type":"double"},
            {"name":"ok","type":"boolean"},
            {"name":"msg","type":"string"},
            {"name":"note","type":["null","string"]},
            {"name":"count","type":["null","long"]}]}"#,
    )
    .unwrap();
    let mut w = apache_avro::Writer::new(&schema, Vec::new()).unwrap();
    for r in recs {
        let mut rec = Record::new(&schema).unwrap();
        let ts = silt_core::time::parse_iso8601(r["ts"].as_str().unwrap()).unwrap();
        rec.put("ts", AV::TimestampMicros(ts));
        rec.put("id", AV::Long(r["id"].as_i64().unwrap()));
        rec.put("score", AV::Double(r["score"].as_f64().unwrap()));
        rec.put("ok", AV::Boolean(r["ok"].as_bool().unwrap()));
        rec.put("msg", AV::String(r["msg"].as_str().unwrap().into()));
        rec.put(
            "note",
            match r["note"].as_str() {
                Some(s) => AV::Union(1, Box::new(AV::String(s.into()))),
                None => AV::Union(0, Box::new(AV::Null)),
            },
        );
        rec.put(
            "count",
            match r["count"].as_i64() {
                Some(c) => AV::Union(1, Box::new(AV::Long(c))),
                None => AV::Union(0, Box::new(AV::Null)),
            },
        );
        w.append_value(rec).unwrap();
    }
    w.into_inner().unwrap()
}

#[test]
fn same_records_same_parquet() {
    let recs = records();
    let dir = tempfile::tempdir().unwrap();
    let lo = LogOptions {
        table: Some(TableName::new("test", "records")),
        ..LogOptions::default()
    };
    let inputs = [
        ("json", LogFormat::Json, as_json(&recs)),
        ("msgpack", LogFormat::Msgpack, as_msgpack(&recs)),
        ("csv", LogFormat::Csv, as_csv(&recs)),
        ("avro", LogFormat::Avro, as_avro(&recs)),
    ];
    let mut outputs = Vec::new();
    for (name, format, bytes) in &inputs {
        let (batch, rejects) = common::convert(dir.path(), name, *format, bytes, &lo);
        assert_eq!(rejects, 0, "{name}");
        outputs.push((name, batch));
    }

    // Independent expectations from the records themselves.
    let (_, first) = &outputs[0];
    let schema = first.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, COLUMNS);
    let types: Vec<&DataType> = schema.fields().iter().map(|f| f.data_type()).collect();
    assert_eq!(
        types,
        [
            &silt_core::time::timestamp_type(),
            &DataType::Int64,
            &DataType::Float64,
            &DataType::Boolean,
            &DataType::Utf8,
            &DataType::Utf8,
            &DataType::Int64,
        ]
    );
    assert_eq!(
        schema
            .metadata()
            .get("silt.time_column")
            .map(String::as_str),
        Some("ts")
    );
    assert_eq!(first.num_rows(), 12);
    // Rows come out sorted by ts, which is the records' order.
    let ts = first.column(0).as_primitive::<TimestampMicrosecondType>();
    let ids = first.column(1).as_primitive::<Int64Type>();
    let scores = first.column(2).as_primitive::<Float64Type>();
    let msg = first.column(4).as_string::<i32>();
    let note = first.column(5).as_string::<i32>();
    let count = first.column(6).as_primitive::<Int64Type>();
    for (i, r) in recs.iter().enumerate() {
        let want_ts = silt_core::time::parse_iso8601(r["ts"].as_str().unwrap()).unwrap();
        assert_eq!(ts.value(i), want_ts);
        assert_eq!(ids.value(i), r["id"].as_i64().unwrap());
        assert_eq!(scores.value(i), r["score"].as_f64().unwrap());
        assert_eq!(msg.value(i), r["msg"].as_str().unwrap());
        assert_eq!(note.is_null(i), r["note"].is_null());
        assert_eq!(count.is_null(i), r["count"].is_null());
        if let Some(c) = r["count"].as_i64() {
            assert_eq!(count.value(i), c);
        }
    }

    // Identical content in every format.
    for (name, b) in &outputs[1..] {
        assert_eq!(b.schema().fields(), schema.fields(), "{name}: fields");
        // Every file's checksum is its own.
        let own = |m: &std::collections::HashMap<String, String>| {
            let mut m = m.clone();
            assert!(
                m.remove(silt_lake::checksum::KEY).is_some(),
                "{name}: no checksum"
            );
            m
        };
        assert_eq!(
            own(b.schema().metadata()),
            own(schema.metadata()),
            "{name}: metadata"
        );
        for (c, col) in COLUMNS.iter().enumerate() {
            assert_eq!(
                b.column(c).to_data(),
                first.column(c).to_data(),
                "{name}: column {col}"
            );
        }
    }
}
