//! Hand-written Zeek TSV/JSON inputs: every type, escapes, markers, header blocks, CRLF, bad
//! lines, random garbage, schema metadata.

mod zeek_common;

use std::collections::BTreeMap;

use arrow::datatypes::{DataType, Field, TimeUnit};
use silt_core::{CollectEmit, Emit, ReadOptions, TableName};
use zeek_common::*;

fn t(data: &str) -> CollectEmit {
    tsv(data.as_bytes(), &source_named("conn.log"), 1000)
}

fn j(data: &str) -> CollectEmit {
    json(data.as_bytes(), &source_named("conn.json"), 1000)
}

fn table_rows(out: &CollectEmit, table: &str) -> Vec<BTreeMap<String, Cell>> {
    let (m, n) = table.split_once('.').unwrap();
    rows(&out.batches[&TableName::new(m, n)])
}

fn s(x: &str) -> Cell {
    Cell::S(x.into())
}

fn list(v: Vec<Cell>) -> Cell {
    Cell::List(v)
}

fn item(t: DataType) -> DataType {
    DataType::List(std::sync::Arc::new(Field::new("item", t, true)))
}

const ALL_TYPES: &str = "#separator \\x09
#set_separator\t,
#empty_field\t(empty)
#unset_field\t-
#path\tall
#open\t2024-01-01-00-00-00
#fields\tb\tc\ti\td\tt\tiv\ts\te\ta\tsn\tp\tpat\tfl\tfn\tsa\tvc\ttb\tvi\tss
#types\tbool\tcount\tint\tdouble\ttime\tinterval\tstring\tenum\taddr\tsubnet\tport\tpattern\tfile\tfunc\tset[addr]\tvector[count]\ttable[string]\tvector[interval]\tset[subnet]
T\t9223372036854775807\t-9223372036854775808\t-1.5e3\t1521911721.123456\t0.000431\ta b\tConn::LOG\t2001:DB8:0:0::1\t10.0.0.0/8\t65535\t/^?(x)$?/\tfoo.txt\tfunction() : any\t10.0.0.1,::1\t1,2,3\tA,B\t0.5,1.0\t10.0.0.0/8,2001:db8::/32
F\t0\t42\t0\t0.000000\t-1.0\t(empty)\tX\t1.2.3.4\t::/0\t0\t-\t-\t-\t(empty)\t(empty)\t-\t1,-,2\t-
-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-
#close\t2024-01-01-00-00-01
";

#[test]
fn every_zeek_type() {
    let out = t(ALL_TYPES);
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let b = &out.batches[&TableName::new("zeek", "all")][0];
    let types: BTreeMap<String, DataType> = leaves(b)
        .into_iter()
        .map(|(p, a)| (p, a.data_type().clone()))
        .collect();
    let ts = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
    let want = [
        ("b", DataType::Boolean),
        ("c", DataType::Int64),
        ("i", DataType::Int64),
        ("d", DataType::Float64),
        ("t", ts.clone()),
        ("iv", DataType::Decimal128(18, 6)),
        ("s", DataType::Utf8),
        ("e", DataType::Utf8),
        ("a", DataType::Utf8),
        ("sn", DataType::Utf8),
        ("p", DataType::UInt16),
        ("pat", DataType::Utf8),
        ("fl", DataType::Utf8),
        ("fn", DataType::Utf8),
        ("sa", item(DataType::Utf8)),
        ("vc", item(DataType::Int64)),
        ("tb", item(DataType::Utf8)),
        ("vi", item(DataType::Decimal128(18, 6))),
        ("ss", item(DataType::Utf8)),
    ];
    for (n, ty) in &want {
        assert_eq!(&types[*n], ty, "{n}");
    }
    // Every field is nullable and carries its Zeek type.
    let schema = b.schema();
    for f in schema.fields() {
        assert!(f.is_nullable());
    }
    assert_eq!(
        schema.field_with_name("sa").unwrap().metadata()["silt.source_type"],
        "set[addr]"
    );
    assert_eq!(
        schema.field_with_name("tb").unwrap().metadata()["silt.source_type"],
        "table[string]"
    );
    assert_eq!(
        schema.field_with_name("e").unwrap().metadata()["silt.source_type"],
        "enum"
    );

    let r = rows(&out.batches[&TableName::new("zeek", "all")]);
    assert_eq!(r.len(), 3);
    let r0 = &r[0];
    assert_eq!(r0["b"], Cell::Bool(true));
    assert_eq!(r0["c"], Cell::I(i64::MAX), "counts are signed 64-bit");
    assert_eq!(r0["i"], Cell::I(i64::MIN));
    assert_eq!(r0["d"], Cell::F(-1500.0));
    assert_eq!(r0["t"], Cell::Ts(1_521_911_721_123_456));
    assert_eq!(r0["iv"], Cell::I(431), "intervals are exact microseconds");
    assert_eq!(r0["s"], s("a b"));
    assert_eq!(r0["e"], s("Conn::LOG"));
    assert_eq!(r0["a"], s("2001:db8::1"));
    assert_eq!(r0["sn"], s("10.0.0.0/8"));
    assert_eq!(r0["p"], Cell::U(65535));
    assert_eq!(r0["pat"], s("/^?(x)$?/"));
    assert_eq!(r0["fl"], s("foo.txt"));
    assert_eq!(r0["fn"], s("function() : any"));
    assert_eq!(r0["sa"], list(vec![s("10.0.0.1"), s("::1")]));
    assert_eq!(r0["vc"], list(vec![Cell::I(1), Cell::I(2), Cell::I(3)]));
    assert_eq!(r0["tb"], list(vec![s("A"), s("B")]));
    assert_eq!(r0["vi"], list(vec![Cell::I(500_000), Cell::I(1_000_000)]));
    assert_eq!(r0["ss"], list(vec![s("10.0.0.0/8"), s("2001:db8::/32")]));
    let r1 = &r[1];
    assert_eq!(r1["b"], Cell::Bool(false));
    assert_eq!(r1["t"], Cell::Ts(0));
    assert_eq!(r1["s"], s(""), "(empty) is the empty string");
    assert_eq!(r1["sn"], s("::/0"));
    assert_eq!(r1["pat"], Cell::Null);
    assert_eq!(r1["sa"], list(vec![]), "(empty) is an empty container");
    assert_eq!(r1["tb"], Cell::Null, "- is an unset container");
    assert_eq!(
        r1["vi"],
        list(vec![Cell::I(1_000_000), Cell::Null, Cell::I(2_000_000)]),
        "- inside a container"
    );
    assert!(r[2].values().all(|c| *c == Cell::Null));
}

/// A count above 2^63 - 1 cannot be stored as the BIGINT every engine reads: its line is
/// rejected with the reason, in a scalar and inside a container, and the other lines stay.
#[test]
fn a_count_above_the_signed_range_rejects_its_line() {
    let data = "#fields\tc\tvc\n#types\tcount\tvector[count]\n1\t1,2\n18446744073709551615\t3\n2\t9223372036854775808\n3\t4\n";
    let out = t(data);
    assert_eq!(out.rejects.len(), 2, "{:?}", out.rejects);
    assert_eq!(out.rejects[0].line, 4);
    assert!(
        out.rejects[0]
            .reason
            .contains("count 18446744073709551615 is above 9223372036854775807"),
        "{}",
        out.rejects[0].reason
    );
    assert!(
        out.rejects[1].reason.contains("9223372036854775808"),
        "{}",
        out.rejects[1].reason
    );
    let r = table_rows(&out, "zeek.conn");
    let c: Vec<Cell> = r.iter().map(|r| r["c"].clone()).collect();
    assert_eq!(c, vec![Cell::I(1), Cell::I(3)]);
}

#[test]
fn escapes_and_custom_markers() {
    // `|` separator, `;` set separator, custom empty and unset markers.
    let data = "#separator \\x7c
#set_separator|;
#empty_field|EMPTY
#unset_field|NONE
#path|custom
#fields|s|v|n
#types|string|vector[string]|count
a\\x7cb\\x09c\\\\d\\x0a\\x00\\xe2\\x82\\xac\\xff\\xZZ|x\\x3by;NONE;EMPTY;\\x45MPTY|7
EMPTY|EMPTY|NONE
\\x4eONE|NONE|1
-|-;(empty)|2
";
    let out = tsv(data.as_bytes(), &source_named("x.log"), 1000);
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let r = table_rows(&out, "zeek.custom");
    assert_eq!(r[0]["s"], s("a|b\tc\\d\n\\x00\u{20ac}\\xff\\xZZ"));
    assert_eq!(
        r[0]["v"],
        list(vec![s("x;y"), Cell::Null, s(""), s("EMPTY")])
    );
    assert_eq!(r[0]["n"], Cell::I(7));
    assert_eq!(
        (r[1]["s"].clone(), r[1]["v"].clone(), r[1]["n"].clone()),
        (s(""), list(vec![]), Cell::Null)
    );
    // An escaped marker is a value, not the marker.
    assert_eq!(r[2]["s"], s("NONE"));
    assert_eq!(r[2]["v"], Cell::Null);
    // With custom markers, `-` and `(empty)` are ordinary text.
    assert_eq!(r[3]["s"], s("-"));
    assert_eq!(r[3]["v"], list(vec![s("-"), s("(empty)")]));
}

#[test]
fn multi_byte_separator_and_meta_prefix() {
    let data = "!!separator ||\n!!fields||a||b\n!!types||count||string\n1||x||y\n2||z\n";
    let out = t(data);
    // Line 4 has three fields (`x||y` is not one value: `||` is the separator).
    assert_eq!(out.rejects.len(), 1);
    assert_eq!(out.rejects[0].line, 4);
    assert_eq!(
        out.rejects[0].reason,
        "line has 3 fields but the #fields header has 2"
    );
    let r = table_rows(&out, "zeek.conn");
    assert_eq!(
        r,
        vec![BTreeMap::from([
            ("a".to_string(), Cell::I(2)),
            ("b".to_string(), s("z"))
        ])]
    );
}

#[test]
fn header_blocks_change_schema_and_table() {
    let block = |path: &str, fields: &str, types: &str| {
        format!("#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#unset_field\t-\n#path\t{path}\n#fields\t{fields}\n#types\t{types}\n")
    };
    let mut data = String::new();
    data += &block("conn", "ts\tuid", "time\tstring");
    data += "1.0\tA\n2.0\tB\n#close\tx\n";
    // The same header again: rows continue in the same batch.
    data += "#file other.pcap\n";
    data += &block("conn", "ts\tuid", "time\tstring");
    data += "3.0\tC\n";
    // A new column: new schema, same table.
    data += &block("conn", "ts\tuid\tid.orig_h", "time\tstring\taddr");
    data += "4.0\tD\t10.0.0.1\n";
    // Another log.
    data += &block("dns", "ts\tquery", "time\tstring");
    data += "5.0\texample.com\n";
    // Back to conn with the first schema.
    data += &block("conn", "ts\tuid", "time\tstring");
    data += "6.0\tE\n";
    let out = t(&data);
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let conn = &out.batches[&TableName::new("zeek", "conn")];
    let sizes: Vec<usize> = conn.iter().map(|b| b.num_rows()).collect();
    assert_eq!(sizes, vec![3, 1, 1]);
    assert_eq!(conn[0].num_columns(), 2);
    assert_eq!(conn[1].num_columns(), 3);
    assert_eq!(out.rows("zeek.dns"), 1);
    assert_eq!(table_rows(&out, "zeek.dns")[0]["query"], s("example.com"));
}

#[test]
fn byte_order_mark_is_ignored() {
    let out = t("\u{feff}#fields\tn\n#types\tcount\n1\n");
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    assert_eq!(out.total_rows(), 1);
    let out = j("\u{feff}{\"ts\":1.0}\n");
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    assert_eq!(out.total_rows(), 1);
}

#[test]
fn crlf_line_ends() {
    let data = ALL_TYPES.replace('\n', "\r\n");
    let crlf = t(&data);
    let lf = t(ALL_TYPES);
    assert!(crlf.rejects.is_empty(), "{:?}", crlf.rejects);
    assert_eq!(table_rows(&crlf, "zeek.all"), table_rows(&lf, "zeek.all"));
    let j1 = j("{\"ts\":1.5,\"uid\":\"A\"}\r\n\r\n{\"ts\":2.5,\"uid\":\"B\"}\r\n");
    assert!(j1.rejects.is_empty());
    assert_eq!(j1.rows("zeek.conn"), 2);
}

#[test]
fn bad_lines_are_rejected_with_reasons_and_the_rest_goes_on() {
    let data = "garbage before any header
#separator \\x09
#fields\tts\tuid\tid.orig_h\tid.orig_p\tn\tb\tv
#types\ttime\tstring\taddr\tport\tcount\tbool\tvector[count]
1.0\tA\t10.0.0.1\t80\t1\tT\t1,2
2.0\tB\t10.0.0.1\tabc\t1\tT\t1
3.0\tC\t10.0.0.1
4.0\tD\t10.0.0.1\t80\t1\tT\t1\textra
5.0\tE\t10.0.0.1\t80\t-1\tT\t1
6.0\tF\t10.0.0.300\t80\t1\tT\t1
7.0\tG\t10.0.0.1\t80\t1\tyes\t1
8.0x\tH\t10.0.0.1\t80\t1\tT\t1
9.0\tI\t10.0.0.1\t80\t1\tT\t1,2,x,4
10.0\tJ\t10.0.0.1\t70000\t1\tT\t1
11.0\tK\t::1\t443\t2\tF\t(empty)
";
    let out = t(data);
    let got: Vec<(u64, &str)> = out
        .rejects
        .iter()
        .map(|r| (r.line, r.reason.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, "data line before any #fields header"),
            (6, "field 4 (id.orig_p: port): invalid port \"abc\""),
            (7, "line has 3 fields but the #fields header has 7"),
            (8, "line has 8 fields but the #fields header has 7"),
            (9, "field 5 (n: count): invalid count \"-1\""),
            (10, "field 3 (id.orig_h: addr): invalid addr \"10.0.0.300\""),
            (11, "field 6 (b: bool): invalid bool \"yes\""),
            (12, "field 1 (ts: time): invalid time \"8.0x\""),
            (
                13,
                "field 7 (v: vector[count]): element 3: invalid count \"x\""
            ),
            (14, "field 4 (id.orig_p: port): invalid port \"70000\""),
        ]
    );
    assert_eq!(out.rejects[1].raw, b"2.0\tB\t10.0.0.1\tabc\t1\tT\t1");
    assert_eq!(out.rejects[1].table, Some(TableName::new("zeek", "conn")));
    assert_eq!(out.rejects[1].source, "conn.log");
    // The good rows are intact: nothing of the rejected lines leaked into them.
    let r = table_rows(&out, "zeek.conn");
    assert_eq!(r.len(), 2);
    assert_eq!(r[0]["uid"], s("A"));
    assert_eq!(r[0]["v"], list(vec![Cell::I(1), Cell::I(2)]));
    assert_eq!(r[1]["uid"], s("K"));
    assert_eq!(r[1]["id.orig_h"], s("::1"));
    assert_eq!(r[1]["n"], Cell::I(2));
    assert_eq!(r[1]["b"], Cell::Bool(false));
    assert_eq!(r[1]["v"], list(vec![]));
    assert_eq!(r[1]["ts"], Cell::Ts(11_000_000));
    // Header problems reject the block's data lines.
    let out = t("#fields\ta\tb\n1\t2\n#types\tcount\n1\t2\n");
    let got: Vec<&str> = out.rejects.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(
        got,
        vec![
            "the header block has #fields but no #types",
            "the header block has 2 #fields but 1 #types"
        ]
    );
    let out = t("#fields\ta\ta\n#types\tcount\tcount\n1\t2\n");
    assert_eq!(out.rejects.len(), 1);
    assert!(
        out.rejects[0].reason.contains("appears twice"),
        "{}",
        out.rejects[0].reason
    );
}

#[test]
fn batches_and_progress() {
    let mut data = String::from("#fields\tts\tn\n#types\ttime\tcount\n");
    for i in 0..5 {
        data += &format!("{i}.5\t{i}\n");
    }
    let out = tsv(data.as_bytes(), &source_named("x.log"), 2);
    let sizes: Vec<usize> = out
        .batches
        .values()
        .flatten()
        .map(|b| b.num_rows())
        .collect();
    assert_eq!(sizes, vec![2, 2, 1]);
    assert_eq!(out.bytes, data.len() as u64);
    // Per-table bytes: the data lines only (5 lines of "i.5\ti\n", 6 bytes each).
    assert_eq!(out.table_bytes[&TableName::new("zeek", "x")], 30);
    // No trailing newline: the last line still counts.
    let out = tsv(data.trim_end().as_bytes(), &source_named("x.log"), 2);
    assert_eq!(out.total_rows(), 5);
    // read_slice is the same parser.
    let mut o2 = CollectEmit::default();
    silt_readers::zeek::tsv::read_slice(
        data.as_bytes(),
        &source_named("x.log"),
        &ReadOptions { batch_rows: 2 },
        &mut o2,
    )
    .unwrap();
    assert_eq!(
        rows(&o2.batches[&TableName::new("zeek", "x")]),
        rows(&out.batches[&TableName::new("zeek", "x")])
    );
    let mut data = String::new();
    for i in 0..5 {
        data += &format!("{{\"_path\":\"a\",\"ts\":{i}.5}}\n{{\"_path\":\"b\",\"n\":{i}}}\n");
    }
    let out = json(data.as_bytes(), &source_named("x.json"), 2);
    assert_eq!(out.rows("zeek.a"), 5);
    assert_eq!(out.rows("zeek.b"), 5);
    assert_eq!(out.batches[&TableName::new("zeek", "a")].len(), 3);
    assert_eq!(out.bytes, data.len() as u64);
    let per_table: u64 = out.table_bytes.values().sum();
    assert_eq!(per_table, data.len() as u64);
}

#[test]
fn schema_metadata_and_nested_id() {
    let data = "#fields\tts\tuid\tid.orig_h\tid.orig_p\tid.resp_h\tid.resp_p\tfuid\tcommunity_id\n\
                #types\ttime\tstring\taddr\tport\taddr\tport\tstring\tstring\n\
                1.0\tC1\t10.0.0.1\t1\t10.0.0.2\t2\tF1\t1:abc=\n";
    for (out, order) in [
        (t(data), ["ts", "uid", "id", "fuid", "community_id"]),
        // JSON: the log's own (registry) order, then fields conn does not have (`fuid`).
        (
            j(
                r#"{"ts":1.0,"uid":"C1","id.orig_h":"10.0.0.1","id.orig_p":1,"id.resp_h":"10.0.0.2","id.resp_p":2,"fuid":"F1","community_id":"1:abc="}"#,
            ),
            ["ts", "uid", "id", "community_id", "fuid"],
        ),
    ] {
        assert!(out.rejects.is_empty(), "{:?}", out.rejects);
        let b = &out.batches[&TableName::new("zeek", "conn")][0];
        let schema = b.schema();
        let md = schema.metadata();
        assert_eq!(md["silt.table"], "zeek.conn");
        assert_eq!(md["silt.time_column"], "ts");
        assert_eq!(
            md["silt.lookup_columns"],
            "uid,fuid,community_id,id.orig_h,id.resp_h"
        );
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, order);
        let DataType::Struct(id) = schema.field(2).data_type() else {
            panic!("id is a struct")
        };
        let kids: Vec<(&str, &DataType)> = id
            .iter()
            .map(|f| (f.name().as_str(), f.data_type()))
            .collect();
        assert_eq!(
            kids,
            [
                ("orig_h", &DataType::Utf8),
                ("orig_p", &DataType::UInt16),
                ("resp_h", &DataType::Utf8),
                ("resp_p", &DataType::UInt16)
            ]
        );
        assert_eq!(id[1].metadata()["silt.source_type"], "port");
    }
    // Without ts there is no time column; with only uid only uid is a lookup column.
    let out = t("#fields\tuid\tx\n#types\tstring\tcount\nA\t1\n");
    let b = &out.batches[&TableName::new("zeek", "conn")][0];
    assert!(!b.schema().metadata().contains_key("silt.time_column"));
    assert_eq!(b.schema().metadata()["silt.lookup_columns"], "uid");
}

#[test]
fn json_types_nulls_and_rejects() {
    let data = r#"{"_path":"conn","_write_ts":"2018-03-24T17:15:25.396445Z","ts":"2018-03-24T17:15:25.396014Z","uid":"A","id.orig_h":"2001:DB8::1","id.orig_p":80,"duration":1,"local_orig":true,"tunnel_parents":["x"],"vlan":-5,"orig_bytes":null}
{"_path":"conn","ts":1521911725.396014,"uid":"B","id.orig_p":"eighty"}
{"_path":"conn","ts":1521911725396,"uid":"C","brand_new":1}
{"_path":"conn","ts":1521911725,"uid":"D","id.orig_p":70000,"another_new":true}
XXXXXXXXXX.XXXXXX
[1,2]
{"_path":5}
{"_path":"conn","ts":true}
{"_path":"conn","ts":"1521911725.5","tunnel_parents":"y","service":42,"history":{"a":1}}
"#;
    let out = j(data);
    let got: Vec<(u64, String)> = out
        .rejects
        .iter()
        .map(|r| (r.line, r.reason.clone()))
        .collect();
    assert_eq!(got.len(), 7, "{got:?}");
    assert_eq!(
        got[0],
        (
            2,
            "field \"id.orig_p\" (port): expected port, got \"eighty\"".into()
        )
    );
    assert_eq!(
        got[1],
        (
            4,
            "field \"id.orig_p\" (port): expected a port number 0..65535, got 70000".into()
        )
    );
    assert!(got[2].1.starts_with("invalid JSON"), "{got:?}");
    assert_eq!(got[3], (6, "not a JSON object".into()));
    assert_eq!(
        got[4],
        (7, "\"_path\" must be a non-empty string, got 5".into())
    );
    assert_eq!(got[5], (8, "field \"ts\" (time): invalid time true".into()));
    // A string field may hold a number or a bool (as text), not an object.
    assert_eq!(
        got[6],
        (
            9,
            "field \"history\" (string): expected string, got {\"a\":1}".into()
        )
    );
    let r = table_rows(&out, "zeek.conn");
    assert_eq!(r.len(), 2, "{r:?}");
    assert_eq!(out.rejects.len() + r.len(), 9);
    let a = &r[0];
    assert_eq!(a["ts"], Cell::Ts(1_521_911_725_396_014));
    assert_eq!(a["_write_ts"], Cell::Ts(1_521_911_725_396_445));
    assert_eq!(a["id.orig_h"], s("2001:db8::1"));
    assert_eq!(a["id.orig_p"], Cell::U(80));
    assert_eq!(a["duration"], Cell::I(1_000_000)); // 1.0 s as exact microseconds
    assert_eq!(a["local_orig"], Cell::Bool(true));
    assert_eq!(a["tunnel_parents"], list(vec![s("x")]));
    assert_eq!(a["vlan"], Cell::I(-5));
    assert_eq!(a["orig_bytes"], Cell::Null);
    // Epoch milliseconds.
    assert_eq!(r[1]["ts"], Cell::Ts(1_521_911_725_396_000));
    assert_eq!(r[1]["brand_new"], Cell::I(1));
    // The rejected line 4 introduced `another_new`: it disappears with the line.
    assert!(!r[1].contains_key("another_new"));
    assert_eq!(a["uid"], s("A"));
    assert_eq!(out.rejects[0].table, Some(TableName::new("zeek", "conn")));
    assert_eq!(out.rejects[2].table, None);
}

#[test]
fn json_lenient_string_fields_and_scalar_lists() {
    let out = j(r#"{"ts":"1521911725.5","uid":7,"tunnel_parents":"y","service":true}"#);
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let r = &table_rows(&out, "zeek.conn")[0];
    assert_eq!(r["ts"], Cell::Ts(1_521_911_725_500_000));
    assert_eq!(r["uid"], s("7"));
    assert_eq!(r["tunnel_parents"], list(vec![s("y")]));
    assert_eq!(r["service"], s("true"));
    let out = j(r#"{"uid":{"a":1}}"#);
    assert_eq!(out.rejects.len(), 1);
    assert_eq!(
        out.rejects[0].reason,
        "field \"uid\" (string): expected string, got {\"a\":1}"
    );
}

#[test]
fn json_inference_for_unknown_fields() {
    let data = r#"{"_path":"custom","qq":1,"x":1,"arr":[],"s":"a","mixed":1,"nul":null,"big":1}
{"_path":"custom","qq":2,"x":2.5,"arr":["a",null],"s":"2018-03-24T17:15:25Z","mixed":"two","big":18446744073709551615}
{"_path":"custom","qq":3,"obj":{"k":[1]},"mixed":[3]}
"#;
    let out = json(data.as_bytes(), &source_named("x.json"), 1000);
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let b = &out.batches[&TableName::new("zeek", "custom")][0];
    let types: BTreeMap<String, DataType> = leaves(b)
        .into_iter()
        .map(|(p, a)| (p, a.data_type().clone()))
        .collect();
    assert_eq!(types["qq"], DataType::Int64);
    assert_eq!(types["x"], DataType::Float64);
    assert_eq!(types["arr"], item(DataType::Utf8));
    assert_eq!(types["s"], DataType::Utf8);
    // 1, "two", [3]: int and string conflict (text), and a scalar meeting a list becomes the
    // list (silt-core rules 6 and 5).
    assert_eq!(types["mixed"], item(DataType::Utf8));
    assert_eq!(types["nul"], DataType::Null);
    assert_eq!(types["obj"], DataType::Utf8);
    // i64 with u64 has no exact common type (silt-core rule 2).
    assert_eq!(types["big"], DataType::Float64);
    let schema = b.schema();
    assert_eq!(
        schema.field_with_name("x").unwrap().metadata()["silt.source_type"],
        "double"
    );
    assert_eq!(
        schema.field_with_name("arr").unwrap().metadata()["silt.source_type"],
        "vector[string]"
    );
    let r = rows(&out.batches[&TableName::new("zeek", "custom")]);
    assert_eq!(r[0]["x"], Cell::F(1.0));
    assert_eq!(r[1]["x"], Cell::F(2.5));
    assert_eq!(r[0]["arr"], list(vec![]));
    assert_eq!(r[1]["arr"], list(vec![s("a"), Cell::Null]));
    assert_eq!(r[2]["arr"], Cell::Null);
    assert_eq!(r[0]["mixed"], list(vec![s("1")]));
    assert_eq!(r[1]["mixed"], list(vec![s("two")]));
    assert_eq!(r[2]["mixed"], list(vec![s("3")]));
    assert_eq!(r[2]["obj"], s("{\"k\":[1]}"));
    assert!(!schema.metadata().contains_key("silt.time_column"));
    // Types only widen from batch to batch.
    let data = "{\"v\":1}\n{\"v\":2}\n{\"v\":2.5}\n{\"v\":null}\n";
    let out = json(data.as_bytes(), &source_named("w.json"), 2);
    let bs = &out.batches[&TableName::new("zeek", "w")];
    assert_eq!(bs[0].column(0).data_type(), &DataType::Int64);
    assert_eq!(bs[1].column(0).data_type(), &DataType::Float64);
}

#[test]
fn json_repeated_escaped_and_reordered_keys() {
    // As in a `serde_json::Map`: a repeated key keeps its first position and its last value
    // (one value per row, even for `_path`); `_path` may be anywhere; escaped keys are the
    // names they spell; key order may change from record to record.
    let data = r#"{"ts":1.5,"uid":"A","uid":"B","x":1,"x":"two","_path":"conn"}
{"u\u0069d":"C","_path":"conn","id.orig_p":80,"t\u0073":2.5}
{"id.orig_p":"bad","_path":"conn","id.orig_p":81,"uid":"D","ts":3}
{"uid":"E","id.orig_p":82,"id.orig_p":"bad"}
{"_path":"dns","_path":"conn","ts":4,"uid":"F"}
{"_path":5,"_path":"conn","uid":"G"}
{"_path":"conn","_path":5,"uid":"H"}
"#;
    let out = j(data);
    let got: Vec<(u64, &str)> = out
        .rejects
        .iter()
        .map(|r| (r.line, r.reason.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (4, "field \"id.orig_p\" (port): expected port, got \"bad\""),
            (7, "\"_path\" must be a non-empty string, got 5"),
        ]
    );
    assert_eq!(out.batches.len(), 1, "{:?}", out.batches.keys());
    let r = table_rows(&out, "zeek.conn");
    let uids: Vec<&Cell> = r.iter().map(|r| &r["uid"]).collect();
    assert_eq!(uids, [&s("B"), &s("C"), &s("D"), &s("F"), &s("G")]);
    assert_eq!(r[0]["x"], s("two"));
    assert_eq!(r[1]["x"], Cell::Null);
    assert_eq!(r[0]["ts"], Cell::Ts(1_500_000));
    assert_eq!(r[1]["ts"], Cell::Ts(2_500_000));
    assert_eq!(r[1]["id.orig_p"], Cell::U(80));
    assert_eq!(r[2]["id.orig_p"], Cell::U(81));
    assert_eq!(r[3]["id.orig_p"], Cell::Null);
    // Unknown columns come in order of first appearance after the known ones.
    let b = &out.batches[&TableName::new("zeek", "conn")][0];
    let names: Vec<String> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names, ["ts", "uid", "id", "x"]);
}

#[test]
fn json_rejected_record_takes_its_new_columns_with_it() {
    // Line 2 introduces typed and inferred columns, then fails on a later field: the batch is
    // as if the line had never been there, and the next record with the same keys in the same
    // order (the column hints of line 2 point at columns that are gone) is read normally.
    let data = r#"{"_path":"conn","ts":1,"uid":"A"}
{"_path":"conn","ts":2,"new1":1,"orig_bytes":5,"new2":"s","uid":"B","id.orig_p":-1}
{"_path":"conn","ts":3,"new3":true,"orig_bytes":6,"uid":"C"}
{"_path":"conn","ts":4,"new1":1,"orig_bytes":7,"new2":"s","uid":"D","id.orig_p":1}
"#;
    let out = json(data.as_bytes(), &source_named("conn.json"), 2);
    assert_eq!(out.rejects.len(), 1);
    assert_eq!(out.rejects[0].line, 2);
    assert_eq!(out.rejects[0].table, Some(TableName::new("zeek", "conn")));
    let bs = &out.batches[&TableName::new("zeek", "conn")];
    let names = |i: usize| -> Vec<String> {
        bs[i]
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    };
    assert_eq!(names(0), ["ts", "uid", "orig_bytes", "new3"]);
    // Columns stay once seen in a stream (`new3` is null in the second batch).
    assert_eq!(
        names(1),
        ["ts", "uid", "id", "orig_bytes", "new3", "new1", "new2"]
    );
    let r = rows(bs);
    let uids: Vec<&Cell> = r.iter().map(|r| &r["uid"]).collect();
    assert_eq!(uids, [&s("A"), &s("C"), &s("D")]);
    assert_eq!(r[0]["orig_bytes"], Cell::Null);
    assert_eq!(r[1]["orig_bytes"], Cell::I(6));
    assert_eq!(r[2]["orig_bytes"], Cell::I(7));
    assert_eq!(r[2]["new2"], s("s"));
    assert_eq!(r[2]["id.orig_p"], Cell::U(1));
}

#[test]
fn tsv_and_json_agree_on_hand_written_log() {
    let tsv_data = "#separator \\x09
#set_separator\t,
#empty_field\t(empty)
#unset_field\t-
#path\tdns
#fields\tts\tuid\tid.orig_h\tid.orig_p\tid.resp_h\tid.resp_p\tproto\ttrans_id\trtt\tquery\tAA\tanswers\tTTLs\trejected
#types\ttime\tstring\taddr\tport\taddr\tport\tenum\tcount\tinterval\tstring\tbool\tvector[string]\tvector[interval]\tbool
1521911720.613421\tCx\t10.0.0.1\t5353\tfe80::1\t53\tudp\t7\t0.000123\tex\\x00ample.com\tF\ta,b\t60.000000,30.000000\tF
1521911721.000000\tCy\t10.0.0.2\t5354\t10.0.0.3\t53\tudp\t8\t-\t(empty)\tT\t(empty)\t(empty)\tT
";
    let json_data = r#"{"_path":"dns","ts":1521911720.613421,"uid":"Cx","id.orig_h":"10.0.0.1","id.orig_p":5353,"id.resp_h":"fe80::1","id.resp_p":53,"proto":"udp","trans_id":7,"rtt":0.00012302398681640625,"query":"ex\\x00ample.com","AA":false,"answers":["a","b"],"TTLs":[60.0,30.0],"rejected":false}
{"_path":"dns","ts":"2018-03-24T17:15:21Z","uid":"Cy","id.orig_h":"10.0.0.2","id.orig_p":5354,"id.resp_h":"10.0.0.3","id.resp_p":53,"proto":"udp","trans_id":8,"query":"","AA":true,"answers":[],"TTLs":[],"rejected":true}
"#;
    let a = tsv(tsv_data.as_bytes(), &source_named("dns.log"), 10);
    let b = json(json_data.as_bytes(), &source_named("dns.json"), 10);
    assert!(
        a.rejects.is_empty() && b.rejects.is_empty(),
        "{:?} {:?}",
        a.rejects,
        b.rejects
    );
    let ba = &a.batches[&TableName::new("zeek", "dns")];
    let bb = &b.batches[&TableName::new("zeek", "dns")];
    assert_eq!(ba[0].schema().fields(), bb[0].schema().fields());
    let ra = rows(ba);
    let rb = rows(bb);
    for (x, y) in ra.iter().zip(&rb) {
        for (k, v) in x {
            assert!(v.close(&y[k]), "{k}: {v:?} vs {:?}", y[k]);
        }
    }
    assert_eq!(ra[0]["query"], s("ex\\x00ample.com"));
}

/// A tiny deterministic generator, so the garbage tests need no extra dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn garbage_never_panics_and_every_line_is_accounted_for() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let alphabet: &[u8] =
        b"#\t\n\r,-()\\x0123456789abcdefT:.[]{}\"empty_fieldsseparatortypestimeaddrportvector";
    let good_json = r#"{"_path":"conn","ts":1.5,"uid":"A","id.orig_p":80,"tunnel_parents":["a"],"x":[1,{"y":null}]}"#;
    for round in 0..400 {
        let mut data: Vec<u8> = match round % 4 {
            0 => (0..rng.next() % 600).map(|_| rng.next() as u8).collect(),
            1 => (0..rng.next() % 600)
                .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
                .collect(),
            2 => ALL_TYPES.as_bytes().to_vec(),
            _ => format!("{good_json}\n{good_json}\n").into_bytes(),
        };
        if round % 4 >= 2 {
            for _ in 0..1 + rng.next() % 8 {
                let i = (rng.next() % data.len() as u64) as usize;
                data[i] = match rng.next() % 3 {
                    0 => rng.next() as u8,
                    1 => alphabet[(rng.next() % alphabet.len() as u64) as usize],
                    _ => b'\t',
                };
            }
        }
        let batch_rows = 1 + (rng.next() % 3) as usize;
        let out = tsv(&data, &source_named("g.log"), batch_rows);
        let headerish = count_lines_not_starting(&data, b"#");
        // Header lines are neither rows nor rejects; everything else is one of the two.
        let nonempty = count_lines_not_starting(&data, b"\0never");
        assert!(
            out.total_rows() + out.rejects.len() <= nonempty,
            "round {round}"
        );
        if !data.starts_with(b"#") && !data.is_empty() && round % 4 == 0 {
            // Without any header every non-empty line is a reject, unless the first line
            // declares a custom meta prefix.
            let first = data.split(|&b| b == b'\n').next().unwrap();
            if memchr_find(first, b"separator ").is_none() {
                assert_eq!(out.rejects.len(), headerish, "round {round}");
            }
        }
        let out = json(&data, &source_named("g.json"), batch_rows);
        assert_eq!(
            out.total_rows() + out.rejects.len(),
            count_nonblank_lines(&data),
            "round {round}"
        );
    }
}

fn memchr_find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// An `Emit` that fails: the reader must pass the error on, not panic.
struct Failing;

impl Emit for Failing {
    fn batch(&mut self, _: &TableName, _: arrow::record_batch::RecordBatch) -> anyhow::Result<()> {
        anyhow::bail!("disk full")
    }
    fn reject(&mut self, _: silt_core::Reject) -> anyhow::Result<()> {
        anyhow::bail!("disk full")
    }
}

#[test]
fn sink_errors_are_returned() {
    let mut r = std::io::BufReader::new(ALL_TYPES.as_bytes());
    let e = silt_readers::zeek::tsv::read(
        &mut r,
        &source_named("x.log"),
        &ReadOptions::default(),
        &mut Failing,
    );
    assert!(e.is_err());
    let mut r = std::io::BufReader::new(&b"{\"ts\":1}\n"[..]);
    let e = silt_readers::zeek::json::read(
        &mut r,
        &source_named("x.json"),
        &ReadOptions::default(),
        &mut Failing,
    );
    assert!(e.is_err());
}

/// A reader that fails mid-stream: rows before the failure are emitted, then `Err`.
#[test]
fn io_errors_keep_rows_read_so_far() {
    struct Broken(Vec<u8>, bool);
    impl std::io::Read for Broken {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.1 {
                return Err(std::io::Error::other("corrupt gzip stream"));
            }
            self.1 = true;
            let n = self.0.len().min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            Ok(n)
        }
    }
    let data = b"#fields\tts\n#types\ttime\n1.0\n2.0\n".to_vec();
    let mut r = std::io::BufReader::new(Broken(data, false));
    let mut out = CollectEmit::default();
    let e = silt_readers::zeek::tsv::read(
        &mut r,
        &source_named("x.log"),
        &ReadOptions::default(),
        &mut out,
    );
    assert!(format!("{:#}", e.unwrap_err()).contains("corrupt gzip stream"));
    assert_eq!(out.total_rows(), 2);
}
