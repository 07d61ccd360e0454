//! Reading input line by line with a bounded line length, for the line-based formats (NDJSON,
//! Docker json-file, LTSV, syslog).
//!
//! Hand-written instead of `BufRead::read_until` so that one enormous line (a binary file read
//! by mistake) cannot exhaust memory: a line longer than [`MAX_LINE_BYTES`] is reported as
//! overlong with only its first bytes kept. [`for_each_line`] is the loop those readers share
//! (progress, overlong and blank lines, read errors); [`utf8_or_reject`] the text check. Touches
//! nothing but `input` and the rejects it hands to the [`Sink`].

use std::io::{self, BufRead};

use anyhow::Context;
use silt_core::{Emit, SourceInfo};

use crate::sink::Sink;

/// Longer lines are rejected without being held in memory.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// How much of an overlong line is kept in its reject.
pub const OVERLONG_KEEP: usize = 64 << 10;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// One line of input.
pub struct Line {
    /// Bytes consumed from the input, terminator included.
    pub consumed: usize,
    /// The line exceeded the limit; the buffer holds only its first bytes.
    pub overlong: bool,
}

/// Reads lines into a reused buffer, numbering them from 1, stripping `\r\n`/`\n` and a UTF-8
/// byte-order mark before the first line.
pub struct Lines<'a> {
    input: &'a mut dyn BufRead,
    pub buf: Vec<u8>,
    pub lineno: u64,
}

impl<'a> Lines<'a> {
    pub fn new(input: &'a mut dyn BufRead) -> Self {
        Self {
            input,
            buf: Vec::with_capacity(4096),
            lineno: 0,
        }
    }

    /// The next line in `self.buf`; `None` at the end of input.
    pub fn next_line(&mut self) -> io::Result<Option<Line>> {
        self.buf.clear();
        let mut consumed = 0;
        let mut overlong = false;
        loop {
            let chunk = match self.input.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                if consumed == 0 {
                    return Ok(None);
                }
                break;
            }
            let (part, done) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (&chunk[..i], i + 1),
                None => (chunk, chunk.len()),
            };
            let room = MAX_LINE_BYTES.saturating_sub(self.buf.len());
            if part.len() > room {
                overlong = true;
            }
            self.buf.extend_from_slice(&part[..part.len().min(room)]);
            let found = done > part.len();
            self.input.consume(done);
            consumed += done;
            if found {
                break;
            }
        }
        self.lineno += 1;
        if overlong {
            self.buf.truncate(OVERLONG_KEEP);
        } else if self.buf.last() == Some(&b'\r') {
            self.buf.pop();
        }
        if self.lineno == 1 && self.buf.starts_with(UTF8_BOM) {
            self.buf.drain(..UTF8_BOM.len());
        }
        Ok(Some(Line { consumed, overlong }))
    }

    /// Hands the next line to `f` straight from the reader's buffer when it lies there whole
    /// (a newline follows it) and is not the first line (which may start with a byte-order
    /// mark); `\r\n` is stripped as by [`Lines::next_line`]. Returns the bytes consumed, or
    /// `None` when it did nothing (then [`Lines::next_line`] reads the line, and reports a read
    /// error if there is one).
    pub fn in_buffer(
        &mut self,
        f: impl FnOnce(u64, &[u8]) -> anyhow::Result<()>,
    ) -> anyhow::Result<Option<usize>> {
        if self.lineno == 0 {
            return Ok(None);
        }
        let Ok(chunk) = self.input.fill_buf() else {
            return Ok(None);
        };
        let Some(end) = memchr::memchr(b'\n', chunk).filter(|&e| e <= MAX_LINE_BYTES) else {
            return Ok(None);
        };
        let line = &chunk[..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        self.lineno += 1;
        let res = f(self.lineno, line);
        self.input.consume(end + 1);
        res.map(|()| Some(end + 1))
    }

    /// The current line is empty or white space.
    pub fn is_blank(&self) -> bool {
        self.buf.iter().all(u8::is_ascii_whitespace)
    }
}

/// `invalid JSON at column 33: EOF while parsing a string` (serde's own text ends with `at line 1
/// column 33`; the line number is the reject's, so only the column is kept).
pub fn json_error_reason(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let loc = format!(" at line {} column {}", e.line(), e.column());
    match msg.strip_suffix(&loc) {
        Some(m) => format!("invalid JSON at column {}: {m}", e.column()),
        None => format!("invalid JSON: {msg}"),
    }
}

/// Calls `each(line_number, bytes, sink, out)` for every non-blank line of `input`, after
/// reporting its bytes as progress; an overlong line is rejected instead (with its first
/// [`OVERLONG_KEEP`] bytes). A read error ends the loop with the line number it followed.
pub fn for_each_line(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    sink: &mut Sink,
    out: &mut dyn Emit,
    mut each: impl FnMut(u64, &[u8], &mut Sink, &mut dyn Emit) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let mut lines = Lines::new(input);
    loop {
        // A line that lies whole in the reader's buffer (nearly all: the buffer is 1 MiB) is
        // used where it is, without copying it into `lines.buf` first.
        let fast = lines.in_buffer(|n, line| {
            if line.iter().all(u8::is_ascii_whitespace) {
                return Ok(());
            }
            each(n, line, sink, out)
        })?;
        if let Some(consumed) = fast {
            out.progress(consumed as u64);
            continue;
        }
        let next = lines.next_line().with_context(|| {
            format!("{}: read error after line {}", source.display, lines.lineno)
        })?;
        let Some(l) = next else { break };
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
        each(n, &lines.buf, sink, out)?;
    }
    Ok(())
}

/// The line as text, or `None` after rejecting it as invalid UTF-8.
pub fn utf8_or_reject<'b>(
    n: u64,
    buf: &'b [u8],
    sink: &mut Sink,
    out: &mut dyn Emit,
) -> anyhow::Result<Option<&'b str>> {
    match std::str::from_utf8(buf) {
        Ok(t) => Ok(Some(t)),
        Err(e) => {
            let reason = format!("invalid UTF-8 at byte {}", e.valid_up_to());
            sink.reject(out, n, reason, buf.to_vec())?;
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use silt_core::{CollectEmit, ReadOptions, SourceInfo};

    use crate::LogOptions;

    /// Lines are found, numbered and stripped the same wherever the reader's buffer ends: in
    /// the buffer (used in place) or across its end (copied).
    #[test]
    fn buffer_boundaries_do_not_change_lines() {
        let text = b"\xEF\xBB\xBF{\"a\":1}\r\n\n  \n{\"a\":2}\n{bad\r\n{\"a\":\"x\\ny\"}\r\n[3]\n{\"a\":4}";
        let run = |cap: usize| {
            let mut input = std::io::BufReader::with_capacity(cap, &text[..]);
            let mut out = CollectEmit::default();
            let source = SourceInfo::stdin();
            crate::ndjson::read(
                &mut input,
                &source,
                &ReadOptions::default(),
                &LogOptions::default(),
                &mut out,
            )
            .unwrap();
            let rejects: Vec<(u64, Vec<u8>)> = out
                .rejects
                .iter()
                .map(|r| (r.line, r.raw.clone()))
                .collect();
            (out.batches, rejects, out.bytes)
        };
        let whole = run(1 << 20);
        assert_eq!(whole.1, [(5, b"{bad".to_vec()), (7, b"[3]".to_vec())]);
        assert_eq!(whole.2, text.len() as u64);
        let rows: usize = whole.0.values().flatten().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 4);
        for cap in 1..=text.len() {
            assert_eq!(run(cap), whole, "buffer of {cap} bytes");
        }
    }
}
