//! The decoder contract on every format of this crate: a stream fed in pieces of any size (down
//! to one byte, seeded random sizes), with flushes sprinkled in, gives what reading it whole
//! gives: the same tables, the same rows (compared as values, after the batches of each table are
//! unified and concatenated), the same rejects (line, reason, raw bytes, table), the same bytes
//! per table and the same outcome. Decoders report no progress themselves (reading whole does).
//!
//! Inputs: the real Docker json-file and syslog samples of the corpus (skipped with a message
//! when the corpus is absent, a failure under CI=true / SILT_REQUIRE_ALL=1), Docker/nginx
//! records from `silt_gen::weblog` as NDJSON and MessagePack, and hand-written or generated
//! inputs of every format with their awkward cases (CSV quoted newlines and CRLF, a byte-order
//! mark, partial Docker lines, fluentd entries, truncated and corrupt records, Avro files with
//! several blocks, compressed or not, truncated or with a wrong sync marker, random bytes).

mod common;

use std::collections::BTreeMap;
use std::io::BufReader;
use std::sync::Arc;

use apache_avro::types::{Record, Value as AV};
use arrow::record_batch::RecordBatch;
use silt_core::{CollectEmit, FormatOptions, ReadOptions, SourceInfo};
use silt_logs::{LogFormat, LogOptions, TargetSchema};

/// One table's content: its unified fields (name and type), the schema metadata and the rows as
/// JSON.
type Table = (Vec<String>, Vec<(String, String)>, Vec<String>);

/// What a run gave, in comparable form.
#[derive(Debug, PartialEq)]
struct Outcome {
    tables: BTreeMap<String, Table>,
    rejects: Vec<(u64, String, Vec<u8>, Option<String>)>,
    table_bytes: BTreeMap<String, u64>,
    result: Result<(), String>,
}

fn rows_as_json(batches: &[RecordBatch]) -> Table {
    let mut schema = batches[0].schema().as_ref().clone();
    for b in &batches[1..] {
        schema = silt_core::schema::unify_schemas(&schema, &b.schema());
    }
    let schema = Arc::new(schema);
    let conformed: Vec<RecordBatch> = batches
        .iter()
        .map(|b| silt_core::schema::conform(b, &schema).unwrap())
        .collect();
    let all = arrow::compute::concat_batches(&schema, &conformed).unwrap();
    let mut buf = Vec::new();
    {
        let mut w = arrow::json::LineDelimitedWriter::new(&mut buf);
        w.write(&all).unwrap();
        w.finish().unwrap();
    }
    let rows = String::from_utf8(buf)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let fields = schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect();
    let mut md: Vec<(String, String)> = schema
        .metadata()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    md.sort();
    (fields, md, rows)
}

fn outcome(out: CollectEmit, result: anyhow::Result<()>) -> Outcome {
    Outcome {
        tables: out
            .batches
            .iter()
            .map(|(t, b)| (t.to_string(), rows_as_json(b)))
            .collect(),
        rejects: out
            .rejects
            .iter()
            .map(|r| {
                let table = r.table.as_ref().map(|t| t.to_string());
                (r.line, r.reason.clone(), r.raw.clone(), table)
            })
            .collect(),
        table_bytes: out
            .table_bytes
            .iter()
            .map(|(t, n)| (t.to_string(), *n))
            .collect(),
        result: result.map_err(|e| format!("{e:#}")),
    }
}

struct Case {
    name: String,
    format: LogFormat,
    bytes: Vec<u8>,
    lo: LogOptions,
}

fn source(name: &str) -> SourceInfo {
    SourceInfo {
        display: name.to_string(),
        file_name: Some(name.to_string()),
    }
}

const RO: ReadOptions = ReadOptions { batch_rows: 50 };

/// Read whole, with `silt_logs::read` (the decoder's `read`).
fn read_whole(c: &Case) -> Outcome {
    let mut out = CollectEmit::default();
    let r = silt_logs::read(
        c.format,
        &mut BufReader::with_capacity(64 << 10, &c.bytes[..]),
        &source(&c.name),
        &RO,
        &c.lo,
        &mut out,
    );
    if r.is_ok() {
        assert_eq!(out.bytes, c.bytes.len() as u64, "{}: progress", c.name);
    }
    outcome(out, r)
}

/// A small seeded generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// Fed through the format's decoder in pieces of `1..=max_piece` bytes (every piece one byte
/// when `max_piece` is 1), flushing after a piece with probability `flush_pct` %.
fn feed(c: &Case, seed: u64, max_piece: u64, flush_pct: u64) -> Outcome {
    let opts = FormatOptions::new(RO).with(c.lo.clone());
    let mut d = (c.format.spec().open)(&opts, &source(&c.name)).unwrap();
    let mut out = CollectEmit::default();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut rest = &c.bytes[..];
    let mut result = Ok(());
    while !rest.is_empty() {
        let n = (1 + rng.below(max_piece) as usize).min(rest.len());
        // Like `read_stream`: an error from `feed` ends the stream.
        if let Err(e) = d.feed(&rest[..n], &mut out) {
            result = Err(e);
            break;
        }
        rest = &rest[n..];
        if rng.below(100) < flush_pct {
            d.flush(&mut out).unwrap();
        }
    }
    if result.is_ok() {
        result = d.finish(&mut out);
    }
    assert_eq!(out.bytes, 0, "{}: decoders do not report progress", c.name);
    outcome(out, result)
}

/// Checks every way of feeding `c` against reading it whole; returns the whole outcome.
fn check(c: &Case) -> Outcome {
    let whole = read_whole(c);
    let ways: &[(u64, u64, u64)] = &[
        (1, 1, 3),
        (2, 7, 10),
        (3, 64, 25),
        (4, 4096, 50),
        (5, 1 << 20, 0),
    ];
    for &(seed, max_piece, flush_pct) in ways {
        // One-byte pieces of a large input take long in a debug build: the first 64 KiB then.
        if max_piece == 1 && c.bytes.len() > 64 << 10 {
            let small = Case {
                name: c.name.clone(),
                format: c.format,
                bytes: c.bytes[..64 << 10].to_vec(),
                lo: c.lo.clone(),
            };
            assert_eq!(
                feed(&small, seed, 1, flush_pct),
                read_whole(&small),
                "{} ({:?}) first 64 KiB in 1-byte pieces",
                c.name,
                c.format
            );
            continue;
        }
        let fed = feed(c, seed, max_piece, flush_pct);
        assert_eq!(
            fed, whole,
            "{} ({:?}) fed in pieces of up to {max_piece} bytes, {flush_pct}% flushes",
            c.name, c.format
        );
    }
    whole
}

/// The rows of the only table.
fn rows(o: &Outcome) -> &[String] {
    assert_eq!(o.tables.len(), 1, "{o:?}");
    &o.tables.values().next().unwrap().2
}

fn case(name: &str, format: LogFormat, bytes: Vec<u8>) -> Case {
    Case {
        name: name.to_string(),
        format,
        bytes,
        lo: LogOptions::default(),
    }
}

fn weblog(format: silt_gen::weblog::WeblogFormat) -> Vec<u8> {
    let mut buf = Vec::new();
    silt_gen::weblog::write_docker_nginx(
        &mut buf,
        format,
        &silt_gen::weblog::WeblogOptions {
            records: Some(400),
            ..Default::default()
        },
    )
    .unwrap();
    buf
}

fn avro_file(blocks: usize, per_block: i64, codec: apache_avro::Codec) -> Vec<u8> {
    let schema = apache_avro::Schema::parse_str(
        r#"{"type":"record","name":"r","fields":[
            {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
            {"name":"host","type":"string"},
            {"name":"n","type":["null","long"]},
            {"name":"tags","type":{"type":"array","items":"string"}}]}"#,
    )
    .unwrap();
    let mut w = apache_avro::Writer::with_codec(&schema, Vec::new(), codec).unwrap();
    let mut i = 0i64;
    for _ in 0..blocks {
        for _ in 0..per_block {
            let mut r = Record::new(&schema).unwrap();
            r.put(
                "ts",
                AV::TimestampMicros(1_700_000_000_000_000 + i * 1_000_003),
            );
            r.put("host", format!("10.0.{}.{}", i % 3, i % 250));
            r.put(
                "n",
                if i % 4 == 0 {
                    AV::Union(0, Box::new(AV::Null))
                } else {
                    AV::Union(1, Box::new(AV::Long(i * i)))
                },
            );
            r.put(
                "tags",
                AV::Array((0..i % 3).map(|k| AV::String(format!("t{k}"))).collect()),
            );
            w.append_value(r).unwrap();
            i += 1;
        }
        // Ends the block: every flush writes one.
        w.flush().unwrap();
    }
    w.into_inner().unwrap()
}

/// The byte offsets where the blocks of `file` (made by [`avro_file`] without compression) end,
/// sync marker included.
fn block_ends(file: &[u8]) -> Vec<usize> {
    // A file without blocks is just the header, of the same length (same metadata).
    let mut end = avro_file(0, 0, apache_avro::Codec::Null).len();
    let sync = file[end - 16..end].to_vec();
    let mut ends = Vec::new();
    while let Some(i) = memchr::memmem::find(&file[end..], &sync) {
        end += i + 16;
        ends.push(end);
    }
    ends
}

fn msgpack_mixed() -> Vec<u8> {
    let mut mp = Vec::new();
    for i in 0..30 {
        mp.extend(
            rmp_serde::to_vec_named(&serde_json::json!({"i": i, "s": "x", "t": 1_700_000_000 + i}))
                .unwrap(),
        );
    }
    // Invalid UTF-8 in a string, a value that is not a map, fluentd entries, nested values.
    mp.extend_from_slice(&[0x81, 0xa1, b's', 0xa2, 0xff, 0xfe]);
    mp.extend(rmp_serde::to_vec(&42).unwrap());
    for (t, log) in [(1_700_000_000i64, "a"), (1_700_000_001, "b")] {
        mp.extend(rmp_serde::to_vec(&serde_json::json!([t, {"log": log, "n": 1}])).unwrap());
    }
    mp.extend(
        rmp_serde::to_vec_named(
            &serde_json::json!({"i": 99, "nested": {"a": [1, 2, {"b": null}]}, "f": 1.5}),
        )
        .unwrap(),
    );
    // A record cut off by the end of input.
    let last = rmp_serde::to_vec_named(&serde_json::json!({"i": 9, "s": "long string"})).unwrap();
    mp.extend_from_slice(&last[..last.len() - 4]);
    mp
}

fn cases() -> Vec<Case> {
    let mut v = vec![
        case("docker-nginx.ndjson", LogFormat::Json, weblog(silt_gen::weblog::WeblogFormat::Ndjson)),
        case("docker-nginx.msgpack", LogFormat::Msgpack, weblog(silt_gen::weblog::WeblogFormat::Msgpack)),
        case(
            "mixed.json",
            LogFormat::Json,
            b"\xEF\xBB\xBF{\"a\":1,\"time\":\"2024-01-01T00:00:00Z\"}\r\n\n  \n{\"a\":2.5}\n{bad\r\n{\"a\":\"x\\ny\"}\r\n[3]\n{\"a\":\"caf\xe9\"}\n{\"time\":\"garbage\",\"a\":4}\n{\"a\":{\"deep\":[1,2]}}\n{\"a\":5}".to_vec(),
        ),
        case("mixed.msgpack", LogFormat::Msgpack, msgpack_mixed()),
        case("bad-marker.msgpack", LogFormat::Msgpack, {
            let mut b = rmp_serde::to_vec_named(&serde_json::json!({"i": 1})).unwrap();
            b.extend_from_slice(&[0xc1, 0x81, 0xa1, b'i', 0x01]);
            b
        }),
        case(
            "text.msgpack",
            LogFormat::Msgpack,
            b"this is a text file\nwith two lines\n".repeat(50),
        ),
        case(
            "quoted.csv",
            LogFormat::Csv,
            b"\xEF\xBB\xBFid,name,when,note\r\n1,alpha,2024-01-01T00:00:00Z,\"multi\r\nline, with comma\"\r\n2,\"q \"\"x\"\"\",2024-01-01T00:00:01Z,\n\n3,caf\xe9,2024-01-01T00:00:02Z,x\n4,short\n5,\"a\nb\nc\",2024-01-01T00:00:03Z,\"\"\n6,six,2024-01-01T00:00:04Z,last without newline".to_vec(),
        ),
        case(
            "values.tsv",
            LogFormat::Tsv,
            b"date\tname\tvalue\tflag\n2024-02-01 10:00:00\talpha\t1.5\ttrue\n2024-02-01 11:00:00\tbeta gamma\t2.25\tfalse\r\n2024-02-01 12:00:00\tdelta\n2024-02-01 13:00:00\t\"quoted\"\t-3.5\ttrue\n".to_vec(),
        ),
        case(
            "labels.ltsv",
            LogFormat::Ltsv,
            b"time:2024-01-01T00:00:01Z\thost:10.0.0.1\tstatus:200\tsize:123\tua:Mozilla/5.0 (X11)\n\ntime:2024-01-01T00:00:02Z\thost:10.0.0.2\tstatus:404\tsize:\tua:curl/8.0\r\nno label here\n:empty\nx:caf\xe9\ntime:2024-01-01T00:00:03Z\thost:10.0.0.3\tstatus:200\tsize:7\textra:x:y".to_vec(),
        ),
        case(
            "partial.log",
            LogFormat::Docker,
            br#"{"log":"out-a ","stream":"stdout","time":"2024-01-01T00:00:00.000000001Z"}
{"log":"err-1\n","stream":"stderr","time":"2024-01-01T00:00:01Z"}
{"log":"out-b\n","stream":"stdout","time":"2024-01-01T00:00:02Z"}
{"log":"dangling","stream":"stdout","time":"2024-01-01T00:00:03Z"}
{"stream":"stdout"}
[1]
{"log":"e2 ","stream":"stderr","time":"2024-01-01T00:00:04Z"}"#
                .to_vec(),
        ),
        case("three-blocks.avro", LogFormat::Avro, avro_file(3, 40, apache_avro::Codec::Null)),
        case(
            "deflate.avro",
            LogFormat::Avro,
            avro_file(4, 25, apache_avro::Codec::Deflate(Default::default())),
        ),
    ];
    let mut lo = LogOptions {
        syslog_year: Some(2023),
        ..LogOptions::default()
    };
    v.push(Case {
        name: "messages".into(),
        format: LogFormat::Syslog,
        bytes: "<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut=\"3\" eventSource=\"Application\"] An application event\n<34>Oct 11 22:14:15 mymachine su: 'su root' failed for lonvick on /dev/pts/8\r\n\nnot syslog at all\nMar  4 01:02:03 host sshd[12]: hello\nJan 10 00:00:00 host cron[1]: last".as_bytes().to_vec(),
        lo: lo.clone(),
    });
    // --no-header and --delimiter; --schema on NDJSON.
    v.push(Case {
        name: "semi.csv".into(),
        format: LogFormat::Csv,
        bytes: b"1;a;x\n2;\"b;c\";y\n3;d\n".to_vec(),
        lo: LogOptions {
            no_header: true,
            delimiter: Some(b';'),
            ..LogOptions::default()
        },
    });
    lo = LogOptions {
        schema: Some(Arc::new(
            TargetSchema::parse(
                r#"[{"name":"log_time","type":"INTEGER","mode":"REQUIRED"},
                    {"name":"status","type":"INT64"},
                    {"name":"path","type":"STRING","mode":"REQUIRED"}]"#,
            )
            .unwrap(),
        )),
        time_field: Some("log_time".into()),
        time_unit: Some(silt_logs::TimeUnit::Millis),
        ..LogOptions::default()
    };
    v.push(Case {
        name: "schema.json".into(),
        format: LogFormat::Json,
        bytes: b"{\"log_time\":1700000000123,\"status\":200,\"path\":\"/a\"}\n{\"log_time\":1700000001000,\"status\":\"abc\",\"path\":\"/b\"}\n{\"log_time\":1700000002000,\"status\":404}\n{\"log_time\":\"soon\",\"status\":200,\"path\":\"/d\"}\n".to_vec(),
        lo,
    });
    // Avro files cut short and with a corrupt sync marker: an error after the rows before it.
    let good = avro_file(3, 30, apache_avro::Codec::Null);
    let ends = block_ends(&good);
    assert_eq!(ends.len(), 3);
    v.push(case(
        "cut.avro",
        LogFormat::Avro,
        good[..ends[0] + 50].to_vec(),
    ));
    // The second block's sync marker damaged.
    let mut bad_sync = good.clone();
    bad_sync[ends[1] - 3] ^= 0x55;
    v.push(case("bad-sync.avro", LogFormat::Avro, bad_sync));
    v.push(case(
        "header-only.avro",
        LogFormat::Avro,
        avro_file(0, 0, apache_avro::Codec::Null),
    ));
    // Random bytes, bare and after each format's typical start, read as every format.
    for seed in 0..4u64 {
        let mut noise = common::noise(seed, 700 + seed as usize * 300);
        let prefix: &[u8] = match seed {
            1 => b"{\"log\":\"x\"}\n",
            2 => &[0x82, 0xa1, b'a', 0x01, 0xa1, b'b', 0x02],
            3 => b"a,b\n",
            _ => b"",
        };
        noise.splice(0..0, prefix.iter().copied());
        for format in LogFormat::ALL {
            v.push(case(&format!("noise{seed}"), format, noise.clone()));
        }
    }
    v
}

#[test]
fn feeding_in_pieces_equals_reading_whole() {
    for c in cases() {
        let whole = check(&c);
        // The inputs exercise what they are meant to (a comparison of two empty outcomes
        // would prove nothing).
        if !c.name.starts_with("noise") && c.name != "header-only.avro" {
            assert!(
                !whole.tables.is_empty() || !whole.rejects.is_empty() || whole.result.is_err(),
                "{}: no output at all",
                c.name
            );
        }
    }
}

#[test]
fn the_inputs_say_what_they_should() {
    let by_name = |name: &str| cases().into_iter().find(|c| c.name == name).unwrap();
    // One reject, not one per byte, for a text file read as MessagePack.
    let w = read_whole(&by_name("text.msgpack"));
    assert!(w.tables.is_empty());
    assert_eq!(w.rejects.len(), 1, "{:?}", w.rejects);
    assert!(
        w.rejects[0].1.starts_with("not MessagePack"),
        "{}",
        w.rejects[0].1
    );
    assert!(
        w.rejects[0].1.contains("looks like text"),
        "{}",
        w.rejects[0].1
    );
    assert!(
        w.rejects[0].1.contains("(1750 bytes)"),
        "{}",
        w.rejects[0].1
    );
    // Several Avro blocks: every record.
    let w = read_whole(&by_name("three-blocks.avro"));
    assert_eq!(rows(&w).len(), 120);
    let w = read_whole(&by_name("deflate.avro"));
    assert_eq!(rows(&w).len(), 100);
    assert_eq!(w.result, Ok(()));
    // Cut short: the first block's 30 records, then the error.
    let w = read_whole(&by_name("cut.avro"));
    assert_eq!(rows(&w).len(), 30);
    assert!(
        w.result.as_ref().unwrap_err().contains("cut short"),
        "{:?}",
        w.result
    );
    let w = read_whole(&by_name("bad-sync.avro"));
    assert_eq!(rows(&w).len(), 30);
    assert!(
        w.result.as_ref().unwrap_err().contains("sync marker"),
        "{:?}",
        w.result
    );
    let w = read_whole(&by_name("header-only.avro"));
    assert_eq!((w.tables.len(), w.rejects.len(), w.result), (0, 0, Ok(())));
    // CSV: quoted newlines are one row, rejects at the line the row starts on.
    let w = read_whole(&by_name("quoted.csv"));
    let lines: Vec<u64> = w.rejects.iter().map(|r| r.0).collect();
    assert_eq!(lines, [6, 7], "{:?}", w.rejects);
    assert_eq!(rows(&w).len(), 4);
    let fields = &w.tables.values().next().unwrap().0;
    assert!(
        fields[0].starts_with("id:"),
        "the BOM is not part of the name: {fields:?}"
    );
}

/// The comparison sees a difference: one byte taken out of an input changes the
/// outcome (so the equality above is not vacuous).
#[test]
fn the_comparison_can_fail() {
    for c in cases().into_iter().filter(|c| !c.name.starts_with("noise")) {
        let mut changed = Case {
            name: c.name.clone(),
            format: c.format,
            bytes: c.bytes.clone(),
            lo: c.lo.clone(),
        };
        changed.bytes.remove(changed.bytes.len() / 3);
        assert_ne!(
            feed(&changed, 3, 64, 25),
            read_whole(&c),
            "{}: a missing byte went unnoticed",
            c.name
        );
    }
}

/// The real samples of the corpus.
#[test]
fn corpus_samples() {
    let Some(dir) = silt_testkit::corpus_path("weblogs") else {
        return;
    };
    let mut n = 0;
    for e in std::fs::read_dir(dir.join("docker-json-file")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let whole = check(&case(&name, LogFormat::Docker, std::fs::read(&p).unwrap()));
        assert!(!whole.tables.is_empty(), "{name}");
        n += 1;
    }
    assert!(n >= 9, "{n} docker samples");
    let syslog = Case {
        lo: LogOptions {
            syslog_year: Some(2009),
            ..LogOptions::default()
        },
        ..case(
            "lnav-syslog_with_access_log.0",
            LogFormat::Syslog,
            std::fs::read(dir.join("lnav-syslog_with_access_log.0")).unwrap(),
        )
    };
    // All five lines are syslog (the access lines are a tomcat's messages).
    assert_eq!(rows(&check(&syslog)).len(), 5);
    // Everything else of the corpus as every format: text, bad input for most of them.
    for f in [
        "lnav-access_log.0",
        "lnav-bad_access_log.0",
        "lnav-caddy_log.0",
        "lnav-docker_compose.0",
        "lnav-shop_access_log.0",
    ] {
        let bytes = std::fs::read(dir.join(f)).unwrap();
        for format in LogFormat::ALL {
            check(&case(f, format, bytes.clone()));
        }
    }
}
