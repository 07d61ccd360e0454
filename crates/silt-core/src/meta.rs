//! Schema metadata keys that readers set and the lake writer and query engine read.
//!
//! They travel inside the Arrow schema and are stored in each Parquet/Feather file's key-value
//! metadata, so the files stay self-describing ("the files themselves are the truth").

/// Schema metadata: name of the event-time column (a `Timestamp(Microsecond, "UTC")` column),
/// e.g. `ts` for Zeek, `timestamp` for Suricata EVE. The writer partitions and sorts by it.
pub const TIME_COLUMN: &str = "silt.time_column";

/// Schema metadata: comma-separated column paths (`uid`, `id.orig_h`) that deserve a Parquet
/// bloom filter because users look single values up in them.
pub const LOOKUP_COLUMNS: &str = "silt.lookup_columns";

/// Schema metadata: the table name (`zeek.conn`).
pub const TABLE: &str = "silt.table";

/// Field metadata: the source format's own type name, e.g. Zeek's `addr`, `set[string]`,
/// `interval`, kept so that a lake file documents what it was made from.
pub const SOURCE_TYPE: &str = "silt.source_type";

/// Returns the event-time column named in a schema's metadata, if any.
pub fn time_column(schema: &arrow::datatypes::Schema) -> Option<&str> {
    schema.metadata().get(TIME_COLUMN).map(String::as_str)
}

/// Returns the lookup columns named in a schema's metadata.
pub fn lookup_columns(schema: &arrow::datatypes::Schema) -> Vec<String> {
    schema
        .metadata()
        .get(LOOKUP_COLUMNS)
        .map(|s| {
            s.split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}
