//! `silt import access`: web server access-log lines -> one table of typed columns.
//!
//! - Table: `access.<stem>` where the stem is the file name without directories, rotation
//!   suffix (`.1`, `.0`), `.log` and `.gz` (`/var/log/nginx/access.log.1` -> `access.access`,
//!   `shop_access_log.0` -> `access.shop_access_log`); standard input gives `access.access`.
//!   `--table NAME` overrides it (`NAME` or `module.name`).
//! - Columns: see [`crate::columns`]; the time column (`time`) is the table's event time
//!   (`silt.time_column`), `remote_addr` is a lookup column (bloom filter).
//! - A line that does not match the format, or is not valid UTF-8, is one reject (with line
//!   number, reason and raw bytes); reading goes on. Empty lines are not records and are skipped.
//!   A UTF-8 byte-order mark before the first line is ignored; a line longer than
//!   [`MAX_LINE_BYTES`] is one reject (its first [`OVERLONG_KEEP`] bytes kept) and is never held
//!   in memory whole.
//!
//! [`AccessDecoder`] is the [`Decoder`]: lines are cut by `silt_core::decode::LineFramer` out of
//! the pieces it is fed (a line may straddle any two), and between pieces it holds the
//! unfinished last line and the rows of the batch being built. [`FORMAT`] declares the format
//! `access`; [`read`] is a thin wrapper that reads a whole `BufRead` with the decoder.
//!
//! Talks only to the bytes it is fed and the [`Emit`] it is given.

use std::collections::HashMap;
use std::io::BufRead;
use std::sync::{Arc, OnceLock};

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use silt_core::decode::{padding_reason, strip_bom, LineFramer, LineHandler};
use silt_core::format::Confidence;
use silt_core::{
    meta, Decoder, Emit, FormatOptions, FormatSpec, Probe, ReadOptions, Reject, SourceInfo,
    TableName,
};

use crate::columns::RowBuilder;
use crate::format::{trim_eol, LogFormat};

/// Longer lines are rejected without being held in memory.
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// How much of an overlong line is kept in its reject.
pub const OVERLONG_KEEP: usize = 64 << 10;

/// The `access` format.
pub static FORMAT: FormatSpec = FormatSpec {
    name: "access",
    aliases: &[],
    summary: "web server access logs (nginx/Apache combined, common, nginx main, or --log-format); table access.<file stem>",
    // `.log` is shared with syslog and Zeek: not a claim, the registry sniffs content.
    extensions: &[],
    sniff,
    open,
    text_fields: false,
    text: true,
};

fn open(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    let access = opts.get_or_default::<AccessOptions>();
    Ok(Box::new(AccessDecoder::new(source, &opts.read, &access)))
}

/// The `auto` format (main, combined, common), compiled once.
fn auto_format() -> Arc<LogFormat> {
    static AUTO: OnceLock<Arc<LogFormat>> = OnceLock::new();
    AUTO.get_or_init(|| Arc::new(LogFormat::parse("auto").expect("the auto preset compiles")))
        .clone()
}

/// 85 when the first non-blank lines (up to 5) all parse with the `auto` format (nginx main,
/// combined or common); 80 when all but one of at least three do (a log whose first lines
/// include a truncated or garbled one is still an access log; the line is a reject).
pub fn sniff(p: &Probe<'_>) -> Option<Confidence> {
    let lines = p.lines(5);
    if lines.is_empty() {
        return None;
    }
    let mut rows = RowBuilder::new(auto_format(), lines.len());
    let good = lines
        .iter()
        .filter(|l| std::str::from_utf8(l).is_ok_and(|s| rows.push_line(s).is_ok()))
        .count();
    match lines.len() - good {
        0 => Some(85),
        1 if lines.len() >= 3 => Some(80),
        _ => None,
    }
}

/// Options of the access-log reader.
#[derive(Debug, Clone)]
pub struct AccessOptions {
    pub format: Arc<LogFormat>,
    /// Overrides the table name derived from the file name.
    pub table: Option<TableName>,
}

impl Default for AccessOptions {
    /// The `auto` format, the table named after the file.
    fn default() -> Self {
        AccessOptions {
            format: auto_format(),
            table: None,
        }
    }
}

impl AccessOptions {
    /// `format`: a preset or format string (see [`LogFormat::parse`]); `table`: `name` (module
    /// `access`) or `module.name`.
    pub fn new(format: &str, table: Option<&str>) -> anyhow::Result<Self> {
        Ok(AccessOptions {
            format: Arc::new(LogFormat::parse(format)?),
            table: table.map(|t| match t.split_once('.') {
                Some((m, n)) => TableName::new(m, n),
                None => TableName::new("access", t),
            }),
        })
    }
}

/// The table an input goes to.
pub fn table_for(source: &SourceInfo, opts: &AccessOptions) -> TableName {
    if let Some(t) = &opts.table {
        return t.clone();
    }
    let mut stem = source.file_name.clone().unwrap_or_default();
    loop {
        let before = stem.len();
        if let Some((head, tail)) = stem.rsplit_once('.') {
            if !head.is_empty()
                && (tail.eq_ignore_ascii_case("log")
                    || tail.eq_ignore_ascii_case("gz")
                    || tail.eq_ignore_ascii_case("txt")
                    || (!tail.is_empty() && tail.bytes().all(|c| c.is_ascii_digit())))
            {
                stem.truncate(head.len());
            }
        }
        if stem.len() == before {
            break;
        }
    }
    if stem.is_empty() {
        stem = "access".into();
    }
    TableName::new("access", &stem)
}

/// The Arrow schema of a format's table.
pub fn schema(format: &LogFormat, table: &TableName) -> SchemaRef {
    let cols = crate::columns::columns(format);
    let fields: Vec<_> = cols.iter().map(|c| c.field()).collect();
    let mut md = HashMap::from([(meta::TABLE.to_string(), table.to_string())]);
    if let Some(t) = cols
        .iter()
        .find(|c| matches!(c.data_type, arrow::datatypes::DataType::Timestamp(..)))
    {
        md.insert(meta::TIME_COLUMN.to_string(), t.name.clone());
    }
    if cols.iter().any(|c| c.name == "remote_addr") {
        md.insert(meta::LOOKUP_COLUMNS.to_string(), "remote_addr".into());
    }
    Arc::new(Schema::new_with_metadata(fields, md))
}

/// Reads access-log lines from `input` into `out` (see the module documentation): a thin
/// wrapper over [`AccessDecoder`].
pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    opts: &ReadOptions,
    access: &AccessOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    AccessDecoder::new(source, opts, access).read(input, out)
}

/// The access-log [`Decoder`] for one stream; see the module documentation.
pub struct AccessDecoder {
    framer: LineFramer,
    lines: AccessLines,
}

impl AccessDecoder {
    pub fn new(source: &SourceInfo, opts: &ReadOptions, access: &AccessOptions) -> Self {
        let table = table_for(source, access);
        let batch_rows = opts.batch_rows.max(1);
        Self {
            framer: LineFramer::new(MAX_LINE_BYTES, OVERLONG_KEEP),
            lines: AccessLines {
                source: source.clone(),
                schema: schema(&access.format, &table),
                table,
                rows: RowBuilder::new(access.format.clone(), batch_rows),
                batch_rows,
                batch_bytes: 0,
                at_end: false,
            },
        }
    }
}

impl Decoder for AccessDecoder {
    fn feed(&mut self, bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        self.framer.feed(bytes, &mut self.lines, out)
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.lines.flush(out)
    }

    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.lines.at_end = true;
        let last = self.framer.finish(&mut self.lines, out);
        let flushed = self.lines.flush(out);
        last.and(flushed)
    }
}

/// The lines of one stream into rows.
struct AccessLines {
    source: SourceInfo,
    table: TableName,
    schema: SchemaRef,
    rows: RowBuilder,
    batch_rows: usize,
    /// Input bytes (line terminators included) of the rows being built.
    batch_bytes: u64,
    /// The stream has ended: the line handed out now had no terminator.
    at_end: bool,
}

impl AccessLines {
    fn reject(
        &self,
        line: u64,
        reason: String,
        raw: &[u8],
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        out.reject(Reject {
            source: self.source.display.clone(),
            line,
            reason,
            raw: raw.to_vec(),
            table: Some(self.table.clone()),
        })
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let batch = RecordBatch::try_new(self.schema.clone(), self.rows.finish())?;
        out.table_bytes(&self.table, std::mem::take(&mut self.batch_bytes));
        out.batch(&self.table, batch)
    }
}

impl LineHandler for AccessLines {
    fn line(&mut self, lineno: u64, raw: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        let mut line = trim_eol(raw);
        if lineno == 1 {
            line = strip_bom(line);
        }
        if line.is_empty() {
            return Ok(());
        }
        let result = match std::str::from_utf8(line) {
            Ok(s) => self.rows.push_line(s),
            Err(e) => Err(format!("invalid UTF-8 at byte {}", e.valid_up_to())),
        };
        match result {
            Ok(()) => {
                // The line's bytes as read, with its terminator.
                self.batch_bytes += raw.len() as u64 + u64::from(!self.at_end);
                if self.rows.len() >= self.batch_rows {
                    self.flush(out)?;
                }
                Ok(())
            }
            Err(reason) => self.reject(lineno, reason, line, out),
        }
    }

    fn overlong(
        &mut self,
        lineno: u64,
        start: &[u8],
        _len: usize,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        let reason = format!("line longer than {MAX_LINE_BYTES} bytes");
        self.reject(lineno, reason, start, out)
    }

    fn padding(&mut self, lineno: u64, bytes: u64, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.reject(lineno, padding_reason(bytes), b"", out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(head: &[u8]) -> Option<Confidence> {
        sniff(&Probe {
            head,
            file_name: Some("access.log"),
        })
    }

    #[test]
    fn sniffs_access_logs_only() {
        for yes in [
            &b"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612 \"-\" \"curl/8.0\"\n"[..],
            b"10.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] \"GET /apache_pb.gif HTTP/1.0\" 200 2326\n",
            b"1.2.3.4 - - [22/Jan/2019:03:56:14 +0330] \"GET / HTTP/1.1\" 200 1 \"-\" \"UA\" \"-\"\n\n1.2.3.4 - - [22/Jan/2019:03:56:15 +0330] \"GET /a HTTP/1.1\" 404 2\n",
        ] {
            assert_eq!(probe(yes), Some(85), "{}", String::from_utf8_lossy(yes));
        }
        // One bad line among five (a truncated first line of a rotated log).
        let line = "10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612\n";
        let log = format!("0 +0000] \"GET /x HTTP/1.1\" 200\n{}", line.repeat(4));
        assert_eq!(probe(log.as_bytes()), Some(80));
        // ... or among three; but not one of two.
        let log = format!("0 +0000] \"GET /x HTTP/1.1\" 200\n{}", line.repeat(2));
        assert_eq!(probe(log.as_bytes()), Some(80));
        let log = format!("garbage\n{line}");
        assert_eq!(probe(log.as_bytes()), None);
        let log = format!(
            "garbage\n{}more garbage\n{}",
            line.repeat(2),
            line.repeat(2)
        );
        assert_eq!(probe(log.as_bytes()), None);
        for no in [
            // One good line, then one that is not.
            &b"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612\nhello\n"[..],
            // Bad status, bad time.
            b"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 2x0 612\n",
            b"10.0.0.1 - - [32/Mar/2024:17:00:00 +0000] \"GET / HTTP/1.1\" 200 612\n",
            // Other formats' first lines.
            b"<34>Oct 11 22:14:15 mymachine su: 'su root' failed\n",
            b"Mar 24 14:02:50 web1 tomcat.log: 127.0.0.1 - - \"GET /bad.foo HTTP/1.1\" 404 65508 4.386\n",
            b"{\"log\":\"10.0.0.1 - - [24/Mar/2024:17:00:00 +0000] \\\"GET / HTTP/1.1\\\" 200 612\\n\",\"stream\":\"stdout\"}\n",
            b"#separator \\x09\n#fields\tts\n",
            b"time:2024-03-24T17:00:00Z\thost:10.0.0.1\n",
            b"a,b\n1,2\n",
            b"\x82\xa1a\x01\xa1b\x02",
            b"\xd4\xc3\xb2\xa1\x02\x00\x04\x00",
            b"",
        ] {
            assert_eq!(probe(no), None, "{}", String::from_utf8_lossy(no));
        }
    }
}
