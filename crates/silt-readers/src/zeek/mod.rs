//! Zeek logs, TSV ([`tsv`]) and NDJSON ([`json`]). Both decoders produce the same table
//! (`zeek.<path>`) with the same Arrow schema for the same log: the type mapping, the column
//! builders, the nested-struct layout and the canonical string form live in [`types`]; the JSON
//! decoder takes field types from the per-log [`registry`]. `docs/zeek.md` documents the rules.
//!
//! This module holds what both share besides that: the log-name fallback, the line limits, and
//! the `zeek` format itself ([`FORMAT`], [`ZeekDecoder`]): a stream is TSV or JSON, decided from
//! its first non-blank bytes ([`is_json_head`]), and then read by that decoder. Touches nothing but
//! the bytes it is handed and the `Emit` sink.

pub mod json;
pub mod registry;
pub mod tsv;
pub mod types;

use std::io::BufRead;

use silt_core::decode::{read_stream, strip_bom, Decoder};
use silt_core::format::{Confidence, FormatOptions, FormatSpec, Probe, PROBE_BYTES};
use silt_core::{Emit, ReadOptions, SourceInfo};

/// The log name used when the data does not name it (no `#path` / `_path`): the file name up to
/// its first dot (`conn.log` and `conn.00:00:00-01:00:00.log.gz` -> `conn`), or `unknown` for
/// standard input.
pub fn fallback_log_name(source: &SourceInfo) -> String {
    source
        .file_name
        .as_deref()
        .and_then(|f| f.split('.').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

/// Lines longer than this are rejected; only the first [`REJECT_RAW_MAX`] bytes are kept in the
/// reject and the rest of the line is skipped.
pub const MAX_LINE: usize = 256 << 20;
/// How much of an over-long line is kept in its reject.
pub const REJECT_RAW_MAX: usize = 64 << 10;

/// The reason of the reject for a line longer than [`MAX_LINE`] (the same whatever the pieces the
/// stream came in, so it does not say how much of the line had been seen).
pub(crate) fn overlong_reason() -> String {
    format!(
        "line is longer than the limit of {MAX_LINE} bytes (only its first {REJECT_RAW_MAX} bytes are kept here)"
    )
}

/// The `zeek` format: Zeek logs, TSV or JSON, decided per stream by [`ZeekDecoder`].
pub static FORMAT: FormatSpec = FormatSpec {
    name: "zeek",
    aliases: &[],
    summary: "Zeek logs, TSV or JSON (decided per stream); tables zeek.<path>",
    // `.log` is shared with access logs and syslog: not a claim, the registry sniffs content.
    extensions: &[],
    sniff,
    open,
    text_fields: false,
    text: true,
};

fn open(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    Ok(Box::new(ZeekDecoder::new(source, &opts.read)))
}

/// 95 for a Zeek TSV log (a `#separator` or `#fields` header line among the leading `#` lines, a
/// custom meta prefix before `separator `, or a bare `ts<TAB>` column header); 90 for Zeek JSON
/// (a first line that is a JSON object with `_path`, or with `ts` and `uid` or `id.orig_h`, and
/// that is not an EVE record).
pub fn sniff(p: &Probe<'_>) -> Option<Confidence> {
    let lines = p.lines(32);
    let first = *lines.first()?;
    if tsv::detect_meta_prefix(first).is_some() {
        return Some(95);
    }
    // A bare header line (`zeek-cut`-style output without the `#` lines): `ts` first, and at
    // least one field only Zeek names so (a generic TSV file may also start with `ts`).
    if first.starts_with(b"ts\t") {
        let zeek_field = first
            .split(|&b| b == b'\t')
            .any(|f| f == b"uid" || f == b"_path" || f.starts_with(b"id."));
        return zeek_field.then_some(95);
    }
    for l in lines.iter().take_while(|l| l.first() == Some(&b'#')) {
        if l.starts_with(b"#separator") || l.starts_with(b"#fields") {
            return Some(95);
        }
    }
    // The first line that parses as a JSON object (a stream may start with a broken line).
    let obj = lines.iter().take(8).find_map(|l| {
        (l.first() == Some(&b'{'))
            .then(|| serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(l).ok())
            .flatten()
    })?;
    if obj.contains_key("_path") {
        return Some(90);
    }
    let zeekish = obj.contains_key("ts")
        && (obj.contains_key("uid") || obj.contains_key("id.orig_h"))
        && !obj.contains_key("event_type");
    zeekish.then_some(90)
}

/// Whether a Zeek stream starting with `head` is JSON (else TSV), looking at its first
/// [`PROBE_BYTES`] after a byte-order mark and white space: JSON when the first line starts
/// with `{` and is not a TSV line (`#` directive, `separator `, `ts<TAB>` header) nor an EVE
/// record (`"event_type"`, read as TSV as it always was: every line is then a reject saying
/// there is no `#fields` header). `None` while `head` is too short to tell and more may come.
pub fn is_json_head(head: &[u8], at_end: bool) -> Option<bool> {
    let head = &head[..head.len().min(PROBE_BYTES)];
    let full = at_end || head.len() >= PROBE_BYTES;
    if !full && head.len() < 3 && b"\xEF\xBB\xBF".starts_with(head) {
        return None; // maybe the start of a byte-order mark
    }
    let h = strip_bom(head);
    // Zero padding (a tailed log restarted after copytruncate) is skipped as the framer skips it.
    let Some(start) = h.iter().position(|&c| !c.is_ascii_whitespace() && c != 0) else {
        return if full { Some(false) } else { None };
    };
    let h = &h[start..];
    if h[0] != b'{' {
        return Some(false);
    }
    let line = match memchr::memchr(b'\n', h) {
        Some(i) => &h[..i],
        None if full => h,
        None => return None,
    };
    let has = |k: &[u8]| memchr::memmem::find(line, k).is_some();
    Some(!(has(b"separator ") || has(b"\"event_type\"")))
}

/// The `zeek` format's decoder: buffers the first bytes until [`is_json_head`] can tell TSV from
/// JSON (at most [`PROBE_BYTES`]), then hands everything to [`tsv::ZeekTsvDecoder`] or
/// [`json::ZeekJsonDecoder`].
pub struct ZeekDecoder {
    state: State,
}

enum State {
    Undecided {
        head: Vec<u8>,
        source: SourceInfo,
        opts: ReadOptions,
    },
    Tsv(Box<tsv::ZeekTsvDecoder>),
    Json(Box<json::ZeekJsonDecoder>),
    /// Only while switching from `Undecided`.
    Gone,
}

impl ZeekDecoder {
    pub fn new(source: &SourceInfo, opts: &ReadOptions) -> Self {
        Self {
            state: State::Undecided {
                head: Vec::new(),
                source: source.clone(),
                opts: opts.clone(),
            },
        }
    }

    /// Whether the stream was found to be JSON (`None` while undecided).
    pub fn is_json(&self) -> Option<bool> {
        match self.state {
            State::Tsv(_) => Some(false),
            State::Json(_) => Some(true),
            _ => None,
        }
    }

    fn inner(&mut self) -> Option<&mut dyn Decoder> {
        match &mut self.state {
            State::Tsv(d) => Some(d.as_mut()),
            State::Json(d) => Some(d.as_mut()),
            _ => None,
        }
    }

    /// Makes the chosen decoder and feeds it what was held back; returns it.
    fn start(&mut self, json: bool, out: &mut dyn Emit) -> anyhow::Result<&mut dyn Decoder> {
        let State::Undecided { head, source, opts } =
            std::mem::replace(&mut self.state, State::Gone)
        else {
            unreachable!("start is only called while undecided")
        };
        self.state = if json {
            State::Json(Box::new(json::ZeekJsonDecoder::new(&source, &opts)))
        } else {
            State::Tsv(Box::new(tsv::ZeekTsvDecoder::new(&source, &opts)))
        };
        let d = self.inner().expect("decided");
        if !head.is_empty() {
            d.feed(&head, out)?;
        }
        Ok(d)
    }
}

impl Decoder for ZeekDecoder {
    fn feed(&mut self, bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        let State::Undecided { head, .. } = &mut self.state else {
            return match self.inner() {
                Some(d) => d.feed(bytes, out),
                None => Ok(()),
            };
        };
        let (json, rest) = if head.is_empty() {
            match is_json_head(bytes, false) {
                Some(j) => (j, bytes),
                None => {
                    head.extend_from_slice(bytes);
                    return Ok(());
                }
            }
        } else {
            let n = bytes.len().min(PROBE_BYTES.saturating_sub(head.len()));
            head.extend_from_slice(&bytes[..n]);
            match is_json_head(head, false) {
                Some(j) => (j, &bytes[n..]),
                // Undecided means fewer than PROBE_BYTES so far: all of `bytes` was taken.
                None => return Ok(()),
            }
        };
        let d = self.start(json, out)?;
        if !rest.is_empty() {
            d.feed(rest, out)?;
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        // Undecided: what is held back is blank lines and part of the first line, no rows.
        match self.inner() {
            Some(d) => d.flush(out),
            None => Ok(()),
        }
    }

    /// When the stream's first buffer tells TSV from JSON (it holds the first line), the chosen
    /// decoder reads the whole stream its own way (TSV on several threads); otherwise the
    /// stream is fed as pieces.
    fn read(&mut self, input: &mut dyn BufRead, out: &mut dyn Emit) -> anyhow::Result<()> {
        if matches!(&self.state, State::Undecided { head, .. } if head.is_empty()) {
            let json = match input.fill_buf() {
                Ok(buf) if !buf.is_empty() => is_json_head(buf, false),
                // Empty, or an error that `read_stream` meets again and reports.
                _ => None,
            };
            if let Some(json) = json {
                return self.start(json, out)?.read(input, out);
            }
        }
        read_stream(self, input, out)
    }

    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let json = match &self.state {
            State::Undecided { head, .. } => Some(is_json_head(head, true).unwrap_or(false)),
            _ => None,
        };
        if let Some(json) = json {
            self.start(json, out)?;
        }
        match self.inner() {
            Some(d) => d.finish(out),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use silt_core::CollectEmit;

    fn probe(s: &[u8]) -> Option<Confidence> {
        sniff(&Probe {
            head: s,
            file_name: Some("x.log"),
        })
    }

    #[test]
    fn sniffs_zeek_tsv_and_json_and_nothing_else() {
        let tsv: &[&[u8]] = &[
            b"#separator \\x09\n#set_separator\t,\n#fields\tts\tuid\n",
            b"#file dhe.pcap\n#separator \\x09\n",
            b"\xEF\xBB\xBF#separator \\x09\n",
            b"#fields\tts\tuid\n#types\ttime\tstring\n",
            b"PREFIX<>separator |\nPREFIX<>fields|ts\n",
            b"ts\tuid\tid.orig_h\n1.0\tC\t1.2.3.4\n",
        ];
        // A generic TSV file whose first column is `ts` is not Zeek.
        assert_eq!(probe(b"ts\thost\tbytes\n1.0\ta\t2\n"), None);
        for t in tsv {
            assert_eq!(probe(t), Some(95), "{}", String::from_utf8_lossy(t));
        }
        let json: &[&[u8]] = &[
            br#"{"_path":"conn","ts":1.0}"#,
            b"\n  {\"ts\":1521911721.1,\"uid\":\"C1\",\"id.orig_h\":\"1.2.3.4\"}\n",
            br#"{"ts":"2018-03-24T17:15:21.400275Z","id.orig_h":"10.0.0.1"}"#,
        ];
        for j in json {
            assert_eq!(probe(j), Some(90), "{}", String::from_utf8_lossy(j));
        }
        let neither: &[&[u8]] = &[
            // Suricata EVE must not look like Zeek JSON.
            br#"{"timestamp":"2018-03-24T17:15:21.400275+0000","flow_id":1,"event_type":"dns","src_ip":"1.2.3.4"}"#,
            br#"{"ts":1.0,"uid":"C","event_type":"alert"}"#,
            // Generic JSON, Docker json-file, access log, syslog, LTSV, CSV, comments.
            br#"{"level":"info","msg":"hello","ts":1}"#,
            br#"{"log":"GET / HTTP/1.1\n","stream":"stdout","time":"2024-01-01T00:00:00Z"}"#,
            b"127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.0\" 200 2326\n",
            b"<34>Oct 11 22:14:15 mymachine su: 'su root' failed\n",
            b"time:2024-01-01\thost:a\n",
            b"a,b,c\n1,2,3\n",
            b"# a comment\nx\ty\n",
            b"{\"_path\": broken",
            b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00",
            b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00",
            b"",
            b"   \n\n",
        ];
        for n in neither {
            assert_eq!(probe(n), None, "{}", String::from_utf8_lossy(n));
        }
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200 {
            let junk: Vec<u8> = (0..256)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng as u8
                })
                .collect();
            assert_eq!(probe(&junk), None);
        }
    }

    #[test]
    fn decides_tsv_or_json_like_the_old_sniffer() {
        let cases: &[(&[u8], bool)] = &[
            (b"#separator \\x09\n", false),
            (b"  \n{\"_path\":\"conn\"}\n", true),
            (b"{\"d\":1.5}\n", true),
            (b"\xEF\xBB\xBF{\"d\":1.5}\n", true),
            (b"{\"event_type\":\"dns\"}\n", false),
            (b"ts\tuid\n", false),
            (b"hello\n", false),
            (b"", false),
            // Zero padding before the first line counts as nothing.
            (b"\0\0\0{\"_path\":\"conn\"}\n", true),
            (b"\0\0#separator \\x09\n", false),
        ];
        for (head, json) in cases {
            assert_eq!(is_json_head(head, true), Some(*json), "{head:?}");
        }
        // Undecided until the first line is complete (or the stream ends).
        assert_eq!(is_json_head(b"\n {\"_pa", false), None);
        assert_eq!(is_json_head(b"\xEF", false), None);
        assert_eq!(is_json_head(b"\n {\"_pa", true), Some(true));
        assert_eq!(is_json_head(b"#", false), Some(false));
    }

    #[test]
    fn one_byte_pieces_decide_like_the_whole_stream() {
        let src = SourceInfo::stdin();
        for data in [
            &b"\n\n{\"_path\":\"conn\",\"ts\":1.5,\"uid\":\"C\"}\n{\"_path\":\"dns\"}"[..],
            b"#fields\tts\tn\n#types\ttime\tcount\n1.0\t2\n",
        ] {
            let mut whole = CollectEmit::default();
            let mut d = ZeekDecoder::new(&src, &ReadOptions::default());
            d.feed(data, &mut whole).unwrap();
            d.finish(&mut whole).unwrap();
            let mut pieces = CollectEmit::default();
            let mut d = ZeekDecoder::new(&src, &ReadOptions::default());
            for b in data.chunks(1) {
                d.feed(b, &mut pieces).unwrap();
                d.flush(&mut pieces).unwrap();
            }
            d.finish(&mut pieces).unwrap();
            assert!(whole.total_rows() > 0 && whole.rejects.is_empty());
            assert_eq!(whole.total_rows(), pieces.total_rows());
            assert_eq!(
                whole.batches.keys().collect::<Vec<_>>(),
                pieces.batches.keys().collect::<Vec<_>>()
            );
        }
    }
}
