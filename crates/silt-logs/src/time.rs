//! The event-time field of a generic log: which field it is and how its values become UTC
//! microseconds.
//!
//! Choice: `--time-field NAME` names it; without it, the first of [`CANDIDATES`] present in the
//! first record (or the first CSV header / schema field of that name) is used; with a schema
//! (`--schema`, Avro files) the first top-level timestamp field otherwise; and a table without
//! any of them has no time column (its rows go to the default partition). The chosen
//! field keeps its name and position, becomes `Timestamp(Microsecond, "UTC")`, and is named in
//! the schema metadata `silt.time_column`.
//!
//! Values:
//! - strings in ISO 8601 / RFC 3339 (`2018-02-21T17:26:53.360920913Z`, any offset, space or `T`)
//!   are parsed exactly by `silt_core::time::parse_iso8601`; fractions finer than a microsecond
//!   (Docker's nanoseconds) are **truncated** to microseconds;
//! - numbers (and strings of decimal digits) are epoch values in `--time-unit` (`s`, `ms`, `us`,
//!   `ns`); without `--time-unit` the unit is guessed from the magnitude: below 1e11 seconds,
//!   below 1e14 milliseconds, below 1e17 microseconds, else nanoseconds (so the years 1973..5138
//!   come out right whatever the unit);
//! - a value that does not parse leaves the record in place with a null time (default
//!   partition) and its original value kept in the `_unparsed` text column (the convention of
//!   `silt_readers::json::hints`); under `--schema` such a record is rejected instead.
//!
//! Touches nothing but the values it is given.

use std::str::FromStr;

use silt_readers::json::columns::Scalar;
use silt_readers::json::Value;

/// Field names tried, in this order, when no `--time-field` is given.
pub const CANDIDATES: &[&str] = &["time", "timestamp", "ts", "@timestamp", "log_time", "date"];

/// The unit of numeric epoch values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Seconds,
    Millis,
    Micros,
    Nanos,
}

impl FromStr for TimeUnit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "s" | "sec" | "seconds" => Ok(TimeUnit::Seconds),
            "ms" | "millis" | "milliseconds" => Ok(TimeUnit::Millis),
            "us" | "micros" | "microseconds" => Ok(TimeUnit::Micros),
            "ns" | "nanos" | "nanoseconds" => Ok(TimeUnit::Nanos),
            _ => Err(format!("unknown time unit {s:?}: use s, ms, us or ns")),
        }
    }
}

impl TimeUnit {
    /// The unit an epoch number of this magnitude most likely has.
    pub fn guess(v: f64) -> TimeUnit {
        let a = v.abs();
        if a < 1e11 {
            TimeUnit::Seconds
        } else if a < 1e14 {
            TimeUnit::Millis
        } else if a < 1e17 {
            TimeUnit::Micros
        } else {
            TimeUnit::Nanos
        }
    }

    fn int_to_micros(self, i: i64) -> Option<i64> {
        match self {
            TimeUnit::Seconds => i.checked_mul(1_000_000),
            TimeUnit::Millis => i.checked_mul(1_000),
            TimeUnit::Micros => Some(i),
            TimeUnit::Nanos => Some(i.div_euclid(1_000)),
        }
    }

    fn float_to_micros(self, f: f64) -> Option<i64> {
        let m = match self {
            TimeUnit::Seconds => return silt_core::time::float_seconds_to_micros(f),
            TimeUnit::Millis => f * 1e3,
            TimeUnit::Micros => f,
            TimeUnit::Nanos => f / 1e3,
        };
        (m.is_finite() && m.abs() < 9.2e18).then_some(m.floor() as i64)
    }
}

/// Picks the time field of a record: `explicit` if given, else the first candidate present with
/// a scalar value.
pub fn choose(record: &Value, explicit: Option<&str>) -> Option<String> {
    if let Some(e) = explicit {
        return Some(e.to_string());
    }
    CANDIDATES
        .iter()
        .find(|c| {
            matches!(
                record.get(c),
                Some(
                    Value::Str(_)
                        | Value::Int(_)
                        | Value::UInt(_)
                        | Value::Float(_)
                        | Value::Time(_)
                )
            )
        })
        .map(|c| c.to_string())
}

/// Picks the time field among column names (CSV headers, schema fields).
pub fn choose_name<'a>(
    names: impl Iterator<Item = &'a str> + Clone,
    explicit: Option<&str>,
) -> Option<String> {
    if let Some(e) = explicit {
        return Some(e.to_string());
    }
    CANDIDATES
        .iter()
        .find(|c| names.clone().any(|n| n == **c))
        .map(|c| c.to_string())
}

/// UTC microseconds of one value: `Ok(None)` for null, `Err(())` when it does not parse.
#[allow(clippy::result_unit_err)]
pub fn to_micros(v: &Value, unit: Option<TimeUnit>) -> Result<Option<i64>, ()> {
    scalar_to_micros(Scalar::from(v), unit)
}

/// [`to_micros`] of a borrowed value (a pending row's cell in the NDJSON fast path).
#[allow(clippy::result_unit_err)]
pub fn scalar_to_micros(v: Scalar<'_>, unit: Option<TimeUnit>) -> Result<Option<i64>, ()> {
    let r = match v {
        Scalar::Null => return Ok(None),
        Scalar::Time(t) => Some(t),
        Scalar::Int(i) => unit
            .unwrap_or_else(|| TimeUnit::guess(i as f64))
            .int_to_micros(i),
        Scalar::UInt(u) => i64::try_from(u).ok().and_then(|i| {
            unit.unwrap_or_else(|| TimeUnit::guess(i as f64))
                .int_to_micros(i)
        }),
        Scalar::Float(f) => unit
            .unwrap_or_else(|| TimeUnit::guess(f))
            .float_to_micros(f),
        Scalar::Str(s) => str_to_micros(s, unit),
        Scalar::Bool(_) | Scalar::Nested => None,
    };
    r.map(Some).ok_or(())
}

fn str_to_micros(s: &str, unit: Option<TimeUnit>) -> Option<i64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    if let Some(m) = silt_core::time::parse_iso8601(t) {
        return Some(m);
    }
    let numeric = t
        .bytes()
        .all(|b| b.is_ascii_digit() || b == b'.' || b == b'-');
    if !numeric {
        return None;
    }
    if let Ok(i) = t.parse::<i64>() {
        return unit
            .unwrap_or_else(|| TimeUnit::guess(i as f64))
            .int_to_micros(i);
    }
    let f: f64 = t.parse().ok()?;
    match unit.unwrap_or_else(|| TimeUnit::guess(f)) {
        // Exact decimal seconds ("1521911721.123456").
        TimeUnit::Seconds => silt_core::time::parse_epoch_seconds(t),
        u => u.float_to_micros(f),
    }
}

/// Converts the field `name` of `record` in place; returns the original value when it does not
/// parse (the field is then null).
pub fn convert_field(record: &mut Value, name: &str, unit: Option<TimeUnit>) -> Option<Value> {
    let v = record.get_mut(name)?;
    match to_micros(v, unit) {
        Ok(Some(m)) => {
            *v = Value::Time(m);
            None
        }
        Ok(None) => None,
        Err(()) => Some(std::mem::replace(v, Value::Null)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_strings() {
        let s = |x: &str| Value::Str(x.into());
        assert_eq!(
            to_micros(&s("2018-02-21T17:26:53.360920913Z"), None),
            Ok(Some(1_519_234_013_360_920))
        );
        assert_eq!(
            to_micros(&Value::Int(1_519_234_013_360), None),
            Ok(Some(1_519_234_013_360_000))
        );
        assert_eq!(
            to_micros(&Value::Int(1_519_234_013), Some(TimeUnit::Seconds)),
            Ok(Some(1_519_234_013_000_000))
        );
        assert_eq!(
            to_micros(&Value::Int(1_519_234_013_360_920_913), None),
            Ok(Some(1_519_234_013_360_920))
        );
        assert_eq!(
            to_micros(&s("1519234013.5"), None),
            Ok(Some(1_519_234_013_500_000))
        );
        assert_eq!(to_micros(&s("yesterday"), None), Err(()));
        assert_eq!(to_micros(&Value::Null, None), Ok(None));
    }
}
