//! Turning matched access-log fields into typed Arrow columns.
//!
//! Pure computation: builders in memory, nothing else touched.
//!
//! ## Value rules
//! - `-` alone means "no value" in every field: null.
//! - Client address (`remote_addr`): canonical IP text (`silt_core::addr`); a host name (Apache
//!   with `HostnameLookups on`) is kept as written.
//! - Text fields decode the escapes servers write: `\"` -> `"`, `\\` -> `\`, and `\xHH` when HH
//!   is printable ASCII (nginx writes `"` as `\x22`). Other `\xHH` (control bytes, the bytes of
//!   a TLS handshake sent to a plain-HTTP port) stay as the four characters, so columns stay
//!   valid UTF-8 and the original bytes remain visible.
//! - The request line `METHOD TARGET PROTOCOL` fills `method`, `path` (the request target,
//!   query string included) and `protocol`, and leaves `request` null. A request line that does
//!   not have that shape (`-` aside: garbage such as `\x16\x03\x01`, HTTP/0.9 `GET /`, a line cut
//!   short) leaves the three null and is kept whole in `request`, so nothing is lost while the
//!   common case stores no duplicate text. METHOD is `[A-Z_-]+`, PROTOCOL starts with `HTTP/`
//!   (or `HTTPS/`, `RTSP/`...: any `[A-Z]+/`), TARGET is everything between the first and the last space.
//! - Numbers (status, bytes, ports, times in µs) must be plain decimal digits and fit their
//!   type; time must parse. Otherwise the whole line does not match (the reader rejects it;
//!   `--parse-field` keeps the row with null parsed columns).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float64Builder, StringBuilder, TimestampMicrosecondBuilder, UInt16Builder,
    UInt64Builder,
};
use arrow::datatypes::{DataType, Field};
use silt_core::meta;

use crate::format::{FieldKind, LogFormat};

/// One output column of a format.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub data_type: DataType,
    /// The format variable it comes from (`$status`), stored as `silt.source_type`.
    pub source: String,
}

impl Column {
    pub fn field(&self) -> Field {
        Field::new(&self.name, self.data_type.clone(), true).with_metadata(HashMap::from([(
            meta::SOURCE_TYPE.to_string(),
            self.source.clone(),
        )]))
    }
}

/// The output columns of a format, in order.
pub fn columns(f: &LogFormat) -> Vec<Column> {
    let mut out = Vec::new();
    for d in &f.fields {
        let col = |name: &str, dt: DataType| Column {
            name: name.to_string(),
            data_type: dt,
            source: d.source.clone(),
        };
        match d.kind {
            FieldKind::Request => {
                // With a suffixed duplicate (`request_2`) the parts get the same suffix.
                let sfx = d.name.strip_prefix("request").unwrap_or("");
                for n in ["method", "path", "protocol", "request"] {
                    out.push(col(&format!("{n}{sfx}"), DataType::Utf8));
                }
            }
            FieldKind::Addr | FieldKind::Text => out.push(col(&d.name, DataType::Utf8)),
            FieldKind::TimeLocal | FieldKind::TimeIso | FieldKind::TimeEpoch => {
                out.push(col(&d.name, silt_core::time::timestamp_type()))
            }
            FieldKind::UInt16 => out.push(col(&d.name, DataType::UInt16)),
            FieldKind::UInt64 => out.push(col(&d.name, DataType::UInt64)),
            FieldKind::Float64 => out.push(col(&d.name, DataType::Float64)),
        }
    }
    out
}

enum Builder {
    Str(StringBuilder),
    U16(UInt16Builder),
    U64(UInt64Builder),
    F64(Float64Builder),
    Ts(TimestampMicrosecondBuilder),
}

impl Builder {
    fn new(dt: &DataType, cap: usize) -> Self {
        Self::sized(dt, cap, cap * 16)
    }
    /// With room for `cap` values and, for strings, `bytes` bytes of text.
    fn sized(dt: &DataType, cap: usize, bytes: usize) -> Self {
        match dt {
            DataType::UInt16 => Builder::U16(UInt16Builder::with_capacity(cap)),
            DataType::UInt64 => Builder::U64(UInt64Builder::with_capacity(cap)),
            DataType::Float64 => Builder::F64(Float64Builder::with_capacity(cap)),
            DataType::Timestamp(..) => {
                Builder::Ts(TimestampMicrosecondBuilder::with_capacity(cap).with_timezone("UTC"))
            }
            _ => Builder::Str(StringBuilder::with_capacity(cap, bytes)),
        }
    }
    fn null(&mut self) {
        match self {
            Builder::Str(b) => b.append_null(),
            Builder::U16(b) => b.append_null(),
            Builder::U64(b) => b.append_null(),
            Builder::F64(b) => b.append_null(),
            Builder::Ts(b) => b.append_null(),
        }
    }
    fn str(&mut self, s: Option<&str>) {
        if let Builder::Str(b) = self {
            b.append_option(s)
        }
    }
    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Str(b) => Arc::new(b.finish()),
            Builder::U16(b) => Arc::new(b.finish()),
            Builder::U64(b) => Arc::new(b.finish()),
            Builder::F64(b) => Arc::new(b.finish()),
            Builder::Ts(b) => Arc::new(b.finish()),
        }
    }
}

/// A parsed number or time, staged before any column is appended to so that a line that fails
/// half-way appends nothing.
#[derive(Clone, Copy)]
enum Num {
    None,
    U(u64),
    F(f64),
    T(i64),
}

/// Builds the typed columns of one format, one line at a time.
pub struct RowBuilder {
    format: Arc<LogFormat>,
    columns: Vec<Column>,
    builders: Vec<Builder>,
    /// Index of each field's first output column.
    first_col: Vec<usize>,
    spans: Vec<Option<(usize, usize)>>,
    nums: Vec<Num>,
    rows: usize,
    cap: usize,
}

impl RowBuilder {
    pub fn new(format: Arc<LogFormat>, capacity: usize) -> Self {
        let columns = columns(&format);
        let mut first_col = Vec::new();
        let mut c = 0;
        for d in &format.fields {
            first_col.push(c);
            c += if d.kind == FieldKind::Request { 4 } else { 1 };
        }
        let builders = columns
            .iter()
            .map(|c| Builder::new(&c.data_type, capacity))
            .collect();
        RowBuilder {
            nums: vec![Num::None; format.fields.len()],
            format,
            columns,
            builders,
            first_col,
            spans: Vec::new(),
            rows: 0,
            cap: capacity,
        }
    }

    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Rows appended since the last [`RowBuilder::finish`].
    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Appends a row of nulls.
    pub fn push_null(&mut self) {
        for b in &mut self.builders {
            b.null();
        }
        self.rows += 1;
    }

    /// Parses `line` and appends its values; on `Err` (the reason, for a reject) nothing was appended.
    pub fn push_line(&mut self, line: &str) -> Result<(), String> {
        let bytes = line.as_bytes();
        if let Err(e) = self.format.match_line(bytes, &mut self.spans) {
            return Err(format!(
                "does not match the log format {:?} at byte {}: expected {}",
                self.format.spec, e.pos, e.expected
            ));
        }
        // Pass 1: everything that can fail.
        for (i, d) in self.format.fields.iter().enumerate() {
            let Some((a, b)) = self.spans[i] else {
                self.nums[i] = Num::None;
                continue;
            };
            let v = &line[a..b];
            self.nums[i] = if v == "-" {
                Num::None
            } else {
                match d.kind {
                    FieldKind::UInt16 => match parse_uint(v) {
                        Some(n) if n <= u16::MAX as u64 => Num::U(n),
                        _ => return Err(format!("{} is not a number 0..65535: {v:?}", d.source)),
                    },
                    FieldKind::UInt64 => match parse_uint(v) {
                        Some(n) => Num::U(n),
                        None => return Err(format!("{} is not a number: {v:?}", d.source)),
                    },
                    FieldKind::Float64 => match v.parse::<f64>() {
                        Ok(f) if f.is_finite() => Num::F(f),
                        _ => return Err(format!("{} is not a number: {v:?}", d.source)),
                    },
                    FieldKind::TimeLocal => match parse_time_local(v.as_bytes()) {
                        Some(t) => Num::T(t),
                        None => {
                            return Err(format!(
                                "{} is not a time dd/Mon/yyyy:HH:MM:SS +zzzz: {v:?}",
                                d.source
                            ))
                        }
                    },
                    FieldKind::TimeIso => match silt_core::time::parse_iso8601(v) {
                        Some(t) => Num::T(t),
                        None => return Err(format!("{} is not an ISO 8601 time: {v:?}", d.source)),
                    },
                    FieldKind::TimeEpoch => match silt_core::time::parse_epoch_seconds(v) {
                        Some(t) => Num::T(t),
                        None => return Err(format!("{} is not epoch seconds: {v:?}", d.source)),
                    },
                    _ => Num::None,
                }
            };
        }
        // Pass 2: append.
        for (i, d) in self.format.fields.iter().enumerate() {
            let c = self.first_col[i];
            let v = self.spans[i]
                .map(|(a, b)| &line[a..b])
                .filter(|v| *v != "-");
            match d.kind {
                FieldKind::Addr => {
                    let b = &mut self.builders[c];
                    match v {
                        None => b.null(),
                        Some(v) => match v.parse::<std::net::IpAddr>() {
                            // `Display` of a parsed address is the canonical text. Rust's IPv4
                            // parser refuses leading zeros, so a parsed IPv4 address already is
                            // canonical: skip the allocation in that (usual) case.
                            Ok(std::net::IpAddr::V4(_)) => b.str(Some(v)),
                            Ok(ip) => {
                                let canon = ip.to_string();
                                b.str(Some(&canon))
                            }
                            Err(_) => b.str(Some(v)),
                        },
                    }
                }
                FieldKind::Text => {
                    let u = v.map(unescape);
                    self.builders[c].str(u.as_deref());
                }
                FieldKind::Request => match v.map(unescape) {
                    None => {
                        for k in 0..4 {
                            self.builders[c + k].null();
                        }
                    }
                    Some(req) => match split_request(&req) {
                        Some((m, p, pr)) => {
                            self.builders[c].str(Some(m));
                            self.builders[c + 1].str(Some(p));
                            self.builders[c + 2].str(Some(pr));
                            self.builders[c + 3].null();
                        }
                        None => {
                            for k in 0..3 {
                                self.builders[c + k].null();
                            }
                            self.builders[c + 3].str(Some(&req));
                        }
                    },
                },
                _ => {
                    let b = &mut self.builders[c];
                    match (self.nums[i], b) {
                        (Num::U(n), Builder::U16(b)) => b.append_value(n as u16),
                        (Num::U(n), Builder::U64(b)) => b.append_value(n),
                        (Num::F(f), Builder::F64(b)) => b.append_value(f),
                        (Num::T(t), Builder::Ts(b)) => b.append_value(t),
                        (_, b) => b.null(),
                    }
                }
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// The columns built so far (and a fresh start, sized like this batch: batches are usually
    /// alike, and builders that start small copy every value several times as they grow).
    pub fn finish(&mut self) -> Vec<ArrayRef> {
        let cap = self.cap.max(self.rows);
        self.rows = 0;
        self.builders
            .iter_mut()
            .zip(&self.columns)
            .map(|(b, c)| {
                let a = b.finish();
                let bytes = match arrow::array::AsArray::as_string_opt::<i32>(&a) {
                    Some(s) => s.value_data().len(),
                    None => 0,
                };
                *b = Builder::sized(&c.data_type, cap, bytes);
                a
            })
            .collect()
    }
}

fn parse_uint(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Splits `METHOD TARGET PROTOCOL`; `None` when the request line does not have that shape.
pub fn split_request(r: &str) -> Option<(&str, &str, &str)> {
    let (m, rest) = r.split_once(' ')?;
    let (p, proto) = rest.rsplit_once(' ')?;
    let method_ok = !m.is_empty()
        && m.bytes()
            .all(|c| c.is_ascii_uppercase() || c == b'_' || c == b'-');
    let proto_ok = match proto.split_once('/') {
        Some((name, ver)) => {
            !name.is_empty() && name.bytes().all(|c| c.is_ascii_uppercase()) && !ver.is_empty()
        }
        None => false,
    };
    (method_ok && proto_ok && !p.is_empty()).then_some((m, p, proto))
}

/// Decodes `\"`, `\\` and printable `\xHH`; borrows when there is nothing to decode.
pub fn unescape(s: &str) -> Cow<'_, str> {
    if memchr::memchr(b'\\', s.as_bytes()).is_none() {
        return Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut last = 0;
    while i < b.len() {
        if b[i] != b'\\' || i + 1 >= b.len() {
            i += 1;
            continue;
        }
        let dec: Option<(char, usize)> = match b[i + 1] {
            b'"' => Some(('"', 2)),
            b'\\' => Some(('\\', 2)),
            b'x' if i + 4 <= b.len() => {
                let hex = std::str::from_utf8(&b[i + 2..i + 4]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) if (0x20..0x7f).contains(&v) => Some((v as char, 4)),
                    _ => None,
                }
            }
            _ => None,
        };
        match dec {
            Some((c, n)) => {
                out.push_str(&s[last..i]);
                out.push(c);
                i += n;
                last = i;
            }
            None => i += 1,
        }
    }
    out.push_str(&s[last..]);
    Cow::Owned(out)
}

/// Parses `$time_local` / `%t`: `20/Jul/2009:22:59:26 +0000` to UTC microseconds.
/// Hand-written: fixed layout, on every line's path, and chrono's `%b` parsing is locale-free
/// but several times slower than this table lookup.
pub fn parse_time_local(s: &[u8]) -> Option<i64> {
    if s.len() != 26
        || s[2] != b'/'
        || s[6] != b'/'
        || s[11] != b':'
        || s[14] != b':'
        || s[17] != b':'
        || s[20] != b' '
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let mut v = 0i64;
        for &c in &s[r] {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + (c - b'0') as i64;
        }
        Some(v)
    };
    let day = num(0..2)?;
    let month = match &s[3..6] {
        b"Jan" => 1,
        b"Feb" => 2,
        b"Mar" => 3,
        b"Apr" => 4,
        b"May" => 5,
        b"Jun" => 6,
        b"Jul" => 7,
        b"Aug" => 8,
        b"Sep" => 9,
        b"Oct" => 10,
        b"Nov" => 11,
        b"Dec" => 12,
        _ => return None,
    };
    let year = num(7..11)?;
    let (h, mi, sec) = (num(12..14)?, num(15..17)?, num(18..20)?);
    let sign = match s[21] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (oh, om) = (num(22..24)?, num(24..26)?);
    let dim = [
        31,
        if is_leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day < 1 || day > dim[month as usize - 1] || h > 23 || mi > 59 || sec > 60 || om > 59 {
        return None;
    }
    let days = silt_core::time::days_from_civil(year, month, day);
    let local = days * 86_400 + h * 3600 + mi * 60 + sec;
    let utc = local - sign * (oh * 3600 + om * 60);
    Some(utc * 1_000_000)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_local() {
        // 2009-07-20T22:59:26Z = 1248130766
        assert_eq!(
            parse_time_local(b"20/Jul/2009:22:59:26 +0000"),
            Some(1_248_130_766_000_000)
        );
        // +0330: local 03:56:14 is 00:26:14 UTC. 2019-01-22T00:26:14Z = 1548116774
        assert_eq!(
            parse_time_local(b"22/Jan/2019:03:56:14 +0330"),
            Some(1_548_116_774_000_000)
        );
        // -0700: 00:01:26 local is 07:01:26 UTC. 2023-07-26T07:01:26Z = 1690354886
        assert_eq!(
            parse_time_local(b"26/Jul/2023:00:01:26 -0700"),
            Some(1_690_354_886_000_000)
        );
        assert_eq!(parse_time_local(b"30/Feb/2023:00:01:26 -0700"), None);
        assert_eq!(parse_time_local(b"20/Jux/2009:22:59:26 +0000"), None);
    }

    #[test]
    fn requests() {
        assert_eq!(
            split_request("GET /a b HTTP/1.1"),
            Some(("GET", "/a b", "HTTP/1.1"))
        );
        assert_eq!(split_request("GET /"), None);
        assert_eq!(split_request(r"\x16\x03\x01"), None);
        assert_eq!(split_request("get / HTTP/1.1"), None);
    }

    #[test]
    fn unescapes() {
        assert_eq!(
            unescape(r#"a \"b\" \\ \x22c\x22 \x16"#),
            r#"a "b" \ "c" \x16"#
        );
        assert!(matches!(unescape("plain"), Cow::Borrowed(_)));
        assert_eq!(unescape(r"end\"), r"end\");
    }
}
