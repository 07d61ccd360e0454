//! Schema tags: a data file's name says which schema it was written with, so that a reader of
//! an object-store lake learns a table's columns from one footer per schema rather than from
//! every file's.
//!
//! Every data file silt writes into a lake is named `<time>-<uuid>-s<tag>.<ext>`
//! ([`crate::layout::data_file_name`]), where the tag is a 64-bit hash ([`tag`]) of the Arrow
//! schema handed to the file's writer (fields, types, nullability, field and schema metadata, in
//! a canonical order) and of the storage format. The schema a reader gets back from the file's
//! footer is a function of exactly those (the writer derives what it stores of the schema from
//! the schema alone; encodings, statistics and the like vary with the rows but are not part of
//! it), so two files of a lake with the same tag read back with the same schema.
//!
//! Why: a query on an object-store lake from a new machine had to read every footer of every
//! table it names (a request or two per file) before it could plan, although a time filter
//! would then skip most files by their `dt=`/`hour=` directories. With tags, `silt query` reads
//! one footer per tag to build the table's schema and the footers of the files its filters keep
//! when it scans (`silt_query::lake`). Files without a tag (written before tags, or by another
//! tool) are read as before.
//!
//! [`TAG_VERSION`] is hashed in too: a change to how silt maps a schema to a footer must change
//! it, so that files written before and after never share a tag. A reader still checks each
//! footer it reads against the schema it assumed, so a wrong tag (a file renamed by hand) makes
//! the query fail with a message, never drop a column silently.
//!
//! Pure functions; touches nothing.

use std::hash::Hasher;

use arrow::datatypes::{DataType, Field, Schema};
use twox_hash::XxHash64;

use crate::config::StoreKind;

/// Bumped whenever the footer silt writes for a given schema changes in what a reader's schema
/// is made of (see the module documentation).
pub const TAG_VERSION: u32 = 1;

/// The tag of a file of format `store` written with `schema`.
pub fn tag(schema: &Schema, store: StoreKind) -> u64 {
    let mut h = XxHash64::with_seed(0);
    h.write(b"silt-schema-tag");
    h.write_u32(TAG_VERSION);
    h.write(store.extension().as_bytes());
    metadata(&mut h, schema.metadata().iter());
    fields(&mut h, schema.fields().iter().map(|f| f.as_ref()));
    h.finish()
}

/// The tag in a data file's name (`…-s<16 hex digits>.<ext>`), if it has one.
pub fn of_file_name(name: &str) -> Option<u64> {
    let stem = name.rsplit_once('.')?.0;
    let hex = stem.rsplit_once("-s")?.1;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Strings are written with their length first, so that no two different sequences of them
/// hash the same bytes.
fn text(h: &mut XxHash64, s: &str) {
    h.write_u64(s.len() as u64);
    h.write(s.as_bytes());
}

/// Metadata in key order (a `HashMap` iterates in a different order in every process).
fn metadata<'a>(h: &mut XxHash64, entries: impl Iterator<Item = (&'a String, &'a String)>) {
    let mut entries: Vec<_> = entries.collect();
    entries.sort();
    h.write_u64(entries.len() as u64);
    for (k, v) in entries {
        text(h, k);
        text(h, v);
    }
}

fn fields<'a>(h: &mut XxHash64, fs: impl ExactSizeIterator<Item = &'a Field>) {
    h.write_u64(fs.len() as u64);
    for f in fs {
        field(h, f);
    }
}

fn field(h: &mut XxHash64, f: &Field) {
    text(h, f.name());
    h.write_u8(f.is_nullable() as u8);
    metadata(h, f.metadata().iter());
    data_type(h, f.data_type());
}

/// Nested types by their children (whose metadata must be hashed in key order too); the others
/// by their `Debug` text, which names them completely (`Timestamp(Microsecond, Some("UTC"))`).
fn data_type(h: &mut XxHash64, t: &DataType) {
    match t {
        DataType::Struct(fs) => {
            text(h, "struct");
            fields(h, fs.iter().map(|f| f.as_ref()));
        }
        DataType::List(f) => {
            text(h, "list");
            field(h, f);
        }
        DataType::LargeList(f) => {
            text(h, "large_list");
            field(h, f);
        }
        DataType::ListView(f) => {
            text(h, "list_view");
            field(h, f);
        }
        DataType::LargeListView(f) => {
            text(h, "large_list_view");
            field(h, f);
        }
        DataType::FixedSizeList(f, n) => {
            text(h, "fixed_size_list");
            h.write_i32(*n);
            field(h, f);
        }
        DataType::Map(f, sorted) => {
            text(h, "map");
            h.write_u8(*sorted as u8);
            field(h, f);
        }
        DataType::Dictionary(k, v) => {
            text(h, "dictionary");
            data_type(h, k);
            data_type(h, v);
        }
        // Unions and run-end encoding are not written by silt's readers; their Debug text may
        // hold field metadata in a process's own order, which can only give a schema a second
        // tag (one more footer read), never two schemas one tag.
        other => text(h, &format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Arc;

    fn schema(meta: &[(&str, &str)]) -> Schema {
        let m: HashMap<String, String> = meta
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let id = Field::new(
            "id",
            DataType::Struct(
                vec![
                    Field::new("orig_h", DataType::Utf8, true).with_metadata(m.clone()),
                    Field::new("orig_p", DataType::UInt16, true),
                ]
                .into(),
            ),
            true,
        );
        Schema::new_with_metadata(
            vec![
                Field::new(
                    "ts",
                    DataType::Timestamp(
                        arrow::datatypes::TimeUnit::Microsecond,
                        Some("UTC".into()),
                    ),
                    true,
                ),
                id,
                Field::new(
                    "tags",
                    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                    true,
                ),
            ],
            m,
        )
    }

    #[test]
    fn equal_schemas_share_a_tag_whatever_the_metadata_order() {
        let meta = [
            ("a", "1"),
            ("b", "2"),
            ("c", "3"),
            ("silt.table", "zeek.conn"),
        ];
        let mut rev = meta;
        rev.reverse();
        assert_eq!(
            tag(&schema(&meta), StoreKind::Parquet),
            tag(&schema(&rev), StoreKind::Parquet)
        );
    }

    #[test]
    fn any_difference_changes_the_tag() {
        let base = schema(&[("silt.table", "zeek.conn")]);
        let t = tag(&base, StoreKind::Parquet);
        assert_ne!(t, tag(&base, StoreKind::Feather));
        assert_ne!(
            t,
            tag(&schema(&[("silt.table", "zeek.dns")]), StoreKind::Parquet)
        );
        assert_ne!(t, tag(&schema(&[]), StoreKind::Parquet));
        // A nested child's type, a field's nullability, a field's order.
        let mut fs: Vec<Field> = base.fields().iter().map(|f| f.as_ref().clone()).collect();
        let mut changed = fs.clone();
        changed[1] = Field::new(
            "id",
            DataType::Struct(vec![Field::new("orig_h", DataType::LargeUtf8, true)].into()),
            true,
        );
        let with = |fs: Vec<Field>| Schema::new_with_metadata(fs, base.metadata().clone());
        assert_ne!(t, tag(&with(changed), StoreKind::Parquet));
        fs[0] = fs[0].clone().with_nullable(false);
        assert_ne!(t, tag(&with(fs.clone()), StoreKind::Parquet));
        fs.swap(0, 2);
        assert_ne!(t, tag(&with(fs), StoreKind::Parquet));
    }

    #[test]
    fn tags_are_read_back_from_names() {
        let t = tag(&schema(&[]), StoreKind::Parquet);
        let name = crate::layout::data_file_name("parquet", t);
        assert_eq!(of_file_name(&name), Some(t));
        assert_eq!(of_file_name("20240101T000000-0123abcd.parquet"), None);
        assert_eq!(of_file_name("x-s0123.parquet"), None);
        assert_eq!(of_file_name("x-s0123456789abcdeg.parquet"), None);
        assert_eq!(
            of_file_name("x-s00000000000000ff.feather"),
            Some(255),
            "any extension"
        );
        assert_eq!(of_file_name("x-s00000000000000ff"), None, "no extension");
    }
}
