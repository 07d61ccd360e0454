//! What a format is, for the one format registry (`silt_ingest::registry`): a [`FormatSpec`]
//! names the format, says which files and first bytes look like it, and makes a
//! [`Decoder`] for one stream from the options the user gave.
//!
//! Each format declares its spec in its own file, next to its decoder (for example
//! `silt_logs::ltsv::FORMAT`); the registry only lists them. Options reach a decoder through
//! [`FormatOptions`]: the options every format honours ([`ReadOptions`]) plus one options
//! struct per format family, looked up by type (`silt_logs::LogOptions`,
//! `silt_access::AccessOptions`, `silt_pcap::PcapOptions`), so a new format with options of its
//! own needs no change here or in the registry.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::decode::Decoder;
use crate::{ReadOptions, SourceInfo};

/// How sure a sniffer is that the first bytes are its format, from 1 (could be) to 100 (magic
/// number). The registry takes the most confident; ties go to the earlier registry entry.
pub type Confidence = u8;

/// The first bytes of a stream (decompressed) and its file name, for sniffing.
#[derive(Debug, Clone, Copy)]
pub struct Probe<'a> {
    /// Up to 64 KiB of the start of the stream (less if the stream is shorter).
    pub head: &'a [u8],
    /// The file name without directories and `.gz`, when the stream is a file.
    pub file_name: Option<&'a str>,
}

impl<'a> Probe<'a> {
    /// The head without leading white space and a UTF-8 byte-order mark.
    pub fn text(&self) -> &'a [u8] {
        let h = crate::decode::strip_bom(self.head);
        let start = h
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .unwrap_or(h.len());
        &h[start..]
    }

    /// The first non-blank lines of the head (without `\r`), at most `n`; the last line of a
    /// head cut short is left out unless it is the only one.
    pub fn lines(&self, n: usize) -> Vec<&'a [u8]> {
        let text = self.text();
        // A head cut at PROBE_BYTES may end inside a line: leave that line out.
        let body = match memchr::memrchr(b'\n', text) {
            Some(i) if self.head.len() >= PROBE_BYTES => &text[..i],
            _ => text,
        };
        body.split(|&c| c == b'\n')
            .map(crate::decode::strip_cr)
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
            .take(n)
            .collect()
    }

    /// The file name's extension after `.gz` is removed, lower case (`conn.log.gz` -> `log`).
    pub fn extension(&self) -> Option<String> {
        let name = self.file_name?.to_ascii_lowercase();
        let name = name.strip_suffix(".gz").unwrap_or(&name).to_string();
        name.rsplit_once('.').map(|(_, e)| e.to_string())
    }
}

/// How many bytes a probe holds at most.
pub const PROBE_BYTES: usize = 64 << 10;

/// Why an input that starts with `head` is binary data rather than lines of text, when its first
/// line (after a byte-order mark, blank lines and zero padding, within [`PROBE_BYTES`]) holds a
/// NUL byte: text formats (Zeek, which escapes every unprintable byte, EVE, JSON, CSV, LTSV,
/// syslog, access logs) never have one there, while executables, captures, Parquet and
/// compressed files of another kind have them within their first bytes. Read line by line, such
/// a file became a reject per "line", and in the line formats that accept almost anything (CSV,
/// LTSV, syslog) rows of junk in a new table: `silt import csv /bin/ls` imported 120 of them. A
/// NUL inside a line further on is left to the line it is in.
pub fn binary_head(head: &[u8]) -> Option<String> {
    let head = &head[..head.len().min(PROBE_BYTES)];
    // Zero padding where a line starts is skipped, not judged (`crate::decode`).
    let body = without_padding(crate::decode::strip_bom(head));
    let body = &body[body.iter().take_while(|c| c.is_ascii_whitespace()).count()..];
    let first = body.split(|&c| c == b'\n').next().unwrap_or(body);
    let at = first.iter().position(|&c| c == 0)?;
    let shown: Vec<String> = head.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Some(format!(
        "its first line holds a NUL byte (at offset {at}; the input starts with bytes {})",
        shown.join(" ")
    ))
}

/// `head` without the runs of NUL bytes where its lines start: zero padding, which the line
/// framer skips (`crate::decode`'s padding rule), so detection judges the lines as the decoder
/// will see them.
pub fn without_padding(head: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if memchr::memchr(0, head).is_none() {
        return std::borrow::Cow::Borrowed(head);
    }
    let mut out = Vec::with_capacity(head.len());
    let mut at_line_start = true;
    for &b in head {
        if !(b == 0 && at_line_start) {
            out.push(b);
            at_line_start = b == b'\n';
        }
    }
    std::borrow::Cow::Owned(out)
}

/// One format; see the module documentation.
#[derive(Clone, Copy)]
pub struct FormatSpec {
    /// The name on the command line (`zeek`, `ltsv`, `pcap`).
    pub name: &'static str,
    /// Other names accepted on the command line (`ndjson` for `json`).
    pub aliases: &'static [&'static str],
    /// One line for `--help`: what the format is and which table(s) it fills.
    pub summary: &'static str,
    /// File extensions that name the format (without the dot, `.gz` looked through), used by
    /// `silt convert` and as a tie-breaker when sniffing.
    pub extensions: &'static [&'static str],
    /// How sure the first bytes are this format; `None` = not this format. A format that must
    /// never be guessed returns `None` always.
    pub sniff: fn(&Probe<'_>) -> Option<Confidence>,
    /// A decoder for one stream.
    pub open: fn(&FormatOptions, &SourceInfo) -> anyhow::Result<Box<dyn Decoder>>,
    /// The records hold named text fields, so `--parse-field` can apply (generic logs); false
    /// for formats with a fixed schema (Zeek, EVE, pcap).
    pub text_fields: bool,
    /// The format is lines of text: an input whose first line holds a NUL byte is not this
    /// format ([`binary_head`]) and is refused whole instead of line by line.
    pub text: bool,
}

impl FormatSpec {
    /// Whether `name` is this format's name or one of its aliases (case-insensitive).
    pub fn is_named(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
            || self.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    }

    /// Checks `opts` for this format by making a decoder for standard input (options are
    /// parsed and validated when a decoder is made), so a bad option is an error before any
    /// input is read.
    pub fn check(&self, opts: &FormatOptions) -> anyhow::Result<()> {
        (self.open)(opts, &SourceInfo::stdin()).map(|_| ())
    }
}

impl fmt::Debug for FormatSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FormatSpec")
            .field("name", &self.name)
            .finish()
    }
}

impl PartialEq for FormatSpec {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// The options a decoder is made from: [`ReadOptions`] plus at most one value of each options
/// type a format family defines (looked up by type).
#[derive(Clone, Default)]
pub struct FormatOptions {
    pub read: ReadOptions,
    by_type: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl FormatOptions {
    pub fn new(read: ReadOptions) -> Self {
        Self {
            read,
            by_type: HashMap::new(),
        }
    }

    /// Sets the options of type `T` (replacing earlier ones).
    pub fn with<T: Any + Send + Sync>(mut self, value: T) -> Self {
        self.set(value);
        self
    }

    /// Sets the options of type `T` (replacing earlier ones).
    pub fn set<T: Any + Send + Sync>(&mut self, value: T) {
        self.by_type.insert(TypeId::of::<T>(), Arc::new(value));
    }

    /// The options of type `T`, if set.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.by_type
            .get(&TypeId::of::<T>())
            .and_then(|v| v.downcast_ref::<T>())
    }

    /// The options of type `T`, or its defaults.
    pub fn get_or_default<T: Any + Send + Sync + Clone + Default>(&self) -> T {
        self.get::<T>().cloned().unwrap_or_default()
    }
}

impl fmt::Debug for FormatOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FormatOptions")
            .field("read", &self.read)
            .field("types", &self.by_type.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default, Debug, PartialEq)]
    struct A(u32);

    #[test]
    fn options_by_type() {
        let o = FormatOptions::default().with(A(3));
        assert_eq!(o.get::<A>(), Some(&A(3)));
        assert_eq!(o.get::<String>(), None);
        assert_eq!(FormatOptions::default().get_or_default::<A>(), A(0));
    }

    #[test]
    fn probe_lines_and_extension() {
        let p = Probe {
            head: b"\xEF\xBB\xBF\n  a\r\n\nb\nc",
            file_name: Some("x.LOG.gz"),
        };
        assert_eq!(p.lines(10), vec![&b"a"[..], b"b", b"c"]);
        assert_eq!(p.lines(1), vec![&b"a"[..]]);
        assert_eq!(p.extension().as_deref(), Some("log"));
    }
}
