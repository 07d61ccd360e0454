//! The decoder of the line-based formats (NDJSON, Docker json-file, LTSV, syslog): lines are cut
//! by `silt_core::decode::LineFramer` out of the pieces the decoder is fed (a line may straddle
//! any two pieces) and handed, numbered from 1, to the format's [`LineRecords`].
//!
//! The rules every line format shares: `\r\n` ends a line like `\n`; a UTF-8 byte-order mark
//! before the first line is ignored; blank lines (only white space) are skipped but counted; a
//! line longer than [`MAX_LINE_BYTES`] is one reject (its first [`OVERLONG_KEEP`] bytes kept)
//! and is never held in memory whole, so one enormous line (a binary file read by mistake)
//! cannot exhaust memory. Between two pieces a [`LineDecoder`] holds the unfinished last line
//! and what the format's [`Sink`] buffers for the next batch.
//!
//! Also the helpers those formats share: [`json_error_reason`] and [`utf8_or_reject`].
//! Touches nothing but the bytes it is fed and the [`Emit`] it writes to.

use silt_core::decode::{padding_reason, strip_bom, strip_cr, LineFramer, LineHandler};
use silt_core::{Decoder, Emit};

use crate::sink::Sink;

/// Longer lines are rejected without being held in memory.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// How much of an overlong line is kept in its reject.
pub const OVERLONG_KEEP: usize = 64 << 10;

/// What a line format does with its lines.
pub trait LineRecords: Send {
    /// The sink the records go to.
    fn sink(&mut self) -> &mut Sink;

    /// One non-blank line (numbered from 1, blank lines counted), without its line terminator
    /// and, on line 1, without a byte-order mark.
    fn record(&mut self, lineno: u64, line: &[u8], out: &mut dyn Emit) -> anyhow::Result<()>;

    /// The end of the stream: records held back for a line that never came are given to the
    /// sink now (Docker's partial lines).
    fn end(&mut self, _out: &mut dyn Emit) -> anyhow::Result<()> {
        Ok(())
    }
}

/// The [`Decoder`] of a line format `R`; see the module documentation.
pub struct LineDecoder<R> {
    framer: LineFramer,
    lines: Lines<R>,
}

impl<R: LineRecords> LineDecoder<R> {
    pub fn from_records(records: R) -> Self {
        Self {
            framer: LineFramer::new(MAX_LINE_BYTES, OVERLONG_KEEP),
            lines: Lines(records),
        }
    }

    /// The format's state (for tests).
    pub fn records(&mut self) -> &mut R {
        &mut self.lines.0
    }
}

impl<R: LineRecords> Decoder for LineDecoder<R> {
    fn feed(&mut self, bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        self.framer.feed(bytes, &mut self.lines, out)
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.lines.0.sink().flush(out)
    }

    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        // What was read before a failure is emitted all the same.
        let last = self.framer.finish(&mut self.lines, out);
        let end = self.lines.0.end(out);
        let flushed = self.lines.0.sink().flush(out);
        last.and(end).and(flushed)
    }
}

/// The line rules shared by every line format, around the format's own [`LineRecords`].
struct Lines<R>(R);

impl<R: LineRecords> LineHandler for Lines<R> {
    fn line(&mut self, lineno: u64, line: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        let mut line = strip_cr(line);
        if lineno == 1 {
            line = strip_bom(line);
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        self.0.record(lineno, line, out)
    }

    fn overlong(
        &mut self,
        lineno: u64,
        start: &[u8],
        _len: usize,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        let reason = format!("line longer than {MAX_LINE_BYTES} bytes");
        self.0.sink().reject(out, lineno, reason, start.to_vec())
    }

    fn padding(&mut self, lineno: u64, bytes: u64, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.0
            .sink()
            .reject(out, lineno, padding_reason(bytes), Vec::new())
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

    /// Lines are found, numbered and stripped the same wherever the reader's buffer ends.
    #[test]
    fn buffer_boundaries_do_not_change_lines() {
        let text = b"\xEF\xBB\xBF{\"a\":1}\r\n\n  \n{\"a\":2}\n{bad\r\n{\"a\":\"x\\ny\"}\r\n[3]\n{\"a\":4}";
        let run = |cap: usize| {
            let mut input = std::io::BufReader::with_capacity(cap, &text[..]);
            let mut out = CollectEmit::default();
            let source = SourceInfo::stdin();
            crate::read(
                crate::LogFormat::Json,
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
