//! The MaxMind test databases of the corpus against their JSON sources.

mod common;

use std::net::IpAddr;
use std::path::Path;

use silt_enrich::ranges::parse_network;
use silt_enrich::{Databases, MmdbDb, MmdbKind};

/// (start, end, prefix length, record) of every JSON entry.
fn entries(path: &Path) -> Vec<(u128, u128, u32, bool, serde_json::Value)> {
    let text = std::fs::read_to_string(path).unwrap();
    let v: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for m in v {
        for (net, rec) in m {
            let (s, e) = parse_network(&net).unwrap();
            let len: u32 = net.split('/').nth(1).unwrap().parse().unwrap();
            let (s, e, v4) = match (s, e) {
                (IpAddr::V4(a), IpAddr::V4(b)) => (
                    u128::from(a.to_ipv6_mapped()),
                    u128::from(b.to_ipv6_mapped()),
                    true,
                ),
                (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), false),
                _ => unreachable!(),
            };
            out.push((s, e, len, v4, rec));
        }
    }
    out
}

/// The most specific entry containing `x` (the mmdb tree answers with that one).
fn expected(
    entries: &[(u128, u128, u32, bool, serde_json::Value)],
    x: u128,
    v4: bool,
) -> Option<&serde_json::Value> {
    entries
        .iter()
        .filter(|e| e.3 == v4 && e.0 <= x && x <= e.1)
        .max_by_key(|e| e.2)
        .map(|e| &e.4)
}

fn to_ip(x: u128, v4: bool) -> IpAddr {
    let v6 = std::net::Ipv6Addr::from(x);
    if v4 {
        IpAddr::V4(v6.to_ipv4_mapped().unwrap())
    } else {
        IpAddr::V6(v6)
    }
}

fn s(v: Option<&serde_json::Value>, k: &str) -> Option<String> {
    v.and_then(|r| r.get(k))
        .and_then(|x| x.as_str())
        .map(str::to_string)
}

fn n(v: Option<&serde_json::Value>, k: &str) -> Option<u32> {
    v.and_then(|r| r.get(k))
        .and_then(|x| x.as_u64())
        .map(|x| x as u32)
}

fn check_all(db_name: &str, json: &str, kind: MmdbKind) {
    let Some(dir) = common::corpus() else { return };
    let db = MmdbDb::open(&dir.join("mmdb").join(db_name)).unwrap();
    assert_eq!(db.kind(), kind);
    let mut dbs = Databases::new();
    dbs.add_mmdb(&dir.join("mmdb").join(db_name)).unwrap();
    let es = entries(&dir.join("mmdb/source-data").join(json));
    assert!(es.len() > 100, "{} entries", es.len());
    let mut checked = 0;
    for e in &es {
        for x in [e.0, e.1] {
            let ip = to_ip(x, e.3);
            let want = expected(&es, x, e.3);
            assert!(want.is_some());
            let got = db.info(ip).unwrap();
            let got = got.unwrap_or_else(|| panic!("{ip} ({db_name}) not found"));
            assert_eq!(got.asn, n(want, "autonomous_system_number"), "asn of {ip}");
            assert_eq!(
                got.as_org.map(str::to_string),
                s(want, "autonomous_system_organization"),
                "as_org of {ip}"
            );
            if kind == MmdbKind::Isp {
                assert_eq!(got.isp.map(str::to_string), s(want, "isp"), "isp of {ip}");
                assert_eq!(
                    got.organization.map(str::to_string),
                    s(want, "organization"),
                    "organization of {ip}"
                );
                assert_eq!(dbs.isp(&ip.to_string()).map(str::to_string), s(want, "isp"));
            }
            // The UDF functions and the IPv4-mapped spelling give the same answer.
            let text = ip.to_string();
            assert_eq!(dbs.asn(&text), got.asn, "{text}");
            assert_eq!(dbs.as_org(&text), got.as_org, "{text}");
            if let IpAddr::V4(v4) = ip {
                let mapped = v4.to_ipv6_mapped().to_string();
                assert!(mapped.starts_with("::ffff:"));
                assert_eq!(dbs.asn(&mapped), got.asn, "{mapped}");
                assert_eq!(dbs.as_org(&mapped), got.as_org, "{mapped}");
            }
            checked += 1;
        }
        // IPv4-compatible JSON networks (`::1.2.3.0/120`, the ISP source's spelling of IPv4)
        // are the IPv4 subtree: the IPv4 address answers the same.
        if !e.3 && e.0 >> 32 == 0 && e.2 >= 96 {
            for x in [e.0, e.1] {
                let v4 = IpAddr::V4(std::net::Ipv4Addr::from(x as u32));
                let want = expected(&es, x, false);
                let got = db
                    .info(v4)
                    .unwrap()
                    .expect("IPv4 of an IPv4-compatible network");
                assert_eq!(got.asn, n(want, "autonomous_system_number"), "asn of {v4}");
                assert_eq!(got.isp.map(str::to_string), s(want, "isp"), "isp of {v4}");
                checked += 1;
            }
        }
    }
    eprintln!(
        "{db_name}: {checked} addresses checked against {} JSON entries",
        es.len()
    );
}

#[test]
fn asn_db_matches_json_for_every_entry() {
    check_all(
        "GeoLite2-ASN-Test.mmdb",
        "GeoLite2-ASN-Test.json",
        MmdbKind::Asn,
    );
}

#[test]
fn isp_db_matches_json_for_every_entry() {
    check_all(
        "GeoIP2-ISP-Test.mmdb",
        "GeoIP2-ISP-Test.json",
        MmdbKind::Isp,
    );
}

#[test]
fn not_found_is_none() {
    let Some(dir) = common::corpus() else { return };
    let mut dbs = Databases::new();
    dbs.add_mmdb(&dir.join("mmdb/GeoLite2-ASN-Test.mmdb"))
        .unwrap();
    dbs.add_mmdb(&dir.join("mmdb/GeoLite2-City-Test.mmdb"))
        .unwrap();
    for ip in ["10.0.0.1", "127.0.0.1", "::1", "192.0.2.1", "2001:db8::1"] {
        assert_eq!(dbs.asn(ip), None, "{ip}");
        assert_eq!(dbs.country(ip), None, "{ip}");
        assert_eq!(dbs.city(ip), None, "{ip}");
    }
    assert_eq!(dbs.asn("not an ip"), None);
    assert_eq!(dbs.asn(""), None);
}

#[test]
fn city_and_country_spot_checks() {
    let Some(dir) = common::corpus() else { return };
    let mut city = Databases::new();
    assert_eq!(
        city.add_mmdb(&dir.join("mmdb/GeoLite2-City-Test.mmdb"))
            .unwrap(),
        MmdbKind::City
    );
    let mut country = Databases::new();
    assert_eq!(
        country
            .add_mmdb(&dir.join("mmdb/GeoLite2-Country-Test.mmdb"))
            .unwrap(),
        MmdbKind::Country
    );
    // From MaxMind's documentation and the test data (checked by decoding the files whole
    // with maxminddb::geoip2::City in `city_spot_checks_against_full_decode`).
    let cases = [
        ("81.2.69.142", "GB", Some("London")),
        ("::ffff:81.2.69.142", "GB", Some("London")),
        ("2.125.160.216", "GB", Some("Boxford")),
        ("89.160.20.112", "SE", Some("Linköping")),
        ("216.160.83.56", "US", Some("Milton")),
        ("2001:218::1", "JP", None),
        ("67.43.156.1", "BT", None),
    ];
    for (ip, cc, name) in cases {
        assert_eq!(city.country(ip), Some(cc), "city db country of {ip}");
        assert_eq!(city.city(ip), name, "city of {ip}");
        assert_eq!(country.country(ip), Some(cc), "country db country of {ip}");
        assert_eq!(country.city(ip), None);
    }
}

/// The spot checks above, cross-checked by decoding the full records with the crate's own
/// `geoip2::City` type.
#[test]
fn city_spot_checks_against_full_decode() {
    let Some(dir) = common::corpus() else { return };
    let r = maxminddb::Reader::open_readfile(dir.join("mmdb/GeoLite2-City-Test.mmdb")).unwrap();
    let mut dbs = Databases::new();
    dbs.add_mmdb(&dir.join("mmdb/GeoLite2-City-Test.mmdb"))
        .unwrap();
    let mut n = 0;
    for item in r.networks(Default::default()).unwrap() {
        let item = item.unwrap();
        let net = item.network().unwrap();
        let Some(rec) = item.decode::<maxminddb::geoip2::City>().unwrap() else {
            continue;
        };
        let ip = net.ip();
        let text = ip.to_string();
        assert_eq!(dbs.country(&text), rec.country.iso_code, "{net}");
        assert_eq!(dbs.city(&text), rec.city.names.english, "{net}");
        n += 1;
    }
    assert!(n > 50, "{n} networks");
}

#[test]
fn ipv4_mapped_resolves_like_ipv4() {
    let Some(dir) = common::corpus() else { return };
    let path = dir.join("mmdb/GeoLite2-ASN-Test.mmdb");
    // What maxminddb itself does with the mapped spelling: MaxMind's IPv6 databases alias
    // ::ffff:0:0/96 to the IPv4 subtree, so the raw reader finds it here too, but that depends
    // on the database being written with aliases; silt folds the address to IPv4 first.
    let r = maxminddb::Reader::open_readfile(&path).unwrap();
    let raw_mapped = r
        .lookup("::ffff:1.128.0.1".parse().unwrap())
        .unwrap()
        .decode::<maxminddb::geoip2::Asn>()
        .unwrap()
        .and_then(|a| a.autonomous_system_number);
    eprintln!("maxminddb raw lookup of ::ffff:1.128.0.1 in the ASN test db: {raw_mapped:?}");
    let mut dbs = Databases::new();
    dbs.add_mmdb(&path).unwrap();
    assert_eq!(dbs.asn("1.128.0.1"), Some(1221));
    assert_eq!(dbs.asn("::ffff:1.128.0.1"), Some(1221));
    assert_eq!(dbs.as_org("::ffff:1.128.0.1"), Some("Telstra Pty Ltd"));
    // An IPv4-only database answers mapped addresses too and IPv6 as not found.
    let mut v4only = Databases::new();
    let p = dir.join("mmdb/MaxMind-DB-test-ipv4-32.mmdb");
    let err = v4only.add_mmdb(&p).unwrap_err();
    assert!(format!("{err:#}").contains("database_type"), "{err:#}");
}

#[test]
fn every_bad_file_fails_at_open() {
    let Some(dir) = common::corpus() else { return };
    let mut n = 0;
    for e in std::fs::read_dir(dir.join("mmdb/bad")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) != Some("mmdb") {
            continue;
        }
        let err = MmdbDb::open(&p).expect_err(&p.display().to_string());
        let msg = format!("{err:#}");
        eprintln!("{msg}");
        assert!(msg.contains(&p.display().to_string()), "{msg}");
        // Refused for being corrupt, not merely for an unknown database_type.
        assert!(!msg.contains("database_type"), "{msg}");
        n += 1;
    }
    assert_eq!(n, 4);
}

#[test]
fn truncated_text_empty_and_missing_files_fail_at_open() {
    let Some(dir) = common::corpus() else { return };
    let good = std::fs::read(dir.join("mmdb/GeoLite2-City-Test.mmdb")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = Vec::new();
    for cut in [good.len() / 2, good.len() - 10, 100, 1] {
        let p = tmp.path().join(format!("truncated-{cut}.mmdb"));
        std::fs::write(&p, &good[..cut]).unwrap();
        cases.push(p);
    }
    // Cut inside the data section but keep the metadata: only verify() sees it.
    let meta = good
        .windows(14)
        .rposition(|w| w == b"\xab\xcd\xefMaxMind.com")
        .unwrap();
    let mut holed = good.clone();
    for b in &mut holed[meta - 2000..meta] {
        *b = 0xff;
    }
    let p = tmp.path().join("scribbled.mmdb");
    std::fs::write(&p, &holed).unwrap();
    cases.push(p);
    let p = tmp.path().join("text.mmdb");
    std::fs::write(&p, "network,autonomous_system_number\n1.0.0.0/24,15169\n").unwrap();
    cases.push(p);
    let p = tmp.path().join("empty.mmdb");
    std::fs::write(&p, "").unwrap();
    cases.push(p);
    cases.push(tmp.path().join("missing.mmdb"));
    for p in cases {
        let err = MmdbDb::open(&p).expect_err(&p.display().to_string());
        let msg = format!("{err:#}");
        eprintln!("{msg}");
        assert!(msg.contains(&p.display().to_string()), "{msg}");
    }
}

#[test]
fn unsupported_database_types_are_refused() {
    let Some(dir) = common::corpus() else { return };
    for f in [
        "MaxMind-DB-test-decoder.mmdb",
        "MaxMind-DB-test-mixed-24.mmdb",
    ] {
        let err = MmdbDb::open(&dir.join("mmdb").join(f)).unwrap_err();
        assert!(format!("{err:#}").contains("database_type"), "{err:#}");
    }
}
