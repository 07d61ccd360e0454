//! Schema files (`--schema FILE`) to Arrow schemas, and records conformed to such a schema.
//!
//! Two kinds of file are accepted, told apart by their JSON shape:
//! - an **Avro schema** (`.avsc`, an object with `"type": "record"`), parsed by `apache-avro`;
//! - a **BigQuery JSON schema** (an array of `{name, type, mode, fields}`).
//!
//! Type mapping (every Arrow field is nullable; "required" is kept only for validation):
//!
//! | Avro | BigQuery | Arrow |
//! |---|---|---|
//! | boolean | BOOL, BOOLEAN | Boolean |
//! | int | | Int32 |
//! | long | INT64, INTEGER | Int64 |
//! | float | | Float32 |
//! | double | FLOAT64, FLOAT | Float64 |
//! | string, enum, uuid | STRING, GEOGRAPHY, JSON, TIME | Utf8 |
//! | bytes, fixed | BYTES | Utf8 (Avro: lowercase hex; BigQuery: the text as given, base64) |
//! | decimal(p,s), p <= 38 | NUMERIC | Decimal128(p,s) (NUMERIC: 38,9) |
//! | big-decimal, larger decimals | BIGNUMERIC | Utf8 (decimal text) |
//! | date | DATE | Date32 |
//! | time-millis, time-micros | | Time64(Microsecond) |
//! | timestamp-*, local-timestamp-* | TIMESTAMP, DATETIME | Timestamp(Microsecond, "UTC") |
//! | array | mode REPEATED | List (item field `item`) |
//! | map, duration, unions of several non-null types, named references | | Utf8 (JSON text) |
//! | record | RECORD, STRUCT | Struct |
//! | union with null | mode NULLABLE | the other type, nullable |
//!
//! Conforming ([`conform_record`]): fields come out in schema order; a field the schema does not
//! have is dropped; a missing field is null unless required (Avro: not a union with null;
//! BigQuery: mode REQUIRED), which rejects the record; a value of the wrong kind rejects the
//! record with the field path and the reason. Accepted conversions: integers to floats, any
//! scalar/object/array to text (JSON text), and, for text formats (CSV, TSV, LTSV) only, text
//! to numbers and booleans. Timestamps take what [`crate::time`] parses.
//!
//! Touches only the schema file it is asked to read.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use apache_avro::schema::Schema as Avro;
use arrow::datatypes::{DataType, Field, Fields, Schema, TimeUnit as ArrowUnit};
use silt_readers::json::Value;

use crate::time::{self, TimeUnit};

/// A schema read from a file: fields carry nullability ("not nullable" = required).
#[derive(Debug, Clone)]
pub struct TargetSchema {
    pub fields: Fields,
}

impl TargetSchema {
    /// Reads and converts a schema file.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read schema file {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("schema file {}", path.display()))
    }

    /// Converts Avro schema JSON or BigQuery schema JSON.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let json: serde_json::Value = serde_json::from_str(text).context("not JSON")?;
        match &json {
            serde_json::Value::Array(items) => Ok(Self {
                fields: bigquery_fields(items)?,
            }),
            serde_json::Value::Object(o) if o.contains_key("type") => {
                let avro = Avro::parse_str(text).context("invalid Avro schema")?;
                Self::from_avro(&avro)
            }
            serde_json::Value::Object(o) if o.contains_key("fields") => {
                // BigQuery's `bq show --schema --format=prettyjson` wraps the array.
                match o.get("fields") {
                    Some(serde_json::Value::Array(items)) => Ok(Self {
                        fields: bigquery_fields(items)?,
                    }),
                    _ => bail!("\"fields\" is not an array"),
                }
            }
            _ => {
                bail!("neither an Avro record schema nor a BigQuery JSON schema (array of fields)")
            }
        }
    }

    /// Converts an Avro record schema.
    pub fn from_avro(s: &Avro) -> anyhow::Result<Self> {
        match s {
            Avro::Record(r) => Ok(Self {
                fields: r
                    .fields
                    .iter()
                    .map(|f| {
                        let (dt, nullable) = avro_type(&f.schema);
                        Field::new(&f.name, dt, nullable)
                    })
                    .collect(),
            }),
            other => bail!("the Avro schema is not a record but {other:?}"),
        }
    }

    /// The schema batches are built in: the same fields, all nullable (silt's rule).
    pub fn arrow_schema(&self) -> Schema {
        Schema::new(nullable_fields(&self.fields))
    }

    /// Makes `name` a timestamp column (the chosen time field), whatever type the file gave it.
    pub fn with_time_field(mut self, name: &str) -> Self {
        self.fields = self
            .fields
            .iter()
            .map(|f| {
                if f.name() == name {
                    Arc::new(
                        f.as_ref()
                            .clone()
                            .with_data_type(silt_core::time::timestamp_type()),
                    )
                } else {
                    f.clone()
                }
            })
            .collect();
        self
    }
}

fn nullable_fields(fields: &Fields) -> Fields {
    fields
        .iter()
        .map(|f| Field::new(f.name(), nullable_type(f.data_type()), true))
        .collect()
}

fn nullable_type(t: &DataType) -> DataType {
    match t {
        DataType::Struct(f) => DataType::Struct(nullable_fields(f)),
        DataType::List(item) => DataType::List(Arc::new(Field::new(
            item.name(),
            nullable_type(item.data_type()),
            true,
        ))),
        other => other.clone(),
    }
}

fn list_of(t: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", t, true)))
}

/// An Avro type as Arrow, and whether it admits null.
pub fn avro_type(s: &Avro) -> (DataType, bool) {
    let t = match s {
        Avro::Null => return (DataType::Null, true),
        Avro::Boolean => DataType::Boolean,
        Avro::Int => DataType::Int32,
        Avro::Long => DataType::Int64,
        Avro::Float => DataType::Float32,
        Avro::Double => DataType::Float64,
        Avro::Bytes | Avro::Fixed(_) | Avro::String | Avro::Enum(_) | Avro::Uuid(_) => {
            DataType::Utf8
        }
        Avro::Array(a) => list_of(avro_type(&a.items).0),
        Avro::Record(r) => DataType::Struct(
            r.fields
                .iter()
                .map(|f| {
                    let (dt, n) = avro_type(&f.schema);
                    Field::new(&f.name, dt, n)
                })
                .collect(),
        ),
        Avro::Union(u) => {
            let non_null: Vec<&Avro> = u
                .variants()
                .iter()
                .filter(|v| !matches!(v, Avro::Null))
                .collect();
            let nullable = non_null.len() < u.variants().len();
            return match non_null.as_slice() {
                [one] => (avro_type(one).0, nullable),
                [] => (DataType::Null, true),
                _ => (DataType::Utf8, nullable),
            };
        }
        Avro::Decimal(d) if d.precision <= 38 => {
            DataType::Decimal128(d.precision as u8, d.scale as i8)
        }
        Avro::Date => DataType::Date32,
        Avro::TimeMillis | Avro::TimeMicros => DataType::Time64(ArrowUnit::Microsecond),
        Avro::TimestampMillis
        | Avro::TimestampMicros
        | Avro::TimestampNanos
        | Avro::LocalTimestampMillis
        | Avro::LocalTimestampMicros
        | Avro::LocalTimestampNanos => silt_core::time::timestamp_type(),
        // Maps, durations, big decimals, references: kept as (JSON) text.
        _ => DataType::Utf8,
    };
    (t, false)
}

fn bigquery_fields(items: &[serde_json::Value]) -> anyhow::Result<Fields> {
    items
        .iter()
        .map(|item| {
            let name = item
                .get("name")
                .and_then(|n| n.as_str())
                .context("a BigQuery field without \"name\"")?;
            let ty = item
                .get("type")
                .and_then(|n| n.as_str())
                .with_context(|| format!("BigQuery field {name} has no \"type\""))?
                .to_ascii_uppercase();
            let mode = item
                .get("mode")
                .and_then(|n| n.as_str())
                .unwrap_or("NULLABLE")
                .to_ascii_uppercase();
            let dt = match ty.as_str() {
                "STRING" | "BYTES" | "GEOGRAPHY" | "JSON" | "TIME" | "BIGNUMERIC"
                | "BIGDECIMAL" => DataType::Utf8,
                "INTEGER" | "INT64" => DataType::Int64,
                "FLOAT" | "FLOAT64" => DataType::Float64,
                "NUMERIC" | "DECIMAL" => DataType::Decimal128(38, 9),
                "BOOLEAN" | "BOOL" => DataType::Boolean,
                "TIMESTAMP" | "DATETIME" => silt_core::time::timestamp_type(),
                "DATE" => DataType::Date32,
                "RECORD" | "STRUCT" => {
                    let sub = item
                        .get("fields")
                        .and_then(|f| f.as_array())
                        .with_context(|| format!("BigQuery RECORD {name} has no \"fields\""))?;
                    DataType::Struct(bigquery_fields(sub)?)
                }
                other => bail!("BigQuery field {name}: unknown type {other}"),
            };
            Ok(match mode.as_str() {
                "REPEATED" => Field::new(name, list_of(dt), true),
                "REQUIRED" => Field::new(name, dt, false),
                "NULLABLE" => Field::new(name, dt, true),
                other => bail!("BigQuery field {name}: unknown mode {other}"),
            })
        })
        .collect()
}

/// How text values may be read when conforming.
#[derive(Debug, Clone, Copy)]
pub struct ConformOptions {
    /// The format only has text (CSV, TSV, LTSV): parse numbers and booleans from text.
    pub text: bool,
    pub unit: Option<TimeUnit>,
}

/// Conforms a record (an object) to `fields`: see the module documentation. The error is the
/// reject reason.
pub fn conform_record(rec: &mut Value, fields: &Fields, o: ConformOptions) -> Result<(), String> {
    let mut path = String::new();
    conform_object(rec, fields, o, &mut path)
}

fn conform_object(
    v: &mut Value,
    fields: &Fields,
    o: ConformOptions,
    path: &mut String,
) -> Result<(), String> {
    let Value::Object(entries) = v else {
        return Err(format!("{}expected a record, found {}", at(path), kind(v)));
    };
    let mut old = std::mem::take(entries);
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        let mut val = match old.iter().position(|(k, _)| k == f.name()) {
            Some(i) => std::mem::replace(&mut old[i].1, Value::Null),
            None => Value::Null,
        };
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(f.name());
        conform_value(&mut val, f, o, path)?;
        path.truncate(len);
        out.push((f.name().clone(), val));
    }
    *entries = out;
    Ok(())
}

fn at(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("field {path}: ")
    }
}

fn kind(v: &Value) -> String {
    let k = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Int(_) | Value::UInt(_) => "an integer",
        Value::Float(_) => "a number",
        Value::Str(_) => "a string",
        Value::Time(_) => "a timestamp",
        Value::List(_) => "an array",
        Value::Object(_) => "an object",
    };
    let text = v.to_json();
    let short: String = text.chars().take(40).collect();
    if matches!(v, Value::Null | Value::List(_) | Value::Object(_)) {
        k.to_string()
    } else if short.len() < text.len() {
        format!("{k} ({short}...)")
    } else {
        format!("{k} ({short})")
    }
}

fn int_range(t: &DataType) -> (i128, i128) {
    match t {
        DataType::Int8 => (i8::MIN as i128, i8::MAX as i128),
        DataType::Int16 => (i16::MIN as i128, i16::MAX as i128),
        DataType::Int32 => (i32::MIN as i128, i32::MAX as i128),
        DataType::Int64 => (i64::MIN as i128, i64::MAX as i128),
        DataType::UInt8 => (0, u8::MAX as i128),
        DataType::UInt16 => (0, u16::MAX as i128),
        DataType::UInt32 => (0, u32::MAX as i128),
        _ => (0, u64::MAX as i128),
    }
}

fn conform_value(
    v: &mut Value,
    f: &Field,
    o: ConformOptions,
    path: &mut String,
) -> Result<(), String> {
    if matches!(v, Value::Null) || (o.text && matches!(v, Value::Str(s) if s.is_empty())) {
        *v = Value::Null;
        return if f.is_nullable() {
            Ok(())
        } else {
            Err(format!("{}required field is missing or null", at(path)))
        };
    }
    let dt = f.data_type();
    let bad = |v: &Value, path: &str| Err(format!("{}expected {dt}, found {}", at(path), kind(v)));
    match dt {
        DataType::Null => *v = Value::Null,
        DataType::Boolean => match v {
            Value::Bool(_) => {}
            Value::Str(s) if o.text && s.eq_ignore_ascii_case("true") => *v = Value::Bool(true),
            Value::Str(s) if o.text && s.eq_ignore_ascii_case("false") => *v = Value::Bool(false),
            _ => return bad(v, path),
        },
        t if t.is_integer() => {
            let n: Option<i128> = match v {
                Value::Int(i) => Some(*i as i128),
                Value::UInt(u) => Some(*u as i128),
                Value::Str(s) if o.text => s.trim().parse::<i128>().ok(),
                _ => None,
            };
            let (lo, hi) = int_range(t);
            match n {
                Some(n) if n >= lo && n <= hi => {
                    *v = if t.is_signed_integer() || n <= i64::MAX as i128 {
                        if *t == DataType::UInt64 {
                            Value::UInt(n as u64)
                        } else {
                            Value::Int(n as i64)
                        }
                    } else {
                        Value::UInt(n as u64)
                    }
                }
                Some(_) => return Err(format!("{}{} is out of range for {t}", at(path), kind(v))),
                None => return bad(v, path),
            }
        }
        DataType::Float16 | DataType::Float32 | DataType::Float64 => match v {
            Value::Float(_) => {}
            Value::Int(i) => *v = Value::Float(*i as f64),
            Value::UInt(u) => *v = Value::Float(*u as f64),
            Value::Str(s) if o.text => match s.trim().parse::<f64>() {
                Ok(x) if s.bytes().any(|b| b.is_ascii_digit()) => *v = Value::Float(x),
                _ => return bad(v, path),
            },
            _ => return bad(v, path),
        },
        DataType::Utf8 | DataType::LargeUtf8 => match v {
            Value::Str(_) => {}
            Value::Time(t) => *v = Value::Str(silt_readers::json::value::format_micros(*t)),
            _ => {
                let text = v.to_json();
                *v = Value::Str(text);
            }
        },
        DataType::Timestamp(_, _) => match time::to_micros(v, o.unit) {
            Ok(Some(m)) => *v = Value::Time(m),
            Ok(None) => *v = Value::Null,
            Err(()) => {
                return Err(format!(
                    "{}expected a timestamp, found {} that does not parse",
                    at(path),
                    kind(v)
                ))
            }
        },
        DataType::Date32 => {
            let days = match v {
                Value::Int(d) => Some(*d),
                Value::Time(t) => Some(t.div_euclid(86_400_000_000)),
                Value::Str(s) if s.len() == 10 => {
                    silt_core::time::parse_iso8601(&format!("{s}T00:00:00Z"))
                        .map(|t| t.div_euclid(86_400_000_000))
                }
                _ => None,
            };
            match days {
                Some(d) => {
                    let (y, m, dd) = silt_core::time::civil_from_days(d);
                    *v = Value::Str(format!("{y:04}-{m:02}-{dd:02}"));
                }
                None => return bad(v, path),
            }
        }
        DataType::Time64(_) => match v {
            Value::Int(_) => {}
            _ => return bad(v, path),
        },
        DataType::Decimal128(p, s) => {
            let text = match v {
                Value::Int(i) => i.to_string(),
                Value::UInt(u) => u.to_string(),
                Value::Float(x) => x.to_string(),
                Value::Str(t) => t.trim().to_string(),
                _ => return bad(v, path),
            };
            if !decimal_fits(&text, *p, *s) {
                return Err(format!(
                    "{}{} is not a decimal that fits DECIMAL({p},{s})",
                    at(path),
                    kind(v)
                ));
            }
            *v = Value::Str(text);
        }
        DataType::List(item) => match v {
            Value::List(items) => {
                for (i, it) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    conform_value(it, item, o, path)?;
                    path.truncate(len);
                }
            }
            _ => return bad(v, path),
        },
        DataType::Struct(fields) => conform_object(v, fields, o, path)?,
        _ => {}
    }
    Ok(())
}

/// `text` is a plain decimal number (`-12.345`, no exponent) with at most `p - s` integer digits.
fn decimal_fits(text: &str, p: u8, s: i8) -> bool {
    let t = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() && frac.is_empty() {
        return false;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let int_digits = int.trim_start_matches('0').len() as i32;
    int_digits <= p as i32 - s as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avro_and_bigquery_agree() {
        let avsc = r#"{"type":"record","name":"r","fields":[
            {"name":"log_time","type":"long"},
            {"name":"name","type":["null","string"]},
            {"name":"n","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
            {"name":"tags","type":{"type":"array","items":"string"}},
            {"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#;
        let a = TargetSchema::parse(avsc).unwrap();
        assert_eq!(a.fields[0].data_type(), &DataType::Int64);
        assert!(!a.fields[0].is_nullable());
        assert!(a.fields[1].is_nullable());
        assert_eq!(a.fields[2].data_type(), &DataType::Decimal128(10, 2));
        assert_eq!(a.fields[4].data_type(), &silt_core::time::timestamp_type());
        let bq = r#"[{"name":"log_time","type":"INTEGER","mode":"REQUIRED"},
            {"name":"tags","type":"STRING","mode":"REPEATED"},
            {"name":"req","type":"RECORD","fields":[{"name":"status","type":"INT64"}]}]"#;
        let b = TargetSchema::parse(bq).unwrap();
        assert_eq!(b.fields[0].data_type(), a.fields[0].data_type());
        assert_eq!(
            b.fields[1].data_type(),
            &list_of(DataType::Utf8),
            "REPEATED is a list"
        );
        assert!(matches!(b.fields[2].data_type(), DataType::Struct(_)));
    }

    #[test]
    fn conform_rejects_with_path() {
        let s = TargetSchema::parse(
            r#"[{"name":"a","type":"INT64","mode":"REQUIRED"},{"name":"r","type":"RECORD","fields":[{"name":"b","type":"BOOL"}]}]"#,
        )
        .unwrap();
        let o = ConformOptions {
            text: false,
            unit: None,
        };
        let mut ok = Value::from_slice(br#"{"x":1,"a":5,"r":{"b":true}}"#).unwrap();
        conform_record(&mut ok, &s.fields, o).unwrap();
        assert_eq!(ok.to_json(), r#"{"a":5,"r":{"b":true}}"#);
        let mut missing = Value::from_slice(br#"{"r":null}"#).unwrap();
        assert_eq!(
            conform_record(&mut missing, &s.fields, o).unwrap_err(),
            "field a: required field is missing or null"
        );
        let mut wrong = Value::from_slice(br#"{"a":1,"r":{"b":"yes"}}"#).unwrap();
        assert_eq!(
            conform_record(&mut wrong, &s.fields, o).unwrap_err(),
            "field r.b: expected Boolean, found a string (\"yes\")"
        );
        assert!(decimal_fits("-123.45", 5, 2));
        assert!(!decimal_fits("1234.5", 5, 2));
    }
}
