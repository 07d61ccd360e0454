//! Key-relative name templates: a PTR name that embeds its own address (`c-73-15-2-1.…`,
//! `static.1.2.15.73.…`, `host-073-015-002-001.…`, hex for IPv6) is stored with the embedded
//! address replaced by a one-byte token, so that the names of neighbouring addresses become
//! identical strings and compress to almost nothing.
//!
//! Pure functions over byte slices; touches no file and no global state.
//!
//! Encoding (lossless for every byte string):
//! - a byte `0x01..=0x0E` is a token: "the key rendered in style N" (see [`render`]);
//! - a byte `0x00` escapes the next byte, which is literal (used for raw bytes `< 0x10`);
//! - `0x0F` is reserved; every other byte is literal.
//!
//! Renderings contain only `[0-9a-f.-]`, never a byte `< 0x10`, so a rendering can never
//! straddle a token and replacing styles one after the other stays reversible.

use std::fmt::Write as _;

/// An address key: IPv4 as `u32`, IPv6 as `u128` (IPv4-mapped IPv6 is always IPv4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    V4(u32),
    V6(u128),
}

impl Key {
    /// The key of an address; `::ffff:a.b.c.d` becomes the IPv4 key `a.b.c.d`.
    pub fn from_ip(ip: std::net::IpAddr) -> Key {
        match ip {
            std::net::IpAddr::V4(a) => Key::V4(u32::from(a)),
            std::net::IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => Key::V4(u32::from(v4)),
                None => Key::V6(u128::from(a)),
            },
        }
    }
}

/// Escape byte: the next byte is literal.
const ESC: u8 = 0x00;
/// Highest token byte in use.
const MAX_TOKEN: u8 = 0x0E;

/// IPv4 styles, longest (most specific) first. Token = index + 1.
const V4_STYLES: usize = 9;
/// IPv6 styles. Token = index + 1.
const V6_STYLES: usize = 5;

/// Renders `key` in style `style` (0-based) into `out` (cleared first).
/// Returns false when the style does not exist for the key's family.
pub fn render(key: Key, style: usize, out: &mut String) -> bool {
    out.clear();
    match key {
        Key::V4(v) => {
            let [a, b, c, d] = v.to_be_bytes();
            match style {
                // 001-002-003-004 and 001002003004 (zero-padded)
                0 => octets(out, &[a, b, c, d], Some('-'), true),
                1 => octets(out, &[a, b, c, d], None, true),
                // 1-2-3-4, 1.2.3.4, 4-3-2-1, 4.3.2.1
                2 => octets(out, &[a, b, c, d], Some('-'), false),
                3 => octets(out, &[a, b, c, d], Some('.'), false),
                4 => octets(out, &[d, c, b, a], Some('-'), false),
                5 => octets(out, &[d, c, b, a], Some('.'), false),
                // 0a0b0c0d
                6 => {
                    for i in (0..8).rev() {
                        out.push(HEX[((v >> (4 * i)) & 0xf) as usize] as char);
                    }
                }
                // partial forms after the full ones: 2-3-4 (last three octets), 3-4
                7 => octets(out, &[b, c, d], Some('-'), false),
                8 => octets(out, &[c, d], Some('-'), false),
                _ => return false,
            }
            true
        }
        Key::V6(v) => {
            let groups: [u16; 8] = std::array::from_fn(|i| (v >> (112 - 16 * i)) as u16);
            match style {
                // 32 hex digits
                0 => write!(out, "{v:032x}").is_ok(),
                // ip6.arpa nibbles, least significant first: "d.c.b.a.…"
                1 => {
                    for i in 0..32 {
                        if i > 0 {
                            out.push('.');
                        }
                        let nib = ((v >> (4 * i)) & 0xf) as u32;
                        out.push(char::from_digit(nib, 16).unwrap_or('0'));
                    }
                    true
                }
                // 2001-0db8-0000-…: full groups with dashes
                2 => {
                    for (i, g) in groups.iter().enumerate() {
                        if i > 0 {
                            out.push('-');
                        }
                        let _ = write!(out, "{g:04x}");
                    }
                    true
                }
                // the canonical compressed text with ':' replaced by '-' (2001-db8--1)
                3 => {
                    let s = std::net::Ipv6Addr::from(v).to_string();
                    out.push_str(&s.replace(':', "-"));
                    true
                }
                // the low 64 bits as groups without padding: 0-0-0-1 style interface ids
                4 => {
                    for (i, g) in groups[4..].iter().enumerate() {
                        if i > 0 {
                            out.push('-');
                        }
                        let _ = write!(out, "{g:x}");
                    }
                    true
                }
                _ => false,
            }
        }
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn octets(out: &mut String, o: &[u8], sep: Option<char>, pad: bool) {
    for (i, &x) in o.iter().enumerate() {
        if i > 0 {
            if let Some(s) = sep {
                out.push(s);
            }
        }
        if pad || x >= 100 {
            out.push((b'0' + x / 100) as char);
        }
        if pad || x >= 10 {
            out.push((b'0' + x / 10 % 10) as char);
        }
        out.push((b'0' + x % 10) as char);
    }
}

fn style_count(key: Key) -> usize {
    match key {
        Key::V4(_) => V4_STYLES,
        Key::V6(_) => V6_STYLES,
    }
}

/// Reusable scratch for [`encode`] (avoids allocating per name).
#[derive(Default)]
pub struct Encoder {
    render: String,
    work: Vec<u8>,
    next: Vec<u8>,
}

impl Encoder {
    /// Encodes `name` relative to `key` into `out` (appended).
    pub fn encode(&mut self, key: Key, name: &[u8], out: &mut Vec<u8>) {
        // Escape first: raw bytes < 0x10 become ESC + byte (never inside a rendering).
        self.work.clear();
        for &b in name {
            if b <= 0x0F {
                self.work.push(ESC);
            }
            self.work.push(b);
        }
        // Names without a digit embed no address (plain host names): nothing to look for.
        if !self.work.iter().any(u8::is_ascii_digit) {
            out.extend_from_slice(&self.work);
            return;
        }
        for style in 0..style_count(key) {
            if !render(key, style, &mut self.render) {
                continue;
            }
            let pat = self.render.as_bytes();
            if pat.len() < 3 || pat.len() > self.work.len() {
                continue;
            }
            let Some(first) = memchr::memmem::find(&self.work, pat) else {
                continue;
            };
            self.next.clear();
            let mut pos = 0;
            // A match never contains an escape pair: escaped bytes are < 0x10 and renderings
            // are made of [0-9a-f.-] only.
            let mut m = first;
            loop {
                self.next.extend_from_slice(&self.work[pos..m]);
                self.next.push(style as u8 + 1);
                pos = m + pat.len();
                match memchr::memmem::find(&self.work[pos..], pat) {
                    Some(x) => m = pos + x,
                    None => break,
                }
            }
            self.next.extend_from_slice(&self.work[pos..]);
            std::mem::swap(&mut self.work, &mut self.next);
        }
        out.extend_from_slice(&self.work);
    }
}

/// Error of [`decode`]: the stored bytes are not a valid encoding.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("escape byte at the end of a stored name")]
    DanglingEscape,
    #[error("unknown template token {0:#04x} in a stored name")]
    BadToken(u8),
}

/// Decodes an encoded name relative to `key`, appending the original bytes to `out`.
pub fn decode(key: Key, enc: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let mut render_buf = String::new();
    let mut i = 0;
    while i < enc.len() {
        let b = enc[i];
        if b == ESC {
            let lit = *enc.get(i + 1).ok_or(DecodeError::DanglingEscape)?;
            out.push(lit);
            i += 2;
        } else if b <= MAX_TOKEN {
            let style = (b - 1) as usize;
            if !render(key, style, &mut render_buf) {
                return Err(DecodeError::BadToken(b));
            }
            out.extend_from_slice(render_buf.as_bytes());
            i += 1;
        } else if b == 0x0F {
            return Err(DecodeError::BadToken(b));
        } else {
            out.push(b);
            i += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(key: Key, name: &[u8]) -> Vec<u8> {
        let mut enc = Vec::new();
        Encoder::default().encode(key, name, &mut enc);
        let mut dec = Vec::new();
        decode(key, &enc, &mut dec).expect("decode");
        assert_eq!(
            dec,
            name,
            "roundtrip of {:?}",
            String::from_utf8_lossy(name)
        );
        enc
    }

    #[test]
    fn templates_common_shapes() {
        let k = Key::V4(u32::from_be_bytes([73, 15, 2, 1]));
        assert_eq!(
            roundtrip(k, b"c-73-15-2-1.hsd1.ca.comcast.net"),
            b"c-\x03.hsd1.ca.comcast.net"
        );
        assert_eq!(
            roundtrip(k, b"static.1.2.15.73.clients.x.de"),
            b"static.\x06.clients.x.de"
        );
        assert_eq!(
            roundtrip(k, b"host-073-015-002-001.x.net"),
            b"host-\x01.x.net"
        );
        assert_eq!(roundtrip(k, b"h073015002001.x.net"), b"h\x02.x.net");
        assert_eq!(roundtrip(k, b"mail.example.org"), b"mail.example.org");
        let k6 = Key::V6(u128::from(
            "2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap(),
        ));
        assert_eq!(roundtrip(k6, b"2001-db8--1.v6.isp.net"), b"\x04.v6.isp.net");
        roundtrip(k6, b"x20010db8000000000000000000000001.v6");
    }

    #[test]
    fn control_bytes_and_escapes_roundtrip() {
        let k = Key::V4(0x01020304);
        roundtrip(k, b"\x00\x01-1-2-3-4\x00");
        roundtrip(k, b"\x001-2-3-4");
        roundtrip(k, b"\x00\x001-2-3-4\x0f\x0e");
        roundtrip(k, b"");
    }

    #[test]
    fn decode_rejects_garbage() {
        let k = Key::V4(1);
        assert!(decode(k, b"a\x00", &mut Vec::new()).is_err());
        assert!(decode(k, b"a\x0f", &mut Vec::new()).is_err());
        assert!(decode(Key::V6(1), b"\x0e", &mut Vec::new()).is_err());
    }
}
