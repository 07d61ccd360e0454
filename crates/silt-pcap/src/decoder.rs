//! Framing: the bytes of a capture, fed in pieces split anywhere, become blocks for
//! [`crate::rows`]. [`PcapDecoder`] is the [`silt_core::Decoder`] of the `pcap` format
//! ([`FORMAT`], classic pcap and pcapng).
//!
//! The first four bytes choose pcapng (its section header block, `0A 0D 0D 0A`) or classic pcap
//! (any other start; its 24-byte file header must then carry one of the classic magic numbers).
//! After that the decoder reads one unit at a time: the file header, a classic record (16-byte
//! header + captured bytes; 24 in the "modified" format), or a pcapng block (its length is in its
//! header, in the section's byte order). A unit is parsed only once all its declared bytes are
//! there, with `pcap-parser`'s slice parsers (`parse_pcap_header`, `parse_pcap_frame{,_be,_modified}`,
//! `parse_block_le`/`_be`), on exactly those bytes, so the outcome never depends on where the
//! pieces were cut. Units that lie inside a fed piece are parsed where they are; only a unit that
//! straddles two pieces is copied, into a buffer that holds at most that one unit. A declared
//! length of [`crate::MAX_BUFFER`] or more is corruption, so the buffer stays below that bound.
//!
//! Rejects (`docs/pcap.md`): input that is not a capture at all (or is empty) is one reject with
//! line 0; a record cut short by the end of the input is one reject ("truncated last record"); a
//! corrupt unit (bad length, fields that do not fit) is one reject and the rest of the input is
//! skipped (pcap has no resynchronisation marker). A reject keeps the first
//! [`crate::REJECT_RAW_BYTES`] bytes from where the problem starts, collected from later pieces if
//! need be, so it too is the same however the input was cut.
//!
//! Touches nothing but the bytes it is fed and the `Emit` sink.

use pcap_parser::nom::{self, IResult};
use pcap_parser::pcap::{
    parse_pcap_frame, parse_pcap_frame_be, parse_pcap_frame_modified, parse_pcap_header,
    LegacyPcapBlock,
};
use pcap_parser::pcapng::{
    parse_block_be, parse_block_le, parse_sectionheaderblock, Block, BOM_MAGIC, SHB_MAGIC,
};
use pcap_parser::{PcapBlockOwned, PcapError};
use silt_core::format::{Confidence, FormatOptions, FormatSpec, Probe};
use silt_core::{Decoder, Emit, Reject, SourceInfo};

use crate::rows::{head, FrameHandler, Framing, PacketRows};
use crate::{PcapOptions, INITIAL_BUFFER, MAX_BUFFER, REJECT_RAW_BYTES};

/// The `pcap` format (alias `pcapng`).
pub static FORMAT: FormatSpec = FormatSpec {
    name: "pcap",
    aliases: &["pcapng"],
    summary: "packet captures, pcap or pcapng; table pcap.packet (pcap.flow with --flows)",
    extensions: &["pcap", "pcapng", "cap"],
    sniff,
    open,
    text_fields: false,
    text: false,
};

fn open(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    let mut p = opts.get_or_default::<PcapOptions>();
    p.batch_rows = opts.read.batch_rows;
    Ok(Box::new(PcapDecoder::new(source, p)))
}

/// The classic pcap magic numbers as the file's first four bytes: microsecond and nanosecond
/// resolution in both byte orders, and the little-endian "modified" (Kuznetzov) format.
const CLASSIC_MAGICS: [[u8; 4]; 5] = [
    [0xd4, 0xc3, 0xb2, 0xa1],
    [0xa1, 0xb2, 0xc3, 0xd4],
    [0x4d, 0x3c, 0xb2, 0xa1],
    [0xa1, 0xb2, 0x3c, 0x4d],
    [0x34, 0xcd, 0xb2, 0xa1],
];

/// The first bytes of a pcapng file: a section header block.
const NG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

/// 100 for a classic pcap magic number, or a pcapng section header block (its type and a
/// byte-order magic in either order); `None` otherwise.
pub fn sniff(p: &Probe<'_>) -> Option<Confidence> {
    let h = p.head;
    let magic: [u8; 4] = h.get(..4)?.try_into().ok()?;
    if CLASSIC_MAGICS.contains(&magic) {
        return Some(100);
    }
    let bom = u32::from_le_bytes(h.get(8..12)?.try_into().ok()?);
    (magic == NG_MAGIC && (bom == BOM_MAGIC || bom == BOM_MAGIC.swap_bytes())).then_some(100)
}

type LegacyParse = fn(&[u8]) -> IResult<&[u8], LegacyPcapBlock<'_>, PcapError<&[u8]>>;

/// Where the decoder is in the stream.
#[derive(Clone, Copy)]
enum Mode {
    /// Nothing seen yet: the first four bytes decide pcapng or classic pcap.
    Start,
    /// Classic pcap, before its file header.
    LegacyHeader,
    /// Classic pcap records: their parser and header size, and the header's byte order.
    Legacy {
        parse: LegacyParse,
        hdr: usize,
        big_endian: bool,
    },
    /// pcapng blocks in the current section's byte order; `first`: the section header block
    /// that must start the file is still to come.
    Ng { big_endian: bool, first: bool },
    /// Reading stopped; `PcapDecoder::failed` collects the raw bytes of its reject.
    Failed,
    /// Reading stopped; the rest of the input is skipped.
    Done,
}

/// What a step did with the bytes it was shown.
enum Step {
    /// The first `n` bytes were used (a unit, or skipped input).
    Used(usize),
    /// The next unit needs this many bytes (counted from the start of what was shown).
    More(usize),
}

/// The pcap/pcapng [`Decoder`] for one stream; see the module documentation. `H` says what
/// becomes of each frame: `pcap.packet` rows by default, flow-export records for the sFlow and
/// NetFlow readers.
pub struct PcapDecoder<H = PacketRows> {
    mode: Mode,
    /// The start of a unit that straddles two pieces (at most one unit).
    buf: Vec<u8>,
    /// The reject that stopped reading, while its raw bytes are collected.
    failed: Option<Reject>,
    rows: Framing<H>,
}

impl PcapDecoder<PacketRows> {
    /// A decoder for one stream (`opts.batch_rows` rows per batch).
    pub fn new(source: &SourceInfo, opts: PcapOptions) -> Self {
        Self::with_handler(source, PacketRows::new(source, opts))
    }
}

impl<H: FrameHandler> PcapDecoder<H> {
    /// A decoder for one stream whose frames go to `handler`.
    pub fn with_handler(source: &SourceInfo, handler: H) -> Self {
        Self {
            mode: Mode::Start,
            buf: Vec::new(),
            failed: None,
            rows: Framing::new(source, handler),
        }
    }

    /// The frame handler (for its counters once the stream is done).
    pub fn handler(&self) -> &H {
        &self.rows.handler
    }

    /// Bytes held back for the next piece: the start of a block that straddles two pieces (at
    /// most one block, below [`crate::MAX_BUFFER`]).
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Reading stops at `data` (the start of the bad unit): one reject, whose raw bytes are the
    /// first [`REJECT_RAW_BYTES`] from there on. `line` 0 is the whole input.
    fn fail(
        &mut self,
        line: u64,
        reason: String,
        data: &[u8],
        end: bool,
        out: &mut dyn Emit,
    ) -> anyhow::Result<Step> {
        self.failed = Some(Reject {
            source: self.rows.source().display.clone(),
            line,
            reason,
            raw: head(data),
            table: Some(self.rows.handler.reject_table()),
        });
        self.mode = Mode::Failed;
        self.collect(&data[data.len().min(REJECT_RAW_BYTES)..], end, out)?;
        Ok(Step::Used(data.len()))
    }

    /// Adds to the pending reject's raw bytes; sends it once it has them all (or at the end).
    fn collect(&mut self, data: &[u8], end: bool, out: &mut dyn Emit) -> anyhow::Result<()> {
        let Some(r) = self.failed.as_mut() else {
            return Ok(());
        };
        let room = REJECT_RAW_BYTES.saturating_sub(r.raw.len());
        r.raw.extend_from_slice(&data[..room.min(data.len())]);
        if end || r.raw.len() >= REJECT_RAW_BYTES {
            let r = self.failed.take().expect("checked above");
            self.mode = Mode::Done;
            self.rows.handler.reject(r, out)?;
        }
        Ok(())
    }

    /// A bad unit at frame position: it counts as one frame.
    fn fail_frame(
        &mut self,
        reason: String,
        data: &[u8],
        end: bool,
        out: &mut dyn Emit,
    ) -> anyhow::Result<Step> {
        self.rows.frame += 1;
        let line = self.rows.frame;
        self.fail(line, reason, data, end, out)
    }

    /// The input ends inside a unit.
    fn truncated(&mut self, data: &[u8], out: &mut dyn Emit) -> anyhow::Result<Step> {
        self.rows.frame += 1;
        self.mode = Mode::Done;
        let reason = format!(
            "truncated last record: input ends {} bytes into it",
            data.len()
        );
        self.rows.reject_frame(out, reason, head(data))?;
        Ok(Step::Used(data.len()))
    }

    /// Handles the unit at the start of `data`; `end`: no more bytes will come (then the step
    /// never asks for more).
    fn step(&mut self, data: &[u8], end: bool, out: &mut dyn Emit) -> anyhow::Result<Step> {
        match self.mode {
            Mode::Done => Ok(Step::Used(data.len())),
            Mode::Failed => {
                self.collect(data, end, out)?;
                Ok(Step::Used(data.len()))
            }
            Mode::Start => {
                if data.len() < 4 && !end {
                    return Ok(Step::More(4));
                }
                if data.is_empty() {
                    let reason = "empty input: not a pcap or pcapng file".to_string();
                    return self.fail(0, reason, data, end, out);
                }
                self.mode = if data.starts_with(&NG_MAGIC) {
                    Mode::Ng {
                        big_endian: false,
                        first: true,
                    }
                } else {
                    Mode::LegacyHeader
                };
                Ok(Step::Used(0))
            }
            Mode::LegacyHeader => match parse_pcap_header(data) {
                Ok((_, h)) => {
                    let (parse, hdr): (LegacyParse, usize) = if h.is_modified_format() {
                        (parse_pcap_frame_modified, 24)
                    } else if h.is_bigendian() {
                        (parse_pcap_frame_be, 16)
                    } else {
                        (parse_pcap_frame, 16)
                    };
                    self.mode = Mode::Legacy {
                        parse,
                        hdr,
                        big_endian: h.is_bigendian(),
                    };
                    let size = h.size();
                    self.rows.block(PcapBlockOwned::LegacyHeader(h), out)?;
                    Ok(Step::Used(size))
                }
                Err(nom::Err::Incomplete(_)) if !end => Ok(Step::More(24)),
                Err(e) => {
                    let reason = format!("not a pcap or pcapng file ({})", describe(&e));
                    self.fail(0, reason, data, end, out)
                }
            },
            Mode::Legacy {
                parse,
                hdr,
                big_endian,
            } => {
                if data.len() < hdr {
                    return match (end, data.is_empty()) {
                        (false, _) => Ok(Step::More(hdr)),
                        (true, true) => {
                            self.mode = Mode::Done;
                            Ok(Step::Used(0))
                        }
                        (true, false) => self.truncated(data, out),
                    };
                }
                let caplen = u32_at(data, 8, big_endian) as usize;
                let need = hdr.saturating_add(caplen);
                if need >= MAX_BUFFER {
                    return self.fail_frame(too_long(), data, end, out);
                }
                if data.len() < need {
                    return if end {
                        self.truncated(data, out)
                    } else {
                        Ok(Step::More(need))
                    };
                }
                match parse(&data[..need]) {
                    Ok((_, b)) => {
                        self.rows.block(PcapBlockOwned::Legacy(b), out)?;
                        Ok(Step::Used(need))
                    }
                    Err(e) => self.fail_frame(corrupt(&e, need), data, end, out),
                }
            }
            Mode::Ng { big_endian, first } => self.ng_block(data, big_endian, first, end, out),
        }
    }

    fn ng_block(
        &mut self,
        data: &[u8],
        big_endian: bool,
        first: bool,
        end: bool,
        out: &mut dyn Emit,
    ) -> anyhow::Result<Step> {
        // The file's first block must be a section header block; anything wrong with it means
        // the input is not pcapng at all (one reject for the whole input, as before).
        let not_ng = |e: String| format!("not a pcapng file ({e})");
        // Every block is at least 12 bytes (type, length, length again); a section header block
        // says its byte order at offset 8.
        if data.len() < 12 {
            return match (end, data.is_empty(), first) {
                (false, _, _) => Ok(Step::More(12)),
                (true, true, _) => {
                    self.mode = Mode::Done;
                    Ok(Step::Used(0))
                }
                (true, false, true) => {
                    let e = parse_sectionheaderblock(data).err();
                    let reason = not_ng(e.map_or_else(|| "too short".into(), |e| describe(&e)));
                    self.fail(0, reason, data, end, out)
                }
                (true, false, false) => self.truncated(data, out),
            };
        }
        let mut len_be = big_endian;
        if u32_at(data, 0, false) == SHB_MAGIC {
            let bom = u32_at(data, 8, false);
            if bom == BOM_MAGIC {
                len_be = false;
            } else if bom == BOM_MAGIC.swap_bytes() {
                len_be = true;
            } else {
                let e = describe(&nom::Err::Error(PcapError::<&[u8]>::HeaderNotRecognized));
                return if first {
                    self.fail(0, not_ng(e), data, end, out)
                } else {
                    self.fail_frame(
                        format!("corrupt block, stopped reading: {e}"),
                        data,
                        end,
                        out,
                    )
                };
            }
        }
        let len = u32_at(data, 4, len_be) as usize;
        let bad_len = if len >= MAX_BUFFER {
            Some(too_long())
        } else if len < 12 {
            Some(format!(
                "corrupt block, stopped reading: its length {len} is below the minimum of 12 bytes"
            ))
        } else {
            None
        };
        if let Some(reason) = bad_len {
            return if first {
                self.fail(0, not_ng(reason), data, end, out)
            } else {
                self.fail_frame(reason, data, end, out)
            };
        }
        if data.len() < len {
            return match (end, first) {
                (false, _) => Ok(Step::More(len)),
                (true, true) => {
                    let e = parse_sectionheaderblock(data).err();
                    let reason = not_ng(e.map_or_else(|| "too short".into(), |e| describe(&e)));
                    self.fail(0, reason, data, end, out)
                }
                (true, false) => self.truncated(data, out),
            };
        }
        let block = &data[..len];
        if first {
            if let Err(e) = parse_sectionheaderblock(block) {
                return self.fail(0, not_ng(describe(&e)), data, end, out);
            }
        }
        let parsed = if big_endian {
            parse_block_be(block)
        } else {
            parse_block_le(block)
        };
        match parsed {
            Ok((_, b)) => {
                let big_endian = match &b {
                    Block::SectionHeader(shb) => shb.big_endian(),
                    _ => big_endian,
                };
                self.mode = Mode::Ng {
                    big_endian,
                    first: false,
                };
                self.rows.block(PcapBlockOwned::NG(b), out)?;
                Ok(Step::Used(len))
            }
            Err(e) => self.fail_frame(corrupt(&e, len), data, end, out),
        }
    }
}

impl<H: FrameHandler> Decoder for PcapDecoder<H> {
    fn feed(&mut self, mut bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        // First the unit held back from earlier pieces, topped up with only what it needs.
        while !self.buf.is_empty() {
            let mut buf = std::mem::take(&mut self.buf);
            let step = self.step(&buf, false, out);
            match step? {
                Step::Used(n) => {
                    buf.drain(..n);
                }
                Step::More(want) => {
                    if bytes.is_empty() {
                        self.buf = buf;
                        return Ok(());
                    }
                    let take = want.saturating_sub(buf.len()).clamp(1, bytes.len());
                    buf.extend_from_slice(&bytes[..take]);
                    bytes = &bytes[take..];
                }
            }
            self.buf = buf;
        }
        if self.buf.capacity() > INITIAL_BUFFER {
            // A big block went through: do not keep its memory for the rest of the stream.
            self.buf = Vec::new();
        }
        // Then the units that lie inside this piece, where they are.
        while !bytes.is_empty() {
            match self.step(bytes, false, out)? {
                Step::Used(n) => bytes = &bytes[n..],
                Step::More(_) => {
                    self.buf.extend_from_slice(bytes);
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.rows.flush(out, false)
    }

    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let buf = std::mem::take(&mut self.buf);
        let mut data = &buf[..];
        while !matches!(self.mode, Mode::Done) {
            match self.step(data, true, out)? {
                Step::Used(n) => data = &data[n..],
                // A step at the end of the input never asks for more.
                Step::More(_) => break,
            }
        }
        self.rows.flush(out, true)
    }
}

/// The 32-bit number at `at` in the given byte order (`data` holds at least `at + 4` bytes).
fn u32_at(data: &[u8], at: usize, big_endian: bool) -> u32 {
    let b: [u8; 4] = data[at..at + 4].try_into().expect("4 bytes");
    if big_endian {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

fn too_long() -> String {
    format!(
        "block length exceeds {} MiB: corrupt file, stopped reading",
        MAX_BUFFER >> 20
    )
}

fn corrupt(e: &nom::Err<PcapError<&[u8]>>, len: usize) -> String {
    match e {
        // The whole unit was there, yet a field inside it wants more: its lengths disagree.
        nom::Err::Incomplete(_) => {
            format!("corrupt block, stopped reading: its fields run past its length of {len} bytes")
        }
        e => format!("corrupt block, stopped reading: {}", describe(e)),
    }
}

/// A parse error in words, without the input bytes `pcap-parser` puts into some errors.
fn describe(e: &nom::Err<PcapError<&[u8]>>) -> String {
    match e {
        nom::Err::Incomplete(nom::Needed::Size(n)) => format!("Incomplete({n})"),
        nom::Err::Incomplete(nom::Needed::Unknown) => "Incomplete(0)".into(),
        nom::Err::Error(e) | nom::Err::Failure(e) => match e {
            PcapError::NomError(_, kind) | PcapError::OwnedNomError(_, kind) => {
                format!("invalid field ({kind:?})")
            }
            e => format!("{e:?}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(h: &[u8]) -> Option<Confidence> {
        sniff(&Probe {
            head: h,
            file_name: None,
        })
    }

    #[test]
    fn sniffs_captures_and_nothing_else() {
        for m in CLASSIC_MAGICS {
            let mut h = m.to_vec();
            h.extend([2, 0, 4, 0, 0, 0, 0, 0]);
            assert_eq!(probe(&h), Some(100), "{m:x?}");
        }
        let le = [
            0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a,
        ];
        let be = [
            0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0x1c, 0x1a, 0x2b, 0x3c, 0x4d,
        ];
        assert_eq!(probe(&le), Some(100));
        assert_eq!(probe(&be), Some(100));
        for no in [
            &b"\n\r\r\nhello world"[..],
            b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00",
            b"#separator \\x09\n",
            b"{\"event_type\":\"dns\"}\n",
            b"\xa1\xb2",
            b"",
        ] {
            assert_eq!(probe(no), None, "{no:?}");
        }
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..1000 {
            let junk: Vec<u8> = (0..64)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng as u8
                })
                .collect();
            let magic: [u8; 4] = junk[..4].try_into().unwrap();
            let want = CLASSIC_MAGICS.contains(&magic).then_some(100);
            assert_eq!(probe(&junk), want);
        }
    }
}
