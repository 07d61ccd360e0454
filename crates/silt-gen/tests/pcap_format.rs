//! The pcap generator's output, checked without tshark: the file framing (classic pcap and
//! pcapng, parsed here by hand from the format specs), every frame decoded by `etherparse` with
//! valid IPv4/TCP/UDP checksums (etherparse's own checksum code), the traffic mix (IPv6, VLAN,
//! QinQ, VXLAN, sizes, hosts), interleaved flows, strictly increasing time, size limits and
//! determinism.

use std::collections::HashSet;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use silt_gen::{write_pcap, PcapOptions};

/// (time in µs, frame) of every record of a classic little-endian µs pcap.
fn classic(data: &[u8]) -> Vec<(i64, &[u8])> {
    assert_eq!(
        &data[..4],
        &[0xd4, 0xc3, 0xb2, 0xa1],
        "µs magic, little endian"
    );
    assert_eq!(
        u32::from_le_bytes(data[20..24].try_into().unwrap()),
        1,
        "Ethernet"
    );
    let mut out = Vec::new();
    let mut p = 24;
    while p < data.len() {
        let u = |o: usize| u32::from_le_bytes(data[p + o..p + o + 4].try_into().unwrap());
        let (sec, usec, incl, orig) = (u(0), u(4), u(8) as usize, u(12));
        assert!(usec < 1_000_000);
        assert_eq!(incl as u32, orig, "nothing truncated");
        out.push((
            sec as i64 * 1_000_000 + usec as i64,
            &data[p + 16..p + 16 + incl],
        ));
        p += 16 + incl;
    }
    assert_eq!(p, data.len(), "no trailing bytes");
    out
}

/// Same from a pcapng file with one section and one Ethernet interface (µs resolution).
fn pcapng(data: &[u8]) -> Vec<(i64, &[u8])> {
    let u = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
    assert_eq!(u(0), 0x0A0D_0D0A, "section header block");
    assert_eq!(u(8), 0x1A2B_3C4D, "byte-order magic");
    let mut out = Vec::new();
    let mut p = 0;
    let mut idbs = 0;
    while p < data.len() {
        let (ty, len) = (u(p), u(p + 4) as usize);
        assert_eq!(len % 4, 0);
        assert_eq!(u(p + len - 4) as usize, len, "trailing block length");
        match ty {
            0x0A0D_0D0A => {}
            1 => {
                idbs += 1;
                assert_eq!(u16::from_le_bytes([data[p + 8], data[p + 9]]), 1);
            }
            6 => {
                assert_eq!(u(p + 8), 0, "interface 0");
                let ts = ((u(p + 12) as u64) << 32 | u(p + 16) as u64) as i64;
                let (cap, orig) = (u(p + 20) as usize, u(p + 24));
                assert_eq!(cap as u32, orig);
                assert!(28 + cap <= len - 4);
                out.push((ts, &data[p + 28..p + 28 + cap]));
            }
            other => panic!("unexpected block type {other:#x}"),
        }
        p += len;
    }
    assert_eq!(idbs, 1);
    out
}

#[derive(Default, Debug)]
struct Mix {
    v6: u64,
    vlan: u64,
    qinq: u64,
    vxlan: u64,
    tcp: u64,
    udp: u64,
    icmp: u64,
    small: u64,
    full: u64,
    bytes: u64,
}

type Key = (Vec<u8>, Vec<u8>, u16, u16, u8);

/// Decodes one Ethernet frame (and a VXLAN payload's inner frame), checks checksums, and
/// returns the innermost flow key (addresses and ports ordered).
fn decode(frame: &[u8], mix: &mut Mix, depth: u32) -> Key {
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse decodes every frame");
    if depth == 0 {
        mix.bytes += frame.len() as u64;
        if !p.link_exts.is_empty() {
            mix.vlan += 1;
        }
        if p.link_exts.len() == 2 {
            mix.qinq += 1;
        }
        if frame.len() < 100 {
            mix.small += 1;
        }
        if frame.len() >= 1500 {
            mix.full += 1;
        }
    }
    let (src, dst, v4h): (Vec<u8>, Vec<u8>, Option<etherparse::Ipv4Header>) = match &p.net {
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header().to_header();
            assert_eq!(h.calc_header_checksum(), h.header_checksum, "IPv4 checksum");
            (h.source.to_vec(), h.destination.to_vec(), Some(h))
        }
        Some(NetSlice::Ipv6(ip)) => {
            mix.v6 += 1;
            let h = ip.header();
            (h.source().to_vec(), h.destination().to_vec(), None)
        }
        other => panic!("no IP layer: {other:?}"),
    };
    let v6_addrs = |v: &Vec<u8>| -> [u8; 16] { v.as_slice().try_into().unwrap() };
    let (sp, dp, proto) = match &p.transport {
        Some(TransportSlice::Tcp(t)) => {
            let c = match &v4h {
                Some(h) => t.calc_checksum_ipv4(h.source, h.destination).unwrap(),
                None => t
                    .calc_checksum_ipv6(v6_addrs(&src), v6_addrs(&dst))
                    .unwrap(),
            };
            assert_eq!(c, t.checksum(), "TCP checksum");
            mix.tcp += 1;
            (t.source_port(), t.destination_port(), 6)
        }
        Some(TransportSlice::Udp(u)) => {
            let h = u.to_header();
            if h.destination_port == 4789 && depth == 0 {
                assert_eq!(h.checksum, 0, "VXLAN outer UDP checksum unused");
                assert_eq!(u.payload()[0], 0x08, "VXLAN flags: VNI present");
                mix.vxlan += 1;
                return decode(&u.payload()[8..], mix, depth + 1);
            }
            let c = match &v4h {
                Some(ip) => h.calc_checksum_ipv4(ip, u.payload()).unwrap(),
                None => {
                    let ip = match &p.net {
                        Some(NetSlice::Ipv6(ip)) => ip.header().to_header(),
                        _ => unreachable!(),
                    };
                    h.calc_checksum_ipv6(&ip, u.payload()).unwrap()
                }
            };
            assert_eq!(c, h.checksum, "UDP checksum");
            mix.udp += 1;
            (h.source_port, h.destination_port, 17)
        }
        Some(TransportSlice::Icmpv4(_)) => {
            mix.icmp += 1;
            (0, 0, 1)
        }
        Some(TransportSlice::Icmpv6(_)) => {
            mix.icmp += 1;
            (0, 0, 58)
        }
        None => panic!("no transport layer"),
    };
    if (src.clone(), sp) <= (dst.clone(), dp) {
        (src, dst, sp, dp, proto)
    } else {
        (dst, src, dp, sp, proto)
    }
}

fn gen(opts: &PcapOptions) -> (Vec<u8>, silt_gen::PcapReport) {
    let mut buf = Vec::new();
    let r = write_pcap(&mut buf, opts).unwrap();
    (buf, r)
}

#[test]
fn frames_decode_with_valid_checksums_and_a_realistic_mix() {
    let opts = PcapOptions {
        // Past the start, when all 10,000 flows open at once with small packets.
        packets: Some(200_000),
        ..PcapOptions::default()
    };
    let (data, r) = gen(&opts);
    assert_eq!(r.bytes, data.len() as u64);
    let recs = classic(&data);
    assert_eq!(recs.len() as u64, r.packets);
    assert_eq!(recs.len(), 200_000);
    let mut mix = Mix::default();
    let mut last = i64::MIN;
    let mut keys = Vec::with_capacity(recs.len());
    let mut hosts = HashSet::new();
    for (t, frame) in &recs {
        assert!(*t > last, "time strictly increasing");
        last = *t;
        let k = decode(frame, &mut mix, 0);
        hosts.insert(k.0.clone());
        hosts.insert(k.1.clone());
        keys.push(k);
    }
    assert_eq!(recs[0].0, opts.start_micros);
    assert_eq!(mix.bytes, r.frame_bytes);
    // The generator's counters agree with an independent decode.
    assert_eq!(
        (mix.v6, mix.vlan, mix.qinq, mix.vxlan, mix.tcp, mix.udp, mix.icmp),
        (r.ipv6, r.vlan, r.qinq, r.vxlan, r.tcp, r.udp, r.icmp)
    );
    let n = recs.len() as f64;
    let share = |x: u64| x as f64 / n;
    assert!((0.10..0.35).contains(&share(mix.v6)), "{mix:?}");
    assert!((0.07..0.30).contains(&share(mix.vlan)), "{mix:?}");
    assert!(mix.qinq > 0 && mix.vxlan > 0, "{mix:?}");
    assert!(share(mix.tcp) > 0.5 && share(mix.udp) > 0.02 && share(mix.icmp) > 0.005);
    assert!(share(mix.small) > 0.2 && share(mix.full) > 0.1, "{mix:?}");
    let avg = mix.bytes as f64 / n;
    assert!((300.0..1200.0).contains(&avg), "average frame {avg}");
    assert!(hosts.len() > 3000, "distinct hosts {}", hosts.len());
    // Interleaving: with 10,000 open flows, a window of 5,000 packets after the start touches
    // thousands of distinct flows (uniform choice: ~3,900 expected).
    let window: HashSet<&Key> = keys[150_000..155_000].iter().collect();
    assert!(
        window.len() > 3000,
        "distinct flows in window {}",
        window.len()
    );
}

#[test]
fn pcapng_holds_the_same_packets() {
    let base = PcapOptions {
        packets: Some(5_000),
        seed: 3,
        ..PcapOptions::default()
    };
    let (a, ra) = gen(&base);
    let (b, rb) = gen(&PcapOptions {
        pcapng: true,
        ..base.clone()
    });
    assert_eq!(rb.bytes, b.len() as u64);
    assert_eq!(ra.packets, rb.packets);
    assert_eq!(classic(&a), pcapng(&b));
}

#[test]
fn deterministic_per_seed_and_size_limited() {
    let o = PcapOptions {
        bytes: Some(3_000_000),
        ..PcapOptions::default()
    };
    let (a, r) = gen(&o);
    let (b, _) = gen(&o);
    assert!(a == b, "same seed, same bytes");
    let (c, _) = gen(&PcapOptions {
        seed: 2,
        ..o.clone()
    });
    assert!(a != c, "another seed, other bytes");
    // Stops at the first packet that reaches the limit: at most one record past it.
    assert!(
        a.len() >= 3_000_000 && a.len() < 3_000_000 + 16 + 1600,
        "{}",
        a.len()
    );
    assert_eq!(classic(&a).len() as u64, r.packets);
    // Both limits: the first reached wins.
    let (_, r2) = gen(&PcapOptions {
        bytes: Some(3_000_000),
        packets: Some(100),
        ..PcapOptions::default()
    });
    assert_eq!(r2.packets, 100);
}
