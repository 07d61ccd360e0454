//! Every capture of the corpus (`flows/akvorado/{sflow,netflow}`) is decoded by the collector
//! and compared with tshark's dissection of the same frames (`tshark -2 -T fields`), computed
//! at test time. Template/data captures are fed as collectors see them (templates first) and
//! merged with `mergecap -a` in the same order for tshark, so frame numbers agree.
//! Values are compared as multisets per field (held data sets are decoded later than tshark
//! shows them); datagram-level fields (agent, sequence, domain, version) per frame.
//! Skips (prints SKIP) without corpus or tshark, except with CI=true, where it fails.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use silt_core::CollectEmit;
use silt_flowexport::Protocol;

/// Normalizes tshark's display text: hex to decimal, addresses to canonical text.
fn norm(s: &str) -> String {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x") {
        if let Ok(v) = u64::from_str_radix(h, 16) {
            return v.to_string();
        }
    }
    if let Ok(a) = s.parse::<IpAddr>() {
        return a.to_string();
    }
    s.to_string()
}

/// Per frame, per field: tshark's values (all occurrences).
fn tshark(path: &Path, ports: &BTreeSet<u16>, fields: &[&str]) -> Vec<Vec<Vec<String>>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-2").arg("-r").arg(path);
    for p in ports {
        if *p != 6343 {
            cmd.arg("-d").arg(format!("udp.port=={p},cflow"));
        }
    }
    cmd.args(["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=|"]);
    for f in fields {
        cmd.arg("-e").arg(f);
    }
    let o = cmd.output().expect("run tshark");
    assert!(
        o.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            l.split('\t')
                .map(|v| v.split('|').filter(|x| !x.is_empty()).map(norm).collect())
                .collect()
        })
        .collect()
}

fn merged(files: &[PathBuf], tmp: &Path) -> PathBuf {
    let out = tmp.join("merged.pcap");
    let st = Command::new("mergecap")
        .arg("-a")
        .arg("-F")
        .arg("pcap")
        .arg("-w")
        .arg(&out)
        .args(files)
        .status()
        .expect("mergecap");
    assert!(st.success());
    out
}

fn multiset(v: impl IntoIterator<Item = String>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for x in v {
        *m.entry(x).or_default() += 1;
    }
    m
}

struct Cmp<'a> {
    name: String,
    frames: &'a [Vec<Vec<String>>],
    fields: &'a [&'a str],
    out: &'a CollectEmit,
    table: &'a str,
    checked: usize,
}

impl Cmp<'_> {
    fn idx(&self, f: &str) -> usize {
        self.fields
            .iter()
            .position(|x| *x == f)
            .unwrap_or_else(|| panic!("field {f} not requested"))
    }

    /// tshark values of fields, dropping the first `skip` occurrences per frame (the outer
    /// packet's IP header and UDP ports).
    fn theirs(&self, fs: &[&str], skip: usize) -> Vec<String> {
        let mut v = Vec::new();
        for fr in self.frames {
            for f in fs {
                let vals = &fr[self.idx(f)];
                v.extend(vals.iter().skip(skip).cloned());
            }
        }
        v
    }

    fn mine(&self, cols: &[&str], keep: &dyn Fn(usize) -> bool) -> Vec<String> {
        let mut v = Vec::new();
        for c in cols {
            for (i, x) in common::col(self.out, self.table, c).into_iter().enumerate() {
                if keep(i) {
                    v.extend(x);
                }
            }
        }
        v
    }

    /// Every value tshark shows is among silt's (multiset inclusion).
    fn within(&mut self, theirs: Vec<String>, mine: Vec<String>, what: &str) {
        let (t, m) = (multiset(theirs), multiset(mine));
        for (v, n) in &t {
            assert!(
                m.get(v).copied().unwrap_or(0) >= *n,
                "{}: {what}: tshark shows {v} x{n}, silt {m:?}",
                self.name
            );
        }
        self.checked += t.values().sum::<usize>();
    }

    fn eq(&mut self, theirs: Vec<String>, mine: Vec<String>, what: &str) {
        let (t, m) = (multiset(theirs), multiset(mine));
        assert_eq!(m, t, "{}: {what}: silt (left) vs tshark (right)", self.name);
        self.checked += t.values().sum::<usize>();
    }
}

fn groups(dir: &Path) -> Vec<(Protocol, Vec<PathBuf>)> {
    let mut g = Vec::new();
    let mut sflow: Vec<_> = std::fs::read_dir(dir.join("sflow"))
        .expect("sflow dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    sflow.sort();
    g.extend(sflow.into_iter().map(|p| (Protocol::Sflow, vec![p])));
    // NetFlow: files sharing a base name are one stream, fed in collector order.
    let order = ["-options-template", "-options-data", "-template", "-data"];
    let mut by_base: BTreeMap<String, Vec<(usize, PathBuf)>> = BTreeMap::new();
    for e in std::fs::read_dir(dir.join("netflow")).expect("netflow dir") {
        let p = e.expect("entry").path();
        if p.extension().is_none_or(|e| e != "pcap") {
            continue;
        }
        let stem = p
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        let (base, rank) = match stem.as_str() {
            // options-*, template and data are one stream from one exporter (Akvorado's
            // TestDecode feeds them in this order).
            "options-template" => (String::new(), 0),
            "options-data" => (String::new(), 1),
            "template" => (String::new(), 2),
            "data" => (String::new(), 3),
            s => order
                .iter()
                .enumerate()
                .find_map(|(i, suf)| s.strip_suffix(suf).map(|b| (b.to_string(), i)))
                .unwrap_or((s.to_string(), 9)),
        };
        by_base.entry(base).or_default().push((rank, p));
    }
    for (_, mut v) in by_base {
        // options templates, options data, templates, data (Akvorado's order).
        v.sort_by_key(|(r, _)| match r {
            0 => 0,
            1 => 1,
            2 => 2,
            _ => 3,
        });
        g.push((Protocol::Netflow, v.into_iter().map(|(_, p)| p).collect()));
    }
    g
}

const SFLOW_FIELDS: &[&str] = &[
    "frame.number",
    "sflow_245.agent",
    "sflow_245.agent.v6",
    "sflow_245.sub_agent_id",
    "sflow_245.sequence_number",
    "sflow.flow_sample.sequence_number",
    "sflow.flow_sample.sampling_rate",
    "sflow.flow_sample.sample_pool",
    "sflow.flow_sample.dropped_packets",
    "sflow.flow_sample.input_interface",
    "sflow.flow_sample.input_interface_value",
    "sflow.flow_sample.output_interface_value",
    "sflow.flow_sample.source_id_index",
    "sflow_245.header_protocol",
    "sflow_245.header.frame_length",
    "sflow_245.header.sampled_header_length",
    "sflow_245.vlan.in",
    "sflow_245.vlan.out",
    "sflow_245.pri.in",
    "sflow_245.pri.out",
    "sflow_245.nexthop",
    "sflow_245.nexthop.v6",
    "sflow_245.nexthop.src_mask",
    "sflow_245.nexthop.dst_mask",
    "sflow_245.as",
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "tcp.srcport",
    "tcp.dstport",
    "udp.srcport",
    "udp.dstport",
    "icmp.type",
    "icmpv6.type",
    "sflow_245.ifindex",
    "sflow_245.ifinoct",
    "sflow_245.ifoutoct",
    "sflow_245.ifinpkt",
];

fn check_sflow(c: &mut Cmp<'_>) {
    let all = |_: usize| true;
    // Datagram-level: per frame, each row carries the frame's agent and sequence.
    let frames = common::col(c.out, c.table, "frame");
    let agents = common::col(c.out, c.table, "agent");
    let seqs = common::col(c.out, c.table, "datagram_seq");
    let subs = common::col(c.out, c.table, "sub_agent");
    let by_frame: BTreeMap<String, &Vec<Vec<String>>> =
        c.frames.iter().map(|f| (f[0][0].clone(), f)).collect();
    for i in 0..frames.len() {
        let fr = by_frame[frames[i].as_deref().expect("frame")];
        let agent: Vec<_> = fr[c.idx("sflow_245.agent")]
            .iter()
            .chain(&fr[c.idx("sflow_245.agent.v6")])
            .cloned()
            .collect();
        assert_eq!(agents[i].as_ref(), agent.first(), "{}: agent", c.name);
        assert_eq!(
            seqs[i].as_ref(),
            fr[c.idx("sflow_245.sequence_number")].first(),
            "{}: datagram sequence",
            c.name
        );
        assert_eq!(
            subs[i].as_ref(),
            fr[c.idx("sflow_245.sub_agent_id")].first(),
            "{}: sub-agent",
            c.name
        );
        c.checked += 3;
    }
    let pairs: &[(&[&str], &[&str])] = &[
        (&["sflow.flow_sample.sequence_number"], &["sample_seq"]),
        (&["sflow.flow_sample.sampling_rate"], &["sampling_rate"]),
        (&["sflow.flow_sample.sample_pool"], &["sample_pool"]),
        (&["sflow.flow_sample.dropped_packets"], &["drops"]),
        (
            &[
                "sflow.flow_sample.input_interface",
                "sflow.flow_sample.input_interface_value",
            ],
            &["input"],
        ),
        (&["sflow.flow_sample.output_interface_value"], &["output"]),
        (&["sflow_245.header_protocol"], &["header_protocol"]),
        (&["sflow_245.header.frame_length"], &["frame_length"]),
        (
            &["sflow_245.header.sampled_header_length"],
            &["header_length"],
        ),
        (&["sflow_245.vlan.in"], &["src_vlan"]),
        (&["sflow_245.vlan.out"], &["dst_vlan"]),
        (&["sflow_245.pri.in"], &["src_priority"]),
        (&["sflow_245.pri.out"], &["dst_priority"]),
        (
            &["sflow_245.nexthop", "sflow_245.nexthop.v6"],
            &["next_hop", "bgp_next_hop"],
        ),
        (&["sflow_245.nexthop.src_mask"], &["src_mask"]),
        (&["sflow_245.nexthop.dst_mask"], &["dst_mask"]),
        (&["sflow_245.as"], &["router_as"]),
        (&["ipv6.src"], &["src"]),
        (&["icmp.type", "icmpv6.type"], &["icmp_type"]),
        (&["tcp.srcport"], &["sport"]),
    ];
    for (t, m) in pairs {
        let mut theirs = c.theirs(t, 0);
        if t[0].starts_with("sflow_245.vlan") || t[0].starts_with("sflow_245.pri") {
            // 0xffffffff = unknown in the extended switch record: null in silt.
            theirs.retain(|v| v != "4294967295");
        }
        let mut mine = c.mine(m, &all);
        if t[0] == "ipv6.src" {
            // Inner addresses: IPv6 from ipv6.src, IPv4 from ip.src after the outer header.
            let mut theirs = theirs;
            theirs.extend(c.theirs(&["ip.src"], 1));
            c.eq(theirs, mine, "src");
            let mut theirs = c.theirs(&["ipv6.dst"], 0);
            theirs.extend(c.theirs(&["ip.dst"], 1));
            let mine = c.mine(&["dst"], &all);
            c.eq(theirs, mine, "dst");
            continue;
        }
        if t[0] == "tcp.srcport" {
            let mut theirs = theirs;
            theirs.extend(c.theirs(&["udp.srcport"], 1));
            // ICMP rows have no ports.
            c.eq(theirs, std::mem::take(&mut mine), "sport");
            let mut theirs = c.theirs(&["tcp.dstport"], 0);
            theirs.extend(c.theirs(&["udp.dstport"], 1));
            let mine = c.mine(&["dport"], &all);
            c.eq(theirs, mine, "dport");
            continue;
        }
        c.eq(theirs, mine, &format!("{t:?} vs {m:?}"));
    }
}

const CFLOW_FIELDS: &[&str] = &[
    "frame.number",
    "cflow.version",
    "cflow.sequence",
    "cflow.source_id",
    "cflow.od_id",
    "cflow.srcaddr",
    "cflow.srcaddrv6",
    "cflow.dstaddr",
    "cflow.dstaddrv6",
    "cflow.srcport",
    "cflow.dstport",
    "cflow.protocol",
    "cflow.octets",
    "cflow.packets",
    "cflow.inputint",
    "cflow.outputint",
    "cflow.ingress_physical_interface",
    "cflow.egress_physical_interface",
    "cflow.srcas",
    "cflow.dstas",
    "cflow.nexthop",
    "cflow.nexthopv6",
    "cflow.bgpnexthop",
    "cflow.bgpnexthopv6",
    "cflow.srcmask",
    "cflow.srcmaskv6",
    "cflow.dstmask",
    "cflow.dstmaskv6",
    "cflow.tcpflags",
    "cflow.direction",
    "cflow.vlanid",
    "cflow.post_vlanid",
    "cflow.dot1q_vlan_id",
    "cflow.post_dot1q_vlan_id",
    "cflow.post_natsource_ipv4_address",
    "cflow.post_natdestination_ipv4_address",
    "cflow.post_naptsource_transport_port",
    "cflow.post_naptdestination_transport_port",
    "cflow.sampling_interval",
    "cflow.sampler_random_interval",
    "cflow.sampling_packet_interval",
    "cflow.sampling_packet_space",
    "cflow.samplerate",
    "ip.src",
    "ip.dst",
    "ip.proto",
    "tcp.srcport",
    "tcp.dstport",
    "udp.srcport",
    "udp.dstport",
    "cflow.unix_secs",
    "cflow.unix_nsecs",
    "cflow.sysuptime",
    "cflow.timestart",
    "cflow.timeend",
    "cflow.abstimestart",
    "cflow.abstimeend",
];

/// `1098324.270000000` (seconds) -> µs.
fn rel_us(s: &str) -> Option<i64> {
    let (a, b) = s.split_once('.').unwrap_or((s, "0"));
    let frac: String = b.chars().chain(std::iter::repeat('0')).take(6).collect();
    Some(a.parse::<i64>().ok()? * 1_000_000 + frac.parse::<i64>().ok()?)
}

/// `Nov 13, 2023 16:35:30.381000000 UTC` -> µs since the epoch.
fn abs_us(s: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let mut it = s.split_whitespace();
    let mon = it.next()?;
    let m = MONTHS.iter().position(|x| *x == mon)? as i64 + 1;
    let d: i64 = it.next()?.trim_end_matches(',').parse().ok()?;
    let y: i64 = it.next()?.parse().ok()?;
    let (hms, frac) = it.next()?.split_once('.')?;
    let mut p = hms.split(':').map(|x| x.parse::<i64>());
    let (h, mi, sec) = (p.next()?.ok()?, p.next()?.ok()?, p.next()?.ok()?);
    // Days from civil (Howard Hinnant).
    let y2 = if m <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let us: i64 = frac
        .chars()
        .chain(std::iter::repeat('0'))
        .take(6)
        .collect::<String>()
        .parse()
        .ok()?;
    Some(((days * 24 + h) * 60 + mi) * 60_000_000 + sec * 1_000_000 + us)
}

fn check_netflow(c: &mut Cmp<'_>) {
    // Rows whose addresses came from a sampled data-link frame (IPFIX 315) are not in tshark's
    // cflow fields; they are compared by the hard-coded tests instead.
    let extra = common::col(c.out, c.table, "extra");
    let datalink: Vec<bool> = extra
        .iter()
        .map(|e| e.as_deref().is_some_and(|s| s.contains("field: 315,")))
        .collect();
    let plain = |i: usize| !datalink[i];
    let all = |_: usize| true;
    // Datagram-level fields per frame.
    let by_frame: BTreeMap<String, &Vec<Vec<String>>> =
        c.frames.iter().map(|f| (f[0][0].clone(), f)).collect();
    let frames = common::col(c.out, c.table, "frame");
    let seq = common::col(c.out, c.table, "sequence");
    let ver = common::col(c.out, c.table, "version");
    let dom = common::col(c.out, c.table, "domain");
    for i in 0..frames.len() {
        let fr = by_frame[frames[i].as_deref().expect("frame")];
        assert_eq!(
            ver[i].as_ref(),
            fr[c.idx("cflow.version")].first(),
            "{}: version",
            c.name
        );
        assert_eq!(
            seq[i].as_ref(),
            fr[c.idx("cflow.sequence")].first(),
            "{}: sequence",
            c.name
        );
        let d = fr[c.idx("cflow.source_id")]
            .first()
            .or(fr[c.idx("cflow.od_id")].first());
        if ver[i].as_deref() != Some("5") {
            assert_eq!(dom[i].as_ref(), d, "{}: domain", c.name);
        }
        c.checked += 3;
    }
    let pairs: &[(&[&str], &str, bool)] = &[
        (&["cflow.srcaddr", "cflow.srcaddrv6"], "src", true),
        (&["cflow.dstaddr", "cflow.dstaddrv6"], "dst", true),
        (&["cflow.srcport"], "sport", true),
        (&["cflow.dstport"], "dport", true),
        (&["cflow.protocol"], "proto", true),
        (&["cflow.octets"], "bytes", false),
        (&["cflow.packets"], "packets", false),
        (
            &["cflow.inputint", "cflow.ingress_physical_interface"],
            "input",
            false,
        ),
        (
            &["cflow.outputint", "cflow.egress_physical_interface"],
            "output",
            false,
        ),
        (&["cflow.srcas"], "src_as", false),
        (&["cflow.dstas"], "dst_as", false),
        (&["cflow.nexthop", "cflow.nexthopv6"], "next_hop", false),
        (
            &["cflow.bgpnexthop", "cflow.bgpnexthopv6"],
            "bgp_next_hop",
            false,
        ),
        (&["cflow.srcmask", "cflow.srcmaskv6"], "src_mask", false),
        (&["cflow.dstmask", "cflow.dstmaskv6"], "dst_mask", false),
        (&["cflow.tcpflags"], "tcp_flags", true),
        (&["cflow.direction"], "direction", false),
        (&["cflow.vlanid", "cflow.dot1q_vlan_id"], "src_vlan", true),
        (
            &["cflow.post_vlanid", "cflow.post_dot1q_vlan_id"],
            "dst_vlan",
            false,
        ),
        (
            &["cflow.post_natsource_ipv4_address"],
            "post_nat_src",
            false,
        ),
        (
            &["cflow.post_natdestination_ipv4_address"],
            "post_nat_dst",
            false,
        ),
        (
            &["cflow.post_naptsource_transport_port"],
            "post_nat_sport",
            false,
        ),
        (
            &["cflow.post_naptdestination_transport_port"],
            "post_nat_dport",
            false,
        ),
    ];
    for (t, m, only_plain) in pairs {
        let mut theirs = c.theirs(t, 0);
        let mut mine = if *only_plain {
            c.mine(&[m], &plain)
        } else {
            c.mine(&[m], &all)
        };
        if t[0].contains("addr") || t[0].contains("nexthop") || t[0].contains("address") {
            // A record may carry both a v4 and a v6 address, one of them unset; silt keeps
            // the set one in its single column.
            let unset = |a: &String| a != "0.0.0.0" && a != "::";
            theirs.retain(unset);
            mine.retain(unset);
        }
        c.eq(theirs, mine, m);
    }
    // Rows from a data-link section: tshark dissects the section's frame; its IPv4 header and
    // ports follow the outer packet's (first ip.* / udp.* occurrence per frame). tshark misses
    // a pseudowire whose control word is all zero (ethernet-over-mpls flow 4: it reads the
    // control word as the start of an Ethernet header), so its values must be among silt's;
    // that row is checked by hand in corpus_values.rs.
    if datalink.iter().any(|d| *d) {
        let dl = |i: usize| datalink[i];
        for (t, m, skip) in [
            ("ip.src", "src", 1),
            ("ip.dst", "dst", 1),
            ("ip.proto", "proto", 1),
        ] {
            let theirs = c.theirs(&[t], skip);
            let mine = c.mine(&[m], &dl);
            c.within(theirs, mine, &format!("data-link {m}"));
        }
        let mut theirs = c.theirs(&["tcp.srcport"], 0);
        theirs.extend(c.theirs(&["udp.srcport"], 1));
        let mine = c.mine(&["sport"], &dl);
        c.within(theirs, mine, "data-link sport");
        let mut theirs = c.theirs(&["tcp.dstport"], 0);
        theirs.extend(c.theirs(&["udp.dstport"], 1));
        let mine = c.mine(&["dport"], &dl);
        c.within(theirs, mine, "data-link dport");
    }
    // Flow start/end: v5/v9 relative to the header's uptime, IPFIX absolute.
    for (rel, abs, col) in [
        ("cflow.timestart", "cflow.abstimestart", "flow_start"),
        ("cflow.timeend", "cflow.abstimeend", "flow_end"),
    ] {
        let mut theirs = Vec::new();
        for fr in c.frames {
            let first = |f: &str| fr[c.idx(f)].first().cloned();
            let secs = first("cflow.unix_secs").and_then(|v| v.parse::<i64>().ok());
            let nsecs = first("cflow.unix_nsecs")
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            let up = first("cflow.sysuptime").and_then(|v| rel_us(&v));
            if let (Some(secs), Some(up)) = (secs, up) {
                for v in &fr[c.idx(rel)] {
                    let t = rel_us(v).expect("relative time");
                    // v5/v9 uptimes are whole milliseconds.
                    theirs.push((secs * 1_000_000 + nsecs / 1000 - up + t).to_string());
                }
            }
            for v in &fr[c.idx(abs)] {
                theirs.push(abs_us(v).unwrap_or_else(|| panic!("time {v}")).to_string());
            }
        }
        let mine: Vec<String> = common::ts_values(c.out, c.table, col)
            .into_iter()
            .filter_map(|v| v.map(|v| v.to_string()))
            .collect();
        c.eq(theirs, mine, col);
    }
    // Sampling: every rate silt applies is one tshark saw (options data, flow fields, v5 header).
    let mut rates: BTreeSet<String> = c
        .theirs(
            &[
                "cflow.sampling_interval",
                "cflow.sampler_random_interval",
                "cflow.samplerate",
            ],
            0,
        )
        .into_iter()
        .filter(|r| r != "0")
        .collect();
    // RFC 5475 count-based sampling: (interval + space) / interval.
    for fr in c.frames {
        let iv = &fr[c.idx("cflow.sampling_packet_interval")];
        let sp = &fr[c.idx("cflow.sampling_packet_space")];
        for (i, s) in iv.iter().zip(sp) {
            if let (Ok(i), Ok(s)) = (i.parse::<u64>(), s.parse::<u64>()) {
                if let Some(r) = (i + s).checked_div(i) {
                    rates.insert(r.to_string());
                }
            }
        }
    }
    let mine: BTreeSet<String> = c.mine(&["sampling_rate"], &all).into_iter().collect();
    assert!(
        mine.is_subset(&rates),
        "{}: sampling rates {mine:?} not among tshark's {rates:?}",
        c.name
    );
    if !rates.is_empty() && c.out.rows("netflow.flow") > 0 {
        assert!(
            !mine.is_empty(),
            "{}: tshark saw sampling rates {rates:?}, silt none",
            c.name
        );
    }
    c.checked += mine.len();
}

#[test]
fn every_corpus_capture_matches_tshark() {
    let Some(dir) = common::corpus() else {
        return;
    };
    if !common::tshark_available() {
        return;
    }
    /// Removes the scratch directory even when an assertion fails.
    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let scratch =
        Scratch(std::env::temp_dir().join(format!("silt-flowexport-{}", std::process::id())));
    let tmp = scratch.0.clone();
    std::fs::create_dir_all(&tmp).expect("tmp dir");
    let mut files_seen = 0;
    let mut total_checked = 0;
    let groups = groups(&dir);
    for (proto, files) in &groups {
        files_seen += files.len();
        let name = files
            .iter()
            .map(|f| {
                f.file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("+");
        let (out, coll, dgs) = common::collect(*proto, files);
        assert!(out.rejects.is_empty(), "{name}: rejects {:?}", out.rejects);
        let ports: BTreeSet<u16> = dgs.iter().map(|d| d.collector_port).collect();
        let path = merged(files, &tmp);
        let (fields, table) = match proto {
            Protocol::Sflow => (SFLOW_FIELDS, "sflow.sample"),
            Protocol::Netflow => (CFLOW_FIELDS, "netflow.flow"),
        };
        let frames = tshark(&path, &ports, fields);
        assert_eq!(frames.len(), dgs.len(), "{name}: frame count");
        let mut c = Cmp {
            name: name.clone(),
            frames: &frames,
            fields,
            out: &out,
            table,
            checked: 0,
        };
        match proto {
            Protocol::Sflow => {
                check_sflow(&mut c);
                assert_eq!(
                    coll.stats().sflow_counter_samples,
                    0,
                    "{name}: counters unexpected"
                );
            }
            Protocol::Netflow => {
                check_netflow(&mut c);
                if out.total_rows() == 0 {
                    // Options only: the options records tshark shows were all read.
                    // One record may carry several rate fields: count records per frame as the
                    // largest number of occurrences of any of them.
                    let n: usize = frames
                        .iter()
                        .map(|fr| {
                            [
                                "cflow.sampling_interval",
                                "cflow.sampler_random_interval",
                                "cflow.sampling_packet_interval",
                            ]
                            .iter()
                            .map(|f| fr[c.idx(f)].len())
                            .max()
                            .unwrap_or(0)
                        })
                        .sum();
                    assert!(n > 0, "{name}: tshark shows no options records");
                    assert_eq!(
                        coll.stats().sampling_updates as usize,
                        n,
                        "{name}: sampling options records"
                    );
                    c.checked += n;
                }
            }
        }
        assert!(c.checked > 0, "{name}: nothing compared");
        eprintln!(
            "{name}: {} rows, {} values agree with tshark",
            out.total_rows(),
            c.checked
        );
        total_checked += c.checked;
    }
    let on_disk = ["sflow", "netflow"]
        .iter()
        .map(|d| {
            std::fs::read_dir(dir.join(d))
                .map(|r| {
                    r.filter(|e| {
                        e.as_ref()
                            .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "pcap"))
                    })
                    .count()
                })
                .unwrap_or(0)
        })
        .sum::<usize>();
    assert_eq!(files_seen, on_disk, "every corpus capture is covered");
    eprintln!(
        "{} captures in {} streams, {total_checked} values compared",
        files_seen,
        groups.len()
    );
    drop(scratch);
}
