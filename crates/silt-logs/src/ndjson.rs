//! NDJSON (JSON Lines): one JSON object per line, schema inferred (or conformed to `--schema`).
//!
//! Rejected, with the line number and the raw bytes: invalid JSON (including invalid UTF-8),
//! values that are not objects, lines over [`crate::lines::MAX_LINE_BYTES`], records that do not
//! fit `--schema`. Blank lines are skipped. Touches nothing but `input` and `out`.

use std::io::BufRead;

use anyhow::Context;
use silt_core::{Emit, ReadOptions, SourceInfo};
use silt_readers::json::Value;

use crate::lines::{json_error_reason, Lines, MAX_LINE_BYTES};
use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let table = lo.table_for(LogFormat::Json, source);
    let mut sink = Sink::new(source, table, ro, lo, false, None)?;
    let res = read_lines(input, source, &mut sink, out);
    let fin = sink.finish(out);
    res.and(fin.map(|_| ()))
}

fn read_lines(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    sink: &mut Sink,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let mut lines = Lines::new(input);
    while let Some(l) = lines
        .next_line()
        .with_context(|| format!("{}: read error after line {}", source.display, lines.lineno))?
    {
        out.progress(l.consumed as u64);
        let n = lines.lineno;
        if l.overlong {
            let reason = format!("line longer than {MAX_LINE_BYTES} bytes");
            sink.reject(out, n, reason, lines.buf.clone())?;
            continue;
        }
        if lines.is_blank() {
            continue;
        }
        match Value::from_slice(&lines.buf) {
            Ok(v) => {
                let buf = &lines.buf;
                sink.push(v, n, &|| buf.clone(), buf.len(), out)?;
            }
            Err(e) => sink.reject(out, n, json_error_reason(&e), lines.buf.clone())?,
        }
    }
    Ok(())
}
