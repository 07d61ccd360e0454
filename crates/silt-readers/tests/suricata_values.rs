//! Spot values of the EVE reader: exact `flow_id`s, offsets converted to UTC, canonical IPv6,
//! `vlan` scalar -> list, int/float widening, struct/string conflicts, `_unparsed`, rejects and
//! metadata. Expected values are written out by hand (epoch seconds from `date -u -d`).

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::{
    DataType, Field, Float64Type, Int64Type, TimestampMicrosecondType, UInt64Type,
};
use silt_core::{meta, CollectEmit, ReadOptions, SourceInfo};
use silt_readers::suricata;

#[path = "suricata_support.rs"]
mod support;

fn read_with(text: &str, batch_rows: usize) -> CollectEmit {
    let mut out = CollectEmit::default();
    suricata::read(
        &mut text.as_bytes(),
        &SourceInfo::stdin(),
        &ReadOptions { batch_rows },
        &mut out,
    )
    .unwrap();
    out
}

fn read(text: &str) -> CollectEmit {
    read_with(text, 1024)
}

/// All batches of a table conformed to the unified schema and concatenated.
fn table(out: &CollectEmit, name: &str) -> RecordBatch {
    let batches: Vec<&RecordBatch> = out
        .batches
        .iter()
        .filter(|(t, _)| t.to_string() == name)
        .flat_map(|(_, b)| b)
        .collect();
    assert!(!batches.is_empty(), "no table {name}");
    support::unified(&batches)
}

fn corpus_file(rel: &str) -> Option<String> {
    std::fs::read_to_string(support::corpus_dir()?.join(rel)).ok()
}

fn list_i64(a: &dyn Array, i: usize) -> Vec<i64> {
    a.as_list::<i32>()
        .value(i)
        .as_primitive::<Int64Type>()
        .values()
        .to_vec()
}

#[test]
fn flow_id_is_exact_u64() {
    let out = read(concat!(
        r#"{"timestamp":"2017-06-19T14:01:38.082123+0200","flow_id":18446744073709551615,"event_type":"flow"}"#,
        "\n",
        r#"{"timestamp":"2017-06-19T14:01:38.082123+0200","flow_id":9007199254740993,"event_type":"flow","parent_id":1}"#,
        "\n",
        r#"{"timestamp":"2017-06-19T14:01:38.082123+0200","flow_id":"12345678901234567890","event_type":"flow"}"#,
        "\n",
    ));
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let t = table(&out, "suricata.flow");
    let f = t
        .column_by_name("flow_id")
        .unwrap()
        .as_primitive::<UInt64Type>();
    assert_eq!(
        f.values(),
        &[u64::MAX, 9_007_199_254_740_993, 12_345_678_901_234_567_890]
    );
    let p = t.column_by_name("parent_id").unwrap();
    assert_eq!(p.data_type(), &DataType::UInt64);
    assert_eq!(p.as_primitive::<UInt64Type>().value(1), 1);
}

#[test]
fn corpus_flow_id_and_zero_padded_ipv6() {
    let Some(text) = corpus_file("fever-alertify_input.json") else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let out = read(&text);
    assert!(out.rejects.is_empty());
    let t = table(&out, "suricata.tls");
    let f = t
        .column_by_name("flow_id")
        .unwrap()
        .as_primitive::<UInt64Type>();
    assert_eq!(f.value(0), 1_416_337_568_450_228);
    let src = t.column_by_name("src_ip").unwrap().as_string::<i32>();
    assert_eq!(src.value(0), "2a03:b0c0:2:d0::bd3:4001");
    let dst = t.column_by_name("dest_ip").unwrap().as_string::<i32>();
    assert_eq!(dst.value(0), "2606:2800:220:1:248:1893:25c8:1946");
    let schema = t.schema();
    assert_eq!(
        schema
            .field_with_name("src_ip")
            .unwrap()
            .metadata()
            .get(meta::SOURCE_TYPE)
            .map(String::as_str),
        Some("addr")
    );
    // tls.notbefore has no offset: UTC. 2018-11-28T00:00:00Z = 1543363200.
    let tls = t.column_by_name("tls").unwrap().as_struct();
    let nb = tls
        .column_by_name("notbefore")
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>();
    assert_eq!(nb.value(0), 1_543_363_200_000_000);
    assert_eq!(
        schema
            .metadata()
            .get(meta::LOOKUP_COLUMNS)
            .map(String::as_str),
        Some("flow_id,src_ip,dest_ip")
    );
    assert_eq!(
        schema.metadata().get(meta::TABLE).map(String::as_str),
        Some("suricata.tls")
    );
}

#[test]
fn offsets_become_utc() {
    let out = read(concat!(
        r#"{"timestamp":"2017-06-19T14:01:38.082123+0200","event_type":"flow","flow":{"start":"2017-06-19T13:00:00.5-0130","end":"2017-06-19T14:01:38.082123+0200"}}"#,
        "\n"
    ));
    let t = table(&out, "suricata.flow");
    let ts = t.column(0).as_primitive::<TimestampMicrosecondType>();
    // date -u -d '2017-06-19T14:01:38+0200' +%s = 1497873698
    assert_eq!(ts.value(0), 1_497_873_698_082_123);
    let flow = t.column_by_name("flow").unwrap().as_struct();
    let start = flow
        .column_by_name("start")
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>();
    // 13:00:00.5-01:30 = 14:30:00.5Z; date -u -d '2017-06-19T14:30:00Z' +%s = 1497882600
    assert_eq!(start.value(0), 1_497_882_600_500_000);
    assert_eq!(
        t.schema().field(0).data_type(),
        &silt_core::time::timestamp_type()
    );
}

#[test]
fn corpus_plus_0100_timestamp() {
    let Some(text) = corpus_file("surevego-eve.json") else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let out = read(&text);
    let t = table(&out, "suricata.dns");
    // First line: "2017-01-30T16:12:26.985026+0100"; date -u -d ... +%s = 1485789146.
    let ts = t.column(0).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(ts.value(0), 1_485_789_146_985_026);
}

#[test]
fn vlan_scalar_becomes_list() {
    let text = concat!(
        r#"{"timestamp":"2017-03-06T06:54:06.047429+0000","event_type":"dns","vlan":61}"#,
        "\n",
        r#"{"timestamp":"2017-03-06T06:54:06.047429+0000","event_type":"dns","vlan":[100,200]}"#,
        "\n",
        r#"{"timestamp":"2017-03-06T06:54:06.047429+0000","event_type":"dns","vlan":null}"#,
        "\n",
    );
    // In one batch and across batches (the lake then unifies Int64 with List<Int64>).
    for batch_rows in [10, 1] {
        let out = read_with(text, batch_rows);
        let t = table(&out, "suricata.dns");
        let v = t.column_by_name("vlan").unwrap();
        assert_eq!(
            v.data_type(),
            &DataType::List(Arc::new(Field::new("item", DataType::Int64, true)))
        );
        assert_eq!(list_i64(v, 0), vec![61]);
        assert_eq!(list_i64(v, 1), vec![100, 200]);
        assert!(v.is_null(2));
    }
    let out = read_with(text, 1);
    let first = &out.batches.values().next().unwrap()[0];
    assert_eq!(
        first.schema().field_with_name("vlan").unwrap().data_type(),
        &DataType::Int64
    );
}

#[test]
fn int_and_float_widen() {
    let out = read(concat!(
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"stats","stats":{"x":1,"y":2}}"#,
        "\n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"stats","stats":{"x":2.5}}"#,
        "\n",
    ));
    let t = table(&out, "suricata.stats");
    let s = t.column_by_name("stats").unwrap().as_struct();
    let x = s.column_by_name("x").unwrap().as_primitive::<Float64Type>();
    assert_eq!((x.value(0), x.value(1)), (1.0, 2.5));
    let y = s.column_by_name("y").unwrap().as_primitive::<Int64Type>();
    assert_eq!((y.value(0), y.is_null(1)), (2, true));
}

#[test]
fn struct_string_conflict_is_text() {
    for batch_rows in [10, 1] {
        let out = read_with(
            concat!(
                r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"alert","meta":{"a":1,"b":[true]}}"#,
                "\n",
                r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"alert","meta":"plain"}"#,
                "\n",
                r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"alert","meta":7}"#,
                "\n",
            ),
            batch_rows,
        );
        let t = table(&out, "suricata.alert");
        let m = t.column_by_name("meta").unwrap().as_string::<i32>();
        assert_eq!(m.value(0), r#"{"a":1,"b":[true]}"#);
        assert_eq!(m.value(1), "plain");
        assert_eq!(m.value(2), "7");
    }
}

#[test]
fn unparsable_time_is_null_and_kept() {
    let out = read(concat!(
        r#"{"timestamp":"2017-01-30T16:12:26.985026+0100asloefbnjhowebfg","event_type":"dns","flow":{"start":"never"}}"#,
        "\n",
        r#"{"timestamp":"2017-01-30T16:12:26.985026+0100","event_type":"dns"}"#,
        "\n",
    ));
    assert!(out.rejects.is_empty());
    let t = table(&out, "suricata.dns");
    let ts = t.column(0).as_primitive::<TimestampMicrosecondType>();
    assert!(ts.is_null(0));
    assert_eq!(ts.value(1), 1_485_789_146_985_026);
    let u = t.column_by_name("_unparsed").unwrap().as_string::<i32>();
    assert_eq!(
        u.value(0),
        r#"{"timestamp":"2017-01-30T16:12:26.985026+0100asloefbnjhowebfg","flow.start":"never"}"#
    );
    assert!(u.is_null(1));
}

#[test]
fn rejects_carry_reasons_lines_and_tables() {
    let text = concat!(
        "\n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"flow","flow_id":-5}"#,
        "\n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"flow","flow_id":1.5}"#,
        "\n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"flow","parent_id":"abc"}"#,
        "\n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","flow_id":1}"#,
        "\n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":5}"#,
        "\n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":""}"#,
        "\n",
        "[1,2]\r\n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"flow""#,
        "\n",
        "   \t \n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"flow","flow_id":18446744073709551616}"#,
        "\n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"Flow","flow_id":3}"#,
    );
    let out = read(text);
    let lines: Vec<u64> = out.rejects.iter().map(|r| r.line).collect();
    assert_eq!(lines, vec![2, 3, 4, 5, 6, 7, 8, 9, 11]);
    assert!(
        out.rejects[0].reason.contains("flow_id"),
        "{}",
        out.rejects[0].reason
    );
    assert_eq!(
        out.rejects[0]
            .table
            .as_ref()
            .map(|t| t.to_string())
            .as_deref(),
        Some("suricata.flow")
    );
    assert!(out.rejects[2].reason.contains("parent_id"));
    assert!(out.rejects[3].reason.contains("event_type"));
    assert_eq!(out.rejects[3].table, None);
    assert!(out.rejects[6].reason.contains("not a JSON object"));
    assert_eq!(out.rejects[6].raw, b"[1,2]");
    // The truncated line is 55 characters long: serde stops at its last column.
    assert_eq!(
        out.rejects[7].reason,
        "invalid JSON at column 55: EOF while parsing an object"
    );
    // Event types are folded into table names: "Flow" is suricata.flow.
    assert_eq!(out.rows("suricata.flow"), 1);
}

#[test]
fn duplicate_keys_last_wins_and_odd_names_stay() {
    let out = read(concat!(
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"stats","a":1,"a":2,"stats":{"W#01":{"x":1},"bittorrent-dht":2,"":3}}"#,
        "\n",
    ));
    let t = table(&out, "suricata.stats");
    assert_eq!(
        t.column_by_name("a")
            .unwrap()
            .as_primitive::<Int64Type>()
            .value(0),
        2
    );
    let s = t.column_by_name("stats").unwrap().as_struct();
    let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, vec!["W#01", "bittorrent-dht", "_"]);
}

#[test]
fn dns_rdata_canonical_only_for_addresses() {
    let out = read(concat!(
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"dns","dns":{"version":2,"answers":[{"rrtype":"AAAA","rdata":"2001:0DB8:0000::0001"},{"rrtype":"TXT","rdata":"2001:0DB8:0000::0001"}],"grouped":{"AAAA":["2001:0db8::0001"]}}}"#,
        "\n",
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"dns","dns":{"rrtype":"AAAA","rdata":"FE80::1"}}"#,
        "\n",
    ));
    let t = table(&out, "suricata.dns");
    let dns = t.column_by_name("dns").unwrap().as_struct();
    let answers = dns
        .column_by_name("answers")
        .unwrap()
        .as_list::<i32>()
        .value(0);
    let rdata = answers
        .as_struct()
        .column_by_name("rdata")
        .unwrap()
        .as_string::<i32>()
        .clone();
    assert_eq!(rdata.value(0), "2001:db8::1");
    assert_eq!(rdata.value(1), "2001:0DB8:0000::0001");
    let grouped = dns.column_by_name("grouped").unwrap().as_struct();
    let aaaa = grouped
        .column_by_name("AAAA")
        .unwrap()
        .as_list::<i32>()
        .value(0);
    assert_eq!(aaaa.as_string::<i32>().value(0), "2001:db8::1");
    let v1 = dns.column_by_name("rdata").unwrap().as_string::<i32>();
    assert_eq!(v1.value(1), "fe80::1");
}

#[test]
fn byte_order_mark_and_crlf() {
    let out = read("\u{feff}{\"timestamp\":\"2020-01-01T00:00:00Z\",\"event_type\":\"flow\"}\r\n\u{feff}{}\r\n");
    assert_eq!(out.rows("suricata.flow"), 1);
    // Only the first line may start with a BOM.
    assert_eq!(out.rejects.len(), 1);
    assert_eq!(out.rejects[0].line, 2);
    assert_eq!(out.rejects[0].raw, "\u{feff}{}".as_bytes());
}

#[test]
fn empty_input_and_empty_objects() {
    let out = read("");
    assert_eq!(
        (out.total_rows(), out.rejects.len(), out.batches.len()),
        (0, 0, 0)
    );
    let out = read(concat!(
        r#"{"timestamp":"2020-01-01T00:00:00Z","event_type":"flow","tcp":{},"metadata":{"flowbits":[]}}"#,
        "\n",
    ));
    let t = table(&out, "suricata.flow");
    // `{}` alone has no type: a Null column, never an empty struct.
    assert_eq!(
        t.column_by_name("tcp").unwrap().data_type(),
        &DataType::Null
    );
    let md = t.column_by_name("metadata").unwrap().as_struct();
    assert_eq!(
        md.column_by_name("flowbits").unwrap().data_type(),
        &DataType::List(Arc::new(Field::new("item", DataType::Null, true)))
    );
}

#[test]
fn batches_are_bounded_and_ordered() {
    let mut text = String::new();
    for i in 0..25 {
        let et = if i % 3 == 0 { "alert" } else { "flow" };
        text.push_str(&format!(
            "{{\"timestamp\":\"2020-01-01T00:00:{:02}Z\",\"event_type\":\"{et}\",\"flow_id\":{i}}}\n",
            i
        ));
    }
    let out = read_with(&text, 4);
    for (t, batches) in &out.batches {
        assert!(batches.iter().all(|b| b.num_rows() <= 4), "{t}");
    }
    let flow = table(&out, "suricata.flow");
    let ids = flow
        .column_by_name("flow_id")
        .unwrap()
        .as_primitive::<UInt64Type>();
    let want: Vec<u64> = (0..25).filter(|i| i % 3 != 0).collect();
    assert_eq!(ids.values(), &want[..]);
    assert_eq!(out.rows("suricata.alert"), 9);
}
