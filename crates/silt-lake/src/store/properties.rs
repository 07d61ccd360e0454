//! A Parquet file's writer properties from the configuration and the schema alone: the codec and
//! its level (including zstd's negative levels), page and dictionary page sizes, page-level
//! statistics, time columns delta-encoded without a dictionary, bloom filters (which lookup
//! columns silt builds itself, [`Blooms`], and which parquet-rs builds), `sorting_columns` and
//! silt's schema metadata as key-value metadata. The per-column choices judged on data
//! (`choices`) and the user's hints (`hints`) are applied on top of these.
//!
//! Touches nothing: it only computes.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Fields, Schema};
use parquet::arrow::{parquet_to_arrow_schema, ArrowSchemaConverter};
use parquet::basic::{BrotliLevel, Compression, Encoding, GzipLevel, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{
    EnabledStatistics, WriterProperties, WriterPropertiesBuilder, WriterVersion,
};
use parquet::schema::types::ColumnPath;

use super::paths::{leaf_paths, through_structs};
use crate::bloom::BloomBuilder;
use crate::config::{Codec, WriterConfig};

/// The parquet-rs codec for a configuration.
pub fn compression(codec: Codec, level: Option<i32>) -> anyhow::Result<Compression> {
    Ok(match codec {
        Codec::Zstd => Compression::ZSTD(zstd_level(level.unwrap_or(1))?),
        Codec::Snappy => Compression::SNAPPY,
        Codec::Lz4 => Compression::LZ4_RAW,
        Codec::Gzip => Compression::GZIP(GzipLevel::try_new(level.unwrap_or(6) as u32)?),
        Codec::Brotli => Compression::BROTLI(BrotliLevel::try_new(level.unwrap_or(1) as u32)?),
        Codec::None => Compression::UNCOMPRESSED,
    })
}

/// A zstd level for parquet-rs, including zstd's negative "fast" levels.
///
/// parquet-rs's `ZstdLevel::try_new` only accepts 1..=22, although its codec hands the level
/// straight to libzstd, which also accepts -7..=-1 (faster, larger). Those levels are part of
/// what users compare (`--level -5`), so for them we build the value directly; `ZstdLevel` is a
/// one-field tuple struct around `i32` (checked by the size assertion below and by the
/// `negative_zstd_levels_take_effect` test, which fails if the level were ignored).
fn zstd_level(level: i32) -> anyhow::Result<ZstdLevel> {
    if level >= 1 {
        return Ok(ZstdLevel::try_new(level)?);
    }
    anyhow::ensure!(
        (-7..=-1).contains(&level),
        "zstd level {level} is out of range (-7..=-1 or 1..=22)"
    );
    const _: () = assert!(std::mem::size_of::<ZstdLevel>() == std::mem::size_of::<i32>());
    // SAFETY: ZstdLevel is `struct ZstdLevel(i32)` with no other fields or invariants that the
    // codec relies on beyond passing the value to libzstd, which accepts negative levels.
    let l: ZstdLevel = unsafe { std::mem::transmute::<i32, ZstdLevel>(level) };
    anyhow::ensure!(l.compression_level() == level, "zstd level layout changed");
    Ok(l)
}

/// The lookup columns whose bloom filters silt builds ([`crate::bloom`]): leaf index and dotted
/// path, with the filters' sizing.
pub(super) struct Blooms {
    ndv: u64,
    fpp: f64,
    columns: Vec<(usize, String)>,
}

impl Blooms {
    /// Empty filters for one row group, by leaf index.
    pub(super) fn builders(
        &self,
        leaves: usize,
    ) -> anyhow::Result<Vec<Option<(BloomBuilder, String)>>> {
        let mut out: Vec<Option<(BloomBuilder, String)>> = (0..leaves).map(|_| None).collect();
        for (leaf, path) in &self.columns {
            out[*leaf] = Some((BloomBuilder::new(self.ndv, self.fpp)?, path.clone()));
        }
        Ok(out)
    }
}

/// The writer properties that follow from `cfg` and `schema` (see the module doc), and the
/// bloom filters silt builds itself.
pub(super) fn parquet_properties(
    cfg: &WriterConfig,
    schema: &Schema,
    sort: &[String],
    expected_rows: usize,
) -> anyhow::Result<(WriterPropertiesBuilder, Blooms)> {
    let mut b = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_compression(compression(cfg.codec, cfg.level)?)
        .set_max_row_group_row_count(None)
        .set_max_row_group_bytes(None)
        .set_data_page_size_limit(cfg.page_bytes)
        .set_data_page_row_count_limit(cfg.page_rows)
        .set_dictionary_page_size_limit(cfg.page_bytes)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_created_by(format!(
            "silt {} {}",
            env!("CARGO_PKG_VERSION"),
            crate::checksum::CREATED_BY_MARK
        ));

    let leaves = leaf_paths(schema);
    // Time columns: sorted (or nearly) 64-bit integers; a dictionary only costs space there,
    // delta encoding shrinks them to a few bits per row.
    for (path, dt) in &leaves {
        if matches!(dt, DataType::Timestamp(_, _)) {
            let cp = ColumnPath::new(path.clone());
            b = b
                .set_column_dictionary_enabled(cp.clone(), false)
                .set_column_encoding(cp, Encoding::DELTA_BINARY_PACKED);
        }
        // Strings get a larger dictionary page than numbers (see `dictionary_page_bytes`).
        if matches!(
            dt,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        ) {
            b = b.set_column_dictionary_page_size_limit(
                ColumnPath::new(path.clone()),
                cfg.dictionary_page_bytes,
            );
        }
    }

    let mut bloom: Vec<String> = cfg.bloom_columns.clone();
    if cfg.bloom_lookup_columns {
        bloom.extend(silt_core::meta::lookup_columns(schema));
    }
    bloom.sort();
    bloom.dedup();
    let ndv = expected_rows.clamp(1024, 1 << 20) as u64;
    let mut ours = Blooms {
        ndv,
        fpp: cfg.bloom_fpp,
        columns: Vec::new(),
    };
    for col in bloom {
        let path: Vec<String> = col.split('.').map(str::to_string).collect();
        match leaves.iter().position(|(p, _)| *p == path) {
            Some(leaf)
                if crate::bloom::supported(&leaves[leaf].1) && through_structs(schema, &path) =>
            {
                ours.columns.push((leaf, col));
            }
            Some(_) => {
                let cp = ColumnPath::new(path);
                b = b
                    .set_column_bloom_filter_enabled(cp.clone(), true)
                    .set_column_bloom_filter_fpp(cp.clone(), cfg.bloom_fpp)
                    .set_column_bloom_filter_max_ndv(cp, ndv);
            }
            None => {}
        }
    }

    let sorting: Vec<SortingColumn> = sort
        .iter()
        .filter_map(|s| {
            let path: Vec<String> = s.split('.').map(str::to_string).collect();
            leaves
                .iter()
                .position(|(p, _)| *p == path)
                .map(|i| SortingColumn {
                    column_idx: i as i32,
                    descending: false,
                    nulls_first: true,
                })
        })
        .collect();
    if sorting.len() == sort.len() && !sorting.is_empty() {
        b = b.set_sorting_columns(Some(sorting));
    }

    let mut kv: Vec<KeyValue> = schema
        .metadata()
        .iter()
        // A file's checksum is its own: the one a file read back carries in its schema's
        // metadata (compaction's inputs) must not be copied into the file it is written to.
        .filter(|(k, _)| k.starts_with("silt.") && k.as_str() != crate::checksum::KEY)
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
        .collect();
    let mut types = serde_json::Map::new();
    source_types(schema.fields(), "", &mut types);
    if !types.is_empty() {
        kv.push(KeyValue::new(
            SOURCE_TYPES.to_string(),
            serde_json::Value::Object(types).to_string(),
        ));
    }
    if !kv.is_empty() {
        b = b.set_key_value_metadata(Some(kv));
    }
    Ok((b, ours))
}

/// File key-value metadata: the fields' `silt.source_type` ([`silt_core::meta::SOURCE_TYPE`]) as
/// one JSON object from dotted field path (struct children `id.orig_h`, list items by their
/// field name, `answers.item.rdata`) to type.
///
/// Why not as field metadata inside the embedded Arrow schema, where the batches carry it: there
/// it repeats the key for every field and is base64-encoded again, 1,660 of the 3,464 bytes of a
/// `zeek.conn` file's `ARROW:schema`, and a file of a few hundred rows must not cost more than
/// DuckDB's (issue 21). The embedded schema therefore keeps the types only ([`stored_schema`]).
pub const SOURCE_TYPES: &str = "silt.source_types";

fn source_types(
    fields: &Fields,
    prefix: &str,
    out: &mut serde_json::Map<String, serde_json::Value>,
) {
    for f in fields {
        let path = format!("{prefix}{}", f.name());
        if let Some(t) = f.metadata().get(silt_core::meta::SOURCE_TYPE) {
            out.insert(path.clone(), serde_json::Value::String(t.clone()));
        }
        match f.data_type() {
            DataType::Struct(children) => source_types(children, &format!("{path}."), out),
            DataType::List(item)
            | DataType::LargeList(item)
            | DataType::FixedSizeList(item, _)
            | DataType::Map(item, _) => {
                source_types(&Fields::from(vec![item.clone()]), &format!("{path}."), out)
            }
            _ => {}
        }
    }
}

/// The schema a Parquet file embeds as `ARROW:schema`: `schema`'s types without metadata. The
/// field metadata goes to [`SOURCE_TYPES`] and the schema metadata (`silt.table`, ...) is in the
/// file's key-value metadata already, which Arrow readers (arrow-rs, pyarrow) merge into the
/// schema they read.
pub fn stored_schema(schema: &Schema) -> Schema {
    Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| plain_field(f))
            .collect::<Vec<_>>(),
    )
}

/// Whether a Parquet file of `stored` (a [`stored_schema`]) must embed it as `ARROW:schema`:
/// only when Parquet's own schema, read back by arrow-rs without that hint, does not give
/// `stored` exactly (durations, dictionaries, large and view types, a time zone other than
/// `UTC`, ...). Otherwise the embedded schema tells no reader anything: arrow-rs (DataFusion)
/// and pyarrow rebuild the same types from Parquet's logical types (UTC-adjusted timestamps as
/// `UTC`, unsigned and narrow integers, decimals, lists and structs with their field names),
/// and DuckDB, Spark, Trino and Athena never read it. It is 1,592 of the 8,992 bytes of a
/// 100-row `zeek.conn` file, the difference between silt's small files and DuckDB's (issue 21).
pub fn needs_arrow_schema(stored: &Schema, coerce_types: bool) -> bool {
    let Ok(descr) = ArrowSchemaConverter::new()
        .with_coerce_types(coerce_types)
        .convert(stored)
    else {
        return true;
    };
    match parquet_to_arrow_schema(&descr, None) {
        Ok(back) => back.fields() != stored.fields(),
        Err(_) => true,
    }
}

fn plain_field(f: &Field) -> Field {
    let t = match f.data_type() {
        DataType::Struct(children) => {
            DataType::Struct(children.iter().map(|c| plain_field(c)).collect())
        }
        DataType::List(item) => DataType::List(Arc::new(plain_field(item))),
        DataType::LargeList(item) => DataType::LargeList(Arc::new(plain_field(item))),
        DataType::FixedSizeList(item, n) => {
            DataType::FixedSizeList(Arc::new(plain_field(item)), *n)
        }
        DataType::Map(entries, sorted) => DataType::Map(Arc::new(plain_field(entries)), *sorted),
        t => t.clone(),
    };
    Field::new(f.name(), t, f.is_nullable())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::TimeUnit;

    #[test]
    fn the_arrow_schema_is_embedded_only_when_parquet_cannot_say_it() {
        let utc = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let item = Arc::new(Field::new("item", DataType::Utf8, true));
        let plain = Schema::new(vec![
            Field::new("ts", utc.clone(), false),
            Field::new(
                "id",
                DataType::Struct(Fields::from(vec![
                    Field::new("orig_h", DataType::Utf8, true),
                    Field::new("orig_p", DataType::UInt16, true),
                ])),
                true,
            ),
            Field::new("duration", DataType::Decimal128(18, 6), true),
            Field::new("orig_bytes", DataType::UInt64, true),
            Field::new("tunnel_parents", DataType::List(item), true),
            Field::new("local_orig", DataType::Boolean, true),
            Field::new("n", DataType::Int32, true),
            Field::new("f", DataType::Float64, true),
        ]);
        assert!(!needs_arrow_schema(&plain, false));
        for t in [
            DataType::Duration(TimeUnit::Microsecond),
            DataType::Timestamp(TimeUnit::Microsecond, Some("+01:00".into())),
            DataType::LargeUtf8,
            DataType::Utf8View,
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        ] {
            let mut fields = plain.fields().to_vec();
            fields.push(Arc::new(Field::new("x", t.clone(), true)));
            assert!(needs_arrow_schema(&Schema::new(fields), false), "{t}");
        }
    }

    #[test]
    fn zstd_levels() {
        assert_eq!(zstd_level(-5).unwrap().compression_level(), -5);
        assert_eq!(zstd_level(19).unwrap().compression_level(), 19);
        assert!(zstd_level(0).is_err());
        assert!(zstd_level(23).is_err());
        assert!(zstd_level(-8).is_err());
    }
}
