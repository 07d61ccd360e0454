//! Corpus and value tests of the access-log reader and `--parse-field`.
//! Expected values are computed independently from the files (simple splits), or written by
//! hand from the lines printed in the comments.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, TimestampMicrosecondType, UInt16Type, UInt64Type};
use silt_access::{AccessOptions, ParseField, ParseFieldSpec};
use silt_core::{meta, CollectEmit, ReadOptions, SourceInfo, TableName, Transform};

fn corpus() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/weblogs");
    p.is_dir().then_some(p)
}

fn read_file(path: &std::path::Path, format: &str) -> CollectEmit {
    let opts = AccessOptions::new(format, None).unwrap();
    let mut out = CollectEmit::default();
    let mut r = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    silt_access::read(
        &mut r,
        &SourceInfo::from_path(path),
        &ReadOptions { batch_rows: 7 },
        &opts,
        &mut out,
    )
    .unwrap();
    out
}

fn read_str(text: &str, format: &str) -> CollectEmit {
    let opts = AccessOptions::new(format, Some("t")).unwrap();
    let mut out = CollectEmit::default();
    silt_access::read(
        &mut text.as_bytes(),
        &SourceInfo::stdin(),
        &ReadOptions::default(),
        &opts,
        &mut out,
    )
    .unwrap();
    out
}

/// All batches of the only table, concatenated.
fn one_table(out: &CollectEmit) -> RecordBatch {
    assert_eq!(out.batches.len(), 1, "tables: {:?}", out.batches.keys());
    let batches = out.batches.values().next().unwrap();
    arrow::compute::concat_batches(&batches[0].schema(), batches).unwrap()
}

fn strs(b: &RecordBatch, col: &str) -> Vec<Option<String>> {
    let a = b
        .column_by_name(col)
        .unwrap_or_else(|| panic!("no column {col}"));
    let a: &StringArray = a.as_string::<i32>();
    a.iter().map(|v| v.map(str::to_string)).collect()
}

fn u64s(b: &RecordBatch, col: &str) -> Vec<Option<u64>> {
    b.column_by_name(col)
        .unwrap()
        .as_primitive::<UInt64Type>()
        .iter()
        .collect()
}

fn u16s(b: &RecordBatch, col: &str) -> Vec<Option<u16>> {
    b.column_by_name(col)
        .unwrap()
        .as_primitive::<UInt16Type>()
        .iter()
        .collect()
}

fn times(b: &RecordBatch, col: &str) -> Vec<Option<i64>> {
    b.column_by_name(col)
        .unwrap()
        .as_primitive::<TimestampMicrosecondType>()
        .iter()
        .collect()
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

#[test]
fn lnav_access_log_0() {
    let Some(dir) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let out = read_file(&dir.join("lnav-access_log.0"), "combined");
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let b = one_table(&out);
    assert_eq!(
        out.batches.keys().next().unwrap().to_string(),
        "access.lnav_access_log"
    );
    assert_eq!(b.num_rows(), 3);
    assert_eq!(meta::time_column(&b.schema()), Some("time"));
    assert_eq!(u16s(&b, "status"), [Some(200), Some(404), Some(200)]);
    assert_eq!(u64s(&b, "bytes"), [Some(134), Some(46210), Some(78929)]);
    // 20/Jul/2009:22:59:26 +0000 = 1248130766 s since the epoch.
    assert_eq!(
        times(&b, "time"),
        [
            Some(1_248_130_766_000_000),
            Some(1_248_130_769_000_000),
            Some(1_248_130_769_000_000)
        ]
    );
    assert_eq!(strs(&b, "method"), [s("GET"), s("GET"), s("GET")]);
    assert_eq!(strs(&b, "path")[1], s("/vmw/vSphere/default/vmkboot.gz"));
    assert_eq!(strs(&b, "protocol")[0], s("HTTP/1.0"));
    assert_eq!(strs(&b, "request"), [None, None, None]);
    assert_eq!(strs(&b, "referer"), [None, None, None]);
    assert_eq!(strs(&b, "remote_user"), [None, None, None]);
    assert_eq!(strs(&b, "user_agent")[2], s("gPXE/0.9.7"));
    assert_eq!(strs(&b, "remote_addr")[0], s("192.168.202.254"));
    let f = b.schema().field_with_name("status").unwrap().clone();
    assert_eq!(
        f.metadata().get(meta::SOURCE_TYPE).map(String::as_str),
        Some("$status")
    );
}

#[test]
fn lnav_access_log_1_empty_request() {
    let Some(dir) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    // 10.112.81.15 - - [15/Feb/2013:06:00:31 +0000] "-" 400 0 "-" "-"
    let out = read_file(&dir.join("lnav-access_log.1"), "combined");
    assert!(out.rejects.is_empty());
    let b = one_table(&out);
    assert_eq!(b.num_rows(), 1);
    for c in [
        "method",
        "path",
        "protocol",
        "request",
        "referer",
        "user_agent",
    ] {
        assert_eq!(strs(&b, c), [None], "{c}");
    }
    assert_eq!(u16s(&b, "status"), [Some(400)]);
    assert_eq!(u64s(&b, "bytes"), [Some(0)]);
}

#[test]
fn lnav_bad_access_log_rejects() {
    let Some(dir) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let path = dir.join("lnav-bad_access_log.0");
    let text = std::fs::read_to_string(&path).unwrap();
    // Independently: a combined line has "-" as its second space-separated token.
    let bad: Vec<u64> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.split(' ').nth(1) != Some("-"))
        .map(|(i, _)| i as u64 + 1)
        .collect();
    let total = text.lines().count();
    let out = read_file(&path, "combined");
    assert_eq!(out.rejects.len(), bad.len());
    assert_eq!(out.rejects.iter().map(|r| r.line).collect::<Vec<_>>(), bad);
    assert_eq!(out.total_rows(), total - bad.len());
    let r = &out.rejects[0];
    assert_eq!(
        r.raw,
        text.lines().nth(bad[0] as usize - 1).unwrap().as_bytes()
    );
    assert_eq!(
        r.table.as_ref().unwrap().to_string(),
        "access.lnav_bad_access_log"
    );
    assert!(r.reason.contains("does not match"), "{}", r.reason);
}

#[test]
fn lnav_shop_access_log_main_format() {
    let Some(dir) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let path = dir.join("lnav-shop_access_log.0");
    let text = std::fs::read_to_string(&path).unwrap();
    // Independent split: `addr - user [time] "request" status bytes "ref" "ua" "xff"`; these
    // lines have no quotes inside fields, so splitting on '"' gives the fields.
    let mut status_hist: BTreeMap<u16, usize> = BTreeMap::new();
    let mut bytes_sum = 0u64;
    let mut xff_set = 0usize;
    for l in text.lines() {
        let parts: Vec<&str> = l.split('"').collect();
        assert_eq!(parts.len(), 9, "{l}");
        let mut it = parts[2].split_whitespace();
        *status_hist
            .entry(it.next().unwrap().parse().unwrap())
            .or_default() += 1;
        bytes_sum += it.next().unwrap().parse::<u64>().unwrap();
        if parts[7] != "-" {
            xff_set += 1;
        }
    }
    for fmt in ["main", "auto"] {
        let out = read_file(&path, fmt);
        assert!(out.rejects.is_empty(), "{fmt}: {:?}", &out.rejects[..1]);
        let b = one_table(&out);
        assert_eq!(b.num_rows(), text.lines().count());
        let mut hist: BTreeMap<u16, usize> = BTreeMap::new();
        for v in u16s(&b, "status") {
            *hist.entry(v.unwrap()).or_default() += 1;
        }
        assert_eq!(hist, status_hist);
        assert_eq!(
            u64s(&b, "bytes").iter().map(|v| v.unwrap()).sum::<u64>(),
            bytes_sum
        );
        assert_eq!(
            strs(&b, "x_forwarded_for")
                .iter()
                .filter(|v| v.is_some())
                .count(),
            xff_set
        );
        // 22/Jan/2019:03:56:14 +0330 is 2019-01-22T00:26:14Z = 1548116774.
        assert_eq!(times(&b, "time")[0], Some(1_548_116_774_000_000));
        assert_eq!(
            strs(&b, "user_agent")[0],
            s("Mozilla/5.0 (compatible; AhrefsBot/6.1; +http://ahrefs.com/robot/)")
        );
        assert!(strs(&b, "path")[0]
            .as_deref()
            .unwrap()
            .starts_with("/filter/27|13%20"));
    }
    // With plain combined, the trailing "$http_x_forwarded_for" does not fit: every line is a
    // reject (not a user agent polluted with `" "-`).
    let out = read_file(&path, "combined");
    assert_eq!(out.rejects.len(), text.lines().count());
}

#[test]
fn lnav_regexp_access_log_apache_format() {
    let Some(dir) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let out = read_file(
        &dir.join("lnav-regexp_access_log.0"),
        r#"%v:%p %h %l %u %t \"%r\" %>s %b \"%{Referer}i\" \"%{User-agent}i\" %D"#,
    );
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let b = one_table(&out);
    assert_eq!(b.num_rows(), 2);
    assert_eq!(strs(&b, "server_name"), [s("localhost"), s("localhost")]);
    assert_eq!(u16s(&b, "server_port"), [Some(443), Some(443)]);
    assert_eq!(strs(&b, "remote_user"), [s("jsmith"), s("khenry")]);
    assert_eq!(strs(&b, "ident"), [s("1j0vhgd"), s("cger1e")]);
    assert_eq!(strs(&b, "protocol"), [s("HTTP/2.0"), s("HTTP/2.0")]);
    // 26/Jul/2023:00:01:26 -0700 = 2023-07-26T07:01:26Z = 1690354886.
    assert_eq!(times(&b, "time")[0], Some(1_690_354_886_000_000));
    assert_eq!(u64s(&b, "request_time_us"), [Some(116075), Some(156302)]);
    assert_eq!(
        strs(&b, "referer")[1],
        s("https://localhost/secure/RapidBoard.jspa?rapidView=1843&view=planning.nodetail&issueLimit=100")
    );
}

#[test]
fn lnav_syslog_with_access_log() {
    let Some(dir) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let path = dir.join("lnav-syslog_with_access_log.0");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines = text.lines().count();
    // Not an access log: every line is a reject under combined.
    let out = read_file(&path, "combined");
    assert_eq!(out.rejects.len(), lines);
    assert_eq!(out.total_rows(), 0);
    // A custom nginx format for the tomcat lines inside the syslog: independently, those are
    // the lines containing `tomcat.log: `.
    let tomcat = text.lines().filter(|l| l.contains("tomcat.log: ")).count();
    let out = read_file(
        &path,
        r#"$syslog_prefix: $remote_addr - $remote_user "$request" $status $body_bytes_sent $request_time"#,
    );
    assert_eq!(out.total_rows(), tomcat);
    assert_eq!(out.rejects.len(), lines - tomcat);
    let b = one_table(&out);
    assert_eq!(
        strs(&b, "path"),
        [s("/includes/js/combined-javascript.js"), s("/bad.foo")]
    );
    assert_eq!(u16s(&b, "status"), [Some(200), Some(404)]);
    let rt = b.column_by_name("request_time").unwrap();
    assert_eq!(rt.data_type(), &DataType::Float64);
    assert_eq!(
        rt.as_primitive::<arrow::datatypes::Float64Type>().value(0),
        4.386
    );
    // No time field: no event-time column.
    assert_eq!(meta::time_column(&b.schema()), None);
}

#[test]
fn values_ipv6_escapes_garbage() {
    let text = concat!(
        r#"2001:DB8:0:0::1 - alice [01/Mar/2024:12:00:00 +0100] "GET /q?a=\"x\" HTTP/1.1" 200 5 "https://r/" "UA \"quoted\" \x22n\x22""#,
        "\n",
        r#"10.0.0.9 - - [01/Mar/2024:12:00:01 +0000] "\x16\x03\x01\x00\xA5\x01" 400 157 "-" "-""#,
        "\r\n",
        "\n",
        r#"10.0.0.9 - - [01/Mar/2024:12:00:02 +0000] "GET /" 200 - "-" "-""#,
        "\n",
        r#"10.0.0.9 - - [01/Mar/2024:12:00:03 +0000] "GET / HTTP/1.1" 2x0 1 "-" "-""#,
        "\n",
        r#"10.0.0.9 - - [32/Mar/2024:12:00:03 +0000] "GET / HTTP/1.1" 200 1 "-" "-""#,
        "\n",
    );
    let out = read_str(text, "combined");
    assert_eq!(out.batches.keys().next().unwrap().to_string(), "access.t");
    let b = one_table(&out);
    assert_eq!(b.num_rows(), 3);
    assert_eq!(
        out.rejects.iter().map(|r| r.line).collect::<Vec<_>>(),
        [5, 6]
    );
    assert!(
        out.rejects[0].reason.contains("$status"),
        "{}",
        out.rejects[0].reason
    );
    assert_eq!(strs(&b, "remote_addr")[0], s("2001:db8::1"));
    assert_eq!(strs(&b, "remote_user")[0], s("alice"));
    // 12:00 +0100 = 11:00 UTC on 2024-03-01 = 1709290800.
    assert_eq!(times(&b, "time")[0], Some(1_709_290_800_000_000));
    assert_eq!(strs(&b, "path")[0], s("/q?a=\"x\""));
    assert_eq!(strs(&b, "user_agent")[0], s("UA \"quoted\" \"n\""));
    assert_eq!(strs(&b, "request")[1], s(r"\x16\x03\x01\x00\xA5\x01"));
    assert_eq!(strs(&b, "method")[1], None);
    assert_eq!(strs(&b, "request")[2], s("GET /"));
    assert_eq!(u64s(&b, "bytes"), [Some(5), Some(157), None]);
}

#[test]
fn invalid_utf8_is_a_reject() {
    let mut data =
        br#"10.0.0.9 - - [01/Mar/2024:12:00:01 +0000] "GET / HTTP/1.1" 200 1 "-" "caf"#.to_vec();
    data.push(0xE9);
    data.extend_from_slice(b"\"\n");
    let opts = AccessOptions::new("combined", None).unwrap();
    let mut out = CollectEmit::default();
    silt_access::read(
        &mut data.as_slice(),
        &SourceInfo::stdin(),
        &ReadOptions::default(),
        &opts,
        &mut out,
    )
    .unwrap();
    assert_eq!(out.rejects.len(), 1);
    assert!(out.rejects[0].reason.contains("UTF-8"));
    assert_eq!(out.rejects[0].raw, &data[..data.len() - 1]);
}

fn docker_batch(logs: &[Option<&str>]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("time", DataType::Utf8, true),
        Field::new("log", DataType::Utf8, true),
        Field::new("stream", DataType::Utf8, true),
    ]));
    let n = logs.len();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(vec![Some("t"); n])),
            Arc::new(StringArray::from(logs.to_vec())),
            Arc::new(StringArray::from(vec![Some("stdout"); n])),
        ],
    )
    .unwrap()
}

#[test]
fn parse_field_rules() {
    let lines = [
        Some(r#"1.2.3.4 - - [21/Feb/2018:17:26:53 +0000] "GET /a HTTP/1.0" 500 2216"#),
        Some("not an access line\n"),
        None,
        Some("1.2.3.4 - - [21/Feb/2018:17:26:54 +0000] \"POST /b HTTP/1.1\" 200 7 \"-\" \"curl/8\"\n"),
    ];
    let table = TableName::new("docker", "log");
    for keep in [false, true] {
        // Boxed the way the pipeline holds transforms.
        let mut pf: Box<dyn Transform> = Box::new(ParseField::new(
            ParseFieldSpec::parse("log=access", keep).unwrap(),
        ));
        assert_eq!(pf.name(), "parse-field log=access");
        let b = pf.apply(&table, docker_batch(&lines)).unwrap();
        assert_eq!(
            pf.report(),
            [
                "1 of 3 values did not match the access-log format; their rows are kept with the \
              raw text in the original column and null parsed columns"
            ]
        );
        let names: Vec<String> = b
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(
            names,
            [
                "time",
                "remote_addr",
                "remote_user",
                "log_time",
                "method",
                "path",
                "protocol",
                "request",
                "status",
                "bytes",
                "referer",
                "user_agent",
                "x_forwarded_for",
                "log",
                "stream"
            ]
        );
        assert_eq!(meta::time_column(&b.schema()), Some("log_time"));
        assert_eq!(u16s(&b, "status"), [Some(500), None, None, Some(200)]);
        assert_eq!(strs(&b, "method"), [s("GET"), None, None, s("POST")]);
        assert_eq!(strs(&b, "user_agent"), [None, None, None, s("curl/8")]);
        // 21/Feb/2018:17:26:53 +0000 = 1519234013.
        assert_eq!(times(&b, "log_time")[0], Some(1_519_234_013_000_000));
        let log = strs(&b, "log");
        if keep {
            assert_eq!(
                log,
                lines
                    .iter()
                    .map(|l| l.map(str::to_string))
                    .collect::<Vec<_>>()
            );
        } else {
            assert_eq!(log, [None, s("not an access line\n"), None, None]);
        }
    }
    // The counters add up over batches; a null is neither parsed nor unparsed.
    let mut pf = ParseField::new(ParseFieldSpec::parse("log=access", false).unwrap());
    for _ in 0..2 {
        pf.apply(&table, docker_batch(&lines)).unwrap();
    }
    assert_eq!((pf.parsed(), pf.unparsed()), (4, 2));
    assert!(pf.report()[0].starts_with("2 of 6 values did not match"));
    // A batch without the field passes unchanged; a non-string field is an error.
    let mut pf = ParseField::new(ParseFieldSpec::parse("message=combined", false).unwrap());
    let b = docker_batch(&lines);
    assert_eq!(pf.apply(&table, b.clone()).unwrap(), b);
    assert!(pf.report().is_empty());
    let mut pf = ParseField::new(ParseFieldSpec::parse("x=combined", false).unwrap());
    let nb = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, true)])),
        vec![Arc::new(arrow::array::Int32Array::from(vec![1]))],
    )
    .unwrap();
    assert!(pf.apply(&table, nb).is_err());
}

#[test]
fn fluent_bit_docker_apache_line_via_parse_field() {
    let Some(dir) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    // Decode the json-file record with serde_json (independently of silt's docker reader) and
    // parse its `log` value.
    let text =
        std::fs::read_to_string(dir.join("docker-json-file/fluent-bit-apache-logs.log")).unwrap();
    let rec: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let log = rec["log"].as_str().unwrap();
    let mut pf = ParseField::new(ParseFieldSpec::parse("log", false).unwrap());
    let b = pf
        .apply(
            &TableName::new("docker", "apache"),
            docker_batch(&[Some(log)]),
        )
        .unwrap();
    assert_eq!((pf.parsed(), pf.unparsed()), (1, 0));
    assert!(pf.report().is_empty());
    assert_eq!(strs(&b, "remote_addr"), [s("20.38.166.115")]);
    assert_eq!(strs(&b, "path"), [s("/intra-abdominally")]);
    assert_eq!(u16s(&b, "status"), [Some(500)]);
    assert_eq!(u64s(&b, "bytes"), [Some(2216)]);
    // 21/Feb/2018:17:26:53 +0000 = 1519234013.
    assert_eq!(times(&b, "log_time"), [Some(1_519_234_013_000_000)]);
    assert_eq!(strs(&b, "log"), [None]);
}
