//! File formats: a [`FileSink`] takes sorted batches and produces one Parquet or Feather file.
//!
//! Parquet files get: the configured codec and level, row groups cut at a compressed-size
//! target, dictionary encoding (parquet-rs falls back to plain for high-cardinality columns),
//! page-level statistics with the column and offset index, DELTA_BINARY_PACKED for time columns,
//! bloom filters on lookup columns (built by the `bloom` module for text and integer leaves, by
//! parquet-rs for others), `sorting_columns` metadata, and silt's schema metadata as
//! key-value metadata next to the embedded Arrow schema. Per-column encoding hints
//! ([`crate::config::EncodingHints`]) are resolved by [`encoding_plan`] and applied last.

use std::fs::File;
use std::io::BufWriter;

use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::ipc::writer::{FileWriter as IpcFileWriter, IpcWriteOptions};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory,
};
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, Compression, Encoding, GzipLevel, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{
    EnabledStatistics, WriterProperties, WriterPropertiesBuilder, WriterVersion,
};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::ColumnPath;

use crate::background::Background;
use crate::bloom::BloomBuilder;
use crate::config::{Codec, StoreKind, WriterConfig};
use crate::writer::partition_point;

/// Writes one file.
pub trait FileSink: Send {
    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()>;
    /// Bytes this sink holds in memory (the in-progress row group).
    fn memory_size(&self) -> usize;
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
    match cfg.store {
        StoreKind::Parquet => {
            let (mut props, blooms) = parquet_properties(cfg, schema, sort, expected_rows)?;
            let pages = (cfg.dictionary_page_bytes, cfg.page_bytes);
            // Plain numbers beat an overflowing dictionary only through an entropy coder: without
            // compression (or with snappy or lz4) 8 plain bytes a value are larger than the
            // dictionary's indices even when it overflows (uncompressed Parquet grew 9 % in
            // `silt bench`), so the projection below is for zstd, gzip and brotli only.
            let project_to = match cfg.codec {
                Codec::Zstd | Codec::Gzip | Codec::Brotli => expected_rows,
                Codec::None | Codec::Snappy | Codec::Lz4 => 0,
            };
            for leaf in high_cardinality_leaves(first, pages, project_to) {
                let cp = ColumnPath::new(leaf.path);
                props = props.set_column_dictionary_enabled(cp.clone(), false);
                if let Some(sample) = &leaf.text_sample {
                    let enc = smallest_text_encoding(sample, cfg)?;
                    if enc != Encoding::PLAIN {
                        props = props.set_column_encoding(cp.clone(), enc);
                    }
                }
                if leaf.mean_len.is_some_and(|m| m >= LONG_TEXT_BYTES) {
                    // Page min/max of free text prune nothing (a LIKE cannot use them); without
                    // them (chunk statistics only) a string `log` conversion used ~8 % less CPU.
                    props = props.set_column_statistics_enabled(cp, EnabledStatistics::Chunk);
                }
            }
            for path in unordered_text_leaves(first) {
                // Min/max of text that comes in no order (uids, community ids, hosts and DNS
                // names in a table sorted by time) span about the whole range in every page and
                // row group, so they prune nothing, and equality lookups have the bloom filter.
                // parquet-rs compares every value twice for them: without them, a zeek.conn
                // write in `silt bench` used about a tenth less CPU (648-689 against 735-794
                // ns/event in three alternating runs), a suricata.flow write about 4 % less.
                let cp = ColumnPath::new(path);
                props = props.set_column_statistics_enabled(cp, EnabledStatistics::None);
            }
            // The user's hints come last: they override the automatic choices above.
            if !cfg.encodings.is_empty() {
                for c in encoding_plan(cfg, schema).map_err(anyhow::Error::msg)? {
                    props = c.apply(props, cfg.dictionary_page_bytes);
                }
            }
            let props = props.build();
            let sink = ParquetSink::new(out, schema, props, cfg.row_group_bytes, blooms)?;
            Ok(Box::new(Background::spawn(Box::new(sink))?))
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
            Ok(Box::new(Background::spawn(Box::new(FeatherSink { w }))?))
        }
    }
}

/// Parquet output with row groups cut at a compressed-size target and column chunks encoded in
/// parallel.
///
/// Written by hand on top of parquet-rs's `ArrowColumnWriter` API (rather than `ArrowWriter`)
/// for two reasons the import benchmark shows:
/// - `ArrowWriter` encodes all columns on the calling thread; encoding (dictionary interning,
///   bloom filters, zstd) is most of an import's CPU time, so the column chunks of each slice are
///   encoded on [`ENCODE_THREADS`] threads here;
/// - `ArrowWriter`'s `max_row_group_bytes` compares parquet-rs's *estimate* of the encoded size,
///   which undercounts (dictionaries, page overhead) by up to several times, and checks only
///   between `write` calls. Here each finished row group's real size calibrates the estimate for
///   the next, and chunks are fed in slices sized to what still fits, so row groups really reach
///   (and do not overshoot) `--row-group-size`.
struct ParquetSink {
    file: SerializedFileWriter<BufWriter<File>>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// Column writers of the row group in progress, one per leaf column.
    writers: Vec<ArrowColumnWriter>,
    /// The lookup columns' bloom filters silt builds, and those of the row group in progress (by
    /// leaf index, with the column's dotted path).
    blooms: Blooms,
    filters: Vec<Option<(BloomBuilder, String)>>,
    /// Which leaf columns each encoding thread takes (balanced by bytes seen).
    lanes: Vec<Vec<usize>>,
    rows_in_group: usize,
    /// Row-group target in compressed bytes.
    target: usize,
    /// Observed compressed size / parquet-rs's estimate, from the last row group.
    calibration: f64,
    /// Compressed bytes per row of the last row group.
    bytes_per_row: Option<f64>,
}

/// Threads that encode column chunks (the machines silt is measured on have two cores; the
/// reader thread takes part of one).
const ENCODE_THREADS: usize = 2;
/// Rows handed to the column writers at a time, at most.
const WRITE_SLICE_ROWS: usize = 65536;
/// Rows of the first slice written, before anything is known about the data's size per row.
const WRITE_PROBE_ROWS: usize = 1024;

impl ParquetSink {
    fn new(
        out: BufWriter<File>,
        schema: &SchemaRef,
        props: WriterProperties,
        target: usize,
        blooms: Blooms,
    ) -> anyhow::Result<Self> {
        let (file, factory) =
            ArrowWriter::try_new(out, schema.clone(), Some(props))?.into_serialized_writer()?;
        let writers = factory.create_column_writers(0)?;
        let n = writers.len();
        let filters = blooms.builders(n)?;
        let lanes = (0..ENCODE_THREADS)
            .map(|t| (t..n).step_by(ENCODE_THREADS).collect())
            .collect();
        Ok(Self {
            file,
            factory,
            schema: schema.clone(),
            writers,
            blooms,
            filters,
            lanes,
            rows_in_group: 0,
            target,
            calibration: 1.0,
            bytes_per_row: None,
        })
    }

    fn estimated(&self) -> f64 {
        self.writers
            .iter()
            .map(|w| w.get_estimated_total_bytes())
            .sum::<usize>() as f64
            * self.calibration
    }

    /// Encodes one slice into the row group in progress, the leaf columns spread over threads.
    fn encode(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        let mut leaves: Vec<Option<ArrowLeafColumn>> = Vec::with_capacity(self.writers.len());
        let mut sizes: Vec<usize> = Vec::with_capacity(self.writers.len());
        for (field, col) in self.schema.fields().iter().zip(batch.columns()) {
            let l = compute_leaves(field, col)?;
            let share = col.get_array_memory_size() / l.len().max(1);
            sizes.extend(std::iter::repeat_n(share, l.len()));
            leaves.extend(l.into_iter().map(Some));
        }
        if self.rows_in_group == 0 {
            self.lanes = balance(&sizes, ENCODE_THREADS);
        }
        // Hand each lane its writers and leaves, run lanes 1.. on scoped threads and lane 0 here.
        let mut slots: Vec<Option<ArrowColumnWriter>> = std::mem::take(&mut self.writers)
            .into_iter()
            .map(Some)
            .collect();
        type Job = (
            usize,
            ArrowColumnWriter,
            ArrowLeafColumn,
            Option<(BloomBuilder, String)>,
        );
        let work: Vec<Vec<Job>> = self
            .lanes
            .iter()
            .map(|lane| {
                lane.iter()
                    .map(|&i| {
                        (
                            i,
                            slots[i].take().expect("writer"),
                            leaves[i].take().expect("leaf"),
                            self.filters[i].take(),
                        )
                    })
                    .collect()
            })
            .collect();
        type Done = (usize, ArrowColumnWriter, Option<(BloomBuilder, String)>);
        let run = |mut jobs: Vec<Job>| -> parquet::errors::Result<Vec<Done>> {
            for (_, w, leaf, filter) in jobs.iter_mut() {
                w.write(leaf)?;
                if let Some((f, path)) = filter {
                    if !f.add_path(batch, path) {
                        return Err(parquet::errors::ParquetError::General(format!(
                            "bloom filter of column {path}: not a text, binary or integer leaf"
                        )));
                    }
                }
            }
            Ok(jobs.into_iter().map(|(i, w, _, f)| (i, w, f)).collect())
        };
        let results = std::thread::scope(|scope| {
            let mut it = work.into_iter();
            let first = it.next().unwrap_or_default();
            let handles: Vec<_> = it.map(|jobs| scope.spawn(move || run(jobs))).collect();
            let mut out = vec![run(first)];
            out.extend(
                handles
                    .into_iter()
                    .map(|h| h.join().expect("encoder thread panicked")),
            );
            out
        });
        for r in results {
            for (i, w, f) in r? {
                slots[i] = Some(w);
                self.filters[i] = f;
            }
        }
        self.writers = slots
            .into_iter()
            .map(|w| w.expect("every writer returned"))
            .collect();
        self.rows_in_group += batch.num_rows();
        Ok(())
    }

    fn flush_row_group(&mut self) -> anyhow::Result<()> {
        if self.rows_in_group == 0 {
            return Ok(());
        }
        let estimate = self
            .writers
            .iter()
            .map(|w| w.get_estimated_total_bytes())
            .sum::<usize>() as f64;
        let index = self.file.flushed_row_groups().len();
        let writers = std::mem::replace(
            &mut self.writers,
            self.factory.create_column_writers(index + 1)?,
        );
        let filters = std::mem::replace(&mut self.filters, self.blooms.builders(writers.len())?);
        let mut rg = self.file.next_row_group()?;
        for (w, filter) in writers.into_iter().zip(filters) {
            let mut chunk = w.close()?;
            if let Some((f, _)) = filter {
                chunk.close_mut().bloom_filter = Some(f.finish());
            }
            chunk.append_to_row_group(&mut rg)?;
        }
        rg.close()?;
        self.rows_in_group = 0;
        if let Some(rg) = self.file.flushed_row_groups().last() {
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

/// Splits leaf columns into `lanes` groups of about equal bytes (largest first, greedy).
fn balance(sizes: &[usize], lanes: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    let mut out = vec![Vec::new(); lanes];
    let mut load = vec![0usize; lanes];
    for i in order {
        let l = (0..lanes).min_by_key(|&l| load[l]).expect("lanes");
        load[l] += sizes[i].max(1);
        out[l].push(i);
    }
    out
}

impl FileSink for ParquetSink {
    fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        let target = self.target as f64;
        let mut off = 0;
        while off < batch.num_rows() {
            let mut take = WRITE_SLICE_ROWS.min(batch.num_rows() - off);
            let per_row = if self.rows_in_group > 0 {
                Some(self.estimated() / self.rows_in_group as f64)
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
            // parquet-rs converts a list's whole child array for every slice written
            // (`compact`), so lists are narrowed to the slice first.
            self.encode(&crate::compact::narrow_lists(&batch.slice(off, take))?)?;
            off += take;
            if self.estimated() >= target {
                self.flush_row_group()?;
            }
        }
        Ok(())
    }

    fn memory_size(&self) -> usize {
        self.writers.iter().map(|w| w.memory_size()).sum::<usize>()
            + self
                .filters
                .iter()
                .flatten()
                .map(|(f, _)| f.memory_size())
                .sum::<usize>()
    }

    fn finish(mut self: Box<Self>) -> anyhow::Result<BufWriter<File>> {
        self.flush_row_group()?;
        Ok(self.file.into_inner()?)
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

/// The lookup columns whose bloom filters silt builds ([`crate::bloom`]): leaf index and dotted
/// path, with the filters' sizing.
struct Blooms {
    ndv: u64,
    fpp: f64,
    columns: Vec<(usize, String)>,
}

impl Blooms {
    /// Empty filters for one row group, by leaf index.
    fn builders(&self, leaves: usize) -> anyhow::Result<Vec<Option<(BloomBuilder, String)>>> {
        let mut out: Vec<Option<(BloomBuilder, String)>> = (0..leaves).map(|_| None).collect();
        for (leaf, path) in &self.columns {
            out[*leaf] = Some((BloomBuilder::new(self.ndv, self.fpp)?, path.clone()));
        }
        Ok(out)
    }
}

fn parquet_properties(
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

    let kv: Vec<KeyValue> = schema
        .metadata()
        .iter()
        .filter(|(k, _)| k.starts_with("silt."))
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
        .collect();
    if !kv.is_empty() {
        b = b.set_key_value_metadata(Some(kv));
    }
    Ok((b, ours))
}

/// Mean bytes per value from which a high-cardinality string column (whole log lines) gets
/// column-chunk statistics only: page min/max of free text prune nothing, and skipping them saved
/// about 8 % of a string-`log` conversion's CPU.
const LONG_TEXT_BYTES: f64 = 128.0;

/// Value bytes of a text column tried with each encoding by [`smallest_text_encoding`] (about a
/// data page; at most [`CARDINALITY_SAMPLE`] values).
const TRIAL_BYTES: usize = 1 << 20;

/// The encoding, of PLAIN, DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY, that writes a
/// high-cardinality text column's first values smallest with the configured codec.
///
/// Which one wins depends on the data, so it is measured rather than guessed: parquet-rs encodes
/// the sample into memory once per candidate (a few milliseconds per column and file; the level
/// is capped for the trial so that zstd 19 or brotli 11 do not make it slow). Measured at zstd 1:
/// Zeek conn uids (`C` + 17 random base62 characters) are 6.8 % smaller as DELTA_BYTE_ARRAY (the
/// shared `C` is stored as a prefix length; the whole file 3.0 %); DNS uids, which repeat a few
/// rows apart, 5.4 % smaller as DELTA_LENGTH_BYTE_ARRAY (the file 2.2 %); whole nginx log lines
/// 3.8 % smaller as DELTA_LENGTH_BYTE_ARRAY; Suricata community ids stay PLAIN. A delta layout
/// must beat PLAIN by 1 % to be chosen. DuckDB and pyarrow read both (checked on 2M-row conn and
/// dns lakes: same distinct count and hash sum of `uid`; the crosscheck queries a generated lake
/// with DuckDB); Spark 3.3+ and Trino document support.
fn smallest_text_encoding(
    sample: &arrow::array::ArrayRef,
    cfg: &WriterConfig,
) -> anyhow::Result<Encoding> {
    let trial = match compression(cfg.codec, cfg.level)? {
        Compression::ZSTD(l) if l.compression_level() > 3 => {
            Compression::ZSTD(ZstdLevel::try_new(3)?)
        }
        Compression::GZIP(l) if l.compression_level() > 6 => {
            Compression::GZIP(GzipLevel::try_new(6)?)
        }
        Compression::BROTLI(l) if l.compression_level() > 4 => {
            Compression::BROTLI(BrotliLevel::try_new(4)?)
        }
        c => c,
    };
    let field = arrow::datatypes::Field::new("v", sample.data_type().clone(), true);
    let schema = std::sync::Arc::new(Schema::new(vec![field]));
    let batch = RecordBatch::try_new(schema.clone(), vec![sample.clone()])?;
    let size = |enc: Encoding| -> anyhow::Result<usize> {
        let props = WriterProperties::builder()
            .set_writer_version(WriterVersion::PARQUET_1_0)
            .set_compression(trial)
            .set_dictionary_enabled(false)
            .set_encoding(enc)
            .set_statistics_enabled(EnabledStatistics::None)
            .set_data_page_size_limit(cfg.page_bytes)
            .build();
        let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props))?;
        w.write(&batch)?;
        Ok(w.into_inner()?.len())
    };
    let plain = size(Encoding::PLAIN)?;
    let mut best = (Encoding::PLAIN, plain);
    for enc in [
        Encoding::DELTA_LENGTH_BYTE_ARRAY,
        Encoding::DELTA_BYTE_ARRAY,
    ] {
        let n = size(enc)?;
        if n < best.1 && n * 100 < plain * 99 {
            best = (enc, n);
        }
    }
    Ok(best.0)
}

/// Text (Utf8) leaves (through structs; list elements are left alone) whose values come in no
/// order, so that any run of rows spans most of the range of values: min/max statistics of its
/// pages and row groups could prune nothing.
///
/// Judged on the first [`ORDER_SAMPLE`] values: split into runs of [`ORDER_RUN`] rows, each run's
/// min and max are placed among the sample's distinct values, sorted; the leaf is unordered when
/// the runs span more than half of them on average. Random ids and hosts in a table sorted by
/// time span nearly all; a sort key, time-ordered ids (ULIDs, UUIDv7, even with many per
/// millisecond) or a column that changes slowly span little, and keep their statistics, as does
/// a constant column. A page holds far more rows than a run, so a leaf judged ordered may still
/// have wide pages (it then only keeps statistics it did not need), while one judged unordered
/// cannot have narrow ones.
fn unordered_text_leaves(batch: &RecordBatch) -> Vec<Vec<String>> {
    use arrow::array::{Array, AsArray};
    fn unordered(s: &arrow::array::StringArray) -> bool {
        let vals: Vec<&str> = s.iter().take(ORDER_SAMPLE).flatten().collect();
        if vals.len() < 2 * ORDER_RUN {
            return false;
        }
        let mut distinct = vals.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() < 2 {
            return false;
        }
        let rank = |v: &str| distinct.partition_point(|d| *d < v);
        let runs: Vec<f64> = vals
            .chunks_exact(ORDER_RUN)
            .map(|run| {
                let (lo, hi) = run
                    .iter()
                    .fold((run[0], run[0]), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
                (rank(hi) - rank(lo)) as f64 / (distinct.len() - 1) as f64
            })
            .collect();
        runs.iter().sum::<f64>() / runs.len() as f64 > 0.5
    }
    fn walk(path: &mut Vec<String>, a: &dyn Array, out: &mut Vec<Vec<String>>) {
        match a.data_type() {
            DataType::Struct(fields) => {
                for (f, c) in fields.iter().zip(a.as_struct().columns()) {
                    path.push(f.name().clone());
                    walk(path, c.as_ref(), out);
                    path.pop();
                }
            }
            DataType::Utf8 if unordered(a.as_string::<i32>()) => out.push(path.clone()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        walk(&mut vec![f.name().clone()], c.as_ref(), &mut out);
    }
    out
}

/// Values sampled by [`unordered_text_leaves`] (sorting them takes well under a millisecond).
const ORDER_SAMPLE: usize = 4096;

/// Rows per run in [`unordered_text_leaves`].
const ORDER_RUN: usize = 256;

/// Rows sampled to judge a column's cardinality (from the batch given to [`open`]).
pub const CARDINALITY_SAMPLE: usize = 65536;

/// A leaf column found by [`high_cardinality_leaves`].
struct HighCardinality {
    path: Vec<String>,
    /// Strings: the mean bytes per value.
    mean_len: Option<f64>,
    /// Strings: the first values (up to [`TRIAL_BYTES`]), for [`smallest_text_encoding`].
    text_sample: Option<arrow::array::ArrayRef>,
}

/// Leaf columns (struct paths; list elements are left alone) whose values are mostly distinct in
/// the first rows of a file, or whose distinct values there already overflow the dictionary
/// page: a dictionary cannot shrink them (uids, byte counts, durations), and parquet-rs would
/// build one for every row group, hashing every value, until it overflows the dictionary page
/// and falls back to plain anyway. No dictionary from the start (plain, or for text the layout
/// [`smallest_text_encoding`] picks) is smaller and costs no hashing;
/// columns that repeat keep their dictionary (proto, service, ports, hosts).
///
/// The sample is large (64Ki rows) because a pool larger than the sample looks unique in it: the
/// 30k client addresses of the generated web log hour are 78 % distinct in its first 4Ki rows,
/// 59 % in 16Ki and 33 % in 64Ki, and a dictionary makes them a third of their plain zstd size.
/// Estimating the distinct count from a small sample (Chao1) was tried and rejected: values that
/// repeat only close together in time (a connection's uid in a few DNS rows) look like a small
/// pool to it.
///
/// Returns each such column's path and, for strings, the mean bytes per value and a sample.
fn high_cardinality_leaves(
    batch: &RecordBatch,
    (string_dict_page, dict_page): (usize, usize),
    expected_rows: usize,
) -> Vec<HighCardinality> {
    use arrow::array::{Array, AsArray};
    use std::collections::HashSet;
    /// Whether a dictionary is not worth it (distinct values over half the rows, or more bytes
    /// than the dictionary page holds), and the mean value length.
    ///
    /// `rows` (numbers only; 0 for text, and without an entropy-coding codec) are the rows
    /// expected in the file: the dictionary the column would need there is projected from the
    /// sample. A number column whose distinct values keep growing with the rows (durations,
    /// byte counts, a flow id that two DNS rows share) overflows the dictionary page later in the
    /// chunk, and parquet-rs then writes the rest plain, after a dictionary that bought nothing
    /// (generated conn `duration`: 3.24 B/row that way, 2.91 plain; EVE dns `flow_id` 4.0 and
    /// 3.3). The projection follows Heaps' law,
    /// distinct(N) = distinct(n) * (N/n)^b, with b measured between the sample's first half and
    /// the whole sample: a pool of values that the sample already mostly covers (ports, packet
    /// counts, 30k hosts) grows little and keeps its dictionary, values that keep coming grow
    /// linearly and lose it.
    /// `n` is the number of `values` (the sample's valid values).
    fn unique<'a>(
        values: impl Iterator<Item = &'a [u8]>,
        n: usize,
        overhead: usize,
        page: usize,
        rows: usize,
    ) -> (bool, f64) {
        let mut seen: HashSet<&[u8]> = HashSet::new();
        let (mut bytes, mut dict_bytes, mut half_distinct) = (0usize, 0usize, 0usize);
        for (i, v) in values.enumerate() {
            if i == n / 2 {
                half_distinct = seen.len();
            }
            bytes += v.len();
            if seen.insert(v) {
                dict_bytes += v.len() + overhead;
            }
        }
        let mean = bytes as f64 / n.max(1) as f64;
        let mut projected = dict_bytes as f64;
        if rows > n && half_distinct > 0 {
            let b = (seen.len() as f64 / half_distinct as f64)
                .log2()
                .clamp(0.0, 1.0);
            projected *= (rows as f64 / n as f64).powf(b);
        }
        (seen.len() * 2 > n || projected > page as f64, mean)
    }
    type Out = Vec<HighCardinality>;
    /// `pages`: the dictionary page limits of string and of other columns.
    /// `rows`: the rows expected in the file.
    fn walk(
        path: &mut Vec<String>,
        a: &dyn Array,
        pages: (usize, usize),
        rows: usize,
        out: &mut Out,
    ) {
        let n = a.len().min(CARDINALITY_SAMPLE);
        let valid = (0..n).filter(|&i| a.is_valid(i)).count();
        if valid < 64 {
            return;
        }
        let (high, mean, sample) = match a.data_type() {
            DataType::Struct(fields) => {
                let s = a.as_struct();
                for (f, c) in fields.iter().zip(s.columns()) {
                    path.push(f.name().clone());
                    walk(path, c.as_ref(), pages, rows, out);
                    path.pop();
                }
                return;
            }
            DataType::Utf8 => {
                let s = a.as_string::<i32>();
                let vals = (0..n)
                    .filter(|&i| s.is_valid(i))
                    .map(|i| s.value(i).as_bytes());
                // A dictionary entry is the value plus its 4-byte length.
                let (high, mean) = unique(vals, valid, 4, pages.0, 0);
                let offsets = s.value_offsets();
                let rows =
                    partition_point(1, n, |i| ((offsets[i] - offsets[0]) as usize) < TRIAL_BYTES);
                (high, Some(mean), Some(a.slice(0, rows.max(1))))
            }
            // Decimals up to 18 digits are 4- or 8-byte integers in the file; counted as 8 bytes
            // (their low 8 bytes tell them apart), which errs towards plain for the 4-byte ones.
            DataType::Int64
            | DataType::UInt64
            | DataType::Float64
            | DataType::Decimal128(..=18, _) => {
                let d = a.to_data();
                let width = if matches!(a.data_type(), DataType::Decimal128(..)) {
                    16
                } else {
                    8
                };
                let v = &d.buffers()[0].as_slice()[d.offset() * width..];
                let vals = (0..n)
                    .filter(|&i| a.is_valid(i))
                    .map(|i| &v[i * width..i * width + 8]);
                (unique(vals, valid, 0, pages.1, rows).0, None, None)
            }
            _ => return,
        };
        if high {
            out.push(HighCardinality {
                path: path.clone(),
                mean_len: mean,
                text_sample: sample,
            });
        }
    }
    let mut out = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        let mut p = vec![f.name().clone()];
        walk(
            &mut p,
            c.as_ref(),
            (string_dict_page, dict_page),
            expected_rows,
            &mut out,
        );
    }
    out
}

/// What the encoding hints ask of one Parquet leaf column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnEncoding {
    /// The Parquet leaf path (`id.orig_h`, `tags.list.item`).
    pub path: Vec<String>,
    /// `Some(true)`: dictionary forced on; `Some(false)`: off; `None`: silt's automatic choice.
    pub dictionary: Option<bool>,
    /// The value encoding (the fallback encoding when the dictionary is on).
    pub encoding: Option<Encoding>,
}

impl ColumnEncoding {
    fn apply(&self, b: WriterPropertiesBuilder, dict_page_bytes: usize) -> WriterPropertiesBuilder {
        let cp = ColumnPath::new(self.path.clone());
        let mut b = b;
        if let Some(d) = self.dictionary {
            b = b.set_column_dictionary_enabled(cp.clone(), d);
            if d {
                // A forced dictionary gets room to grow before parquet-rs falls back to plain.
                b = b.set_column_dictionary_page_size_limit(
                    cp.clone(),
                    dict_page_bytes.saturating_mul(4),
                );
            }
        }
        if let Some(e) = self.encoding {
            b = b.set_column_encoding(cp, e);
        }
        b
    }
}

/// Resolves the configuration's encoding hints against a table schema: every hinted path must
/// name a leaf column (a list column's path names its elements) whose type the encoding
/// supports. Returns the per-leaf settings, or a message naming the column and what is wrong.
///
/// Rules: `--delta` is DELTA_BINARY_PACKED for integers, timestamps, dates, times, durations and
/// decimals of up to 18 digits (stored as INT32/INT64), DELTA_BYTE_ARRAY for strings and binary;
/// `--byte-stream-split` takes Float32/Float64 only (parquet-rs could also split integers, but
/// not every reader decodes that yet). Both turn the dictionary off unless `--dictionary` names
/// the column too, in which case they become the fallback encoding.
pub fn encoding_plan(cfg: &WriterConfig, schema: &Schema) -> Result<Vec<ColumnEncoding>, String> {
    let h = &cfg.encodings;
    let leaves = addressable_leaves(schema);
    let mut out: Vec<ColumnEncoding> = Vec::new();
    fn entry(out: &mut Vec<ColumnEncoding>, path: &[String]) -> usize {
        match out.iter().position(|c| c.path == path) {
            Some(i) => i,
            None => {
                out.push(ColumnEncoding {
                    path: path.to_vec(),
                    dictionary: None,
                    encoding: None,
                });
                out.len() - 1
            }
        }
    }
    let lists: [(&str, &Vec<String>); 4] = [
        ("--dictionary", &h.dictionary),
        ("--no-dictionary", &h.no_dictionary),
        ("--delta", &h.delta),
        ("--byte-stream-split", &h.byte_stream_split),
    ];
    for (flag, cols) in lists {
        for col in cols {
            let found: Vec<&(String, Vec<String>, DataType)> =
                leaves.iter().filter(|(u, _, _)| u == col).collect();
            if found.is_empty() {
                let below: Vec<&str> = leaves
                    .iter()
                    .filter(|(u, _, _)| u.starts_with(&format!("{col}.")))
                    .map(|(u, _, _)| u.as_str())
                    .collect();
                return Err(if below.is_empty() {
                    format!(
                        "{flag} {col}: no such column (columns: {})",
                        schema
                            .fields()
                            .iter()
                            .map(|f| f.name().as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    format!(
                        "{flag} {col}: {col} is a struct; name its fields ({})",
                        below.join(", ")
                    )
                });
            }
            for (_, path, dt) in found {
                let i = entry(&mut out, path);
                let c = &mut out[i];
                match flag {
                    "--dictionary" => c.dictionary = Some(true),
                    "--no-dictionary" => c.dictionary = Some(false),
                    "--delta" => {
                        c.encoding = Some(delta_encoding(dt).ok_or_else(|| {
                            format!("--delta {col}: column {col} is {dt}; delta encodings take integers, timestamps, dates, decimals up to 18 digits, strings and binary")
                        })?);
                    }
                    _ => {
                        if !matches!(dt, DataType::Float32 | DataType::Float64) {
                            return Err(format!(
                                "--byte-stream-split {col}: column {col} is {dt}; byte-stream-split takes Float32/Float64 columns"
                            ));
                        }
                        c.encoding = Some(Encoding::BYTE_STREAM_SPLIT);
                    }
                }
            }
        }
    }
    // A value encoding without an explicit dictionary choice means "this encoding", so the
    // dictionary (which would otherwise be tried first) goes off.
    for c in out.iter_mut() {
        if c.encoding.is_some() && c.dictionary.is_none() {
            c.dictionary = Some(false);
        }
    }
    Ok(out)
}

/// The delta encoding for a leaf type, if it has one.
fn delta_encoding(dt: &DataType) -> Option<Encoding> {
    match dt {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Timestamp(_, _)
        | DataType::Date32
        | DataType::Date64
        | DataType::Time32(_)
        | DataType::Time64(_)
        | DataType::Duration(_) => Some(Encoding::DELTA_BINARY_PACKED),
        DataType::Decimal128(p, _) if *p <= 18 => Some(Encoding::DELTA_BINARY_PACKED),
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView => Some(Encoding::DELTA_BYTE_ARRAY),
        DataType::Dictionary(_, v) => delta_encoding(v),
        _ => None,
    }
}

/// Leaf columns as `(user path, Parquet path, Arrow type)`: the user path joins struct field
/// names with dots and leaves out the list wrapper levels, so `tags` names the elements of the
/// list column `tags` (Parquet path `tags.list.item`).
fn addressable_leaves(schema: &Schema) -> Vec<(String, Vec<String>, DataType)> {
    leaf_paths(schema)
        .into_iter()
        .map(|(path, dt)| {
            let mut user: Vec<&str> = Vec::new();
            let mut i = 0;
            while i < path.len() {
                // `list` + element name are the wrapper levels leaf_paths adds for a list.
                if i > 0
                    && path[i] == "list"
                    && i + 1 < path.len()
                    && is_list_at(schema, &path[..i])
                {
                    i += 2;
                    continue;
                }
                user.push(&path[i]);
                i += 1;
            }
            (user.join("."), path.clone(), dt)
        })
        .collect()
}

/// Whether the field at a Parquet path prefix (struct names only, plus list wrappers) is a list.
fn is_list_at(schema: &Schema, prefix: &[String]) -> bool {
    let mut dt: Option<&DataType> = None;
    let mut i = 0;
    while i < prefix.len() {
        let name = &prefix[i];
        let next = match dt {
            None => schema.field_with_name(name).ok().map(|f| f.data_type()),
            Some(DataType::Struct(fs)) => {
                fs.iter().find(|f| f.name() == name).map(|f| f.data_type())
            }
            Some(DataType::List(f)) | Some(DataType::LargeList(f)) if name == "list" => {
                i += 1; // skip the element name too
                Some(f.data_type())
            }
            Some(DataType::Map(f, _)) => Some(f.data_type()),
            _ => None,
        };
        match next {
            Some(n) => dt = Some(n),
            None => return false,
        }
        i += 1;
    }
    matches!(dt, Some(DataType::List(_)) | Some(DataType::LargeList(_)))
}

/// Whether every step of `path` above its leaf is a struct field (no list or map on the way).
fn through_structs(schema: &Schema, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let Ok(mut field) = schema.field_with_name(first) else {
        return false;
    };
    for name in rest {
        let DataType::Struct(children) = field.data_type() else {
            return false;
        };
        match children.iter().find(|c| c.name() == name) {
            Some(c) => field = c,
            None => return false,
        }
    }
    true
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
