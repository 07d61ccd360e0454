//! Reading `ip,name` lines from a [`BufRead`]: bounded line length, header detection,
//! reasons for bad lines.
//!
//! Reads only the reader it is given; allocates at most [`MAX_LINE`] bytes per line.

use std::io::{self, BufRead};
use std::net::IpAddr;

use crate::template::Key;

/// Longest accepted line (bytes, without the newline). Longer lines are skipped and rejected
/// without being held in memory.
pub const MAX_LINE: usize = 64 * 1024;
/// Longest accepted name (bytes). DNS names are at most 253 bytes; longer values are not PTR
/// names.
pub const MAX_NAME: usize = 1024;

/// One line read by [`LineReader`].
pub enum Line<'a> {
    Text(&'a [u8]),
    /// The line was longer than [`MAX_LINE`]; its first bytes are kept for the reject.
    TooLong(&'a [u8]),
}

/// Reads lines of at most [`MAX_LINE`] bytes from a `BufRead`.
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    /// 1-based number of the last line returned.
    pub line_no: u64,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R) -> Self {
        LineReader {
            inner,
            buf: Vec::with_capacity(256),
            line_no: 0,
        }
    }

    /// The next line without its `\n` (and `\r`), or `None` at the end of the input.
    pub fn next_line(&mut self) -> io::Result<Option<(u64, Line<'_>)>> {
        self.buf.clear();
        let mut too_long = false;
        let mut any = false;
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                if !any {
                    return Ok(None);
                }
                break;
            }
            any = true;
            let (chunk, used, done) = match memchr::memchr(b'\n', avail) {
                Some(i) => (&avail[..i], i + 1, true),
                None => (avail, avail.len(), false),
            };
            if !too_long {
                if self.buf.len() + chunk.len() > MAX_LINE {
                    let keep = MAX_LINE.min(256).saturating_sub(self.buf.len());
                    self.buf.extend_from_slice(&chunk[..keep.min(chunk.len())]);
                    too_long = true;
                } else {
                    self.buf.extend_from_slice(chunk);
                }
            }
            self.inner.consume(used);
            if done {
                break;
            }
        }
        self.line_no += 1;
        if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        Ok(Some((
            self.line_no,
            if too_long {
                Line::TooLong(&self.buf)
            } else {
                Line::Text(&self.buf)
            },
        )))
    }
}

/// Why a line was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectReason {
    NoComma,
    BadIp,
    EmptyName,
    NameTooLong,
    NameNotUtf8,
    LineTooLong,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::NoComma => "no comma: expected `ip,name`",
            RejectReason::BadIp => "first field is not an IPv4 or IPv6 address",
            RejectReason::EmptyName => "empty name",
            RejectReason::NameTooLong => "name longer than 1024 bytes",
            RejectReason::NameNotUtf8 => "name is not valid UTF-8",
            RejectReason::LineTooLong => "line longer than 65536 bytes",
        }
    }
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses one line into its key and name. Surrounding spaces of both fields are ignored; the
/// name is everything after the first comma (names never contain commas, but keep it lossless).
pub fn parse_line(line: &[u8]) -> Result<(Key, &[u8]), RejectReason> {
    let comma = memchr::memchr(b',', line).ok_or(RejectReason::NoComma)?;
    let ip = trim(&line[..comma]);
    let name = trim(&line[comma + 1..]);
    let ip = parse_ip(ip).ok_or(RejectReason::BadIp)?;
    if name.is_empty() {
        return Err(RejectReason::EmptyName);
    }
    if name.len() > MAX_NAME {
        return Err(RejectReason::NameTooLong);
    }
    if !name.is_ascii() && std::str::from_utf8(name).is_err() {
        return Err(RejectReason::NameNotUtf8);
    }
    Ok((Key::from_ip(ip), name))
}

/// True for a header line: its first field is a word (`ip`, `addr`, `saddr`, …), not an address.
pub fn is_header(line: &[u8]) -> bool {
    let first = match memchr::memchr(b',', line) {
        Some(c) => trim(&line[..c]),
        None => return false,
    };
    !first.is_empty()
        && first
            .iter()
            .all(|b| b.is_ascii_alphabetic() || *b == b'_' || *b == b'"')
        && parse_ip(first).is_none()
}

fn parse_ip(s: &[u8]) -> Option<IpAddr> {
    // Fast path for dotted IPv4 (the bulk of the input).
    if s.len() <= 15 && s.iter().all(|b| b.is_ascii_digit() || *b == b'.') {
        return parse_v4(s).map(IpAddr::V4);
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

fn parse_v4(s: &[u8]) -> Option<std::net::Ipv4Addr> {
    let mut octets = [0u8; 4];
    let mut n = 0;
    for part in s.split(|b| *b == b'.') {
        if n == 4 || part.is_empty() || part.len() > 3 || (part.len() > 1 && part[0] == b'0') {
            return None;
        }
        let mut v: u32 = 0;
        for &d in part {
            v = v * 10 + u32::from(d - b'0');
        }
        octets[n] = u8::try_from(v).ok()?;
        n += 1;
    }
    (n == 4).then(|| std::net::Ipv4Addr::from(octets))
}

fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        assert!(parse_line(b"1.2.3.4,a.b").is_ok());
        assert_eq!(
            parse_line(b"::ffff:1.2.3.4,a").unwrap().0,
            Key::V4(0x01020304)
        );
        assert_eq!(parse_line(b"1.2.3,a").unwrap_err(), RejectReason::BadIp);
        assert_eq!(parse_line(b"01.2.3.4,a").unwrap_err(), RejectReason::BadIp);
        assert_eq!(parse_line(b"256.2.3.4,a").unwrap_err(), RejectReason::BadIp);
        assert_eq!(parse_line(b"1.2.3.4").unwrap_err(), RejectReason::NoComma);
        assert_eq!(
            parse_line(b"1.2.3.4,").unwrap_err(),
            RejectReason::EmptyName
        );
        assert_eq!(
            parse_line(b"1.2.3.4,\xff").unwrap_err(),
            RejectReason::NameNotUtf8
        );
        assert!(is_header(b"ip,name"));
        assert!(!is_header(b"1.2.3.4,name"));
        assert!(!is_header(b"::1,name"));
    }

    #[test]
    fn long_lines_are_cut_not_held() {
        let mut data = vec![b'x'; MAX_LINE + 10];
        data.extend_from_slice(b"\n1.2.3.4,a\r\n");
        let mut r = LineReader::new(std::io::BufReader::with_capacity(1000, &data[..]));
        assert!(matches!(
            r.next_line().unwrap(),
            Some((1, Line::TooLong(_)))
        ));
        match r.next_line().unwrap() {
            Some((2, Line::Text(t))) => assert_eq!(t, b"1.2.3.4,a"),
            _ => panic!("expected a line"),
        }
        assert!(r.next_line().unwrap().is_none());
        assert_eq!(r.line_no, 2);
    }
}
