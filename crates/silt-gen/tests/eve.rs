//! Checks of generated Suricata EVE JSON: valid JSON per line, Suricata 7 shapes and conventions
//! (timestamps with +0000, u64 flow ids beyond 2^53, community_id), exact counts, filtering by
//! event type and determinism.

use std::collections::{HashMap, HashSet};

use silt_gen::{generate_suricata, write_suricata, GenOptions, DEFAULT_START_MICROS, EVE_TYPES};

fn lines(events: u64, opts: &GenOptions) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let n = write_suricata(&mut out, events, opts).unwrap();
    assert_eq!(n, events);
    let text = String::from_utf8(out).unwrap();
    assert!(text.ends_with('\n'));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn eve_lines_are_suricata_shaped() {
    let v = lines(30_000, &GenOptions::default());
    assert_eq!(v.len(), 30_000);
    let mut types: HashMap<String, usize> = HashMap::new();
    let mut big_ids = 0;
    for o in &v {
        let et = o["event_type"].as_str().unwrap().to_string();
        let ts = o["timestamp"].as_str().unwrap();
        assert!(ts.ends_with("+0000") && ts.len() == 31, "{ts}");
        let micros = silt_core::time::parse_iso8601(ts).unwrap();
        assert!((DEFAULT_START_MICROS..DEFAULT_START_MICROS + 6_000_000_000).contains(&micros));
        if et != "stats" {
            // serde_json keeps integers beyond 2^53 exact as u64.
            let fid = o["flow_id"]
                .as_u64()
                .expect("flow_id is an unsigned integer");
            if fid >= 1 << 53 {
                big_ids += 1;
            }
            assert!(o["src_ip"].is_string() && o["dest_ip"].is_string());
            let cid = o["community_id"].as_str().unwrap();
            assert!(cid.starts_with("1:") && cid.len() == 30, "{cid}");
            let proto = o["proto"].as_str().unwrap();
            assert!(["TCP", "UDP", "ICMP", "IPv6-ICMP"].contains(&proto));
        }
        match et.as_str() {
            "flow" => {
                let f = &o["flow"];
                for k in [
                    "pkts_toserver",
                    "pkts_toclient",
                    "bytes_toserver",
                    "bytes_toclient",
                    "age",
                ] {
                    assert!(f[k].is_u64(), "{k}");
                }
                assert!(silt_core::time::parse_iso8601(f["start"].as_str().unwrap()).is_some());
                assert!(silt_core::time::parse_iso8601(f["end"].as_str().unwrap()).is_some());
            }
            "dns" => {
                let d = &o["dns"];
                assert_eq!(d["version"], 2);
                assert!(["query", "answer"].contains(&d["type"].as_str().unwrap()));
                assert!(d["rrname"].is_string());
            }
            "http" => assert!(o["http"]["hostname"].is_string() && o["http"]["url"].is_string()),
            "tls" => assert!(o["tls"]["version"].is_string()),
            "fileinfo" => {
                assert_eq!(o["fileinfo"]["md5"].as_str().unwrap().len(), 32);
                assert!(o["fileinfo"]["size"].is_u64());
            }
            "alert" => {
                assert!(o["alert"]["signature_id"].is_u64());
                assert!(o["alert"]["signature"].is_string());
            }
            "anomaly" => assert!(o["anomaly"]["type"].is_string()),
            "stats" => assert!(o["stats"]["decoder"]["pkts"].is_u64()),
            other => panic!("unexpected event_type {other}"),
        }
        *types.entry(et).or_default() += 1;
    }
    for t in EVE_TYPES {
        assert!(
            types.get(t).copied().unwrap_or(0) > 0,
            "no {t} events: {types:?}"
        );
    }
    assert!(types["flow"] > types["alert"] * 5);
    assert!(
        big_ids > 100 && big_ids < 10_000,
        "{big_ids} flow ids >= 2^53"
    );
    // IPv6 addresses are written expanded, as Suricata does.
    let v6: Vec<&str> = v
        .iter()
        .filter_map(|o| o["src_ip"].as_str())
        .filter(|s| s.contains(':'))
        .collect();
    assert!(!v6.is_empty());
    assert!(v6
        .iter()
        .all(|s| s.split(':').count() == 8 && s.split(':').all(|g| g.len() == 4)));
}

#[test]
fn same_flow_same_ids() {
    // Events of one flow share flow_id and community_id; flow_ids of different flows differ.
    let v = lines(20_000, &GenOptions::default());
    let mut cid_of: HashMap<u64, &str> = HashMap::new();
    for o in &v {
        if let (Some(fid), Some(cid)) = (o["flow_id"].as_u64(), o["community_id"].as_str()) {
            let prev = cid_of.entry(fid).or_insert(cid);
            assert_eq!(*prev, cid);
        }
    }
    let flows: Vec<u64> = v
        .iter()
        .filter(|o| o["event_type"] == "flow")
        .map(|o| o["flow_id"].as_u64().unwrap())
        .collect();
    assert_eq!(flows.iter().collect::<HashSet<_>>().len(), flows.len());
}

#[test]
fn filter_counts_and_determinism() {
    let opts = GenOptions {
        logs: Some(vec!["dns".into(), "alert".into()]),
        ..Default::default()
    };
    let v = lines(5_000, &opts);
    assert!(v
        .iter()
        .all(|o| o["event_type"] == "dns" || o["event_type"] == "alert"));
    assert!(v.iter().any(|o| o["event_type"] == "alert"));
    let only_stats = GenOptions {
        logs: Some(vec!["stats".into()]),
        ..Default::default()
    };
    assert_eq!(lines(20, &only_stats).len(), 20);

    let dir = tempfile::tempdir().unwrap();
    let rep = generate_suricata(dir.path(), 4_000, &GenOptions::default()).unwrap();
    assert_eq!(rep.records(), 4_000);
    let a = std::fs::read(&rep.files[0].path).unwrap();
    assert_eq!(a.len() as u64, rep.bytes());
    let mut b = Vec::new();
    write_suricata(&mut b, 4_000, &GenOptions::default()).unwrap();
    assert_eq!(a, b);
    let mut c = Vec::new();
    write_suricata(
        &mut c,
        4_000,
        &GenOptions {
            seed: 9,
            ..Default::default()
        },
    )
    .unwrap();
    assert_ne!(a, c);
    let bad = GenOptions {
        logs: Some(vec!["conn".into()]),
        ..Default::default()
    };
    assert!(write_suricata(&mut Vec::new(), 1, &bad).is_err());
}
