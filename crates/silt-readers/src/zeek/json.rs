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
//! Why the parsing is hand-written: this is the hot path of a Zeek JSON import. Parsing each
//! line into a `serde_json::Value` (an `IndexMap` of owned `String`s, SipHash-ed, since the
//! workspace enables `preserve_order`) and then looking every key up in a SipHash map of columns
//! took about half of the reader's time in a perf profile of a 1M-record conn.log (map inserts
//! and rehashing, SipHash, allocations). A line is now walked with a serde visitor into a reused
//! list of (key, [`JVal`]) entries whose strings borrow from the line unless they had escapes,
//! and each key finds its column through a per-table hint (the column the k-th key of the
//! previous record had) before a foldhash map: about 3.5x the records per second on that file
//! (`json_throughput` in `tests/zeek_bench.rs`). The results are those of the `Value` version
//! (property tests in this module): a repeated key keeps its first position and its last value,
//! as in a `serde_json::Map`.
//!
//! Touches nothing but its input and `out`.

use std::borrow::Cow;
use std::fmt;
use std::io::BufRead;

use arrow::datatypes::DataType;
use hashbrown::HashMap;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Number, Value};
use silt_core::decode::{decode_slice, padding_reason, strip_bom, LineFramer, LineHandler};
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
    /// The table of the previous record (most streams hold one log).
    last_table: usize,
    fallback: String,
    line_no: u64,
    /// The entries of the current line; kept empty between lines to reuse its allocation.
    entries: Vec<Entry<'static>>,
}

/// A top-level key of a record and its value.
type Entry<'a> = (Cow<'a, str>, JVal<'a>);

/// A JSON value of a record, its strings borrowed from the line unless they had escapes.
/// Numbers stay `serde_json::Number`s so that every conversion is the one of `Value`; objects
/// (rare: Zeek flattens records into dotted names) are `serde_json` values themselves.
#[derive(Debug, Clone, PartialEq)]
enum JVal<'a> {
    Null,
    Bool(bool),
    Num(Number),
    Str(Cow<'a, str>),
    Arr(Vec<JVal<'a>>),
    /// Always a `Value::Object`.
    Obj(Box<Value>),
}

/// The builders of one log.
struct JTable {
    path: String,
    table: TableName,
    cols: Vec<JCol>,
    by_name: HashMap<String, usize>,
    rows: usize,
    bytes: usize,
    /// `hint[k]`: the column of the k-th key of the previous record (records of one log nearly
    /// always list their keys in the same order); checked by name before `by_name`.
    hint: Vec<usize>,
    /// Per entry of the current record: its column, or [`SKIP`].
    slots: Vec<usize>,
    /// Counts the records offered to [`JTable::push_row`]; a column whose `mark` equals it was
    /// already given a value by the current record.
    serial: u64,
}

/// An entry that gives no value to a column (`_path`, or a repeated key's later occurrence).
const SKIP: usize = usize::MAX;

struct JCol {
    name: String,
    kind: Kind,
    /// The last [`JTable::serial`] that gave this column a value.
    mark: u64,
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
        values: Vec<(usize, JVal<'static>)>,
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
            last_table: 0,
            fallback: super::fallback_log_name(source),
            line_no: 0,
            entries: Vec::new(),
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
        if self
            .tables
            .get(self.last_table)
            .is_some_and(|t| t.path == path)
        {
            return self.last_table;
        }
        let i = match self.by_path.get(path) {
            Some(&i) => i,
            None => {
                let i = self.tables.len();
                self.tables.push(JTable {
                    path: path.to_string(),
                    table: TableName::new("zeek", path),
                    cols: Vec::new(),
                    by_name: HashMap::new(),
                    rows: 0,
                    bytes: 0,
                    hint: Vec::new(),
                    slots: Vec::new(),
                    serial: 0,
                });
                self.by_path.insert(path.to_string(), i);
                i
            }
        };
        self.last_table = i;
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
        let mut entries = recycle(std::mem::take(&mut self.entries));
        let r = self.record(line, raw, raw_len, &mut entries, out);
        self.entries = recycle(entries);
        r
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

    fn padding(&mut self, lineno: u64, bytes: u64, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.line_no = lineno;
        self.reject(b"", padding_reason(bytes), None, out)
    }
}

impl JsonReader {
    /// Parses and stores the record `line` (trimmed; `raw` is the line for a reject).
    fn record<'a>(
        &mut self,
        line: &'a [u8],
        raw: &[u8],
        raw_len: usize,
        entries: &mut Vec<Entry<'a>>,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        if line[0] != b'{' {
            // Not an object (or not JSON): the reason as `serde_json` gives it.
            return match serde_json::from_slice::<Value>(line) {
                Ok(_) => self.reject(raw, "not a JSON object".into(), None, out),
                Err(e) => self.reject(raw, format!("invalid JSON: {e}"), None, out),
            };
        }
        if let Err(e) = parse_object(line, entries) {
            return self.reject(raw, format!("invalid JSON: {e}"), None, out);
        }
        // `_path` names the table; with a repeated key its last value counts.
        let ti = match entries.iter().rev().find(|(k, _)| k == "_path") {
            None | Some((_, JVal::Null)) => {
                let fallback = std::mem::take(&mut self.fallback);
                let ti = self.table_index(&fallback);
                self.fallback = fallback;
                ti
            }
            Some((_, JVal::Str(p))) if !p.is_empty() => self.table_index(p),
            Some((_, other)) => {
                let reason = format!(
                    "\"_path\" must be a non-empty string, got {}",
                    other.to_value()
                );
                return self.reject(raw, reason, None, out);
            }
        };
        let t = &mut self.tables[ti];
        match t.push_row(entries) {
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
}

/// An empty vector of entries with the allocation of `v` (the element types differ only in
/// lifetime, so the in-place `collect` keeps the buffer).
fn recycle<'b>(mut v: Vec<Entry<'_>>) -> Vec<Entry<'b>> {
    v.clear();
    v.into_iter().map(|_| unreachable!("cleared")).collect()
}

/// Parses the JSON object `line` into `entries` (cleared first), keys in their order, repeated
/// keys included; the error is the one `serde_json::from_slice` gives.
fn parse_object<'a>(line: &'a [u8], entries: &mut Vec<Entry<'a>>) -> serde_json::Result<()> {
    entries.clear();
    // Valid UTF-8 (nearly every line) is parsed as `str`: one check of the whole line is cheaper
    // than `serde_json`'s check of every string in it. Other lines are parsed as bytes, so their
    // error is exactly the one `serde_json::from_slice` gives.
    let r = match std::str::from_utf8(line) {
        Ok(text) => {
            let mut de = serde_json::Deserializer::from_str(text);
            ObjectSeed(entries)
                .deserialize(&mut de)
                .and_then(|()| de.end())
        }
        Err(_) => {
            let mut de = serde_json::Deserializer::from_slice(line);
            ObjectSeed(entries)
                .deserialize(&mut de)
                .and_then(|()| de.end())
        }
    };
    if r.is_err() {
        entries.clear();
    }
    r
}

/// The top-level object of a line, into a list of entries.
struct ObjectSeed<'v, 'a>(&'v mut Vec<Entry<'a>>);

impl<'a> DeserializeSeed<'a> for ObjectSeed<'_, 'a> {
    type Value = ();
    fn deserialize<D: Deserializer<'a>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'a> Visitor<'a> for ObjectSeed<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'a>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(k) = map.next_key_seed(KeySeed)? {
            let v = map.next_value_seed(ValSeed)?;
            self.0.push((k, v));
        }
        Ok(())
    }
}

/// An object key, borrowed when it has no escapes.
struct KeySeed;

impl<'a> DeserializeSeed<'a> for KeySeed {
    type Value = Cow<'a, str>;
    fn deserialize<D: Deserializer<'a>>(self, d: D) -> Result<Cow<'a, str>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'a> Visitor<'a> for KeySeed {
    type Value = Cow<'a, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, v: &'a str) -> Result<Cow<'a, str>, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Cow<'a, str>, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

/// Any JSON value as a [`JVal`] (the same values `serde_json::Value` would hold).
struct ValSeed;

impl<'a> DeserializeSeed<'a> for ValSeed {
    type Value = JVal<'a>;
    fn deserialize<D: Deserializer<'a>>(self, d: D) -> Result<JVal<'a>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'a> Visitor<'a> for ValSeed {
    type Value = JVal<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<JVal<'a>, E> {
        Ok(JVal::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<JVal<'a>, E> {
        Ok(JVal::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<JVal<'a>, E> {
        Ok(JVal::Num(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<JVal<'a>, E> {
        Ok(JVal::Num(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<JVal<'a>, E> {
        // As `serde_json::Value` does (the parser never gives a non-finite number).
        Ok(Number::from_f64(v).map_or(JVal::Null, JVal::Num))
    }

    fn visit_borrowed_str<E>(self, v: &'a str) -> Result<JVal<'a>, E> {
        Ok(JVal::Str(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<JVal<'a>, E> {
        Ok(JVal::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_seq<A: SeqAccess<'a>>(self, mut seq: A) -> Result<JVal<'a>, A::Error> {
        let mut v = Vec::new();
        while let Some(e) = seq.next_element_seed(ValSeed)? {
            v.push(e);
        }
        Ok(JVal::Arr(v))
    }

    fn visit_map<A: MapAccess<'a>>(self, map: A) -> Result<JVal<'a>, A::Error> {
        let v = Value::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
        Ok(JVal::Obj(Box::new(v)))
    }
}

impl JVal<'_> {
    fn is_null(&self) -> bool {
        matches!(self, JVal::Null)
    }

    /// The same value as a `serde_json::Value` (for messages and JSON text; not on the hot
    /// path).
    fn to_value(&self) -> Value {
        match self {
            JVal::Null => Value::Null,
            JVal::Bool(b) => Value::Bool(*b),
            JVal::Num(n) => Value::Number(n.clone()),
            JVal::Str(s) => Value::String(s.to_string()),
            JVal::Arr(a) => Value::Array(a.iter().map(JVal::to_value).collect()),
            JVal::Obj(o) => (**o).clone(),
        }
    }

    /// The value with its borrowed strings copied (kept across lines).
    fn into_static(self) -> JVal<'static> {
        match self {
            JVal::Null => JVal::Null,
            JVal::Bool(b) => JVal::Bool(b),
            JVal::Num(n) => JVal::Num(n),
            JVal::Str(s) => JVal::Str(Cow::Owned(s.into_owned())),
            JVal::Arr(a) => JVal::Arr(a.into_iter().map(JVal::into_static).collect()),
            JVal::Obj(o) => JVal::Obj(o),
        }
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
            mark: 0,
        });
        self.by_name.insert(name.to_string(), i);
        i
    }

    /// The column of `key`, the `k`-th key of the record.
    #[inline]
    fn lookup(&mut self, k: usize, key: &str) -> usize {
        if let Some(&ci) = self.hint.get(k) {
            if self.cols.get(ci).is_some_and(|c| c.name == key) {
                return ci;
            }
        }
        let ci = self.column(key);
        if self.hint.len() <= k {
            self.hint.resize(k + 1, SKIP);
        }
        self.hint[k] = ci;
        ci
    }

    /// Appends one record (its entries in order, `_path` included), or leaves the table as it
    /// was and says why not. A repeated key counts once, at its first position with its last
    /// value (as in a `serde_json::Map`).
    fn push_row(&mut self, entries: &mut [Entry<'_>]) -> Result<(), String> {
        let row = self.rows;
        let ncols = self.cols.len();
        self.serial += 1;
        let serial = self.serial;
        let mut slots = std::mem::take(&mut self.slots);
        slots.clear();
        for k in 0..entries.len() {
            let key: &str = &entries[k].0;
            if key == "_path" {
                slots.push(SKIP);
                continue;
            }
            let ci = self.lookup(k, key);
            let c = &mut self.cols[ci];
            if c.mark == serial {
                // A repeated key: its value replaces the one at the first occurrence.
                let first = slots
                    .iter()
                    .position(|&s| s == ci)
                    .expect("a marked column has a slot");
                entries[first].1 = std::mem::replace(&mut entries[k].1, JVal::Null);
                slots.push(SKIP);
            } else {
                c.mark = serial;
                slots.push(ci);
            }
        }
        let mut err = None;
        let mut scratch = Vec::new();
        for (&ci, (k, v)) in slots.iter().zip(entries.iter_mut()) {
            if ci == SKIP {
                continue;
            }
            match &mut self.cols[ci].kind {
                Kind::Typed {
                    zt,
                    col,
                    source_type,
                    ..
                } => {
                    if v.is_null() {
                        col.push_null();
                    } else if let Err(e) = push_json(col, zt, v, false, &mut scratch) {
                        let k: &str = k;
                        err = Some(format!("field {k:?} ({source_type}): {e}"));
                        break;
                    }
                }
                Kind::Inferred { values, .. } => {
                    if !v.is_null() {
                        values.push((row, std::mem::replace(v, JVal::Null).into_static()));
                    }
                }
            }
        }
        self.slots = slots;
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
        // Fields the record left out are null (a column was given a value iff it is marked).
        for c in &mut self.cols {
            if let Kind::Typed { col, .. } = &mut c.kind {
                if c.mark != serial {
                    col.push_null();
                }
                debug_assert_eq!(col.len(), row + 1);
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
fn value_type(v: &JVal) -> DataType {
    match v {
        JVal::Null => DataType::Null,
        JVal::Bool(_) => DataType::Boolean,
        JVal::Num(n) => {
            if n.is_i64() {
                DataType::Int64
            } else if n.is_u64() {
                DataType::UInt64
            } else {
                DataType::Float64
            }
        }
        JVal::Str(_) | JVal::Obj(_) => DataType::Utf8,
        JVal::Arr(a) => {
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
    v: &JVal,
    lenient: bool,
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    if let ZType::List(inner) = t {
        let item = col.list_item();
        match v {
            JVal::Arr(a) => {
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
        (ZType::String, JVal::Str(s)) => {
            canon_into(s.as_bytes(), col.str_bytes());
            col.str_commit();
        }
        (ZType::String, JVal::Num(_) | JVal::Bool(_)) => {
            col.push_str(v.to_value().to_string().as_bytes());
        }
        (ZType::String, JVal::Arr(_) | JVal::Obj(_)) if lenient => {
            scratch.clear();
            scratch.extend_from_slice(v.to_value().to_string().as_bytes());
            canon_into(scratch, col.str_bytes());
            col.str_commit();
        }
        (ZType::Bool, JVal::Bool(b)) => col.push_bool(*b),
        (ZType::Count, JVal::Num(n)) => {
            match n.as_u64().or_else(|| integral_f64(n).and_then(f_to_u64)) {
                Some(x) => col.push_i64(count_value(x)?),
                None => return Err(format!("expected a non-negative integer, got {n}")),
            }
        }
        (ZType::Int, JVal::Num(n)) => {
            match n.as_i64().or_else(|| integral_f64(n).and_then(f_to_i64)) {
                Some(x) => col.push_i64(x),
                None => return Err(format!("expected a 64-bit integer, got {n}")),
            }
        }
        (ZType::Double, JVal::Num(n)) => match n.as_f64() {
            Some(x) => col.push_f64(x),
            None => return Err(format!("expected a number, got {n}")),
        },
        // Zeek's JSON writer prints intervals with full double precision; round to the
        // microsecond as its TSV writer does (`%.6f`), so both forms store the same value.
        (ZType::Interval, JVal::Num(n)) => match n
            .as_f64()
            .and_then(silt_core::time::float_seconds_to_micros)
        {
            Some(us) => col.push_i64(us),
            None => return Err(format!("expected an interval in seconds, got {n}")),
        },
        (ZType::Port, JVal::Num(n)) => match n.as_u64().filter(|&p| p <= 65535) {
            Some(p) => col.push_u16(p as u16),
            None => return Err(format!("expected a port number 0..65535, got {n}")),
        },
        (ZType::Time, v) => match json_time(v) {
            Some(Some(us)) => col.push_i64(us),
            Some(None) => col.push_null(),
            None => return Err(format!("invalid time {}", shown(v))),
        },
        (ZType::Addr, JVal::Str(s)) => {
            if addr_into(s.as_bytes(), col.str_bytes()) {
                col.str_commit();
            } else {
                col.str_abort();
                return Err(format!("invalid addr {}", shown(v)));
            }
        }
        (ZType::Subnet, JVal::Str(s)) => match silt_core::addr::canonical_subnet(s) {
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
fn json_time(v: &JVal) -> Option<Option<i64>> {
    match v {
        JVal::Num(n) => {
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
        JVal::Str(s) => {
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
fn shown(v: &JVal) -> String {
    let s = v.to_value().to_string();
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use silt_core::CollectEmit;

    /// `parse_object` as a `serde_json::Map` would hold it: a repeated key keeps its first
    /// position and takes its last value.
    fn parsed_as_map(line: &[u8]) -> Result<Vec<(String, Value)>, String> {
        let mut entries = Vec::new();
        parse_object(line, &mut entries).map_err(|e| e.to_string())?;
        let mut out: Vec<(String, Value)> = Vec::new();
        for (k, v) in &entries {
            match out.iter_mut().find(|(o, _)| o == k) {
                Some(slot) => slot.1 = v.to_value(),
                None => out.push((k.to_string(), v.to_value())),
            }
        }
        Ok(out)
    }

    /// What the decoder did before `parse_object`: the whole line as a `serde_json::Value`.
    fn reference(line: &[u8]) -> Result<Vec<(String, Value)>, String> {
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(m)) => Ok(m.into_iter().collect()),
            Ok(_) => panic!("test lines start with {{"),
            Err(e) => Err(e.to_string()),
        }
    }

    fn json_str(s: &str) -> String {
        serde_json::to_string(s).unwrap()
    }

    fn key_text() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("\"ts\"".to_string()),
            Just("\"uid\"".to_string()),
            Just("\"_path\"".to_string()),
            Just("\"id.orig_p\"".to_string()),
            Just("\"x\"".to_string()),
            Just("\"\"".to_string()),
            // Escaped spellings of the names above.
            Just(r#""t\u0073""#.to_string()),
            Just(r#""\u005fpath""#.to_string()),
            Just(r#""x\n""#.to_string()),
            any::<String>().prop_map(|s| json_str(&s)),
        ]
    }

    fn value_text() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            Just("null".to_string()),
            Just("true".to_string()),
            Just("false".to_string()),
            any::<i64>().prop_map(|i| i.to_string()),
            any::<u64>().prop_map(|u| u.to_string()),
            // Only numbers `serde_json` reads back exactly (without its `float_roundtrip`
            // feature it may miss by one unit in the last place, and the decoder test below
            // compares a line with its value written out again).
            any::<f64>()
                .prop_filter("finite, read back exactly", |f| {
                    let back = |t: &str| serde_json::from_str::<f64>(t).ok();
                    f.is_finite()
                        && back(&format!("{f:e}")) == Some(*f)
                        && back(&serde_json::to_string(f).unwrap()) == Some(*f)
                })
                .prop_map(|f| format!("{f:e}")),
            (0u64..2_000_000_000, 0u32..1_000_000).prop_map(|(a, b)| format!("{a}.{b:06}")),
            Just("1e400".to_string()),
            Just("-0".to_string()),
            Just("18446744073709551616".to_string()),
            any::<String>().prop_map(|s| json_str(&s)),
            "[a-z0-9.:/ -]{0,12}".prop_map(|s| format!("\"{s}\"")),
            Just(r#""A\u0042\n\ud83d\ude00\u0001""#.to_string()),
            Just(r#""\ud800""#.to_string()),
            Just("\"2011-08-15T03:36:16.748830Z\"".to_string()),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4)
                    .prop_map(|v| format!("[{}]", v.join(","))),
                prop::collection::vec((key_text(), inner), 0..4).prop_map(|v| object(&v)),
            ]
        })
    }

    fn object(entries: &[(String, String)]) -> String {
        let body: Vec<String> = entries.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        format!("{{ {} }}", body.join(","))
    }

    /// A line starting with `{`: an object, or one cut short or given a byte that is not UTF-8.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec((key_text(), value_text()), 0..8),
            0usize..4,
            any::<prop::sample::Index>(),
        )
            .prop_map(|(entries, damage, at)| {
                let mut b = object(&entries).into_bytes();
                let i = at.index(b.len() - 1) + 1;
                match damage {
                    0 => b.truncate(i),
                    1 => b[i - 1] = 0xff,
                    2 => b.extend_from_slice(b" x"),
                    _ => {}
                }
                b
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The borrowed parse holds what `serde_json::Value` holds, or fails with its error.
        #[test]
        fn parse_matches_serde_json_value(line in line()) {
            prop_assert_eq!(parsed_as_map(&line), reference(&line));
        }
    }

    #[test]
    fn parse_examples() {
        let cases: &[&[u8]] = &[
            br#"{"a":1,"b":2,"a":3}"#,
            br#"{"a":{"k":1,"k":2},"a\u0062":"\u00e9","":[1,[2,{}]],"n":-0}"#,
            br#"{"a":1,}"#,
            br#"{"a" 1}"#,
            b"{\"a\":\"\xff\"}",
            br#"{"a":1} {"#,
            br#"{"a":1e400}"#,
        ];
        for c in cases {
            assert_eq!(
                parsed_as_map(c),
                reference(c),
                "{}",
                String::from_utf8_lossy(c)
            );
        }
        // Keys and strings without escapes are borrowed from the line.
        let line = br#"{"uid":"C1","u\u0069d":"C\n2"}"#;
        let mut entries = Vec::new();
        parse_object(line, &mut entries).unwrap();
        assert!(matches!(
            &entries[0],
            (Cow::Borrowed("uid"), JVal::Str(Cow::Borrowed("C1")))
        ));
        assert!(matches!(&entries[1].0, Cow::Owned(k) if k == "uid"));
        assert_eq!(entries[1].1, JVal::Str(Cow::Owned("C\n2".into())));
    }

    #[test]
    fn recycling_keeps_the_allocation() {
        let mut v: Vec<Entry<'static>> = Vec::with_capacity(32);
        v.push((Cow::Borrowed("a"), JVal::Null));
        let p = v.as_ptr() as usize;
        let line = String::from("x");
        let mut w: Vec<Entry<'_>> = recycle(v);
        w.push((Cow::Borrowed(&line), JVal::Bool(true)));
        assert!(w.capacity() >= 32);
        let back: Vec<Entry<'static>> = recycle(w);
        assert!(back.is_empty() && back.capacity() >= 32);
        assert_eq!(back.as_ptr() as usize, p);
    }

    /// A record of a conn-like log, with keys in any order, repeated or escaped, `_path`
    /// anywhere (or missing, or wrong), values mostly of their field's type.
    fn record() -> impl Strategy<Value = String> {
        let field = prop_oneof![
            (0u64..2_000_000_000, 0u32..1_000_000)
                .prop_map(|(a, b)| ("\"ts\"".to_string(), format!("{a}.{b:06}"))),
            Just((
                "\"ts\"".to_string(),
                "\"2011-08-15T03:36:16.748830Z\"".to_string()
            )),
            "[A-Za-z0-9]{1,6}".prop_map(|u| ("\"uid\"".to_string(), format!("\"C{u}\""))),
            "[A-Za-z0-9]{1,6}".prop_map(|u| (r#""u\u0069d""#.to_string(), format!("\"D{u}\""))),
            (0u32..70_000).prop_map(|p| ("\"id.orig_p\"".to_string(), p.to_string())),
            (0u8..=255).prop_map(|a| ("\"id.orig_h\"".to_string(), format!("\"10.0.0.{a}\""))),
            any::<u32>().prop_map(|n| ("\"orig_bytes\"".to_string(), n.to_string())),
            (0u32..100_000)
                .prop_map(|n| ("\"duration\"".to_string(), format!("{}", n as f64 / 977.0))),
            any::<bool>().prop_map(|b| ("\"local_orig\"".to_string(), b.to_string())),
            prop::collection::vec("[a-z]{0,3}", 0..3).prop_map(|v| (
                "\"tunnel_parents\"".to_string(),
                serde_json::to_string(&v).unwrap()
            )),
            prop_oneof![Just("conn"), Just("dns"), Just("x")]
                .prop_map(|p| ("\"_path\"".to_string(), format!("\"{p}\""))),
            prop_oneof![Just("5"), Just("\"\""), Just("null"), Just("[\"conn\"]")]
                .prop_map(|p| ("\"_path\"".to_string(), p.to_string())),
            (
                prop_oneof![
                    Just("\"x\""),
                    Just("\"y\""),
                    Just("\"z.w\""),
                    Just(r#""\u0078""#)
                ],
                value_text()
            )
                .prop_map(|(k, v)| (k.to_string(), v)),
            (key_text(), value_text()),
            key_text().prop_map(|k| (k, "null".to_string())),
        ];
        prop::collection::vec(field, 0..10).prop_map(|f| object(&f))
    }

    /// A line as the decoder before this one saw it: the `serde_json::Value` it parses to (a
    /// repeated key merged, escapes resolved), written out again with `_path` first.
    fn canonical(line: &str) -> String {
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(mut m)) => {
                let mut out = serde_json::Map::new();
                if let Some(p) = m.shift_remove("_path") {
                    out.insert("_path".into(), p);
                }
                out.extend(m);
                Value::Object(out).to_string()
            }
            _ => line.to_string(),
        }
    }

    fn decode(data: &str, batch_rows: usize) -> CollectEmit {
        let mut out = CollectEmit::default();
        let src = SourceInfo {
            display: "conn.json".into(),
            file_name: Some("conn.json".into()),
        };
        read_slice(data.as_bytes(), &src, &ReadOptions { batch_rows }, &mut out).unwrap();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]
        /// Repeated and escaped keys, keys in varying order and `_path` anywhere give what the
        /// same records give written out plainly: same batches, same rejects and reasons.
        #[test]
        fn records_decode_like_their_canonical_form(
            lines in prop::collection::vec(
                prop_oneof![8 => record(), 1 => line().prop_map(|b| String::from_utf8_lossy(&b).into_owned())],
                1..24,
            ),
            batch_rows in 1usize..6,
        ) {
            let data = lines.join("\n");
            let plain: Vec<String> = lines.iter().map(|l| canonical(l)).collect();
            let got = decode(&data, batch_rows);
            let want = decode(&plain.join("\n"), batch_rows);
            prop_assert_eq!(&got.batches, &want.batches);
            let rejects = |o: &CollectEmit| -> Vec<(u64, String, Option<TableName>)> {
                o.rejects.iter().map(|r| (r.line, r.reason.clone(), r.table.clone())).collect()
            };
            prop_assert_eq!(rejects(&got), rejects(&want));
        }
    }
}
