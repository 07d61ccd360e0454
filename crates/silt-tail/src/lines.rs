//! Line assembly for one followed file: bytes go in as they are read, whole lines come out with
//! the offsets they came from, a partial last line waits for its newline, and a line longer than
//! `max_line_bytes` is skipped (reported, with its offsets) without ever being held in memory
//! past that limit.
//!
//! Pure bookkeeping: touches no file; [`crate::tailer`] does the reading.

/// What [`LineBuffer::push`] and [`LineBuffer::finish`] hand out, in file order.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Complete lines at `[start, end)`, each ending in `\n`.
    Lines {
        start: u64,
        end: u64,
        bytes: Vec<u8>,
    },
    /// A last line without its newline, handed out because the stream ends.
    Partial {
        start: u64,
        end: u64,
        bytes: Vec<u8>,
    },
    /// A line over the limit, discarded at `[start, end)`; `complete` is false when the stream
    /// ended before its newline came.
    Skipped {
        start: u64,
        end: u64,
        complete: bool,
    },
}

/// The state of one stream's line assembly (see the module documentation).
#[derive(Debug)]
pub(crate) struct LineBuffer {
    /// Everything before this was handed out (as lines or as skipped): the resume offset.
    offset: u64,
    /// Where the next read goes: `offset + pending.len()`, or further while skipping.
    read_pos: u64,
    /// The bytes `[offset, read_pos)` (a partial line) when not skipping.
    pending: Vec<u8>,
    /// Start of an over-long line whose bytes up to `read_pos` were discarded.
    skip_from: Option<u64>,
    max_line: usize,
}

impl LineBuffer {
    /// Assembly starting at `offset`, which must be the start of a line.
    pub(crate) fn new(offset: u64, max_line: usize) -> Self {
        LineBuffer {
            offset,
            read_pos: offset,
            pending: Vec::new(),
            skip_from: None,
            max_line,
        }
    }

    /// Assembly starting in the middle of a line that is already over the limit: everything up
    /// to the next newline is skipped.
    pub(crate) fn skipping(offset: u64, max_line: usize) -> Self {
        let mut b = LineBuffer::new(offset, max_line);
        b.skip_from = Some(offset);
        b
    }

    /// End of what was handed out.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// End of what was read.
    pub(crate) fn read_pos(&self) -> u64 {
        self.read_pos
    }

    /// The longest line kept.
    pub(crate) fn max_line(&self) -> usize {
        self.max_line
    }

    /// Bytes read but not handed out (a partial line, or a line being skipped).
    pub(crate) fn has_unfinished(&self) -> bool {
        self.read_pos > self.offset
    }

    /// Takes `data`, read at [`Self::read_pos`], and appends what became complete to `out`.
    pub(crate) fn push(&mut self, mut data: &[u8], out: &mut Vec<Piece>) {
        let mut pos = self.read_pos;
        self.read_pos += data.len() as u64;
        if let Some(start) = self.skip_from {
            match data.iter().position(|&b| b == b'\n') {
                None => return,
                Some(i) => {
                    let end = pos + i as u64 + 1;
                    out.push(Piece::Skipped {
                        start,
                        end,
                        complete: true,
                    });
                    self.skip_from = None;
                    self.offset = end;
                    data = &data[i + 1..];
                    pos = end;
                }
            }
        }
        debug_assert_eq!(self.offset + self.pending.len() as u64, pos);
        // The old pending bytes hold no newline: search only the new ones.
        let mut search = self.pending.len();
        self.pending.extend_from_slice(data);
        let mut line_start = 0usize;
        let mut run_start = 0usize;
        while let Some(i) = self.pending[search..].iter().position(|&b| b == b'\n') {
            let nl = search + i;
            if nl - line_start > self.max_line {
                self.emit_run(run_start, line_start, out);
                out.push(Piece::Skipped {
                    start: self.offset + line_start as u64,
                    end: self.offset + nl as u64 + 1,
                    complete: true,
                });
                run_start = nl + 1;
            }
            line_start = nl + 1;
            search = nl + 1;
        }
        self.emit_run(run_start, line_start, out);
        let partial = self.pending.len() - line_start;
        if partial > self.max_line {
            self.skip_from = Some(self.offset + line_start as u64);
            self.offset += line_start as u64;
            self.pending = Vec::new();
        } else {
            self.pending.drain(..line_start);
            self.offset += line_start as u64;
        }
    }

    fn emit_run(&self, from: usize, to: usize, out: &mut Vec<Piece>) {
        if to > from {
            out.push(Piece::Lines {
                start: self.offset + from as u64,
                end: self.offset + to as u64,
                bytes: self.pending[from..to].to_vec(),
            });
        }
    }

    /// The stream ends: hands out the partial last line or the skip in progress.
    pub(crate) fn finish(&mut self, out: &mut Vec<Piece>) {
        if let Some(start) = self.skip_from.take() {
            out.push(Piece::Skipped {
                start,
                end: self.read_pos,
                complete: false,
            });
        } else if !self.pending.is_empty() {
            out.push(Piece::Partial {
                start: self.offset,
                end: self.read_pos,
                bytes: std::mem::take(&mut self.pending),
            });
        }
        self.offset = self.read_pos;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(b: &mut LineBuffer, data: &[u8]) -> Vec<Piece> {
        let mut out = Vec::new();
        b.push(data, &mut out);
        out
    }

    fn lines(start: u64, bytes: &[u8]) -> Piece {
        Piece::Lines {
            start,
            end: start + bytes.len() as u64,
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn partial_lines_wait_for_their_newline() {
        let mut b = LineBuffer::new(10, 100);
        assert_eq!(feed(&mut b, b"ab"), vec![]);
        assert_eq!(feed(&mut b, b"c\nde"), vec![lines(10, b"abc\n")]);
        assert_eq!((b.offset(), b.read_pos()), (14, 16));
        assert_eq!(feed(&mut b, b"\n\nf\n"), vec![lines(14, b"de\n\nf\n")]);
        assert!(!b.has_unfinished());
        assert_eq!(feed(&mut b, b"tail"), vec![]);
        let mut out = Vec::new();
        b.finish(&mut out);
        assert_eq!(
            out,
            vec![Piece::Partial {
                start: 20,
                end: 24,
                bytes: b"tail".to_vec()
            }]
        );
        assert_eq!(b.offset(), 24);
    }

    #[test]
    fn long_lines_are_skipped_with_their_offsets() {
        let mut b = LineBuffer::new(0, 4);
        assert_eq!(
            feed(&mut b, b"ok\ntoolong\nfine\n"),
            vec![
                lines(0, b"ok\n"),
                Piece::Skipped {
                    start: 3,
                    end: 11,
                    complete: true
                },
                lines(11, b"fine\n"),
            ]
        );
        // A long line arriving in pieces is never buffered past the limit.
        assert_eq!(feed(&mut b, b"abc"), vec![]);
        assert_eq!(feed(&mut b, b"defgh"), vec![]);
        assert!(b.pending.is_empty());
        assert_eq!(b.offset(), 16);
        assert_eq!(feed(&mut b, b"ij"), vec![]);
        assert_eq!(
            feed(&mut b, b"k\nx\n"),
            vec![
                Piece::Skipped {
                    start: 16,
                    end: 28,
                    complete: true
                },
                lines(28, b"x\n")
            ]
        );
        assert_eq!(feed(&mut b, b"yyyyyyyy"), vec![]);
        let mut out = Vec::new();
        b.finish(&mut out);
        assert_eq!(
            out,
            vec![Piece::Skipped {
                start: 30,
                end: 38,
                complete: false
            }]
        );
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_kept() {
        let mut b = LineBuffer::new(0, 4);
        assert_eq!(feed(&mut b, b"abcd"), vec![]);
        assert_eq!(feed(&mut b, b"\n"), vec![lines(0, b"abcd\n")]);
    }

    #[test]
    fn skipping_start() {
        let mut b = LineBuffer::skipping(5, 4);
        assert_eq!(
            feed(&mut b, b"zz\nab\n"),
            vec![
                Piece::Skipped {
                    start: 5,
                    end: 8,
                    complete: true
                },
                lines(8, b"ab\n")
            ]
        );
    }
}
