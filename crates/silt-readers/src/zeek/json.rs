//! Zeek NDJSON logs (`LogAscii::use_json`, json-streaming-logs, Corelight) -> Arrow batches typed
//! exactly like the TSV reader's, one table per log.
//!
//! - The log is named by `_path` (consumed: it is the table, not a column); a record without
//!   `_path` belongs to the log named after the file ([`super::fallback_log_name`]), e.g. the
//!   VAST sample record keyed by `__name` (a Corelight sensor name, not a log name), whose
//!   `__name` is then an ordinary string column. Records of one input may belong to many logs;
//!   each log has its own builders and batches.
//! - Field types come from the [`super::registry`]: the log's own entry, then names whose type is
//!   the same in every known log (`ts`, `uid`, `id.orig_h`, `trans_id`, ...), and `_write_ts`
//!   (kept as a nullable time column) and `_system_name`. A value that does not fit its field's
//!   type rejects the line with the reason. Numbers and booleans are accepted for string fields
//!   (as their JSON text); a scalar given for a container field is a one-element list.
//! - Other fields are inferred from all their values in a batch with silt-core's unification
//!   rules: bool -> Boolean (`bool`), integer -> Int64 (`int`; a field with an integer above
//!   i64::MAX keeps its numbers as exact decimal text, `string`),
//!   number with a fraction -> Float64 (`double`), string -> Utf8 (`string`; ISO-8601-looking
//!   strings are not turned into times), array -> List of its elements (`vector[T]`; only empty
//!   arrays -> List<Utf8>), object or a conflict -> Utf8 holding the JSON text. A type inferred
//!   once only widens in later batches of the same stream. A field never seen with a value is a
//!   Null-typed column. Inference never rejects a line.
//! - Times: epoch seconds as a JSON number (fractions rounded to the microsecond), an ISO 8601
//!   string, or an integer of absolute value >= 1e11, which is taken as epoch **milliseconds**
//!   (Zeek's `JSON::TS_MILLIS`; 1e11 s would be the year 5138). An integer above i64::MAX is
//!   Zeek's `TS_MILLIS_UNSIGNED` encoding of a negative millisecond count (two's complement).
//! - Strings are stored in the canonical form of [`super::types::canon_into`], which Zeek's JSON
//!   writer already produces, so TSV and JSON logs of the same traffic agree.
//! - `null` and missing fields are null. Invalid JSON (e.g. the bare canonified
//!   `XXXXXXXXXX.XXXXXX` token of Zeek's test baselines) and lines that are not JSON objects are
//!   rejects. Blank lines are skipped.
//!
//! [`ZeekJsonDecoder`] is the [`silt_core::Decoder`] (lines cut by
//! [`silt_core::decode::LineFramer`], so the stream may be fed in pieces split anywhere);
//! [`read`] and [`read_slice`] are thin wrappers over it.
//!
//! Touches nothing but its input and `out`.

use std::collections::HashMap;
use std::io::BufRead;

use arrow::datatypes::DataType;
use serde_json::{Map, Value};
use silt_core::decode::{decode_slice, strip_bom, LineFramer, LineHandler};
use silt_core::schema::unify_types;
use silt_core::{Decoder, Emit, ReadOptions, Reject, SourceInfo, TableName};

use super::types::{addr_into, canon_into, count_value, Col, Layout, LeafSpec, ZType};
use super::{overlong_reason, registry, MAX_LINE, REJECT_RAW_MAX};

/// A batch is emitted early once its rows came from this many input bytes (keeps 32-bit Arrow
/// string offsets far from overflow).
const FLUSH_BYTES: usize = 256 << 20;
/// Integers of at least this magnitude in a time field are epoch milliseconds.
const MILLIS_THRESHOLD: i64 = 100_000_000_000;

/// Reads a Zeek NDJSON stream (with [`ZeekJsonDecoder`]). See the module documentation.
pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    opts: &ReadOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    ZeekJsonDecoder::new(source, opts).read(input, out)
}

/// Parses a whole in-memory Zeek NDJSON log (same behaviour as [`read`]).
pub fn read_slice(
    data: &[u8],
    source: &SourceInfo,
    opts: &ReadOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    decode_slice(&mut ZeekJsonDecoder::new(source, opts), data, out)
}

/// The Zeek NDJSON [`Decoder`] for one stream; see the module documentation.
pub struct ZeekJsonDecoder {
    framer: LineFramer,
    reader: JsonReader,
}

impl ZeekJsonDecoder {
    pub fn new(source: &SourceInfo, opts: &ReadOptions) -> Self {
        Self {
            framer: LineFramer::new(MAX_LINE, REJECT_RAW_MAX),
            reader: JsonReader::new(source, opts),
        }
    }
}

impl Decoder for ZeekJsonDecoder {
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

struct JsonReader {
    source: SourceInfo,
    batch_rows: usize,
    tables: Vec<JTable>,
    by_path: HashMap<String, usize>,
    fallback: String,
    line_no: u64,
}

/// The builders of one log.
struct JTable {
    path: String,
    table: TableName,
    cols: Vec<JCol>,
    by_name: HashMap<String, usize>,
    rows: usize,
    bytes: usize,
}

struct JCol {
    name: String,
    kind: Kind,
}

enum Kind {
    /// A field whose Zeek type is known: values go straight into the builder.
    Typed {
        zt: ZType,
        source_type: String,
        col: Col,
        /// Position in the log's registry entry (orders the columns like Zeek does).
        rank: Option<usize>,
    },
    /// A field of unknown type: its non-null values of the current batch, by row.
    Inferred {
        values: Vec<(usize, Value)>,
        /// The type inferred in earlier batches (types only widen).
        seen: DataType,
    },
}

impl JsonReader {
    fn new(source: &SourceInfo, opts: &ReadOptions) -> Self {
        JsonReader {
            source: source.clone(),
            batch_rows: opts.batch_rows.max(1),
            tables: Vec::new(),
            by_path: HashMap::new(),
            fallback: super::fallback_log_name(source),
            line_no: 0,
        }
    }

    fn reject(
        &self,
        raw: &[u8],
        reason: String,
        table: Option<TableName>,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        out.reject(Reject {
            source: self.source.display.clone(),
            line: self.line_no,
            reason,
            raw: raw.to_vec(),
            table,
        })
    }

    fn table_index(&mut self, path: &str) -> usize {
        if let Some(&i) = self.by_path.get(path) {
            return i;
        }
        let i = self.tables.len();
        self.tables.push(JTable {
            path: path.to_string(),
            table: TableName::new("zeek", path),
            cols: Vec::new(),
            by_name: HashMap::new(),
            rows: 0,
            bytes: 0,
        });
        self.by_path.insert(path.to_string(), i);
        i
    }

    fn flush_table(&mut self, i: usize, out: &mut dyn Emit) -> anyhow::Result<()> {
        let t = &mut self.tables[i];
        if t.rows > 0 {
            let bytes = t.bytes as u64;
            let (table, batch) = t.finish()?;
            out.table_bytes(&table, bytes);
            out.batch(&table, batch)?;
        }
        Ok(())
    }

    fn flush_all(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        for i in 0..self.tables.len() {
            self.flush_table(i, out)?;
        }
        Ok(())
    }
}

impl LineHandler for JsonReader {
    fn line(&mut self, lineno: u64, raw: &[u8], out: &mut dyn Emit) -> anyhow::Result<()> {
        self.line_no = lineno;
        let raw_len = raw.len();
        let raw = if lineno == 1 { strip_bom(raw) } else { raw };
        let line = raw.trim_ascii();
        if line.is_empty() {
            return Ok(());
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let mut map: Map<String, Value> = match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return self.reject(raw, "not a JSON object".into(), None, out),
            Err(e) => return self.reject(raw, format!("invalid JSON: {e}"), None, out),
        };
        let path = match map.shift_remove("_path") {
            None | Some(Value::Null) => self.fallback.clone(),
            Some(Value::String(p)) if !p.is_empty() => p,
            Some(other) => {
                return self.reject(
                    raw,
                    format!("\"_path\" must be a non-empty string, got {other}"),
                    None,
                    out,
                )
            }
        };
        let ti = self.table_index(&path);
        let t = &mut self.tables[ti];
        match t.push_row(map) {
            Ok(()) => {
                t.bytes += raw_len + 1;
                if t.rows >= self.batch_rows || t.bytes >= FLUSH_BYTES {
                    self.flush_table(ti, out)?;
                }
                Ok(())
            }
            Err(reason) => {
                let table = Some(t.table.clone());
                self.reject(raw, reason, table, out)
            }
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
        self.reject(start, overlong_reason(), None, out)
    }
}

impl JTable {
    fn column(&mut self, name: &str) -> usize {
        if let Some(&i) = self.by_name.get(name) {
            return i;
        }
        let known = registry::log_field(&self.path, name);
        let ty = known.map(|k| k.1).or_else(|| registry::global_type(name));
        let kind = match ty {
            Some(ty) => {
                let zt = ZType::parse(ty);
                let mut col = Col::new(&zt, 1024);
                for _ in 0..self.rows {
                    col.push_null();
                }
                Kind::Typed {
                    zt,
                    source_type: ty.to_string(),
                    col,
                    rank: known.map(|k| k.0),
                }
            }
            None => Kind::Inferred {
                values: Vec::new(),
                seen: DataType::Null,
            },
        };
        let i = self.cols.len();
        self.cols.push(JCol {
            name: name.to_string(),
            kind,
        });
        self.by_name.insert(name.to_string(), i);
        i
    }

    /// Appends one record, or leaves the table as it was and says why not.
    fn push_row(&mut self, map: Map<String, Value>) -> Result<(), String> {
        let row = self.rows;
        let ncols = self.cols.len();
        let mut err = None;
        let mut scratch = Vec::new();
        for (k, v) in map {
            let ci = self.column(&k);
            match &mut self.cols[ci].kind {
                Kind::Typed {
                    zt,
                    col,
                    source_type,
                    ..
                } => {
                    if v.is_null() {
                        col.push_null();
                    } else if let Err(e) = push_json(col, zt, &v, false, &mut scratch) {
                        err = Some(format!("field {k:?} ({source_type}): {e}"));
                        break;
                    }
                }
                Kind::Inferred { values, .. } => {
                    if !v.is_null() {
                        values.push((row, v));
                    }
                }
            }
        }
        if let Some(e) = err {
            for c in &mut self.cols {
                match &mut c.kind {
                    Kind::Typed { col, .. } => col.truncate(row),
                    Kind::Inferred { values, .. } => {
                        while values.last().is_some_and(|(r, _)| *r == row) {
                            values.pop();
                        }
                    }
                }
            }
            // Columns this record introduced disappear with it.
            for c in self.cols.drain(ncols..) {
                self.by_name.remove(&c.name);
            }
            return Err(e);
        }
        for c in &mut self.cols {
            if let Kind::Typed { col, .. } = &mut c.kind {
                if col.len() == row {
                    col.push_null();
                }
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// Builds the batch of the rows so far and empties the builders.
    fn finish(&mut self) -> anyhow::Result<(TableName, arrow::record_batch::RecordBatch)> {
        let rows = self.rows;
        // Known fields in the log's own order, then the others in order of first appearance.
        let mut order: Vec<usize> = (0..self.cols.len()).collect();
        order.sort_by_key(|&i| match &self.cols[i].kind {
            Kind::Typed { rank: Some(r), .. } => (0, *r, i),
            _ => (1, 0, i),
        });
        let mut leaves = Vec::with_capacity(order.len());
        let mut arrays = Vec::with_capacity(order.len());
        let mut scratch = Vec::new();
        for i in order {
            let c = &mut self.cols[i];
            match &mut c.kind {
                Kind::Typed {
                    zt,
                    source_type,
                    col,
                    ..
                } => {
                    arrays.push(Some(col.finish(zt)));
                    leaves.push(LeafSpec {
                        name: c.name.clone(),
                        ztype: zt.clone(),
                        source_type: source_type.clone(),
                    });
                }
                Kind::Inferred { values, seen } => {
                    let mut dt = seen.clone();
                    for (_, v) in values.iter() {
                        dt = unify_types(&dt, &value_type(v));
                    }
                    *seen = dt.clone();
                    let zt = inferred_ztype(&dt);
                    let mut col = Col::new(&zt, rows);
                    let mut it = values.drain(..).peekable();
                    for r in 0..rows {
                        match it.next_if(|(vr, _)| *vr == r) {
                            Some((_, v)) => {
                                // Cannot fail: the type was inferred from these very values and
                                // lenient conversion renders anything as text for strings.
                                if push_json(&mut col, &zt, &v, true, &mut scratch).is_err() {
                                    col.truncate(r);
                                    col.push_null();
                                }
                            }
                            None => col.push_null(),
                        }
                    }
                    drop(it);
                    arrays.push(Some(col.finish(&zt)));
                    leaves.push(LeafSpec {
                        name: c.name.clone(),
                        source_type: if zt == ZType::Null {
                            "unknown".into()
                        } else {
                            zt.name()
                        },
                        ztype: zt,
                    });
                }
            }
        }
        let layout = Layout::new(&self.table, leaves).map_err(anyhow::Error::msg)?;
        let batch = layout.assemble(arrays, rows)?;
        self.rows = 0;
        self.bytes = 0;
        Ok((self.table.clone(), batch))
    }
}

/// The Arrow type a JSON value suggests (for unknown fields).
fn value_type(v: &Value) -> DataType {
    match v {
        Value::Null => DataType::Null,
        Value::Bool(_) => DataType::Boolean,
        Value::Number(n) => {
            if n.is_i64() {
                DataType::Int64
            } else if n.is_u64() {
                DataType::UInt64
            } else {
                DataType::Float64
            }
        }
        Value::String(_) | Value::Object(_) => DataType::Utf8,
        Value::Array(a) => {
            let mut t = DataType::Null;
            for e in a {
                t = unify_types(&t, &value_type(e));
            }
            DataType::List(std::sync::Arc::new(arrow::datatypes::Field::new(
                "item", t, true,
            )))
        }
    }
}

/// The Zeek-side type silt stores an inferred Arrow type as.
fn inferred_ztype(dt: &DataType) -> ZType {
    fn scalar(dt: &DataType) -> Option<ZType> {
        Some(match dt {
            DataType::Boolean => ZType::Bool,
            DataType::Int64 => ZType::Int,
            // An integer above i64::MAX cannot be a signed count (types.rs, `count_value`): the
            // column keeps the numbers' exact decimal text instead.
            DataType::UInt64 => ZType::String,
            DataType::Float64 => ZType::Double,
            DataType::Utf8 => ZType::String,
            _ => return None,
        })
    }
    match dt {
        DataType::Null => ZType::Null,
        DataType::List(f) => match f.data_type() {
            DataType::Null => ZType::List(Box::new(ZType::String)),
            t => scalar(t).map_or(ZType::String, |s| ZType::List(Box::new(s))),
        },
        t => scalar(t).unwrap_or(ZType::String),
    }
}

/// Appends JSON value `v` (not null) as type `t`. `lenient` (inferred columns) renders any
/// value as JSON text for strings; otherwise only scalars are.
fn push_json(
    col: &mut Col,
    t: &ZType,
    v: &Value,
    lenient: bool,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    if let ZType::List(inner) = t {
        let item = col.list_item();
        match v {
            Value::Array(a) => {
                for (k, e) in a.iter().enumerate() {
                    if e.is_null() {
                        item.push_null();
                    } else if let Err(err) = push_json(item, inner, e, lenient, scratch) {
                        return Err(format!("element {}: {err}", k + 1));
                    }
                }
            }
            scalar => push_json(item, inner, scalar, lenient, scratch)?,
        }
        col.list_commit();
        return Ok(());
    }
    match (t, v) {
        (ZType::String, Value::String(s)) => {
            canon_into(s.as_bytes(), col.str_bytes());
            col.str_commit();
        }
        (ZType::String, Value::Number(_) | Value::Bool(_)) => {
            col.push_str(v.to_string().as_bytes());
        }
        (ZType::String, Value::Array(_) | Value::Object(_)) if lenient => {
            scratch.clear();
            scratch.extend_from_slice(v.to_string().as_bytes());
            canon_into(scratch, col.str_bytes());
            col.str_commit();
        }
        (ZType::Bool, Value::Bool(b)) => col.push_bool(*b),
        (ZType::Count, Value::Number(n)) => {
            match n.as_u64().or_else(|| integral_f64(n).and_then(f_to_u64)) {
                Some(x) => col.push_i64(count_value(x)?),
                None => return Err(format!("expected a non-negative integer, got {n}")),
            }
        }
        (ZType::Int, Value::Number(n)) => {
            match n.as_i64().or_else(|| integral_f64(n).and_then(f_to_i64)) {
                Some(x) => col.push_i64(x),
                None => return Err(format!("expected a 64-bit integer, got {n}")),
            }
        }
        (ZType::Double, Value::Number(n)) => match n.as_f64() {
            Some(x) => col.push_f64(x),
            None => return Err(format!("expected a number, got {n}")),
        },
        // Zeek's JSON writer prints intervals with full double precision; round to the
        // microsecond as its TSV writer does (`%.6f`), so both forms store the same value.
        (ZType::Interval, Value::Number(n)) => match n
            .as_f64()
            .and_then(silt_core::time::float_seconds_to_micros)
        {
            Some(us) => col.push_i64(us),
            None => return Err(format!("expected an interval in seconds, got {n}")),
        },
        (ZType::Port, Value::Number(n)) => match n.as_u64().filter(|&p| p <= 65535) {
            Some(p) => col.push_u16(p as u16),
            None => return Err(format!("expected a port number 0..65535, got {n}")),
        },
        (ZType::Time, v) => match json_time(v) {
            Some(Some(us)) => col.push_i64(us),
            Some(None) => col.push_null(),
            None => return Err(format!("invalid time {}", shown(v))),
        },
        (ZType::Addr, Value::String(s)) => {
            if addr_into(s.as_bytes(), col.str_bytes()) {
                col.str_commit();
            } else {
                col.str_abort();
                return Err(format!("invalid addr {}", shown(v)));
            }
        }
        (ZType::Subnet, Value::String(s)) => match silt_core::addr::canonical_subnet(s) {
            Some(c) => col.push_str(c.as_bytes()),
            None => return Err(format!("invalid subnet {}", shown(v))),
        },
        (ZType::Null, _) => col.push_null(),
        (t, v) => return Err(format!("expected {}, got {}", t.name(), shown(v))),
    }
    Ok(())
}

fn integral_f64(n: &serde_json::Number) -> Option<f64> {
    n.as_f64().filter(|f| f.fract() == 0.0)
}

fn f_to_u64(f: f64) -> Option<u64> {
    (0.0..18_446_744_073_709_551_616.0)
        .contains(&f)
        .then_some(f as u64)
}

fn f_to_i64(f: f64) -> Option<i64> {
    (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0)
        .contains(&f)
        .then_some(f as i64)
}

/// A JSON time value as UTC microseconds: `Some(None)` for the canonified test token given as a
/// string, `None` if it is not a time.
fn json_time(v: &Value) -> Option<Option<i64>> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                if i.checked_abs().is_none_or(|a| a >= MILLIS_THRESHOLD) {
                    return Some(Some(i.checked_mul(1000)?));
                }
                return Some(Some(i.checked_mul(1_000_000)?));
            }
            if let Some(u) = n.as_u64() {
                // Zeek's TS_MILLIS_UNSIGNED writes a negative millisecond count as its u64 image.
                return Some(Some((u as i64).checked_mul(1000)?));
            }
            silt_core::time::float_seconds_to_micros(n.as_f64()?).map(Some)
        }
        Value::String(s) => {
            if s.as_bytes() == super::tsv::CANONIFIED_TS {
                return Some(None);
            }
            silt_core::time::parse_iso8601(s)
                .or_else(|| silt_core::time::parse_epoch_seconds(s.trim()))
                .map(Some)
        }
        _ => None,
    }
}

/// A value for an error message, cut to 80 characters.
fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 80 {
        let mut end = 80;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    } else {
        s
    }
}
