//! Docker json-file logs: one JSON object per line, `{"log": "...\n", "stream": "stdout",
//! "time": "2018-02-21T17:26:53.360920913Z"}` (plus `attrs` when the daemon is configured with
//! labels or env). Table `docker.logs` unless `--table` says otherwise.
//!
//! Partial lines: the daemon splits a line longer than 16 KiB into several records, and only
//! the last one's `log` ends with `\n`. A record whose `log` does not end with `\n` is joined with
//! the following records **of the same stream** until one ends with `\n` (or the input ends);
//! the joined record keeps the first part's other fields (its `time`). The trailing `\n` of every
//! `log` is stripped (only that one character: a `\r` before it stays).
//!
//! Time: `time` (RFC 3339 with nanoseconds, truncated to microseconds) unless `--time-field`
//! names another field. Rejected: invalid JSON, a record that is not an object, a record
//! without a string `log`, overlong lines. Touches nothing but `input` and `out`.

use std::collections::HashMap;
use std::io::BufRead;

use silt_core::{Emit, ReadOptions, SourceInfo};
use silt_readers::json::Value;

use crate::lines::{for_each_line, json_error_reason};
use crate::sink::{kind, Sink};
use crate::{LogFormat, LogOptions};

/// The time field of Docker records.
pub const TIME_FIELD: &str = "time";

struct Pending {
    record: Value,
    line: u64,
    raw: Vec<u8>,
    bytes: usize,
}

pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let table = lo.table_for(LogFormat::Docker, source);
    let mut lo = lo.clone();
    if lo.time_field.is_none() && lo.schema.is_none() {
        lo.time_field = Some(TIME_FIELD.to_string());
    }
    let mut sink = Sink::new(source, table, ro, &lo, false, None)?;
    let mut pending: HashMap<String, Pending> = HashMap::new();
    let res = read_lines(input, source, &mut sink, &mut pending, out);
    // Partial lines never completed: emit them as they are, in input order.
    let mut rest: Vec<Pending> = pending.into_values().collect();
    rest.sort_by_key(|p| p.line);
    let mut fin = Ok(());
    for p in rest {
        if fin.is_ok() {
            fin = emit(&mut sink, p, out);
        }
    }
    let done = sink.finish(out);
    res.and(fin).and(done.map(|_| ()))
}

fn emit(sink: &mut Sink, p: Pending, out: &mut dyn Emit) -> anyhow::Result<()> {
    let raw = p.raw;
    sink.push(p.record, p.line, &|| raw.clone(), p.bytes, out)
}

fn log_mut(v: &mut Value) -> Option<&mut String> {
    match v.get_mut("log") {
        Some(Value::Str(s)) => Some(s),
        _ => None,
    }
}

fn read_lines(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    sink: &mut Sink,
    pending: &mut HashMap<String, Pending>,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    for_each_line(input, source, sink, out, |n, buf, sink, out| {
        let mut v = match Value::from_slice(buf) {
            Ok(v) => v,
            Err(e) => {
                sink.reject(out, n, json_error_reason(&e), buf.to_vec())?;
                return Ok(());
            }
        };
        let Value::Object(_) = v else {
            let reason = format!("not a JSON object but {}", kind(&v));
            sink.reject(out, n, reason, buf.to_vec())?;
            return Ok(());
        };
        let stream = match v.get("stream") {
            Some(Value::Str(s)) => s.clone(),
            _ => String::new(),
        };
        let Some(log) = log_mut(&mut v) else {
            let reason = "no string \"log\" field (not a Docker json-file record)".to_string();
            sink.reject(out, n, reason, buf.to_vec())?;
            return Ok(());
        };
        let complete = log.ends_with('\n');
        if complete {
            log.pop();
        }
        let part = std::mem::take(log);
        let bytes = buf.len();
        let p = match pending.remove(&stream) {
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
        if complete {
            emit(sink, p, out)?;
        } else {
            pending.insert(stream, p);
        }
        Ok(())
    })
}
