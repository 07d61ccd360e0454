//! A Zeek TSV log larger than a decoding block, imported with its blocks decoded on three
//! threads (`SILT_DECODE_THREADS=3`, `silt_core::split`) and on the reading thread alone
//! (`=1`), gives the same lake: the same rows (count, and a digest of every column of every row
//! in a fixed order), the same rejects with the same
//! stream-wide line numbers, and as many files.
//!
//! The log is generated (`silt generate zeek`), with bad lines and a second header block
//! (another separator) put in at places that fall in later blocks.

mod common;

use std::path::Path;
use std::process::Command;

use common::{ok, p};

fn import(log: &Path, lake: &Path, threads: &str) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_silt"))
        .env("SILT_DECODE_THREADS", threads)
        .args([
            "import",
            "zeek",
            p(log),
            "--lake",
            p(lake),
            "--partition",
            "none",
        ])
        .output()
        .expect("run silt");
    assert!(
        o.status.success(),
        "import with {threads} threads: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Every reject of the lake as (line, reason), sorted.
fn rejects(lake: &Path) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    for day in std::fs::read_dir(lake.join("_rejects")).unwrap() {
        for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
            let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
            for l in text.lines() {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                out.push((
                    v["line"].as_u64().unwrap(),
                    v["reason"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_log_decoded_in_blocks_on_threads_imports_as_on_one() {
    let dir = tempfile::tempdir().unwrap();
    let gen = dir.path().join("gen");
    ok(&[
        "generate",
        "zeek",
        "--events",
        "200000",
        "--output",
        p(&gen),
    ]);
    let text = std::fs::read_to_string(gen.join("conn.log")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let body: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| !l.starts_with('#'))
        .collect();
    let header: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.starts_with("#"))
        .collect();
    assert!(body.len() > 90_000, "{} rows generated", body.len());
    let mut log = String::new();
    for h in &header {
        log.push_str(h);
        log.push('\n');
    }
    let mut bad = 0;
    for (i, l) in body.iter().enumerate() {
        if i % 25_000 == 7 {
            log.push_str("not\ta\tconn\tline\n");
            bad += 1;
        }
        if i == body.len() / 2 {
            // A second header block with `|` between fields: the rows after it too.
            for h in &header {
                log.push_str(
                    &h.replace("#separator \\x09", "#separator |")
                        .replace('\t', "|"),
                );
                log.push('\n');
            }
        }
        if i >= body.len() / 2 {
            log.push_str(&l.replace('\t', "|"));
        } else {
            log.push_str(l);
        }
        log.push('\n');
    }
    let path = dir.path().join("conn.log");
    std::fs::write(&path, &log).unwrap();
    assert!(
        log.len() > 3 * (4 << 20),
        "{} bytes: not several blocks",
        log.len()
    );

    let (one, three) = (dir.path().join("one"), dir.path().join("three"));
    import(&path, &one, "1");
    import(&path, &three, "3");
    let fingerprint = |lake: &Path| {
        common::query_csv(
            lake,
            "SELECT count(*) AS n, md5(string_agg(concat_ws('|', ts, uid, id.orig_h, \
             id.orig_p, id.resp_h, id.resp_p, proto, service, duration, orig_bytes, resp_bytes, \
             conn_state, local_orig, local_resp, missed_bytes, history, orig_pkts, \
             orig_ip_bytes, resp_pkts, resp_ip_bytes, array_to_string(tunnel_parents, ',')), \
             '|' ORDER BY uid, ts)) AS digest FROM zeek.conn",
        )
    };
    let (a, b) = (fingerprint(&one), fingerprint(&three));
    assert_eq!(a, b, "rows differ between one and three decoding threads");
    assert!(a.contains(&format!("{}", body.len())), "{a}");
    let (ra, rb) = (rejects(&one), rejects(&three));
    assert_eq!(ra.len(), bad, "{ra:?}");
    assert_eq!(
        ra, rb,
        "rejects differ between one and three decoding threads"
    );
    let files = |lake: &Path| common::parquet_files(lake).len();
    assert_eq!(files(&one), files(&three), "files differ");
}
