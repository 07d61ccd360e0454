//! Suricata EVE JSON (one JSON object per line) to one table per `event_type`
//! (`suricata.alert`, `suricata.flow`, `suricata.dns`, `suricata.stats`, ...).
//!
//! Each line is parsed into a [`json::Value`], checked, typed by what silt knows about EVE and
//! buffered per table in a [`json::Batcher`]; a table's buffer is turned into a batch after
//! `opts.batch_rows` records, and every buffer when together they hold more than
//! [`MAX_BUFFERED_BYTES`] of input, so memory stays bounded whatever the file size. Schemas are
//! inferred per table and grow from batch to batch (see `docs/suricata.md` for the full mapping).
//!
//! What silt knows about EVE:
//! - `timestamp` is the time column (`silt.time_column`), `Timestamp(Microsecond, "UTC")`, with
//!   the sensor's offset (`+0200`) applied; it is always the first column;
//! - [`TIME_FIELDS`] become timestamps too (when a value does not parse it becomes null and the
//!   original text is kept in the `_unparsed` column);
//! - `flow_id` and `parent_id` are `UInt64`, read exactly from the JSON number text;
//! - [`ADDR_FIELDS`], and DNS `rdata` of `A`/`AAAA` records, hold canonical address text.
//!
//! Rejected (with the 1-based line number and the raw line): invalid JSON (serde's message and
//! the column), a JSON value that is not an object, a missing, non-string or empty `event_type`,
//! a `flow_id`/`parent_id` that is not an unsigned 64-bit integer, and lines longer than
//! [`MAX_LINE_BYTES`]. Blank lines are skipped; a UTF-8 byte-order mark before the first line is
//! ignored.
//!
//! Touches nothing but `input` and `out`.

use std::collections::BTreeMap;
use std::io::{self, BufRead};

use anyhow::Context;
use arrow::datatypes::{Field, Schema};
use silt_core::{meta, Emit, ReadOptions, Reject, SourceInfo, TableName};

use crate::json::{self, Hint, HintTree, Value};

/// The module part of every EVE table name.
pub const MODULE: &str = "suricata";

/// The time column of every EVE table.
pub const TIME_COLUMN: &str = "timestamp";

/// Fields that hold times besides `timestamp` (paths; arrays are transparent).
pub const TIME_FIELDS: &[&str] = &[
    "flow.start",
    "flow.end",
    "netflow.start",
    "netflow.end",
    "tls.notbefore",
    "tls.notafter",
    "stats.detect.engines.last_reload",
];

/// Fields that hold IP addresses (paths; arrays are transparent).
pub const ADDR_FIELDS: &[&str] = &[
    "src_ip",
    "dest_ip",
    "flow.src_ip",
    "flow.dest_ip",
    "tunnel.src_ip",
    "tunnel.dest_ip",
    "alert.source.ip",
    "alert.target.ip",
    "dhcp.client_ip",
    "dhcp.assigned_ip",
    "dhcp.relay_ip",
    "dhcp.next_server_ip",
    "dhcp.subnet_mask",
    "dhcp.routers",
    "dhcp.dns_servers",
    "dns.grouped.A",
    "dns.grouped.AAAA",
];

/// Flow identifiers: `UInt64` always; anything else rejects the record.
pub const ID_FIELDS: &[&str] = &["flow_id", "parent_id"];

/// Columns worth a bloom filter, in this order, when present.
pub const LOOKUP_COLUMNS: &[&str] = &["flow_id", "community_id", "src_ip", "dest_ip"];

/// All tables' buffers are flushed when together they hold this much input.
pub const MAX_BUFFERED_BYTES: usize = 64 << 20;

/// Longer lines are rejected without being held in memory.
pub const MAX_LINE_BYTES: usize = 64 << 20;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// How much of an overlong line is kept in its reject.
const OVERLONG_RAW_KEEP: usize = 64 << 10;

/// The hints for EVE records (see the module documentation).
pub fn hints() -> HintTree {
    let mut paths: Vec<(&str, Hint)> = vec![(TIME_COLUMN, Hint::Timestamp)];
    paths.extend(TIME_FIELDS.iter().map(|p| (*p, Hint::Timestamp)));
    paths.extend(ADDR_FIELDS.iter().map(|p| (*p, Hint::Addr)));
    paths.extend(ID_FIELDS.iter().map(|p| (*p, Hint::UInt64)));
    HintTree::from_paths(&paths)
}

/// Reads EVE JSON lines from `input`; see the module documentation.
pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    opts: &ReadOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let mut r = EveReader::new(source, opts);
    let res = r.read_all(input, out);
    // Whatever was read before an I/O error is still good: emit it, then report the error.
    let flushed = r.flush_all(out);
    res.and(flushed)
}

struct EveReader<'a> {
    source: &'a SourceInfo,
    batch_rows: usize,
    hints: HintTree,
    tables: BTreeMap<TableName, json::Batcher>,
    buffered_bytes: usize,
}

/// Why a parsed line cannot become a row.
struct Bad {
    reason: String,
    table: Option<TableName>,
}

impl<'a> EveReader<'a> {
    fn new(source: &'a SourceInfo, opts: &ReadOptions) -> Self {
        Self {
            source,
            batch_rows: opts.batch_rows.max(1),
            hints: hints(),
            tables: BTreeMap::new(),
            buffered_bytes: 0,
        }
    }

    fn read_all(&mut self, input: &mut dyn BufRead, out: &mut dyn Emit) -> anyhow::Result<()> {
        let mut line = Vec::with_capacity(4096);
        let mut lineno: u64 = 0;
        loop {
            line.clear();
            let Some(info) = read_line(input, &mut line, MAX_LINE_BYTES).with_context(|| {
                format!("{}: read error after line {lineno}", self.source.display)
            })?
            else {
                break;
            };
            lineno += 1;
            out.progress(info.consumed as u64);
            if info.overlong {
                line.truncate(OVERLONG_RAW_KEEP);
                self.reject(
                    out,
                    lineno,
                    format!("line longer than {MAX_LINE_BYTES} bytes"),
                    line.clone(),
                    None,
                )?;
                continue;
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if lineno == 1 && line.starts_with(UTF8_BOM) {
                // Windows tools prefix a byte-order mark that JSON parsers refuse.
                line.drain(..UTF8_BOM.len());
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value = match Value::from_slice(&line) {
                Ok(v) => v,
                Err(e) => {
                    self.reject(out, lineno, json_error_reason(&e), line.clone(), None)?;
                    continue;
                }
            };
            match self.prepare(value) {
                Ok((table, record)) => {
                    if !self.tables.contains_key(&table) {
                        self.tables.insert(table.clone(), new_batcher());
                    }
                    let b = self.tables.get_mut(&table).expect("inserted above");
                    b.push(record, line.len());
                    self.buffered_bytes += line.len();
                    if b.len() >= self.batch_rows {
                        self.flush(&table, out)?;
                    } else if self.buffered_bytes >= MAX_BUFFERED_BYTES {
                        self.flush_all(out)?;
                    }
                }
                Err(bad) => self.reject(out, lineno, bad.reason, line.clone(), bad.table)?,
            }
        }
        Ok(())
    }

    /// Checks one record and applies EVE typing; returns its table.
    fn prepare(&self, mut v: Value) -> Result<(TableName, Value), Bad> {
        let Value::Object(_) = v else {
            return Err(Bad {
                reason: format!("not a JSON object but {}", kind(&v)),
                table: None,
            });
        };
        let table = match v.get("event_type") {
            Some(Value::Str(s)) if !s.trim().is_empty() => TableName::new(MODULE, s.trim()),
            Some(Value::Str(_)) => return Err(bad("event_type is empty", None)),
            Some(other) => {
                return Err(bad(
                    &format!("event_type is not a string but {}", kind(other)),
                    None,
                ));
            }
            None => return Err(bad("no event_type field", None)),
        };
        for id in ID_FIELDS {
            match v.get(id) {
                None | Some(Value::Null) | Some(Value::UInt(_)) => {}
                Some(Value::Int(i)) if *i >= 0 => {}
                Some(Value::Str(s)) if json::hints::parse_u64_digits(s).is_some() => {}
                Some(other) => {
                    return Err(bad(
                        &format!(
                            "{id} is not an unsigned 64-bit integer: {}",
                            shorten(&other.to_json())
                        ),
                        Some(table),
                    ));
                }
            }
        }
        canonical_dns_rdata(&mut v);
        let failed = self.hints.apply(&mut v);
        json::attach_unparsed(&mut v, failed);
        Ok((table, v))
    }

    fn reject(
        &self,
        out: &mut dyn Emit,
        line: u64,
        reason: String,
        raw: Vec<u8>,
        table: Option<TableName>,
    ) -> anyhow::Result<()> {
        out.reject(Reject {
            source: self.source.display.clone(),
            line,
            reason,
            raw,
            table,
        })
    }

    fn flush(&mut self, table: &TableName, out: &mut dyn Emit) -> anyhow::Result<()> {
        let Some(b) = self.tables.get_mut(table) else {
            return Ok(());
        };
        let line_bytes = b.bytes();
        self.buffered_bytes -= line_bytes.min(self.buffered_bytes);
        let hints = &self.hints;
        let finish = |s: Schema| finish_schema(table, hints, s);
        let batch = b
            .flush(&finish)
            .with_context(|| format!("{}: building a batch for {table}", self.source.display))?;
        if let Some(batch) = batch {
            out.table_bytes(table, line_bytes as u64);
            out.batch(table, batch)?;
        }
        Ok(())
    }

    fn flush_all(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let names: Vec<TableName> = self.tables.keys().cloned().collect();
        for t in names {
            self.flush(&t, out)?;
        }
        self.buffered_bytes = 0;
        Ok(())
    }
}

/// `invalid JSON at column 33: EOF while parsing a string` (serde's own text says `at line 1
/// column 33` at the end; the line number is the reject's, so only the column is kept).
fn json_error_reason(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let loc = format!(" at line {} column {}", e.line(), e.column());
    match msg.strip_suffix(&loc) {
        Some(m) => format!("invalid JSON at column {}: {m}", e.column()),
        None => format!("invalid JSON: {msg}"),
    }
}

fn bad(reason: &str, table: Option<TableName>) -> Bad {
    Bad {
        reason: reason.to_string(),
        table,
    }
}

/// At most 80 characters of `s`, for reasons (the raw line is in the reject anyway).
fn shorten(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Int(_) | Value::UInt(_) | Value::Float(_) => "a number",
        Value::Str(_) | Value::Time(_) => "a string",
        Value::List(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn new_batcher() -> json::Batcher {
    json::Batcher::new(Schema::new(vec![Field::new(
        TIME_COLUMN,
        silt_core::time::timestamp_type(),
        true,
    )]))
}

/// Table metadata (`silt.table`, `silt.time_column`, `silt.lookup_columns`) and field metadata.
fn finish_schema(table: &TableName, hints: &HintTree, s: Schema) -> Schema {
    let s = hints.annotate(s);
    let lookup: Vec<&str> = LOOKUP_COLUMNS
        .iter()
        .copied()
        .filter(|c| s.field_with_name(c).is_ok())
        .collect();
    let mut md = s.metadata().clone();
    md.insert(meta::TABLE.to_string(), table.to_string());
    md.insert(meta::TIME_COLUMN.to_string(), TIME_COLUMN.to_string());
    md.insert(meta::LOOKUP_COLUMNS.to_string(), lookup.join(","));
    s.with_metadata(md)
}

/// DNS `rdata` is an address only for `A` and `AAAA` records; canonicalize exactly those, in the
/// v1 layout (`dns.rrtype`/`dns.rdata`) and in the v2/v3 arrays (`answers`, `authorities`,
/// `additionals`, `queries`).
fn canonical_dns_rdata(v: &mut Value) {
    let Some(dns) = v.get_mut("dns") else { return };
    fix_rr(dns);
    if let Value::Object(entries) = dns {
        for (k, list) in entries.iter_mut() {
            if matches!(
                k.as_str(),
                "answers" | "authorities" | "additionals" | "queries"
            ) {
                if let Value::List(items) = list {
                    items.iter_mut().for_each(fix_rr);
                }
            }
        }
    }
}

fn fix_rr(rr: &mut Value) {
    let is_addr = matches!(rr.get("rrtype").and_then(Value::as_str), Some("A" | "AAAA"));
    if !is_addr {
        return;
    }
    if let Some(Value::Str(s)) = rr.get_mut("rdata") {
        if let Some(c) = silt_core::addr::canonical_addr(s) {
            *s = c;
        }
    }
}

struct LineInfo {
    /// Bytes consumed from the input, terminator included.
    consumed: usize,
    /// The line was longer than the limit; `buf` holds only its first `limit` bytes.
    overlong: bool,
}

/// Reads one line (without its `\n`) into `buf`, keeping at most `limit` bytes of it; `None` at
/// the end of input. Hand-written instead of `read_until` so that one enormous line cannot
/// exhaust memory.
fn read_line(
    input: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    limit: usize,
) -> io::Result<Option<LineInfo>> {
    let mut consumed = 0;
    let mut overlong = false;
    loop {
        let chunk = match input.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok((consumed > 0).then_some(LineInfo { consumed, overlong }));
        }
        let (part, done) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (&chunk[..i], i + 1),
            None => (chunk, chunk.len()),
        };
        let room = limit.saturating_sub(buf.len());
        if part.len() > room {
            overlong = true;
        }
        buf.extend_from_slice(&part[..part.len().min(room)]);
        let found = done > part.len();
        input.consume(done);
        consumed += done;
        if found {
            return Ok(Some(LineInfo { consumed, overlong }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_line_limits_and_counts() {
        let data = b"abc\r\n\nlonger line here\nlast";
        let mut input = io::BufReader::with_capacity(4, &data[..]);
        let mut buf = Vec::new();
        let mut lines = Vec::new();
        while let Some(info) = read_line(&mut input, &mut buf, 8).unwrap() {
            lines.push((
                String::from_utf8(buf.clone()).unwrap(),
                info.consumed,
                info.overlong,
            ));
            buf.clear();
        }
        assert_eq!(
            lines,
            vec![
                ("abc\r".to_string(), 5, false),
                (String::new(), 1, false),
                ("longer l".to_string(), 17, true),
                ("last".to_string(), 4, false),
            ]
        );
    }
}
