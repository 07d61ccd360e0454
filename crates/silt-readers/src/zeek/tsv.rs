//! Zeek TSV logs (Zeek's ASCII writer, also Bro 2.x) -> Arrow batches, one table per `#path`.
//!
//! Header directives: `#separator` (value after one space, `\x09`-style escapes), `#set_separator`,
//! `#empty_field`, `#unset_field`, `#path`, `#fields`, `#types`, `#open`, `#close`; any other
//! `#` line (e.g. `#file foo.pcap`) is ignored. A non-default meta prefix (Zeek's
//! `LogAscii::meta_prefix`) is recognised when the stream's first line is `<prefix>separator <x>`.
//! A `#separator` line starts a new header block (path, fields and types are forgotten); when a
//! block's path, fields or types differ from the previous one, the rows so far are emitted and a
//! new schema starts, otherwise rows keep accumulating into the same batch.
//!
//! Values: unset marker -> null (also for container elements); empty marker -> empty list for
//! containers and empty string for strings; `\xNN` and `\\` escapes are decoded and strings are
//! stored in the canonical form of [`super::types::canon_into`]. The canonified test token
//! `XXXXXXXXXX.XXXXXX` in a `time` field is a null time (the row is kept).
//!
//! Bad input: a data line with the wrong number of fields, or a field that does not parse as its
//! type, rejects the whole line (`field 4 (id.orig_p: port): invalid port "abc"`, fields counted
//! from 1 as in `cut -f`), and reading goes on. Data before any `#fields` header is rejected.
//! Empty lines are skipped. CRLF line ends are accepted.
//!
//! [`ZeekTsvDecoder`] is the [`silt_core::Decoder`]: it may be fed the stream in pieces split
//! anywhere (header state, the partial last line and the rows of the batch being built are all it
//! keeps between calls); [`read`] and [`read_slice`] are thin wrappers over it.
//!
//! This is the benchmarked hot path: lines are cut out of the fed pieces by
//! [`silt_core::decode::LineFramer`] with memchr (no copy unless a line straddles two pieces),
//! the separators of a line are found eight bytes at a time, lines are gathered in groups of a
//! few hundred that are parsed column by column ([`Pending`]: one type dispatch per column and
//! group; a group with a bad field is parsed again line by line for its rejects), and each field
//! goes straight into its typed column builder (no per-line or per-field allocation; fast paths
//! for Zeek's own number/time/IPv4/plain-string forms that give the same results as the general
//! parsers).
//! [`read_slice`] decodes an in-memory slice, for micro-benchmarks (`tests/zeek_bench.rs`).
//! A whole stream ([`Decoder::read`]) is decoded in blocks on several threads where the machine
//! has cores to spare ([`silt_core::split`]; [`SplitLines`] is what the blocks need of this
//! parser: a copy of its header state, and the header lines of each block followed).
//!
//! Touches nothing but its input and `out`.

use std::io::BufRead;

use memchr::memchr;
use silt_core::decode::{decode_slice, padding_reason, strip_bom, LineFramer, LineHandler};
use silt_core::split::{read_split, Split, SplitLines};
use silt_core::{Decoder, Emit, ReadOptions, Reject, SourceInfo, TableName};

use super::{overlong_reason, MAX_LINE, REJECT_RAW_MAX};

use super::types::{
    addr_into, canon_into, count_value, parse_f64, parse_i64, parse_u64, Col, Layout, LeafSpec,
    ZType,
};

/// Zeek's btest canonifier replaces times by this token; it reads as a null time.
pub const CANONIFIED_TS: &[u8] = b"XXXXXXXXXX.XXXXXX";
/// A batch is emitted early once its rows came from this many input bytes, so that the 32-bit
/// offsets of Arrow string arrays cannot overflow (canonical text is at most 4x its input).
const FLUSH_BYTES: usize = 256 << 20;

/// Data lines are parsed in groups of up to this many lines ([`Pending`])...
const GROUP_ROWS: usize = 256;
/// ... or of this many bytes of text.
const GROUP_BYTES: usize = 64 << 10;
/// A line at least this long is parsed on its own where it is, not copied into a group.
const GROUP_LINE_MAX: usize = 16 << 10;

/// Reads a Zeek TSV stream (with [`ZeekTsvDecoder`]). See the module documentation.
pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    opts: &ReadOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    ZeekTsvDecoder::new(source, opts).read(input, out)
}

/// Parses a whole in-memory Zeek TSV log (same behaviour as [`read`]); for benchmarks and tests.
pub fn read_slice(
    data: &[u8],
    source: &SourceInfo,
    opts: &ReadOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    decode_slice(&mut ZeekTsvDecoder::new(source, opts), data, out)
}

/// The Zeek TSV [`Decoder`] for one stream; see the module documentation.
pub struct ZeekTsvDecoder {
    framer: LineFramer,
    parser: TsvParser,
}

impl ZeekTsvDecoder {
    pub fn new(source: &SourceInfo, opts: &ReadOptions) -> Self {
        Self {
            framer: LineFramer::new(MAX_LINE, REJECT_RAW_MAX),
            parser: TsvParser::new(source, opts),
        }
    }
}

impl Decoder for ZeekTsvDecoder {
    fn feed(&mut self, bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        self.framer.feed(bytes, &mut self.parser, out)
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.parser.flush(out)
    }

    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.framer.finish(&mut self.parser, out)?;
        self.parser.flush(out)
    }

    /// A whole stream is decoded on several threads ([`silt_core::split`]); fed in pieces, it is
    /// decoded on the caller's.
    fn read(&mut self, input: &mut dyn BufRead, out: &mut dyn Emit) -> anyhow::Result<()> {
        read_split(self, input, out, Split::auto())
    }
}

impl SplitLines for ZeekTsvDecoder {
    type Part = ZeekTsvDecoder;

    fn fork(&self) -> ZeekTsvDecoder {
        ZeekTsvDecoder {
            framer: LineFramer::new(MAX_LINE, REJECT_RAW_MAX),
            parser: self.parser.fork(),
        }
    }

    /// Only header lines change the state a block is decoded in. Until the first line with
    /// content every line is looked at (a byte-order mark, a meta prefix of its own); after it,
    /// only lines that start with the meta prefix's first byte, found with memchr.
    fn skip(&mut self, block: &[u8]) {
        let p = &mut self.parser;
        let mut at = 0;
        while !p.seen_content && at < block.len() {
            let end = memchr(b'\n', &block[at..]).map_or(block.len(), |i| at + i);
            p.header(p.skipped == 0, &block[at..end]);
            p.skipped += 1;
            at = end + 1;
        }
        p.skipped = p.skipped.max(1);
        let first = p.prefix[0];
        let mut from = at;
        while from < block.len() {
            let Some(i) = memchr(first, &block[from..]).map(|i| from + i) else {
                break;
            };
            let end = memchr(b'\n', &block[i..]).map_or(block.len(), |j| i + j);
            if i == at || block[i - 1] == b'\n' {
                // Not line 1 of the stream (which the loop above took): no BOM to take off.
                p.header(false, &block[i..end]);
            }
            from = end + 1;
        }
    }

    fn part_lines(part: &ZeekTsvDecoder) -> u64 {
        part.framer.lineno()
    }
}

/// Separators and markers of the current header block.
#[derive(Debug, Clone)]
struct Markers {
    sep: Vec<u8>,
    set_sep: Vec<u8>,
    empty: Vec<u8>,
    unset: Vec<u8>,
}

impl Default for Markers {
    fn default() -> Self {
        Markers {
            sep: b"\t".to_vec(),
            set_sep: b",".to_vec(),
            empty: b"(empty)".to_vec(),
            unset: b"-".to_vec(),
        }
    }
}

/// The schema-defining part of a header block and its column builders.
struct Block {
    table: TableName,
    path: String,
    fields: Vec<String>,
    types: Vec<String>,
    ztypes: Vec<ZType>,
    layout: Layout,
    cols: Vec<Col>,
    rows: usize,
    /// Input bytes (with line ends) of the rows in the builders.
    bytes: usize,
}

/// Data lines of the active block waiting to be parsed together, column by column: each column's
/// type is decided once a group, with one builder in use at a time, instead of a dispatch and a
/// call per field (`push_field` and the line loop were ~23 % of a real-derived conn import's
/// CPU, perf). A group with a field that fails is parsed again line by line, which rejects the
/// lines that fail, with their numbers, as if no group were made. The group is parsed before
/// anything that depends on the order of lines: a header line, a reject, a batch flush.
#[derive(Default)]
struct Pending {
    /// The lines' text, one after another.
    text: Vec<u8>,
    lines: Vec<PendingLine>,
    /// Each line's separator positions (`fields - 1` of them, from the line's start).
    pos: Vec<u32>,
    /// Input bytes of the lines, with their line ends.
    bytes: usize,
}

struct PendingLine {
    start: usize,
    len: usize,
    line_no: u64,
    raw_len: usize,
}

impl Pending {
    fn clear(&mut self) {
        self.text.clear();
        self.lines.clear();
        self.pos.clear();
        self.bytes = 0;
    }
}

/// Line-at-a-time Zeek TSV parser (the state machine behind [`ZeekTsvDecoder`]).
struct TsvParser {
    source: SourceInfo,
    batch_rows: usize,
    prefix: Vec<u8>,
    m: Markers,
    path: Option<String>,
    fields: Option<Vec<String>>,
    types: Option<Vec<String>>,
    /// The header changed since the active block was set up.
    dirty: bool,
    block: Option<Block>,
    /// Why there is no usable block (data lines are rejected with this reason).
    block_err: Option<String>,
    line_no: u64,
    seen_content: bool,
    /// Lines looked at by [`SplitLines::skip`] (on the reading thread's copy; a fork whose
    /// count is not 0 starts after the stream's first line, so its line 1 keeps a BOM).
    skipped: u64,
    scratch: Vec<u8>,
    /// Separator positions of a line parsed on its own.
    pos: Vec<u32>,
    pend: Pending,
    /// [`GROUP_ROWS`] (tests vary it).
    group_rows: usize,
}

impl TsvParser {
    fn new(source: &SourceInfo, opts: &ReadOptions) -> Self {
        TsvParser {
            source: source.clone(),
            batch_rows: opts.batch_rows.max(1),
            prefix: b"#".to_vec(),
            m: Markers::default(),
            path: None,
            fields: None,
            types: None,
            dirty: false,
            block: None,
            block_err: None,
            line_no: 0,
            seen_content: false,
            skipped: 0,
            scratch: Vec::new(),
            pos: Vec::new(),
            pend: Pending::default(),
            group_rows: GROUP_ROWS,
        }
    }

    /// A parser for the lines after those seen so far: the header state (separators, markers,
    /// path, fields, types), nothing buffered. The active block is set up again from the header
    /// at the fork's first data line, as it was here.
    fn fork(&self) -> Self {
        TsvParser {
            source: self.source.clone(),
            batch_rows: self.batch_rows,
            prefix: self.prefix.clone(),
            m: self.m.clone(),
            path: self.path.clone(),
            fields: self.fields.clone(),
            types: self.types.clone(),
            dirty: true,
            block: None,
            block_err: None,
            line_no: 0,
            seen_content: self.seen_content,
            skipped: self.skipped,
            scratch: Vec::new(),
            pos: Vec::new(),
            pend: Pending::default(),
            group_rows: self.group_rows,
        }
    }

    /// A line (CR and, when it is the stream's first line, a BOM taken off): a header line
    /// changes the state and gives `None`, an empty line gives `None`, a data line is given
    /// back.
    #[inline]
    fn header<'a>(&mut self, stream_first: bool, raw: &'a [u8]) -> Option<&'a [u8]> {
        let raw = if stream_first { strip_bom(raw) } else { raw };
        let line = match raw.split_last() {
            Some((b'\r', rest)) => rest,
            _ => raw,
        };
        if line.is_empty() {
            return None;
        }
        let first = !self.seen_content;
        self.seen_content = true;
        if line[0] == self.prefix[0] && line.starts_with(&self.prefix) {
            let body = &line[self.prefix.len()..];
            self.directive(body);
            return None;
        }
        if first {
            if let Some(p) = detect_meta_prefix(line) {
                self.prefix = line[..p].to_vec();
                self.directive(&line[p..]);
                return None;
            }
        }
        Some(line)
    }

    fn reject_overlong(&mut self, start: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        let table = self.block.as_ref().map(|b| b.table.clone());
        self.reject(start, overlong_reason(), table, out)
    }

    /// A header line without its meta prefix.
    fn directive(&mut self, body: &[u8]) {
        if let Some(rest) = body.strip_prefix(b"separator") {
            if let Some(&d) = rest.first() {
                if d == b' ' || d == b'\t' {
                    let v = unescape(&rest[1..]);
                    if !v.is_empty() {
                        self.m.sep = v;
                    }
                    // A new header block starts: forget the previous block's description.
                    self.path = None;
                    self.fields = None;
                    self.types = None;
                    self.dirty = true;
                    return;
                }
            }
        }
        let (name, value) = match find(&self.m.sep, body) {
            Some(p) => (&body[..p], &body[p + self.m.sep.len()..]),
            None => match memchr(b' ', body) {
                Some(p) => (&body[..p], &body[p + 1..]),
                None => (body, &b""[..]),
            },
        };
        match name {
            b"set_separator" => {
                let v = unescape(value);
                if !v.is_empty() {
                    self.m.set_sep = v;
                }
            }
            b"empty_field" => self.m.empty = unescape(value),
            b"unset_field" => self.m.unset = unescape(value),
            b"path" => {
                self.path = Some(String::from_utf8_lossy(&unescape(value)).into_owned());
                self.dirty = true;
            }
            b"fields" => {
                self.fields = Some(split_header(value, &self.m.sep));
                self.dirty = true;
            }
            b"types" => {
                self.types = Some(split_header(value, &self.m.sep));
                self.dirty = true;
            }
            // `#open`/`#close` carry the writer's open/close times (canonified test logs have
            // `XXXX-XX-XX-XX-XX-XX`); silt does not use them. Unknown directives are ignored.
            _ => {}
        }
    }

    /// Makes the header seen so far the active block.
    fn activate(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.dirty = false;
        let path = self
            .path
            .clone()
            .unwrap_or_else(|| super::fallback_log_name(&self.source));
        let (fields, types) = match (&self.fields, &self.types) {
            (None, _) => return self.invalidate("data line before any #fields header".into(), out),
            (Some(_), None) => {
                return self.invalidate("the header block has #fields but no #types".into(), out)
            }
            (Some(f), Some(t)) if f.len() != t.len() => {
                let msg = format!(
                    "the header block has {} #fields but {} #types",
                    f.len(),
                    t.len()
                );
                return self.invalidate(msg, out);
            }
            (Some(f), Some(t)) => (f.clone(), t.clone()),
        };
        if let Some(b) = &self.block {
            if b.path == path && b.fields == fields && b.types == types {
                return Ok(());
            }
        }
        self.flush(out)?;
        let table = TableName::new("zeek", &path);
        let ztypes: Vec<ZType> = types.iter().map(|t| ZType::parse(t)).collect();
        let leaves = fields
            .iter()
            .zip(&types)
            .zip(&ztypes)
            .map(|((n, t), z)| LeafSpec {
                name: n.clone(),
                ztype: z.clone(),
                source_type: t.clone(),
            })
            .collect();
        let layout = match Layout::new(&table, leaves) {
            Ok(l) => l,
            Err(e) => return self.invalidate(format!("bad #fields header: {e}"), out),
        };
        let cap = self.batch_rows.min(64 * 1024);
        let cols = ztypes.iter().map(|t| Col::new(t, cap)).collect();
        self.block = Some(Block {
            table,
            path,
            fields,
            types,
            ztypes,
            layout,
            cols,
            rows: 0,
            bytes: 0,
        });
        self.block_err = None;
        Ok(())
    }

    fn invalidate(&mut self, reason: String, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.flush(out)?;
        self.block = None;
        self.block_err = Some(reason);
        Ok(())
    }

    /// A data line; `raw_len` is its length in the input including the line end. It joins the
    /// group of lines waiting to be parsed ([`Pending`]), unless it is long or has the wrong
    /// number of fields.
    fn data(&mut self, line: &[u8], raw_len: usize, out: &mut dyn Emit) -> anyhow::Result<()> {
        if self.dirty {
            self.activate(out)?;
        }
        let Some(block) = self.block.as_ref() else {
            let reason = self
                .block_err
                .clone()
                .unwrap_or_else(|| "data line before any #fields header".into());
            let table = self.path.as_deref().map(|p| TableName::new("zeek", p));
            return self.reject(line, reason, table, out);
        };
        let n = block.cols.len();
        if line.len() >= GROUP_LINE_MAX {
            // Not copied: parsed where it is, after the group before it.
            self.parse_pending(out)?;
            return self.data_alone(line, raw_len, out);
        }
        // All separator positions first: the field count is checked before anything is parsed.
        let seps = n.saturating_sub(1);
        let pend = &mut self.pend;
        let at = pend.pos.len();
        pend.pos.resize(at + seps + 1, 0);
        let found = find_all(&self.m.sep, line, &mut pend.pos[at..]);
        if found + 1 != n {
            pend.pos.truncate(at);
            // The lines before it are parsed (and rejected) first: rejects come in line order.
            self.parse_pending(out)?;
            let table = self.block.as_ref().map(|b| b.table.clone());
            return self.reject(line, field_count_reason(found, n), table, out);
        }
        pend.pos.truncate(at + seps);
        pend.lines.push(PendingLine {
            start: pend.text.len(),
            len: line.len(),
            line_no: self.line_no,
            raw_len,
        });
        pend.text.extend_from_slice(line);
        pend.bytes += raw_len;
        let k = pend.lines.len();
        if k >= self.group_rows
            || pend.text.len() >= GROUP_BYTES
            || block.rows + k >= self.batch_rows
            || block.bytes + pend.bytes >= FLUSH_BYTES
        {
            self.parse_pending(out)?;
            self.flush_if_full(out)?;
        }
        Ok(())
    }

    /// Emits the batch if it reached `batch_rows` rows or [`FLUSH_BYTES`] of input.
    fn flush_if_full(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        match &self.block {
            Some(b) if b.rows >= self.batch_rows || b.bytes >= FLUSH_BYTES => self.flush(out),
            _ => Ok(()),
        }
    }

    /// A data line parsed on its own, row-wise (the active block is set).
    fn data_alone(
        &mut self,
        line: &[u8],
        raw_len: usize,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        let block = self
            .block
            .as_mut()
            .expect("data_alone is called with a block");
        let n = block.cols.len();
        let seps = n.saturating_sub(1);
        if self.pos.len() <= seps {
            self.pos.resize(seps + 1, 0);
        }
        let found = find_all(&self.m.sep, line, &mut self.pos[..=seps]);
        let parsed = if found + 1 != n {
            Err(field_count_reason(found, n))
        } else {
            parse_fields(block, line, &self.pos[..seps], &self.m, &mut self.scratch)
        };
        match parsed {
            Ok(()) => {
                block.rows += 1;
                block.bytes += raw_len;
                self.flush_if_full(out)
            }
            Err(reason) => {
                let rows = block.rows;
                for c in &mut block.cols {
                    c.truncate(rows);
                }
                let table = Some(block.table.clone());
                self.reject(line, reason, table, out)
            }
        }
    }

    /// Parses the waiting group into the active block's builders: column by column, or, if any
    /// field fails, again line by line, rejecting the lines that fail.
    fn parse_pending(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        if self.pend.lines.is_empty() {
            return Ok(());
        }
        let mut block = self
            .block
            .take()
            .expect("waiting lines belong to the active block");
        let result = self.parse_group(&mut block, out);
        self.block = Some(block);
        self.pend.clear();
        result
    }

    fn parse_group(&mut self, block: &mut Block, out: &mut dyn Emit) -> anyhow::Result<()> {
        let p = &self.pend;
        let rows = block.rows;
        if parse_columns(block, p, &self.m, &mut self.scratch) {
            block.rows += p.lines.len();
            block.bytes += p.bytes;
            return Ok(());
        }
        for c in &mut block.cols {
            c.truncate(rows);
        }
        let seps = block.cols.len().saturating_sub(1);
        for (i, l) in p.lines.iter().enumerate() {
            let line = &p.text[l.start..l.start + l.len];
            let pos = &p.pos[i * seps..(i + 1) * seps];
            match parse_fields(block, line, pos, &self.m, &mut self.scratch) {
                Ok(()) => {
                    block.rows += 1;
                    block.bytes += l.raw_len;
                }
                Err(reason) => {
                    let rows = block.rows;
                    for c in &mut block.cols {
                        c.truncate(rows);
                    }
                    out.reject(Reject {
                        source: self.source.display.clone(),
                        line: l.line_no,
                        reason,
                        raw: line.to_vec(),
                        table: Some(block.table.clone()),
                    })?;
                }
            }
        }
        Ok(())
    }

    fn reject(
        &mut self,
        line: &[u8],
        reason: String,
        table: Option<TableName>,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        out.reject(Reject {
            source: self.source.display.clone(),
            line: self.line_no,
            reason,
            raw: line.to_vec(),
            table,
        })
    }

    /// Emits the rows in the builders (and the waiting group) as one batch.
    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.parse_pending(out)?;
        if let Some(b) = self.block.as_mut() {
            if b.rows > 0 {
                let arrays = b
                    .cols
                    .iter_mut()
                    .zip(&b.ztypes)
                    .map(|(c, t)| Some(c.finish(t)))
                    .collect();
                let batch = b.layout.assemble(arrays, b.rows)?;
                out.table_bytes(&b.table, b.bytes as u64);
                b.rows = 0;
                b.bytes = 0;
                out.batch(&b.table, batch)?;
            }
        }
        Ok(())
    }
}

impl LineHandler for TsvParser {
    #[inline]
    fn line(&mut self, lineno: u64, raw: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        self.line_no = lineno;
        let full_len = raw.len() + 1;
        if raw.first() == Some(&self.prefix[0]) && !self.pend.lines.is_empty() {
            // Perhaps a header line: the waiting group is parsed under the markers it came with.
            self.parse_pending(out)?;
        }
        // A fork's line 1 is the stream's only if nothing was skipped before it.
        match self.header(lineno == 1 && self.skipped == 0, raw) {
            Some(line) => self.data(line, full_len, out),
            None => Ok(()),
        }
    }

    fn overlong(
        &mut self,
        lineno: u64,
        start: &[u8],
        _len: usize,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        self.line_no = lineno;
        self.seen_content = true;
        self.parse_pending(out)?;
        self.reject_overlong(start, out)
    }

    fn padding(&mut self, lineno: u64, bytes: u64, out: &mut dyn Emit) -> anyhow::Result<()> {
        // The lines gathered before it are parsed first, so rejects stay in line order.
        self.parse_pending(out)?;
        self.line_no = lineno;
        let table = self.block.as_ref().map(|b| b.table.clone());
        self.reject(b"", padding_reason(bytes), table, out)
    }
}

/// The reject reason for a line with `found` separators where the header has `n` fields.
fn field_count_reason(found: usize, n: usize) -> String {
    format!(
        "line has {} fields but the #fields header has {n}",
        found + 1
    )
}

/// Parses one data line, whose separators are at `pos`, into the block's builders. On error the
/// builders may hold part of the line; the caller truncates them.
#[inline]
fn parse_fields(
    block: &mut Block,
    line: &[u8],
    pos: &[u32],
    m: &Markers,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    let sep = m.sep.len();
    let mut start = 0usize;
    for (i, (col, t)) in block.cols.iter_mut().zip(&block.ztypes).enumerate() {
        let end = pos.get(i).map_or(line.len(), |&p| p as usize);
        let field = &line[start..end];
        start = end + sep;
        if let Err(e) = push_field(col, t, field, m, scratch) {
            return Err(format!(
                "field {} ({}: {}): {e}",
                i + 1,
                block.fields[i],
                block.types[i]
            ));
        }
    }
    Ok(())
}

/// Parses the group `p` into the block's builders column by column; false (the builders may
/// hold part of the group) if any field fails.
fn parse_columns(block: &mut Block, p: &Pending, m: &Markers, scratch: &mut Vec<u8>) -> bool {
    let seps = block.cols.len().saturating_sub(1);
    for (c, (col, t)) in block.cols.iter_mut().zip(&block.ztypes).enumerate() {
        if push_column(col, t, p, c, seps, m, scratch).is_err() {
            return false;
        }
    }
    true
}

/// Counts the (non-overlapping) `sep`s in `line` and writes the positions of the first `max`
/// of them into `buf[..max]`, where `max` is `buf.len() - 1` (the caller sizes `buf` by the
/// header's field count, not by the input).
///
/// For the usual one-byte separator this scans eight bytes per step with a SWAR zero-byte test
/// instead of calling memchr once per field: Zeek fields are short (a few bytes), so memchr's
/// per-call setup cost dominated the profile. Positions are stored by index rather than pushed
/// (a push stores the vector's length back to memory for every separator, in case it
/// reallocates); those past `max` all land in the spare slot `buf[max]`.
#[inline(always)]
fn find_all(sep: &[u8], line: &[u8], buf: &mut [u32]) -> usize {
    let max = buf.len() - 1;
    let mut n = 0usize;
    let mut put = |p: u32| {
        buf[n.min(max)] = p;
        n += 1;
    };
    if sep.len() != 1 {
        let mut from = 0;
        while let Some(p) = find(sep, &line[from..]) {
            put((from + p) as u32);
            from += p + sep.len();
        }
        return n;
    }
    const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let pat = u64::from_ne_bytes([sep[0]; 8]);
    let (chunks, tail) = line.as_chunks::<8>();
    let mut base = 0u32;
    for c in chunks {
        let v = u64::from_le_bytes(*c) ^ pat;
        // High bit of each byte set exactly where that byte of `v` is zero (no false positives).
        let mut z = !(((v & LO7) + LO7) | v | LO7);
        while z != 0 {
            put(base + z.trailing_zeros() / 8);
            z &= z - 1;
        }
        base += 8;
    }
    for (j, &c) in tail.iter().enumerate() {
        if c == sep[0] {
            put(base + j as u32);
        }
    }
    n
}

/// `f` equals the marker `m` (markers are short; the length test settles most fields).
#[inline(always)]
fn is_marker(f: &[u8], m: &[u8]) -> bool {
    f.len() == m.len() && (f.is_empty() || f[0] == m[0] && (f.len() == 1 || f == m))
}

#[inline]
fn push_field(
    col: &mut Col,
    t: &ZType,
    f: &[u8],
    m: &Markers,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    if is_marker(f, &m.unset) {
        col.push_null();
        return Ok(());
    }
    if let ZType::List(inner) = t {
        if is_marker(f, &m.empty) {
            col.list_commit();
            return Ok(());
        }
        let item = col.list_item();
        let mut rest = f;
        let mut k = 1;
        loop {
            let (e, next) = match find(&m.set_sep, rest) {
                Some(p) => (&rest[..p], Some(&rest[p + m.set_sep.len()..])),
                None => (rest, None),
            };
            if is_marker(e, &m.unset) {
                item.push_null();
            } else if let Err(err) = push_scalar(item, inner, e, m, scratch) {
                return Err(format!("element {k}: {err}"));
            }
            match next {
                Some(r) => rest = r,
                None => break,
            }
            k += 1;
        }
        col.list_commit();
        return Ok(());
    }
    push_scalar(col, t, f, m, scratch)
}

#[inline(always)]
fn push_scalar(
    col: &mut Col,
    t: &ZType,
    f: &[u8],
    m: &Markers,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    match t {
        ZType::String => push_string(col, f, m, scratch),
        ZType::Count => push_count(col, f),
        ZType::Int => push_int(col, f),
        ZType::Double => push_double(col, f),
        ZType::Interval => push_interval(col, f),
        ZType::Time => push_time(col, f),
        ZType::Port => push_port(col, f),
        ZType::Bool => push_bool(col, f),
        ZType::Addr => push_addr(col, f),
        ZType::Subnet => push_subnet(col, f),
        ZType::List(_) => Err("containers cannot nest".into()),
        ZType::Null => {
            col.push_null();
            Ok(())
        }
    }
}

/// Field `c` of every line of the group `p` (lines of `seps + 1` fields), as [`push_field`]
/// would take them one by one, with the type decided once: a loop per type.
#[inline]
fn push_column(
    col: &mut Col,
    t: &ZType,
    p: &Pending,
    c: usize,
    seps: usize,
    m: &Markers,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    let sep = m.sep.len();
    let text = &p.text[..];
    // Field `c` of line `i`: from after separator c-1 (or the line's start) to separator c (or
    // the line's end).
    macro_rules! each {
        (|$f:ident| $push:expr) => {{
            for (i, l) in p.lines.iter().enumerate() {
                let pos = &p.pos[i * seps..i * seps + seps];
                let start = if c == 0 { 0 } else { pos[c - 1] as usize + sep };
                let end = if c == seps { l.len } else { pos[c] as usize };
                let $f = &text[l.start + start..l.start + end];
                if is_marker($f, &m.unset) {
                    col.push_null();
                } else {
                    $push?;
                }
            }
        }};
    }
    match t {
        ZType::String => each!(|f| push_string(col, f, m, scratch)),
        ZType::Count => each!(|f| push_count(col, f)),
        ZType::Int => each!(|f| push_int(col, f)),
        ZType::Double => each!(|f| push_double(col, f)),
        ZType::Interval => each!(|f| push_interval(col, f)),
        ZType::Time => each!(|f| push_time(col, f)),
        ZType::Port => each!(|f| push_port(col, f)),
        ZType::Bool => each!(|f| push_bool(col, f)),
        ZType::Addr => each!(|f| push_addr(col, f)),
        // Rare types, and lists: each field as a line's would be.
        ZType::Subnet | ZType::List(_) | ZType::Null => {
            each!(|f| push_field(col, t, f, m, scratch))
        }
    }
    Ok(())
}

#[inline(always)]
fn push_string(col: &mut Col, f: &[u8], m: &Markers, scratch: &mut Vec<u8>) -> Result<(), String> {
    if is_marker(f, &m.empty) {
        col.push_str(b"");
    } else {
        decode_into(f, col.str_bytes(), scratch);
        col.str_commit();
    }
    Ok(())
}

#[inline(always)]
fn push_count(col: &mut Col, f: &[u8]) -> Result<(), String> {
    match parse_u64(f) {
        Some(v) => col.push_i64(count_value(v)?),
        None => return Err(invalid("count", f)),
    }
    Ok(())
}

#[inline(always)]
fn push_int(col: &mut Col, f: &[u8]) -> Result<(), String> {
    match parse_i64(f) {
        Some(v) => col.push_i64(v),
        None => return Err(invalid("int", f)),
    }
    Ok(())
}

#[inline(always)]
fn push_double(col: &mut Col, f: &[u8]) -> Result<(), String> {
    match fast_f64(f).or_else(|| parse_f64(f)) {
        Some(v) => col.push_f64(v),
        None => return Err(invalid("double", f)),
    }
    Ok(())
}

/// Zeek writes intervals as it writes times (`0.000300`): the same fast path.
#[inline(always)]
fn push_interval(col: &mut Col, f: &[u8]) -> Result<(), String> {
    col.push_i64(epoch_micros(f).ok_or_else(|| invalid("interval", f))?);
    Ok(())
}

#[inline(always)]
fn push_time(col: &mut Col, f: &[u8]) -> Result<(), String> {
    if f.first() == Some(&b'X') && f == CANONIFIED_TS {
        col.push_null();
    } else {
        col.push_i64(epoch_micros(f).ok_or_else(|| invalid("time", f))?);
    }
    Ok(())
}

/// Seconds with a fraction, as microseconds: Zeek's own form on the fast path, anything else
/// through [`silt_core::time::parse_epoch_seconds`].
#[inline(always)]
fn epoch_micros(f: &[u8]) -> Option<i64> {
    fast_time(f).or_else(|| {
        std::str::from_utf8(f)
            .ok()
            .and_then(silt_core::time::parse_epoch_seconds)
    })
}

#[inline(always)]
fn push_port(col: &mut Col, f: &[u8]) -> Result<(), String> {
    match parse_u64(f).filter(|&p| p <= 65535) {
        Some(v) => col.push_u16(v as u16),
        None => return Err(invalid("port", f)),
    }
    Ok(())
}

#[inline(always)]
fn push_bool(col: &mut Col, f: &[u8]) -> Result<(), String> {
    match f {
        b"T" | b"1" => col.push_bool(true),
        b"F" | b"0" => col.push_bool(false),
        _ => return Err(invalid("bool", f)),
    }
    Ok(())
}

#[inline(always)]
fn push_addr(col: &mut Col, f: &[u8]) -> Result<(), String> {
    if addr_into(f, col.str_bytes()) {
        col.str_commit();
        Ok(())
    } else {
        col.str_abort();
        Err(invalid("addr", f))
    }
}

fn push_subnet(col: &mut Col, f: &[u8]) -> Result<(), String> {
    match std::str::from_utf8(f)
        .ok()
        .and_then(silt_core::addr::canonical_subnet)
    {
        Some(s) => col.push_str(s.as_bytes()),
        None => return Err(invalid("subnet", f)),
    }
    Ok(())
}

/// Zeek's own time format, `<seconds>.<6 digits>` (non-negative), parsed without UTF-8 checks;
/// anything else goes to [`silt_core::time::parse_epoch_seconds`] (same result, more general).
#[inline]
fn fast_time(f: &[u8]) -> Option<i64> {
    let n = f.len();
    if !(8..=19).contains(&n) || f[n - 7] != b'.' {
        return None;
    }
    let secs = parse_u64(&f[..n - 7])?;
    let micros = parse_u64(&f[n - 6..])?;
    i64::try_from(secs)
        .ok()?
        .checked_mul(1_000_000)?
        .checked_add(micros as i64)
}

/// Decimal `[-]digits[.digits]` with at most 15 significant digits, correctly rounded without
/// the general parser: a mantissa below 2^53 divided by an exact power of ten is exact-then-
/// rounded once (Clinger's fast path). Other forms (exponents, `inf`, long digit strings) return
/// `None` and go to `str::parse`.
#[inline]
fn fast_f64(f: &[u8]) -> Option<f64> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let (neg, digits) = match f.first()? {
        b'-' => (true, &f[1..]),
        _ => (false, f),
    };
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    let mut mant: u64 = 0;
    let mut frac_digits = 0usize;
    let mut seen_dot = false;
    let mut ndigits = 0;
    for &c in digits {
        if c == b'.' {
            if seen_dot {
                return None;
            }
            seen_dot = true;
        } else {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            mant = mant * 10 + d as u64;
            ndigits += 1;
            if seen_dot {
                frac_digits += 1;
            }
        }
    }
    if ndigits == 0 || ndigits > 15 {
        return None;
    }
    let v = mant as f64 / POW10[frac_digits];
    Some(if neg { -v } else { v })
}

/// `invalid port "abc"`, with the value shown escaped and cut to 80 bytes.
fn invalid(what: &str, f: &[u8]) -> String {
    let shown = &f[..f.len().min(80)];
    let more = if f.len() > 80 { "..." } else { "" };
    format!("invalid {what} {:?}{more}", String::from_utf8_lossy(shown))
}

/// Decodes Zeek's TSV escapes in `f` and appends the canonical text to `out`.
#[inline(always)]
fn decode_into(f: &[u8], out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    // Fast path: printable ASCII without a backslash needs neither decoding nor escaping.
    if is_plain_no_backslash(f) {
        super::types::extend_short(out, f);
        return;
    }
    decode_escaped(f, out, scratch);
}

#[inline(never)]
fn decode_escaped(f: &[u8], out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
    scratch.clear();
    unescape_into(f, scratch);
    canon_into(scratch, out);
}

/// True if every byte is printable ASCII (0x20..=0x7e) and none is a backslash; eight bytes at a
/// time (SWAR), since most Zeek strings take this path.
#[inline]
fn is_plain_no_backslash(f: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let (chunks, tail) = f.as_chunks::<8>();
    for c in chunks {
        let v = u64::from_le_bytes(*c);
        // A byte < 0x20, or >= 0x7f, or == 0x5c sets its high bit in `bad` (false positives are
        // impossible for these exact-range tests on bytes whose high bit is clear; bytes with
        // the high bit set are caught by `v & HIGH`).
        let lt20 = v.wrapping_sub(ONES * 0x20) & !v;
        let ge7f = v.wrapping_add(ONES) & HIGH;
        let x = v ^ (ONES * 0x5c);
        let bs = x.wrapping_sub(ONES) & !x;
        if (lt20 | ge7f | bs | v) & HIGH != 0 {
            return false;
        }
    }
    tail.iter()
        .all(|&c| c.wrapping_sub(0x20) < 0x5f && c != b'\\')
}

/// Decodes `\xNN` (hex byte) and `\\` (backslash), the escapes Zeek's ASCII writer produces.
/// Any other backslash is kept as it is.
fn unescape_into(f: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < f.len() {
        let c = f[i];
        if c == b'\\' && i + 1 < f.len() {
            if f[i + 1] == b'\\' {
                out.push(b'\\');
                i += 2;
                continue;
            }
            if f[i + 1] == b'x' && i + 3 < f.len() {
                if let (Some(h), Some(l)) = (hex(f[i + 2]), hex(f[i + 3])) {
                    out.push(h << 4 | l);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(c);
        i += 1;
    }
}

fn unescape(f: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(f.len());
    unescape_into(f, &mut v);
    v
}

#[inline]
fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[inline]
fn find(needle: &[u8], hay: &[u8]) -> Option<usize> {
    match needle.len() {
        1 => memchr(needle[0], hay),
        0 => None,
        _ => memchr::memmem::find(hay, needle),
    }
}

fn split_header(value: &[u8], sep: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = value;
    loop {
        match find(sep, rest) {
            Some(p) => {
                out.push(String::from_utf8_lossy(&unescape(&rest[..p])).into_owned());
                rest = &rest[p + sep.len()..];
            }
            None => {
                out.push(String::from_utf8_lossy(&unescape(rest)).into_owned());
                return out;
            }
        }
    }
}

/// `PREFIX<>separator |` -> the length of `PREFIX<>`: a short prefix without whitespace directly
/// followed by `separator ` and a value.
pub(crate) fn detect_meta_prefix(line: &[u8]) -> Option<usize> {
    let p = memchr::memmem::find(line, b"separator ")?;
    if p == 0 || p > 32 || line.len() <= p + 10 {
        return None;
    }
    if line[..p].iter().any(|c| c.is_ascii_whitespace()) {
        return None;
    }
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separator_positions() {
        let mut v = Vec::new();
        // All positions (max = the line's length: room for every byte).
        let mut all = |sep: &[u8], line: &[u8]| {
            v.resize(line.len() + 1, 0);
            let n = find_all(sep, line, &mut v);
            v[..n].to_vec()
        };
        let line = b"a\tbb\t\tccccccccccccccc\td\t";
        let want: Vec<u32> = line
            .iter()
            .enumerate()
            .filter(|(_, &c)| c == b'\t')
            .map(|(i, _)| i as u32)
            .collect();
        assert_eq!(all(b"\t", line), want);
        // Every byte value and position, against the obvious scan.
        for sep in [0u8, 1, 9, 0x7f, 0x80, 0xff] {
            let line: Vec<u8> = (0..200u32)
                .map(|i| {
                    if i % 7 == 3 {
                        sep
                    } else {
                        (i * 37 % 256) as u8
                    }
                })
                .collect();
            let want: Vec<u32> = line
                .iter()
                .enumerate()
                .filter(|(_, &c)| c == sep)
                .map(|(i, _)| i as u32)
                .collect();
            assert_eq!(all(&[sep], &line), want, "sep {sep}");
        }
        // Every length around the 8-byte step and its tail, separators at every place.
        for len in 0..70usize {
            let line: Vec<u8> = (0..len)
                .map(|i| if i % 5 == len % 5 { b'\t' } else { b'x' })
                .collect();
            let want: Vec<u32> = (0..len as u32)
                .filter(|i| line[*i as usize] == b'\t')
                .collect();
            assert_eq!(all(b"\t", &line), want, "len {len}");
        }
        assert_eq!(all(b"||", b"a||b|c||||d"), [1, 6, 8]);
        assert_eq!(all(b"\t", b"\t\t\t\t\t\t\t\t\t").len(), 9);
        // Past `max`, separators are counted but only the first `max` positions kept.
        let line = b"a\tb\tc\td\te\tf\tg\th\ti\tj\tk";
        for max in 0..12 {
            let mut v = vec![0; max + 1];
            assert_eq!(find_all(b"\t", line, &mut v), 10, "max {max}");
            let kept = max.min(10);
            let want: Vec<u32> = (0..kept as u32).map(|k| 2 * k + 1).collect();
            assert_eq!(v[..kept], want[..], "max {max}");
            assert_eq!(find_all(b"|", line, &mut v), 0);
        }
    }

    /// Groups of lines parsed column by column give what lines parsed one at a time give (a
    /// group of one): the same batches, cut at the same rows, the same rejects in the same order
    /// with their line numbers, and the same bytes per table; with bad fields at every place in
    /// a group, wrong field counts, lines too long for a group, blank lines, CRLF, and header
    /// lines that change the markers, the separator, the fields and the table between the
    /// lines of a group.
    #[test]
    fn groups_equal_lines_one_at_a_time() {
        let src = SourceInfo {
            display: "x.log".into(),
            file_name: Some("x.log".into()),
        };
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let long = "L".repeat(GROUP_LINE_MAX + 5);
        for round in 0..6 {
            let mut text = String::from(
                "#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#unset_field\t-\n\
                 #path\tconn\n#fields\tts\tn\ts\ta\tv\tb\td\n\
                 #types\ttime\tcount\tstring\taddr\tvector[count]\tbool\tinterval\n",
            );
            let mut unset = "-";
            for i in 0..1500u64 {
                match next(60) {
                    0 => {
                        text.push_str("#unset_field\tNA\n");
                        unset = "NA";
                    }
                    1 => {
                        text.push_str("#unset_field\t-\n");
                        unset = "-";
                    }
                    2 => text.push_str("#path\tother\n"),
                    3 => text.push_str("#path\tconn\n"),
                    4 => text.push('\n'),
                    5 => text.push_str("1.0\t2\n"),
                    6 => text.push_str(&format!("{i}.5\t1\t{long}\t10.0.0.1\t1\tT\t0.5\n")),
                    7 => text.push_str(&format!("{i}.5\t1\t{long}\t10.0.0.1\tx\tT\t0.5\n")),
                    8 if round % 2 == 1 => text.push_str(
                        "#separator |\n#path|p\n#fields|ts|s\n#types|time|string\n9.0|a\n\
                         #separator \\x09\n#path\tconn\n#fields\tts\tn\ts\ta\tv\tb\td\n\
                         #types\ttime\tcount\tstring\taddr\tvector[count]\tbool\tinterval\n",
                    ),
                    _ => {
                        let u = unset;
                        let mut f = [
                            format!("{i}.{:06}", next(1_000_000)),
                            [&next(1000).to_string(), u][next(2) as usize].to_string(),
                            ["x", "(empty)", "-", "NA", "a\\x41b"][next(5) as usize].to_string(),
                            ["10.0.0.1", "::1", "2001:DB8::1", u][next(4) as usize].to_string(),
                            ["1,2", "(empty)", u, &format!("3,{u},4")][next(4) as usize]
                                .to_string(),
                            ["T", "F", u][next(3) as usize].to_string(),
                            ["0.000300", u, "12.5"][next(3) as usize].to_string(),
                        ];
                        if next(12) == 0 {
                            // One bad field, anywhere.
                            let k = next(7) as usize;
                            f[k] = ["bad", "1.2.3", "-1", "Q"][next(4) as usize].to_string();
                        }
                        text.push_str(&f.join("\t"));
                        text.push_str(if next(9) == 0 { "\r\n" } else { "\n" });
                    }
                }
            }
            let decode = |group_rows: usize, batch_rows: usize| {
                let mut d = ZeekTsvDecoder::new(&src, &ReadOptions { batch_rows });
                d.parser.group_rows = group_rows;
                let mut out = silt_core::CollectEmit::default();
                decode_slice(&mut d, text.as_bytes(), &mut out).unwrap();
                out
            };
            for batch_rows in [7, 300, 100_000] {
                let want = decode(1, batch_rows);
                assert!(
                    want.rejects.len() > 20 && want.total_rows() > 1000,
                    "{} rejects, {} rows: {:?}",
                    want.rejects.len(),
                    want.total_rows(),
                    want.rejects
                        .iter()
                        .take(3)
                        .map(|r| &r.reason)
                        .collect::<Vec<_>>()
                );
                for group_rows in [2, 5, GROUP_ROWS] {
                    let got = decode(group_rows, batch_rows);
                    let at = format!("round {round}, batch {batch_rows}, group {group_rows}");
                    assert_eq!(got.batches, want.batches, "{at}");
                    assert_eq!(got.table_bytes, want.table_bytes, "{at}");
                    let rej = |o: &silt_core::CollectEmit| -> Vec<(u64, String, Vec<u8>)> {
                        o.rejects
                            .iter()
                            .map(|r| (r.line, r.reason.clone(), r.raw.clone()))
                            .collect()
                    };
                    assert_eq!(rej(&got), rej(&want), "{at}");
                }
            }
        }
    }

    #[test]
    fn fast_number_paths_match_the_general_parsers() {
        for s in [
            "0",
            "0.0",
            "-0.0",
            "1.5",
            "0.000431",
            "123456.789012",
            "3.14",
            "100.000000",
            "-1500",
            "999999999999999",
            "0.1",
            "0.2",
            "0.3",
            "1521911721.123456",
            ".5",
            "5.",
        ] {
            let want: f64 = s.parse().unwrap();
            let got = fast_f64(s.as_bytes()).unwrap_or_else(|| parse_f64(s.as_bytes()).unwrap());
            assert_eq!(got.to_bits(), want.to_bits(), "{s}");
        }
        for s in ["1e5", "inf", "1.2.3", "-", "", "12345678901234567"] {
            assert_eq!(fast_f64(s.as_bytes()), None, "{s}");
        }
        for s in [
            "1521911721.123456",
            "0.000000",
            "1.000001",
            "999999999999.999999",
        ] {
            assert_eq!(
                fast_time(s.as_bytes()),
                silt_core::time::parse_epoch_seconds(s),
                "{s}"
            );
        }
        for s in ["-1.500000", "1.5", "+1.000000", "1x.000000"] {
            assert_eq!(fast_time(s.as_bytes()), None, "{s}");
        }
    }
}

#[cfg(test)]
mod plain_tests {
    use super::is_plain_no_backslash;

    #[test]
    fn plain_check_matches_the_byte_rule() {
        let slow = |f: &[u8]| f.iter().all(|&c| (0x20..0x7f).contains(&c) && c != b'\\');
        for b in 0..=255u8 {
            for pos in 0..17 {
                let mut v = vec![b'a'; 17];
                v[pos] = b;
                assert_eq!(is_plain_no_backslash(&v), slow(&v), "byte {b:#x} at {pos}");
                assert_eq!(is_plain_no_backslash(&v[..pos + 1]), slow(&v[..pos + 1]));
            }
        }
    }
}
