//! The index against a brute-force HashMap on generated and random sets; damaged files;
//! tiny memory budgets (many runs, several merge passes) giving the same file as a large one.

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

use proptest::prelude::*;
use silt_rdns::gen::{GenOptions, Order, RowGen};
use silt_rdns::{build, BuildOptions, BuildReport, RdnsIndex};

fn opts(dir: &Path, memory: usize, block: usize) -> BuildOptions {
    BuildOptions {
        memory,
        tmp_dir: dir.to_path_buf(),
        block_entries: block,
        zstd_level: 3,
        ..Default::default()
    }
}

/// Brute force: first name per address (IPv4-mapped IPv6 counts as IPv4), like the index.
fn expected(csv: &str) -> HashMap<IpAddr, String> {
    let mut m = HashMap::new();
    for line in csv.lines() {
        let Some((ip, name)) = line.split_once(',') else {
            continue;
        };
        let Ok(ip) = ip.trim().parse::<IpAddr>() else {
            continue;
        };
        let name = name.trim();
        if name.is_empty() || name.len() > 1024 {
            continue;
        }
        let ip = canonical(ip);
        m.entry(ip).or_insert_with(|| name.to_string());
    }
    m
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

fn build_str(csv: &str, dir: &Path, name: &str, o: BuildOptions) -> (RdnsIndex, BuildReport) {
    let path = dir.join(name);
    let report = build(csv.as_bytes(), &path, o).expect("build");
    (RdnsIndex::open(&path).expect("open"), report)
}

fn check_against(idx: &RdnsIndex, want: &HashMap<IpAddr, String>, absent: &[IpAddr]) {
    for (ip, name) in want {
        assert_eq!(
            idx.lookup(*ip).unwrap().as_deref(),
            Some(name.as_str()),
            "lookup {ip}"
        );
        if let IpAddr::V4(a) = ip {
            let mapped = IpAddr::V6(a.to_ipv6_mapped());
            assert_eq!(
                idx.lookup(mapped).unwrap().as_deref(),
                Some(name.as_str()),
                "mapped {mapped}"
            );
        }
    }
    for ip in absent {
        if !want.contains_key(&canonical(*ip)) {
            assert_eq!(idx.lookup(*ip).unwrap(), None, "absent {ip}");
        }
    }
    // Batch API: present, absent, None and repeats mixed, in random-ish order.
    let mut batch: Vec<Option<IpAddr>> = want.keys().map(|ip| Some(*ip)).collect();
    batch.extend(absent.iter().map(|ip| Some(*ip)));
    batch.push(None);
    let again: Vec<_> = batch.iter().step_by(3).copied().collect();
    batch.extend(again);
    let mut out = Vec::new();
    idx.lookup_many(&batch, &mut out).unwrap();
    assert_eq!(out.len(), batch.len());
    for (ip, got) in batch.iter().zip(&out) {
        let want = ip.and_then(|ip| want.get(&canonical(ip)));
        assert_eq!(got.as_deref(), want.map(|s| s.as_str()), "batch {ip:?}");
    }
    // Full scan returns exactly the map.
    let mut n = 0;
    idx.for_each(|ip, name| {
        n += 1;
        assert_eq!(want.get(&ip).map(|s| s.as_str()), Some(name), "scan {ip}");
    })
    .unwrap();
    assert_eq!(n, want.len());
}

fn generated(rows: u64, seed: u64, header: bool) -> String {
    let mut o = GenOptions::new(rows, seed);
    o.order = Order::Chunks { chunk_rows: 50 };
    o.header = header;
    o.dup_share = 0.01;
    let mut g = RowGen::new(&o);
    let mut buf = Vec::new();
    while g.next_row(&mut buf).is_some() {}
    String::from_utf8(buf).unwrap()
}

fn random_absent(n: usize) -> Vec<IpAddr> {
    let mut x: u64 = 0x1234_5678;
    (0..n)
        .map(|i| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if i % 5 == 0 {
                IpAddr::V6(Ipv6Addr::from(((x as u128) << 64) | (x as u128 >> 3)))
            } else {
                IpAddr::V4(Ipv4Addr::from((x >> 32) as u32))
            }
        })
        .collect()
}

#[test]
fn generated_set_with_header_dups_and_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = generated(20_000, 1, true);
    // Bad lines, an IPv4-mapped row, CRLF, blank lines, a duplicate that must lose.
    csv.push_str("not-an-ip,foo.example\n");
    csv.push_str("1.2.3.4\n");
    csv.push_str("1.2.3.4,\n");
    csv.push('\n');
    csv.push_str("::ffff:9.9.9.9,mapped.example.net\r\n");
    csv.push_str("9.9.9.9,second.example.net\n");
    csv.push_str(&format!("5.5.5.5,{}\n", "x".repeat(2000)));
    let want = expected(&csv);
    let mut o = opts(dir.path(), 1 << 20, 7);
    o.rejects_path = Some(dir.path().join("rejects.tsv"));
    let (idx, r) = build_str(&csv, dir.path(), "a.idx", o);
    assert!(r.header_skipped);
    assert_eq!(r.rejects, 4, "{:?}", r.reject_samples);
    assert_eq!(r.blank_lines, 1);
    assert_eq!(r.unique() as usize, want.len());
    assert_eq!(r.rows_in, r.unique() + r.duplicates + r.rejects);
    assert!(r.duplicates >= 1);
    assert!(r.runs > 1, "1 MiB budget spills several runs");
    assert!(r.unique_v6 > 0);
    let lines: Vec<_> = csv.lines().collect();
    for rej in &r.reject_samples {
        assert!(lines[(rej.line - 1) as usize].starts_with(&rej.text[..rej.text.len().min(20)]));
    }
    let rejects = std::fs::read_to_string(dir.path().join("rejects.tsv")).unwrap();
    assert_eq!(rejects.lines().count(), 4);
    assert!(rejects.contains("first field is not an IPv4 or IPv6 address"));
    assert_eq!(
        idx.lookup("9.9.9.9".parse().unwrap()).unwrap().as_deref(),
        Some("mapped.example.net")
    );
    check_against(&idx, &want, &random_absent(3000));
    // Addresses right next to present ones (inside blocks and at block edges) are absent.
    let near: Vec<IpAddr> = want
        .keys()
        .map(|ip| match ip {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(*a).wrapping_add(1))),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(*a).wrapping_sub(1))),
        })
        .collect();
    for ip in near {
        let got = idx.lookup(ip).unwrap();
        assert_eq!(got.as_deref(), want.get(&ip).map(|s| s.as_str()));
    }
}

#[test]
fn empty_one_row_header_only() {
    let dir = tempfile::tempdir().unwrap();
    for (i, csv) in [
        "",
        "ip,name\n",
        "\n\n",
        "1.2.3.4,one.example",
        "2001:db8::1,six.example\n",
    ]
    .iter()
    .enumerate()
    {
        let want = expected(csv);
        let (idx, r) = build_str(
            csv,
            dir.path(),
            &format!("{i}.idx"),
            opts(dir.path(), 1 << 20, 128),
        );
        assert_eq!(r.unique() as usize, want.len(), "case {i}");
        check_against(&idx, &want, &random_absent(100));
        assert_eq!(idx.lookup("0.0.0.0".parse().unwrap()).unwrap(), None);
        assert_eq!(
            idx.lookup("255.255.255.255".parse().unwrap()).unwrap(),
            None
        );
        assert_eq!(idx.lookup("::".parse().unwrap()).unwrap(), None);
    }
}

#[test]
fn tiny_budget_many_runs_and_passes_gives_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let csv = generated(30_000, 2, false);
    let big = dir.path().join("big.idx");
    let small = dir.path().join("small.idx");
    let rb = build(csv.as_bytes(), &big, opts(dir.path(), 256 << 20, 64)).unwrap();
    // 32 KiB: dozens of runs; fan-in 2 forces several merge passes.
    let rs = build(csv.as_bytes(), &small, opts(dir.path(), 32 << 10, 64)).unwrap();
    assert_eq!(rb.runs, 1);
    assert!(rs.runs > 20, "runs {}", rs.runs);
    assert!(rs.merge_passes >= 3, "passes {}", rs.merge_passes);
    assert_eq!(
        (rb.unique_v4, rb.unique_v6, rb.duplicates),
        (rs.unique_v4, rs.unique_v6, rs.duplicates)
    );
    assert_eq!(
        std::fs::read(&big).unwrap(),
        std::fs::read(&small).unwrap(),
        "same bytes"
    );
    // No temporary files are left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    let want = expected(&csv);
    check_against(
        &RdnsIndex::open(&small).unwrap(),
        &want,
        &random_absent(500),
    );
}

#[test]
fn options_without_templates_or_dictionary_give_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let csv = generated(5_000, 3, false);
    let want = expected(&csv);
    for (i, (templates, dict)) in [(false, 0), (true, 0), (false, 4096)]
        .into_iter()
        .enumerate()
    {
        let mut o = opts(dir.path(), 1 << 20, 33);
        o.templates = templates;
        o.dict_size = dict;
        let (idx, _) = build_str(&csv, dir.path(), &format!("o{i}.idx"), o);
        check_against(&idx, &want, &random_absent(200));
    }
}

#[test]
fn damaged_files_fail_at_open_or_lookup_never_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let csv = generated(3_000, 4, false);
    let want = expected(&csv);
    let path = dir.path().join("good.idx");
    build(csv.as_bytes(), &path, opts(dir.path(), 1 << 20, 16)).unwrap();
    let good = std::fs::read(&path).unwrap();
    let bad = dir.path().join("bad.idx");
    // Truncations.
    for cut in [
        0,
        1,
        15,
        16,
        100,
        good.len() / 2,
        good.len() - 60,
        good.len() - 1,
    ] {
        std::fs::write(&bad, &good[..cut]).unwrap();
        let e = RdnsIndex::open(&bad).expect_err("truncated index must not open");
        assert!(e.to_string().contains("bad.idx"), "{e}");
    }
    // Appended bytes.
    let mut longer = good.clone();
    longer.extend_from_slice(b"junk");
    std::fs::write(&bad, &longer).unwrap();
    assert!(RdnsIndex::open(&bad).is_err());
    // Single flipped bytes all over the file: open fails, or every lookup is right or an error.
    let sample: Vec<(IpAddr, String)> = want
        .iter()
        .take(400)
        .map(|(k, v)| (*k, v.clone()))
        .collect();
    let mut lookup_errors = 0;
    let mut open_errors = 0;
    let step = (good.len() / 300).max(1);
    for pos in (0..good.len()).step_by(step) {
        let mut b = good.clone();
        b[pos] ^= 0x5a;
        std::fs::write(&bad, &b).unwrap();
        let idx = match RdnsIndex::open(&bad) {
            Ok(i) => i,
            Err(_) => {
                open_errors += 1;
                continue;
            }
        };
        let mut failed = false;
        for (ip, name) in &sample {
            match idx.lookup(*ip) {
                Ok(got) => assert_eq!(
                    got.as_deref(),
                    Some(name.as_str()),
                    "byte {pos}: wrong answer"
                ),
                Err(e) => {
                    assert!(e.to_string().contains("damaged"), "{e}");
                    failed = true;
                }
            }
        }
        if idx.for_each(|_, _| {}).is_err() {
            failed = true;
        }
        assert!(failed, "flipped byte {pos} went unnoticed");
        lookup_errors += 1;
    }
    assert!(
        open_errors > 0 && lookup_errors > 0,
        "{open_errors} {lookup_errors}"
    );
}

#[test]
fn not_an_index_and_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.idx");
    std::fs::File::create(&p)
        .unwrap()
        .write_all(&[7u8; 4096])
        .unwrap();
    assert!(RdnsIndex::open(&p)
        .unwrap_err()
        .to_string()
        .contains("not a usable"));
    assert!(RdnsIndex::open(dir.path().join("missing")).is_err());
}

#[test]
fn gz_roundtrip_through_write_csv_gz() {
    let dir = tempfile::tempdir().unwrap();
    let mut gz = Vec::new();
    silt_rdns::gen::write_csv_gz(2_000, 9, &mut gz).unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::MultiGzDecoder::new(&gz[..]), &mut text)
        .unwrap();
    assert_eq!(text.lines().count(), 2_000);
    let want = expected(&text);
    let path = dir.path().join("g.idx");
    let r = build(
        std::io::BufReader::new(flate2::read::MultiGzDecoder::new(&gz[..])),
        &path,
        opts(dir.path(), 1 << 20, 128),
    )
    .unwrap();
    assert_eq!(r.unique() as usize, want.len());
    assert!(
        r.bytes_written < gz.len() as u64,
        "index {} vs gz {}",
        r.bytes_written,
        gz.len()
    );
    check_against(&RdnsIndex::open(&path).unwrap(), &want, &random_absent(100));
}

fn arb_ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        // Clustered IPv4 so that neighbours and blocks interact.
        (0u32..4, 0u32..600).prop_map(|(h, l)| IpAddr::V4(Ipv4Addr::from((h << 24) | l))),
        any::<u32>().prop_map(|v| IpAddr::V4(Ipv4Addr::from(v))),
        (0u128..300).prop_map(|l| IpAddr::V6(Ipv6Addr::from((0x2001_0db8u128 << 96) | l))),
        any::<u128>().prop_map(|v| IpAddr::V6(Ipv6Addr::from(v))),
    ]
}

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9.-]{1,30}",
        Just("c-{}.hsd1.ca.comcast.net".to_string()),
        Just("static.{r}.clients.example.de".to_string()),
        "[ -~]{1,12}",
    ]
}

fn render(ip: IpAddr, name: &str) -> String {
    let dashed = ip.to_string().replace([':', '.'], "-");
    let rev = match ip {
        IpAddr::V4(a) => {
            let o = a.octets();
            format!("{}.{}.{}.{}", o[3], o[2], o[1], o[0])
        }
        IpAddr::V6(_) => dashed.clone(),
    };
    name.replace("{}", &dashed)
        .replace("{r}", &rev)
        .replace(',', ";")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
    #[test]
    fn random_sets_match_a_hashmap(
        rows in prop::collection::vec((arb_ip(), arb_name()), 0..400),
        block in 1usize..20,
        tiny in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut csv = String::new();
        for (ip, name) in &rows {
            csv.push_str(&format!("{ip},{}\n", render(*ip, name)));
        }
        let want = expected(&csv);
        let memory = if tiny { 4096 } else { 1 << 20 };
        let (idx, r) = build_str(&csv, dir.path(), "p.idx", opts(dir.path(), memory, block));
        prop_assert_eq!(r.unique() as usize, want.len());
        let absent: Vec<IpAddr> = rows.iter().map(|(ip, _)| match ip {
            IpAddr::V4(a) => IpAddr::V4(Ipv4Addr::from(u32::from(*a) ^ 1)),
            IpAddr::V6(a) => IpAddr::V6(Ipv6Addr::from(u128::from(*a) ^ 1)),
        }).collect();
        check_against(&idx, &want, &absent);
    }
}

#[test]
fn tiny_and_disabled_result_caches_give_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let csv = generated(4_000, 5, false);
    let want = expected(&csv);
    let path = dir.path().join("c.idx");
    build(csv.as_bytes(), &path, opts(dir.path(), 1 << 20, 16)).unwrap();
    for results in [0, 1, 2, 4, 64] {
        let idx = RdnsIndex::open_with(&path, silt_rdns::CacheOptions { results }).unwrap();
        // Twice: the second round is served partly from the cache.
        check_against(&idx, &want, &random_absent(300));
        check_against(&idx, &want, &random_absent(300));
    }
}

#[test]
fn shared_between_threads() {
    let dir = tempfile::tempdir().unwrap();
    let csv = generated(4_000, 6, false);
    let want = std::sync::Arc::new(expected(&csv));
    let path = dir.path().join("t.idx");
    build(csv.as_bytes(), &path, opts(dir.path(), 1 << 20, 32)).unwrap();
    let idx = std::sync::Arc::new(
        RdnsIndex::open_with(&path, silt_rdns::CacheOptions { results: 256 }).unwrap(),
    );
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let (idx, want) = (idx.clone(), want.clone());
            std::thread::spawn(move || {
                for (i, (ip, name)) in want.iter().enumerate() {
                    if i % 4 == t {
                        assert_eq!(idx.lookup(*ip).unwrap().as_deref(), Some(name.as_str()));
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}
