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
//! [`EveDecoder`] is the [`silt_core::Decoder`] (lines cut by [`silt_core::decode::LineFramer`],
//! so the stream may be fed in pieces split anywhere; between calls it holds the partial last
//! line and the buffered records, bounded as above); [`read`] is a thin wrapper over it and
//! [`FORMAT`] declares the format (`suricata`, alias `eve`).
//!
//! Touches nothing but `input` and `out`.

use std::collections::BTreeMap;
use std::io::BufRead;

use anyhow::Context;
use arrow::datatypes::{Field, Schema};
use silt_core::decode::{padding_reason, strip_bom, strip_cr, LineFramer, LineHandler};
use silt_core::format::{Confidence, FormatOptions, FormatSpec, Probe};
use silt_core::{meta, Decoder, Emit, ReadOptions, Reject, SourceInfo, TableName};

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

/// The `suricata` format (alias `eve`).
pub static FORMAT: FormatSpec = FormatSpec {
    name: "suricata",
    aliases: &["eve"],
    summary: "Suricata EVE JSON; one table suricata.<event_type>",
    // `.json` is shared with every other JSON format: not a claim, the registry sniffs content.
    extensions: &[],
    sniff,
    open,
    text_fields: false,
    text: true,
};

fn open(opts: &FormatOptions, source: &SourceInfo) -> anyhow::Result<Box<dyn Decoder>> {
    Ok(Box::new(EveDecoder::new(source, &opts.read)))
}

/// 95 when the first line that parses as a JSON object (among the first 8 non-blank lines: a
/// stream may start with a broken line) has an `event_type` field.
pub fn sniff(p: &Probe<'_>) -> Option<Confidence> {
    let obj = p.lines(8).into_iter().find_map(|l| {
        (l.first() == Some(&b'{'))
            .then(|| serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(l).ok())
            .flatten()
    })?;
    obj.contains_key("event_type").then_some(95)
}

/// Reads EVE JSON lines from `input` (with [`EveDecoder`]); see the module documentation.
pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    opts: &ReadOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    EveDecoder::new(source, opts).read(input, out)
}

/// The EVE [`Decoder`] for one stream; see the module documentation.
pub struct EveDecoder {
    framer: LineFramer,
    reader: EveReader,
}

impl EveDecoder {
    pub fn new(source: &SourceInfo, opts: &ReadOptions) -> Self {
        Self {
            framer: LineFramer::new(MAX_LINE_BYTES, OVERLONG_RAW_KEEP),
            reader: EveReader::new(source, opts),
        }
    }
}

impl Decoder for EveDecoder {
    fn feed(&mut self, bytes: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        self.framer.feed(bytes, &mut self.reader, out)
    }

    fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.reader.flush_all(out)
    }

    fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.framer.finish(&mut self.reader, out)?;
        self.reader.flush_all(out)
    }
}

struct EveReader {
    source: SourceInfo,
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

impl LineHandler for EveReader {
    fn line(&mut self, lineno: u64, line: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        let mut line = strip_cr(line);
        if lineno == 1 {
            // Windows tools prefix a byte-order mark that JSON parsers refuse.
            line = strip_bom(line);
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let value = match Value::from_slice(line) {
            Ok(v) => v,
            Err(e) => return self.reject(out, lineno, json_error_reason(&e), line.to_vec(), None),
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
                Ok(())
            }
            Err(bad) => self.reject(out, lineno, bad.reason, line.to_vec(), bad.table),
        }
    }

    fn overlong(
        &mut self,
        lineno: u64,
        start: &[u8],
        _len: usize,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        self.reject(
            out,
            lineno,
            format!("line longer than {MAX_LINE_BYTES} bytes"),
            start.to_vec(),
            None,
        )
    }

    fn padding(&mut self, lineno: u64, bytes: u64, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.reject(out, lineno, padding_reason(bytes), Vec::new(), None)
    }
}

impl EveReader {
    fn new(source: &SourceInfo, opts: &ReadOptions) -> Self {
        Self {
            source: source.clone(),
            batch_rows: opts.batch_rows.max(1),
            hints: hints(),
            tables: BTreeMap::new(),
            buffered_bytes: 0,
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(s: &[u8]) -> Option<Confidence> {
        sniff(&Probe {
            head: s,
            file_name: Some("eve.json"),
        })
    }

    #[test]
    fn sniffs_eve_and_nothing_else() {
        for yes in [
            &br#"{"timestamp":"2018-03-24T17:15:21.400275+0000","flow_id":1,"event_type":"dns"}"#[..],
            b"\xEF\xBB\xBF\n\n  {\"event_type\":\"stats\",\"stats\":{}}\r\n{\"x\":1}\n",
        ] {
            assert_eq!(probe(yes), Some(95), "{}", String::from_utf8_lossy(yes));
        }
        for no in [
            // Zeek JSON, generic JSON, Docker, a JSON array, TSV, binary junk.
            &br#"{"_path":"conn","ts":1.0,"uid":"C"}"#[..],
            br#"{"ts":1.0,"uid":"C","id.orig_h":"1.2.3.4"}"#,
            br#"{"log":"x\n","stream":"stdout","time":"2024-01-01T00:00:00Z"}"#,
            br#"[{"event_type":"dns"}]"#,
            br#"{"msg":"event_type"}"#,
            b"{\"event_type\": \"dns\"",
            b"#separator \\x09\n#fields\tts\n",
            b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00",
            b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00\x4d\x3c\x2b\x1a",
            b"",
        ] {
            assert_eq!(probe(no), None, "{}", String::from_utf8_lossy(no));
        }
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200 {
            let junk: Vec<u8> = (0..300)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng as u8
                })
                .collect();
            assert_eq!(probe(&junk), None);
        }
    }

    #[test]
    fn overlong_lines_are_one_reject_each_and_reading_goes_on() {
        let mut data = b"{\"event_type\":\"a\"}\n".to_vec();
        data.extend(std::iter::repeat_n(b'x', 100));
        data.extend(b"\n{\"event_type\":\"b\"}\n");
        for piece in [1, 7, data.len()] {
            let mut d = EveDecoder::new(&SourceInfo::stdin(), &ReadOptions::default());
            d.framer = LineFramer::new(50, 10);
            let mut out = silt_core::CollectEmit::default();
            for p in data.chunks(piece) {
                d.feed(p, &mut out).unwrap();
            }
            d.finish(&mut out).unwrap();
            assert_eq!(out.total_rows(), 2, "piece {piece}");
            assert_eq!(out.rejects.len(), 1, "piece {piece}");
            assert_eq!(out.rejects[0].line, 2);
            assert_eq!(out.rejects[0].raw, b"xxxxxxxxxx");
            assert_eq!(
                out.rejects[0].reason,
                format!("line longer than {MAX_LINE_BYTES} bytes")
            );
        }
    }
}
