//! The Enricher on zeek-, Suricata- and pcap-like batches with the corpus test databases.

mod common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StringArray, StructArray, UInt16Array};
use arrow::datatypes::{DataType, Field, Fields, Schema, UInt32Type};
use silt_core::meta::{SOURCE_TYPE, TABLE, TIME_COLUMN};
use silt_core::{TableName, Transform};
use silt_enrich::{
    Attrs, Databases, EnrichConfig, EnrichHandle, Enricher, MapNames, RangeDbBuilder, RangeRecord,
    Source,
};

fn addr_md() -> HashMap<String, String> {
    HashMap::from([(SOURCE_TYPE.to_string(), "addr".to_string())])
}

fn strings(v: &[Option<&str>]) -> ArrayRef {
    Arc::new(StringArray::from(v.to_vec()))
}

fn names() -> MapNames {
    let mut m = MapNames::new();
    m.insert("1.128.0.1".parse().unwrap(), "host1.telstra.example");
    m.insert("81.2.69.142".parse().unwrap(), "london.example");
    m.insert("2001:218::1".parse().unwrap(), "v6.example.jp");
    m
}

fn dbs(with_city: bool) -> Option<Databases> {
    let dir = common::corpus()?;
    let mut d = Databases::new();
    d.add_mmdb(&dir.join("mmdb/GeoLite2-ASN-Test.mmdb"))
        .unwrap();
    let geo = if with_city {
        "GeoLite2-City-Test.mmdb"
    } else {
        "GeoLite2-Country-Test.mmdb"
    };
    d.add_mmdb(&dir.join("mmdb").join(geo)).unwrap();
    d.set_names(Arc::new(names()));
    Some(d)
}

const ADDRS: [Option<&str>; 8] = [
    Some("1.128.0.1"),
    Some("81.2.69.142"),
    None,
    Some("not-an-ip"),
    Some("10.0.0.1"),
    Some("::ffff:1.128.0.1"),
    Some("2001:218::1"),
    Some("81.2.69.142"),
];

fn zeek_conn_nested() -> RecordBatch {
    let id_fields = Fields::from(vec![
        Field::new("orig_h", DataType::Utf8, true).with_metadata(addr_md()),
        Field::new("orig_p", DataType::UInt16, true),
        Field::new("resp_h", DataType::Utf8, true).with_metadata(addr_md()),
        Field::new("resp_p", DataType::UInt16, true),
    ]);
    let n = ADDRS.len();
    let mut resp = ADDRS;
    resp.reverse();
    let id = StructArray::new(
        id_fields.clone(),
        vec![
            strings(&ADDRS),
            Arc::new(UInt16Array::from(vec![1234u16; n])),
            strings(&resp),
            Arc::new(UInt16Array::from(vec![80u16; n])),
        ],
        None,
    );
    let md = HashMap::from([
        (TABLE.to_string(), "zeek.conn".to_string()),
        (TIME_COLUMN.to_string(), "ts".to_string()),
    ]);
    let schema = Schema::new_with_metadata(
        vec![
            Field::new("uid", DataType::Utf8, true),
            Field::new("id", DataType::Struct(id_fields), true),
            Field::new("proto", DataType::Utf8, true),
        ],
        md,
    );
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            strings(&vec![Some("C1"); n]),
            Arc::new(id),
            strings(&vec![Some("tcp"); n]),
        ],
    )
    .unwrap()
}

fn flat(names: &[&str], with_md: bool) -> RecordBatch {
    let n = ADDRS.len();
    let mut fields = vec![Field::new("ts", DataType::Utf8, true)];
    let mut cols = vec![strings(&vec![Some("t"); n])];
    for (i, name) in names.iter().enumerate() {
        let f = Field::new(*name, DataType::Utf8, true);
        fields.push(if with_md {
            f.with_metadata(addr_md())
        } else {
            f
        });
        let mut v = ADDRS;
        v.rotate_left(i);
        cols.push(strings(&v));
        fields.push(Field::new(format!("x{i}"), DataType::UInt16, true));
        cols.push(Arc::new(UInt16Array::from(vec![i as u16; n])));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap()
}

fn names_of(b: &RecordBatch) -> Vec<String> {
    b.schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

/// Checks every output column of `prefix` against the per-address functions.
fn check_values(out: &RecordBatch, input: &dyn Array, prefix: &str, d: &Databases, city: bool) {
    let input = input.as_string::<i32>();
    let col = |s: &str| {
        out.column_by_name(&format!("{prefix}{s}"))
            .unwrap_or_else(|| panic!("no column {prefix}{s}"))
            .clone()
    };
    let asn = col("_asn");
    let asn = asn.as_primitive::<UInt32Type>();
    let org = col("_as_org");
    let org = org.as_string::<i32>();
    let cc = col("_country");
    let cc = cc.as_string::<i32>();
    let rdns = col("_rdns");
    let rdns = rdns.as_string::<i32>();
    for i in 0..input.len() {
        let ip = if input.is_valid(i) {
            input.value(i)
        } else {
            ""
        };
        let get = |a: &StringArray| a.is_valid(i).then(|| a.value(i).to_string());
        assert_eq!(asn.is_valid(i).then(|| asn.value(i)), d.asn(ip), "asn {ip}");
        assert_eq!(get(org).as_deref(), d.as_org(ip), "org {ip}");
        assert_eq!(get(cc).as_deref(), d.country(ip), "country {ip}");
        assert_eq!(
            get(rdns),
            d.rdns(ip).unwrap().map(|s| s.to_string()),
            "rdns {ip}"
        );
        if city {
            let c = col("_city");
            let c = c.as_string::<i32>();
            assert_eq!(get(c).as_deref(), d.city(ip), "city {ip}");
        } else {
            assert!(out.column_by_name(&format!("{prefix}_city")).is_none());
        }
    }
}

#[test]
fn zeek_conn_nested_struct() {
    let Some(d) = dbs(true) else { return };
    let mut e = Enricher::new(EnrichConfig::new(Attrs::all()), d.clone()).unwrap();
    let table = TableName::new("zeek", "conn");
    let input = zeek_conn_nested();
    let out = e.apply(&table, input.clone()).unwrap();
    // Nested address columns: new columns right after the struct that holds them.
    assert_eq!(
        names_of(&out),
        [
            "uid",
            "id",
            "orig_asn",
            "orig_as_org",
            "orig_country",
            "orig_city",
            "orig_rdns",
            "resp_asn",
            "resp_as_org",
            "resp_country",
            "resp_city",
            "resp_rdns",
            "proto"
        ]
    );
    assert_eq!(out.schema().metadata(), input.schema().metadata());
    let s = out.schema();
    assert_eq!(
        s.field_with_name("orig_asn").unwrap().data_type(),
        &DataType::UInt32
    );
    for (n, t) in [
        ("orig_asn", "enrich:asn"),
        ("orig_as_org", "enrich:as_org"),
        ("resp_country", "enrich:country"),
        ("resp_city", "enrich:city"),
        ("orig_rdns", "enrich:rdns"),
    ] {
        let f = s.field_with_name(n).unwrap();
        assert_eq!(
            f.metadata().get(SOURCE_TYPE).map(String::as_str),
            Some(t),
            "{n}"
        );
        assert!(f.is_nullable());
        if n != "orig_asn" {
            assert_eq!(f.data_type(), &DataType::Utf8);
        }
    }
    let id = input.column(1).as_struct();
    check_values(&out, id.column(0), "orig", &d, true);
    check_values(&out, id.column(2), "resp", &d, true);
    // Hard facts from the test databases.
    let asn = out
        .column_by_name("orig_asn")
        .unwrap()
        .as_primitive::<UInt32Type>()
        .clone();
    let city = out
        .column_by_name("orig_city")
        .unwrap()
        .as_string::<i32>()
        .clone();
    let cc = out
        .column_by_name("orig_country")
        .unwrap()
        .as_string::<i32>()
        .clone();
    let org = out
        .column_by_name("orig_as_org")
        .unwrap()
        .as_string::<i32>()
        .clone();
    let rdns = out
        .column_by_name("orig_rdns")
        .unwrap()
        .as_string::<i32>()
        .clone();
    assert_eq!(asn.value(0), 1221);
    assert_eq!(org.value(0), "Telstra Pty Ltd");
    assert_eq!(asn.value(5), 1221, "IPv4-mapped resolves like IPv4");
    assert_eq!(rdns.value(5), "host1.telstra.example");
    assert_eq!((cc.value(1), city.value(1)), ("GB", "London"));
    assert_eq!(rdns.value(1), "london.example");
    assert_eq!(cc.value(6), "JP");
    for row in [2, 3, 4] {
        assert!(
            asn.is_null(row)
                && org.is_null(row)
                && cc.is_null(row)
                && city.is_null(row)
                && rdns.is_null(row),
            "row {row}"
        );
    }
    let rep = e.report();
    assert!(
        rep.iter()
            .any(|l| l == "enrich asn: 12 lookups, 33.3 % found, cache hit 67 %"),
        "{rep:?}"
    );
    assert!(rep.iter().any(|l| l.contains("cache hit")), "{rep:?}");
    assert!(
        rep.iter()
            .any(|l| l == "enrich: 2 values were not IP addresses (enriched as NULL)"),
        "{rep:?}"
    );
    eprintln!("{rep:#?}");
}

#[test]
fn zeek_flat_dotted_names() {
    let Some(d) = dbs(false) else { return };
    let mut e = Enricher::new(EnrichConfig::new(Attrs::all()), d.clone()).unwrap();
    let input = flat(&["id.orig_h", "id.resp_h"], true);
    let out = e
        .apply(&TableName::new("zeek", "conn"), input.clone())
        .unwrap();
    assert_eq!(
        names_of(&out),
        [
            "ts",
            "id.orig_h",
            "orig_asn",
            "orig_as_org",
            "orig_country",
            "orig_rdns",
            "x0",
            "id.resp_h",
            "resp_asn",
            "resp_as_org",
            "resp_country",
            "resp_rdns",
            "x1"
        ]
    );
    check_values(&out, input.column(1), "orig", &d, false);
    check_values(&out, input.column(3), "resp", &d, false);
}

#[test]
fn suricata_and_pcap_by_name() {
    let Some(d) = dbs(true) else { return };
    let mut e = Enricher::new(EnrichConfig::new(Attrs::all()), d.clone()).unwrap();
    let input = flat(&["src_ip", "dest_ip"], false);
    let out = e
        .apply(&TableName::new("suricata", "alert"), input.clone())
        .unwrap();
    assert_eq!(
        names_of(&out),
        [
            "ts",
            "src_ip",
            "src_asn",
            "src_as_org",
            "src_country",
            "src_city",
            "src_rdns",
            "x0",
            "dest_ip",
            "dest_asn",
            "dest_as_org",
            "dest_country",
            "dest_city",
            "dest_rdns",
            "x1"
        ]
    );
    check_values(&out, input.column(1), "src", &d, true);
    check_values(&out, input.column(3), "dest", &d, true);

    let input = flat(&["src", "dst"], false);
    let out = e
        .apply(&TableName::new("pcap", "flow"), input.clone())
        .unwrap();
    assert_eq!(
        names_of(&out),
        [
            "ts",
            "src",
            "src_asn",
            "src_as_org",
            "src_country",
            "src_city",
            "src_rdns",
            "x0",
            "dst",
            "dst_asn",
            "dst_as_org",
            "dst_country",
            "dst_city",
            "dst_rdns",
            "x1"
        ]
    );
    check_values(&out, input.column(1), "src", &d, true);
    check_values(&out, input.column(3), "dst", &d, true);

    // Access logs: remote_addr.
    let input = flat(&["remote_addr"], false);
    let out = e.apply(&TableName::new("access", "log"), input).unwrap();
    assert_eq!(names_of(&out)[2], "remote_asn");
    // A table without address columns passes through untouched.
    let input = flat(&["host"], false);
    let out = e.apply(&TableName::new("x", "y"), input.clone()).unwrap();
    assert_eq!(out, input);
}

#[test]
fn nested_duplicates_are_skipped_by_default_and_noted() {
    let Some(d) = dbs(false) else { return };
    let mut e = Enricher::new(EnrichConfig::new("asn".parse().unwrap()), d).unwrap();
    let n = ADDRS.len();
    let tunnel = Fields::from(vec![
        Field::new("src_ip", DataType::Utf8, true).with_metadata(addr_md())
    ]);
    let schema = Schema::new(vec![
        Field::new("src_ip", DataType::Utf8, true),
        Field::new("tunnel", DataType::Struct(tunnel.clone()), true),
    ]);
    let b = RecordBatch::try_new(
        Arc::new(schema),
        vec![
            strings(&ADDRS),
            Arc::new(StructArray::new(tunnel, vec![strings(&ADDRS)], None)),
        ],
    )
    .unwrap();
    let out = e.apply(&TableName::new("suricata", "alert"), b).unwrap();
    assert_eq!(
        names_of(&out),
        ["src_ip", "src_asn", "src_as_org", "tunnel"]
    );
    assert_eq!(out.num_rows(), n);
    let rep = e.report();
    assert!(
        rep.iter()
            .any(|l| l.contains("tunnel.src_ip in suricata.alert not enriched by default")),
        "{rep:?}"
    );
}

#[test]
fn explicit_columns_and_collisions() {
    let Some(d) = dbs(false) else { return };
    let mut cfg = EnrichConfig::new("geo".parse().unwrap());
    cfg.columns = Some(vec!["id.resp_h".to_string(), "nope".to_string()]);
    let mut e = Enricher::new(cfg, d.clone()).unwrap();
    let out = e
        .apply(&TableName::new("zeek", "conn"), zeek_conn_nested())
        .unwrap();
    assert_eq!(names_of(&out), ["uid", "id", "resp_country", "proto"]);
    assert!(e
        .report()
        .iter()
        .any(|l| l.contains("column nope is not in zeek.conn")));

    // A new column that already exists: a clear error.
    let mut e = Enricher::new(EnrichConfig::new(Attrs::all()), d.clone()).unwrap();
    let input = flat(&["src_ip", "src_asn"], false);
    let err = e
        .apply(&TableName::new("suricata", "alert"), input)
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("\"src_asn\"") && msg.contains("collide"),
        "{msg}"
    );

    // Two explicit columns with the same prefix.
    let mut cfg = EnrichConfig::new("asn".parse().unwrap());
    cfg.columns = Some(vec!["src".to_string(), "src_ip".to_string()]);
    let mut e = Enricher::new(cfg, d.clone()).unwrap();
    let err = e
        .apply(&TableName::new("t", "t"), flat(&["src", "src_ip"], false))
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("would both get a column \"src_asn\""),
        "{err:#}"
    );

    // An explicit non-string column.
    let mut cfg = EnrichConfig::new("asn".parse().unwrap());
    cfg.columns = Some(vec!["x0".to_string()]);
    let mut e = Enricher::new(cfg, d).unwrap();
    let err = e
        .apply(&TableName::new("t", "t"), flat(&["src"], false))
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("not a string column"),
        "{err:#}"
    );
}

#[test]
fn attribute_parsing_and_missing_databases() {
    assert_eq!("asn,geo,rdns".parse::<Attrs>().unwrap(), Attrs::all());
    assert_eq!(
        " ASN , geo".parse::<Attrs>().unwrap().to_string(),
        "asn,geo"
    );
    let err = "asn,city".parse::<Attrs>().unwrap_err().to_string();
    assert_eq!(
        err,
        "unknown enrichment attribute \"city\" in \"asn,city\" (known: asn, geo, rdns)"
    );
    assert!("".parse::<Attrs>().is_err());
    let err = Enricher::new(EnrichConfig::new(Attrs::all()), Databases::new())
        .err()
        .unwrap();
    let msg = err.to_string();
    assert!(
        msg.contains("asn needs") && msg.contains("geo needs") && msg.contains("rdns needs"),
        "{msg}"
    );
}

#[test]
fn reload_between_batches_takes_effect() {
    let Some(d) = dbs(true) else { return };
    let mut e = Enricher::new(EnrichConfig::new(Attrs::all()), d).unwrap();
    let h = e.handle();
    let t = TableName::new("pcap", "packet");
    let out = e.apply(&t, flat(&["src"], false)).unwrap();
    assert!(out.column_by_name("src_city").is_some());
    let asn = out
        .column_by_name("src_asn")
        .unwrap()
        .as_primitive::<UInt32Type>()
        .clone();
    assert_eq!(asn.value(0), 1221);

    // New set: a range map for ASNs, the Country db (no city), other names.
    let Some(dir) = common::corpus() else { return };
    let mut b = RangeDbBuilder::new();
    b.add_range(
        "1.0.0.0".parse().unwrap(),
        "1.255.255.255".parse().unwrap(),
        RangeRecord {
            asn: Some(64500),
            as_org: Some(Arc::from("Example AS")),
            ..Default::default()
        },
    )
    .unwrap();
    let mut n = MapNames::new();
    n.insert("1.128.0.1".parse::<IpAddr>().unwrap(), "renamed.example");
    let mut d2 = Databases::new();
    d2.add_source(Source::Ranges(b.build())).unwrap();
    d2.add_mmdb(&dir.join("mmdb/GeoLite2-Country-Test.mmdb"))
        .unwrap();
    d2.set_names(Arc::new(n));
    // A set that cannot serve rdns is refused and the old one stays.
    let mut bad = Databases::new();
    bad.add_mmdb(&dir.join("mmdb/GeoLite2-ASN-Test.mmdb"))
        .unwrap();
    assert!(h.reload(bad).is_err());
    h.reload(d2).unwrap();

    let out = e.apply(&t, flat(&["src"], false)).unwrap();
    assert!(
        out.column_by_name("src_city").is_none(),
        "{:?}",
        names_of(&out)
    );
    let asn = out
        .column_by_name("src_asn")
        .unwrap()
        .as_primitive::<UInt32Type>()
        .clone();
    let org = out
        .column_by_name("src_as_org")
        .unwrap()
        .as_string::<i32>()
        .clone();
    let rdns = out
        .column_by_name("src_rdns")
        .unwrap()
        .as_string::<i32>()
        .clone();
    let cc = out
        .column_by_name("src_country")
        .unwrap()
        .as_string::<i32>()
        .clone();
    assert_eq!((asn.value(0), org.value(0)), (64500, "Example AS"));
    assert_eq!(rdns.value(0), "renamed.example");
    assert!(asn.is_null(1), "81.2.69.142 is outside the new range map");
    assert!(rdns.is_null(1));
    assert_eq!(cc.value(1), "GB");
    assert!(e
        .report()
        .iter()
        .any(|l| l == "enrich: databases reloaded 1 times"));
    // The handle is usable from another thread.
    let h2 = h.clone();
    std::thread::spawn(move || assert_eq!(h2.databases().asn("1.2.3.4"), Some(64500)))
        .join()
        .unwrap();
}

#[test]
fn tiny_cache_gives_the_same_answers() {
    let Some(d) = dbs(true) else { return };
    let mut big = Enricher::new(EnrichConfig::new(Attrs::all()), d.clone()).unwrap();
    let mut cfg = EnrichConfig::new(Attrs::all());
    cfg.cache_capacity = 2;
    let mut small = Enricher::new(cfg, d).unwrap();
    let t = TableName::new("suricata", "flow");
    for i in 0..5 {
        let names = ["src_ip", "dest_ip"];
        let mut b = flat(&names, false);
        if i % 2 == 1 {
            b = flat(&names[..1], false);
        }
        assert_eq!(
            big.apply(&t, b.clone()).unwrap(),
            small.apply(&t, b).unwrap()
        );
    }
    assert!(
        small
            .report()
            .iter()
            .any(|l| l.starts_with("enrich: cache emptied")),
        "{:?}",
        small.report()
    );
}

mod props {
    use super::*;
    use proptest::prelude::*;

    const POOL: [&str; 16] = [
        "1.128.0.1",
        "::ffff:1.128.0.1",
        "::FFFF:1.128.0.1",
        "81.2.69.142",
        "81.2.69.160",
        "2001:218::1",
        "2001:0218:0000::0001",
        "2.125.160.216",
        "89.160.20.112",
        "10.0.0.1",
        "216.160.83.56",
        "2a02:cf40::1",
        "garbage",
        "1.2.3",
        "",
        "12.81.92.7",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]
        #[test]
        fn rows_match_the_per_address_functions(
            batches in prop::collection::vec(prop::collection::vec(prop::option::weighted(0.9, 0usize..POOL.len()), 0..60), 1..5),
            cap in 1usize..20,
        ) {
            let Some(d) = dbs(true) else { return Ok(()) };
            let mut cfg = EnrichConfig::new(Attrs::all());
            cfg.cache_capacity = cap;
            let mut e = Enricher::new(cfg, d.clone()).unwrap();
            for rows in batches {
                let v: Vec<Option<&str>> = rows.iter().map(|r| r.map(|i| POOL[i])).collect();
                let schema = Arc::new(Schema::new(vec![Field::new("dst", DataType::Utf8, true)]));
                let b = RecordBatch::try_new(schema, vec![strings(&v)]).unwrap();
                let out = e.apply(&TableName::new("pcap", "packet"), b.clone()).unwrap();
                check_values(&out, b.column(0), "dst", &d, true);
            }
        }
    }
}

struct FailingNames;

impl silt_enrich::NameLookup for FailingNames {
    fn lookup_many(
        &self,
        _: &[Option<IpAddr>],
        _: &mut Vec<Option<Arc<str>>>,
    ) -> anyhow::Result<()> {
        anyhow::bail!("index file vanished")
    }
}

#[test]
fn a_failing_name_index_is_an_error_and_caches_nothing() {
    let Some(mut d) = dbs(false) else { return };
    d.set_names(Arc::new(FailingNames));
    let mut e = Enricher::new(EnrichConfig::new(Attrs::all()), d).unwrap();
    let h = e.handle();
    let t = TableName::new("pcap", "packet");
    let err = e.apply(&t, flat(&["src"], false)).unwrap_err();
    assert!(
        format!("{err:#}").contains("index file vanished"),
        "{err:#}"
    );
    // After a reload with a working index the same batch is enriched fully.
    h.reload(dbs(false).unwrap()).unwrap();
    let out = e.apply(&t, flat(&["src"], false)).unwrap();
    let rdns = out
        .column_by_name("src_rdns")
        .unwrap()
        .as_string::<i32>()
        .clone();
    assert_eq!(rdns.value(0), "host1.telstra.example");
}

/// Real addresses: the id.orig_h / id.resp_h columns of the corpus's Zeek conn.log (8,462
/// records, mostly private addresses), in the nested layout silt's Zeek reader produces.
#[test]
fn real_zeek_conn_addresses() {
    let Some(dir) = common::corpus() else { return };
    let text = std::fs::read_to_string(dir.join("zeek-tsv/vast/conn.log")).unwrap();
    let fields_line = text.lines().find(|l| l.starts_with("#fields")).unwrap();
    let cols: Vec<&str> = fields_line.split('\t').skip(1).collect();
    let oi = cols.iter().position(|c| *c == "id.orig_h").unwrap();
    let ri = cols.iter().position(|c| *c == "id.resp_h").unwrap();
    let (mut orig, mut resp) = (Vec::new(), Vec::new());
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = l.split('\t').collect();
        orig.push(Some(f[oi]));
        resp.push(Some(f[ri]));
    }
    assert!(orig.len() > 8000);
    let id_fields = Fields::from(vec![
        Field::new("orig_h", DataType::Utf8, true).with_metadata(addr_md()),
        Field::new("resp_h", DataType::Utf8, true).with_metadata(addr_md()),
    ]);
    let id = StructArray::new(
        id_fields.clone(),
        vec![strings(&orig), strings(&resp)],
        None,
    );
    let schema = Arc::new(Schema::new(vec![Field::new(
        "id",
        DataType::Struct(id_fields),
        true,
    )]));
    let b = RecordBatch::try_new(schema, vec![Arc::new(id)]).unwrap();
    let Some(d) = dbs(true) else { return };
    let mut e = Enricher::new(EnrichConfig::new(Attrs::all()), d.clone()).unwrap();
    let out = e.apply(&TableName::new("zeek", "conn"), b.clone()).unwrap();
    let id = b.column(0).as_struct();
    check_values(&out, id.column(0), "orig", &d, true);
    check_values(&out, id.column(1), "resp", &d, true);
    let rep = e.report();
    assert!(
        rep[0].starts_with(&format!("enrich asn: {} lookups", {
            let n = 2 * orig.len();
            format!("{},{:03}", n / 1000, n % 1000)
        })),
        "{rep:?}"
    );
    eprintln!("{rep:#?}");
}

/// Enrichers of different attributes on one handle: each checked against what the handle was
/// made for, and one reload reaches them all.
#[test]
fn enrichers_sharing_a_handle_are_reloaded_together() {
    let ranges = |asn: u32| {
        let mut b = RangeDbBuilder::new();
        b.add_range(
            "1.0.0.0".parse().unwrap(),
            "1.255.255.255".parse().unwrap(),
            RangeRecord {
                asn: Some(asn),
                as_org: Some(Arc::from("Example AS")),
                ..Default::default()
            },
        )
        .unwrap();
        let mut d = Databases::new();
        d.add_source(Source::Ranges(b.build())).unwrap();
        d
    };
    let asn_only: Attrs = "asn".parse().unwrap();
    let h = EnrichHandle::new(asn_only, ranges(64500)).unwrap();
    let mut a = Enricher::sharing(EnrichConfig::new(asn_only), &h).unwrap();
    let mut b = Enricher::sharing(EnrichConfig::new(asn_only), &h).unwrap();
    // Geo was not asked of the handle's databases.
    let err = Enricher::sharing(EnrichConfig::new("asn,geo".parse().unwrap()), &h)
        .err()
        .unwrap();
    assert!(err.to_string().contains("checked for asn only"), "{err}");
    let t = TableName::new("pcap", "packet");
    let asn_of = |e: &mut Enricher| {
        let out = e.apply(&t, flat(&["src"], false)).unwrap();
        out.column_by_name("src_asn")
            .unwrap()
            .as_primitive::<UInt32Type>()
            .value(0)
    };
    assert_eq!((asn_of(&mut a), asn_of(&mut b)), (64500, 64500));
    h.reload(ranges(64501)).unwrap();
    assert_eq!((asn_of(&mut a), asn_of(&mut b)), (64501, 64501));
    assert_eq!(h.reloads(), 1);
}

/// Lists of addresses (Zeek's `set[addr]`): enriched by default when the reader says so, each
/// new column a list of the same shape (nulls and empty lists kept, one value per address).
#[test]
fn lists_of_addresses_get_lists_of_the_same_shape() {
    use arrow::array::{ListArray, ListBuilder, StringBuilder};
    let Some(d) = dbs(false) else { return };
    let mut b = ListBuilder::new(StringBuilder::new());
    b.values().append_value("1.128.0.1");
    b.values().append_value("not-an-ip");
    b.values().append_null();
    b.append(true);
    b.append(false);
    b.append(true);
    b.values().append_value("81.2.69.142");
    b.append(true);
    let list = b.finish();
    let md = HashMap::from([(SOURCE_TYPE.to_string(), "set[addr]".to_string())]);
    let plain = Field::new("conn_uids", list.data_type().clone(), true);
    let schema = Schema::new(vec![
        Field::new("tx_hosts", list.data_type().clone(), true).with_metadata(md),
        plain,
    ]);
    let batch = RecordBatch::try_new(
        Arc::new(schema),
        vec![Arc::new(list.clone()), Arc::new(list)],
    )
    .unwrap();
    let mut e = Enricher::new(EnrichConfig::new("asn,geo".parse().unwrap()), d).unwrap();
    let t = TableName::new("zeek", "files");
    let out = e.apply(&t, batch.clone()).unwrap();
    // Only the list its reader marks as addresses, by default.
    assert_eq!(
        names_of(&out),
        [
            "tx_hosts",
            "tx_hosts_asn",
            "tx_hosts_as_org",
            "tx_hosts_country",
            "conn_uids"
        ]
    );
    let asn = out.column_by_name("tx_hosts_asn").unwrap();
    let asn: &ListArray = asn.as_list::<i32>();
    assert_eq!(asn.len(), 4);
    assert!(asn.is_null(1));
    assert_eq!(asn.value_length(2), 0);
    let first = asn.value(0);
    let first = first.as_primitive::<UInt32Type>();
    assert_eq!(
        (
            first.len(),
            first.value(0),
            first.is_null(1),
            first.is_null(2)
        ),
        (3, 1221, true, true)
    );
    let country = out.column_by_name("tx_hosts_country").unwrap();
    let last = country.as_list::<i32>().value(3);
    assert_eq!(last.as_string::<i32>().value(0), "GB");
    // Named explicitly, any list of strings is enriched.
    let mut cfg = EnrichConfig::new("asn".parse().unwrap());
    cfg.columns = Some(vec!["conn_uids".into()]);
    let mut e = Enricher::new(cfg, dbs(false).unwrap()).unwrap();
    let out = e.apply(&t, batch).unwrap();
    assert!(out.column_by_name("conn_uids_asn").is_some());
    assert!(out.column_by_name("tx_hosts_asn").is_none());
}
