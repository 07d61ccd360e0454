//! LTSV (Labeled Tab-separated Values, <http://ltsv.org>): `label:value` fields separated by tabs,
//! one record per line. Labels become columns in first-seen order; values are text, typed per
//! batch like CSV columns (`sink::retype_text`: integers, numbers, booleans, ISO 8601 times),
//! and an empty value is null.
//!
//! Rejected with the line number: a field without `:`, an empty label, invalid UTF-8, overlong
//! lines. A label that repeats within a line keeps its last value. Blank lines are skipped.
//! Touches nothing but `input` and `out`.

use std::io::BufRead;

use silt_core::{Emit, ReadOptions, SourceInfo};
use silt_readers::json::Value;

use crate::lines::{for_each_line, utf8_or_reject};
use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    Sink::run(LogFormat::Ltsv, true, source, ro, lo, out, |sink, out| {
        read_lines(input, source, sink, out)
    })
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

fn read_lines(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    sink: &mut Sink,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    for_each_line(input, source, sink, out, |n, buf, sink, out| {
        let Some(text) = utf8_or_reject(n, buf, sink, out)? else {
            return Ok(());
        };
        match parse_line(text) {
            Ok(v) => sink.push(v, n, &|| buf.to_vec(), buf.len(), out),
            Err(reason) => sink.reject(out, n, reason, buf.to_vec()),
        }
    })
}
