//! Hand-built frames and capture files for the decoding tests. Written independently of the
//! decoder (straight from the RFC header layouts) so the tests can catch its mistakes.
#![allow(dead_code)]

pub fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_frag(src, dst, proto, 0, false, payload)
}

/// IPv4 with fragment offset (in 8-byte units) and the MF flag.
pub fn ipv4_frag(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    offset8: u16,
    mf: bool,
    payload: &[u8],
) -> Vec<u8> {
    let total = (20 + payload.len()) as u16;
    let frag = offset8 | if mf { 0x2000 } else { 0 };
    let mut v = vec![0x45, 0];
    v.extend(total.to_be_bytes());
    v.extend([0x12, 0x34]);
    v.extend(frag.to_be_bytes());
    v.extend([64, proto, 0, 0]);
    v.extend(src);
    v.extend(dst);
    v.extend(payload);
    v
}

pub fn ipv6(src: [u8; 16], dst: [u8; 16], next: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0x60, 0, 0, 0];
    v.extend((payload.len() as u16).to_be_bytes());
    v.extend([next, 64]);
    v.extend(src);
    v.extend(dst);
    v.extend(payload);
    v
}

pub fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(sport.to_be_bytes());
    v.extend(dport.to_be_bytes());
    v.extend(((8 + payload.len()) as u16).to_be_bytes());
    v.extend([0, 0]);
    v.extend(payload);
    v
}

pub fn tcp(sport: u16, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(sport.to_be_bytes());
    v.extend(dport.to_be_bytes());
    v.extend(1000u32.to_be_bytes());
    v.extend(0u32.to_be_bytes());
    v.extend([0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    v.extend(payload);
    v
}

pub fn icmp(t: u8, c: u8) -> Vec<u8> {
    vec![t, c, 0, 0, 0, 1, 0, 1]
}

pub fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb,
    ];
    v.extend(ethertype.to_be_bytes());
    v.extend(payload);
    v
}

/// A VLAN tag: TCI with the VLAN id, then the next ethertype.
pub fn vlan_tag(vid: u16, next: u16) -> Vec<u8> {
    let mut v = (vid & 0xfff).to_be_bytes().to_vec();
    v.extend(next.to_be_bytes());
    v
}

pub fn v6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

/// A classic pcap file: `be` = big-endian, `ns` = nanosecond magic.
pub fn pcap(link: u32, be: bool, ns: bool, frames: &[(u32, u32, Vec<u8>)]) -> Vec<u8> {
    let w32 = |v: &mut Vec<u8>, x: u32| {
        if be {
            v.extend(x.to_be_bytes())
        } else {
            v.extend(x.to_le_bytes())
        }
    };
    let w16 = |v: &mut Vec<u8>, x: u16| {
        if be {
            v.extend(x.to_be_bytes())
        } else {
            v.extend(x.to_le_bytes())
        }
    };
    let mut v = Vec::new();
    w32(&mut v, if ns { 0xa1b23c4d } else { 0xa1b2c3d4 });
    w16(&mut v, 2);
    w16(&mut v, 4);
    w32(&mut v, 0);
    w32(&mut v, 0);
    w32(&mut v, 65535);
    w32(&mut v, link);
    for (sec, frac, data) in frames {
        w32(&mut v, *sec);
        w32(&mut v, *frac);
        w32(&mut v, data.len() as u32);
        w32(&mut v, data.len() as u32);
        v.extend(data);
    }
    v
}

fn pad4(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(4) {
        v.push(0);
    }
}

fn ng_block(typ: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len()) as u32;
    let mut v = Vec::new();
    v.extend(typ.to_le_bytes());
    v.extend(len.to_le_bytes());
    v.extend(body);
    v.extend(len.to_le_bytes());
    v
}

/// Little-endian pcapng: one section, the given interfaces (link type, optional if_tsresol),
/// and enhanced packet blocks (interface, timestamp in that interface's units, data).
pub fn pcapng(ifaces: &[(u16, Option<u8>)], packets: &[(u32, u64, Vec<u8>)]) -> Vec<u8> {
    let mut v = Vec::new();
    let mut shb = Vec::new();
    shb.extend(0x1a2b3c4du32.to_le_bytes());
    shb.extend(1u16.to_le_bytes());
    shb.extend(0u16.to_le_bytes());
    shb.extend((-1i64).to_le_bytes());
    v.extend(ng_block(0x0a0d0d0a, &shb));
    for (link, tsresol) in ifaces {
        let mut idb = Vec::new();
        idb.extend(link.to_le_bytes());
        idb.extend(0u16.to_le_bytes());
        idb.extend(65535u32.to_le_bytes());
        if let Some(r) = tsresol {
            idb.extend(9u16.to_le_bytes());
            idb.extend(1u16.to_le_bytes());
            idb.push(*r);
            pad4(&mut idb);
            idb.extend([0, 0, 0, 0]); // opt_endofopt
        }
        v.extend(ng_block(1, &idb));
    }
    for (ifid, ts, data) in packets {
        let mut epb = Vec::new();
        epb.extend(ifid.to_le_bytes());
        epb.extend(((ts >> 32) as u32).to_le_bytes());
        epb.extend((*ts as u32).to_le_bytes());
        epb.extend((data.len() as u32).to_le_bytes());
        epb.extend((data.len() as u32).to_le_bytes());
        epb.extend(data);
        pad4(&mut epb);
        v.extend(ng_block(6, &epb));
    }
    v
}
