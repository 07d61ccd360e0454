//! The Parquet sink: row groups cut at a compressed-size target or a row count, the column chunks of each slice
//! encoded in parallel, and the bloom filters of lookup columns built alongside (see
//! [`ParquetSink`]). It takes writer properties ready made (`properties`, `choices` and `hints`
//! put them together) and narrows list columns before encoding ([`crate::narrow`]).
//!
//! Touches only the file writer it is given, and spawns scoped encoding threads that end with
//! each slice (slices of fewer than [`INLINE_ROWS`] rows are encoded on the calling thread).

use std::fs::File;
use std::io::BufWriter;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory,
    ArrowWriterOptions,
};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

use super::properties::{needs_arrow_schema, stored_schema, Blooms};
use super::FileSink;
use crate::bloom::BloomBuilder;

/// Parquet output with row groups cut at a compressed-size target (or a row count, whichever
/// comes first) and column chunks encoded in parallel.
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
pub(super) struct ParquetSink {
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
    /// Most rows in a row group (`--row-group-rows`).
    max_rows: usize,
    /// Observed compressed size / parquet-rs's estimate, from the last row group.
    calibration: f64,
    /// Compressed bytes per row of the last row group.
    bytes_per_row: Option<f64>,
}

/// Threads that encode column chunks (the machines silt is measured on have two cores; the
/// reader thread takes part of one).
const ENCODE_THREADS: usize = 2;
/// Slices of fewer rows are encoded on the calling thread, all columns in turn.
const INLINE_ROWS: usize = 4096;
/// Rows handed to the column writers at a time, at most.
const WRITE_SLICE_ROWS: usize = 65536;
/// Rows of the first slice written, before anything is known about the data's size per row.
const WRITE_PROBE_ROWS: usize = 1024;

impl ParquetSink {
    pub(super) fn new(
        out: BufWriter<File>,
        schema: &SchemaRef,
        props: WriterProperties,
        target: usize,
        max_rows: usize,
        blooms: Blooms,
    ) -> anyhow::Result<Self> {
        let stored = stored_schema(schema);
        let options = ArrowWriterOptions::new()
            .with_skip_arrow_metadata(!needs_arrow_schema(&stored, props.coerce_types()))
            .with_properties(props);
        let (file, factory) = ArrowWriter::try_new_with_options(out, Arc::new(stored), options)?
            .into_serialized_writer()?;
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
            max_rows: max_rows.max(1),
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
        let results = if batch.num_rows() < INLINE_ROWS {
            // A thread start costs more than encoding a few rows, and small slices come from
            // small files, of which sparse partitions make thousands.
            work.into_iter().map(run).collect()
        } else {
            std::thread::scope(|scope| {
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
            })
        };
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
            let mut take = WRITE_SLICE_ROWS
                .min(batch.num_rows() - off)
                .min(self.max_rows - self.rows_in_group);
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
            // (`crate::narrow`), so lists are narrowed to the slice first.
            self.encode(&crate::narrow::narrow_lists(&batch.slice(off, take))?)?;
            off += take;
            if self.estimated() >= target || self.rows_in_group >= self.max_rows {
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
