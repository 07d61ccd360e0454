//! Which columns get enriched and what the new columns are called.
//!
//! Touches only schemas. The naming rule (the one rule, also in `ENRICH.md`): take the address
//! column's name, keep its last dot-separated segment, strip one trailing `_h`, `_ip`, `_addr`
//! or `_address` (unless nothing would be left), then append `_asn`, `_as_org`, `_country`,
//! `_city` or `_rdns`. `id.orig_h` -> `orig_asn`; `src_ip` -> `src_asn`; `src` -> `src_asn`;
//! `remote_addr` -> `remote_asn`.
//!
//! Default columns: every string column (Utf8, LargeUtf8 or Utf8View), at top level or inside
//! structs, whose field metadata `silt.source_type` is `addr`, or whose last name segment is
//! one of [`ADDRESS_NAMES`]; and every list of strings whose metadata says `set[addr]` or
//! `vector[addr]` (Zeek's `files.tx_hosts`, `smtp.path`), whose new columns are lists of the
//! same shape (`tx_hosts_asn`: one ASN per address). `--enrich-columns` may name any string or
//! list-of-strings column.

use arrow::datatypes::{DataType, Field, Fields};
use silt_core::meta::SOURCE_TYPE;

/// Last name segments that mark an address column when no `silt.source_type=addr` says so.
pub const ADDRESS_NAMES: &[&str] = &[
    "src_ip",
    "dest_ip",
    "dst_ip",
    "src",
    "dst",
    "src_addr",
    "dst_addr",
    "remote_addr",
    "client_ip",
    "server_ip",
    "orig_h",
    "resp_h",
];

/// Suffixes stripped from the last segment, in the order tried.
pub const STRIPPED_SUFFIXES: &[&str] = &["_address", "_addr", "_ip", "_h"];

/// The prefix of the new columns' names for an address column named `name`.
pub fn output_prefix(name: &str) -> &str {
    let last = name.rsplit('.').next().unwrap_or(name);
    for s in STRIPPED_SUFFIXES {
        if let Some(p) = last.strip_suffix(s) {
            if !p.is_empty() {
                return p;
            }
        }
    }
    last
}

pub(crate) fn is_string(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    )
}

/// True when `f` (a string column) looks like an address column by default.
/// A list of strings (Zeek's `set[addr]`, `vector[addr]`).
pub(crate) fn is_string_list(dt: &DataType) -> bool {
    matches!(dt, DataType::List(f) | DataType::LargeList(f) if is_string(f.data_type()))
}

pub fn is_address_field(f: &Field) -> bool {
    let source_type = f.metadata().get(SOURCE_TYPE).map(String::as_str);
    if is_string_list(f.data_type()) {
        // A list is enriched by default only when its reader says it holds addresses.
        return matches!(source_type, Some("set[addr]" | "vector[addr]"));
    }
    if !is_string(f.data_type()) {
        return false;
    }
    if source_type == Some("addr") {
        return true;
    }
    let last = f.name().rsplit('.').next().unwrap_or(f.name());
    ADDRESS_NAMES.contains(&last)
}

/// Where an address column is: top-level index and the child indices inside structs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnPath {
    pub top: usize,
    pub children: Vec<usize>,
    /// The dotted path (`id.orig_h`) or the flat name.
    pub display: String,
    /// The leaf field's own name.
    pub leaf: String,
    /// The leaf is a list of addresses: each new column is a list of the same shape.
    pub list: bool,
}

/// Every default address column of `fields`, in schema order (depth first).
pub fn default_columns(fields: &Fields) -> Vec<ColumnPath> {
    let mut out = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        walk(f, i, &mut Vec::new(), f.name().clone(), &mut out);
    }
    out
}

fn walk(
    f: &Field,
    top: usize,
    children: &mut Vec<usize>,
    display: String,
    out: &mut Vec<ColumnPath>,
) {
    match f.data_type() {
        DataType::Struct(kids) => {
            for (j, k) in kids.iter().enumerate() {
                children.push(j);
                walk(k, top, children, format!("{display}.{}", k.name()), out);
                children.pop();
            }
        }
        _ if is_address_field(f) => out.push(ColumnPath {
            top,
            children: children.clone(),
            display,
            leaf: f.name().clone(),
            list: is_string_list(f.data_type()),
        }),
        _ => {}
    }
}

/// Resolves a user-given column: first as a top-level name (flat names may contain dots),
/// then as a dotted path into structs. `Ok(None)` when the table has no such column;
/// `Err` when it exists but is not a string column.
pub fn resolve_column(fields: &Fields, name: &str) -> Result<Option<ColumnPath>, String> {
    let check = |f: &Field, mut p: ColumnPath| {
        p.list = is_string_list(f.data_type());
        if is_string(f.data_type()) || p.list {
            Ok(Some(p))
        } else {
            Err(format!(
                "column {name:?} is {}, not a string column (or list of strings) of addresses",
                f.data_type()
            ))
        }
    };
    if let Some((i, f)) = fields.find(name) {
        return check(
            f,
            ColumnPath {
                top: i,
                children: Vec::new(),
                display: name.to_string(),
                leaf: f.name().clone(),
                list: false,
            },
        );
    }
    // Dotted path: try every split point so flat dotted names inside structs also resolve.
    let parts: Vec<&str> = name.split('.').collect();
    fn descend(fields: &Fields, parts: &[&str], acc: &mut Vec<usize>) -> Option<Field> {
        for n in 1..=parts.len() {
            let head = parts[..n].join(".");
            if let Some((i, f)) = fields.find(&head) {
                acc.push(i);
                if n == parts.len() {
                    return Some(f.as_ref().clone());
                }
                if let DataType::Struct(kids) = f.data_type() {
                    if let Some(r) = descend(kids, &parts[n..], acc) {
                        return Some(r);
                    }
                }
                acc.pop();
            }
        }
        None
    }
    let mut acc = Vec::new();
    match descend(fields, &parts, &mut acc) {
        Some(f) => {
            let top = acc.remove(0);
            check(
                &f,
                ColumnPath {
                    top,
                    children: acc,
                    display: name.to_string(),
                    leaf: f.name().clone(),
                    list: false,
                },
            )
        }
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Arc;

    #[test]
    fn naming_rule() {
        assert_eq!(output_prefix("id.orig_h"), "orig");
        assert_eq!(output_prefix("id.resp_h"), "resp");
        assert_eq!(output_prefix("src_ip"), "src");
        assert_eq!(output_prefix("dest_ip"), "dest");
        assert_eq!(output_prefix("src"), "src");
        assert_eq!(output_prefix("remote_addr"), "remote");
        assert_eq!(output_prefix("peer_address"), "peer");
        assert_eq!(output_prefix("tunnel.src_ip"), "src");
        assert_eq!(output_prefix("_ip"), "_ip");
        assert_eq!(output_prefix("h"), "h");
        assert_eq!(output_prefix("x_h_ip"), "x_h");
    }

    #[test]
    fn defaults_and_resolution() {
        let addr = HashMap::from([(SOURCE_TYPE.to_string(), "addr".to_string())]);
        let id = Fields::from(vec![
            Field::new("orig_h", DataType::Utf8, true).with_metadata(addr.clone()),
            Field::new("orig_p", DataType::UInt16, true),
            Field::new("resp_h", DataType::Utf8, true).with_metadata(addr.clone()),
        ]);
        let fields = Fields::from(vec![
            Field::new("ts", DataType::Utf8, true),
            Field::new("id", DataType::Struct(id), true),
            Field::new("x.peer", DataType::Utf8, true).with_metadata(addr),
            Field::new("dst", DataType::Utf8, true),
            Field::new("src", DataType::UInt32, true),
        ]);
        let d = default_columns(&fields);
        let names: Vec<&str> = d.iter().map(|c| c.display.as_str()).collect();
        assert_eq!(names, ["id.orig_h", "id.resp_h", "x.peer", "dst"]);
        assert_eq!(d[1].top, 1);
        assert_eq!(d[1].children, vec![2]);
        assert_eq!(
            resolve_column(&fields, "id.resp_h").unwrap(),
            Some(d[1].clone())
        );
        assert_eq!(
            resolve_column(&fields, "x.peer").unwrap(),
            Some(d[2].clone())
        );
        assert_eq!(resolve_column(&fields, "nope").unwrap(), None);
        assert!(resolve_column(&fields, "src").is_err());
        let _ = Arc::new(fields);
    }
}
