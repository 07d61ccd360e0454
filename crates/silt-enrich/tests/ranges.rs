//! Range maps: generated sets against brute force, overlaps, IPv6, the CSV formats, and the
//! corpus ASN JSON turned into GeoLite2 CSV checked against the .mmdb built from the same JSON.

mod common;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use silt_enrich::{Databases, RangeDbBuilder, RangeRecord, Source};

fn rec(asn: u32) -> RangeRecord {
    RangeRecord {
        asn: Some(asn),
        as_org: Some(Arc::from(format!("org{asn}"))),
        ..Default::default()
    }
}

fn v4(x: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(x))
}

/// The documented rule, by brute force: smallest containing range, ties to the later one.
fn brute(ranges: &[(u32, u32)], x: u32) -> Option<u32> {
    let mut best: Option<(u32, usize)> = None;
    for (i, &(s, e)) in ranges.iter().enumerate() {
        if s <= x && x <= e {
            let w = e - s;
            if best.is_none_or(|(bw, _)| w <= bw) {
                best = Some((w, i));
            }
        }
    }
    best.map(|(_, i)| i as u32)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn generated_ranges_match_brute_force(
        raw in prop::collection::vec((0u32..200, 0u32..60), 1..40),
        high in any::<bool>(),
    ) {
        // Optionally place the universe at the top of the address space (end = u32::MAX).
        let base = if high { u32::MAX - 260 } else { 0 };
        let ranges: Vec<(u32, u32)> = raw
            .iter()
            .map(|&(s, l)| (base + s, (base + s).saturating_add(l).min(base + 259)))
            .collect();
        let mut b = RangeDbBuilder::new();
        for (i, &(s, e)) in ranges.iter().enumerate() {
            b.add_range(v4(s), v4(e), rec(i as u32)).unwrap();
        }
        let db = b.build();
        let (n4, _) = db.range_counts();
        prop_assert!(n4 <= 2 * ranges.len() + 1);
        for x in base.saturating_sub(5)..=base.saturating_add(264).max(base) {
            let got = db.lookup(v4(x)).and_then(|r| r.asn);
            prop_assert_eq!(got, brute(&ranges, x), "at {}", x);
        }
        if high {
            let got = db.lookup(v4(u32::MAX)).and_then(|r| r.asn);
            prop_assert_eq!(got, brute(&ranges, u32::MAX));
        }
    }

    #[test]
    fn generated_ipv6_ranges_match_brute_force(
        raw in prop::collection::vec((0u32..200, 0u32..60), 1..30),
    ) {
        let base: u128 = u128::from("2001:db8::".parse::<Ipv6Addr>().unwrap());
        let mut b = RangeDbBuilder::new();
        for (i, &(s, l)) in raw.iter().enumerate() {
            let s6 = IpAddr::V6(Ipv6Addr::from(base + u128::from(s)));
            let e6 = IpAddr::V6(Ipv6Addr::from(base + u128::from(s + l)));
            b.add_range(s6, e6, rec(i as u32)).unwrap();
        }
        let db = b.build();
        let ranges: Vec<(u32, u32)> = raw.iter().map(|&(s, l)| (s, s + l)).collect();
        for x in 0u32..270 {
            let ip = IpAddr::V6(Ipv6Addr::from(base + u128::from(x)));
            prop_assert_eq!(db.lookup(ip).and_then(|r| r.asn), brute(&ranges, x), "at +{}", x);
            // The same offsets as IPv4 are not in an IPv6-only map.
            prop_assert_eq!(db.lookup(v4(x)), None);
        }
    }
}

#[test]
fn overlapping_and_adjacent() {
    let mut b = RangeDbBuilder::new();
    let p = |s: &str| s.parse::<IpAddr>().unwrap();
    b.add_range(p("10.0.0.0"), p("10.255.255.255"), rec(1))
        .unwrap();
    b.add_range(p("10.1.0.0"), p("10.1.255.255"), rec(2))
        .unwrap();
    b.add_range(p("10.2.0.0"), p("10.2.255.255"), rec(2))
        .unwrap(); // adjacent, same record
    b.add_range(p("10.1.2.3"), p("10.1.2.3"), rec(3)).unwrap();
    // Partial overlap: the narrower one wins where they overlap.
    b.add_range(p("20.0.0.0"), p("20.0.0.99"), rec(4)).unwrap();
    b.add_range(p("20.0.0.50"), p("20.0.0.109"), rec(5))
        .unwrap();
    // Equal size: the later one wins.
    b.add_range(p("30.0.0.0"), p("30.0.0.9"), rec(6)).unwrap();
    b.add_range(p("30.0.0.0"), p("30.0.0.9"), rec(7)).unwrap();
    b.add_range(p("::"), p("::ffff:ffff:ffff:ffff"), rec(8))
        .unwrap();
    b.add_range(p("2001:db8::"), p("2001:db8::ffff"), rec(9))
        .unwrap();
    let db = b.build();
    let asn = |s: &str| db.lookup(p(s)).and_then(|r| r.asn);
    assert_eq!(asn("9.255.255.255"), None);
    assert_eq!(asn("10.0.0.0"), Some(1));
    assert_eq!(asn("10.1.0.0"), Some(2));
    assert_eq!(asn("10.1.2.2"), Some(2));
    assert_eq!(asn("10.1.2.3"), Some(3));
    assert_eq!(asn("10.1.2.4"), Some(2));
    assert_eq!(asn("10.2.255.255"), Some(2));
    assert_eq!(asn("10.3.0.0"), Some(1));
    assert_eq!(asn("10.255.255.255"), Some(1));
    assert_eq!(asn("11.0.0.0"), None);
    assert_eq!(asn("20.0.0.49"), Some(4));
    assert_eq!(asn("20.0.0.50"), Some(5)); // 100 wide vs 60 wide: the narrower wins
    assert_eq!(asn("20.0.0.99"), Some(5));
    assert_eq!(asn("20.0.0.109"), Some(5));
    assert_eq!(asn("20.0.0.110"), None);
    assert_eq!(asn("30.0.0.5"), Some(7));
    assert_eq!(asn("::1"), Some(8));
    assert_eq!(asn("::ffff:10.1.2.3"), Some(3)); // IPv4-mapped folds to IPv4
    assert_eq!(asn("2001:db8::1"), Some(9));
    assert_eq!(asn("2001:db8::1:0"), None);
}

fn write(path: &Path, text: &str, gz: bool) {
    let f = std::fs::File::create(path).unwrap();
    if gz {
        let mut e = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap();
    } else {
        let mut f = f;
        f.write_all(text.as_bytes()).unwrap();
    }
}

#[test]
fn geolite2_asn_csv_with_gzip_and_bad_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let p4 = tmp.path().join("GeoLite2-ASN-Blocks-IPv4.csv.gz");
    write(
        &p4,
        "network,autonomous_system_number,autonomous_system_organization\n\
         1.0.0.0/24,13335,CLOUDFLARENET\n\
         1.0.4.0/22,38803,\"Wirefreebroadband, Pty\"\n\
         bogus,1,x\n\
         1.0.16.0/33,2,y\n\
         1.0.64.0/18,notanumber,z\n\
         1.0.128.0/17,,\n",
        true,
    );
    let p6 = tmp.path().join("GeoLite2-ASN-Blocks-IPv6.csv");
    write(
        &p6,
        "network,autonomous_system_number,autonomous_system_organization\n\
         2001:200::/32,2500,\"WIDE Project\"\n",
        false,
    );
    let mut b = RangeDbBuilder::new();
    let r = b.add_geolite2_asn(&p4).unwrap().clone();
    assert_eq!((r.lines, r.ranges, r.bad), (6, 3, 3));
    let lines: Vec<u64> = r.samples.iter().map(|s| s.line).collect();
    assert_eq!(lines, [4, 5, 6]);
    let shown = r.to_string();
    assert!(
        shown.contains("line 4: network \"bogus\" has no /prefix"),
        "{shown}"
    );
    assert!(shown.contains("line 5: prefix length 33 > 32"), "{shown}");
    b.add_geolite2_asn(&p6).unwrap();
    let mut dbs = Databases::new();
    dbs.add_source(Source::Ranges(b.build())).unwrap();
    assert_eq!(dbs.asn("1.0.0.7"), Some(13335));
    assert_eq!(dbs.as_org("1.0.7.255"), Some("Wirefreebroadband, Pty"));
    assert_eq!(dbs.asn("1.0.200.1"), None); // row without ASN or org
    assert_eq!(dbs.as_org("1.0.200.1"), None);
    assert_eq!(dbs.asn("2001:200::5"), Some(2500));
    assert_eq!(dbs.asn("1.0.1.0"), None);
}

#[test]
fn geolite2_country_and_city_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let blocks = tmp.path().join("GeoLite2-City-Blocks-IPv4.csv");
    write(
        &blocks,
        "network,geoname_id,registered_country_geoname_id,represented_country_geoname_id,is_anonymous_proxy,is_satellite_provider,postal_code,latitude,longitude,accuracy_radius\n\
         81.2.69.142/31,2643743,2635167,,0,0,,51.5142,-0.0931,10\n\
         81.2.69.0/24,2635167,2635167,,0,0,,,,100\n\
         1.2.3.0/24,,6252001,,0,0,,,,1000\n\
         9.9.9.0/24,999,,,0,0,,,,\n",
        false,
    );
    let loc = tmp.path().join("GeoLite2-City-Locations-en.csv");
    write(
        &loc,
        "geoname_id,locale_code,continent_code,continent_name,country_iso_code,country_name,subdivision_1_iso_code,subdivision_1_name,subdivision_2_iso_code,subdivision_2_name,city_name,metro_code,time_zone,is_in_european_union\n\
         2643743,en,EU,Europe,GB,\"United Kingdom\",ENG,England,,,London,,Europe/London,0\n\
         2635167,en,EU,Europe,GB,\"United Kingdom\",,,,,,,Europe/London,0\n\
         6252001,en,NA,\"North America\",US,\"United States\",,,,,,,,0\n",
        false,
    );
    let mut b = RangeDbBuilder::new();
    // Auto-detection finds the sibling locations file.
    let reps = b.add_csv_auto(&blocks).unwrap();
    assert_eq!(reps[1].bad, 1);
    assert!(
        reps[1]
            .to_string()
            .contains("line 5: geoname_id 999 not in"),
        "{}",
        reps[1]
    );
    let db = b.build();
    assert!(db.provides().city && db.provides().country && !db.provides().asn);
    let mut dbs = Databases::new();
    dbs.add_source(Source::Ranges(db)).unwrap();
    assert_eq!(dbs.country("81.2.69.142"), Some("GB"));
    assert_eq!(dbs.city("81.2.69.143"), Some("London"));
    assert_eq!(dbs.city("81.2.69.144"), None);
    assert_eq!(dbs.country("81.2.69.144"), Some("GB"));
    // No geoname_id: no country (the registered country is not used).
    assert_eq!(dbs.country("1.2.3.4"), None);
    assert_eq!(dbs.country("9.9.9.9"), None);
}

#[test]
fn int_range_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("ip2asn.csv.gz");
    write(
        &p,
        "ipIntStart,ipIntEnd,AS name\n\
         16777216,16777471,AS13335 Cloudflare, Inc.\n\
         16777472,16778239,Not routed\n\
         16778240,16779263,AS38803\n\
         x,1,AS1 bad\n\
         20,10,AS2 reversed\n\
         5000000000,5000000001,AS3 too big\n\
         16779264,16781311\n",
        true,
    );
    let mut b = RangeDbBuilder::new();
    let r = b.add_int_ranges(&p).unwrap().clone();
    assert_eq!((r.lines, r.ranges, r.bad), (7, 3, 4));
    assert_eq!(
        r.samples.iter().map(|s| s.line).collect::<Vec<_>>(),
        [5, 6, 7, 8]
    );
    let mut dbs = Databases::new();
    dbs.add_source(Source::Ranges(b.build())).unwrap();
    assert_eq!(dbs.asn("1.0.0.1"), Some(13335));
    assert_eq!(dbs.as_org("1.0.0.255"), Some("Cloudflare, Inc."));
    assert_eq!(dbs.asn("1.0.1.0"), None);
    assert_eq!(dbs.as_org("1.0.1.0"), Some("Not routed"));
    assert_eq!(dbs.asn("1.0.4.0"), Some(38803));
    assert_eq!(dbs.as_org("1.0.4.0"), None);
    assert_eq!(dbs.asn("::ffff:1.0.0.1"), Some(13335));
    assert_eq!(dbs.asn("1.0.8.0"), None);
}

#[test]
fn a_file_without_usable_lines_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("x.csv");
    write(
        &p,
        "network,autonomous_system_number,autonomous_system_organization\nfoo,1,a\n",
        false,
    );
    let err = RangeDbBuilder::new().add_geolite2_asn(&p).unwrap_err();
    assert!(format!("{err:#}").contains("no usable ranges"), "{err:#}");
    let p = tmp.path().join("y.csv");
    write(&p, "a,b,c\n", false);
    let err = RangeDbBuilder::new().add_geolite2_asn(&p).unwrap_err();
    assert!(
        format!("{err:#}").contains("header has no column \"network\""),
        "{err:#}"
    );
}

/// The corpus ASN JSON written as GeoLite2 CSV: the range map must answer like the .mmdb for
/// the first and last address of every network.
#[test]
fn corpus_asn_json_as_csv_matches_the_mmdb() {
    let Some(dir) = common::corpus() else { return };
    let text =
        std::fs::read_to_string(dir.join("mmdb/source-data/GeoLite2-ASN-Test.json")).unwrap();
    let v: Vec<serde_json::Map<String, serde_json::Value>> = serde_json::from_str(&text).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut csv4 =
        String::from("network,autonomous_system_number,autonomous_system_organization\n");
    let mut csv6 = csv4.clone();
    let mut nets = Vec::new();
    for m in &v {
        for (net, rec) in m {
            let asn = rec.get("autonomous_system_number").and_then(|x| x.as_u64());
            let org = rec
                .get("autonomous_system_organization")
                .and_then(|x| x.as_str());
            let line = format!(
                "{net},{},\"{}\"\n",
                asn.map(|a| a.to_string()).unwrap_or_default(),
                org.unwrap_or("").replace('"', "\"\"")
            );
            if net.contains(':') {
                csv6.push_str(&line)
            } else {
                csv4.push_str(&line)
            }
            nets.push(net.clone());
        }
    }
    let p4 = tmp.path().join("GeoLite2-ASN-Blocks-IPv4.csv");
    let p6 = tmp.path().join("GeoLite2-ASN-Blocks-IPv6.csv.gz");
    write(&p4, &csv4, false);
    write(&p6, &csv6, true);
    let mut b = RangeDbBuilder::new();
    assert_eq!(b.add_csv_auto(&p4).unwrap()[0].bad, 0);
    assert_eq!(b.add_csv_auto(&p6).unwrap()[0].bad, 0);
    let mut csv = Databases::new();
    csv.add_source(Source::Ranges(b.build())).unwrap();
    let mut mm = Databases::new();
    mm.add_mmdb(&dir.join("mmdb/GeoLite2-ASN-Test.mmdb"))
        .unwrap();
    let mut n = 0;
    for net in &nets {
        let (s, e) = silt_enrich::ranges::parse_network(net).unwrap();
        for ip in [s, e] {
            let t = ip.to_string();
            assert_eq!(csv.asn(&t), mm.asn(&t), "{t} in {net}");
            assert_eq!(csv.as_org(&t), mm.as_org(&t), "{t} in {net}");
            n += 1;
        }
    }
    assert_eq!(n, 2 * nets.len());
}

#[test]
fn add_file_tells_mmdb_from_csv() {
    let Some(dir) = common::corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("asn.csv");
    write(
        &p,
        "ipIntStart,ipIntEnd,AS name\n16777216,16777471,AS13335 Cloudflare\nbad\n",
        false,
    );
    let mut d = Databases::new();
    let lines = d.add_file(&p).unwrap();
    assert!(
        lines[0].contains("1 bad lines (line 3: 1 fields, expected 3)"),
        "{lines:?}"
    );
    // A MaxMind DB under a misleading name is still recognised.
    let m = tmp.path().join("city.dat");
    std::fs::copy(dir.join("mmdb/GeoLite2-City-Test.mmdb"), &m).unwrap();
    let lines = d.add_file(&m).unwrap();
    assert!(lines[0].contains("GeoLite2-City"), "{lines:?}");
    assert_eq!(d.asn("1.0.0.1"), Some(13335));
    assert_eq!(d.city("81.2.69.142"), Some("London"));
    // A second ASN source is refused.
    let err = d
        .add_file(&dir.join("mmdb/GeoLite2-ASN-Test.mmdb"))
        .unwrap_err();
    assert!(err.to_string().contains("two ASN databases"), "{err}");
}
