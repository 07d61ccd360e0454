//! Arrow type inference for [`Value`]s, unified by the rules of [`silt_core::schema`].
//!
//! [`infer`] gives one value's type: `null` and `{}` are `Null` (no type yet), booleans `Boolean`,
//! integers `Int64` (`UInt64` above `i64::MAX` or when hinted), other numbers `Float64`, strings
//! `Utf8`, hinted times `Timestamp(Microsecond, "UTC")`, arrays `List` of the unified element
//! types (an empty array is `List<Null>`), objects `Struct` with their keys in order. Every field
//! is nullable.
//!
//! [`unify_value`] folds a value into a running type. Because the same shapes repeat record after
//! record, it first checks without allocating whether the running type already holds the value
//! ([`fits`]); only when it does not is the value's type inferred and unified with
//! [`silt_core::schema::unify_types`], so the result is always exactly what the rule book says.
//!
//! Touches nothing but the values and types it is given.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use silt_core::schema::unify_types;

use super::value::Value;

/// The name of a list's element field (Arrow's and Parquet's convention).
pub const LIST_ITEM: &str = "item";

/// The Arrow type of one value.
pub fn infer(v: &Value) -> DataType {
    match v {
        Value::Null => DataType::Null,
        Value::Bool(_) => DataType::Boolean,
        Value::Int(_) => DataType::Int64,
        Value::UInt(_) => DataType::UInt64,
        Value::Float(_) => DataType::Float64,
        Value::Str(_) => DataType::Utf8,
        Value::Time(_) => silt_core::time::timestamp_type(),
        Value::List(items) => {
            let mut t = DataType::Null;
            for i in items {
                unify_value(&mut t, i);
            }
            DataType::List(Arc::new(Field::new(LIST_ITEM, t, true)))
        }
        Value::Object(o) if o.is_empty() => DataType::Null,
        Value::Object(o) => DataType::Struct(infer_fields(o)),
    }
}

/// The fields of an object, in key order.
pub fn infer_fields(o: &[(String, Value)]) -> Fields {
    o.iter()
        .map(|(k, v)| Field::new(k, infer(v), true))
        .collect()
}

/// Widens `acc` so that it holds `v` too.
pub fn unify_value(acc: &mut DataType, v: &Value) {
    if !fits(acc, v) {
        *acc = unify_types(acc, &infer(v));
    }
}

/// `true` when unifying `t` with the type of `v` would leave `t` unchanged. May answer `false`
/// for some values that do fit (the caller then does the full unification, which is correct
/// either way); never answers `true` wrongly.
pub fn fits(t: &DataType, v: &Value) -> bool {
    use DataType as T;
    match (v, t) {
        (v, _) if v.is_void() => true,
        (Value::Bool(_), T::Boolean) => true,
        (Value::Int(_), T::Int64 | T::Float64) => true,
        (Value::UInt(_), T::UInt64 | T::Float64) => true,
        (Value::Float(_), T::Float64) => true,
        (Value::Str(_), T::Utf8) => true,
        (Value::Time(_), T::Timestamp(TimeUnit::Microsecond, Some(tz))) => tz.as_ref() == "UTC",
        (Value::List(items), T::List(item)) => {
            item.name() == LIST_ITEM
                && item.is_nullable()
                && item.metadata().is_empty()
                && items.iter().all(|i| fits(item.data_type(), i))
        }
        (Value::Object(o), T::Struct(fields)) => object_fits(fields, o),
        // Rule 6: text absorbs every scalar and every object (kept as JSON text); a list would
        // turn the text into a list of text (rule 5), so it does not fit.
        (
            Value::Bool(_) | Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Time(_),
            T::Utf8,
        ) => true,
        (Value::Object(_), T::Utf8) => true,
        _ => false,
    }
}

fn object_fits(fields: &Fields, o: &[(String, Value)]) -> bool {
    // Records of one kind list their keys in the same order, so try the field after the last
    // match before searching.
    let mut next = 0;
    for (k, v) in o {
        let idx = match fields.get(next) {
            Some(f) if f.name() == k => next,
            _ => match fields.iter().position(|f| f.name() == k) {
                Some(i) => i,
                None => return false,
            },
        };
        let f = &fields[idx];
        if !f.is_nullable() || !fits(f.data_type(), v) {
            return false;
        }
        next = idx + 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Value {
        Value::from_slice(s.as_bytes()).unwrap()
    }

    fn fold(lines: &[&str]) -> DataType {
        let mut t = DataType::Null;
        for l in lines {
            unify_value(&mut t, &parse(l));
        }
        t
    }

    fn list(t: DataType) -> DataType {
        DataType::List(Arc::new(Field::new(LIST_ITEM, t, true)))
    }

    #[test]
    fn infers_and_widens() {
        assert_eq!(fold(&["1", "2.5"]), DataType::Float64);
        assert_eq!(fold(&["1", "null"]), DataType::Int64);
        assert_eq!(fold(&["100", "[100, 200]"]), list(DataType::Int64));
        assert_eq!(fold(&["[1]", "[2.5]"]), list(DataType::Float64));
        assert_eq!(fold(&["[]"]), list(DataType::Null));
        assert_eq!(fold(&["{}", "{}"]), DataType::Null);
        assert_eq!(fold(&[r#"{"a":1}"#, r#""text""#]), DataType::Utf8);
        assert_eq!(fold(&["true", "1"]), DataType::Utf8);
        assert_eq!(fold(&["18446744073709551615", "1"]), DataType::Float64);
        assert_eq!(
            fold(&[r#"{"a":1}"#, r#"{"b":"x","a":2.5}"#]),
            DataType::Struct(
                vec![
                    Field::new("a", DataType::Float64, true),
                    Field::new("b", DataType::Utf8, true)
                ]
                .into()
            )
        );
        assert_eq!(
            fold(&[r#"{"a":1}"#, r#"[{"a":2}]"#]),
            list(DataType::Struct(
                vec![Field::new("a", DataType::Int64, true)].into()
            ))
        );
    }

    /// `fits` must never claim a fit that full unification would change.
    #[test]
    fn fits_agrees_with_unify() {
        let samples = [
            "null",
            "{}",
            "[]",
            "true",
            "1",
            "-1",
            "18446744073709551615",
            "2.5",
            "\"s\"",
            "[1]",
            "[1.5]",
            "[\"a\"]",
            "[null]",
            "[[1]]",
            "[{}]",
            r#"{"a":1}"#,
            r#"{"a":"x"}"#,
            r#"{"b":1,"a":1}"#,
            r#"{"a":{"c":[1]}}"#,
            r#"[{"a":1}]"#,
            r#"{"a":null}"#,
            r#"{"a":{}}"#,
        ];
        let values: Vec<Value> = samples.iter().map(|s| parse(s)).collect();
        let mut types: Vec<DataType> = values.iter().map(infer).collect();
        types.push(silt_core::time::timestamp_type());
        for a in values.iter() {
            for b in values.iter() {
                let mut t = infer(a);
                unify_value(&mut t, b);
                types.push(t);
            }
        }
        for t in &types {
            for v in values.iter().chain([Value::Time(0)].iter()) {
                if fits(t, v) {
                    assert_eq!(&unify_types(t, &infer(v)), t, "{t:?} vs {v:?}");
                }
            }
        }
    }
}
