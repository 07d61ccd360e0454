//! Building Arrow arrays from [`Value`]s for a target type that inference produced.
//!
//! Column by column: a struct's rows are split into one value slice per child field (each
//! object's entries are walked once), a list's elements are flattened into one slice, then each
//! slice is built recursively. Hand-written rather than `arrow_json`'s decoder because silt's
//! values carry exact `u64`s and pre-parsed timestamps, and because conflicting values must be
//! rendered by the unification rules (a number in a text column becomes its JSON text, a single
//! value in a list column a one-element list) where `arrow_json` would fail the whole batch.
//!
//! How a value meets its target type (the target always holds the value when it came from
//! [`super::infer`]):
//! - `null` and absent keys are null everywhere; `{}` is a struct whose fields are all null when
//!   the target is a struct, the text `{}` when it is text, and null otherwise;
//! - numbers convert to the target number type (`Float64` from integers may round above 2^53);
//! - text targets take strings as they are, other scalars as their JSON text, times as RFC 3339
//!   (`2017-06-19T12:01:38.082123Z`), objects and arrays as JSON text;
//! - list targets take arrays element by element and any other value as a one-element list.
//!
//! A value that does not fit (which inference rules out) becomes null and is counted in
//! [`Built::mismatches`] so tests can prove it never happens. Target types inference never
//! produces (`Int32`, `LargeUtf8`, ...) are built as the values' own inferred type and then
//! reshaped by [`silt_core::schema::conform_array`].
//!
//! Touches nothing but the values it is given.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    new_null_array, ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, ListArray, NullArray,
    StringBuilder, StructArray, TimestampMicrosecondBuilder, UInt64Builder,
};
use arrow::buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Fields, SchemaRef, TimeUnit};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::infer::unify_value;
use super::value::{format_micros, Value};

/// A batch and the number of values that did not fit their column (always 0 unless inference
/// and building disagree).
#[derive(Debug)]
pub struct Built {
    pub batch: RecordBatch,
    pub mismatches: u64,
}

/// Builds a batch of `schema` from rows that are objects (anything else becomes an all-null row).
pub fn build_batch(rows: &[Value], schema: &SchemaRef) -> Result<Built, ArrowError> {
    let vals: Vec<Option<&Value>> = rows.iter().map(Some).collect();
    let mut cx = Ctx::default();
    let (children, _valid) = split_struct(&vals, schema.fields(), &mut cx);
    let cols = schema
        .fields()
        .iter()
        .zip(children)
        .map(|(f, c)| build_array_inner(&c, f.data_type(), &mut cx))
        .collect::<Result<Vec<_>, _>>()?;
    let opts = RecordBatchOptions::new().with_row_count(Some(rows.len()));
    let batch = RecordBatch::try_new_with_options(schema.clone(), cols, &opts)?;
    Ok(Built {
        batch,
        mismatches: cx.mismatches,
    })
}

#[derive(Default)]
struct Ctx {
    mismatches: u64,
}

fn is_null(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

/// Builds one array of type `dt` from `vals` (`None` = absent = null).
pub fn build_array(vals: &[Option<&Value>], dt: &DataType) -> Result<ArrayRef, ArrowError> {
    build_array_counted(vals, dt, &mut 0)
}

/// [`build_array`] that adds the values that did not fit to `mismatches`.
pub(crate) fn build_array_counted(
    vals: &[Option<&Value>],
    dt: &DataType,
    mismatches: &mut u64,
) -> Result<ArrayRef, ArrowError> {
    let mut cx = Ctx::default();
    let a = build_array_inner(vals, dt, &mut cx)?;
    *mismatches += cx.mismatches;
    Ok(a)
}

fn build_array_inner(
    vals: &[Option<&Value>],
    dt: &DataType,
    cx: &mut Ctx,
) -> Result<ArrayRef, ArrowError> {
    let n = vals.len();
    Ok(match dt {
        DataType::Null => {
            cx.mismatches += vals
                .iter()
                .filter(|v| v.is_some_and(|v| !v.is_void()))
                .count() as u64;
            Arc::new(NullArray::new(n))
        }
        DataType::Boolean => {
            let mut b = BooleanBuilder::with_capacity(n);
            for v in vals {
                match v {
                    Some(Value::Bool(x)) => b.append_value(*x),
                    other => null_or_mismatch(*other, cx, || b.append_null()),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Int64 => {
            let mut b = Int64Builder::with_capacity(n);
            for v in vals {
                match v {
                    Some(Value::Int(x)) => b.append_value(*x),
                    Some(Value::UInt(x)) if i64::try_from(*x).is_ok() => b.append_value(*x as i64),
                    other => null_or_mismatch(*other, cx, || b.append_null()),
                }
            }
            Arc::new(b.finish())
        }
        DataType::UInt64 => {
            let mut b = UInt64Builder::with_capacity(n);
            for v in vals {
                match v {
                    Some(Value::UInt(x)) => b.append_value(*x),
                    Some(Value::Int(x)) if *x >= 0 => b.append_value(*x as u64),
                    other => null_or_mismatch(*other, cx, || b.append_null()),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Float64 => {
            let mut b = Float64Builder::with_capacity(n);
            for v in vals {
                match v {
                    Some(Value::Float(x)) => b.append_value(*x),
                    Some(Value::Int(x)) => b.append_value(*x as f64),
                    Some(Value::UInt(x)) => b.append_value(*x as f64),
                    other => null_or_mismatch(*other, cx, || b.append_null()),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Timestamp(TimeUnit::Microsecond, tz) => {
            let mut b = TimestampMicrosecondBuilder::with_capacity(n).with_timezone_opt(tz.clone());
            for v in vals {
                match v {
                    Some(Value::Time(x)) => b.append_value(*x),
                    other => null_or_mismatch(*other, cx, || b.append_null()),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Utf8 => {
            // Sized from the strings themselves: a guess that is too small makes the value buffer
            // double several times for long values (218-byte log lines: four copies of every byte
            // and fresh pages for each, which showed in conversion profiles).
            let bytes: usize = vals
                .iter()
                .map(|v| match v {
                    Some(Value::Str(s)) => s.len(),
                    None | Some(Value::Null) => 0,
                    Some(_) => 32,
                })
                .sum();
            let mut b = StringBuilder::with_capacity(n, bytes);
            for v in vals {
                match v {
                    None | Some(Value::Null) => b.append_null(),
                    Some(Value::Str(s)) => b.append_value(s),
                    Some(Value::Time(t)) => b.append_value(format_micros(*t)),
                    // Rule 6: everything else is kept as its JSON text.
                    Some(other) => b.append_value(other.to_json()),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Struct(fields) => {
            let (children, valid) = split_struct(vals, fields, cx);
            let cols = fields
                .iter()
                .zip(children)
                .map(|(f, c)| build_array_inner(&c, f.data_type(), cx))
                .collect::<Result<Vec<_>, _>>()?;
            let nulls = (valid.iter().any(|v| !v)).then(|| NullBuffer::from(valid));
            if fields.is_empty() {
                Arc::new(StructArray::new_empty_fields(n, nulls))
            } else {
                Arc::new(StructArray::try_new(fields.clone(), cols, nulls)?)
            }
        }
        DataType::List(item) => {
            let mut offsets: Vec<i32> = Vec::with_capacity(n + 1);
            offsets.push(0);
            let mut valid = Vec::with_capacity(n);
            let mut elems: Vec<Option<&Value>> = Vec::new();
            for v in vals {
                match v {
                    None | Some(Value::Null) => valid.push(false),
                    Some(v) if v.is_void() => valid.push(false),
                    Some(Value::List(items)) => {
                        valid.push(true);
                        elems.extend(items.iter().map(Some));
                    }
                    // Rule 5: a single value is a one-element list.
                    Some(single) => {
                        valid.push(true);
                        elems.push(Some(single));
                    }
                }
                let end = i32::try_from(elems.len()).map_err(|_| {
                    ArrowError::ComputeError("list column holds more than 2^31 elements".into())
                })?;
                offsets.push(end);
            }
            let values = build_array_inner(&elems, item.data_type(), cx)?;
            let nulls = (valid.iter().any(|v| !v)).then(|| NullBuffer::from(valid));
            Arc::new(ListArray::try_new(
                item.clone(),
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                values,
                nulls,
            )?)
        }
        other => {
            // A type inference never produces (a caller-supplied schema): build the values' own
            // type and reshape it by the unification rules.
            let mut own = DataType::Null;
            for v in vals.iter().flatten() {
                unify_value(&mut own, v);
            }
            if own == DataType::Null {
                return Ok(new_null_array(other, n));
            }
            let a = build_array_inner(vals, &own, cx)?;
            silt_core::schema::conform_array(&a, other)?
        }
    })
}

fn null_or_mismatch(v: Option<&Value>, cx: &mut Ctx, mut append_null: impl FnMut()) {
    if !is_null(v) && !v.is_some_and(Value::is_void) {
        cx.mismatches += 1;
    }
    append_null();
}

/// Splits struct rows into one value slice per field, and the rows' validity.
fn split_struct<'a>(
    vals: &[Option<&'a Value>],
    fields: &Fields,
    cx: &mut Ctx,
) -> (Vec<Vec<Option<&'a Value>>>, Vec<bool>) {
    let n = vals.len();
    let mut children: Vec<Vec<Option<&'a Value>>> = vec![vec![None; n]; fields.len()];
    let mut valid = Vec::with_capacity(n);
    let index: HashMap<&str, usize> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name().as_str(), i))
        .collect();
    for (row, v) in vals.iter().enumerate() {
        match v {
            Some(Value::Object(entries)) => {
                valid.push(true);
                let mut next = 0;
                for (k, v) in entries {
                    // Keys usually come in field order; try the next field before hashing.
                    let idx = match fields.get(next) {
                        Some(f) if f.name() == k => Some(next),
                        _ => index.get(k.as_str()).copied(),
                    };
                    match idx {
                        Some(i) => {
                            children[i][row] = Some(v);
                            next = i + 1;
                        }
                        None => cx.mismatches += 1,
                    }
                }
            }
            None | Some(Value::Null) => valid.push(false),
            Some(_) => {
                cx.mismatches += 1;
                valid.push(false);
            }
        }
    }
    (children, valid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::{Field, Float64Type, Int64Type, Schema};

    use crate::json::infer::infer_fields;

    fn rows(lines: &[&str]) -> Vec<Value> {
        lines
            .iter()
            .map(|l| Value::from_slice(l.as_bytes()).unwrap())
            .collect()
    }

    fn schema_of(rows: &[Value]) -> SchemaRef {
        let mut t = DataType::Struct(Fields::empty());
        for r in rows {
            unify_value(&mut t, r);
        }
        let DataType::Struct(f) = t else {
            panic!("{t:?}")
        };
        Arc::new(Schema::new(f))
    }

    #[test]
    fn builds_conflicts_by_the_rules() {
        let r = rows(&[
            r#"{"n":1,"v":100,"s":{"a":1},"e":{},"l":[]}"#,
            r#"{"n":2.5,"v":[200,300],"s":"text","e":{"x":true},"l":[{"k":"v"}]}"#,
            r#"{"n":null,"v":null,"s":5,"e":{},"l":{"k":"w"}}"#,
            r#"{}"#,
        ]);
        let schema = schema_of(&r);
        let built = build_batch(&r, &schema).unwrap();
        assert_eq!(built.mismatches, 0);
        let b = built.batch;
        assert_eq!(b.num_rows(), 4);
        let n = b.column_by_name("n").unwrap().as_primitive::<Float64Type>();
        assert_eq!((n.value(0), n.value(1), n.is_null(2)), (1.0, 2.5, true));
        let v = b.column_by_name("v").unwrap().as_list::<i32>();
        assert_eq!(v.value(0).as_primitive::<Int64Type>().values(), &[100]);
        assert_eq!(v.value(1).as_primitive::<Int64Type>().values(), &[200, 300]);
        assert!(v.is_null(2));
        let s = b.column_by_name("s").unwrap().as_string::<i32>();
        assert_eq!(
            (s.value(0), s.value(1), s.value(2)),
            (r#"{"a":1}"#, "text", "5")
        );
        let e = b.column_by_name("e").unwrap().as_struct();
        assert!(e.is_valid(0) && e.is_valid(1) && e.is_valid(2) && e.is_null(3));
        assert!(e.column(0).is_null(0));
        let l = b.column_by_name("l").unwrap().as_list::<i32>();
        assert_eq!(
            (l.value_length(0), l.value_length(1), l.value_length(2)),
            (0, 1, 1)
        );
        assert!(l.is_null(3));
    }

    #[test]
    fn foreign_target_types_are_conformed() {
        let r = rows(&[r#"{"a":1}"#, r#"{"a":2}"#]);
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int32, true)]));
        let b = build_batch(&r, &schema).unwrap().batch;
        assert_eq!(
            b.column(0)
                .as_primitive::<arrow::datatypes::Int32Type>()
                .values(),
            &[1, 2]
        );
        let f = infer_fields(r[0].as_object().unwrap());
        assert_eq!(f[0].data_type(), &DataType::Int64);
    }
}
