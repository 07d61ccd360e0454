//! The JSON value tree that inference and the array builders work on.
//!
//! Parsed straight from text by `serde_json` through this module's [`Deserialize`] impl, so a
//! record costs one parse and one allocation tree. It differs from `serde_json::Value` in what
//! silt needs:
//! - integers keep their exact value: [`Value::Int`] for everything that fits `i64`,
//!   [`Value::UInt`] above `i64::MAX` (never through `f64`);
//! - [`Value::Time`] holds an exact UTC timestamp that a [`Hint`](super::Hint) produced from text;
//! - objects are a vector of entries in first-seen key order; a key that appears twice in one
//!   object keeps its first position and its **last** value (what most JSON parsers, Suricata's
//!   consumers and `serde_json::Value` do); an empty key `""` is renamed `_` because an empty
//!   column name cannot be written in SQL.
//!
//! The `Serialize` impl writes the value back as JSON text (a [`Value::Time`] as an RFC 3339
//! string), which is how a conflicting value is kept as text (schema rule 6).
//!
//! Touches nothing but the values it is given.

use std::collections::HashMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// The entries of a JSON object, in first-seen key order, keys unique.
pub type Object = Vec<(String, Value)>;

/// A parsed JSON value (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// An integer above `i64::MAX`, or any non-negative integer a `UInt64` hint claimed.
    UInt(u64),
    Float(f64),
    Str(String),
    /// Microseconds since the Unix epoch, UTC (only produced by a timestamp hint).
    Time(i64),
    List(Vec<Value>),
    Object(Object),
}

impl Value {
    /// Parses one JSON text (one NDJSON line).
    pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The object's entries, if this is an object.
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The object's entries, mutably, if this is an object.
    pub fn as_object_mut(&mut self) -> Option<&mut Object> {
        match self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }

    /// The string, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Looks a key up in an object (linear: objects are small and mostly read in order).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.as_object()?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Mutable [`Value::get`].
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.as_object_mut()?
            .iter_mut()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// `true` for JSON `null` and for `{}`: both carry no type and no data, so inference treats
    /// them alike (an empty struct cannot be written to Parquet).
    pub fn is_void(&self) -> bool {
        match self {
            Value::Null => true,
            Value::Object(o) => o.is_empty(),
            _ => false,
        }
    }

    /// JSON text of the value. JSON has no NaN or infinity (which MessagePack floats can be):
    /// such a float alone is `NaN`, `inf` or `-inf`, and inside an array or object the JSON
    /// string of that (never `null`, which is what `serde_json` writes for them).
    pub fn to_json(&self) -> String {
        match self {
            Value::Float(f) if !f.is_finite() => f.to_string(),
            _ => {
                serde_json::to_string(self).unwrap_or_else(|e| format!("\"<unserializable: {e}>\""))
            }
        }
    }
}

/// Renders UTC microseconds as RFC 3339 with six decimals: `2017-06-19T12:01:38.082123Z`.
pub fn format_micros(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = silt_core::time::civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::UInt(u) => s.serialize_u64(*u),
            // See `Value::to_json`.
            Value::Float(f) if !f.is_finite() => s.serialize_str(&f.to_string()),
            Value::Float(f) => s.serialize_f64(*f),
            Value::Str(v) => s.serialize_str(v),
            Value::Time(t) => s.serialize_str(&format_micros(*t)),
            Value::List(l) => {
                let mut seq = s.serialize_seq(Some(l.len()))?;
                for v in l {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Value::Object(o) => {
                let mut map = s.serialize_map(Some(o.len()))?;
                for (k, v) in o {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

/// The visitor behind `Value`'s `Deserialize`; [`super::columns`] hands it every value that is
/// not a top-level object's scalar, so both paths parse alike.
pub(crate) struct ValueVisitor;

/// Objects up to this many entries find duplicate keys by a linear scan; larger ones use a map.
const LINEAR_DEDUP_MAX: usize = 16;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::UInt(v), Value::Int))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        Deserialize::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::List(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = ObjectBuilder::default();
        while let Some(key) = map.next_key::<String>()? {
            let value: Value = map.next_value()?;
            out.insert(key, value);
        }
        Ok(Value::Object(out.finish()))
    }
}

/// An object being built entry by entry with the rules of [`Value`]: an empty key is `_`, a
/// repeated key keeps its first position and its last value. Linear in the entries: duplicates
/// are found by a scan in small objects and by a hash index in large ones (a scan alone made a
/// record of many keys quadratic). Used by the JSON parser and by other formats' decoders
/// (MessagePack), so that every path builds objects alike.
#[derive(Debug, Default)]
pub struct ObjectBuilder {
    out: Object,
    index: Option<HashMap<String, usize>>,
}

impl ObjectBuilder {
    /// An empty object with room for `n` entries.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            out: Vec::with_capacity(n),
            index: None,
        }
    }

    /// Adds one entry (see the type's documentation).
    pub fn insert(&mut self, key: String, value: Value) {
        let key = if key.is_empty() { "_".to_string() } else { key };
        if self.index.is_none() && self.out.len() >= LINEAR_DEDUP_MAX {
            self.index = Some(
                self.out
                    .iter()
                    .enumerate()
                    .map(|(i, (k, _))| (k.clone(), i))
                    .collect(),
            );
        }
        let existing = match &self.index {
            Some(ix) => ix.get(&key).copied(),
            None => self.out.iter().position(|(k, _)| *k == key),
        };
        match existing {
            // Last value wins, first position stays.
            Some(i) => self.out[i].1 = value,
            None => {
                if let Some(ix) = &mut self.index {
                    ix.insert(key.clone(), self.out.len());
                }
                self.out.push((key, value));
            }
        }
    }

    /// The entries, in first-seen key order.
    pub fn finish(self) -> Object {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_exact() {
        assert_eq!(
            Value::from_slice(b"18446744073709551615").unwrap(),
            Value::UInt(u64::MAX)
        );
        assert_eq!(
            Value::from_slice(b"9223372036854775808").unwrap(),
            Value::UInt(9_223_372_036_854_775_808)
        );
        assert_eq!(
            Value::from_slice(b"9007199254740993").unwrap(),
            Value::Int(9_007_199_254_740_993)
        );
        assert_eq!(Value::from_slice(b"-5").unwrap(), Value::Int(-5));
        assert_eq!(Value::from_slice(b"1.5").unwrap(), Value::Float(1.5));
        // Beyond u64 serde_json (without arbitrary_precision) gives a float.
        assert!(matches!(
            Value::from_slice(b"18446744073709551616").unwrap(),
            Value::Float(_)
        ));
    }

    #[test]
    fn duplicate_keys_last_wins_first_position() {
        let v = Value::from_slice(br#"{"a":1,"b":2,"a":3,"":4}"#).unwrap();
        assert_eq!(
            v,
            Value::Object(vec![
                ("a".into(), Value::Int(3)),
                ("b".into(), Value::Int(2)),
                ("_".into(), Value::Int(4)),
            ])
        );
        // The same with more keys than the linear scan handles.
        let mut text = String::from("{");
        for i in 0..40 {
            text.push_str(&format!("\"k{i}\":{i},"));
        }
        text.push_str("\"k3\":\"last\",\"k39\":null}");
        let v = Value::from_slice(text.as_bytes()).unwrap();
        let o = v.as_object().unwrap();
        assert_eq!(o.len(), 40);
        assert_eq!(o[3], ("k3".to_string(), Value::Str("last".into())));
        assert_eq!(o[39], ("k39".to_string(), Value::Null));
    }

    #[test]
    fn round_trips_as_json_text() {
        let text = r#"{"a":[1,-2,3.5,"x",null,true],"b":{"c":18446744073709551615}}"#;
        assert_eq!(Value::from_slice(text.as_bytes()).unwrap().to_json(), text);
        assert_eq!(
            Value::Time(1_497_873_698_082_123).to_json(),
            "\"2017-06-19T12:01:38.082123Z\""
        );
        assert_eq!(format_micros(-1), "1969-12-31T23:59:59.999999Z");
    }

    /// A float JSON cannot hold keeps its value as text, alone and nested (not `null`).
    #[test]
    fn non_finite_floats_are_not_null_text() {
        assert_eq!(Value::Float(f64::NAN).to_json(), "NaN");
        assert_eq!(Value::Float(f64::INFINITY).to_json(), "inf");
        assert_eq!(Value::Float(f64::NEG_INFINITY).to_json(), "-inf");
        let v = Value::Object(vec![(
            "a".into(),
            Value::List(vec![Value::Float(f64::NAN), Value::Float(1.5)]),
        )]);
        assert_eq!(v.to_json(), r#"{"a":["NaN",1.5]}"#);
    }

    /// `ObjectBuilder` keeps the rules of the parser: `""` is `_`, last value, first position,
    /// with and without its hash index.
    #[test]
    fn object_builder_follows_the_parser() {
        for n in [3, 40] {
            let mut text = String::from("{");
            let mut b = ObjectBuilder::default();
            for i in 0..n {
                text.push_str(&format!("\"k{i}\":{i},"));
                b.insert(format!("k{i}"), Value::Int(i));
            }
            text.push_str("\"\":1,\"_\":2,\"k1\":\"last\"}");
            b.insert(String::new(), Value::Int(1));
            b.insert("_".into(), Value::Int(2));
            b.insert("k1".into(), Value::Str("last".into()));
            let parsed = Value::from_slice(text.as_bytes()).unwrap();
            assert_eq!(Value::Object(b.finish()), parsed);
            let o = parsed.as_object().unwrap();
            assert_eq!(o.len(), n as usize + 1);
            assert_eq!(o[1], ("k1".to_string(), Value::Str("last".into())));
            assert_eq!(o[n as usize], ("_".to_string(), Value::Int(2)));
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = "[".repeat(100_000);
        assert!(Value::from_slice(deep.as_bytes()).is_err());
    }
}
