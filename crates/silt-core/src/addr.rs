//! Canonical text for IP addresses and subnets.
//!
//! Addresses are stored as strings in their canonical form (IPv4 dotted quad, IPv6 as RFC 5952
//! compressed lower case, which is what Rust's `Display` prints), so that
//! `WHERE id.orig_h = '10.0.0.1'` and `= '2001:db8::1'` work the same in silt, DuckDB, Spark and
//! Trino, whatever spelling the sensor used (`2a03:b0c0:0002:00d0:...` becomes `2a03:b0c0:2:d0:...`).

use std::net::IpAddr;

/// Canonical text of an address, or `None` if `s` is not an IP address. IPv4-mapped IPv6
/// addresses keep their IPv6 form (`::ffff:1.2.3.4`), as Zeek prints them.
pub fn canonical_addr(s: &str) -> Option<String> {
    let a = s.trim().parse::<IpAddr>().ok()?;
    Some(AddrText::default().format(a).to_owned())
}

/// Appends the canonical text of the address `s` to `out` and returns true, or returns false
/// (leaving `out` as it was) if `s` is not an IP address; as [`canonical_addr`] without the
/// `String`.
pub fn canonical_addr_into(s: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(a) = std::str::from_utf8(s)
        .ok()
        .and_then(|s| s.trim().parse::<IpAddr>().ok())
    else {
        return false;
    };
    out.extend_from_slice(AddrText::default().format(a).as_bytes());
    true
}

/// A buffer that an address's canonical text is formatted into by hand, without `Display`
/// and without a `String`.
///
/// `Display` goes through the formatting machinery per octet or group: that was about 6 % of
/// `silt import sflow --enrich` for IPv4 (perf, bench/kafka.sh's RASP pipeline), 7 % of a plain
/// sFlow import's CPU for IPv6, and ~1.5 % of a generated Zeek conn import (10 % IPv6
/// addresses, canonicalised through `canonical_addr`). The tests compare every case with
/// `Display`.
#[derive(Clone, Copy)]
pub struct AddrText {
    // Longest: "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" cannot occur (only ::ffff:
    // mapped addresses print a dotted tail), so 39 bytes ("xxxx:" x 8 minus one) suffice.
    buf: [u8; 40],
    len: usize,
}

impl Default for AddrText {
    fn default() -> Self {
        Self {
            buf: [0; 40],
            len: 0,
        }
    }
}

impl AddrText {
    /// Formats `a` (replacing what the buffer held) and returns its text.
    pub fn format(&mut self, a: IpAddr) -> &str {
        self.len = match a {
            IpAddr::V4(v4) => put_v4(&mut self.buf, v4.octets()),
            IpAddr::V6(v6) => put_v6(&mut self.buf, v6),
        };
        self.as_str()
    }

    /// The text last formatted (empty before the first).
    pub fn as_str(&self) -> &str {
        // SAFETY: put_v4/put_v6 write only ASCII digits, hex letters, dots and colons. (from_utf8
        // here and in `CommunityId::as_str` was 2 % of an sFlow import's CPU together.)
        unsafe { std::str::from_utf8_unchecked(&self.buf[..self.len]) }
    }
}

/// Dotted decimal into the start of `buf`; returns the length.
fn put_v4(buf: &mut [u8], octets: [u8; 4]) -> usize {
    let mut n = 0;
    for (i, o) in octets.into_iter().enumerate() {
        if i > 0 {
            buf[n] = b'.';
            n += 1;
        }
        if o >= 100 {
            buf[n] = b'0' + o / 100;
            n += 1;
        }
        if o >= 10 {
            buf[n] = b'0' + o / 10 % 10;
            n += 1;
        }
        buf[n] = b'0' + o % 10;
        n += 1;
    }
    n
}

/// IPv6 text as `Display` writes it (RFC 5952): lower-case hex groups without leading zeros,
/// the longest run of two or more zero groups (the first of equal runs) as `::`, and
/// IPv4-mapped addresses as `::ffff:a.b.c.d`. Returns the length written into `buf`.
fn put_v6(buf: &mut [u8; 40], a: std::net::Ipv6Addr) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let g = a.segments();
    if g[..5] == [0; 5] && g[5] == 0xffff {
        buf[..7].copy_from_slice(b"::ffff:");
        let o = a.octets();
        return 7 + put_v4(&mut buf[7..], [o[12], o[13], o[14], o[15]]);
    }
    // The longest run of zero groups (length >= 2).
    let (mut best, mut best_len, mut i) = (8usize, 0usize, 0usize);
    while i < 8 {
        if g[i] == 0 {
            let start = i;
            while i < 8 && g[i] == 0 {
                i += 1;
            }
            if i - start > best_len {
                (best, best_len) = (start, i - start);
            }
        } else {
            i += 1;
        }
    }
    if best_len < 2 {
        best = 8;
    }
    let mut n = 0;
    let put_group = |buf: &mut [u8; 40], n: &mut usize, v: u16| {
        let digits = ((16 - v.leading_zeros() as usize).max(1)).div_ceil(4);
        for k in (0..digits).rev() {
            buf[*n] = HEX[usize::from((v >> (4 * k)) & 0xf)];
            *n += 1;
        }
    };
    let mut i = 0;
    while i < 8 {
        if i == best {
            buf[n..n + 2].copy_from_slice(b"::");
            n += 2;
            i += best_len;
            continue;
        }
        if i > 0 && i != best + best_len {
            buf[n] = b':';
            n += 1;
        }
        put_group(buf, &mut n, g[i]);
        i += 1;
    }
    n
}

/// Canonical text of a subnet `addr/len` (host bits are kept as written: Zeek never sets them).
pub fn canonical_subnet(s: &str) -> Option<String> {
    let (a, l) = s.trim().split_once('/')?;
    let addr: IpAddr = a.parse().ok()?;
    let len: u8 = l.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    (len <= max).then(|| format!("{addr}/{len}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonicalizes() {
        assert_eq!(canonical_addr("10.0.0.1").as_deref(), Some("10.0.0.1"));
        assert_eq!(
            canonical_addr("2a03:b0c0:0002:00d0:0000:0000:0a7c:7001").as_deref(),
            Some("2a03:b0c0:2:d0::a7c:7001")
        );
        assert_eq!(canonical_addr("FE80::1").as_deref(), Some("fe80::1"));
        assert_eq!(canonical_addr("nope"), None);
        assert_eq!(
            canonical_subnet("10.0.0.0/8").as_deref(),
            Some("10.0.0.0/8")
        );
        assert_eq!(
            canonical_subnet("2001:DB8::/32").as_deref(),
            Some("2001:db8::/32")
        );
        assert_eq!(canonical_subnet("10.0.0.0/33"), None);
        let mut out = b"x".to_vec();
        assert!(canonical_addr_into(b" 2001:DB8:0:0::1", &mut out));
        assert!(canonical_addr_into(b"10.0.0.1", &mut out));
        assert!(!canonical_addr_into(b"10.0.0.256", &mut out));
        assert!(!canonical_addr_into(b"\xff::1", &mut out));
        assert_eq!(out, b"x2001:db8::110.0.0.1");
    }

    fn display_of(a: IpAddr) -> (String, String) {
        (AddrText::default().format(a).to_owned(), a.to_string())
    }

    #[test]
    fn addr_text_is_display() {
        for s in [
            "0.0.0.0",
            "255.255.255.255",
            "10.0.9.100",
            "1.20.199.9",
            "::1",
            "2001:db8::ff00:42:8329",
            "::ffff:1.2.3.4",
            "::ffff:0.0.0.0",
            "::ffff:255.1.20.3",
            "::1.2.3.4",
            "::ffff:0:1.2.3.4",
            "::",
        ] {
            let (ours, std) = display_of(s.parse().unwrap());
            assert_eq!(ours, std, "{s}");
        }
        // IPv6 zero runs of every position and length.
        for mask in 0u16..256 {
            for fill in [0x1u16, 0xabc, 0xffff, 0x10] {
                let mut g = [0u16; 8];
                for (k, v) in g.iter_mut().enumerate() {
                    if mask & (1 << k) != 0 {
                        *v = fill.wrapping_mul(k as u16 + 1);
                    }
                }
                let (ours, std) = display_of(IpAddr::from(std::net::Ipv6Addr::from(g)));
                assert_eq!(ours, std);
            }
        }
        // Every octet value.
        for o in 0..=255u8 {
            let (ours, std) = display_of(IpAddr::from([o, 255 - o, o / 3, 7]));
            assert_eq!(ours, std);
        }
    }
}
