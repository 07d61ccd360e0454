//! Avro object container files, read with `apache-avro`. The file's own (writer) schema gives the
//! table schema (mapping in [`crate::schema_file`]); `--schema` replaces it (records are then
//! conformed to it by field name). Every compression codec the crate is built with is read
//! (null and deflate).
//!
//! Values: long/int -> integers, float/double -> numbers, string/enum/uuid -> text,
//! bytes/fixed -> lowercase hex text, decimal -> exact decimal text (-> Decimal128), date ->
//! Date32, time-millis/micros -> Time64(us), timestamp-millis/micros/nanos and the local-timestamp
//! variants -> Timestamp(us, UTC) (nanoseconds truncated), maps -> JSON text, unions -> the
//! branch's value. Rejects carry the record number: a record that does not fit `--schema`. A
//! corrupt block ends the file: `Err` after the records before it were emitted.
//! Touches nothing but `input` and `out`.

use std::io::BufRead;

use anyhow::{anyhow, Context};
use apache_avro::schema::Schema as Avro;
use apache_avro::types::Value as AV;
use silt_core::{Emit, ReadOptions, SourceInfo};
use silt_readers::json::Value;

use crate::schema_file::TargetSchema;
use crate::sink::Sink;
use crate::{LogFormat, LogOptions};

pub fn read(
    input: &mut dyn BufRead,
    source: &SourceInfo,
    ro: &ReadOptions,
    lo: &LogOptions,
    out: &mut dyn Emit,
) -> anyhow::Result<()> {
    let reader = apache_avro::Reader::new(input)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("{}: not an Avro object container file", source.display))?;
    let schema = reader.writer_schema().clone();
    let file_schema = TargetSchema::from_avro(&schema)?;
    let table = lo.table_for(LogFormat::Avro, source);
    let mut sink = Sink::new(source, table, ro, lo, false, Some(file_schema))?;
    let mut n: u64 = 0;
    let mut res = Ok(());
    for item in reader {
        n += 1;
        match item {
            Ok(v) => {
                let rec = to_value(v, &schema);
                if let Err(e) = sink.push(rec, n, &Vec::new, 0, out) {
                    res = Err(e);
                    break;
                }
            }
            Err(e) => {
                res = Err(anyhow!("{}: record {n}: {e}", source.display));
                break;
            }
        }
    }
    let fin = sink.finish(out);
    res.and(fin.map(|_| ()))
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// Decimal text of a big-endian two's complement unscaled value with `scale` decimals.
fn decimal_text(bytes: &[u8], scale: usize) -> String {
    if bytes.len() > 16 {
        return hex(bytes);
    }
    let neg = bytes.first().is_some_and(|b| b & 0x80 != 0);
    let mut v: i128 = if neg { -1 } else { 0 };
    for b in bytes {
        v = (v << 8) | *b as i128;
    }
    let digits = v.unsigned_abs().to_string();
    let digits = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits
    };
    let (i, f) = digits.split_at(digits.len() - scale);
    let sign = if v < 0 { "-" } else { "" };
    if scale == 0 {
        format!("{sign}{i}")
    } else {
        format!("{sign}{i}.{f}")
    }
}

/// Converts an Avro value (with its schema, for decimal scales and union branches).
pub fn to_value(v: AV, s: &Avro) -> Value {
    match v {
        AV::Null => Value::Null,
        AV::Boolean(b) => Value::Bool(b),
        AV::Int(i) => Value::Int(i as i64),
        AV::Long(i) => Value::Int(i),
        AV::Float(f) => Value::Float(f as f64),
        AV::Double(f) => Value::Float(f),
        AV::Bytes(b) | AV::Fixed(_, b) => Value::Str(hex(&b)),
        AV::String(s) => Value::Str(s),
        AV::Enum(_, s) => Value::Str(s),
        AV::Uuid(u) => Value::Str(u.to_string()),
        AV::Union(i, b) => {
            let branch = match s {
                Avro::Union(u) => u.variants().get(i as usize).unwrap_or(s),
                other => other,
            };
            to_value(*b, branch)
        }
        AV::Array(items) => {
            let item = match s {
                Avro::Array(a) => a.items.as_ref(),
                other => other,
            };
            Value::List(items.into_iter().map(|x| to_value(x, item)).collect())
        }
        AV::Map(m) => {
            let vs = match s {
                Avro::Map(m) => m.types.as_ref(),
                other => other,
            };
            let mut entries: Vec<(String, Value)> =
                m.into_iter().map(|(k, x)| (k, to_value(x, vs))).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries)
        }
        AV::Record(fields) => {
            let rs = match s {
                Avro::Record(r) => Some(r),
                _ => None,
            };
            Value::Object(
                fields
                    .into_iter()
                    .map(|(k, x)| {
                        let fs = rs
                            .and_then(|r| r.fields.iter().find(|f| f.name == k))
                            .map_or(&Avro::Null, |f| &f.schema);
                        (k, to_value(x, fs))
                    })
                    .collect(),
            )
        }
        AV::Date(d) => Value::Int(d as i64),
        AV::Decimal(d) => {
            let scale = match s {
                Avro::Decimal(ds) => ds.scale,
                _ => 0,
            };
            match Vec::<u8>::try_from(&d) {
                Ok(b) => Value::Str(decimal_text(&b, scale)),
                Err(_) => Value::Null,
            }
        }
        AV::BigDecimal(b) => Value::Str(b.to_string()),
        AV::TimeMillis(ms) => Value::Int(ms as i64 * 1000),
        AV::TimeMicros(us) => Value::Int(us),
        AV::TimestampMillis(ms) | AV::LocalTimestampMillis(ms) => {
            ms.checked_mul(1000).map_or(Value::Null, Value::Time)
        }
        AV::TimestampMicros(us) | AV::LocalTimestampMicros(us) => Value::Time(us),
        AV::TimestampNanos(ns) | AV::LocalTimestampNanos(ns) => Value::Time(ns.div_euclid(1000)),
        AV::Duration(d) => Value::Str(format!(
            "{{\"months\":{},\"days\":{},\"millis\":{}}}",
            u32::from(d.months()),
            u32::from(d.days()),
            u32::from(d.millis())
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals() {
        assert_eq!(decimal_text(&[0x30, 0x39], 2), "123.45");
        assert_eq!(decimal_text(&[0xcf, 0xc7], 2), "-123.45");
        assert_eq!(decimal_text(&[0x05], 3), "0.005");
        assert_eq!(decimal_text(&[0x05], 0), "5");
    }
}
