//! The columnar fast path of CSV and TSV: rows of text fields straight into one byte arena, typed
//! and built into Arrow arrays column by column when a batch is due.
//!
//! It gives exactly the batches the `Value` path of [`crate::sink::Sink`] gives for the same rows
//! (a `Value::Object` of strings per row, the time field converted, [`crate::sink::retype_text`]
//! per batch, then a `ColumnBatcher` that unifies each batch into the running schema): the same
//! schemas (field names, order, types, nullability, metadata), the same values, the same
//! `_unparsed` column for time values that do not parse. A property test
//! (`tests/csv_columns.rs`) checks that on random documents, and `tests/csv_bench.rs` times
//! both.
//!
//! How, per batch:
//! - a row costs one copy of its field bytes (already unquoted by `csv_core` and checked to be
//!   UTF-8 by the decoder) into `data` and one end offset per field: no `String` per field and
//!   no column name per row;
//! - at flush, each column is classified once with the rules of `retype_text` (`classify` and
//!   `merge`: empty -> null, booleans, integers, numbers, ISO 8601 times, else text; integers
//!   and numbers together -> numbers). Integers are parsed while classifying (the usual numeric
//!   column is read once); a column stops being classified at its first text value (text absorbs
//!   every other kind);
//! - the column's type in the batch is the running schema's type unified with the class's type
//!   (`unify_types`, what the `ColumnBatcher` does value by value: all the values of a class
//!   have the same type), and the array is built for it: directly for the usual cases, through
//!   `silt_readers::json::build::build_array` (the very code of the `Value` path) for a class
//!   whose type the running schema widened (integers in a column that earlier batches made text,
//!   say);
//! - the time column is converted value by value by `time::scalar_to_micros`, as
//!   `time::convert_field` does; a value that does not parse is null and its original goes to
//!   `_unparsed` through `attach_unparsed`, a text column added at the end of the schema.
//!
//! Why by hand: in `silt import csv` of RASP "netdata" rows (10 numeric and address columns), the
//! reader thread, which the import waits for, spent most of its time on per-field `String`s,
//! per-row copies of the column names, comparing those names while typing the batch, and the
//! allocations of all that. On 2M such rows `tests/csv_bench.rs` measured about 300k rows/s on
//! the `Value` path and about 3M rows/s on this one (same run, a loaded 2-core machine).
//!
//! Only where that equivalence is simple: the sink takes this path for CSV/TSV when there is no
//! `--schema` and no column (nor the time field) is named `_unparsed` (see
//! [`crate::sink::Sink::start_text_columns`]).
//!
//! Touches nothing but the rows it is given.

use std::sync::Arc;

use arrow::array::{
    new_null_array, ArrayRef, BooleanArray, BooleanBufferBuilder, Float64Array, Int64Array,
    NullArray, NullBufferBuilder, StringArray, TimestampMicrosecondArray,
};
use arrow::buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Schema, SchemaRef, TimeUnit as Unit};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use silt_core::schema::unify_types;
use silt_readers::json::build::build_array;
use silt_readers::json::columns::Scalar;
use silt_readers::json::{attach_unparsed, Value, UNPARSED_COLUMN};

use crate::sink::{classify, merge, TextType};
use crate::time::{self, TimeUnit};

/// One stream's rows of text fields, waiting for their batch, and its running schema.
pub(crate) struct TextColumns {
    names: Vec<String>,
    /// The column that is the time field, if one is.
    time_col: Option<usize>,
    time_field: Option<String>,
    unit: Option<TimeUnit>,
    /// The field bytes of every row, row after row.
    data: Vec<u8>,
    /// Field `j` (row `j / names.len()`, column `j % names.len()`) is
    /// `data[bounds[j]..bounds[j + 1]]`; starts as `[0]`.
    bounds: Vec<u32>,
    rows: usize,
    /// The running schema: what the `Value` path's batcher starts with (the first record's
    /// keys, types unknown, and the time field), then each batch's schema.
    schema: SchemaRef,
}

/// What a column's values are in one batch.
enum Class {
    /// Every value is empty.
    Null,
    Bool,
    /// Integers, parsed while classifying (0 for the empty ones).
    Int(Vec<i64>),
    Float,
    Time,
    Text,
}

impl TextColumns {
    /// For rows whose fields are `names` (unique, as the CSV header makes them), none named
    /// `_unparsed`. `time_field`: the sink's time field; it need not be a column (then it is a
    /// column of nulls first in the schema, as in the `Value` path).
    pub(crate) fn new(names: &[String], time_field: Option<&str>, unit: Option<TimeUnit>) -> Self {
        let time_col = time_field.and_then(|t| names.iter().position(|n| n == t));
        // `Sink::initial_schema` of the first record.
        let mut fields: Vec<Field> = Vec::with_capacity(names.len() + 1);
        if let (Some(t), None) = (time_field, time_col) {
            fields.push(Field::new(t, silt_core::time::timestamp_type(), true));
        }
        for (i, n) in names.iter().enumerate() {
            let dt = if Some(i) == time_col {
                silt_core::time::timestamp_type()
            } else {
                DataType::Null
            };
            fields.push(Field::new(n, dt, true));
        }
        Self {
            names: names.to_vec(),
            time_col,
            time_field: time_field.map(str::to_string),
            unit,
            data: Vec::new(),
            bounds: vec![0],
            rows: 0,
            schema: Arc::new(Schema::new(fields)),
        }
    }

    /// Rows buffered.
    pub(crate) fn len(&self) -> usize {
        self.rows
    }

    /// Buffers one row: `data` holds its fields one after the other, field `i` ending at
    /// `ends[i]`; one field per column, each valid UTF-8.
    pub(crate) fn push(&mut self, data: &[u8], ends: &[usize]) -> anyhow::Result<()> {
        debug_assert_eq!(ends.len(), self.names.len());
        let base = self.data.len();
        // Never reached: a batch is flushed at `MAX_BUFFERED_BYTES` of input, and a row is at
        // most `MAX_ROW_BYTES`.
        anyhow::ensure!(
            base + data.len() <= u32::MAX as usize,
            "a batch holds more than 4 GiB of CSV fields"
        );
        self.data.extend_from_slice(data);
        self.bounds.extend(ends.iter().map(|&e| (base + e) as u32));
        self.rows += 1;
        Ok(())
    }

    /// Builds a batch from the buffered rows, or `None` if there are none; `finish` adds the
    /// schema metadata, as for `ColumnBatcher::flush`.
    pub(crate) fn flush(
        &mut self,
        finish: &dyn Fn(Schema) -> Schema,
    ) -> Result<Option<RecordBatch>, ArrowError> {
        if self.rows == 0 {
            return Ok(None);
        }
        let n = self.rows;
        let built = self.build(finish);
        // The next batch starts empty (whatever happened to this one) and reuses the arena.
        self.rows = 0;
        self.data.clear();
        self.bounds.truncate(1);
        let (schema, arrays) = built?;
        self.schema = schema.clone();
        let opts = RecordBatchOptions::new().with_row_count(Some(n));
        RecordBatch::try_new_with_options(schema, arrays, &opts).map(Some)
    }

    /// The batch of the buffered rows: its schema (the running one unified with the rows') and
    /// its columns.
    fn build(
        &self,
        finish: &dyn Fn(Schema) -> Schema,
    ) -> Result<(SchemaRef, Vec<ArrayRef>), ArrowError> {
        let n = self.rows;
        let k = self.names.len();
        let (data, bounds) = (&self.data, &self.bounds);
        let cell = |r: usize, c: usize| {
            let j = r * k + c;
            &data[bounds[j] as usize..bounds[j + 1] as usize]
        };

        let mut fields: Vec<FieldRef> = self.schema.fields().iter().cloned().collect();
        let mut arrays: Vec<Option<ArrayRef>> = vec![None; fields.len()];
        let position = |fields: &[FieldRef], name: &str| {
            fields
                .iter()
                .position(|f| f.name() == name)
                .ok_or_else(|| ArrowError::SchemaError(format!("no field {name} (a bug in silt)")))
        };
        let mut unparsed: Vec<Option<String>> = Vec::new();
        for (c, name) in self.names.iter().enumerate() {
            let i = position(&fields, name)?;
            let array = if Some(c) == self.time_col {
                let (array, failed) = self.time_column(n, |r| cell(r, c), fields[i].data_type())?;
                if failed.iter().any(Option::is_some) {
                    unparsed = failed;
                }
                array
            } else {
                let class = classify_column(n, |r| cell(r, c))?;
                let f = &fields[i];
                if let Some(t) = class.data_type() {
                    // As `ColumnBatcher::unify_pending`: the field changes only when its type
                    // does, and keeps its metadata.
                    let u = unify_types(f.data_type(), &t);
                    if &u != f.data_type() {
                        let md = f.metadata().clone();
                        fields[i] = Arc::new(Field::new(f.name(), u, true).with_metadata(md));
                    }
                }
                build_column(n, |r| cell(r, c), class, fields[i].data_type())?
            };
            arrays[i] = Some(array);
        }
        if !unparsed.is_empty() {
            // A text column (its values are JSON objects), after the record's keys.
            let i = match fields.iter().position(|f| f.name() == UNPARSED_COLUMN) {
                Some(i) => {
                    let f = &fields[i];
                    let u = unify_types(f.data_type(), &DataType::Utf8);
                    if &u != f.data_type() {
                        let md = f.metadata().clone();
                        fields[i] = Arc::new(Field::new(f.name(), u, true).with_metadata(md));
                    }
                    i
                }
                None => {
                    fields.push(Arc::new(Field::new(UNPARSED_COLUMN, DataType::Utf8, true)));
                    arrays.push(None);
                    fields.len() - 1
                }
            };
            let vals: Vec<Option<Value>> =
                unparsed.into_iter().map(|u| u.map(Value::Str)).collect();
            let refs: Vec<Option<&Value>> = vals.iter().map(Option::as_ref).collect();
            arrays[i] = Some(build_array(&refs, fields[i].data_type())?);
        }
        let schema = Arc::new(finish(Schema::new_with_metadata(
            Fields::from(fields),
            self.schema.metadata().clone(),
        )));
        // Fields no value of this batch has (the time field when it is no column, `_unparsed`
        // of an earlier batch): nulls.
        let arrays: Vec<ArrayRef> = arrays
            .into_iter()
            .zip(schema.fields())
            .map(|(a, f)| a.unwrap_or_else(|| new_null_array(f.data_type(), n)))
            .collect();
        Ok((schema, arrays))
    }

    /// The time column: each value converted as `time::convert_field` does; those that do not
    /// parse are null and give their `_unparsed` text (`None` for the others).
    fn time_column<'a>(
        &self,
        n: usize,
        cell: impl Fn(usize) -> &'a [u8],
        dt: &DataType,
    ) -> Result<(ArrayRef, Vec<Option<String>>), ArrowError> {
        let tf = self.time_field.as_deref().unwrap_or_default();
        let mut vals: Vec<i64> = Vec::with_capacity(n);
        let mut nulls = NullBufferBuilder::new(n);
        let mut failed: Vec<Option<String>> = Vec::new();
        for r in 0..n {
            let s = text(cell(r))?;
            match time::scalar_to_micros(Scalar::Str(s), self.unit) {
                Ok(Some(m)) => {
                    vals.push(m);
                    nulls.append_non_null();
                }
                Ok(None) => {
                    vals.push(0);
                    nulls.append_null();
                }
                Err(()) => {
                    vals.push(0);
                    nulls.append_null();
                    let mut record = Value::Object(Vec::new());
                    attach_unparsed(&mut record, vec![(tf.to_string(), Value::Str(s.into()))]);
                    let json = match record.get(UNPARSED_COLUMN) {
                        Some(Value::Str(j)) => j.clone(),
                        _ => String::new(),
                    };
                    failed.resize(r, None);
                    failed.push(Some(json));
                }
            }
        }
        if !failed.is_empty() {
            failed.resize(n, None);
        }
        let DataType::Timestamp(Unit::Microsecond, tz) = dt else {
            return Err(ArrowError::SchemaError(format!(
                "time field {tf} is {dt} (a bug in silt)"
            )));
        };
        let a = TimestampMicrosecondArray::new(ScalarBuffer::from(vals), nulls.finish())
            .with_timezone_opt(tz.clone());
        Ok((Arc::new(a), failed))
    }
}

impl Class {
    /// The type the `Value` path infers for the column's values; `None` when all are null.
    fn data_type(&self) -> Option<DataType> {
        Some(match self {
            Class::Null => return None,
            Class::Bool => DataType::Boolean,
            Class::Int(_) => DataType::Int64,
            Class::Float => DataType::Float64,
            Class::Time => silt_core::time::timestamp_type(),
            Class::Text => DataType::Utf8,
        })
    }
}

fn text(b: &[u8]) -> Result<&str, ArrowError> {
    // The decoder checked every field before buffering it.
    std::str::from_utf8(b).map_err(|e| ArrowError::ComputeError(format!("CSV field: {e}")))
}

/// The integer of a value that `classify` types as an integer (an optional `-`, decimal digits
/// without a leading zero, in range), else `None`: exactly `classify(s) == Int` and
/// `s.parse::<i64>()`, without going through `str`.
fn text_int(b: &[u8]) -> Option<i64> {
    let (neg, digits) = match b.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, b),
    };
    if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
        return None;
    }
    if digits.len() <= 18 {
        // Cannot overflow.
        let mut v: i64 = 0;
        for &c in digits {
            let d = c.wrapping_sub(b'0');
            if d > 9 {
                return None;
            }
            v = v * 10 + i64::from(d);
        }
        return Some(if neg { -v } else { v });
    }
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// `merge` of `classify` over a column's values (`retype_text`'s first pass), the integers
/// parsed on the way while the column is integers.
fn classify_column<'a>(n: usize, cell: impl Fn(usize) -> &'a [u8]) -> Result<Class, ArrowError> {
    let mut t = TextType::Null;
    let mut ints: Vec<i64> = Vec::new();
    for r in 0..n {
        let b = cell(r);
        if b.is_empty() {
            ints.push(0);
            continue;
        }
        if matches!(t, TextType::Null | TextType::Int) {
            if let Some(i) = text_int(b) {
                if t == TextType::Null {
                    ints.reserve(n);
                }
                ints.push(i);
                t = TextType::Int;
                continue;
            }
        }
        t = merge(t, classify(text(b)?));
        if t == TextType::Text {
            // Text absorbs every other kind.
            break;
        }
    }
    Ok(match t {
        TextType::Null => Class::Null,
        TextType::Bool => Class::Bool,
        TextType::Int => Class::Int(ints),
        TextType::Float => Class::Float,
        TextType::Time => Class::Time,
        TextType::Text => Class::Text,
    })
}

/// The column's array of type `dt` (its class's type, or what the running schema made of it):
/// the values as `retype_text` converts them, built as the `Value` path builds them.
fn build_column<'a>(
    n: usize,
    cell: impl Fn(usize) -> &'a [u8],
    class: Class,
    dt: &DataType,
) -> Result<ArrayRef, ArrowError> {
    let validity = |nulls: &mut NullBufferBuilder, b: &[u8]| {
        if b.is_empty() {
            nulls.append_null();
        } else {
            nulls.append_non_null();
        }
    };
    let mut nulls = NullBufferBuilder::new(n);
    Ok(match (class, dt) {
        (Class::Null, DataType::Null) => Arc::new(NullArray::new(n)),
        (Class::Null, dt) => new_null_array(dt, n),
        (Class::Int(ints), DataType::Int64) => {
            (0..n).for_each(|r| validity(&mut nulls, cell(r)));
            Arc::new(Int64Array::new(ScalarBuffer::from(ints), nulls.finish()))
        }
        (Class::Int(ints), DataType::Float64) => {
            (0..n).for_each(|r| validity(&mut nulls, cell(r)));
            let f: Vec<f64> = ints.into_iter().map(|i| i as f64).collect();
            Arc::new(Float64Array::new(ScalarBuffer::from(f), nulls.finish()))
        }
        (Class::Float, DataType::Float64) => {
            let mut f: Vec<f64> = Vec::with_capacity(n);
            for r in 0..n {
                let b = cell(r);
                validity(&mut nulls, b);
                f.push(if b.is_empty() { 0.0 } else { parse_float(b)? });
            }
            Arc::new(Float64Array::new(ScalarBuffer::from(f), nulls.finish()))
        }
        (Class::Bool, DataType::Boolean) => {
            let mut v = BooleanBufferBuilder::new(n);
            for r in 0..n {
                let b = cell(r);
                validity(&mut nulls, b);
                v.append(b.eq_ignore_ascii_case(b"true"));
            }
            Arc::new(BooleanArray::new(v.finish(), nulls.finish()))
        }
        (Class::Time, DataType::Timestamp(Unit::Microsecond, tz)) => {
            let mut v: Vec<i64> = Vec::with_capacity(n);
            for r in 0..n {
                let b = cell(r);
                validity(&mut nulls, b);
                v.push(if b.is_empty() { 0 } else { parse_time(b)? });
            }
            let a = TimestampMicrosecondArray::new(ScalarBuffer::from(v), nulls.finish())
                .with_timezone_opt(tz.clone());
            Arc::new(a)
        }
        (Class::Text, DataType::Utf8) => {
            // The strings as written, copied once into an exactly sized buffer (as the
            // `ColumnBatcher`'s arena, shrunk to fit: the lake writer counts capacity).
            let len: usize = (0..n).map(|r| cell(r).len()).sum();
            if len > i32::MAX as usize {
                return Err(ArrowError::ComputeError(
                    "a CSV column holds more than 2 GiB of text in one batch".into(),
                ));
            }
            let mut values: Vec<u8> = Vec::with_capacity(len);
            let mut offsets: Vec<i32> = Vec::with_capacity(n + 1);
            offsets.push(0);
            for r in 0..n {
                let b = cell(r);
                validity(&mut nulls, b);
                values.extend_from_slice(b);
                offsets.push(values.len() as i32);
            }
            Arc::new(StringArray::try_new(
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                Buffer::from_vec(values),
                nulls.finish(),
            )?)
        }
        // A type the running schema widened the class to (text, mostly): the values as
        // `retype_text` makes them, built by the `Value` path's own code.
        (class, dt) => {
            let mut vals: Vec<Option<Value>> = Vec::with_capacity(n);
            for r in 0..n {
                let b = cell(r);
                vals.push(if b.is_empty() {
                    None
                } else {
                    Some(match &class {
                        Class::Null => Value::Null,
                        Class::Bool => Value::Bool(b.eq_ignore_ascii_case(b"true")),
                        Class::Int(ints) => Value::Int(ints[r]),
                        Class::Float => Value::Float(parse_float(b)?),
                        Class::Time => Value::Time(parse_time(b)?),
                        Class::Text => Value::Str(text(b)?.to_string()),
                    })
                });
            }
            let refs: Vec<Option<&Value>> = vals.iter().map(Option::as_ref).collect();
            build_array(&refs, dt)?
        }
    })
}

/// A value of a number column (`retype_text`: `s.parse::<f64>()`, which classifying proved
/// to work).
fn parse_float(b: &[u8]) -> Result<f64, ArrowError> {
    text(b)?
        .parse()
        .map_err(|e| ArrowError::ComputeError(format!("CSV number {b:?}: {e} (a bug in silt)")))
}

/// A value of a time column (`retype_text`: `parse_iso8601`, which classifying proved to
/// work).
fn parse_time(b: &[u8]) -> Result<i64, ArrowError> {
    silt_core::time::parse_iso8601(text(b)?)
        .ok_or_else(|| ArrowError::ComputeError(format!("CSV time {b:?} (a bug in silt)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text_int` is `classify` == integer and `parse::<i64>`.
    #[test]
    fn text_int_is_classify() {
        for s in [
            "0",
            "-0",
            "00",
            "-00",
            "01",
            "1",
            "-",
            "--1",
            "+1",
            "1.0",
            "12a",
            "123456789012345678",
            "1234567890123456789",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "1e5",
            "true",
            " 1",
            "1 ",
            "١",
        ] {
            let want = (classify(s) == TextType::Int).then(|| s.parse::<i64>().unwrap());
            assert_eq!(text_int(s.as_bytes()), want, "{s:?}");
        }
    }
}
