//! Checks every row of the Community ID spec's JSON baselines (corpus `community-id/`) against
//! `community_id_v1`. Skips with a message when the corpus is absent (fails in CI: silt-testkit).

use silt_flow::community_id_v1;
use std::net::IpAddr;

/// Returns the number of rows checked, or None (after a skip message) without the corpus.
fn check(file: &str, seed: u16, base64: bool) -> Option<usize> {
    let path = silt_testkit::corpus_path(&format!("community-id/{file}"))?;
    let text = std::fs::read_to_string(&path).unwrap();
    let rows: Vec<serde_json::Value> = serde_json::from_str(&text).expect("baseline is JSON");
    assert!(!rows.is_empty(), "{file}: no rows");
    let mut failures = Vec::new();
    for row in &rows {
        let proto = row["proto"].as_u64().unwrap() as u8;
        let src: IpAddr = row["saddr"].as_str().unwrap().parse().unwrap();
        let dst: IpAddr = row["daddr"].as_str().unwrap().parse().unwrap();
        // Port-less protocols have no sport/dport in the JSON (null or absent).
        let sport = row.get("sport").and_then(|v| v.as_u64()).unwrap_or(0) as u16;
        let dport = row.get("dport").and_then(|v| v.as_u64()).unwrap_or(0) as u16;
        let want = row["communityid"].as_str().unwrap();
        let got = community_id_v1(src, dst, proto, sport, dport, seed, base64);
        if got != want {
            failures.push(format!("{row}: got {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{file}: {} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    Some(rows.len())
}

#[test]
fn baselines_match_every_row() {
    let cases = [
        ("baseline_deflt.json", 0, true),
        ("baseline_seed1.json", 1, true),
        ("baseline_nob64.json", 0, false),
    ];
    for (file, seed, b64) in cases {
        match check(file, seed, b64) {
            Some(n) => eprintln!("{file}: {n} rows match"),
            None => return,
        }
    }
}
