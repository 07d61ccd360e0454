//! File formats: a [`FileSink`] takes sorted batches and produces one Parquet or Feather file.
//!
//! Parquet files get: the configured codec and level, row groups cut at a compressed-size
//! target, dictionary encoding (parquet-rs falls back to plain for high-cardinality columns),
//! page-level statistics with the column and offset index (except in a file of one page per
//! column, [`open_whole`]), DELTA_BINARY_PACKED for time columns, bloom filters on lookup columns
//! (built by the `bloom` module for text and integer leaves, by parquet-rs for others),
//! `sorting_columns` metadata, and silt's schema metadata as key-value metadata next to the
//! embedded Arrow schema (which carries the types only: see `properties`). Per-column encoding hints
//! ([`crate::config::EncodingHints`]) are resolved by [`encoding_plan`] and applied last.
//!
//! [`open`] puts a Parquet file's writer properties together in three layers, each in a module
//! of its own, and hands them to the sink:
//! - `properties`: what follows from the configuration and the schema alone (codec and level,
//!   page sizes, time columns, bloom filters, `sorting_columns`, key-value metadata);
//! - `choices`: what silt decides per column from the file's first batch (no dictionary for
//!   high-cardinality leaves, the smallest text layout by trial, no min/max for text that comes in
//!   no order);
//! - `hints`: the user's per-column encoding hints, applied last ([`encoding_plan`]);
//! - `parquet_sink`: the Parquet sink (row groups cut at a compressed-size target, column
//!   chunks encoded in parallel); `feather`: the Feather (Arrow IPC) sink;
//! - `paths`: naming leaf columns (Parquet leaf paths, the user's dotted paths);
//! - `codec_state`: the memory each column's compression codec holds while a file is open.
//!
//! Touches only the writer it is given: every sink writes into `out` and nothing else.

mod choices;
mod codec_state;
mod feather;
mod hints;
mod parquet_sink;
mod paths;
mod properties;

use std::fs::File;
use std::io::BufWriter;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::file::properties::EnabledStatistics;

use crate::background::Background;
use crate::config::{StoreKind, WriterConfig};

pub use choices::CARDINALITY_SAMPLE;
pub use hints::{encoding_plan, ColumnEncoding};
pub use paths::leaf_paths;
pub use properties::{compression, stored_schema, SOURCE_TYPES};

/// Writes one file.
pub trait FileSink: Send {
    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()>;
    /// Bytes this sink holds in memory (the in-progress row group, with its codecs' state).
    fn memory_size(&self) -> usize;
    /// The part of [`Self::memory_size`] the compression codecs' state takes (zstd's contexts,
    /// which grow with the pages compressed).
    fn codec_memory(&self) -> usize {
        0
    }
    /// Writes the footer and returns the underlying writer for publishing.
    fn finish(self: Box<Self>) -> anyhow::Result<BufWriter<File>>;
}

/// Opens a sink for `schema` writing into `out`. `sort` are the sort-key column paths (for
/// Parquet `sorting_columns`), `expected_rows` a hint for sizing bloom filters. The sink encodes on
/// a thread of its own ([`Background`]): `write` returns once the batch is handed over.
pub fn open(
    cfg: &WriterConfig,
    schema: &SchemaRef,
    sort: &[String],
    expected_rows: usize,
    first: &RecordBatch,
    out: BufWriter<File>,
) -> anyhow::Result<Box<dyn FileSink>> {
    open_sink(cfg, schema, sort, expected_rows, None, first, out)
}

/// Opens a sink for a file of `rows` rows in all (written by the caller next, and nothing after
/// them), of which `first` are the first (all of them, or at least [`CARDINALITY_SAMPLE`]). A file
/// small enough for one page per column gets no page index: its column index would repeat the
/// column chunks' statistics and its offset index their one page's offset, about 50 bytes a
/// column, a tenth of a file of a hundred rows (issue 21: small files must not cost more than
/// DuckDB's).
pub fn open_whole(
    cfg: &WriterConfig,
    schema: &SchemaRef,
    sort: &[String],
    first: &RecordBatch,
    rows: usize,
    out: BufWriter<File>,
) -> anyhow::Result<Box<dyn FileSink>> {
    open_sink(cfg, schema, sort, rows, Some(rows), first, out)
}

/// Whether every column of `batch` fits in one data page (parquet-rs starts a new page at
/// `page_bytes` or `page_rows`).
fn one_page(cfg: &WriterConfig, batch: &RecordBatch) -> bool {
    batch.num_rows() <= cfg.page_rows
        && batch
            .columns()
            .iter()
            .all(|c| c.to_data().get_slice_memory_size().unwrap_or(usize::MAX) <= cfg.page_bytes)
}

/// `file_rows`: the rows the file will hold when the caller knows them (a file written whole);
/// otherwise the file is expected to grow to a full row group (a file that stays open for more
/// sorted rows: the partitioning is chosen so that files come near the row-group target), which
/// is what the encoding choices are judged for.
fn open_sink(
    cfg: &WriterConfig,
    schema: &SchemaRef,
    sort: &[String],
    expected_rows: usize,
    file_rows: Option<usize>,
    first: &RecordBatch,
    out: BufWriter<File>,
) -> anyhow::Result<Box<dyn FileSink>> {
    let sink: Box<dyn FileSink> = match cfg.store {
        StoreKind::Parquet => {
            let (props, blooms) = properties::parquet_properties(cfg, schema, sort, expected_rows)?;
            // A dictionary is per column chunk, so per row group at most.
            let chunk_rows = file_rows
                .unwrap_or(cfg.row_group_rows)
                .min(cfg.row_group_rows);
            let mut props = choices::apply(props, cfg, first, chunk_rows)?;
            let whole = file_rows == Some(first.num_rows());
            if whole && one_page(cfg, first) {
                props = props
                    .set_statistics_enabled(EnabledStatistics::Chunk)
                    .set_offset_index_disabled(true);
            }
            // The user's hints come last: they override the automatic choices.
            if !cfg.encodings.is_empty() {
                for c in encoding_plan(cfg, schema).map_err(anyhow::Error::msg)? {
                    props = c.apply(props, cfg.dictionary_page_bytes);
                }
            }
            Box::new(parquet_sink::ParquetSink::new(
                out,
                schema,
                props.build(),
                cfg.row_group_bytes,
                cfg.row_group_rows,
                blooms,
            )?)
        }
        StoreKind::Feather => Box::new(feather::FeatherSink::new(cfg, schema, out)?),
    };
    // The writer emits half a sort buffer at a time: one such half may wait while the encoder
    // works at the one before (see `background`).
    Ok(Box::new(Background::spawn(
        sink,
        cfg.sort_buffer_bytes / 2,
    )?))
}
