//! The part every generic reader shares: records ([`Value`] objects) in, batches and rejects out.
//!
//! A [`Sink`] decides the time field (see [`crate::time`]), converts it, and then either
//! - **infers** the schema (no `--schema`): records go to a `silt_readers::json::ColumnBatcher`,
//!   whose rules are the EVE rules (int+float -> float, scalar+list -> list, other conflicts ->
//!   text); JSON text ([`Sink::push_json`]) is parsed straight into its columns, without a
//!   `Value` per record; for text-only formats (CSV, TSV, LTSV) each batch's string values are
//!   first typed column by column with [`retype_text`] (CSV and TSV rows skip the `Value`s:
//!   [`Sink::start_text_columns`], [`crate::text_columns`]); or
//! - **conforms** every record to a target schema (`--schema`, or an Avro file's own schema)
//!   with [`crate::schema_file::conform_record`]; a record that does not fit is rejected with the
//!   field and the reason, and reading goes on.
//!
//! A batch is emitted every `batch_rows` records or [`MAX_BUFFERED_BYTES`] of input, and when the
//! decoder is flushed ([`Sink::flush`]), so memory is bounded whatever the input size. A sink owns
//! everything it holds (a decoder keeps it between the pieces it is fed). Schema metadata:
//! `silt.table`, and `silt.time_column` when there is a time field.
//!
//! Touches nothing but the records it is given and `out`.

use std::sync::Arc;

use anyhow::Context;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use silt_core::{meta, Emit, ReadOptions, Reject, SourceInfo, TableName};
use silt_readers::json::columns::Parsed;
use silt_readers::json::{attach_unparsed, build::build_batch, ColumnBatcher, Value};

use crate::lines::json_error_reason;
use crate::schema_file::{conform_record, ConformOptions, TargetSchema};
use crate::text_columns::TextColumns;
use crate::time::{self, TimeUnit};
use crate::LogOptions;

/// A batch is emitted when its records hold this much input.
pub const MAX_BUFFERED_BYTES: usize = 64 << 20;

/// Records to batches for one table; see the module documentation.
pub struct Sink {
    source: SourceInfo,
    table: TableName,
    batch_rows: usize,
    unit: Option<TimeUnit>,
    explicit_time: Option<String>,
    text: bool,
    time_field: Option<String>,
    decided: bool,
    /// Schema mode: the fields to validate against (with required-ness) and the emitted schema.
    target: Option<(Fields, SchemaRef)>,
    batcher: Option<ColumnBatcher>,
    /// Records waiting for the batch: under a schema, and for text formats (typed per batch).
    rows: Vec<Value>,
    /// The columnar path of CSV/TSV rows ([`Sink::start_text_columns`]), which replaces `rows`
    /// and `batcher` when it is taken.
    text_columns: Option<TextColumns>,
    bytes: usize,
    emitted: u64,
}

impl Sink {
    /// `text`: the format has only strings (CSV, TSV, LTSV). `file_schema`: a schema the input
    /// carries itself (Avro); `--schema` wins over it.
    pub fn new(
        source: &SourceInfo,
        table: TableName,
        ro: &ReadOptions,
        lo: &LogOptions,
        text: bool,
        file_schema: Option<TargetSchema>,
    ) -> anyhow::Result<Self> {
        let mut s = Self {
            source: source.clone(),
            table,
            batch_rows: ro.batch_rows.max(1),
            unit: lo.time_unit,
            explicit_time: lo.time_field.clone(),
            text,
            time_field: None,
            decided: false,
            target: None,
            batcher: None,
            rows: Vec::new(),
            text_columns: None,
            bytes: 0,
            emitted: 0,
        };
        let schema = lo.schema.as_deref().cloned().or(file_schema);
        if let Some(ts) = schema {
            let names = ts.fields.iter().map(|f| f.name().as_str());
            // A schema says which fields are timestamps: without a candidate name, the first
            // top-level timestamp field is the time field.
            let tf = time::choose_name(names, s.explicit_time.as_deref()).or_else(|| {
                ts.fields
                    .iter()
                    .find(|f| matches!(f.data_type(), DataType::Timestamp(_, _)))
                    .map(|f| f.name().clone())
            });
            let ts = match &tf {
                Some(name) => {
                    anyhow::ensure!(
                        ts.fields.iter().any(|f| f.name() == name),
                        "--time-field {name}: the schema has no such field"
                    );
                    ts.with_time_field(name)
                }
                None => ts,
            };
            let emit = s.finish_schema(ts.arrow_schema(), tf.as_deref());
            s.time_field = tf;
            s.decided = true;
            s.target = Some((ts.fields.clone(), Arc::new(emit)));
        }
        Ok(s)
    }

    /// The table the records go to.
    pub fn table(&self) -> &TableName {
        &self.table
    }

    /// Decides the time field from column names (CSV header) before the first record.
    pub fn decide_time_from_names<'n>(&mut self, names: impl Iterator<Item = &'n str> + Clone) {
        if self.decided {
            return;
        }
        self.time_field = time::choose_name(names, self.explicit_time.as_deref());
        self.decided = true;
    }

    /// Takes the columnar path for rows of text fields named `names` (CSV/TSV after the
    /// header and [`Sink::decide_time_from_names`], before any row): [`Sink::push_text_row`]
    /// then gives exactly the batches [`Sink::push`] of a `Value::Object` of `Value::Str`s per
    /// row gives (see [`crate::text_columns`]). `false`, and the `Value` path stays, where that
    /// equivalence is not simple: under a schema (`--schema`: records are conformed to it), for
    /// a format that is not text, once records were pushed, when the time field is not decided,
    /// and when a column or the time field is named `_unparsed` (the column where the original
    /// of a time that does not parse is kept).
    pub fn start_text_columns(&mut self, names: &[String]) -> bool {
        use silt_readers::json::UNPARSED_COLUMN;
        let simple = self.text
            && self.decided
            && self.target.is_none()
            && self.batcher.is_none()
            && self.rows.is_empty()
            && self.text_columns.is_none()
            && self.time_field.as_deref() != Some(UNPARSED_COLUMN)
            && names.iter().all(|n| n != UNPARSED_COLUMN);
        if simple {
            self.text_columns = Some(TextColumns::new(
                names,
                self.time_field.as_deref(),
                self.unit,
            ));
        }
        simple
    }

    /// Takes one row on the columnar path ([`Sink::start_text_columns`]): `data` holds its
    /// fields one after the other, field `i` ending at `ends[i]`, one field per name, each
    /// valid UTF-8; `bytes` is the row's input size.
    pub fn push_text_row(
        &mut self,
        data: &[u8],
        ends: &[usize],
        bytes: usize,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        let Some(tc) = self.text_columns.as_mut() else {
            anyhow::bail!("push_text_row without start_text_columns");
        };
        tc.push(data, ends)?;
        self.buffered(bytes, out)
    }

    fn finish_schema(&self, s: Schema, time_field: Option<&str>) -> Schema {
        let mut md = s.metadata().clone();
        md.insert(meta::TABLE.to_string(), self.table.to_string());
        match time_field {
            Some(t) if s.field_with_name(t).is_ok() => {
                md.insert(meta::TIME_COLUMN.to_string(), t.to_string());
            }
            _ => {
                md.remove(meta::TIME_COLUMN);
            }
        }
        s.with_metadata(md)
    }

    /// Rejects one line or record.
    pub fn reject(
        &self,
        out: &mut dyn Emit,
        line: u64,
        reason: String,
        raw: Vec<u8>,
    ) -> anyhow::Result<()> {
        out.reject(Reject {
            source: self.source.display.clone(),
            line,
            reason,
            raw,
            table: Some(self.table.clone()),
        })
    }

    /// Takes one record. `raw` gives the input bytes for a reject; `bytes` is the record's input
    /// size. Records that are not objects or do not fit the schema are rejected.
    pub fn push(
        &mut self,
        mut record: Value,
        line: u64,
        raw: &dyn Fn() -> Vec<u8>,
        bytes: usize,
        out: &mut dyn Emit,
    ) -> anyhow::Result<()> {
        if !matches!(record, Value::Object(_)) {
            let reason = format!("not an object/map but {}", kind(&record));
            return self.reject(out, line, reason, raw());
        }
        if !self.decided {
            self.time_field = time::choose(&record, self.explicit_time.as_deref());
            self.decided = true;
        }
        match &self.target {
            Some((fields, _)) => {
                let o = ConformOptions {
                    text: self.text,
                    unit: self.unit,
                };
                if let Err(reason) = conform_record(&mut record, fields, o) {
                    return self.reject(out, line, reason, raw());
                }
            }
            None => {
                if self.batcher.is_none() {
                    self.batcher = Some(ColumnBatcher::new(self.initial_schema(&record)));
                }
                if let Some(tf) = &self.time_field {
                    if let Some(orig) = time::convert_field(&mut record, tf, self.unit) {
                        attach_unparsed(&mut record, vec![(tf.clone(), orig)]);
                    }
                }
                if let Some(b) = self.batcher.as_mut().filter(|_| !self.text) {
                    b.push_value(record, bytes)?;
                    return self.buffered(bytes, out);
                }
            }
        }
        self.rows.push(record);
        self.buffered(bytes, out)
    }

    /// Takes one JSON text (an NDJSON line). When the schema is inferred, it is parsed straight
    /// into the batch's columns (`silt_readers::json::columns`); the first record, and every
    /// record under `--schema`, goes through [`Sink::push`] as a `Value`. Invalid JSON and values
    /// that are not objects are rejected with the same reasons either way.
    pub fn push_json(&mut self, text: &[u8], line: u64, out: &mut dyn Emit) -> anyhow::Result<()> {
        let Some(b) = self.columns() else {
            return match Value::from_slice(text) {
                Ok(v) => self.push(v, line, &|| text.to_vec(), text.len(), out),
                Err(e) => self.reject(out, line, json_error_reason(&e), text.to_vec()),
            };
        };
        match b.parse_json(text) {
            Ok(Parsed::Row) => self.commit_pending(text.len(), out),
            Ok(Parsed::Other(v)) => {
                let reason = format!("not an object/map but {}", kind(&v));
                self.reject(out, line, reason, text.to_vec())
            }
            Err(e) => self.reject(out, line, json_error_reason(&e), text.to_vec()),
        }
    }

    /// The batch's columns, for a reader that decodes a record straight into them (a pending
    /// row, then [`Sink::commit_pending`]). `None` until the first record has been pushed as a
    /// `Value` (it decides the time field and the initial schema), and always under `--schema`
    /// and for text formats: those records go through [`Sink::push`].
    pub fn columns(&mut self) -> Option<&mut ColumnBatcher> {
        let fast = self.decided && self.target.is_none() && !self.text;
        self.batcher.as_mut().filter(|_| fast)
    }

    /// Commits the pending row of [`Sink::columns`] (`bytes`: its input size) after converting
    /// its time field as [`Sink::push`] does.
    pub fn commit_pending(&mut self, bytes: usize, out: &mut dyn Emit) -> anyhow::Result<()> {
        let Some(b) = self.batcher.as_mut() else {
            anyhow::bail!("no pending record to commit");
        };
        if let Some(tf) = &self.time_field {
            match b.pending(tf).map(|v| time::scalar_to_micros(v, self.unit)) {
                None | Some(Ok(None)) => {}
                Some(Ok(Some(micros))) => b.set_pending_time(tf, micros),
                Some(Err(())) => {
                    // Rare: the record goes the `Value` way, which keeps the original value.
                    let mut record = b.take_pending();
                    if let Some(orig) = time::convert_field(&mut record, tf, self.unit) {
                        attach_unparsed(&mut record, vec![(tf.clone(), orig)]);
                    }
                    b.stage_value(record)?;
                }
            }
        }
        b.commit(bytes);
        self.buffered(bytes, out)
    }

    /// Counts a buffered record's input bytes and flushes when the batch is full.
    fn buffered(&mut self, bytes: usize, out: &mut dyn Emit) -> anyhow::Result<()> {
        self.bytes += bytes;
        let rows = self.rows.len()
            + self.batcher.as_ref().map_or(0, ColumnBatcher::len)
            + self.text_columns.as_ref().map_or(0, TextColumns::len);
        if rows >= self.batch_rows || self.bytes >= MAX_BUFFERED_BYTES {
            self.flush(out)?;
        }
        Ok(())
    }

    /// The running schema starts with the first record's keys in order (types unknown yet) and
    /// the time field as a timestamp, so the time column keeps its place and its type even when
    /// a whole batch has no parsable time.
    fn initial_schema(&self, first: &Value) -> Schema {
        let tf = self.time_field.as_deref();
        let mut fields: Vec<Field> = Vec::new();
        if let Some(t) = tf {
            if first.get(t).is_none() {
                fields.push(Field::new(t, silt_core::time::timestamp_type(), true));
            }
        }
        if let Some(o) = first.as_object() {
            for (k, _) in o {
                let dt = if Some(k.as_str()) == tf {
                    silt_core::time::timestamp_type()
                } else {
                    DataType::Null
                };
                fields.push(Field::new(k, dt, true));
            }
        }
        Schema::new(fields)
    }

    /// Emits the buffered records as one batch.
    pub fn flush(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        if self.text_columns.is_some() {
            return self.flush_text_columns(out);
        }
        if self.rows.is_empty() && self.batcher.as_ref().is_none_or(ColumnBatcher::is_empty) {
            return Ok(());
        }
        let mut rows = std::mem::take(&mut self.rows);
        let bytes = std::mem::take(&mut self.bytes);
        let batch = match &self.target {
            Some((_, schema)) => build_batch(&rows, schema)?.batch,
            None => {
                if self.text {
                    retype_text(&mut rows, self.time_field.as_deref());
                }
                let tf = self.time_field.clone();
                let b = self
                    .batcher
                    .get_or_insert_with(|| ColumnBatcher::new(Schema::empty()));
                for r in rows {
                    b.push_value(r, 0)?;
                }
                let finish = |s: Schema| {
                    let mut md = s.metadata().clone();
                    md.insert(meta::TABLE.to_string(), self.table.to_string());
                    if let Some(t) = tf.as_deref().filter(|t| s.field_with_name(t).is_ok()) {
                        md.insert(meta::TIME_COLUMN.to_string(), t.to_string());
                    }
                    s.with_metadata(md)
                };
                match b
                    .flush(&finish)
                    .with_context(|| format!("{}: building a batch", self.source.display))?
                {
                    Some(b) => b,
                    None => return Ok(()),
                }
            }
        };
        self.emitted += batch.num_rows() as u64;
        out.table_bytes(&self.table, bytes as u64);
        out.batch(&self.table, batch)
    }

    /// [`Sink::flush`] on the columnar path; the same schema metadata.
    fn flush_text_columns(&mut self, out: &mut dyn Emit) -> anyhow::Result<()> {
        let Some(tc) = self.text_columns.as_mut() else {
            return Ok(());
        };
        if tc.len() == 0 {
            return Ok(());
        }
        let bytes = std::mem::take(&mut self.bytes);
        let tf = self.time_field.as_deref();
        let table = &self.table;
        let finish = |s: Schema| {
            let mut md = s.metadata().clone();
            md.insert(meta::TABLE.to_string(), table.to_string());
            if let Some(t) = tf.filter(|t| s.field_with_name(t).is_ok()) {
                md.insert(meta::TIME_COLUMN.to_string(), t.to_string());
            }
            s.with_metadata(md)
        };
        let Some(batch) = tc
            .flush(&finish)
            .with_context(|| format!("{}: building a batch", self.source.display))?
        else {
            return Ok(());
        };
        self.emitted += batch.num_rows() as u64;
        out.table_bytes(&self.table, bytes as u64);
        out.batch(&self.table, batch)
    }

    /// Records emitted so far (in batches handed to `out`).
    pub fn emitted(&self) -> u64 {
        self.emitted
    }

    /// Emits what is left; returns the records emitted in all.
    pub fn finish(&mut self, out: &mut dyn Emit) -> anyhow::Result<u64> {
        self.flush(out)?;
        Ok(self.emitted)
    }
}

/// The JSON kind of a value, for reasons.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Int(_) | Value::UInt(_) | Value::Float(_) => "a number",
        Value::Str(_) | Value::Time(_) => "a string",
        Value::List(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextType {
    Null,
    Bool,
    Int,
    Float,
    Time,
    Text,
}

pub(crate) fn classify(s: &str) -> TextType {
    if s.is_empty() {
        return TextType::Null;
    }
    if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("false") {
        return TextType::Bool;
    }
    let b = s.as_bytes();
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    // Leading zeros ("007", zip codes) and "+1" stay text: a number would lose how they read.
    let leading_zero = digits.len() > 1 && digits[0] == b'0' && digits[1] != b'.';
    if !digits.is_empty() && digits[0].is_ascii_digit() && !leading_zero {
        if digits.iter().all(u8::is_ascii_digit) {
            if s.parse::<i64>().is_ok() {
                return TextType::Int;
            }
            return TextType::Text;
        }
        if digits
            .iter()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'-' | b'+'))
            && s.parse::<f64>().is_ok_and(f64::is_finite)
        {
            return TextType::Float;
        }
    }
    if b.len() >= 19 && silt_core::time::parse_iso8601(s).is_some() {
        return TextType::Time;
    }
    TextType::Text
}

pub(crate) fn merge(a: TextType, b: TextType) -> TextType {
    use TextType::*;
    match (a, b) {
        (x, y) if x == y => x,
        (Null, y) | (y, Null) => y,
        (Int, Float) | (Float, Int) => Float,
        _ => Text,
    }
}

/// Types the string values of a batch of text records, column by column: a column whose
/// non-empty values all read as booleans (`true`/`false`), integers, numbers or ISO 8601 times
/// becomes that type (integers and numbers together: numbers); empty strings are null; anything
/// else stays text exactly as written. The batcher then unifies batches by the usual rules.
pub fn retype_text(rows: &mut [Value], skip: Option<&str>) {
    let mut types: Vec<(String, TextType)> = Vec::new();
    for r in rows.iter() {
        let Some(o) = r.as_object() else { continue };
        for (i, (k, v)) in o.iter().enumerate() {
            let Value::Str(s) = v else { continue };
            let t = classify(s);
            let slot = match types.get(i) {
                Some((name, _)) if name == k => i,
                _ => match types.iter().position(|(n, _)| n == k) {
                    Some(p) => p,
                    None => {
                        types.push((k.clone(), TextType::Null));
                        types.len() - 1
                    }
                },
            };
            types[slot].1 = merge(types[slot].1, t);
        }
    }
    for r in rows.iter_mut() {
        let Some(o) = r.as_object_mut() else { continue };
        for (i, (k, v)) in o.iter_mut().enumerate() {
            if Some(k.as_str()) == skip {
                continue;
            }
            let Value::Str(s) = v else { continue };
            let t = match types.get(i) {
                Some((name, t)) if name == k => *t,
                _ => types
                    .iter()
                    .find(|(n, _)| n == k)
                    .map_or(TextType::Text, |(_, t)| *t),
            };
            let new = match t {
                _ if s.is_empty() => Some(Value::Null),
                TextType::Bool => Some(Value::Bool(s.eq_ignore_ascii_case("true"))),
                TextType::Int => s.parse().ok().map(Value::Int),
                TextType::Float => s.parse().ok().map(Value::Float),
                TextType::Time => silt_core::time::parse_iso8601(s).map(Value::Time),
                TextType::Null | TextType::Text => None,
            };
            if let Some(n) = new {
                *v = n;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use silt_core::CollectEmit;

    /// What a sink makes of `lines`, given as JSON text (`push_json`, the NDJSON path) or as
    /// parsed `Value`s (`push`, the path of MessagePack and the first record).
    fn through_sink(lines: &[&str], text: bool, lo: &LogOptions, batch_rows: usize) -> CollectEmit {
        let source = SourceInfo::stdin();
        let ro = ReadOptions { batch_rows };
        let mut out = CollectEmit::default();
        let table = TableName::new("json", "t");
        let mut sink = Sink::new(&source, table, &ro, lo, false, None).unwrap();
        for (i, l) in lines.iter().enumerate() {
            let n = i as u64 + 1;
            if text {
                sink.push_json(l.as_bytes(), n, &mut out).unwrap();
            } else {
                match Value::from_slice(l.as_bytes()) {
                    Ok(v) => sink
                        .push(v, n, &|| l.as_bytes().to_vec(), l.len(), &mut out)
                        .unwrap(),
                    Err(e) => sink
                        .reject(&mut out, n, json_error_reason(&e), l.as_bytes().to_vec())
                        .unwrap(),
                }
            }
        }
        sink.finish(&mut out).unwrap();
        out
    }

    #[test]
    fn json_text_and_values_give_the_same_batches() {
        let lines = [
            r#"{"log_time":1521911721123,"s":"a","n":1}"#,
            r#"{"s":"b","log_time":"2018-03-24T17:15:21.5+01:00","n":2.5}"#,
            r#"{"log_time":"yesterday","s":"c","_unparsed":"{\"x\":1}"}"#,
            r#"{"s":"d","log_time":null,"nested":{"a":[1,2]}}"#,
            r#"{"s":"e"}"#,
            r#"{"log_time":1521911722,"log_time":1521911723000,"s":5}"#,
            r#"{"log_time":true,"s":"f"}"#,
            r#"[1]"#,
            r#"{"log_time":1"#,
            r#"{"log_time":{"a":1},"s":"g"}"#,
        ];
        for unit in [None, Some(TimeUnit::Millis)] {
            for (explicit, rows) in [(None, 3), (Some("log_time"), 100), (Some("s"), 2)] {
                let lo = LogOptions {
                    time_field: explicit.map(str::to_string),
                    time_unit: unit,
                    ..LogOptions::default()
                };
                let a = through_sink(&lines, false, &lo, rows);
                let b = through_sink(&lines, true, &lo, rows);
                assert_eq!(a.batches, b.batches, "{explicit:?} {unit:?} {rows}");
                assert_eq!(format!("{:?}", a.rejects), format!("{:?}", b.rejects));
                assert_eq!(a.table_bytes, b.table_bytes);
                assert_eq!(a.rows("json.t"), 8);
            }
        }
    }

    #[test]
    fn text_columns_are_typed() {
        let mut rows: Vec<Value> = [
            r#"{"a":"1","b":"1.5","c":"true","d":"007","e":"","f":"2020-01-01T00:00:00Z","g":"x"}"#,
            r#"{"a":"2","b":"2","c":"FALSE","d":"8","e":"","f":"2020-01-02 00:00:00","g":"1"}"#,
        ]
        .iter()
        .map(|l| Value::from_slice(l.as_bytes()).unwrap())
        .collect();
        retype_text(&mut rows, None);
        assert_eq!(
            rows[1].to_json(),
            r#"{"a":2,"b":2.0,"c":false,"d":"8","e":null,"f":"2020-01-02T00:00:00.000000Z","g":"1"}"#
        );
        assert_eq!(rows[0].get("d"), Some(&Value::Str("007".into())));
        assert_eq!(rows[0].get("f"), Some(&Value::Time(1_577_836_800_000_000)));
    }
}
