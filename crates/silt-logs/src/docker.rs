//! Docker json-file logs: one JSON object per line, `{"log": "...\n", "stream": "stdout",
//! "time": "2018-02-21T17:26:53.360920913Z"}` (plus `attrs` when the daemon is configured with
//! labels or env). Table `docker.logs` unless `--table` says otherwise.
//!
//! Partial lines: the daemon splits a line longer than 16 KiB into several records, and only
//! the last one's `log` ends with `\n`. A record whose `log` does not end with `\n` is joined with
//! the following records **of the same stream** until one ends with `\n` (or the input ends);
//! the joined record keeps the first part's other fields (its `time`). The trailing `\n` of every
//! `log` is stripped (only that one character: a `\r` before it stays). A join that outgrows
//! [`MAX_LINE_BYTES`] of input is emitted as it is, so a stream that never ends its line cannot
//! exhaust memory. Joins in progress are held between the pieces the decoder is fed; a flush
//! emits only the records that are complete.
//!
//! Time: `time` (RFC 3339 with nanoseconds, truncated to microseconds) unless `--time-field`
//! names another field. Rejected: invalid JSON, a record that is not an object, a record
//! without a string `log`, overlong lines.
//!
//! [`DockerDecoder`] is the decoder (a [`LineDecoder`]); [`FORMAT`] declares the format
//! `docker`. Touches nothing but the bytes it is fed and `out`.

use std::collections::HashMap;

use silt_core::format::Confidence;
use silt_core::{Decoder, Emit, FormatOptions, FormatSpec, Probe, ReadOptions, SourceInfo};
use silt_readers::json::Value;

use crate::lines::{json_error_reason, LineDecoder, LineRecords, MAX_LINE_BYTES};
use crate::sink::{kind, Sink};
use crate::{LogFormat, LogOptions};

/// The time field of Docker records.
pub const TIME_FIELD: &str = "time";

/// The `docker` format (Docker's json-file logging driver).
pub static FORMAT: FormatSpec = FormatSpec {
    name: "docker",
    aliases: &[],
    summary: "Docker json-file logs ({\"log\",\"stream\",\"time\"} lines, split lines joined); table docker.logs",
    // `*-json.log`: `.log` is shared with access logs, syslog and Zeek; the content decides.
    extensions: &[],
    sniff,
    open,
    text_fields: true,
    text: true,
};

fn open(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    let lo = opts.get_or_default::<LogOptions>();
    Ok(Box::new(DockerDecoder::new(source, &opts.read, &lo)?))
}

/// The keys a json-file record has.
const DOCKER_KEYS: [&str; 4] = ["log", "stream", "time", "attrs"];

/// 95 when the first non-blank line is a JSON object with a string `log` and a `stream` or
/// `time`; 60 (above generic JSON) when each of the first lines (up to 5) is an object with a
/// string `log` and no key a json-file record does not have (`{"log":"..."}` alone, as tools
/// that cut the other fields write it).
pub fn sniff(p: &Probe<'_>) -> Option<Confidence> {
    let first = crate::ndjson::first_object(p)?;
    let has_log = |o: &serde_json::Map<String, serde_json::Value>| {
        o.get("log").is_some_and(serde_json::Value::is_string)
    };
    if !has_log(&first) {
        return None;
    }
    if first.contains_key("stream") || first.contains_key("time") {
        return Some(95);
    }
    let all = p.lines(5).iter().all(|l| {
        serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(l)
            .is_ok_and(|o| has_log(&o) && o.keys().all(|k| DOCKER_KEYS.contains(&k.as_str())))
    });
    all.then_some(60)
}

/// A record whose `log` has not ended yet.
struct Pending {
    record: Value,
    line: u64,
    raw: Vec<u8>,
    bytes: usize,
}

/// The Docker json-file decoder for one stream.
pub type DockerDecoder = LineDecoder<DockerLines>;

impl DockerDecoder {
    pub fn new(source: &SourceInfo, ro: &ReadOptions, lo: &LogOptions) -> anyhow::Result<Self> {
        let table = lo.table_for(LogFormat::Docker, source);
        let mut lo = lo.clone();
        if lo.time_field.is_none() && lo.schema.is_none() {
            lo.time_field = Some(TIME_FIELD.to_string());
        }
        let sink = Sink::new(source, table, ro, &lo, false, None)?;
        Ok(LineDecoder::from_records(DockerLines {
            sink,
            pending: HashMap::new(),
        }))
    }
}

/// What Docker json-file does with a line: parse it, join partial lines per stream.
pub struct DockerLines {
    sink: Sink,
    /// The join in progress per stream.
    pending: HashMap<String, Pending>,
}

fn log_mut(v: &mut Value) -> Option<&mut String> {
    match v.get_mut("log") {
        Some(Value::Str(s)) => Some(s),
        _ => None,
    }
}

impl DockerLines {
    fn emit(&mut self, p: Pending, out: &mut dyn Emit) -> anyhow::Result<()> {
        let raw = p.raw;
        self.sink
            .push(p.record, p.line, &|| raw.clone(), p.bytes, out)
    }
}

impl LineRecords for DockerLines {
    fn sink(&mut self) -> &mut Sink {
        &mut self.sink
    }

    fn record(&mut self, n: u64, buf: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        let mut v = match Value::from_slice(buf) {
            Ok(v) => v,
            Err(e) => {
                return self
                    .sink
                    .reject(out, n, json_error_reason(&e), buf.to_vec())
            }
        };
        let Value::Object(_) = v else {
            let reason = format!("not a JSON object but {}", kind(&v));
            return self.sink.reject(out, n, reason, buf.to_vec());
        };
        let stream = match v.get("stream") {
            Some(Value::Str(s)) => s.clone(),
            _ => String::new(),
        };
        let Some(log) = log_mut(&mut v) else {
            let reason = "no string \"log\" field (not a Docker json-file record)".to_string();
            return self.sink.reject(out, n, reason, buf.to_vec());
        };
        let complete = log.ends_with('\n');
        if complete {
            log.pop();
        }
        let part = std::mem::take(log);
        let bytes = buf.len();
        let p = match self.pending.remove(&stream) {
            Some(mut p) => {
                if let Some(first) = log_mut(&mut p.record) {
                    first.push_str(&part);
                }
                p.bytes += bytes;
                p
            }
            None => {
                if let Some(log) = log_mut(&mut v) {
                    *log = part;
                }
                Pending {
                    record: v,
                    line: n,
                    raw: buf.to_vec(),
                    bytes,
                }
            }
        };
        if complete || p.bytes > MAX_LINE_BYTES {
            self.emit(p, out)
        } else {
            self.pending.insert(stream, p);
            Ok(())
        }
    }

    /// Partial lines never completed: emitted as they are, in input order.
    fn end(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let mut rest: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
        rest.sort_by_key(|p| p.line);
        for p in rest {
            self.emit(p, out)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(head: &[u8]) -> Option<Confidence> {
        sniff(&Probe {
            head,
            file_name: Some("abc-json.log"),
        })
    }

    #[test]
    fn sniffs_docker_json_file_only() {
        let full = b"{\"log\":\"hello\\n\",\"stream\":\"stdout\",\"time\":\"2024-03-24T17:00:00.123456789Z\"}\n";
        assert_eq!(probe(full), Some(95));
        assert_eq!(probe(b"{\"log\":\"x\",\"time\":\"t\"}\n"), Some(95));
        // fluent-bit's samples without stream and time.
        assert_eq!(
            probe(b"{\"log\":\"2020-03-24 Single \"}\n{\"log\":\"li\"}\n{\"log\":\"ne\\n\"}\n"),
            Some(60)
        );
        for no in [
            // `log` that is not a string, or missing; a log field among other keys.
            &b"{\"log\":1,\"stream\":\"stdout\"}\n"[..],
            b"{\"stream\":\"stdout\",\"time\":\"t\"}\n",
            b"{\"log\":\"x\",\"level\":\"info\"}\n",
            b"{\"log\":\"x\"}\n{\"msg\":\"y\"}\n",
            // Other formats' first lines.
            b"{\"timestamp\":\"2024-01-01T00:00:00+0000\",\"event_type\":\"dns\"}\n",
            b"{\"_path\":\"conn\",\"ts\":1.5,\"uid\":\"C1\"}\n",
            b"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612\n",
            b"web-1  | hello\n",
            b"<34>Oct 11 22:14:15 host su: x\n",
            b"a,b\n1,2\n",
            b"\x82\xa3log\xa1x\xa6stream\xa6stdout",
            b"",
        ] {
            assert_eq!(probe(no), None, "{}", String::from_utf8_lossy(no));
        }
    }
}
