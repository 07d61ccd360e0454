//! Zeek logs, TSV ([`tsv`]) and NDJSON ([`json`]). Both readers produce the same table
//! (`zeek.<path>`) with the same Arrow schema for the same log: the type mapping, the column
//! builders, the nested-struct layout and the canonical string form live in [`types`]; the JSON
//! reader takes field types from the per-log [`registry`]. `docs/zeek.md` documents the rules.
//!
//! This module holds what both readers share besides that: the log-name fallback and the line
//! driver that cuts lines out of a `BufRead` buffer without copying them. Touches nothing but
//! the input it is handed and the `Emit` sink.

pub mod json;
pub mod registry;
pub mod tsv;
pub mod types;

use std::io::{BufRead, ErrorKind};

use memchr::{memchr, memrchr};
use silt_core::{Emit, SourceInfo};

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

/// The first line without a UTF-8 byte order mark (some editors and Windows tools add one).
pub(crate) fn strip_bom(line: &[u8]) -> &[u8] {
    line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)
}

/// Lines longer than this are rejected; only the first [`REJECT_RAW_MAX`] bytes are kept in the
/// reject and the rest of the line is skipped.
pub const MAX_LINE: usize = 256 << 20;
/// How much of an over-long line is kept in its reject.
pub const REJECT_RAW_MAX: usize = 64 << 10;

/// What a line-oriented reader does with the lines [`drive_lines`] cuts out.
pub(crate) trait LineSink {
    /// One line without its `\n` (it may end in `\r`).
    fn line(&mut self, line: &[u8], out: &mut dyn Emit) -> anyhow::Result<()>;
    /// A line longer than [`MAX_LINE`]: `start` is its beginning, `len` its length so far.
    fn overlong(&mut self, start: &[u8], len: usize, out: &mut dyn Emit) -> anyhow::Result<()>;
    /// Bytes of an over-long line that were skipped.
    fn skipped(&mut self, bytes: usize);
    /// End of input (also called before an I/O error is returned, so rows read are kept).
    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()>;
}

/// Feeds every line of `input` to `sink`. Lines that fit in the reader's buffer are passed
/// straight out of it; only a line that straddles two buffer fills is copied.
pub(crate) fn drive_lines(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    sink: &mut dyn LineSink,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let mut carry: Vec<u8> = Vec::new();
    let mut skipping = false;
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                sink.finish(out)?;
                return Err(anyhow::Error::new(e).context(format!("reading {}", source.display)));
            }
        };
        if buf.is_empty() {
            break;
        }
        let len = buf.len();
        if skipping {
            let n = memchr(b'\n', buf).map_or(len, |i| {
                skipping = false;
                i + 1
            });
            sink.skipped(n);
            input.consume(n);
            continue;
        }
        if carry.is_empty() {
            match memrchr(b'\n', buf) {
                Some(last) => {
                    let mut start = 0;
                    for nl in memchr::memchr_iter(b'\n', &buf[..=last]) {
                        sink.line(&buf[start..nl], out)?;
                        start = nl + 1;
                    }
                    input.consume(last + 1);
                }
                None => {
                    carry.extend_from_slice(buf);
                    input.consume(len);
                }
            }
        } else {
            match memchr(b'\n', buf) {
                Some(i) => {
                    carry.extend_from_slice(&buf[..i]);
                    input.consume(i + 1);
                    sink.line(&carry, out)?;
                    carry.clear();
                }
                None => {
                    carry.extend_from_slice(buf);
                    input.consume(len);
                }
            }
        }
        if carry.len() > MAX_LINE {
            sink.overlong(&carry[..REJECT_RAW_MAX], carry.len(), out)?;
            carry = Vec::new();
            skipping = true;
        }
    }
    if !carry.is_empty() {
        sink.line(&carry, out)?;
    }
    sink.finish(out)
}

/// Feeds the lines of an in-memory slice to `sink` (a final line without `\n` counts).
pub(crate) fn drive_slice(
    data: &[u8],
    sink: &mut dyn LineSink,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    if !data.is_empty() {
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', body) {
            sink.line(&body[start..nl], out)?;
            start = nl + 1;
        }
        sink.line(&body[start..], out)?;
    }
    sink.finish(out)
}
