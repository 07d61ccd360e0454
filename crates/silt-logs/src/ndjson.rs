//! NDJSON (JSON Lines): one JSON object per line, schema inferred (or conformed to `--schema`).
//! Lines are parsed straight into the batch's columns by [`Sink::push_json`].
//!
//! Rejected, with the line number and the raw bytes: invalid JSON (including invalid UTF-8),
//! values that are not objects, lines over [`crate::lines::MAX_LINE_BYTES`], records that do not
//! fit `--schema`. Blank lines are skipped.
//!
//! [`NdjsonDecoder`] is the decoder (a [`LineDecoder`]: fed in pieces split anywhere, holding
//! the unfinished last line and the batch being built); [`FORMAT`] declares the format `json`
//! (aliases `ndjson`, `jsonl`). Touches nothing but the bytes it is fed and `out`.

use serde_json::{Map, Value as Json};
use silt_core::format::{Confidence, PROBE_BYTES};
use silt_core::{Decoder, Emit, FormatOptions, FormatSpec, Probe, ReadOptions, SourceInfo};

use crate::lines::{LineDecoder, LineRecords};
use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

/// The `json` format (NDJSON / JSON Lines).
pub static FORMAT: FormatSpec = FormatSpec {
    name: "json",
    aliases: &["ndjson", "jsonl"],
    summary: "JSON lines (NDJSON), one object per line, schema inferred; table json.<file stem>",
    extensions: &["json", "ndjson", "jsonl"],
    sniff,
    open,
    text_fields: true,
    text: true,
};

fn open(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    let lo = opts.get_or_default::<LogOptions>();
    Ok(Box::new(NdjsonDecoder::new(source, &opts.read, &lo)?))
}

/// 50 when the first non-blank line is a JSON object (or, in a probe cut short, starts one that
/// runs past the probe).
pub fn sniff(p: &Probe<'_>) -> Option<Confidence> {
    first_object(p).map(|_| 50)
}

/// The first non-blank line of the probe parsed as a JSON object; an empty object when that
/// line is an object longer than the probe (the JSON sniffers then decide on what they know).
pub(crate) fn first_object(p: &Probe<'_>) -> Option<Map<String, Json>> {
    let first = *p.lines(1).first()?;
    if first.first() != Some(&b'{') {
        return None;
    }
    match serde_json::from_slice::<Map<String, Json>>(first) {
        Ok(o) => Some(o),
        Err(e) if e.is_eof() && p.head.len() >= PROBE_BYTES => Some(Map::new()),
        Err(_) => None,
    }
}

/// The NDJSON decoder for one stream.
pub type NdjsonDecoder = LineDecoder<NdjsonLines>;

impl NdjsonDecoder {
    pub fn new(source: &SourceInfo, ro: &ReadOptions, lo: &LogOptions) -> anyhow::Result<Self> {
        let table = lo.table_for(LogFormat::Json, source);
        let sink = Sink::new(source, table, ro, lo, false, None)?;
        Ok(LineDecoder::from_records(NdjsonLines { sink }))
    }
}

/// What NDJSON does with a line: parse it into the sink.
pub struct NdjsonLines {
    sink: Sink,
}

impl LineRecords for NdjsonLines {
    fn sink(&mut self) -> &mut Sink {
        &mut self.sink
    }

    fn record(&mut self, lineno: u64, line: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        self.sink.push_json(line, lineno, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn probe(head: &[u8]) -> Option<Confidence> {
        sniff(&Probe {
            head,
            file_name: Some("input"),
        })
    }

    #[test]
    fn sniffs_json_objects_only() {
        for yes in [
            &b"{\"level\":\"info\",\"msg\":\"hi\"}\n{\"level\":\"warn\"}\n"[..],
            b"\xEF\xBB\xBF\n  {\"a\":1}",
            // The specific JSON formats score higher (95/90); this one still says "JSON".
            b"{\"timestamp\":\"2024-01-01T00:00:00+0000\",\"event_type\":\"dns\"}\n",
            b"{\"_path\":\"conn\",\"ts\":1.5,\"uid\":\"C1\"}\n",
            b"{\"log\":\"x\\n\",\"stream\":\"stdout\",\"time\":\"2024-01-01T00:00:00Z\"}\n",
        ] {
            assert_eq!(probe(yes), Some(50), "{}", String::from_utf8_lossy(yes));
        }
        for no in [
            &b"[1,2,3]\n"[..],
            b"{broken\n",
            b"{\"a\":1} trailing\n",
            b"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612\n",
            b"<34>Oct 11 22:14:15 host su: x\n",
            b"time:2024\thost:a\n",
            b"a,b\n1,2\n",
            b"#separator \\x09\n#fields\tts\n",
            b"\x82\xa1a\x01\xa1b\x02",
            b"Obj\x01",
            b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00",
            b"",
            b" \n",
        ] {
            assert_eq!(probe(no), None, "{}", String::from_utf8_lossy(no));
        }
        // One object longer than the probe: it may well be JSON.
        let mut big = b"{\"a\":\"".to_vec();
        big.resize(PROBE_BYTES, b'x');
        assert_eq!(probe(&big), Some(50));
        assert_eq!(probe(&big[..1000]), None);
    }
}
