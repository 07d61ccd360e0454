//! Every corpus directory imported as a whole (issue 21): one `silt import FORMAT DIR` of a
//! directory of real files (Suricata's EVE for the corpus pcaps, one file per pcap; Zeek
//! baselines and sample data, TSV and JSON) must succeed with no table failing, and give exactly
//! the rows of the same files imported one at a time into another lake (each import then meets
//! the schemas earlier imports left in the lake). Every table of the whole-directory lake must
//! answer `count(*)` with its rows.
//!
//! Needs the corpus (`../shared/corpus` or `$SILT_CORPUS`); skips without it, fails in CI.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{ok, p};
use serde_json::Value;

/// (format, directory below the corpus).
const DIRS: &[(&str, &str)] = &[
    ("suricata", "suricata/suricata-7.0.10-from-corpus-pcaps"),
    ("suricata", "suricata/suricata-verify"),
    ("zeek", "zeek-tsv/vast"),
    ("zeek", "zeek-tsv/vast-example-pcap"),
    ("zeek", "zeek-tsv/zeek-baselines"),
    ("zeek", "zeek-tsv/zed-sample-data"),
    ("zeek", "zeek-json/zeek-baselines"),
    ("zeek", "zeek-json/zed-sample-data"),
];

/// Rows per table (`silt tables --json`).
fn rows(lake: &Path) -> BTreeMap<String, u64> {
    let v: Value = serde_json::from_str(&ok(&["tables", "--lake", p(lake), "--json"])).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["table"].as_str().unwrap().to_string(),
                t["rows"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if !path.file_name().unwrap().to_string_lossy().starts_with('.') {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn check_dir(format: &str, rel: &str) {
    let Some(dir) = silt_testkit::corpus_path(rel) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let whole = t.path().join("whole");
    let summary = ok(&[
        "import",
        format,
        p(&dir),
        "--lake",
        p(&whole),
        "--allow-empty",
    ]);
    assert!(
        !summary.contains("failed"),
        "{rel}: a table failed:\n{summary}"
    );
    let got = rows(&whole);
    assert!(!got.is_empty(), "{rel}: nothing imported:\n{summary}");

    let one_by_one = t.path().join("one-by-one");
    for f in files(&dir) {
        ok(&[
            "import",
            format,
            p(&f),
            "--lake",
            p(&one_by_one),
            "--allow-empty",
            "-q",
        ]);
    }
    assert_eq!(
        got,
        rows(&one_by_one),
        "{rel}: the whole directory and its files one at a time differ"
    );

    for (table, n) in &got {
        let (module, kind) = table.split_once('.').unwrap();
        let sql = format!("SELECT count(*) AS n FROM \"{module}\".\"{kind}\"");
        let out = ok(&["query", "--lake", p(&whole), "--format", "csv", &sql]);
        assert_eq!(out, format!("n\n{n}\n"), "{rel}: {sql}");
    }
    eprintln!("{rel}: {} tables, {got:?}", got.len());
}

#[test]
fn corpus_directories_import_whole() {
    for (format, rel) in DIRS {
        check_dir(format, rel);
    }
}

/// NetFlow v9/IPFIX captures share their templates within an import whatever their order: the
/// corpus's directory read in name order (`x-data.pcap` before `x-template.pcap`) gives the
/// flows of the template captures given first, and a capture of templates alone is not
/// "nothing imported" (before: 36 of 107 flows lost, exit 4).
#[test]
fn netflow_captures_share_templates_in_any_order() {
    let Some(dir) = silt_testkit::corpus_path("flows/akvorado/netflow") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let fingerprint = |lake: &Path| {
        ok(&[
            "query",
            "--lake",
            p(lake),
            "--format",
            "csv",
            "SELECT count(*) AS n, sum(bytes) AS b, sum(packets) AS k, count(DISTINCT exporter) AS e FROM netflow.flow",
        ])
    };
    let whole = t.path().join("whole");
    ok(&["import", "netflow", p(&dir), "--lake", p(&whole), "-q"]);
    let mut caps = files(&dir);
    caps.sort_by_key(|f| !f.to_string_lossy().contains("template"));
    let first = t.path().join("templates-first");
    let mut args = vec!["import", "netflow"];
    args.extend(caps.iter().map(|f| p(f)));
    args.extend(["--lake", p(&first), "-q"]);
    ok(&args);
    assert_eq!(fingerprint(&whole), fingerprint(&first));
    // Data before its template, as two arguments.
    let pair = t.path().join("pair");
    ok(&[
        "import",
        "netflow",
        p(&dir.join("data.pcap")),
        p(&dir.join("template.pcap")),
        "--lake",
        p(&pair),
        "-q",
    ]);
    let n = fingerprint(&pair);
    assert!(n.lines().nth(1).unwrap().starts_with("4,"), "{n}");
}
