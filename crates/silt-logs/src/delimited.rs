//! CSV and TSV, parsed with `csv_core` (the incremental parser the `csv` crate is built on).
//!
//! - CSV: RFC 4180 quoting (`"a ""quoted"", with comma"`, newlines inside quotes), delimiter `,`
//!   unless `--delimiter`; TSV: tab-separated, no quoting and no escapes (a field cannot hold a
//!   tab or a newline).
//! - The first row is the header unless `--no-header`, which names the columns `c1`, `c2`, ...;
//!   an empty header name becomes `_`, a repeated one gets `_2`, `_3`, ... appended. A UTF-8
//!   byte-order mark before the header is ignored.
//! - Types are inferred per column and batch ([`crate::sink::retype_text`]): integers, numbers,
//!   booleans (`true`/`false`), ISO 8601 times, else text exactly as written; an empty field is
//!   null. Batches unify by the EVE rules (int then float -> float; anything else -> text).
//!   With `--schema`, fields are parsed to the schema's types instead. (A batch ends every
//!   `batch_rows` rows and at each flush of the decoder, so a column whose values are of mixed
//!   kinds may be typed differently in different batches before they are unified.)
//!
//! Rejected with the number of the line the row starts on (blank lines counted): a row with a different number of fields
//! than the header, a field that is not valid UTF-8 (the raw row keeps the bytes; it is rebuilt
//! from the parsed fields joined by the delimiter, so quoting is not reproduced), a row longer
//! than [`MAX_ROW_BYTES`] or with more than [`MAX_FIELDS`] fields (an unclosed quote swallowing
//! the rest of the file, say: its first 64 KiB of field data kept).
//!
//! [`DelimitedDecoder`] is the decoder: records may span lines inside quotes and straddle any
//! two pieces it is fed; between pieces it holds only the fields of the unfinished row and the
//! batch being built. Accepted rows go straight into the sink's columns (the columnar path,
//! [`crate::text_columns`], hand-written because this is the hot path of `silt import csv`)
//! unless the sink keeps the general path of one `Value` record per row (under `--schema`, or
//! with a column or the time field named `_unparsed`: see [`Sink::start_text_columns`]); both
//! give the same batches (`tests/csv_columns.rs`). [`CSV_FORMAT`] and [`TSV_FORMAT`] declare the
//! formats `csv` and `tsv`.
//! Touches nothing but the bytes it is fed and `out`.

use csv_core::ReadRecordResult;
use silt_core::decode::padding_reason;
use silt_core::format::{Confidence, PROBE_BYTES};
use silt_core::{Decoder, Emit, FormatOptions, FormatSpec, Probe, ReadOptions, SourceInfo};
use silt_readers::json::Value;

use crate::lines::OVERLONG_KEEP;
use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

/// A longer row is rejected without being held in memory.
pub const MAX_ROW_BYTES: usize = crate::lines::MAX_LINE_BYTES;

/// A row with more fields is rejected.
pub const MAX_FIELDS: usize = 1 << 20;

const BOM: &[u8; 3] = b"\xEF\xBB\xBF";

/// The `csv` format.
pub static CSV_FORMAT: FormatSpec = FormatSpec {
    name: "csv",
    aliases: &[],
    summary: "CSV with a header row (RFC 4180 quoting), columns typed; table csv.<file stem>",
    extensions: &["csv"],
    sniff: sniff_csv,
    open: open_csv,
    text_fields: true,
    text: true,
};

/// The `tsv` format.
pub static TSV_FORMAT: FormatSpec = FormatSpec {
    name: "tsv",
    aliases: &[],
    summary:
        "tab-separated values with a header row (no quoting), columns typed; table tsv.<file stem>",
    extensions: &["tsv"],
    sniff: sniff_tsv,
    open: open_tsv,
    text_fields: true,
    text: true,
};

fn open_csv(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    let lo = opts.get_or_default::<LogOptions>();
    Ok(Box::new(DelimitedDecoder::new(
        LogFormat::Csv,
        source,
        &opts.read,
        &lo,
    )?))
}

fn open_tsv(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    let lo = opts.get_or_default::<LogOptions>();
    Ok(Box::new(DelimitedDecoder::new(
        LogFormat::Tsv,
        source,
        &opts.read,
        &lo,
    )?))
}

/// 30 when the first rows (at least 2, up to 5; quoted fields may span lines) have the same
/// number of comma-separated fields, at least 2, and are text.
pub fn sniff_csv(p: &Probe<'_>) -> Option<Confidence> {
    sniff_rows(p, b',', true).then_some(30)
}

/// 30 when the first lines (at least 2, up to 5) have the same number of tab-separated fields,
/// at least 2, and are text.
pub fn sniff_tsv(p: &Probe<'_>) -> Option<Confidence> {
    sniff_rows(p, b'\t', false).then_some(30)
}

fn sniff_rows(p: &Probe<'_>, delim: u8, quoting: bool) -> bool {
    let text = p.text();
    // JSON lines that JSON detection refused (invalid ones) are not rows of fields, however
    // evenly their commas fall: before, they became a table whose column names were JSON
    // fragments.
    if matches!(text.trim_ascii_start().first(), Some(b'{' | b'[')) {
        return false;
    }
    // A probe cut short may end inside a row: leave that row out.
    let body = match memchr::memrchr(b'\n', text) {
        Some(i) if p.head.len() >= PROBE_BYTES => &text[..=i],
        _ => text,
    };
    let mut rows = Rows::new(delim, quoting);
    let mut counts: Vec<usize> = Vec::new();
    let mut input = body;
    while counts.len() < 5 {
        let (n, step) = rows.next(input);
        input = &input[n..];
        match step {
            Step::Record => {
                if !rows.is_blank() {
                    counts.push(if rows.overlong { 0 } else { rows.len() });
                }
                rows.reset();
            }
            Step::End => break,
            Step::NeedInput => {}
        }
    }
    let seen = &body[..body.len() - input.len()];
    let is_text = match std::str::from_utf8(seen) {
        Ok(t) => t
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\t' | '\r' | '\n')),
        Err(_) => false,
    };
    is_text && counts.len() >= 2 && counts[0] >= 2 && counts.iter().all(|&c| c == counts[0])
}

/// What [`Rows::next`] stopped at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The input was used up inside a row.
    NeedInput,
    /// A row ended; its fields are in the buffers.
    Record,
    /// The end of the stream (after an empty input).
    End,
}

/// Rows cut out of fed pieces by `csv_core`, with the fields of the row being read; bounded by
/// [`MAX_ROW_BYTES`] and [`MAX_FIELDS`].
struct Rows {
    core: csv_core::Reader,
    fields: Vec<u8>,
    ends: Vec<usize>,
    outlen: usize,
    endlen: usize,
    /// The row outgrew the limits: only its first field bytes are kept.
    overlong: bool,
    /// The line the current row starts on.
    line: u64,
    /// No byte of the current row has been seen yet.
    at_start: bool,
    /// Line ends skipped between rows (`csv_core` does not see them, so its line count lacks
    /// them).
    skipped_lines: u64,
    /// Bytes of the stream parsed.
    consumed: u64,
    /// `csv_core` has seen input.
    started: bool,
    /// NUL bytes of zero padding skipped before the current row (`silt_core::decode`'s
    /// padding rule: a run of NUL bytes where a row starts is not part of the row).
    pad: u64,
}

impl Rows {
    fn new(delim: u8, quoting: bool) -> Self {
        Self {
            core: csv_core::ReaderBuilder::new()
                .delimiter(delim)
                .quoting(quoting)
                .build(),
            fields: vec![0; 1024],
            ends: vec![0; 64],
            outlen: 0,
            endlen: 0,
            overlong: false,
            line: 1,
            at_start: true,
            skipped_lines: 0,
            consumed: 0,
            started: false,
            pad: 0,
        }
    }

    /// Parses `input` (empty: the end of the stream) until a row ends or the input is used up;
    /// returns the bytes used.
    fn next(&mut self, input: &[u8]) -> (usize, Step) {
        let mut used = 0;
        if self.at_start {
            // Line ends before a row (blank lines, the `\n` of a `\r\n`) are skipped here, as
            // `csv_core` would, so that the row's line is the one its first byte is on; so is
            // zero padding (counted in `pad`).
            while let Some(&c @ (b'\r' | b'\n' | 0)) = input.get(used) {
                self.skipped_lines += u64::from(c == b'\n');
                self.pad += u64::from(c == 0);
                used += 1;
            }
            self.consumed += used as u64;
            if used < input.len() {
                self.at_start = false;
                self.line = self.core.line() + self.skipped_lines;
            } else if !input.is_empty() {
                return (used, Step::NeedInput);
            }
        }
        loop {
            // The very first call gets one byte: `csv_core` strips a byte-order mark only when
            // its first input holds all of it, which would depend on how the stream was cut
            // (the decoder strips it itself).
            let end = if self.started || input.is_empty() {
                input.len()
            } else {
                used + 1
            };
            self.started = true;
            let (res, nin, nout, nend) = self.core.read_record(
                &input[used..end],
                &mut self.fields[self.outlen..],
                &mut self.ends[self.endlen..],
            );
            used += nin;
            self.consumed += nin as u64;
            self.outlen += nout;
            self.endlen += nend;
            match res {
                ReadRecordResult::InputEmpty if used < input.len() => {}
                ReadRecordResult::InputEmpty => return (used, Step::NeedInput),
                ReadRecordResult::Record => return (used, Step::Record),
                ReadRecordResult::End => return (used, Step::End),
                ReadRecordResult::OutputFull => {
                    let len = self.fields.len();
                    if len >= MAX_ROW_BYTES || (self.overlong && len > OVERLONG_KEEP) {
                        // Keep the first bytes; the rest of the row is parsed into scratch.
                        self.overlong = true;
                        self.outlen = OVERLONG_KEEP;
                    } else {
                        self.fields.resize((len * 2).min(MAX_ROW_BYTES), 0);
                    }
                }
                ReadRecordResult::OutputEndsFull => {
                    if self.overlong || self.ends.len() >= MAX_FIELDS {
                        self.overlong = true;
                        self.endlen = 0;
                    } else {
                        let n = (self.ends.len() * 2).min(MAX_FIELDS);
                        self.ends.resize(n, 0);
                    }
                }
            }
        }
    }

    /// The fields of the row just read.
    fn len(&self) -> usize {
        self.endlen
    }

    fn field(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.fields[start..self.ends[i]]
    }

    fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.endlen).map(|i| self.field(i))
    }

    /// A blank line (one empty field).
    fn is_blank(&self) -> bool {
        !self.overlong && self.endlen == 1 && self.ends[0] == 0
    }

    /// The row rebuilt for a reject: fields joined by the delimiter.
    fn raw(&self, delim: u8) -> Vec<u8> {
        if self.overlong {
            return self.fields[..self.outlen.min(OVERLONG_KEEP)].to_vec();
        }
        let mut raw = Vec::with_capacity(self.outlen + self.endlen);
        for (i, f) in self.iter().enumerate() {
            if i > 0 {
                raw.push(delim);
            }
            raw.extend_from_slice(f);
        }
        raw
    }

    /// Ready for the next row.
    fn reset(&mut self) {
        self.outlen = 0;
        self.endlen = 0;
        self.overlong = false;
        self.at_start = true;
    }
}

fn header_names<'f>(fields: impl Iterator<Item = &'f [u8]>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for f in fields {
        let base = String::from_utf8_lossy(f).trim().to_string();
        let base = if base.is_empty() {
            "_".to_string()
        } else {
            base
        };
        let mut name = base.clone();
        let mut k = 2;
        while names.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        names.push(name);
    }
    names
}

/// The CSV/TSV decoder for one stream; see the module documentation.
pub struct DelimitedDecoder {
    sink: Sink,
    rows: Rows,
    delim: u8,
    no_header: bool,
    names: Option<Vec<String>>,
    /// Rows may go to the sink's columnar path ([`DelimitedDecoder::use_columns`]).
    columnar: bool,
    /// They do: the sink took that path when the column names were known.
    fast: bool,
    /// Bytes parsed when the previous row ended.
    last_byte: u64,
    /// Bytes of a byte-order mark seen at the start so far, and whether that is decided.
    bom_seen: usize,
    bom_done: bool,
}

impl DelimitedDecoder {
    /// `format`: [`LogFormat::Csv`] or [`LogFormat::Tsv`].
    pub fn new(
        format: LogFormat,
        source: &SourceInfo,
        ro: &ReadOptions,
        lo: &LogOptions,
    ) -> anyhow::Result<Self> {
        let tsv = format == LogFormat::Tsv;
        let delim = lo.delimiter.unwrap_or(if tsv { b'\t' } else { b',' });
        let table = lo.table_for(format, source);
        let sink = Sink::new(source, table, ro, lo, true, None)?;
        Ok(Self {
            sink,
            rows: Rows::new(delim, !tsv),
            delim,
            no_header: lo.no_header,
            names: None,
            columnar: true,
            fast: false,
            last_byte: 0,
            bom_seen: 0,
            bom_done: false,
        })
    }

    /// Whether accepted rows go straight into the sink's columns (`true`, the default; the sink
    /// decides where that is possible, see [`Sink::start_text_columns`]) or each through a
    /// `Value` record ([`Sink::push`], the general path). Both give the same batches; the
    /// `Value` path is kept callable for the test that checks it and for the benchmark
    /// (`tests/csv_bench.rs`). Takes effect only before the first row.
    pub fn use_columns(&mut self, on: bool) {
        if self.names.is_none() {
            self.columnar = on;
        }
    }

    fn parse(&mut self, mut input: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        while !input.is_empty() {
            let (n, step) = self.rows.next(input);
            input = &input[n..];
            if step == Step::Record {
                self.row(out)?;
            }
        }
        Ok(())
    }

    /// Reports the zero padding skipped before line `line`, if any.
    fn padded(&mut self, line: u64, out: &mut dyn Emit) -> anyhow::Result<()> {
        match std::mem::take(&mut self.rows.pad) {
            0 => Ok(()),
            n => self.sink.reject(out, line, padding_reason(n), Vec::new()),
        }
    }

    /// The row just parsed.
    fn row(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let res = self.take_row(out);
        self.rows.reset();
        res
    }

    fn take_row(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let line = self.rows.line;
        self.padded(line, out)?;
        let byte = self.rows.consumed;
        let row_bytes = (byte - self.last_byte) as usize;
        self.last_byte = byte;
        let rows = &self.rows;
        if rows.overlong {
            let reason = format!(
                "row longer than {MAX_ROW_BYTES} bytes or with more than {MAX_FIELDS} fields \
                 (an unclosed quote?)"
            );
            return self.sink.reject(out, line, reason, rows.raw(self.delim));
        }
        if rows.is_blank() {
            return Ok(());
        }
        if self.names.is_none() {
            let n: Vec<String> = if self.no_header {
                (1..=rows.len()).map(|i| format!("c{i}")).collect()
            } else {
                header_names(rows.iter())
            };
            self.sink
                .decide_time_from_names(n.iter().map(String::as_str));
            self.fast = self.columnar && self.sink.start_text_columns(&n);
            self.names = Some(n);
            if !self.no_header {
                return Ok(());
            }
        }
        let names = self.names.as_ref().expect("set above");
        if rows.len() != names.len() {
            let reason = format!("expected {} fields, found {}", names.len(), rows.len());
            return self.sink.reject(out, line, reason, rows.raw(self.delim));
        }
        if self.fast {
            // The columnar path (the hot one: see `crate::text_columns`): the row's field
            // bytes as they are. The whole row valid UTF-8 and each field end a character
            // boundary is each field valid UTF-8; otherwise the field-by-field check finds the
            // first bad field for the reason.
            let ends = &rows.ends[..rows.endlen];
            let data = &rows.fields[..ends.last().copied().unwrap_or(0)];
            let valid = std::str::from_utf8(data)
                .is_ok_and(|t| ends.iter().all(|&e| t.is_char_boundary(e)));
            if !valid {
                for (name, f) in names.iter().zip(rows.iter()) {
                    if let Err(e) = std::str::from_utf8(f) {
                        let reason =
                            format!("field {name}: invalid UTF-8 at byte {}", e.valid_up_to());
                        return self.sink.reject(out, line, reason, rows.raw(self.delim));
                    }
                }
            }
            return self.sink.push_text_row(data, ends, row_bytes, out);
        }
        let mut o: Vec<(String, Value)> = Vec::with_capacity(names.len());
        for (name, f) in names.iter().zip(rows.iter()) {
            match std::str::from_utf8(f) {
                Ok(s) => o.push((name.clone(), Value::Str(s.to_string()))),
                Err(e) => {
                    let reason = format!("field {name}: invalid UTF-8 at byte {}", e.valid_up_to());
                    return self.sink.reject(out, line, reason, rows.raw(self.delim));
                }
            }
        }
        let delim = self.delim;
        self.sink
            .push(Value::Object(o), line, &|| rows.raw(delim), row_bytes, out)
    }
}

impl Decoder for DelimitedDecoder {
    fn feed(&mut self, mut bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        if !self.bom_done {
            while self.bom_seen < BOM.len() && bytes.first() == Some(&BOM[self.bom_seen]) {
                self.bom_seen += 1;
                bytes = &bytes[1..];
            }
            if self.bom_seen == BOM.len() {
                self.bom_done = true;
            } else if bytes.is_empty() {
                return Ok(()); // maybe the rest of a byte-order mark comes next
            } else {
                // Not a byte-order mark: what looked like its start is data.
                self.bom_done = true;
                self.parse(&BOM[..self.bom_seen], out)?;
            }
        }
        self.parse(bytes, out)
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.sink.flush(out)
    }

    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let mut res = Ok(());
        if !self.bom_done {
            self.bom_done = true;
            res = self.parse(&BOM[..self.bom_seen], out);
        }
        while res.is_ok() {
            match self.rows.next(&[]).1 {
                Step::Record => res = self.row(out),
                Step::End | Step::NeedInput => break,
            }
        }
        if res.is_ok() {
            // Padding after the last row, on the line after it.
            let line = self.rows.core.line() + self.rows.skipped_lines;
            res = self.padded(line.max(1), out);
        }
        let flushed = self.sink.flush(out);
        res.and(flushed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(head: &[u8]) -> Option<Confidence> {
        sniff_csv(&Probe {
            head,
            file_name: None,
        })
    }

    fn tsv(head: &[u8]) -> Option<Confidence> {
        sniff_tsv(&Probe {
            head,
            file_name: None,
        })
    }

    /// Typical first lines of every format silt reads.
    const OTHERS: &[&[u8]] = &[
        b"#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#fields\tts\tuid\n",
        b"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612 \"-\" \"curl/8.0\"\n",
        b"<34>Oct 11 22:14:15 mymachine su: 'su root' failed\n",
        b"Hello, this is just some text.\nNothing to see here.\n",
        b"\x82\xa1a\x01\xa1b\x02",
        b"Obj\x01\x04\x16avro.schema",
        b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00",
        b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00",
        b"one line, only\n",
        b"",
        // JSON lines, invalid ones too (a Zeek baseline's masked times), with even commas.
        b"{\"ts\":XXXXXXXXXX.XXXXXX,\"uid\":\"C1\"}\n{\"ts\":XXXXXXXXXX.XXXXXX,\"uid\":\"C2\"}\n",
        b"[1,2]\n[3,4]\n",
    ];

    #[test]
    fn sniffs_csv() {
        for yes in [
            &b"ts,host,bytes\n2024-03-24T17:00:00Z,10.0.0.1,12\n2024-03-24T17:00:01Z,10.0.0.2,13\n"
                [..],
            b"\xEF\xBB\xBFa,b\r\n1,2\r\n",
            b"a,b\n1,\"two\nlines, and a comma\"\n3,4\n",
        ] {
            assert_eq!(csv(yes), Some(30), "{}", String::from_utf8_lossy(yes));
        }
        let ragged: &[u8] = b"a,b,c\n1,2\n";
        for no in OTHERS.iter().copied().chain([
            ragged,
            b"time\thost\tbytes\n2024\t10.0.0.1\t12\n",
            b"a,b\n1,\x01\n",
        ]) {
            assert_eq!(csv(no), None, "{}", String::from_utf8_lossy(no));
        }
    }

    #[test]
    fn sniffs_tsv() {
        for yes in [
            &b"time\thost\tbytes\n2024-03-24T17:00:00Z\t10.0.0.1\t12\n2024-03-24T17:00:01Z\t10.0.0.2\t13\n"[..],
            b"ts\thost\n1.0\t\"quoted, with comma\"\n",
        ] {
            assert_eq!(tsv(yes), Some(30), "{}", String::from_utf8_lossy(yes));
        }
        for no in OTHERS
            .iter()
            .copied()
            .chain([&b"a,b\n1,2\n"[..], b"a\tb\tc\n1\t2\n"])
        {
            assert_eq!(tsv(no), None, "{}", String::from_utf8_lossy(no));
        }
    }

    /// Rejects carry the line the row starts on, after CRLF line ends, blank lines and rows
    /// with quoted newlines alike.
    #[test]
    fn reject_lines_are_where_rows_start() {
        let text = b"a,b\r\n1,2\r\nbad\r\n\r\n\n3,\"x\r\ny\"\r\nbad again\n\n\nlast,bad,row";
        let mut d = DelimitedDecoder::new(
            LogFormat::Csv,
            &SourceInfo::stdin(),
            &ReadOptions::default(),
            &LogOptions::default(),
        )
        .unwrap();
        let mut out = silt_core::CollectEmit::default();
        silt_core::decode::decode_slice(&mut d, text, &mut out).unwrap();
        let lines: Vec<u64> = out.rejects.iter().map(|r| r.line).collect();
        assert_eq!(lines, [3, 8, 11]);
        assert_eq!(out.total_rows(), 2);
        assert_eq!(out.rejects[2].raw, b"last,bad,row");
    }
}
