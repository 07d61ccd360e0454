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
    s.trim().parse::<IpAddr>().ok().map(|a| a.to_string())
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
    }
}
