//! The Parquet sink: row groups cut at a compressed-size target or a row count, the column
//! chunks encoded in parallel on lane threads, and the bloom filters of lookup columns built
//! alongside (see [`ParquetSink`]). It takes writer properties ready made (`properties`, `choices`
//! and `hints` put them together) and narrows list columns before encoding ([`crate::narrow`]).
//!
//! Touches only the file writer it is given. It starts [`ENCODE_THREADS`] lane threads once a
//! slice of [`INLINE_ROWS`] rows or more comes (smaller files are encoded on the calling thread),
//! and stops them when it is finished or dropped.

use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_writer::{
    compute_leaves, ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn,
    ArrowRowGroupWriterFactory, ArrowWriterOptions,
};
use parquet::arrow::ArrowWriter;
use parquet::errors::ParquetError;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

use super::codec_state::CodecState;
use super::properties::{needs_arrow_schema, stored_schema, Blooms};
use super::FileSink;
use crate::bloom::BloomBuilder;
use crate::checksum::{self, Summing};

/// Parquet output with row groups cut at a compressed-size target (or a row count, whichever
/// comes first) and column chunks encoded in parallel.
///
/// Written by hand on top of parquet-rs's `ArrowColumnWriter` API (rather than `ArrowWriter`)
/// for two reasons the import benchmark shows:
/// - `ArrowWriter` encodes all columns on the calling thread; encoding (dictionary interning,
///   bloom filters, zstd) is most of an import's CPU time, so the leaf columns are spread over
///   [`ENCODE_THREADS`] lanes here;
/// - `ArrowWriter`'s `max_row_group_bytes` compares parquet-rs's *estimate* of the encoded size,
///   which undercounts (dictionaries, page overhead) by up to several times, and checks only
///   between `write` calls. Here each finished row group's real size calibrates the estimate for
///   the next, and chunks are fed in slices sized to what still fits, so row groups really reach
///   (and do not overshoot) `--row-group-size`.
///
/// **Lanes.** Each lane is a thread that owns the column writers of its share of the leaf
/// columns for a row group; every slice goes to every lane (its own leaves), through a queue of
/// [`LANE_QUEUE`] slices, and the lanes meet only when a row group is closed (each closes its own
/// column chunks, which compresses their last pages and dictionaries, in parallel). Columns are
/// shared out by the time each took in the row group before (the first by bytes): a dictionary
/// text column costs many times a delta-coded integer column of the same size. Measured
/// 2026-11-28 against the design before it, which encoded each slice on two scoped threads and
/// waited for both before the next slice (and closed every column on one thread): the encoding
/// thread of an enriched sFlow import (10M samples) spent 2.4 s of 7.9 waiting for the other
/// lane, while the import used 1.77 of the 2 cores.
pub(super) struct ParquetSink {
    /// Summed as it is written ([`crate::checksum`]).
    file: SerializedFileWriter<Summing<BufWriter<File>>>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    /// The column writers of the row group in progress, and where they are.
    group: Group,
    /// The lane threads (none until a slice of [`INLINE_ROWS`] rows comes).
    lanes: Vec<Lane>,
    /// The lookup columns' bloom filters silt builds.
    blooms: Blooms,
    rows_in_group: usize,
    /// Row-group target in compressed bytes.
    target: usize,
    /// Most rows in a row group (`--row-group-rows`).
    max_rows: usize,
    /// Observed compressed size / parquet-rs's estimate, from the last row group.
    calibration: f64,
    /// Compressed bytes per row of the last row group.
    bytes_per_row: Option<f64>,
    /// Time each leaf column took in the last row group (shares the columns out to lanes).
    costs: Option<Vec<u64>>,
    /// Bytes of slices handed to lanes and not yet encoded by all of them.
    queued: Arc<AtomicUsize>,
    /// Rows the row group had (encoded inline) when its columns went to the lanes.
    lane_start_rows: usize,
    /// What the row group's column writers' codecs hold ([`super::codec_state`]).
    codec: CodecState,
}

/// Threads that encode column chunks (the machines silt is measured on have two cores; the
/// reader thread takes part of one).
const ENCODE_THREADS: usize = 2;
/// Until a slice of at least this many rows comes, slices are encoded on the calling thread,
/// all columns in turn: small files (sparse partitions make thousands) need no threads.
const INLINE_ROWS: usize = 4096;
/// Slices waiting for each lane at most (the sink's memory counts them).
const LANE_QUEUE: usize = 2;
/// Once a row group's estimated size reaches this share of the target, the lanes catch up
/// before each slice is sized.
const NEAR_TARGET: f64 = 0.75;
/// Rows handed to the column writers at a time, at most.
const WRITE_SLICE_ROWS: usize = 65536;
/// Rows of the first slice written, before anything is known about the data's size per row.
const WRITE_PROBE_ROWS: usize = 1024;

/// A leaf column of the row group in progress.
struct Column {
    leaf: usize,
    writer: ArrowColumnWriter,
    /// Its bloom filter (silt's), with the column's dotted path.
    filter: Option<(BloomBuilder, String)>,
    /// Time spent encoding it in this row group.
    nanos: u64,
}

/// A closed column chunk (its bloom filter attached) and the time its column took.
struct Closed {
    leaf: usize,
    chunk: ArrowColumnChunk,
    nanos: u64,
}

/// Columns encoded together: a lane's share, or all of them on the calling thread.
#[derive(Default)]
struct Columns(Vec<Column>);

impl Columns {
    /// Encodes `leaves` (one per column, in order) of the slice `batch`.
    fn write(
        &mut self,
        batch: &RecordBatch,
        leaves: Vec<ArrowLeafColumn>,
    ) -> parquet::errors::Result<()> {
        for (c, leaf) in self.0.iter_mut().zip(leaves) {
            let t = Instant::now();
            c.writer.write(&leaf)?;
            if let Some((f, path)) = &mut c.filter {
                if !f.add_path(batch, path) {
                    return Err(ParquetError::General(format!(
                        "bloom filter of column {path}: not a text, binary or integer leaf"
                    )));
                }
            }
            c.nanos += t.elapsed().as_nanos() as u64;
        }
        Ok(())
    }

    /// parquet-rs's estimate of the encoded bytes so far.
    fn estimated(&self) -> usize {
        self.0
            .iter()
            .map(|c| c.writer.get_estimated_total_bytes())
            .sum()
    }

    fn memory_size(&self) -> usize {
        Self::memory_size_of(&self.0)
    }

    fn memory_size_of(cols: &[Column]) -> usize {
        cols.iter()
            .map(|c| c.writer.memory_size() + c.filter.as_ref().map_or(0, |(f, _)| f.memory_size()))
            .sum()
    }

    fn close(self) -> parquet::errors::Result<Vec<Closed>> {
        self.0
            .into_iter()
            .map(|c| {
                let t = Instant::now();
                let mut chunk = c.writer.close()?;
                if let Some((f, _)) = c.filter {
                    chunk.close_mut().bloom_filter = Some(f.finish());
                }
                Ok(Closed {
                    leaf: c.leaf,
                    chunk,
                    nanos: c.nanos + t.elapsed().as_nanos() as u64,
                })
            })
            .collect()
    }
}

/// Where the row group's column writers are.
enum Group {
    /// All on the calling thread (no lanes yet).
    Inline(Columns),
    /// Not yet shared out to the lanes (a new row group, before its first slice).
    Unassigned(Vec<Column>),
    /// With the lanes: the leaf indexes of each, in the order it holds them.
    Lanes(Vec<Vec<usize>>),
}

/// Closes a row group: the lane's estimate of its columns and the closed chunks.
type CloseReply = parquet::errors::Result<(usize, Vec<Closed>)>;

enum ToLane {
    /// The lane's columns of a row group, and the rows already in them (encoded inline before
    /// the lanes started).
    Start(Columns, usize),
    /// A slice: the batch (for bloom filters' paths) and the lane's leaves of it, in order.
    Slice {
        batch: RecordBatch,
        leaves: Vec<ArrowLeafColumn>,
        _queued: Arc<Queued>,
    },
    /// Close the row group's columns and send them back.
    Close(SyncSender<CloseReply>),
    /// Answer once every slice before this one is encoded.
    Sync(SyncSender<()>),
}

/// What a lane publishes about the row group in progress.
#[derive(Default)]
struct LaneProgress {
    /// parquet-rs's estimate of its columns' encoded bytes.
    estimated: AtomicUsize,
    /// Rows encoded.
    rows: AtomicUsize,
    /// Bytes its writers and filters hold.
    memory: AtomicUsize,
    /// A slice failed: the error comes with the next close.
    failed: AtomicBool,
}

/// A slice's bytes, counted in [`ParquetSink::queued`] until every lane has encoded it.
struct Queued {
    bytes: usize,
    total: Arc<AtomicUsize>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.total.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// A lane thread.
struct Lane {
    tx: Option<SyncSender<ToLane>>,
    progress: Arc<LaneProgress>,
    handle: Option<JoinHandle<()>>,
}

impl Lane {
    fn spawn() -> anyhow::Result<Self> {
        let (tx, rx) = sync_channel(LANE_QUEUE);
        let progress = Arc::new(LaneProgress::default());
        let p = progress.clone();
        let handle = std::thread::Builder::new()
            .name("silt-encode".into())
            .spawn(move || lane_main(rx, &p))?;
        Ok(Self {
            tx: Some(tx),
            progress,
            handle: Some(handle),
        })
    }

    fn send(&self, m: ToLane) -> anyhow::Result<()> {
        match &self.tx {
            Some(tx) if tx.send(m).is_ok() => Ok(()),
            _ => anyhow::bail!("a column encoding thread ended unexpectedly (it panicked)"),
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // The thread ends once its queue is closed (after the slices still in it).
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn lane_main(rx: Receiver<ToLane>, p: &LaneProgress) {
    let mut cols = Columns::default();
    let mut error: Option<ParquetError> = None;
    for m in rx {
        match m {
            ToLane::Start(c, rows) => {
                cols = c;
                p.rows.store(rows, Ordering::Relaxed);
                p.estimated.store(0, Ordering::Relaxed);
            }
            ToLane::Slice { batch, leaves, .. } => {
                if error.is_some() {
                    continue;
                }
                match cols.write(&batch, leaves) {
                    Ok(()) => {
                        p.estimated.store(cols.estimated(), Ordering::Relaxed);
                        p.memory.store(cols.memory_size(), Ordering::Relaxed);
                        p.rows.fetch_add(batch.num_rows(), Ordering::Release);
                    }
                    Err(e) => {
                        error = Some(e);
                        p.failed.store(true, Ordering::Relaxed);
                    }
                }
            }
            ToLane::Sync(reply) => {
                let _ = reply.send(());
            }
            ToLane::Close(reply) => {
                let r = match error.take() {
                    Some(e) => Err(e),
                    None => {
                        let est = cols.estimated();
                        std::mem::take(&mut cols).close().map(|c| (est, c))
                    }
                };
                p.memory.store(0, Ordering::Relaxed);
                let _ = reply.send(r);
            }
        }
    }
}

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
        let (file, factory) =
            ArrowWriter::try_new_with_options(Summing::new(out), Arc::new(stored), options)?
                .into_serialized_writer()?;
        let columns = columns(&factory, &blooms, 0)?;
        let codec = CodecState::new(file.schema_descr(), file.properties());
        Ok(Self {
            file,
            factory,
            schema: schema.clone(),
            group: Group::Inline(Columns(columns)),
            lanes: Vec::new(),
            blooms,
            rows_in_group: 0,
            target,
            max_rows: max_rows.max(1),
            calibration: 1.0,
            bytes_per_row: None,
            costs: None,
            queued: Arc::new(AtomicUsize::new(0)),
            lane_start_rows: 0,
            codec,
        })
    }

    /// The row group's encoded size so far, calibrated (parquet-rs's estimate times what the
    /// last row group really took). With lanes, each lane's estimate is scaled from the rows it
    /// has encoded to the rows handed to it; before a lane has encoded any slice of the row
    /// group, the last row group's bytes per row, and `None` in the first row group.
    fn estimated(&self) -> Option<f64> {
        let raw = match &self.group {
            Group::Inline(c) => c.estimated() as f64,
            Group::Unassigned(_) => 0.0,
            Group::Lanes(_) => {
                let mut sum = 0.0;
                for l in &self.lanes {
                    let rows = l.progress.rows.load(Ordering::Acquire);
                    if rows <= self.lane_start_rows {
                        return self.bytes_per_row.map(|b| b * self.rows_in_group as f64);
                    }
                    let est = l.progress.estimated.load(Ordering::Relaxed) as f64;
                    sum += est * self.rows_in_group as f64 / rows as f64;
                }
                sum
            }
        };
        Some(raw * self.calibration)
    }

    /// [`Self::estimated`], waiting for the lanes when it is not known yet.
    fn estimate_now(&mut self) -> anyhow::Result<f64> {
        if let Some(e) = self.estimated() {
            return Ok(e);
        }
        self.sync_lanes()?;
        Ok(self.estimated().unwrap_or(0.0))
    }

    /// Encodes one slice into the row group in progress: here, or on the lanes.
    fn encode(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        let mut leaves: Vec<Option<ArrowLeafColumn>> = Vec::new();
        let mut sizes: Vec<usize> = Vec::new();
        for (field, col) in self.schema.fields().iter().zip(batch.columns()) {
            let l = compute_leaves(field, col)?;
            let share = col.get_array_memory_size() / l.len().max(1);
            sizes.extend(std::iter::repeat_n(share, l.len()));
            leaves.extend(l.into_iter().map(Some));
        }
        self.codec.give(&sizes);
        if self.lanes.is_empty() && batch.num_rows() >= INLINE_ROWS {
            self.lanes = (0..ENCODE_THREADS)
                .map(|_| Lane::spawn())
                .collect::<anyhow::Result<_>>()?;
            if let Group::Inline(c) = std::mem::replace(&mut self.group, Group::Lanes(Vec::new())) {
                self.group = Group::Unassigned(c.0);
            }
        }
        match &mut self.group {
            Group::Inline(c) => {
                c.write(batch, leaves.into_iter().flatten().collect())?;
                self.rows_in_group += batch.num_rows();
                return Ok(());
            }
            Group::Unassigned(_) => self.assign(&sizes)?,
            Group::Lanes(_) => {}
        }
        if self
            .lanes
            .iter()
            .any(|l| l.progress.failed.load(Ordering::Relaxed))
        {
            // The lane's error comes back with its columns.
            self.close_lanes()?;
            anyhow::bail!("a column encoding thread failed");
        }
        let Group::Lanes(lanes) = &self.group else {
            unreachable!("assigned above")
        };
        let bytes = crate::background::slice_bytes(batch);
        self.queued.fetch_add(bytes, Ordering::Relaxed);
        let queued = Arc::new(Queued {
            bytes,
            total: self.queued.clone(),
        });
        for (lane, idx) in self.lanes.iter().zip(lanes) {
            let mine = idx
                .iter()
                .map(|&i| leaves[i].take().expect("each leaf in one lane"))
                .collect();
            lane.send(ToLane::Slice {
                batch: batch.clone(),
                leaves: mine,
                _queued: queued.clone(),
            })?;
        }
        self.rows_in_group += batch.num_rows();
        Ok(())
    }

    /// Shares the new row group's columns out to the lanes: by the time each took in the last
    /// row group, or by `sizes` (the bytes of its first slice) when that is not known.
    fn assign(&mut self, sizes: &[usize]) -> anyhow::Result<()> {
        let Group::Unassigned(cols) = std::mem::replace(&mut self.group, Group::Lanes(Vec::new()))
        else {
            unreachable!("called on unassigned columns")
        };
        let weights: Vec<usize> = match &self.costs {
            Some(c) if c.len() == cols.len() => c.iter().map(|&n| n as usize).collect(),
            _ => sizes.to_vec(),
        };
        let plan = balance(&weights, self.lanes.len());
        for lane in &self.lanes {
            // What the lanes published is about the row group before until they take the
            // new columns; they answered its close, so they publish nothing until then.
            lane.progress
                .rows
                .store(self.rows_in_group, Ordering::Release);
            lane.progress.estimated.store(0, Ordering::Relaxed);
        }
        self.lane_start_rows = self.rows_in_group;
        let mut slots: Vec<Option<Column>> = cols.into_iter().map(Some).collect();
        for (lane, idx) in self.lanes.iter().zip(&plan) {
            let mine = idx
                .iter()
                .map(|&i| slots[i].take().expect("each column in one lane"))
                .collect();
            lane.send(ToLane::Start(Columns(mine), self.rows_in_group))?;
        }
        self.group = Group::Lanes(plan);
        Ok(())
    }

    /// Waits for the lanes to encode every slice they were given.
    fn sync_lanes(&mut self) -> anyhow::Result<()> {
        let mut replies = Vec::with_capacity(self.lanes.len());
        for lane in &self.lanes {
            let (tx, rx) = sync_channel(1);
            lane.send(ToLane::Sync(tx))?;
            replies.push(rx);
        }
        for rx in replies {
            rx.recv().map_err(|_| {
                anyhow::anyhow!("a column encoding thread ended unexpectedly (it panicked)")
            })?;
        }
        Ok(())
    }

    /// Waits for the lanes to encode what they were given and close their columns; returns the
    /// lanes' estimate of the row group and its chunks in column order.
    fn close_lanes(&mut self) -> anyhow::Result<(usize, Vec<Closed>)> {
        let mut replies = Vec::with_capacity(self.lanes.len());
        for lane in &self.lanes {
            let (tx, rx) = sync_channel(1);
            lane.send(ToLane::Close(tx))?;
            replies.push(rx);
        }
        let (mut est, mut closed) = (0, Vec::new());
        for rx in replies {
            let (e, c) = rx.recv().map_err(|_| {
                anyhow::anyhow!("a column encoding thread ended unexpectedly (it panicked)")
            })??;
            est += e;
            closed.extend(c);
        }
        closed.sort_by_key(|c| c.leaf);
        Ok((est, closed))
    }

    fn flush_row_group(&mut self) -> anyhow::Result<()> {
        if self.rows_in_group == 0 {
            return Ok(());
        }
        let index = self.file.flushed_row_groups().len();
        let next = columns(&self.factory, &self.blooms, index + 1)?;
        let next = if self.lanes.is_empty() {
            Group::Inline(Columns(next))
        } else {
            Group::Unassigned(next)
        };
        let (estimate, closed) = match std::mem::replace(&mut self.group, next) {
            Group::Inline(c) => (c.estimated(), c.close()?),
            Group::Lanes(_) => self.close_lanes()?,
            Group::Unassigned(_) => unreachable!("a row group with rows has its columns assigned"),
        };
        self.codec.new_row_group();
        self.costs = Some(closed.iter().map(|c| c.nanos).collect());
        let mut rg = self.file.next_row_group()?;
        for c in closed {
            c.chunk.append_to_row_group(&mut rg)?;
        }
        rg.close()?;
        self.rows_in_group = 0;
        if let Some(rg) = self.file.flushed_row_groups().last() {
            if estimate > 0 {
                let observed = rg.compressed_size() as f64 / estimate as f64;
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

/// The column writers (and silt's bloom filters) of row group `index`.
fn columns(
    factory: &ArrowRowGroupWriterFactory,
    blooms: &Blooms,
    index: usize,
) -> anyhow::Result<Vec<Column>> {
    let writers = factory.create_column_writers(index)?;
    let filters = blooms.builders(writers.len())?;
    Ok(writers
        .into_iter()
        .zip(filters)
        .enumerate()
        .map(|(leaf, (writer, filter))| Column {
            leaf,
            writer,
            filter,
            nanos: 0,
        })
        .collect())
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
            let mut est = self.estimate_now()?;
            if matches!(self.group, Group::Lanes(_)) && est >= NEAR_TARGET * target {
                // Near the target, size the last slices from what the lanes have really
                // encoded, not from an extrapolation of slices still in their queues (which
                // once made a row group 20 % larger than the target).
                self.sync_lanes()?;
                est = self.estimate_now()?;
            }
            let mut take = WRITE_SLICE_ROWS
                .min(batch.num_rows() - off)
                .min(self.max_rows - self.rows_in_group);
            let per_row = if self.rows_in_group > 0 {
                Some(est / self.rows_in_group as f64)
            } else {
                self.bytes_per_row
            };
            match per_row {
                Some(b) if b > 0.0 => {
                    let fit = ((target - est) / b).floor().max(1.0) as usize;
                    take = take.min(fit);
                }
                // Nothing known yet about this data: a small first slice to learn from.
                _ => take = take.min(WRITE_PROBE_ROWS),
            }
            // parquet-rs converts a list's whole child array for every slice written
            // (`crate::narrow`), so lists are narrowed to the slice first.
            self.encode(&crate::narrow::narrow_lists(&batch.slice(off, take))?)?;
            off += take;
            if self.estimated().unwrap_or(0.0) >= target || self.rows_in_group >= self.max_rows {
                self.flush_row_group()?;
            }
        }
        Ok(())
    }

    fn memory_size(&self) -> usize {
        let here = match &self.group {
            Group::Inline(c) => c.memory_size(),
            Group::Unassigned(c) => Columns::memory_size_of(c),
            Group::Lanes(_) => 0,
        };
        here + self.codec.bytes()
            + self.queued.load(Ordering::Relaxed)
            + self
                .lanes
                .iter()
                .map(|l| l.progress.memory.load(Ordering::Relaxed))
                .sum::<usize>()
    }

    fn codec_memory(&self) -> usize {
        self.codec.bytes()
    }

    fn finish(mut self: Box<Self>) -> anyhow::Result<BufWriter<File>> {
        self.flush_row_group()?;
        // Stop the lane threads before the file is handed on.
        self.lanes.clear();
        // The whole file is summed: the footer holds a placeholder, found among the bytes after
        // the pages (page index and footer) and overwritten with the sum once all is written.
        self.file.append_key_value_metadata(KeyValue::new(
            checksum::KEY.to_string(),
            checksum::PLACEHOLDER.to_string(),
        ));
        self.file.flush()?;
        self.file.inner_mut().watch();
        Ok(self.file.into_inner()?.seal()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::WriterConfig;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    /// The sink's memory, and its codecs' share, after one slice written inline at `level`.
    fn memory_at(level: i32) -> (usize, usize) {
        let cfg = WriterConfig {
            level: Some(level),
            ..WriterConfig::default()
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("uid", DataType::Utf8, false),
            Field::new("n", DataType::Int64, false),
        ]));
        let rows = INLINE_ROWS as i64 - 1;
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("C{:016x}", i * 7919)),
                )),
                Arc::new(Int64Array::from_iter_values((0..rows).map(|i| i * i % 977))),
            ],
        )
        .unwrap();
        let (props, blooms) =
            super::super::properties::parquet_properties(&cfg, &schema, &[], rows as usize)
                .unwrap();
        let out = BufWriter::new(tempfile::tempfile().unwrap());
        let mut sink = ParquetSink::new(
            out,
            &schema,
            props.build(),
            cfg.row_group_bytes,
            cfg.row_group_rows,
            blooms,
        )
        .unwrap();
        assert_eq!(sink.codec_memory(), 0, "no page compressed yet");
        super::super::FileSink::write(&mut sink, &batch).unwrap();
        (sink.memory_size(), sink.codec_memory())
    }

    #[test]
    fn memory_counts_the_codecs_state() {
        let (one, codec_one) = memory_at(1);
        let (nineteen, codec_nineteen) = memory_at(19);
        assert!(codec_one > 0 && codec_one < 2 << 20, "{codec_one}");
        // zstd level 19 sizes its contexts several times larger; parquet-rs's own figure does
        // not change with the level (compressed pages are only smaller).
        assert!(
            codec_nineteen > 4 * codec_one,
            "{codec_nineteen} vs {codec_one}"
        );
        assert!(nineteen >= codec_nineteen && one >= codec_one);
        assert!(
            nineteen - one >= codec_nineteen - codec_one - (64 << 10),
            "memory {nineteen} at level 19 against {one} at 1"
        );
    }
}
