//! The decoder contract: the bytes of one stream become batches and rejects, whether the stream
//! is read whole from a [`BufRead`] (a file, stdin) or arrives in pieces (a socket, a tailed
//! file, a Kafka topic).
//!
//! A [`Decoder`] is made for one stream (one [`crate::SourceInfo`]) and keeps everything it needs
//! between calls: the partial record at the end of the last piece, header state (Zeek's `#fields`),
//! the rows buffered for the next batch, line numbers for rejects.
//! - [`Decoder::feed`] takes the next bytes, split anywhere: a record may straddle two pieces;
//! - [`Decoder::flush`] emits the rows of every complete record fed so far, so that a sink that
//!   commits on a clock publishes them; the stream goes on;
//! - [`Decoder::finish`] ends the stream: a last record without its terminator counts;
//! - [`Decoder::read`] reads a whole `BufRead` (by default: feed each buffer, then finish).
//!
//! Decoders follow the reader rules of [`crate::emit`]: every record they cannot use is a
//! [`crate::Reject`] with its line (or record) number and reason; `Err` only when the stream
//! cannot go on. They do not report [`crate::Emit::progress`]: whoever hands them the bytes does
//! (see [`read_stream`]), so progress is counted once, however a stream is decoded.
//!
//! [`LineFramer`] cuts lines out of fed pieces for the line-based formats, without copying a line
//! unless it straddles two pieces, and with a bound on line length so that one enormous line (a
//! binary file read by mistake) cannot exhaust memory. A run of NUL bytes where a line starts is
//! zero padding, not part of the line: a log whose writer crashed after its file system had
//! allocated blocks it never wrote, or one truncated by logrotate's `copytruncate` while its
//! writer kept its offset, has such a hole before its next line. The framer skips the run, hands
//! the line after it out whole, and tells the handler ([`LineHandler::padding`]), which reports
//! it as a reject of that line ([`padding_reason`]); before, the hole and the line after it were
//! one line, rejected (or, over the length limit, skipped as overlong with the line after it).

use std::io::{BufRead, ErrorKind};

use memchr::{memchr, memrchr};

use crate::Emit;

/// The bytes of one stream in, batches and rejects out; see the module documentation.
pub trait Decoder: Send {
    /// The next bytes of the stream; a record may straddle two calls.
    fn feed(&mut self, bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()>;

    /// Emits the rows of every complete record fed so far (the stream goes on).
    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()>;

    /// The end of the stream: a last record without its terminator counts, and every row is
    /// emitted. Calling anything but `finish` afterwards is a logic error.
    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()>;

    /// Reads a whole stream from `input` and finishes it. The default feeds every buffer the
    /// reader fills; formats with a faster path of their own override it. Reports the bytes it
    /// consumes as [`Emit::progress`]. On an I/O error, what was read is emitted first, then the
    /// error is returned.
    fn read(&mut self, input: &mut dyn BufRead, out: &mut dyn Emit) -> anyhow::Result<()> {
        read_stream(self, input, out)
    }
}

/// Feeds every buffer of `input` to `decoder` (reporting each as progress), then finishes it.
/// On a read error the decoder is finished first (rows read are kept) and the error returned.
pub fn read_stream<D: Decoder + ?Sized>(
    decoder: &mut D,
    input: &mut dyn BufRead,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                decoder.finish(out)?;
                return Err(anyhow::Error::new(e).context("read error"));
            }
        };
        if buf.is_empty() {
            break;
        }
        let n = buf.len();
        decoder.feed(buf, out)?;
        input.consume(n);
        out.progress(n as u64);
    }
    decoder.finish(out)
}

/// Feeds `data` to `decoder` in one piece and finishes it (for tests and in-memory inputs).
pub fn decode_slice<D: Decoder + ?Sized>(
    decoder: &mut D,
    data: &[u8],
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    decoder.feed(data, out)?;
    out.progress(data.len() as u64);
    decoder.finish(out)
}

/// What a line-based decoder does with the lines a [`LineFramer`] cuts.
pub trait LineHandler {
    /// Line `lineno` (1-based, blank lines counted) without its `\n`; it may end in `\r`, and
    /// line 1 may start with a UTF-8 byte-order mark (see [`strip_bom`]).
    fn line(&mut self, lineno: u64, line: &[u8], out: &mut dyn Emit) -> anyhow::Result<()>;

    /// Line `lineno` is longer than the framer's limit: `start` is its first
    /// [`LineFramer::keep`] bytes, `len` its length so far. The rest of the line is skipped.
    fn overlong(
        &mut self,
        lineno: u64,
        start: &[u8],
        len: usize,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()>;

    /// `bytes` NUL bytes of zero padding stood where line `lineno` starts and were skipped
    /// (see the module documentation); called before that line is handed out. Handlers reject
    /// line `lineno` with [`padding_reason`] and no raw bytes (the line itself is decoded as
    /// usual).
    fn padding(&mut self, lineno: u64, bytes: u64, out: &mut dyn Emit) -> anyhow::Result<()>;
}

/// The reject reason for `bytes` NUL bytes of zero padding skipped where a line starts (at the
/// end of a stream, a last "line" of nothing else).
pub fn padding_reason(bytes: u64) -> String {
    format!(
        "{bytes} NUL byte{} of zero padding skipped where this line starts (a crash that left \
         allocated blocks unwritten, or logrotate's copytruncate while the writer kept its \
         offset); what follows them, if anything, is read as the line",
        if bytes == 1 { "" } else { "s" }
    )
}

/// How many NUL bytes `bytes` starts with.
pub fn nul_run(bytes: &[u8]) -> usize {
    bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len())
}

/// Cuts lines out of fed pieces; see the module documentation.
#[derive(Debug)]
pub struct LineFramer {
    carry: Vec<u8>,
    skipping: bool,
    lineno: u64,
    max_line: usize,
    keep: usize,
    /// NUL bytes skipped where the line in progress starts ([`LineHandler::padding`]).
    pad: u64,
}

impl LineFramer {
    /// Lines longer than `max_line` bytes are reported as overlong with their first `keep`
    /// bytes (`keep` ≤ `max_line`).
    pub fn new(max_line: usize, keep: usize) -> Self {
        Self {
            carry: Vec::new(),
            skipping: false,
            lineno: 0,
            max_line: max_line.max(1),
            keep: keep.min(max_line),
            pad: 0,
        }
    }

    /// Lines cut so far (the number of the last line handed out).
    pub fn lineno(&self) -> u64 {
        self.lineno
    }

    /// How many bytes of an overlong line are kept.
    pub fn keep(&self) -> usize {
        self.keep
    }

    /// Bytes of an unfinished line held back for the next piece.
    pub fn pending(&self) -> usize {
        self.carry.len()
    }

    /// Hands every complete line of `bytes` (with what was carried from earlier pieces) to `h`;
    /// the unfinished rest is kept for the next call.
    pub fn feed<H: LineHandler + ?Sized>(
        &mut self,
        mut bytes: &[u8],
        h: &mut H,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        while !bytes.is_empty() {
            if self.skipping {
                match memchr(b'\n', bytes) {
                    Some(i) => {
                        self.skipping = false;
                        bytes = &bytes[i + 1..];
                    }
                    None => return Ok(()),
                }
                continue;
            }
            if self.carry.is_empty() && bytes[0] == 0 {
                // Zero padding where a line starts: skipped, however many pieces it spans.
                let n = nul_run(bytes);
                self.pad += n as u64;
                bytes = &bytes[n..];
                continue;
            }
            if !self.carry.is_empty() {
                match memchr(b'\n', bytes) {
                    Some(i) => {
                        if self.carry.len() + i > self.max_line {
                            let len = self.carry.len() + i;
                            let room = self.keep.saturating_sub(self.carry.len());
                            self.carry.extend_from_slice(&bytes[..room.min(i)]);
                            self.carry.truncate(self.keep);
                            self.lineno += 1;
                            self.padded(h, out)?;
                            let start = std::mem::take(&mut self.carry);
                            h.overlong(self.lineno, &start, len, out)?;
                        } else {
                            self.carry.extend_from_slice(&bytes[..i]);
                            self.lineno += 1;
                            self.padded(h, out)?;
                            let line = std::mem::take(&mut self.carry);
                            let r = h.line(self.lineno, &line, out);
                            self.carry = line;
                            self.carry.clear();
                            r?;
                        }
                        bytes = &bytes[i + 1..];
                    }
                    None => {
                        self.hold(bytes, h, out)?;
                        return Ok(());
                    }
                }
                continue;
            }
            match memrchr(b'\n', bytes) {
                Some(last) => {
                    let mut start = 0;
                    for nl in memchr::memchr_iter(b'\n', &bytes[..=last]) {
                        self.lineno += 1;
                        let mut line = &bytes[start..nl];
                        if line.first() == Some(&0) {
                            let n = nul_run(line);
                            self.pad += n as u64;
                            line = &line[n..];
                        }
                        self.padded(h, out)?;
                        if line.len() > self.max_line {
                            h.overlong(self.lineno, &line[..self.keep], line.len(), out)?;
                        } else {
                            h.line(self.lineno, line, out)?;
                        }
                        start = nl + 1;
                    }
                    bytes = &bytes[last + 1..];
                }
                None => {
                    self.hold(bytes, h, out)?;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The end of the stream: a last line without `\n` is handed out.
    pub fn finish<H: LineHandler + ?Sized>(
        &mut self,
        h: &mut H,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        self.skipping = false;
        if self.carry.is_empty() {
            if self.pad > 0 {
                // Padding after the last line, with no line after it.
                self.lineno += 1;
                self.padded(h, out)?;
            }
            return Ok(());
        }
        self.lineno += 1;
        self.padded(h, out)?;
        let line = std::mem::take(&mut self.carry);
        h.line(self.lineno, &line, out)
    }

    /// Reports the padding skipped before line [`Self::lineno`], if any.
    fn padded<H: LineHandler + ?Sized>(
        &mut self,
        h: &mut H,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        match std::mem::take(&mut self.pad) {
            0 => Ok(()),
            n => h.padding(self.lineno, n, out),
        }
    }

    /// Keeps an unfinished line; one that outgrows the limit is reported now and skipped.
    fn hold<H: LineHandler + ?Sized>(
        &mut self,
        bytes: &[u8],
        h: &mut H,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        if self.carry.len() + bytes.len() > self.max_line {
            let room = self.keep.saturating_sub(self.carry.len());
            let len = self.carry.len() + bytes.len();
            self.carry
                .extend_from_slice(&bytes[..room.min(bytes.len())]);
            self.carry.truncate(self.keep);
            self.lineno += 1;
            self.padded(h, out)?;
            let start = std::mem::take(&mut self.carry);
            h.overlong(self.lineno, &start, len, out)?;
            self.skipping = true;
        } else {
            self.carry.extend_from_slice(bytes);
        }
        Ok(())
    }
}

/// `line` without a trailing `\r`.
pub fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// `line` without a leading UTF-8 byte-order mark (some editors and Windows tools add one).
pub fn strip_bom(line: &[u8]) -> &[u8] {
    line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CollectEmit, Reject};

    #[derive(Default)]
    struct Lines {
        got: Vec<(u64, Vec<u8>)>,
        long: Vec<(u64, Vec<u8>, usize)>,
        pads: Vec<(u64, u64)>,
    }

    impl LineHandler for Lines {
        fn line(&mut self, n: u64, line: &[u8], _: &mut dyn Emit) -> anyhow::Result<()> {
            self.got.push((n, line.to_vec()));
            Ok(())
        }
        fn overlong(
            &mut self,
            n: u64,
            start: &[u8],
            len: usize,
            _: &mut dyn Emit,
        ) -> anyhow::Result<()> {
            self.long.push((n, start.to_vec(), len));
            Ok(())
        }
        fn padding(&mut self, n: u64, bytes: u64, _: &mut dyn Emit) -> anyhow::Result<()> {
            // Reported before the line it precedes.
            assert!(self.got.last().is_none_or(|g| g.0 < n));
            self.pads.push((n, bytes));
            Ok(())
        }
    }

    fn cut(data: &[u8], piece: usize, max: usize, keep: usize) -> Lines {
        let mut f = LineFramer::new(max, keep);
        let mut h = Lines::default();
        let mut out = CollectEmit::default();
        for p in data.chunks(piece.max(1)) {
            f.feed(p, &mut h, &mut out).unwrap();
        }
        f.finish(&mut h, &mut out).unwrap();
        h
    }

    #[test]
    fn any_split_gives_the_same_lines() {
        let data = b"one\r\n\ntwo is longer\nthree without end";
        let whole = cut(data, data.len(), 1 << 20, 16);
        assert_eq!(
            whole.got,
            vec![
                (1, b"one\r".to_vec()),
                (2, b"".to_vec()),
                (3, b"two is longer".to_vec()),
                (4, b"three without end".to_vec()),
            ]
        );
        for piece in 1..data.len() {
            let h = cut(data, piece, 1 << 20, 16);
            assert_eq!(h.got, whole.got, "piece {piece}");
            assert!(h.long.is_empty());
        }
    }

    #[test]
    fn overlong_lines_are_reported_once_and_skipped() {
        let data = b"ok\nthis line is far too long\nnext\n";
        for piece in 1..=data.len() {
            let h = cut(data, piece, 8, 4);
            assert_eq!(
                h.got,
                vec![(1, b"ok".to_vec()), (3, b"next".to_vec())],
                "piece {piece}"
            );
            assert_eq!(h.long.len(), 1, "piece {piece}");
            let (n, start, len) = &h.long[0];
            assert_eq!(*n, 2);
            assert_eq!(start, b"this");
            assert!(*len > 8, "piece {piece}: {len}");
        }
    }

    /// Zero padding where a line starts is skipped and reported for that line, whatever the
    /// pieces; NUL bytes inside a line stay in it; padding longer than the line limit does not
    /// make the line after it overlong; padding after the last line is reported on its own.
    #[test]
    fn zero_padding_before_a_line_is_skipped_and_reported() {
        let mut data = vec![0u8; 3];
        data.extend_from_slice(b"first\nsecond\n");
        data.extend(std::iter::repeat_n(0u8, 40));
        data.extend_from_slice(b"third\0x\n\0\0\nlast\n");
        data.extend(std::iter::repeat_n(0u8, 5));
        let want = vec![
            (1, b"first".to_vec()),
            (2, b"second".to_vec()),
            (3, b"third\0x".to_vec()),
            (4, b"".to_vec()),
            (5, b"last".to_vec()),
        ];
        for piece in 1..=data.len() {
            let h = cut(&data, piece, 16, 4);
            assert_eq!(h.got, want, "piece {piece}");
            assert_eq!(
                h.pads,
                vec![(1, 3), (3, 40), (4, 2), (6, 5)],
                "piece {piece}"
            );
            assert!(h.long.is_empty(), "piece {piece}");
        }
        // An overlong line after padding: the padding is reported first, for that line.
        let h = cut(b"\0\0this line is far too long\nok\n", 64, 8, 4);
        assert_eq!(h.pads, vec![(1, 2)]);
        assert_eq!(h.long.len(), 1);
        assert_eq!(h.got, vec![(2, b"ok".to_vec())]);
        assert!(padding_reason(40).starts_with("40 NUL bytes of zero padding"));
    }

    struct Count(u64);
    impl Decoder for Count {
        fn feed(&mut self, b: &[u8], _: &mut dyn Emit) -> anyhow::Result<()> {
            self.0 += b.len() as u64;
            Ok(())
        }
        fn flush(&mut self, _: &mut dyn Emit) -> anyhow::Result<()> {
            Ok(())
        }
        fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
            out.reject(Reject {
                source: "x".into(),
                line: self.0,
                reason: "end".into(),
                raw: vec![],
                table: None,
            })
        }
    }

    #[test]
    fn read_stream_feeds_reports_progress_and_finishes() {
        let data = vec![7u8; 10_000];
        let mut input = std::io::BufReader::with_capacity(1000, &data[..]);
        let mut out = CollectEmit::default();
        let mut d = Count(0);
        d.read(&mut input, &mut out).unwrap();
        assert_eq!(out.bytes, 10_000);
        assert_eq!(out.rejects[0].line, 10_000);
    }
}
