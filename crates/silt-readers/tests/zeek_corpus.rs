//! Every Zeek file of the shared corpus reads without panic, and every line is accounted for:
//! rows + rejects equals a count made here from the raw bytes, not by the readers.

mod zeek_common;

use std::collections::BTreeMap;

use arrow::array::Array;
use silt_core::TableName;
use zeek_common::*;

/// The one TSV file whose header lines use a custom meta prefix (`LogAscii::meta_prefix`).
const CUSTOM_PREFIX: (&str, &[u8]) = (
    "scripts.base.frameworks.logging.ascii-empty/ssh-filtered.log",
    b"PREFIX<>",
);

/// A btest baseline without any header block (`zeek-cut`-style column names, then data).
const HEADERLESS: &str = "scripts.base.protocols.vlan.vlan-qinqinq/weird.log";

#[test]
fn every_tsv_file_accounts_for_every_line() {
    let Some(c) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let all = files(&c.join("zeek-tsv"));
    assert!(
        all.len() >= 89,
        "expected the 89 TSV files, found {}",
        all.len()
    );
    let mut total_rows = 0;
    for f in &all {
        let data = bytes(f);
        let prefix: &[u8] = if f.ends_with(CUSTOM_PREFIX.0) {
            CUSTOM_PREFIX.1
        } else {
            b"#"
        };
        let expected = count_lines_not_starting(&data, prefix);
        // Small batches so that most files span several batches.
        let out = tsv(&data, &source_for(f), 1000);
        assert_eq!(
            out.total_rows() + out.rejects.len(),
            expected,
            "{}",
            f.display()
        );
        if f.ends_with(HEADERLESS) {
            // A column-name line and a data line, no `#fields`/`#types`: both are rejects.
            assert_eq!(out.rejects.len(), 2, "{}", f.display());
            assert_eq!(out.rejects[1].line, 2);
            assert!(out
                .rejects
                .iter()
                .all(|r| r.reason == "data line before any #fields header"));
        } else {
            // Every other TSV file in the corpus is real Zeek output: nothing is rejected.
            assert!(
                out.rejects.is_empty(),
                "{}: {:?}",
                f.display(),
                out.rejects.first()
            );
        }
        total_rows += out.total_rows();

        // Canonified baselines: every `XXXXXXXXXX.XXXXXX` ts gives a row with a null ts.
        let canon = data
            .split(|&b| b == b'\n')
            .filter(|l| l.starts_with(b"XXXXXXXXXX.XXXXXX"))
            .count();
        let header_has_ts = data.windows(11).any(|w| w == b"#fields\tts\t");
        if header_has_ts {
            let null_ts: usize = out
                .batches
                .values()
                .flatten()
                .map(|b| b.column_by_name("ts").map_or(0, |c| c.null_count()))
                .sum();
            assert_eq!(null_ts, canon, "{}: null ts rows", f.display());
        }
        // Each batch carries the table metadata.
        for (t, bs) in &out.batches {
            for b in bs {
                assert_eq!(
                    b.schema().metadata().get("silt.table"),
                    Some(&t.to_string())
                );
            }
        }
    }
    // The big logs are all there (dns.log.gz alone has 53,615 records per PROVENANCE.md).
    assert!(total_rows >= 150_000, "{total_rows}");
}

#[test]
fn every_json_file_accounts_for_every_line() {
    let Some(c) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let all = files(&c.join("zeek-json"));
    assert!(
        all.len() >= 32,
        "expected the 32 JSON files, found {}",
        all.len()
    );
    let mut canonified_files = 0;
    for f in &all {
        let data = bytes(f);
        let expected = count_nonblank_lines(&data);
        let out = json(&data, &source_for(f), 500);
        assert_eq!(
            out.total_rows() + out.rejects.len(),
            expected,
            "{}",
            f.display()
        );
        // The only rejects are the lines of the canonified baselines, whose bare
        // `XXXXXXXXXX.XXXXXX` token makes them invalid JSON.
        let bare = data
            .split(|&b| b == b'\n')
            .filter(|l| l.windows(18).any(|w| w == b":XXXXXXXXXX.XXXXXX"))
            .count();
        assert_eq!(
            out.rejects.len(),
            bare,
            "{}: {:?}",
            f.display(),
            out.rejects.first()
        );
        for r in &out.rejects {
            assert!(r.reason.starts_with("invalid JSON"), "{}", r.reason);
            assert!(r.line >= 1 && r.line as usize <= expected);
        }
        if bare > 0 {
            canonified_files += 1;
        }
    }
    // javascript.http-uri-sha256, ascii-json (every type), json-non-printable-escaping.
    assert_eq!(canonified_files, 3);
}

#[test]
fn json_mixed_logs_go_to_their_own_tables() {
    let Some(c) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let f = c.join("zeek-json/vast-zeek.json");
    let data = bytes(&f);
    // Expected tables and row counts, from the `_path` values parsed here.
    let mut expected: BTreeMap<String, usize> = BTreeMap::new();
    for l in data
        .split(|&b| b == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
    {
        let v: serde_json::Value = serde_json::from_slice(l).unwrap();
        let path = v
            .get("_path")
            .and_then(|p| p.as_str())
            .unwrap_or("vast-zeek");
        *expected
            .entry(TableName::new("zeek", path).to_string())
            .or_default() += 1;
    }
    assert_eq!(expected.len(), 34);
    let out = json(&data, &source_for(&f), 100);
    assert!(out.rejects.is_empty(), "{:?}", out.rejects);
    let got: BTreeMap<String, usize> = out
        .batches
        .keys()
        .map(|t| (t.to_string(), out.rows(&t.to_string())))
        .collect();
    assert_eq!(got, expected);
    // The `__name` record (a sensor name, not a log) falls back to the file name and keeps
    // `__name` as a column; Corelight's `_system_name` is a column too.
    let fb = &out.batches[&TableName::new("zeek", "vast-zeek")][0];
    assert!(fb.schema().field_with_name("__name").is_ok());
    let conn = &out.batches[&TableName::new("zeek", "conn")][0];
    assert!(conn.schema().field_with_name("_system_name").is_ok());
    // A renamed log (`weird.123.190` holds a dns record) still gets Zeek types by field name.
    let w = &out.batches[&TableName::new("zeek", "weird_123_190")][0];
    let s = w.schema();
    let id = s.field_with_name("id").unwrap();
    let arrow::datatypes::DataType::Struct(idf) = id.data_type() else {
        panic!()
    };
    assert_eq!(
        idf.find("resp_p").unwrap().1.data_type(),
        &arrow::datatypes::DataType::UInt16
    );
    assert_eq!(
        s.field_with_name("trans_id").unwrap().data_type(),
        &arrow::datatypes::DataType::Int64
    );
    assert_eq!(
        s.field_with_name("AA").unwrap().data_type(),
        &arrow::datatypes::DataType::Boolean
    );
    // Corelight metrics (unknown log): inferred types, dotted names nested, and the
    // leaf-also-prefix rule (`logs.conn.entries` next to `logs.conn.entries.per-second`).
    let m = &out.batches[&TableName::new("zeek", "corelight_metrics_bro")][0];
    let cols: Vec<String> = leaves(m).into_iter().map(|(p, _)| p).collect();
    assert!(cols.contains(&"logs.conn.entries".to_string()), "{cols:?}");
    assert!(
        cols.contains(&"logs.conn.entries.per-second".to_string()),
        "{cols:?}"
    );
    let l = leaves(m)
        .into_iter()
        .find(|(p, _)| p == "logs.conn.entries")
        .unwrap()
        .1;
    assert_eq!(cell(&l, 0), Cell::I(61_842_411_773));
}

#[test]
fn json_time_encodings() {
    let Some(c) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let dir = c.join("zeek-json/zeek-baselines/scripts.base.frameworks.logging.ascii-negative-ts");
    // 1960-01-01T00:00:00Z in every encoding Zeek's JSON writer has.
    for name in [
        "test.log.ts_epoch",
        "test.log.ts_iso8601",
        "test.log.ts_millis",
        "test.log.ts_millis_unsigned",
    ] {
        let f = dir.join(name);
        let out = json(&bytes(&f), &source_for(&f), 10);
        assert!(out.rejects.is_empty(), "{name}: {:?}", out.rejects);
        let r = rows(&out.batches[&TableName::new("zeek", "test")]);
        assert_eq!(r[0]["ts"], Cell::Ts(-315_619_200_000_000), "{name}");
    }
    let f = c.join("zeek-json/zeek-baselines/scripts.base.frameworks.logging.ascii-json-iso-timestamps/ssh.log");
    let out = json(&bytes(&f), &source_for(&f), 10);
    let r = rows(&out.batches[&TableName::new("zeek", "ssh")]);
    // `t` is not a known ssh field and not `ts`: ISO strings stay strings.
    assert_eq!(r[0]["t"], Cell::S("2008-07-09T16:13:30.005432Z".into()));
    let f =
        c.join("zeek-json/zeek-baselines/scripts.base.frameworks.logging.ascii-double/json.log");
    let out = json(&bytes(&f), &source_for(&f), 10);
    let r = rows(&out.batches[&TableName::new("zeek", "json")]);
    let d: Vec<Cell> = r.iter().map(|r| r["d"].clone()).collect();
    assert_eq!(d.len(), 22);
    assert_eq!(d[0], Cell::F(2153226000.0));
    assert_eq!(d[13], Cell::F(1.79e308));
    assert_eq!(d[18], Cell::Null);
    assert_eq!(d.iter().filter(|c| **c == Cell::Null).count(), 3);
}

#[test]
#[allow(clippy::approx_constant)] // Zeek's types test logs the literal 3.14.
fn tsv_escapes_from_zeeks_own_tests() {
    let Some(c) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let base = c.join("zeek-tsv/zeek-baselines");
    let read = |rel: &str, table: &str| {
        let f = base.join(rel);
        let out = tsv(&bytes(&f), &source_for(&f), 7);
        assert!(out.rejects.is_empty(), "{rel}: {:?}", out.rejects);
        rows(&out.batches[&TableName::new("zeek", table)])
    };
    let s = |x: &str| Cell::S(x.into());
    let r = read(
        "scripts.base.frameworks.logging.ascii-escape-binary/test.log",
        "test",
    );
    let got: Vec<Cell> = r.iter().map(|r| r["s"].clone()).collect();
    assert_eq!(
        got,
        vec![
            s("AB\\x00CD\\x00"),
            s("AB\\xffCD\\x00"),
            s("AB\\xffCD\\x00"),
            s(" "),
            s("abc\\x00def"),
            s(" "),
            s("abc\\x00def"),
            s(" "),
            s("foo \u{ae} bar \\xc2\\xae baz"),
            s("foo\\x00bar\\0baz"),
            // The file has a literal `^N` (two characters) after the escaped 0x0e byte.
            s("foo \\x0e bar ^N baz"),
        ]
    );
    let r = read(
        "scripts.base.frameworks.logging.ascii-escape-notset-str/test.log",
        "test",
    );
    assert_eq!(
        (r[0]["x"].clone(), r[0]["y"].clone(), r[0]["z"].clone()),
        (s("-"), Cell::Null, s(""))
    );
    let r = read(
        "scripts.base.frameworks.logging.ascii-escape-empty-str/test.log",
        "test",
    );
    assert_eq!(r[0]["ss"], Cell::List(vec![s("EMPTY")]));
    let r = read(
        "scripts.base.frameworks.logging.ascii-escape-set-separator/test.log",
        "test",
    );
    assert_eq!(
        r[0]["ss"],
        Cell::List(vec![s(","), s("CC"), s(",,"), s("AA")])
    );
    let r = read(
        "scripts.base.frameworks.logging.ascii-escape/ssh.log",
        "ssh",
    );
    let st: Vec<Cell> = r.iter().map(|r| r["status"].clone()).collect();
    assert_eq!(
        st,
        vec![
            s("success"),
            s("failure"),
            s("fa||ure"),
            s("su||ess"),
            s("failure")
        ]
    );
    assert!(r.iter().all(|r| r["t"] == Cell::Null));
    assert_eq!(r[0]["id.orig_p"], Cell::U(1234));
    let r = read(
        "scripts.base.frameworks.logging.ascii-binary/ssh.log",
        "ssh",
    );
    let d: Vec<Cell> = r.iter().map(|r| r["data"].clone()).collect();
    assert_eq!(
        d,
        vec![s("abc\n\\xffdef"), s("abc|\\xffdef"), s("abc\\xff|def")]
    );
    let r = read(
        "scripts.base.frameworks.logging.ascii-utf8-enabled-control-characters/test.log",
        "test",
    );
    assert_eq!(r[0]["s"], s("foo \n\t\\x00 bar"));
    let r = read(
        "scripts.base.frameworks.logging.ascii-empty/ssh-filtered.log",
        "ssh",
    );
    assert_eq!(r.len(), 5);
    let st: Vec<Cell> = r.iter().map(|r| r["status"].clone()).collect();
    assert_eq!(
        st,
        vec![
            s("success"),
            Cell::Null,
            s("failure"),
            Cell::Null,
            s("failure")
        ]
    );
    assert_eq!(r[4]["country"], s(""));
    assert_eq!(r[4]["b"], Cell::Bool(true));
    let r = read("scripts.base.frameworks.logging.types/ssh.log", "ssh");
    let r = &r[0];
    assert_eq!(r["b"], Cell::Bool(true));
    assert_eq!(r["i"], Cell::I(-42));
    assert_eq!(r["e"], s("SSH::LOG"));
    assert_eq!(r["c"], Cell::I(21));
    assert_eq!(r["p"], Cell::U(123));
    assert_eq!(r["sn"], s("10.0.0.0/24"));
    assert_eq!(r["a"], s("1.2.3.4"));
    assert_eq!(r["d"], Cell::F(3.14));
    assert_eq!(r["t"], Cell::Null);
    // interval 100.0 s, kept exactly as 100_000_000 µs (Decimal128(18, 6) seconds)
    assert_eq!(r["iv"], Cell::I(100_000_000));
    assert_eq!(
        r["sc"],
        Cell::List(vec![Cell::I(4), Cell::I(2), Cell::I(3), Cell::I(1)])
    );
    assert_eq!(r["ss"], Cell::List(vec![s("CC"), s("BB"), s("AA")]));
    assert_eq!(r["se"], Cell::List(vec![]));
    assert_eq!(
        r["vc"],
        Cell::List(vec![Cell::I(10), Cell::I(20), Cell::I(30)])
    );
    assert_eq!(r["ve"], Cell::List(vec![]));
    assert_eq!(
        r["f"],
        s("SSH::foo: function(i:count) : string\n{ \nif (0 < SSH::i) \n\treturn (Foo);\nelse\n\treturn (Bar);\n\n}")
    );
    // Several ssl.log blocks (each after a `#file` line) with one schema: one table.
    let f = base.join("scripts.policy.protocols.ssl.ssl-log-ext/ssl-all.log");
    let out = tsv(&bytes(&f), &source_for(&f), 1000);
    assert_eq!(out.batches.len(), 1);
    assert_eq!(
        out.rows("zeek.ssl"),
        count_lines_not_starting(&bytes(&f), b"#")
    );
}
