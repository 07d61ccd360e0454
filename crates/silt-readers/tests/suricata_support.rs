//! Helpers shared by the `suricata_*` tests (included with `#[path]`; as a test target of its
//! own it has no tests): conforming a table's batches, and a semantic comparison of an input
//! line with the row arrow's JSON writer prints for it, written independently of the reader.
#![allow(dead_code)]

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::Schema;
use arrow::record_batch::RecordBatch;
use serde_json::Value as J;

/// The corpus's `suricata/` directory: `$SILT_CORPUS/suricata`, else `../shared/corpus/suricata`
/// next to the repository; `None` (the caller skips) when absent.
pub fn corpus_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("SILT_CORPUS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
    };
    let p = base.join("suricata");
    p.is_dir().then_some(p)
}

/// All batches of one table conformed to their unified schema and concatenated. Also checks
/// that the running schema only grows: each batch's schema already holds the earlier ones.
pub fn unified(batches: &[&RecordBatch]) -> RecordBatch {
    let mut schema = Schema::empty();
    for (i, b) in batches.iter().enumerate() {
        let next = silt_core::schema::unify_schemas(&schema, &b.schema());
        if i > 0 {
            assert_eq!(
                next.fields(),
                b.schema().fields(),
                "schema of batch {i} does not contain earlier batches"
            );
        }
        schema = next;
    }
    let schema = Arc::new(schema);
    let conformed: Vec<RecordBatch> = batches
        .iter()
        .map(|b| silt_core::schema::conform(b, &schema).unwrap())
        .collect();
    arrow::compute::concat_batches(&schema, &conformed).unwrap()
}

/// Each row as JSON, by arrow's own writer (nulls omitted).
pub fn rows_as_json(b: &RecordBatch) -> Vec<J> {
    let mut buf = Vec::new();
    {
        let mut w = arrow::json::LineDelimitedWriter::new(&mut buf);
        w.write(b).unwrap();
        w.finish().unwrap();
    }
    buf.split(|&c| c == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

pub fn chrono_micros(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z")
        .ok()
        .map(|d| d.timestamp_micros())
        .or_else(|| {
            chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
                .ok()
                .map(|d| d.and_utc().timestamp_micros())
        })
}

pub fn canonical(s: &str) -> String {
    s.parse::<IpAddr>()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| s.to_string())
}

/// Removes the value at a dotted path (no array indexes) from `v`.
pub fn take_path(v: &mut J, path: &str) -> Option<J> {
    let (head, rest) = match path.split_once('.') {
        Some((h, r)) => (h, Some(r)),
        None => (path, None),
    };
    let obj = v.as_object_mut()?;
    match rest {
        None => obj.remove(head),
        Some(r) => take_path(obj.get_mut(head)?, r),
    }
}

/// Compares one input record with its output row: moves the values named in the row's
/// `_unparsed` column out of the input first (they must be equal), then [`same`].
pub fn same_row(orig: &J, out: &J) -> Result<(), String> {
    let mut orig = orig.clone();
    let mut out = out.clone();
    if let Some(u) = out.as_object_mut().and_then(|o| o.remove("_unparsed")) {
        let u: serde_json::Map<String, J> = serde_json::from_str(u.as_str().unwrap()).unwrap();
        for (p, v) in u {
            let taken = take_path(&mut orig, &p);
            if taken.as_ref() != Some(&v) {
                return Err(format!("_unparsed {p}: {v} but the input had {taken:?}"));
            }
        }
    }
    same(Some(&orig), Some(&out), "")
}

fn is_null(v: Option<&J>) -> bool {
    matches!(v, None | Some(J::Null))
}

/// An object that holds no data: `{}` or only null members (a struct with all fields null).
fn is_void_object(v: Option<&J>) -> bool {
    match v {
        Some(J::Object(o)) => o
            .values()
            .all(|v| is_null(Some(v)) || is_void_object(Some(v))),
        _ => false,
    }
}

/// `out` (written by arrow's JSON writer) holds the same data as `orig` (the input), allowing
/// for silt's documented conversions: absent == null; `{}` may be null, `{}` or `"{}"`; ints may
/// widen to floats; a single value may be a one-element list (rule 5); any value may be its JSON
/// text (rule 6); times may be rewritten in UTC; addresses canonicalized.
pub fn same(orig: Option<&J>, out: Option<&J>, path: &str) -> Result<(), String> {
    let err = || Err(format!("{path}: input {orig:?} became {out:?}"));
    if is_null(orig) {
        return if is_null(out) { Ok(()) } else { err() };
    }
    let (orig_v, out_v) = (orig.unwrap(), out);
    if is_void_object(Some(orig_v)) && (is_null(out_v) || is_void_object(out_v)) {
        return Ok(());
    }
    let Some(out_v) = out_v else { return err() };
    match (orig_v, out_v) {
        (J::Object(a), J::Object(b)) => {
            for (k, v) in a {
                let k2 = if k.is_empty() { "_" } else { k.as_str() };
                same(Some(v), b.get(k2), &format!("{path}.{k}"))?;
            }
            for (k, v) in b {
                let in_orig = a.contains_key(k) || (k == "_" && a.contains_key(""));
                if !in_orig && !is_null(Some(v)) {
                    return Err(format!("{path}.{k}: {v} is not in the input"));
                }
            }
            Ok(())
        }
        (J::Array(a), J::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                same(Some(v), Some(w), &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        // Rule 5: a single value in a list column.
        (v, J::Array(b)) if !v.is_array() && b.len() == 1 => same(Some(v), Some(&b[0]), path),
        (J::Number(a), J::Number(b)) => {
            if a.as_u64().is_some() && b.as_u64().is_some() && a.as_u64() != b.as_u64() {
                return err();
            }
            if a.as_i64().is_some() && b.as_i64().is_some() && a.as_i64() != b.as_i64() {
                return err();
            }
            let (x, y) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            if (x - y).abs() > 1e-9 * x.abs().max(1.0) {
                return err();
            }
            Ok(())
        }
        (J::String(a), J::String(b)) => {
            if a == b || canonical(a) == *b {
                return Ok(());
            }
            // Times: the same instant (the writer prints UTC with `Z`).
            match (chrono_micros(a), chrono::DateTime::parse_from_rfc3339(b)) {
                (Some(x), Ok(y)) if x == y.timestamp_micros() => Ok(()),
                _ => err(),
            }
        }
        // Rule 6: a conflicting value kept as JSON text.
        (v, J::String(b)) => match serde_json::from_str::<J>(b) {
            Ok(parsed) => same(Some(v), Some(&parsed), path),
            Err(_) => err(),
        },
        (J::Bool(a), J::Bool(b)) if a == b => Ok(()),
        _ => err(),
    }
}
