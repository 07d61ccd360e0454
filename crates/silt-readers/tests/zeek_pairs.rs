//! The zed-sample-data logs exist as Zeek TSV and as Zeek JSON of the same traffic. Both readers
//! must produce the same table, the same column types and the same rows.

mod zeek_common;

use std::collections::{BTreeMap, BTreeSet};

use zeek_common::*;

/// `(TSV file, JSON file, columns only the TSV has)`. The JSON writer omits unset fields, so a
/// column that is unset (`-`) in every TSV row does not exist on the JSON side; these lists were
/// worked out from the files and the test checks that each such column is indeed all null.
/// The JSON side always has one column more: `_write_ts`.
const PAIRS: &[(&str, &str, &[&str])] = &[
    (
        "analyzer.log.gz",
        "analyzer.json.gz",
        &["fuid", "failure_data"],
    ),
    ("dce_rpc.log", "dce_rpc.json", &[]),
    ("dpd.log", "dpd.json", &[]),
    ("ftp.log", "ftp.json", &["mime_type", "file_size", "fuid"]),
    (
        "kerberos.log",
        "kerberos.json",
        &[
            "from",
            "cipher",
            "client_cert_subject",
            "client_cert_fuid",
            "server_cert_subject",
            "server_cert_fuid",
        ],
    ),
    (
        "ldap_search.log",
        "ldap_search.json",
        &["base_object", "diagnostic_message", "attributes"],
    ),
    (
        "notice.log",
        "notice.json",
        &[
            "file_mime_type",
            "file_desc",
            "n",
            "peer_descr",
            "remote_location.country_code",
            "remote_location.region",
            "remote_location.city",
            "remote_location.latitude",
            "remote_location.longitude",
        ],
    ),
    ("ntlm.log", "ntlm.json", &[]),
    ("ntp.log", "ntp.json", &[]),
    ("pe.log", "pe.json", &[]),
    ("smb_files.log", "smb_files.json", &["fuid", "prev_name"]),
    ("smb_mapping.log", "smb_mapping.json", &[]),
    (
        "ssh.log",
        "ssh.json",
        &[
            "direction",
            "remote_location.country_code",
            "remote_location.region",
            "remote_location.city",
            "remote_location.latitude",
            "remote_location.longitude",
        ],
    ),
    (
        "stats.log",
        "stats.json",
        &["pkts_dropped", "pkts_link", "pkt_lag", "pkts_filtered"],
    ),
    (
        "x509.log",
        "x509.json",
        &["san.uri", "basic_constraints.path_len"],
    ),
];

const JSON_ONLY: &[&str] = &["_write_ts"];

#[test]
fn tsv_and_json_of_the_same_logs_agree() {
    let Some(c) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let tdir = c.join("zeek-tsv/zed-sample-data");
    let jdir = c.join("zeek-json/zed-sample-data");
    // Every JSON file of the sample set is covered by a pair.
    let listed: BTreeSet<&str> = PAIRS.iter().map(|p| p.1).collect();
    let present: BTreeSet<String> = files(&jdir)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        present.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        listed
    );

    for (tf, jf, tsv_only) in PAIRS {
        let tpath = tdir.join(tf);
        let jpath = jdir.join(jf);
        let t = tsv(&bytes(&tpath), &source_for(&tpath), 1000);
        let j = json(&bytes(&jpath), &source_for(&jpath), 777);
        assert!(t.rejects.is_empty(), "{tf}: {:?}", t.rejects.first());
        assert!(j.rejects.is_empty(), "{jf}: {:?}", j.rejects.first());
        assert_eq!(t.batches.len(), 1, "{tf}: one table");
        assert_eq!(j.batches.len(), 1, "{jf}: one table");
        let (tname, tb) = t.batches.iter().next().unwrap();
        let (jname, jb) = j.batches.iter().next().unwrap();
        assert_eq!(tname, jname, "{tf}: table name");
        assert_eq!(
            tname.to_string(),
            format!("zeek.{}", tf.split('.').next().unwrap())
        );

        // Columns: same types where both have them, and exactly the listed differences.
        let tt = leaf_types(tb);
        let jt = leaf_types(jb);
        for (col, ty) in &tt {
            if let Some(jty) = jt.get(col) {
                assert_eq!(ty, jty, "{tf}: type of {col}");
            }
        }
        let only_t: BTreeSet<&str> = tt
            .keys()
            .filter(|k| !jt.contains_key(*k))
            .map(String::as_str)
            .collect();
        let only_j: BTreeSet<&str> = jt
            .keys()
            .filter(|k| !tt.contains_key(*k))
            .map(String::as_str)
            .collect();
        assert_eq!(
            only_t,
            tsv_only.iter().copied().collect(),
            "{tf}: TSV-only columns"
        );
        assert_eq!(
            only_j,
            JSON_ONLY.iter().copied().collect(),
            "{tf}: JSON-only columns"
        );
        // Top-level schema order agrees too (JSON follows the registry, built from these logs).
        let order = |b: &arrow::record_batch::RecordBatch| -> Vec<String> {
            b.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect()
        };
        let keep: BTreeSet<String> = tt
            .keys()
            .filter(|k| jt.contains_key(*k))
            .map(|k| k.split('.').next().unwrap().to_string())
            .collect();
        let to: Vec<String> = order(&tb[0])
            .into_iter()
            .filter(|n| keep.contains(n))
            .collect();
        let jo: Vec<String> = order(&jb[0])
            .into_iter()
            .filter(|n| keep.contains(n))
            .collect();
        assert_eq!(to, jo, "{tf}: column order");

        // Rows: same number, same values (doubles at 6 decimals), compared as multisets.
        let trows = rows(tb);
        let jrows = rows(jb);
        assert_eq!(trows.len(), jrows.len(), "{tf}: row count");
        for r in &trows {
            for c in tsv_only.iter() {
                assert_eq!(
                    r.get(*c),
                    Some(&Cell::Null),
                    "{tf}: TSV-only column {c} must be unset"
                );
            }
        }
        let common: Vec<&String> = tt.keys().filter(|k| jt.contains_key(*k)).collect();
        let project = |r: &BTreeMap<String, Cell>| -> Vec<Cell> {
            common
                .iter()
                .map(|c| r.get(*c).cloned().unwrap_or(Cell::Null))
                .collect()
        };
        let group = |rows: &[BTreeMap<String, Cell>]| -> BTreeMap<String, Vec<Vec<Cell>>> {
            let mut g: BTreeMap<String, Vec<Vec<Cell>>> = BTreeMap::new();
            for r in rows {
                let p = project(r);
                let key = p.iter().map(Cell::key).collect::<Vec<_>>().join("|");
                g.entry(key).or_default().push(p);
            }
            for v in g.values_mut() {
                v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
            }
            g
        };
        let tg = group(&trows);
        let jg = group(&jrows);
        assert_eq!(tg.len(), jg.len(), "{tf}: distinct rows");
        let mut compared = 0;
        for (k, tv) in &tg {
            let jv = jg
                .get(k)
                .unwrap_or_else(|| panic!("{tf}: TSV row not in JSON: {k}"));
            assert_eq!(tv.len(), jv.len(), "{tf}: multiplicity of {k}");
            for (a, b) in tv.iter().zip(jv) {
                for ((x, y), c) in a.iter().zip(b).zip(&common) {
                    assert!(x.close(y), "{tf}: column {c}: TSV {x:?} vs JSON {y:?}");
                }
                compared += 1;
            }
        }
        assert_eq!(compared, trows.len());
        // Metadata.
        let md = tb[0].schema().metadata().clone();
        assert_eq!(md.get("silt.table"), Some(&tname.to_string()));
        let jmd = jb[0].schema().metadata().clone();
        assert_eq!(
            md.get("silt.time_column"),
            jmd.get("silt.time_column"),
            "{tf}"
        );
        assert_eq!(md.get("silt.time_column").map(String::as_str), Some("ts"));
        // JSON's extra `_write_ts` is a time too.
        assert_eq!(jt["_write_ts"], silt_core::time::timestamp_type());
    }
}

/// Zeek's json-non-printable-escaping test wrote the same four HTTP requests as TSV and as JSON.
/// Its JSON lines carry the canonified `XXXXXXXXXX.XXXXXX` ts (invalid JSON); with that token
/// replaced by a number the strings must agree, escapes included.
#[test]
fn non_printable_escaping_agrees() {
    let Some(c) = corpus() else {
        eprintln!("corpus not found, skipping");
        return;
    };
    let d = c.join("zeek-tsv/zeek-baselines/scripts.base.frameworks.logging.json-non-printable-escaping/http.log.tsv");
    let e = c.join("zeek-json/zeek-baselines/scripts.base.frameworks.logging.json-non-printable-escaping/http.log.json");
    let t = tsv(&bytes(&d), &source_named("http.log"), 100);
    let raw = String::from_utf8(bytes(&e))
        .unwrap()
        .replace("XXXXXXXXXX.XXXXXX", "0");
    let j = json(raw.as_bytes(), &source_named("http.log"), 100);
    assert!(t.rejects.is_empty() && j.rejects.is_empty());
    let tr = rows(&t.batches.values().next().unwrap()[..]);
    let jr = rows(&j.batches.values().next().unwrap()[..]);
    let uris =
        |rows: &[BTreeMap<String, Cell>]| rows.iter().map(|r| r["uri"].clone()).collect::<Vec<_>>();
    assert_eq!(uris(&tr), uris(&jr));
    assert_eq!(
        uris(&tr),
        vec![
            Cell::S("/regular_file.html".into()),
            Cell::S("/printable_\u{1F604}".into()),
            Cell::S("/non_printable_\\x07".into()),
            Cell::S("/non_printable_literal_\\x07".into()),
        ]
    );
    for (a, b) in tr.iter().zip(&jr) {
        for (k, v) in a {
            if k == "ts" {
                continue;
            }
            assert!(
                v.close(b.get(k).unwrap_or(&Cell::Null)),
                "{k}: {v:?} vs {:?}",
                b.get(k)
            );
        }
    }
}
