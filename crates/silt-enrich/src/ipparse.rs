//! Parsing address text from the bytes of a Utf8 column, and the cache key of an address.
//!
//! Touches nothing but its arguments. IPv4 text (the common case) is parsed by a hand-written
//! loop that accepts exactly what `std`'s `Ipv4Addr` parser accepts (four decimal octets, no
//! leading zeros, nothing around them); everything else goes to `std`'s `IpAddr` parser. A
//! property test checks the fast path against `std`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Parses canonical (or any `std`-accepted) address text. Surrounding whitespace is not
/// accepted, as silt stores canonical text.
#[inline]
pub fn parse_ip(b: &[u8]) -> Option<IpAddr> {
    if let Some(v4) = parse_v4_fast(b) {
        return Some(IpAddr::V4(v4));
    }
    // Only IPv6 text (or garbage) reaches here; a string with a ':' is the only IPv6 candidate.
    if b.len() < 2 || b.len() > 64 || !b.contains(&b':') {
        return None;
    }
    std::str::from_utf8(b)
        .ok()?
        .parse::<Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

/// Dotted-quad IPv4 without leading zeros, the same language as `std`'s parser.
#[inline]
fn parse_v4_fast(b: &[u8]) -> Option<Ipv4Addr> {
    if b.len() < 7 || b.len() > 15 {
        return None;
    }
    let mut octets = [0u8; 4];
    let mut n = 0usize; // octet index
    let mut val: u32 = 0;
    let mut digits = 0u32;
    let mut first_zero = false;
    for &c in b {
        match c {
            b'0'..=b'9' => {
                if digits == 0 {
                    first_zero = c == b'0';
                } else if first_zero {
                    return None; // leading zero
                }
                val = val * 10 + u32::from(c - b'0');
                digits += 1;
                if digits > 3 || val > 255 {
                    return None;
                }
            }
            b'.' => {
                if digits == 0 || n == 3 {
                    return None;
                }
                octets[n] = val as u8;
                n += 1;
                val = 0;
                digits = 0;
            }
            _ => return None,
        }
    }
    if n != 3 || digits == 0 {
        return None;
    }
    octets[3] = val as u8;
    Some(Ipv4Addr::from(octets))
}

/// The address a database is asked about: IPv4-mapped IPv6 (`::ffff:1.2.3.4`) becomes the
/// IPv4 address, so it resolves exactly like `1.2.3.4` whatever the database's aliasing.
#[inline]
pub fn lookup_addr(ip: IpAddr) -> IpAddr {
    ip.to_canonical()
}

/// The cache key of an address after [`lookup_addr`]: IPv4 as its IPv4-mapped 128-bit value.
#[inline]
pub fn key(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(v4.to_ipv6_mapped()),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn std_parse(s: &str) -> Option<IpAddr> {
        s.parse().ok()
    }

    #[test]
    fn examples() {
        for s in [
            "10.0.0.1",
            "255.255.255.255",
            "0.0.0.0",
            "01.2.3.4",
            "1.2.3",
            "1.2.3.4.",
            ".1.2.3.4",
            "1..2.3",
            "256.1.1.1",
            "1.2.3.4 ",
            "2001:db8::1",
            "::ffff:1.2.3.4",
            "::",
            "fe80::1%eth0",
            "",
            "nope",
            "1.2.3.0004",
            "100.200.300.1",
        ] {
            assert_eq!(parse_ip(s.as_bytes()), std_parse(s), "{s:?}");
        }
        assert_eq!(
            lookup_addr("::ffff:1.2.3.4".parse().unwrap()),
            "1.2.3.4".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            key("1.2.3.4".parse().unwrap()),
            key(lookup_addr("::ffff:1.2.3.4".parse().unwrap()))
        );
    }

    proptest! {
        #[test]
        fn fast_path_matches_std(s in "[0-9.:a-f]{0,20}") {
            prop_assert_eq!(parse_ip(s.as_bytes()), std_parse(&s));
        }

        #[test]
        fn dotted_quads_match_std(a in 0u32..400, b in 0u32..300, c in 0u32..300, d in 0u32..1000, z in any::<bool>()) {
            let s = if z { format!("{a}.{b}.0{c}.{d}") } else { format!("{a}.{b}.{c}.{d}") };
            prop_assert_eq!(parse_ip(s.as_bytes()), std_parse(&s));
        }
    }
}
