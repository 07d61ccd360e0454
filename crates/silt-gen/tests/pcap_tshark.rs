//! The generated traces read cleanly in Wireshark's tshark: no malformed packets, no expert
//! warnings other than the RST teardowns the generator writes on purpose, no TCP analysis flags
//! (retransmissions, lost segments, window full, ...), and tshark's own counts (packets, completed
//! handshakes, IPv6, VLAN, VXLAN, TCP, ICMP) equal what the generator reports.
//!
//! Skips (with a message) when tshark is not installed (`scripts/apt-deps.sh` installs it).

use std::path::Path;
use std::process::Command;

use silt_gen::{generate_pcap, PcapOptions, PcapReport};

fn have_tshark() -> bool {
    silt_testkit::tool(&["tshark"], "scripts/apt-deps.sh installs it").is_some()
}

/// Number of frames tshark shows for a display filter (empty filter = all frames).
fn count(file: &Path, filter: &str) -> u64 {
    let mut c = Command::new("tshark");
    c.arg("-n")
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-e", "frame.number"]);
    if !filter.is_empty() {
        c.args(["-Y", filter]);
    }
    let o = c.output().expect("running tshark");
    assert!(
        o.status.success(),
        "tshark -Y {filter:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count() as u64
}

fn check(file: &Path, r: &PcapReport) {
    assert_eq!(count(file, ""), r.packets, "packet count");
    assert_eq!(count(file, "_ws.malformed"), 0, "malformed packets");
    // Expert warnings and errors, except "Connection reset (RST)" on RST segments.
    assert_eq!(
        count(
            file,
            "_ws.expert.severity >= 0x600000 && !(tcp.flags.reset == 1)"
        ),
        0,
        "expert warnings/errors"
    );
    assert_eq!(count(file, "tcp.analysis.flags"), 0, "TCP analysis flags");
    // The handshake's final ACK: relative seq 1, ack 1, no payload, only ACK set.
    let hs = count(
        file,
        "tcp.flags == 0x010 && tcp.seq == 1 && tcp.ack == 1 && tcp.len == 0",
    );
    assert_eq!(hs, r.tcp_handshakes, "completed handshakes");
    assert!(hs > 100, "too few TCP sessions: {hs}");
    assert_eq!(count(file, "tcp"), r.tcp, "tcp");
    assert_eq!(count(file, "icmp || icmpv6"), r.icmp, "icmp");
    assert_eq!(count(file, "ipv6"), r.ipv6, "ipv6");
    assert_eq!(count(file, "vlan || ieee8021ad"), r.vlan, "vlan");
    // QinQ: both tags decoded; about half the QinQ flows use an 802.1ad (0x88a8) outer tag.
    let ad = count(file, "vlan && ieee8021ad");
    let dq = count(
        file,
        "vlan.id && !ieee8021ad && eth.type == 0x8100 && vlan.etype == 0x8100",
    );
    assert_eq!(ad + dq, r.qinq, "QinQ frames (802.1ad + double 802.1Q)");
    assert!(
        ad > 0 && dq > 0,
        "both QinQ kinds present: {ad} 802.1ad, {dq} 802.1Q-in-802.1Q"
    );
    assert_eq!(count(file, "vxlan"), r.vxlan, "vxlan");
    assert!(
        count(file, "dns.flags.response == 1") > 100,
        "DNS responses"
    );
    assert!(count(file, "http.request") > 10, "HTTP requests");
    assert!(
        count(file, "tls.record.content_type == 23") > 100,
        "TLS records"
    );
    assert!(
        count(file, "icmp.type == 3 || icmpv6.type == 1") > 10,
        "ICMP errors"
    );
}

fn run(pcapng: bool) {
    if !have_tshark() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(if pcapng { "t.pcapng" } else { "t.pcap" });
    let opts = PcapOptions {
        packets: Some(30_000),
        concurrent_flows: 300,
        pcapng,
        seed: 7,
        ..PcapOptions::default()
    };
    let r = generate_pcap(&file, &opts).unwrap();
    assert_eq!(r.packets, 30_000);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), r.bytes);
    check(&file, &r);
}

#[test]
fn classic_pcap_reads_cleanly_in_tshark() {
    run(false);
}

#[test]
fn pcapng_reads_cleanly_in_tshark() {
    run(true);
}
