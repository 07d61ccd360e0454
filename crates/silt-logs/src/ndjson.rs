//! NDJSON (JSON Lines): one JSON object per line, schema inferred (or conformed to `--schema`).
//! Lines are parsed straight into the batch's columns by [`Sink::push_json`].
//!
//! Rejected, with the line number and the raw bytes: invalid JSON (including invalid UTF-8),
//! values that are not objects, lines over [`crate::lines::MAX_LINE_BYTES`], records that do not
//! fit `--schema`. Blank lines are skipped. Touches nothing but `input` and `out`.

use std::io::BufRead;

use silt_core::{Emit, ReadOptions, SourceInfo};

use crate::lines::for_each_line;
use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    Sink::run(LogFormat::Json, false, source, ro, lo, out, |sink, out| {
        read_lines(input, source, sink, out)
    })
}

fn read_lines(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    sink: &mut Sink,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    for_each_line(input, source, sink, out, |n, buf, sink, out| {
        sink.push_json(buf, n, out)
    })
}
