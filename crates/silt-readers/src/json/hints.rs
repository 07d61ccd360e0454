//! Type hints by field path: what a format knows about its fields that the JSON text does not say.
//!
//! A [`HintTree`] maps field paths (`flow.start`, `src_ip`) to a [`Hint`]. Lists are transparent:
//! the path `stats.detect.engines.last_reload` reaches `last_reload` inside every element of the
//! `engines` array, and a hint on a field whose value is an array applies to every element.
//! [`HintTree::apply`] rewrites one record in place before inference, so the inferred types follow:
//! - [`Hint::Timestamp`]: text is parsed as ISO 8601 (any offset, converted to UTC) or as decimal
//!   epoch seconds, numbers as epoch seconds, exactly (`silt_core::time`); the value becomes
//!   [`Value::Time`] and the column `Timestamp(Microsecond, "UTC")`;
//! - [`Hint::UInt64`]: a non-negative integer (or a string of decimal digits) becomes
//!   [`Value::UInt`], so the column is `UInt64` even when every value is small;
//! - [`Hint::Addr`]: text that parses as an IP address is replaced by its canonical text
//!   (`silt_core::addr`); anything else is left alone (it is not an error for a hint to miss).
//!
//! A value that a `Timestamp` or `UInt64` hint cannot convert becomes null, and the original is
//! returned to the caller as an [`Unparsed`] entry; [`attach_unparsed`] keeps those in a text
//! column [`UNPARSED_COLUMN`], so a bad value never silently disappears and never turns the
//! column's type into text.
//!
//! [`HintTree::annotate`] puts field metadata `silt.source_type` (`time`, `addr`, `uint64`,
//! `vector[addr]`...) on the hinted fields of a schema.
//!
//! Touches nothing but the values and schemas it is given.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema};
use silt_core::meta::SOURCE_TYPE;

use super::value::Value;

/// The top-level text column that keeps values a hint could not convert, as a JSON object from
/// field path (`flow.start`, `stats.detect.engines[0].last_reload`) to the original value.
pub const UNPARSED_COLUMN: &str = "_unparsed";

/// What a field is known to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    Timestamp,
    UInt64,
    Addr,
}

impl Hint {
    fn source_type(self) -> &'static str {
        match self {
            Hint::Timestamp => "time",
            Hint::UInt64 => "uint64",
            Hint::Addr => "addr",
        }
    }
}

/// A value a hint could not convert: its path and the original value.
pub type Unparsed = (String, Value);

/// Hints by path; see the module documentation.
#[derive(Debug, Clone, Default)]
pub struct HintTree {
    hint: Option<Hint>,
    children: HashMap<String, HintTree>,
}

impl HintTree {
    /// Builds a tree from dotted paths. A path segment cannot contain a dot; use
    /// [`HintTree::insert`] for such keys.
    pub fn from_paths(paths: &[(&str, Hint)]) -> Self {
        let mut t = HintTree::default();
        for (p, h) in paths {
            t.insert(&p.split('.').collect::<Vec<_>>(), *h);
        }
        t
    }

    /// Adds one hint at `path` (one key per element).
    pub fn insert(&mut self, path: &[&str], hint: Hint) {
        let mut node = self;
        for seg in path {
            node = node.children.entry((*seg).to_string()).or_default();
        }
        node.hint = Some(hint);
    }

    /// The subtree for a key, if any hint lives below it.
    pub fn child(&self, key: &str) -> Option<&HintTree> {
        self.children.get(key)
    }

    /// Applies the hints to one record (an object) in place; returns what could not be converted.
    pub fn apply(&self, record: &mut Value) -> Vec<Unparsed> {
        let mut failed = Vec::new();
        if let Value::Object(entries) = record {
            let mut path = String::new();
            self.apply_object(entries, &mut path, &mut failed);
        }
        failed
    }

    fn apply_object(
        &self,
        entries: &mut [(String, Value)],
        path: &mut String,
        failed: &mut Vec<Unparsed>,
    ) {
        for (k, v) in entries.iter_mut() {
            if let Some(node) = self.children.get(k) {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                node.apply_value(v, path, failed);
                path.truncate(len);
            }
        }
    }

    fn apply_value(&self, v: &mut Value, path: &mut String, failed: &mut Vec<Unparsed>) {
        match v {
            Value::List(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    self.apply_value(item, path, failed);
                    path.truncate(len);
                }
            }
            Value::Object(entries) if !self.children.is_empty() => {
                self.apply_object(entries, path, failed)
            }
            _ => {
                if let Some(h) = self.hint {
                    if let Err(orig) = convert(h, v) {
                        failed.push((path.clone(), orig));
                    }
                }
            }
        }
    }

    /// Returns `schema` with `silt.source_type` field metadata on every hinted field present.
    pub fn annotate(&self, schema: Schema) -> Schema {
        let md = schema.metadata().clone();
        Schema::new_with_metadata(self.annotate_fields(schema.fields()), md)
    }

    fn annotate_fields(&self, fields: &Fields) -> Fields {
        fields
            .iter()
            .map(|f| match self.children.get(f.name()) {
                Some(node) => Arc::new(node.annotate_field(f)),
                None => f.clone(),
            })
            .collect()
    }

    fn annotate_field(&self, f: &Field) -> Field {
        let dt = self.annotate_type(f.data_type());
        let mut out = f.clone().with_data_type(dt);
        if let Some(h) = self.hint {
            let fits = |t: &DataType| match h {
                Hint::Timestamp => matches!(t, DataType::Timestamp(_, _)),
                Hint::UInt64 => *t == DataType::UInt64,
                Hint::Addr => *t == DataType::Utf8,
            };
            let st = match f.data_type() {
                t if fits(t) => Some(h.source_type().to_string()),
                DataType::List(item) if fits(item.data_type()) => {
                    Some(format!("vector[{}]", h.source_type()))
                }
                _ => None,
            };
            if let Some(st) = st {
                let mut md = out.metadata().clone();
                md.insert(SOURCE_TYPE.to_string(), st);
                out = out.with_metadata(md);
            }
        }
        out
    }

    fn annotate_type(&self, t: &DataType) -> DataType {
        if self.children.is_empty() {
            return t.clone();
        }
        match t {
            DataType::Struct(fields) => DataType::Struct(self.annotate_fields(fields)),
            DataType::List(item) => DataType::List(Arc::new(
                item.as_ref()
                    .clone()
                    .with_data_type(self.annotate_type(item.data_type())),
            )),
            other => other.clone(),
        }
    }
}

/// Converts one leaf value; on failure the value becomes null and the original is returned.
fn convert(h: Hint, v: &mut Value) -> Result<(), Value> {
    let new = match (h, &*v) {
        (_, Value::Null) => return Ok(()),
        (Hint::Timestamp, Value::Time(_)) => return Ok(()),
        (Hint::Timestamp, Value::Str(s)) => silt_core::time::parse_iso8601(s)
            .or_else(|| silt_core::time::parse_epoch_seconds(s.trim()))
            .map(Value::Time),
        (Hint::Timestamp, Value::Int(i)) => i.checked_mul(1_000_000).map(Value::Time),
        (Hint::Timestamp, Value::UInt(u)) => i64::try_from(*u)
            .ok()
            .and_then(|i| i.checked_mul(1_000_000))
            .map(Value::Time),
        (Hint::Timestamp, Value::Float(f)) => {
            silt_core::time::float_seconds_to_micros(*f).map(Value::Time)
        }
        (Hint::UInt64, Value::UInt(_)) => return Ok(()),
        (Hint::UInt64, Value::Int(i)) => u64::try_from(*i).ok().map(Value::UInt),
        (Hint::UInt64, Value::Str(s)) => parse_u64_digits(s).map(Value::UInt),
        (Hint::Addr, Value::Str(s)) => {
            if let Some(c) = silt_core::addr::canonical_addr(s) {
                if c != *s {
                    *v = Value::Str(c);
                }
            }
            return Ok(());
        }
        (Hint::Addr, _) => return Ok(()),
        _ => None,
    };
    match new {
        Some(n) => {
            *v = n;
            Ok(())
        }
        None => Err(std::mem::replace(v, Value::Null)),
    }
}

/// A string of ASCII decimal digits as `u64` (`str::parse` would also accept a leading `+`).
pub fn parse_u64_digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Adds the [`UNPARSED_COLUMN`] entry to a record when hints failed. If the record already has a
/// key of that name, its value is kept inside the new object under the same key.
pub fn attach_unparsed(record: &mut Value, failed: Vec<Unparsed>) {
    if failed.is_empty() {
        return;
    }
    let Value::Object(entries) = record else {
        return;
    };
    let mut obj: Vec<(String, Value)> = Vec::with_capacity(failed.len() + 1);
    if let Some(pos) = entries.iter().position(|(k, _)| k == UNPARSED_COLUMN) {
        let (_, old) = entries.remove(pos);
        obj.push((UNPARSED_COLUMN.to_string(), old));
    }
    for (p, v) in failed {
        match obj.iter_mut().find(|(k, _)| *k == p) {
            Some(e) => e.1 = v,
            None => obj.push((p, v)),
        }
    }
    entries.push((
        UNPARSED_COLUMN.to_string(),
        Value::Str(Value::Object(obj).to_json()),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> HintTree {
        HintTree::from_paths(&[
            ("timestamp", Hint::Timestamp),
            ("flow.start", Hint::Timestamp),
            ("stats.engines.last_reload", Hint::Timestamp),
            ("flow_id", Hint::UInt64),
            ("src_ip", Hint::Addr),
            ("dns.grouped.AAAA", Hint::Addr),
        ])
    }

    #[test]
    fn converts_and_collects_failures() {
        let mut v = Value::from_slice(
            br#"{"timestamp":"2017-06-19T14:01:38.082123+0200","flow_id":7,"src_ip":"2a03:b0c0:0002:00d0:0000:0000:0bd3:4001",
                "flow":{"start":"garbage","end":"2017-06-19T14:01:38+0200"},
                "stats":{"engines":[{"last_reload":"2020-01-01T00:00:00Z"},{"last_reload":5}]},
                "dns":{"grouped":{"AAAA":["2001:DB8::1","not-an-ip"]}}}"#,
        )
        .unwrap();
        let failed = tree().apply(&mut v);
        assert_eq!(
            v.get("timestamp"),
            Some(&Value::Time(1_497_873_698_082_123))
        );
        assert_eq!(v.get("flow_id"), Some(&Value::UInt(7)));
        assert_eq!(
            v.get("src_ip"),
            Some(&Value::Str("2a03:b0c0:2:d0::bd3:4001".into()))
        );
        assert_eq!(v.get("flow").unwrap().get("start"), Some(&Value::Null));
        // Not hinted: stays text.
        assert!(matches!(
            v.get("flow").unwrap().get("end"),
            Some(Value::Str(_))
        ));
        let engines = v.get("stats").unwrap().get("engines").unwrap();
        let Value::List(e) = engines else { panic!() };
        assert_eq!(
            e[0].get("last_reload"),
            Some(&Value::Time(1_577_836_800_000_000))
        );
        assert_eq!(e[1].get("last_reload"), Some(&Value::Time(5_000_000)));
        let aaaa = v
            .get("dns")
            .unwrap()
            .get("grouped")
            .unwrap()
            .get("AAAA")
            .unwrap();
        assert_eq!(
            aaaa,
            &Value::List(vec![
                Value::Str("2001:db8::1".into()),
                Value::Str("not-an-ip".into())
            ])
        );
        assert_eq!(
            failed,
            vec![("flow.start".to_string(), Value::Str("garbage".into()))]
        );
        attach_unparsed(&mut v, failed);
        assert_eq!(
            v.get(UNPARSED_COLUMN),
            Some(&Value::Str(r#"{"flow.start":"garbage"}"#.into()))
        );
    }

    #[test]
    fn uint_hint_rejects_negative_and_fractions() {
        for (text, ok) in [
            ("5", true),
            ("\"12\"", true),
            ("-1", false),
            ("1.0", false),
            ("\"+1\"", false),
            ("true", false),
        ] {
            let mut v = Value::from_slice(format!("{{\"flow_id\":{text}}}").as_bytes()).unwrap();
            let failed = tree().apply(&mut v);
            assert_eq!(failed.is_empty(), ok, "{text}");
        }
    }
}
