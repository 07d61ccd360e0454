//! Checks of the generated Zeek TSV against Zeek's own format (corpus headers), against the
//! declared column types (parsed the way a TSV reader would: split on tab), and for uid joins,
//! exact counts, mix, IPv6 share, time range and determinism.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use silt_gen::{generate_zeek, write_zeek_log, GenOptions, DEFAULT_START_MICROS, ZEEK_LOGS};

fn corpus() -> Option<PathBuf> {
    silt_testkit::corpus_path("zeek-tsv")
}

fn read_maybe_gz(p: &Path) -> String {
    let raw = std::fs::read(p).unwrap();
    if p.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&raw[..])
            .read_to_string(&mut s)
            .unwrap();
        s
    } else {
        String::from_utf8(raw).unwrap()
    }
}

/// (#fields, #types) of a Zeek TSV text.
fn header(text: &str) -> (Vec<String>, Vec<String>) {
    let mut f = Vec::new();
    let mut t = Vec::new();
    for l in text.lines().take_while(|l| l.starts_with('#')) {
        if let Some(r) = l.strip_prefix("#fields\t") {
            f = r.split('\t').map(String::from).collect();
        }
        if let Some(r) = l.strip_prefix("#types\t") {
            t = r.split('\t').map(String::from).collect();
        }
    }
    (f, t)
}

fn records(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').collect())
        .collect()
}

fn gen_all(events: u64, opts: &GenOptions) -> (tempfile::TempDir, HashMap<String, String>) {
    let dir = tempfile::tempdir().unwrap();
    let rep = generate_zeek(dir.path(), events, opts).unwrap();
    let mut m = HashMap::new();
    for f in &rep.files {
        let text = std::fs::read_to_string(&f.path).unwrap();
        assert_eq!(text.len() as u64, f.bytes, "reported size of {}", f.log);
        m.insert(f.log.clone(), text);
    }
    (dir, m)
}

#[test]
fn header_block_is_zeeks() {
    let (_d, logs) = gen_all(2_000, &GenOptions::default());
    for log in ZEEK_LOGS {
        let text = &logs[log];
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "#separator \\x09", "{log}");
        assert_eq!(lines[1], "#set_separator\t,");
        assert_eq!(lines[2], "#empty_field\t(empty)");
        assert_eq!(lines[3], "#unset_field\t-");
        assert_eq!(lines[4], format!("#path\t{log}"));
        assert_eq!(lines[5], "#open\t2018-03-24-17-00-00");
        assert!(lines[6].starts_with("#fields\tts\t"));
        assert!(lines[7].starts_with("#types\ttime\t"));
        let close = lines.last().unwrap();
        assert!(close.starts_with("#close\t2018-03-24-1"), "{log}: {close}");
        assert_eq!(close.len(), "#close\t2018-03-24-17-00-00".len());
        assert!(text.ends_with('\n'));
    }
}

/// Field names and types must be exactly those real Zeek 6 logs in the corpus declare.
#[test]
fn fields_match_real_zeek_logs() {
    let Some(c) = corpus() else { return };
    let cases: &[(&str, &str, bool)] = &[
        // (log, corpus file written by Zeek, with community_id)
        ("conn", "vast-example-pcap/conn.log.gz", true),
        ("dns", "zed-sample-data/dns.log.gz", false),
        ("ssl", "zed-sample-data/ssl.log.gz", false),
        ("weird", "zed-sample-data/weird.log", false),
        ("http", "zeek-baselines/opt.basic/http.log", false),
        (
            "files",
            "zeek-baselines/scripts.base.protocols.smb.smb2/files.log",
            false,
        ),
    ];
    for (log, file, cid) in cases {
        let real = header(&read_maybe_gz(&c.join(file)));
        let opts = GenOptions {
            logs: Some(vec![log.to_string()]),
            community_id: *cid,
            ..Default::default()
        };
        let mut out = Vec::new();
        write_zeek_log(&mut out, log, 10, &opts).unwrap();
        let ours = header(std::str::from_utf8(&out).unwrap());
        assert_eq!(ours, real, "{log} header differs from {file}");
    }
    // conn without community_id: Zeek 6's default column list (as the brief names it).
    let mut out = Vec::new();
    write_zeek_log(&mut out, "conn", 1, &GenOptions::default()).unwrap();
    let (f, _) = header(std::str::from_utf8(&out).unwrap());
    assert_eq!(
        f.join(" "),
        "ts uid id.orig_h id.orig_p id.resp_h id.resp_p proto service duration orig_bytes resp_bytes \
         conn_state local_orig local_resp missed_bytes history orig_pkts orig_ip_bytes resp_pkts \
         resp_ip_bytes tunnel_parents"
    );
}

fn check_value(ty: &str, v: &str, log: &str, col: &str) {
    if v == "-" {
        return; // unset, allowed for every type
    }
    let inner = ty
        .strip_prefix("set[")
        .or_else(|| ty.strip_prefix("vector["))
        .and_then(|r| r.strip_suffix(']'));
    if let Some(inner) = inner {
        if v == "(empty)" {
            return;
        }
        for item in v.split(',') {
            assert!(
                item != "-" && !item.is_empty(),
                "{log}.{col}: bad item in {v:?}"
            );
            check_value(inner, item, log, col);
        }
        return;
    }
    let ok = match ty {
        "time" => {
            silt_core::time::parse_epoch_seconds(v).is_some()
                && v.len() > 7
                && v.as_bytes()[v.len() - 7] == b'.'
        }
        "interval" | "double" => v.parse::<f64>().is_ok() && v.contains('.'),
        "count" => v.parse::<u64>().is_ok(),
        "int" => v.parse::<i64>().is_ok(),
        "port" => v.parse::<u16>().is_ok(),
        "bool" => v == "T" || v == "F",
        "addr" => silt_core::addr::canonical_addr(v).as_deref() == Some(v),
        "string" | "enum" => !v.is_empty() && v != "(empty)" && !v.contains('\t'),
        other => panic!("unexpected type {other}"),
    };
    assert!(ok, "{log}.{col}: {v:?} is not a valid {ty}");
}

#[test]
fn every_line_has_the_declared_fields_and_types() {
    let opts = GenOptions {
        community_id: true,
        ..Default::default()
    };
    let (_d, logs) = gen_all(30_000, &opts);
    for log in ZEEK_LOGS {
        let text = &logs[log];
        let (fields, types) = header(text);
        assert_eq!(fields.len(), types.len());
        let recs = records(text);
        assert!(!recs.is_empty(), "{log} empty");
        for r in &recs {
            assert_eq!(r.len(), fields.len(), "{log}: {r:?}");
            for ((v, t), f) in r.iter().zip(&types).zip(&fields) {
                check_value(t, v, log, f);
            }
        }
    }
}

#[test]
fn uids_join_across_logs() {
    let (_d, logs) = gen_all(50_000, &GenOptions::default());
    let conn: HashSet<&str> = records(&logs["conn"]).iter().map(|r| r[1]).collect();
    assert_eq!(
        conn.len(),
        records(&logs["conn"]).len(),
        "conn uids are unique"
    );
    for (log, col) in [
        ("dns", 1),
        ("http", 1),
        ("ssl", 1),
        ("weird", 1),
        ("files", 2),
    ] {
        let recs = records(&logs[log]);
        for r in &recs {
            assert!(
                conn.contains(r[col]),
                "{log} uid {} has no conn record",
                r[col]
            );
        }
    }
    // http resp_fuids <-> files.log fuid
    let files: HashMap<&str, &str> = records(&logs["files"])
        .iter()
        .map(|r| (r[1], r[2]))
        .collect();
    let mut linked = 0;
    for r in records(&logs["http"]) {
        if r[27] != "-" {
            assert_eq!(
                files.get(r[27]),
                Some(&r[1]),
                "fuid {} joins to its http uid",
                r[27]
            );
            linked += 1;
        }
    }
    assert_eq!(
        linked,
        files.len(),
        "every files.log fuid is referenced by http.log"
    );
    // The 4-tuple of a dns record is its connection's.
    let conn_tuple: HashMap<&str, (&str, &str, &str, &str)> = records(&logs["conn"])
        .iter()
        .map(|r| (r[1], (r[2], r[3], r[4], r[5])))
        .collect();
    for r in records(&logs["dns"]) {
        assert_eq!(conn_tuple[r[1]], (r[2], r[3], r[4], r[5]));
    }
}

#[test]
fn exact_counts_and_mix() {
    let n = 40_000;
    let (_d, logs) = gen_all(n, &GenOptions::default());
    let counts: HashMap<&str, usize> = ZEEK_LOGS
        .iter()
        .map(|l| (*l, records(&logs[*l]).len()))
        .collect();
    assert_eq!(counts.values().sum::<usize>() as u64, n);
    // Default mix ~55/25/10/6/3/1 (%), with some tolerance.
    let share = |l: &str| counts[l] as f64 / n as f64 * 100.0;
    for (l, want, tol) in [
        ("conn", 55.0, 5.0),
        ("dns", 25.0, 5.0),
        ("http", 10.0, 3.0),
        ("ssl", 6.0, 2.5),
        ("files", 3.0, 1.5),
        ("weird", 1.0, 0.7),
    ] {
        assert!(
            (share(l) - want).abs() <= tol,
            "{l}: {:.1}% (want {want}%)",
            share(l)
        );
    }
    for log in ["conn", "dns", "http"] {
        let opts = GenOptions {
            logs: Some(vec![log.to_string()]),
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let rep = generate_zeek(dir.path(), 12_345, &opts).unwrap();
        assert_eq!(rep.files.len(), 1);
        let text = std::fs::read_to_string(&rep.files[0].path).unwrap();
        assert_eq!(records(&text).len(), 12_345, "{log}");
        assert_eq!(rep.files[0].records, 12_345);
    }
}

#[test]
fn realistic_statistics() {
    let (_d, logs) = gen_all(60_000, &GenOptions::default());
    let conn = records(&logs["conn"]);
    let n = conn.len() as f64;
    let v6 = conn.iter().filter(|r| r[2].contains(':')).count() as f64 / n;
    assert!((0.05..0.16).contains(&v6), "IPv6 share {v6}");
    // Internal clients from 10/8 and 192.168/16 originate most connections.
    let internal = conn
        .iter()
        .filter(|r| {
            r[2].starts_with("10.") || r[2].starts_with("192.168.") || r[2].starts_with("fd")
        })
        .count() as f64
        / n;
    assert!(internal > 0.75, "internal originators {internal}");
    // Heavy-tailed talkers: the top 1% of originators make far more than 1% of connections.
    let mut per: HashMap<&str, usize> = HashMap::new();
    for r in &conn {
        *per.entry(r[2]).or_default() += 1;
    }
    let mut c: Vec<usize> = per.values().copied().collect();
    c.sort_unstable_by(|a, b| b.cmp(a));
    let top = c.iter().take(c.len() / 100 + 1).sum::<usize>() as f64 / n;
    assert!(top > 0.10, "top 1% talkers make {top}");
    // Services agree with ports.
    for r in &conn {
        match r[7] {
            "dns" => assert!(r[5] == "53" || r[5] == "5353", "{r:?}"),
            "http" => assert!(["80", "8080", "8000"].contains(&r[5]), "{r:?}"),
            "ntp" => assert_eq!(r[5], "123"),
            _ => {}
        }
    }
    // Times: within [start, start + span + timeouts], roughly ordered.
    let start = DEFAULT_START_MICROS;
    let ts: Vec<i64> = conn
        .iter()
        .map(|r| silt_core::time::parse_epoch_seconds(r[0]).unwrap())
        .collect();
    assert!(ts.iter().all(|&t| t >= start && t < start + 3_700_000_000));
    let max_back = ts.windows(2).map(|w| w[0] - w[1]).max().unwrap();
    assert!(
        max_back > 0,
        "some disorder, as Zeek writes at connection end"
    );
    let inversions = ts.windows(2).filter(|w| w[1] < w[0]).count() as f64 / n;
    assert!(inversions < 0.5, "mostly ordered: {inversions}");
    // DNS: real qtypes/rcodes, vectors of answers and TTLs of equal length.
    let dns = records(&logs["dns"]);
    let qtypes: HashSet<&str> = dns.iter().map(|r| r[13]).collect();
    for q in ["A", "AAAA", "PTR"] {
        assert!(qtypes.contains(q), "{q}");
    }
    let nx = dns.iter().filter(|r| r[15] == "NXDOMAIN").count();
    assert!(nx > 0 && nx < dns.len() / 3);
    for r in &dns {
        assert_eq!(r[21] == "-", r[22] == "-");
        if r[21] != "-" {
            assert_eq!(r[21].split(',').count(), r[22].split(',').count());
        }
    }
    // Domain vocabulary: repeated (popular names), but not a handful.
    let names: HashSet<&str> = dns.iter().map(|r| r[9]).collect();
    assert!(
        names.len() > 500 && names.len() < dns.len(),
        "{} distinct queries",
        names.len()
    );
}

#[test]
fn deterministic_with_seed() {
    let a = gen_all(5_000, &GenOptions::default()).1;
    let b = gen_all(5_000, &GenOptions::default()).1;
    for log in ZEEK_LOGS {
        assert!(a[log] == b[log], "{log} differs between runs");
    }
    let c = gen_all(
        5_000,
        &GenOptions {
            seed: 2,
            ..Default::default()
        },
    )
    .1;
    assert!(a["conn"] != c["conn"]);
    // Streaming one log gives the same bytes as the file form.
    let opts = GenOptions {
        logs: Some(vec!["conn".into()]),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let rep = generate_zeek(dir.path(), 3_000, &opts).unwrap();
    let mut out = Vec::new();
    write_zeek_log(&mut out, "conn", 3_000, &opts).unwrap();
    assert_eq!(std::fs::read(&rep.files[0].path).unwrap(), out);
}

#[test]
fn bad_options_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let opts = GenOptions {
        logs: Some(vec!["nope".into()]),
        ..Default::default()
    };
    assert!(generate_zeek(dir.path(), 10, &opts).is_err());
    assert!(write_zeek_log(&mut Vec::new(), "nope", 10, &GenOptions::default()).is_err());
    // Zero events: headers and #close only.
    let mut out = Vec::new();
    assert_eq!(
        write_zeek_log(&mut out, "dns", 0, &GenOptions::default()).unwrap(),
        0
    );
    assert!(String::from_utf8(out)
        .unwrap()
        .lines()
        .all(|l| l.starts_with('#')));
}
