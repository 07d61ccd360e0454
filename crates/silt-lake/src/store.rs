//! File formats: a [`FileSink`] takes sorted batches and produces one Parquet or Feather file.
//!
//! Parquet files get: the configured codec and level, row groups cut at a compressed-size
//! target, dictionary encoding (parquet-rs falls back to plain for high-cardinality columns),
//! page-level statistics with the column and offset index, DELTA_BINARY_PACKED for time columns,
//! bloom filters on lookup columns, `sorting_columns` metadata, and silt's schema metadata as
//! key-value metadata next to the embedded Arrow schema.

use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;

use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::ipc::writer::{FileWriter as IpcFileWriter, IpcWriteOptions};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, Compression, Encoding, GzipLevel, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;

use crate::config::{Codec, StoreKind, WriterConfig};

/// Writes one file.
pub trait FileSink: Send {
    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()>;
    /// Bytes this sink holds in memory (the in-progress row group).
    fn memory_size(&self) -> usize;
    /// Writes the footer and returns the underlying writer for publishing.
    fn finish(self: Box<Self>) -> anyhow::Result<BufWriter<File>>;
}

/// Opens a sink for `schema` writing into `out`. `sort` are the sort-key column paths (for
/// Parquet `sorting_columns`), `expected_rows` a hint for sizing bloom filters.
pub fn open(
    cfg: &WriterConfig,
    schema: &SchemaRef,
    sort: &[String],
    expected_rows: usize,
    out: BufWriter<File>,
) -> anyhow::Result<Box<dyn FileSink>> {
    match cfg.store {
        StoreKind::Parquet => {
            let props = parquet_properties(cfg, schema, sort, expected_rows)?;
            let w = ArrowWriter::try_new(out, schema.clone(), Some(props))?;
            Ok(Box::new(ParquetSink {
                w,
                target: cfg.row_group_bytes,
                calibration: 1.0,
                bytes_per_row: None,
            }))
        }
        StoreKind::Feather => {
            let mut opts = IpcWriteOptions::default();
            let (ctype, level) = match cfg.codec {
                Codec::Zstd => (
                    Some(arrow::ipc::CompressionType::ZSTD),
                    Some(cfg.level.unwrap_or(1)),
                ),
                Codec::Lz4 => (Some(arrow::ipc::CompressionType::LZ4_FRAME), None),
                _ => (None, None),
            };
            opts = opts.try_with_compression(ctype)?;
            if level.is_some() {
                opts = opts.try_with_compression_level(level)?;
            }
            let w = IpcFileWriter::try_new_with_options(out, schema, opts)?;
            Ok(Box::new(FeatherSink { w }))
        }
    }
}

struct ParquetSink {
    w: ArrowWriter<BufWriter<File>>,
    /// Row-group target in compressed bytes.
    target: usize,
    /// Observed compressed size / parquet-rs's estimate, from the last row group.
    calibration: f64,
    /// Compressed bytes per row of the last row group.
    bytes_per_row: Option<f64>,
}

/// Rows handed to the Parquet writer at a time, at most.
const WRITE_SLICE_ROWS: usize = 8192;
/// Rows of the first slice written, before anything is known about the data's size per row.
const WRITE_PROBE_ROWS: usize = 256;

/// Cuts row groups at a compressed-size target itself rather than with parquet-rs's
/// `max_row_group_bytes`: parquet-rs compares its *estimate* of the encoded size, which
/// undercounts (dictionaries, page overhead) by up to several times, and checks only between
/// `write` calls. Here each flushed row group's real size calibrates the estimate for the next,
/// and large chunks are fed in slices sized to what still fits, so row groups really reach
/// (and do not overshoot) `--row-group-size`.
impl ParquetSink {
    fn estimated(&self) -> f64 {
        self.w.in_progress_size() as f64 * self.calibration
    }

    fn flush_row_group(&mut self) -> anyhow::Result<()> {
        let estimate = self.w.in_progress_size() as f64;
        self.w.flush()?;
        if let Some(rg) = self.w.flushed_row_groups().last() {
            if estimate > 0.0 {
                let observed = rg.compressed_size() as f64 / estimate;
                // Smooth, and keep within sane bounds: one odd row group must not derail the next.
                self.calibration = (0.5 * self.calibration + 0.5 * observed).clamp(0.05, 20.0);
            }
            if rg.num_rows() > 0 {
                self.bytes_per_row = Some(rg.compressed_size() as f64 / rg.num_rows() as f64);
            }
        }
        Ok(())
    }
}

impl FileSink for ParquetSink {
    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        let target = self.target as f64;
        let mut off = 0;
        while off < batch.num_rows() {
            let mut take = WRITE_SLICE_ROWS.min(batch.num_rows() - off);
            let rows = self.w.in_progress_rows();
            let per_row = if rows > 0 {
                Some(self.estimated() / rows as f64)
            } else {
                self.bytes_per_row
            };
            match per_row {
                Some(b) if b > 0.0 => {
                    let fit = ((target - self.estimated()) / b).floor().max(1.0) as usize;
                    take = take.min(fit);
                }
                // Nothing known yet about this data: a small first slice to learn from.
                _ => take = take.min(WRITE_PROBE_ROWS),
            }
            self.w.write(&batch.slice(off, take))?;
            off += take;
            if self.estimated() >= target {
                self.flush_row_group()?;
            }
        }
        Ok(())
    }

    fn memory_size(&self) -> usize {
        self.w.memory_size()
    }

    fn finish(self: Box<Self>) -> anyhow::Result<BufWriter<File>> {
        Ok(self.w.into_inner()?)
    }
}

struct FeatherSink {
    w: IpcFileWriter<BufWriter<File>>,
}

impl FileSink for FeatherSink {
    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        Ok(self.w.write(batch)?)
    }

    fn memory_size(&self) -> usize {
        0
    }

    fn finish(mut self: Box<Self>) -> anyhow::Result<BufWriter<File>> {
        self.w.finish()?;
        Ok(self.w.into_inner()?)
    }
}

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

fn parquet_properties(
    cfg: &WriterConfig,
    schema: &Schema,
    sort: &[String],
    expected_rows: usize,
) -> anyhow::Result<WriterProperties> {
    let mut b = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_compression(compression(cfg.codec, cfg.level)?)
        .set_max_row_group_row_count(None)
        .set_max_row_group_bytes(None)
        .set_data_page_size_limit(cfg.page_bytes)
        .set_dictionary_page_size_limit(cfg.page_bytes)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_created_by(format!("silt {}", env!("CARGO_PKG_VERSION")));

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
    }

    let mut bloom: Vec<String> = cfg.bloom_columns.clone();
    if cfg.bloom_lookup_columns {
        bloom.extend(silt_core::meta::lookup_columns(schema));
    }
    let ndv = expected_rows.clamp(1024, 1 << 20) as u64;
    for col in bloom {
        let path: Vec<String> = col.split('.').map(str::to_string).collect();
        if leaves.iter().any(|(p, _)| *p == path) {
            let cp = ColumnPath::new(path);
            b = b
                .set_column_bloom_filter_enabled(cp.clone(), true)
                .set_column_bloom_filter_fpp(cp.clone(), cfg.bloom_fpp)
                .set_column_bloom_filter_max_ndv(cp, ndv);
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

    let kv: Vec<KeyValue> = schema
        .metadata()
        .iter()
        .filter(|(k, _)| k.starts_with("silt."))
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
        .collect();
    if !kv.is_empty() {
        b = b.set_key_value_metadata(Some(kv));
    }
    Ok(b.build())
}

/// Parquet leaf column paths in schema order, with their Arrow types. Lists contribute
/// `name.list.element`-style paths that never equal a user's dotted path, so only struct
/// nesting is addressable by `a.b` (which is what bloom filters and sort keys need).
pub fn leaf_paths(schema: &Schema) -> Vec<(Vec<String>, DataType)> {
    fn walk(prefix: &mut Vec<String>, dt: &DataType, out: &mut Vec<(Vec<String>, DataType)>) {
        match dt {
            DataType::Struct(fields) => {
                for f in fields {
                    prefix.push(f.name().clone());
                    walk(prefix, f.data_type(), out);
                    prefix.pop();
                }
            }
            DataType::List(f) | DataType::LargeList(f) => {
                prefix.push("list".into());
                prefix.push(f.name().clone());
                walk(prefix, f.data_type(), out);
                prefix.pop();
                prefix.pop();
            }
            DataType::Map(f, _) => {
                prefix.push(f.name().clone());
                walk(prefix, f.data_type(), out);
                prefix.pop();
            }
            other => out.push((prefix.clone(), other.clone())),
        }
    }
    let mut out = Vec::new();
    for f in schema.fields() {
        let mut p = vec![f.name().clone()];
        walk(&mut p, f.data_type(), &mut out);
    }
    out
}

/// Convenience for tests and tools: the schema as an `Arc`.
pub fn arc(schema: Schema) -> SchemaRef {
    Arc::new(schema)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstd_levels() {
        assert_eq!(zstd_level(-5).unwrap().compression_level(), -5);
        assert_eq!(zstd_level(19).unwrap().compression_level(), 19);
        assert!(zstd_level(0).is_err());
        assert!(zstd_level(23).is_err());
        assert!(zstd_level(-8).is_err());
    }
}
