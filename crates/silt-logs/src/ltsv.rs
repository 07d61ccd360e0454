//! LTSV (Labeled Tab-separated Values, <http://ltsv.org>): `label:value` fields separated by tabs,
//! one record per line. Labels become columns in first-seen order; values are text, typed per
//! batch like CSV columns (`sink::retype_text`: integers, numbers, booleans, ISO 8601 times),
//! and an empty value is null.
//!
//! Rejected with the line number: a field without `:`, an empty label, invalid UTF-8, overlong
//! lines. A label that repeats within a line keeps its last value. Blank lines are skipped.
//!
//! [`LtsvDecoder`] is the decoder (a [`LineDecoder`]); [`FORMAT`] declares the format `ltsv`.
//! Touches nothing but the bytes it is fed and `out`.

use silt_core::format::Confidence;
use silt_core::{Decoder, Emit, FormatOptions, FormatSpec, Probe, ReadOptions, SourceInfo};
use silt_readers::json::Value;

use crate::lines::{utf8_or_reject, LineDecoder, LineRecords};
use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

/// The `ltsv` format.
pub static FORMAT: FormatSpec = FormatSpec {
    name: "ltsv",
    aliases: &[],
    summary: "LTSV, label:value fields separated by tabs; table ltsv.<file stem>",
    extensions: &["ltsv"],
    sniff,
    open,
    text_fields: true,
    text: true,
};

fn open(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    let lo = opts.get_or_default::<LogOptions>();
    Ok(Box::new(LtsvDecoder::new(source, &opts.read, &lo)?))
}

/// 70 when each of the first non-blank lines (up to 5) has at least two tab-separated fields
/// and every field is `label:value` with a label of letters, digits, `_`, `.` or `-` (the
/// characters ltsv.org allows).
pub fn sniff(p: &Probe<'_>) -> Option<Confidence> {
    let lines = p.lines(5);
    if lines.is_empty() {
        return None;
    }
    let label_ok = |l: &[u8]| {
        !l.is_empty()
            && l.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
    };
    let ltsv = lines.iter().all(|line| {
        memchr::memchr(b'\t', line).is_some()
            && line.split(|&c| c == b'\t').all(|f| {
                memchr::memchr(b':', f).is_some_and(|i| label_ok(&f[..i]))
                    && !f.iter().any(|&c| c < 0x20)
            })
    });
    ltsv.then_some(70)
}

/// Parses one LTSV line into an object.
pub fn parse_line(line: &str) -> Result<Value, String> {
    let mut o: Vec<(String, Value)> = Vec::new();
    for (i, field) in line.split('\t').enumerate() {
        let Some((k, v)) = field.split_once(':') else {
            return Err(format!("field {} has no ':' (label:value)", i + 1));
        };
        if k.is_empty() {
            return Err(format!("field {} has an empty label", i + 1));
        }
        match o.iter_mut().find(|(name, _)| name == k) {
            Some(e) => e.1 = Value::Str(v.to_string()),
            None => o.push((k.to_string(), Value::Str(v.to_string()))),
        }
    }
    Ok(Value::Object(o))
}

/// The LTSV decoder for one stream.
pub type LtsvDecoder = LineDecoder<LtsvLines>;

impl LtsvDecoder {
    pub fn new(source: &SourceInfo, ro: &ReadOptions, lo: &LogOptions) -> anyhow::Result<Self> {
        let table = lo.table_for(LogFormat::Ltsv, source);
        let sink = Sink::new(source, table, ro, lo, true, None)?;
        Ok(LineDecoder::from_records(LtsvLines { sink }))
    }
}

/// What LTSV does with a line.
pub struct LtsvLines {
    sink: Sink,
}

impl LineRecords for LtsvLines {
    fn sink(&mut self) -> &mut Sink {
        &mut self.sink
    }

    fn record(&mut self, n: u64, buf: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        let Some(text) = utf8_or_reject(n, buf, &mut self.sink, out)? else {
            return Ok(());
        };
        match parse_line(text) {
            Ok(v) => self.sink.push(v, n, &|| buf.to_vec(), buf.len(), out),
            Err(reason) => self.sink.reject(out, n, reason, buf.to_vec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(head: &[u8]) -> Option<Confidence> {
        sniff(&Probe {
            head,
            file_name: None,
        })
    }

    #[test]
    fn sniffs_ltsv_only() {
        for yes in [
            &b"time:2024-03-24T17:00:00Z\thost:10.0.0.1\treq:GET / HTTP/1.1\tstatus:200\n"[..],
            b"a:1\tb:\nc.d:x\te-f:y:z\n",
        ] {
            assert_eq!(probe(yes), Some(70), "{}", String::from_utf8_lossy(yes));
        }
        for no in [
            // A TSV header, a TSV row with times, a single field, an empty label.
            &b"time\thost\tbytes\n2024-03-24T17:00:00Z\t10.0.0.1\t12\n"[..],
            b"2024-03-24 10:00:00\t12:00\n",
            b"time:2024-03-24T17:00:00Z\n",
            b"a:1\t:2\n",
            b"a:1\tb:2\nno label\n",
            // Other formats' first lines.
            b"#separator \\x09\n#set_separator\t,\n#fields\tts\tuid\n",
            b"{\"a\":1}\n",
            b"<34>Oct 11 22:14:15 host su: x\n",
            b"Mar 24 17:00:00 host sshd[1]: a:b\tc:d\n",
            b"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612\n",
            b"a,b\n1,2\n",
            b"\x82\xa1a\x01\xa1b\x02",
            b"",
        ] {
            assert_eq!(probe(no), None, "{}", String::from_utf8_lossy(no));
        }
    }
}
