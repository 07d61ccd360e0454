//! The schema of a table whose every file a retention dropped, so the table stays queryable:
//! `SELECT count(*)` answers 0 and `SELECT *` has the columns it had, where without any file
//! nothing would say what the columns were and a query would fail with "table not found".
//!
//! `<lake>/_silt/tables/<module.type>.schema.arrow` is an Arrow IPC file without record
//! batches. Its schema is the unification ([`silt_core::schema::unify_schemas`]) of the dropped
//! files' schemas, with the first file's metadata (the time column, the sort keys), and
//! [`MONTH_KEY`] when the table was partitioned by month (its queries then have a `month`
//! column). It is read only for a table that has no data file: once an import writes one, the
//! files say what the table is again.
//!
//! Written by `silt retain` (local and object-store lakes) just before it drops a table's last
//! partitions; read by the query engine's lake index. Touches only that file.

use std::path::{Path, PathBuf};

use anyhow::Context;
use arrow::datatypes::{Schema, SchemaRef};
use arrow::ipc::writer::FileWriter;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::reader::ChunkReader;
use silt_core::TableName;

use crate::config::StoreKind;
use crate::granularity::TABLES_DIR;

/// File-name suffix of a kept schema, after the table name.
pub const SUFFIX: &str = ".schema.arrow";

/// Schema metadata key set (to `true`) when the table's partitions were `month=` directories.
pub const MONTH_KEY: &str = "silt.month_partitions";

/// Where a table's kept schema lives, relative to the lake root (`/`-separated).
pub fn rel(table: &TableName) -> String {
    format!("{TABLES_DIR}/{table}{SUFFIX}")
}

/// Where a table's kept schema lives in a local lake.
pub fn path(root: &Path, table: &TableName) -> PathBuf {
    root.join(rel(table))
}

/// The table a kept schema's relative path names (`_silt/tables/zeek.conn.schema.arrow`).
pub fn table_of(rel: &str) -> Option<TableName> {
    let name = rel.strip_prefix(TABLES_DIR)?.strip_prefix('/')?;
    TableName::parse(name.strip_suffix(SUFFIX)?)
}

/// The bytes of a kept schema: `schema` with [`MONTH_KEY`] when `month`.
pub fn encode(schema: &Schema, month: bool) -> anyhow::Result<Vec<u8>> {
    let mut md = schema.metadata().clone();
    md.remove(MONTH_KEY);
    if month {
        md.insert(MONTH_KEY.into(), "true".into());
    }
    let schema = Schema::new_with_metadata(schema.fields().clone(), md);
    let mut out = Vec::new();
    let mut w = FileWriter::try_new(&mut out, &schema)?;
    w.finish()?;
    drop(w);
    Ok(out)
}

/// A kept schema from its bytes, and whether the table was partitioned by month.
pub fn decode(bytes: &[u8]) -> anyhow::Result<(Schema, bool)> {
    let r = crate::ipc::open(std::io::Cursor::new(bytes))?;
    let mut schema = r.schema().as_ref().clone();
    let month = schema.metadata.remove(MONTH_KEY).is_some();
    Ok((schema, month))
}

/// Writes a table's kept schema into a local lake (temporary name, fsync, rename).
pub fn save(root: &Path, table: &TableName, schema: &Schema, month: bool) -> anyhow::Result<()> {
    let p = path(root, table);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
    }
    crate::publish::write_atomic(&p, &encode(schema, month)?)
}

/// A local lake's kept schema of `table`, if it has one.
pub fn load(root: &Path, table: &TableName) -> anyhow::Result<Option<(Schema, bool)>> {
    let p = path(root, table);
    match std::fs::read(&p) {
        Ok(b) => decode(&b)
            .map(Some)
            .with_context(|| format!("{} is not a kept table schema", p.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
    }
}

/// The Arrow schema of a data file: a Parquet footer read from `r`, or a Feather file's schema
/// message read from `reader(r)`.
pub fn file_schema<C, R>(
    store: StoreKind,
    r: C,
    reader: impl FnOnce(C) -> R,
) -> anyhow::Result<SchemaRef>
where
    C: ChunkReader + 'static,
    R: std::io::Read + std::io::Seek,
{
    Ok(match store {
        StoreKind::Parquet => ArrowReaderMetadata::load(&r, ArrowReaderOptions::new())?
            .schema()
            .clone(),
        StoreKind::Feather => crate::ipc::open(reader(r))?.schema(),
    })
}

/// Reads the schemas of a local table's `files` (paths with their store kinds) and keeps their
/// unification as the table's schema; files that cannot be read are left out (a table none of
/// whose files can be read keeps nothing).
pub fn keep_local(
    root: &Path,
    table: &TableName,
    files: &[(PathBuf, StoreKind)],
    month: bool,
) -> anyhow::Result<()> {
    let schemas: Vec<SchemaRef> = files
        .iter()
        .filter_map(|(p, store)| {
            let f = std::fs::File::open(p).ok()?;
            file_schema(*store, f, |f| f).ok()
        })
        .collect();
    if schemas.is_empty() {
        return Ok(());
    }
    save(root, table, &silt_core::schema::unify_all(&schemas), month)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field};

    #[test]
    fn round_trip_keeps_fields_metadata_and_month() {
        let mut md = std::collections::HashMap::new();
        md.insert("silt.time_column".to_string(), "ts".to_string());
        let s = Schema::new_with_metadata(
            vec![
                Field::new("ts", DataType::Int64, true),
                Field::new("uid", DataType::Utf8, true),
            ],
            md,
        );
        for month in [false, true] {
            let (back, m) = decode(&encode(&s, month).unwrap()).unwrap();
            assert_eq!(back, s);
            assert_eq!(m, month);
        }
        let t = TableName::parse("zeek.conn").unwrap();
        assert_eq!(table_of(&rel(&t)), Some(t));
        assert_eq!(table_of("_silt/tables/zeek.conn.json"), None);
    }
}
