//! Community ID v1 (<https://github.com/corelight/community-id-spec>): a seeded SHA-1 over the
//! ordered flow tuple, so that Zeek, Suricata and silt give the same flow the same ID.
//!
//! The hash input is, in this order: the seed (u16, big-endian), the source address bytes and
//! the destination address bytes (network order, 4 or 16 bytes), the IP protocol number (1
//! byte), one zero padding byte, then — only for TCP, UDP, SCTP, ICMP and ICMPv6 — the source and
//! destination ports (u16, big-endian). The endpoints are ordered so that the smaller
//! `(address, port)` pair comes first, except for one-way ICMP messages, which keep their order.
//! For ICMP/ICMPv6 the "ports" are the message type and code, mapped as the spec says: a type
//! that has a counterpart (echo request/reply, ...) becomes `(type, counterpart type)`, which
//! makes request and reply hash alike; any other type is one-way and keeps `(type, code)`.
//!
//! Pure functions, no I/O. SHA-1 comes from `sha1` and base64 from `base64` (standard
//! alphabet with padding, as the spec requires); only the tuple layout is written by hand, because
//! it *is* the spec.

use std::fmt::Write as _;
use std::net::IpAddr;

use base64::Engine as _;

/// IP protocol numbers that carry ports in the Community ID hash.
const PROTO_ICMP: u8 = 1;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMP6: u8 = 58;
const PROTO_SCTP: u8 = 132;

/// ICMPv4 type pairs that form two-way exchanges (pycommunityid `icmp.py`, Zeek's plugin).
fn icmp4_counterpart(t: u16) -> Option<u16> {
    Some(match t {
        8 => 0,   // echo -> echo reply
        0 => 8,   // echo reply -> echo
        13 => 14, // timestamp
        14 => 13,
        15 => 16, // information request
        16 => 15,
        10 => 9, // router solicitation -> router advertisement
        9 => 10,
        17 => 18, // address mask
        18 => 17,
        _ => return None,
    })
}

/// ICMPv6 type pairs that form two-way exchanges (pycommunityid `icmp6.py`).
fn icmp6_counterpart(t: u16) -> Option<u16> {
    Some(match t {
        128 => 129, // echo request -> reply
        129 => 128,
        130 => 131, // MLD listener query -> report
        131 => 130,
        133 => 134, // router solicitation -> advertisement
        134 => 133,
        135 => 136, // neighbor solicitation -> advertisement
        136 => 135,
        139 => 140, // node information (who-are-you) query -> reply
        140 => 139,
        144 => 145, // home agent address discovery request -> reply
        145 => 144,
        _ => return None,
    })
}

/// The spec's ICMP "port equivalents": `(sport, dport, is_one_way)` for a message type and code.
pub fn icmp_port_equivalents(proto: u8, icmp_type: u16, icmp_code: u16) -> (u16, u16, bool) {
    let counterpart = match proto {
        PROTO_ICMP => icmp4_counterpart(icmp_type),
        PROTO_ICMP6 => icmp6_counterpart(icmp_type),
        _ => None,
    };
    match counterpart {
        Some(c) => (icmp_type, c, false),
        None => (icmp_type, icmp_code, true),
    }
}

/// Whether the protocol's ports (or ICMP type/code) enter the hash.
#[inline]
pub fn proto_has_ports(proto: u8) -> bool {
    matches!(
        proto,
        PROTO_TCP | PROTO_UDP | PROTO_SCTP | PROTO_ICMP | PROTO_ICMP6
    )
}

/// The 20-byte SHA-1 digest of Community ID v1 (before encoding). See [`community_id_v1`].
pub fn community_id_v1_digest(
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    sport: u16,
    dport: u16,
    seed: u16,
) -> [u8; 20] {
    let has_ports = proto_has_ports(proto);
    let (mut sport, mut dport, mut one_way) = (sport, dport, false);
    if proto == PROTO_ICMP || proto == PROTO_ICMP6 {
        (sport, dport, one_way) = icmp_port_equivalents(proto, sport, dport);
    }
    let (sa, sa_len) = addr_bytes(src);
    let (da, da_len) = addr_bytes(dst);
    let (sa, da) = (&sa[..sa_len], &da[..da_len]);
    // Ordering: the smaller (address bytes, port) endpoint first; ports only break ties between
    // equal addresses, as in the spec's `addr_port_canon_lt`. One-way ICMP keeps the order.
    let in_order = one_way || sa < da || (sa == da && (!has_ports || sport <= dport));
    let (a1, a2, p1, p2) = if in_order {
        (sa, da, sport, dport)
    } else {
        (da, sa, dport, sport)
    };
    // Why a stack buffer: at most 2 + 16 + 16 + 2 + 4 bytes; one SHA-1 update, no allocation.
    let mut buf = [0u8; 40];
    let mut n = 0;
    let mut put = |b: &[u8]| {
        buf[n..n + b.len()].copy_from_slice(b);
        n += b.len();
    };
    put(&seed.to_be_bytes());
    put(a1);
    put(a2);
    put(&[proto, 0]);
    if has_ports {
        put(&p1.to_be_bytes());
        put(&p2.to_be_bytes());
    }
    use sha1::Digest;
    sha1::Sha1::digest(&buf[..n]).into()
}

fn addr_bytes(a: IpAddr) -> ([u8; 16], usize) {
    let mut b = [0u8; 16];
    match a {
        IpAddr::V4(v4) => {
            b[..4].copy_from_slice(&v4.octets());
            (b, 4)
        }
        IpAddr::V6(v6) => {
            b.copy_from_slice(&v6.octets());
            (b, 16)
        }
    }
}

/// Community ID v1 (<https://github.com/corelight/community-id-spec>). For ICMP/ICMPv6 pass type
/// as `sport` and code as `dport`; the function applies the spec's ICMP type/code port mapping.
/// For protocols other than TCP/UDP/SCTP/ICMP/ICMPv6 ports are ignored. Returns `"1:<base64>"`,
/// or `"1:<hex>"` (lower-case) when `base64` is false.
pub fn community_id_v1(
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    sport: u16,
    dport: u16,
    seed: u16,
    base64: bool,
) -> String {
    let mut s = String::with_capacity(42);
    community_id_v1_into(&mut s, src, dst, proto, sport, dport, seed, base64);
    s
}

/// A base64 Community ID (`"1:"` and 28 characters) held inline: a per-packet row keeps it
/// without a heap allocation (sFlow rows did, at about 4 % of an import's CPU).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CommunityId([u8; 30]);

impl CommunityId {
    /// Community ID v1 in base64, as [`community_id_v1`] with `base64` true.
    pub fn v1(src: IpAddr, dst: IpAddr, proto: u8, sport: u16, dport: u16, seed: u16) -> Self {
        let digest = community_id_v1_digest(src, dst, proto, sport, dport, seed);
        let mut b = [0u8; 30];
        b[..2].copy_from_slice(b"1:");
        let n = base64::engine::general_purpose::STANDARD
            .encode_slice(digest, &mut b[2..])
            .expect("20 bytes are 28 base64 characters");
        debug_assert_eq!(n, 28);
        Self(b)
    }

    pub fn as_str(&self) -> &str {
        // SAFETY: the bytes are "1:" and 28 characters of the base64 alphabet (`v1` is the only
        // constructor), all ASCII. (from_utf8 here and in silt-pcap's `write_addr` was 2 % of
        // an sFlow import's CPU together.)
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }
}

impl std::fmt::Debug for CommunityId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Like [`community_id_v1`] but appends to `out` (which is not cleared), so that a caller
/// building an Arrow string column can reuse one buffer and avoid an allocation per packet.
#[allow(clippy::too_many_arguments)] // mirrors community_id_v1's fixed signature plus `out`
pub fn community_id_v1_into(
    out: &mut String,
    src: IpAddr,
    dst: IpAddr,
    proto: u8,
    sport: u16,
    dport: u16,
    seed: u16,
    base64: bool,
) {
    let digest = community_id_v1_digest(src, dst, proto, sport, dport, seed);
    out.push_str("1:");
    if base64 {
        base64::engine::general_purpose::STANDARD.encode_string(digest, out);
    } else {
        for b in digest {
            let _ = write!(out, "{b:02x}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Rows of the spec's README tables (baseline/README.md), typed in independently of the
    /// JSON baselines that the integration test checks.
    #[test]
    fn readme_table_default_seed() {
        let rows: &[(&str, &str, u8, u16, u16, &str)] = &[
            (
                "1.2.3.4",
                "5.6.7.8",
                6,
                1122,
                3344,
                "1:wCb3OG7yAFWelaUydu0D+125CLM=",
            ),
            (
                "5.6.7.8",
                "1.2.3.4",
                6,
                3344,
                1122,
                "1:wCb3OG7yAFWelaUydu0D+125CLM=",
            ),
            (
                "1.2.3.4",
                "5.6.7.8",
                17,
                1122,
                3344,
                "1:0Mu9InQx6z4ZiCZM/7HXi2WMhOg=",
            ),
            (
                "1.2.3.4",
                "5.6.7.8",
                132,
                1122,
                3344,
                "1:EKt4MsxuyaE6mL+hmrEkQ9csDD8=",
            ),
            (
                "1.2.3.4",
                "5.6.7.8",
                1,
                8,
                0,
                "1:crodRHL2FEsHjbv3UkRrfbs4bZ0=",
            ),
            (
                "5.6.7.8",
                "1.2.3.4",
                1,
                0,
                0,
                "1:crodRHL2FEsHjbv3UkRrfbs4bZ0=",
            ),
            (
                "1.2.3.4",
                "5.6.7.8",
                1,
                11,
                0,
                "1:f/YiSyWqczrTgfUCZlBUnvHRcPk=",
            ),
            (
                "fe80:0001:0203:0405:0607:0809:0A0B:0C0D",
                "fe80:1011:1213:1415:1617:1819:1A1B:1C1D",
                58,
                128,
                0,
                "1:0bf7hyMJUwt3fMED7z8LIfRpBeo=",
            ),
            (
                "fe80:1011:1213:1415:1617:1819:1A1B:1C1D",
                "fe80:0001:0203:0405:0607:0809:0A0B:0C0D",
                58,
                129,
                0,
                "1:0bf7hyMJUwt3fMED7z8LIfRpBeo=",
            ),
            (
                "fe80:0001:0203:0405:0607:0809:0A0B:0C0D",
                "fe80:1011:1213:1415:1617:1819:1A1B:1C1D",
                58,
                146,
                0,
                "1:fYC8+pz24E+EhANP1EZhpX0Dw10=",
            ),
            (
                "1.2.3.4",
                "5.6.7.8",
                46,
                0,
                0,
                "1:ikv3kmf89luf73WPz1jOs49S768=",
            ),
            (
                "5.6.7.8",
                "1.2.3.4",
                46,
                999,
                7,
                "1:ikv3kmf89luf73WPz1jOs49S768=",
            ),
            (
                "fe80:1011:1213:1415:1617:1819:1A1B:1C1D",
                "fe80:0001:0203:0405:0607:0809:0A0B:0C0D",
                46,
                0,
                0,
                "1:wQ/2mwrnXP4lmJcHdGL5ePjR+e0=",
            ),
        ];
        for &(s, d, p, sp, dp, want) in rows {
            assert_eq!(
                community_id_v1(ip(s), ip(d), p, sp, dp, 0, true),
                want,
                "{s} {d} {p} {sp} {dp}"
            );
            assert_eq!(CommunityId::v1(ip(s), ip(d), p, sp, dp, 0).as_str(), want);
        }
    }

    #[test]
    fn readme_table_seed1_and_hex() {
        assert_eq!(
            community_id_v1(ip("1.2.3.4"), ip("5.6.7.8"), 6, 1122, 3344, 1, true),
            "1:HhA1B+6CoLbiKPEs5nhNYN4XWfk="
        );
        assert_eq!(
            community_id_v1(ip("1.2.3.4"), ip("5.6.7.8"), 1, 11, 0, 1, true),
            "1:1DD7cWGC/Yg91YGsQeni8du3pIA="
        );
        assert_eq!(
            community_id_v1(ip("5.6.7.8"), ip("1.2.3.4"), 6, 3344, 1122, 0, false),
            "1:c026f7386ef200559e95a53276ed03fb5db908b3"
        );
        let mut s = String::from("x");
        community_id_v1_into(&mut s, ip("1.2.3.4"), ip("5.6.7.8"), 46, 0, 0, 0, false);
        assert_eq!(s, "x1:8a4bf79267fcf65b9fef758fcf58ceb38f52efaf");
    }
}
