//! [`SingleFileWriter`]: the [`Emit`] behind `silt convert`: all batches of one table into exactly
//! one Parquet or Feather file (no partition directories), written through [`store::open`] with
//! the [`WriterConfig`]'s codec, level, row-group and page sizes, bloom filters and sort keys, and
//! published atomically (hidden temp name, fsync, rename) like lake files.
//!
//! Sorting: rows are sorted by `cfg.sort` (or the time column named in `silt.time_column`) in
//! bounded memory, in one pass when the input is roughly in order (as logs are):
//! 1. batches are buffered (unsorted) up to `cfg.sort_buffer_bytes`; then the buffer is sorted
//!    and its lower half is written straight into the output file (the *main run*), the upper
//!    half kept (replacement-selection style: input out of order by less than about half the
//!    buffer still comes out in order, and nothing is written twice);
//! 2. rows older than what the main run already holds are *late*: they are buffered up to a
//!    third of `cfg.memory_bytes` and spilled, sorted, as temporary Arrow IPC runs;
//! 3. at the end, with no late rows the main run is the output and is published as it is;
//!    otherwise the main run (read back from its temporary Parquet/Feather file) and the late runs
//!    are merged (k-way, comparing `arrow-row` keys) into the output, one batch of each run in
//!    memory at a time.
//!
//! Without sort keys the batches are written in input order, straight into the main run.
//!
//! Schemas: successive batches may differ (a new field, a widened type); the output's schema is
//! the unification of all of them (`silt_core::schema`). A change closes the main run (it becomes
//! a run to merge) and a new main run starts with the unified schema; every batch and run is
//! conformed to the final schema when it is written. Rejects go to `<rejects root>/_rejects/` as
//! for a lake.
//!
//! Touches only the output file, its hidden temporary files in the same directory, and the
//! rejects directory.

use std::cmp::Ordering;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use arrow::array::{make_comparator, ArrayRef, DynComparator, RecordBatch, UInt32Array};
use arrow::compute::{
    concat_batches, interleave_record_batch, take_record_batch, SortColumn, SortOptions,
};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;
use arrow::ipc::writer::FileWriter;
use arrow_row::{OwnedRow, RowConverter, Rows, SortField};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use silt_core::{meta, schema, Emit, Reject, TableName};

use crate::config::{StoreKind, WriterConfig};
use crate::publish::{DirectoryPublisher, PendingFile, PublishedFile, Publisher};
use crate::rejects::RejectWriter;
use crate::store;
use crate::writer::{column_by_path, partition_point, sort_buffered};

/// Rows per batch handed to the file sink.
const OUT_ROWS: usize = 65536;
/// Rows per batch of a late run (the merge holds one batch of every run in memory).
const RUN_BATCH_ROWS: usize = 8192;

/// What a conversion produced.
#[derive(Debug, Default)]
pub struct SingleSummary {
    /// The published file (`None` when there were no rows).
    pub file: Option<PublishedFile>,
    pub rows: u64,
    pub rejects: u64,
    pub rejects_file: Option<PathBuf>,
    /// Runs merged into the output (0 = written in one pass: the input was in order, or close).
    pub runs: usize,
    pub bytes_in: u64,
}

/// A sorted temporary file to merge at the end.
enum RunFile {
    /// Late rows, as Arrow IPC.
    Ipc(PathBuf),
    /// A main run closed by a schema change or followed by late rows, in the output's store.
    Main(PathBuf, StoreKind),
}

impl RunFile {
    fn path(&self) -> &Path {
        match self {
            RunFile::Ipc(p) | RunFile::Main(p, _) => p,
        }
    }

    /// The run's batches, in order (`batch_rows` per batch where the run is Parquet).
    fn open(
        &self,
        batch_rows: usize,
    ) -> anyhow::Result<Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>>>> {
        let p = self.path();
        let f = File::open(p).with_context(|| format!("cannot reopen {}", p.display()))?;
        Ok(match self {
            RunFile::Main(_, StoreKind::Parquet) => Box::new(
                ParquetRecordBatchReaderBuilder::try_new(f)?
                    .with_batch_size(batch_rows)
                    .build()?,
            ),
            RunFile::Ipc(_) | RunFile::Main(_, StoreKind::Feather) => {
                Box::new(crate::ipc::open(BufReader::new(f))?)
            }
        })
    }
}

/// The file the in-order rows stream into.
struct MainRun {
    path: PathBuf,
    schema: SchemaRef,
    sink: Box<dyn store::FileSink>,
    rows: u64,
    /// Sort key of the last row written.
    last_key: Option<OwnedRow>,
}

/// Writes one file; see the module documentation.
pub struct SingleFileWriter {
    path: PathBuf,
    cfg: WriterConfig,
    table: Option<TableName>,
    schema: Option<SchemaRef>,
    sort_keys: Option<Vec<String>>,
    /// The sort buffer (step 1), under the current schema's predecessors.
    window: Vec<RecordBatch>,
    window_bytes: usize,
    main: Option<MainRun>,
    /// Late rows not spilled yet (step 2).
    late: Vec<RecordBatch>,
    late_bytes: usize,
    runs: Vec<RunFile>,
    /// Temporary files created so far (names stay unique).
    temp_files: usize,
    converter: Option<RowConverter>,
    /// Rows received (sizes the bloom filters of a merged output).
    rows_in: usize,
    rejects: RejectWriter,
    summary: SingleSummary,
    /// Makes the output visible (an atomic rename by default).
    publisher: Box<dyn Publisher>,
    /// Whether the output's name gets its schema's tag ([`Self::with_schema_tag`]).
    schema_tag: bool,
}

impl SingleFileWriter {
    /// A writer of `path`; rejects go under `rejects_root/_rejects/`.
    pub fn new(
        path: impl AsRef<Path>,
        cfg: WriterConfig,
        rejects_root: &Path,
    ) -> anyhow::Result<Self> {
        cfg.validate().map_err(anyhow::Error::msg)?;
        Ok(Self {
            path: path.as_ref().to_path_buf(),
            cfg,
            table: None,
            schema: None,
            sort_keys: None,
            window: Vec::new(),
            window_bytes: 0,
            main: None,
            late: Vec::new(),
            late_bytes: 0,
            runs: Vec::new(),
            temp_files: 0,
            converter: None,
            rows_in: 0,
            rejects: RejectWriter::new(rejects_root),
            summary: SingleSummary::default(),
            publisher: Box::new(DirectoryPublisher),
            schema_tag: false,
        })
    }

    /// Names the output as a lake's data file: the path given with the tag of the schema it is
    /// written with before its extension ([`crate::layout::with_schema_tag`]); a file in a
    /// lake (compaction's outputs) carries it, a file the user named (`silt convert`) does not.
    pub fn with_schema_tag(mut self) -> Self {
        self.schema_tag = true;
        self
    }

    /// Where the output written with `schema` appears.
    fn output_path(&self, schema: &SchemaRef) -> PathBuf {
        if self.schema_tag {
            crate::layout::with_schema_tag(&self.path, schema, self.cfg.store)
        } else {
            self.path.clone()
        }
    }

    /// Publishes the output through `p` instead of a plain atomic rename (compaction records
    /// what the file replaces before it appears).
    pub fn with_publisher(mut self, p: Box<dyn Publisher>) -> Self {
        self.publisher = p;
        self
    }

    /// Gives the output up: removes every temporary file written so far; nothing is published.
    pub fn abandon(mut self) {
        if let Some(m) = self.main.take() {
            drop(m.sink);
            let _ = std::fs::remove_file(&m.path);
        }
        for r in &self.runs {
            let _ = std::fs::remove_file(r.path());
        }
    }

    /// Memory for late rows before they are spilled.
    fn late_budget(&self) -> usize {
        (self.cfg.memory_bytes / 3).max(1 << 20)
    }

    /// The sort buffer: `--sort-buffer`, within a third of `--memory`.
    fn window_budget(&self) -> usize {
        self.cfg
            .sort_buffer_bytes
            .min(self.cfg.memory_bytes / 3)
            .max(1 << 20)
    }

    fn push(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.table.is_none() {
            self.table = Some(table.clone());
        }
        let bs = batch.schema();
        let unified = match &self.schema {
            None => {
                let mut s = bs.as_ref().clone();
                s.metadata.insert(
                    meta::TABLE.into(),
                    self.table.as_ref().expect("set").to_string(),
                );
                Arc::new(s)
            }
            Some(s) if s.fields() == bs.fields() => s.clone(),
            Some(s) => {
                let mut u = schema::unify_schemas(s, &bs);
                u.metadata = s.metadata().clone();
                Arc::new(u)
            }
        };
        if self.sort_keys.is_none() {
            let keys = if self.cfg.sort.is_empty() {
                // `--partition-by FIELD` names the time column for a single file too.
                self.cfg
                    .time_column
                    .as_deref()
                    .or_else(|| meta::time_column(&unified))
                    .filter(|c| unified.field_with_name(c).is_ok())
                    .map(|c| vec![c.to_string()])
                    .unwrap_or_default()
            } else {
                self.cfg.sort.clone()
            };
            for k in &keys {
                let c = column_by_path(&batch, k)
                    .with_context(|| format!("--sort {k}: the input has no column {k}"))?;
                anyhow::ensure!(
                    !c.data_type().is_nested(),
                    "--sort {k}: column {k} is {} and cannot be sorted",
                    c.data_type()
                );
            }
            self.sort_keys = Some(keys);
        }
        let changed = self
            .schema
            .as_ref()
            .is_some_and(|s| s.fields() != unified.fields());
        if changed {
            // What is buffered belongs to the old schema's main run; that run is complete.
            self.write_window(true)?;
            self.close_main()?;
            // A sort key's type may have changed (integers widened to floats).
            self.converter = None;
        }
        self.schema = Some(unified);
        self.rows_in += batch.num_rows();
        self.window_bytes += batch.get_array_memory_size();
        self.window.push(batch);
        if self.window_bytes >= self.window_budget() {
            self.write_window(false)?;
        }
        Ok(())
    }

    fn keys(&self) -> &[String] {
        self.sort_keys.as_deref().unwrap_or(&[])
    }

    fn temp_path(&mut self, what: &str) -> PathBuf {
        let name = self
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        self.temp_files += 1;
        self.path.with_file_name(format!(
            ".{name}.{what}{}.{}.inprogress",
            self.temp_files,
            std::process::id()
        ))
    }

    /// Sort-key rows of a sorted batch (`None` without sort keys).
    fn key_rows(&mut self, b: &RecordBatch) -> anyhow::Result<Option<Rows>> {
        let cols: Vec<ArrayRef> = sort_columns(b, self.keys())?
            .into_iter()
            .map(|c| c.values)
            .collect();
        if cols.is_empty() {
            return Ok(None);
        }
        if self.converter.is_none() {
            let fields = cols
                .iter()
                .map(|c| SortField::new_with_options(c.data_type().clone(), sort_options()))
                .collect();
            self.converter = Some(RowConverter::new(fields)?);
        }
        Ok(Some(
            self.converter
                .as_ref()
                .expect("set")
                .convert_columns(&cols)?,
        ))
    }

    /// Step 1: sorts the buffer and writes its lower half (all of it when `all`) to the main
    /// run; rows older than the main run's last row go to the late buffer. A buffer that is
    /// already in order (logs usually are) is written as it is, without the sort's copy.
    fn write_window(&mut self, all: bool) -> anyhow::Result<()> {
        if self.window.is_empty() {
            return Ok(());
        }
        let schema = self.schema.clone().expect("schema");
        let parts = conform_all(std::mem::take(&mut self.window), &schema)?;
        let total_bytes = std::mem::take(&mut self.window_bytes);
        let keys = self.keys().to_vec();
        let sorted = if keys.is_empty() || in_order(&parts, &keys)? {
            parts
        } else {
            vec![sort_buffered(&schema, &parts, &keys)?]
        };
        let n: usize = sorted.iter().map(RecordBatch::num_rows).sum();
        let emit = if all || keys.is_empty() { n } else { n / 2 };
        // Batches (or slices) holding rows [0, emit) are written; the rest stay buffered.
        let mut chunks = Vec::new();
        let mut at = 0;
        for b in sorted {
            let rows = b.num_rows();
            if at + rows <= emit {
                chunks.push(b);
            } else if at >= emit {
                self.window.push(b);
            } else {
                let cut = emit - at;
                chunks.push(b.slice(0, cut));
                self.window.push(b.slice(cut, rows - cut));
            }
            at += rows;
        }
        self.window_bytes = total_bytes * (n - emit) / n.max(1);
        if self.main.is_none() && !chunks.is_empty() {
            self.open_main(&schema, &chunks)?;
        }
        for chunk in chunks {
            self.write_sorted(&chunk)?;
        }
        Ok(())
    }

    /// Opens the main run. The store decides column encodings from a sample of the first rows
    /// ([`store::CARDINALITY_SAMPLE`] of them, which the chunks of an in-order input are smaller
    /// than one by one).
    fn open_main(&mut self, schema: &SchemaRef, chunks: &[RecordBatch]) -> anyhow::Result<()> {
        let mut sample = Vec::new();
        let mut rows = 0;
        for c in chunks {
            if rows >= store::CARDINALITY_SAMPLE {
                break;
            }
            let k = c.num_rows().min(store::CARDINALITY_SAMPLE - rows);
            sample.push(c.slice(0, k));
            rows += k;
        }
        let sample = concat_batches(schema, &sample)?;
        let path = self.temp_path("main");
        let f = File::create(&path)
            .with_context(|| format!("cannot create temporary file {}", path.display()))?;
        let out = BufWriter::with_capacity(1 << 20, f);
        // Bloom filters start at the largest size and are folded down when written.
        let sink = store::open(&self.cfg, schema, self.keys(), usize::MAX, &sample, out)?;
        self.main = Some(MainRun {
            path,
            schema: schema.clone(),
            sink,
            rows: 0,
            last_key: None,
        });
        Ok(())
    }

    /// Appends a sorted chunk to the open main run, its rows older than the main run's last row
    /// to the late buffer.
    fn write_sorted(&mut self, chunk: &RecordBatch) -> anyhow::Result<()> {
        let emit = chunk.num_rows();
        if emit == 0 {
            return Ok(());
        }
        // Rows [start, emit) extend the main run; rows [0, start) are older than its last row.
        // Only the first and last keys are converted unless the chunk starts too early.
        let last = self.main.as_ref().and_then(|m| m.last_key.clone());
        let start = match (&last, self.key_rows(&chunk.slice(0, 1))?) {
            (Some(last), Some(first)) if first.row(0) < last.row() => {
                let rows = self.key_rows(chunk)?.expect("keys");
                partition_point(0, emit, |j| rows.row(j) < last.row())
            }
            _ => 0,
        };
        if start > 0 {
            // Copied out of the chunk: a slice would keep the chunk's buffers alive.
            let late = take_record_batch(chunk, &UInt32Array::from_iter_values(0..start as u32))?;
            self.late_bytes += late.get_array_memory_size();
            self.late.push(late);
            if self.late_bytes >= self.late_budget() {
                self.spill_late()?;
            }
        }
        if start == emit {
            return Ok(());
        }
        let part = chunk.slice(start, emit - start);
        let last_key = self
            .key_rows(&chunk.slice(emit - 1, 1))?
            .map(|r| r.row(0).owned());
        let main = self.main.as_mut().expect("open");
        let mut off = 0;
        while off < part.num_rows() {
            let k = OUT_ROWS.min(part.num_rows() - off);
            main.sink.write(&part.slice(off, k))?;
            off += k;
        }
        main.rows += part.num_rows() as u64;
        main.last_key = last_key;
        Ok(())
    }

    /// Finishes the main run's file and keeps it as a run to merge.
    fn close_main(&mut self) -> anyhow::Result<()> {
        let Some(main) = self.main.take() else {
            return Ok(());
        };
        self.runs
            .push(RunFile::Main(main.path.clone(), self.cfg.store));
        let w = main.sink.finish()?;
        w.into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("cannot write {}", main.path.display()))?;
        Ok(())
    }

    /// Step 2: sorts the late rows and writes them as an IPC run.
    fn spill_late(&mut self) -> anyhow::Result<()> {
        if self.late.is_empty() {
            return Ok(());
        }
        let schema = self.schema.clone().expect("schema");
        let parts = conform_all(std::mem::take(&mut self.late), &schema)?;
        self.late_bytes = 0;
        let sorted = sort_buffered(&schema, &parts, self.keys())?;
        drop(parts);
        let path = self.temp_path("late");
        self.runs.push(RunFile::Ipc(path.clone()));
        let f = File::create(&path)
            .with_context(|| format!("cannot create temporary file {}", path.display()))?;
        let mut w = FileWriter::try_new(BufWriter::new(f), &sorted.schema())?;
        let mut off = 0;
        while off < sorted.num_rows() {
            let n = RUN_BATCH_ROWS.min(sorted.num_rows() - off);
            w.write(&sorted.slice(off, n))?;
            off += n;
        }
        w.finish()?;
        Ok(())
    }

    /// Writes the file and publishes it.
    pub fn finish(mut self) -> anyhow::Result<SingleSummary> {
        let result = self.write_output();
        if let Some(m) = self.main.take() {
            let _ = std::fs::remove_file(&m.path);
        }
        for r in &self.runs {
            let _ = std::fs::remove_file(r.path());
        }
        let file = result?;
        self.summary.file = file;
        self.summary.rejects_file = self.rejects.finish()?;
        Ok(self.summary)
    }

    fn write_output(&mut self) -> anyhow::Result<Option<PublishedFile>> {
        let Some(schema) = self.schema.clone() else {
            return Ok(None);
        };
        let table = self.table.clone().expect("table with schema");
        self.write_window(true)?;
        let in_one_pass = self.runs.is_empty()
            && self.late.is_empty()
            && self
                .main
                .as_ref()
                .is_some_and(|m| m.schema.fields() == schema.fields());
        if in_one_pass {
            let main = self.main.take().expect("main run");
            let w = main.sink.finish()?;
            let file = PendingFile {
                table,
                final_path: self.output_path(&main.schema),
                temp_path: main.path,
            };
            self.summary.rows = main.rows;
            return Ok(Some(self.publisher.publish(file, w, main.rows)?));
        }
        self.close_main()?;
        self.spill_late()?;
        self.summary.runs = self.runs.len();
        let (path, cfg) = (self.output_path(&schema), self.cfg.clone());
        let mut out = Output::new(&path, table, &cfg, &schema, self.keys().to_vec());
        out.expected_rows = self.rows_in;
        self.merge(&schema, &mut out)?;
        self.summary.rows = out.rows;
        out.finish(self.publisher.as_mut())
    }

    /// K-way merge of the sorted runs (or their concatenation without sort keys).
    fn merge(&self, schema: &SchemaRef, out: &mut Output) -> anyhow::Result<()> {
        // One batch of every run is in memory at a time: with many runs (every schema change
        // closes the main run) the batches read back get smaller, so the total stays bounded.
        let batch_rows = (OUT_ROWS / self.runs.len().max(1)).max(1024);
        let mut runs: Vec<RunCursor> = Vec::new();
        for r in &self.runs {
            runs.push(RunCursor {
                reader: r.open(batch_rows)?,
                batch: None,
                rows: None,
                idx: 0,
            });
        }
        let keys = self.keys();
        if keys.is_empty() {
            for r in runs.iter_mut() {
                for b in r.reader.by_ref() {
                    out.write(&schema::conform(&b?, schema)?)?;
                }
            }
            return Ok(());
        }
        let mut converter: Option<RowConverter> = None;
        for r in runs.iter_mut() {
            r.advance(schema, keys, &mut converter)?;
        }
        let mut picks: Vec<(usize, usize)> = Vec::with_capacity(OUT_ROWS);
        loop {
            // The run whose current row sorts first (k is small: a linear scan is enough).
            let mut best: Option<usize> = None;
            for (i, r) in runs.iter().enumerate() {
                let Some(rows) = &r.rows else { continue };
                best = match best {
                    Some(b) => {
                        let br = runs[b].rows.as_ref().expect("live");
                        if rows.row(r.idx) < br.row(runs[b].idx) {
                            Some(i)
                        } else {
                            Some(b)
                        }
                    }
                    None => Some(i),
                };
            }
            let Some(b) = best else { break };
            picks.push((b, runs[b].idx));
            runs[b].idx += 1;
            let exhausted = runs[b].idx >= runs[b].batch.as_ref().map_or(0, RecordBatch::num_rows);
            if exhausted || picks.len() >= OUT_ROWS {
                // Emit before a run's batch is replaced (the picks point into it).
                flush_picks(&runs, &mut picks, out)?;
                if exhausted {
                    runs[b].advance(schema, keys, &mut converter)?;
                }
            }
        }
        flush_picks(&runs, &mut picks, out)
    }
}

fn flush_picks(
    runs: &[RunCursor],
    picks: &mut Vec<(usize, usize)>,
    out: &mut Output,
) -> anyhow::Result<()> {
    if picks.is_empty() {
        return Ok(());
    }
    // Batches of runs without a current batch are never picked; pass any live one in their slot.
    let live: Vec<&RecordBatch> = runs.iter().filter_map(|r| r.batch.as_ref()).collect();
    let mut slot = vec![0usize; runs.len()];
    let mut k = 0;
    for (i, r) in runs.iter().enumerate() {
        if r.batch.is_some() {
            slot[i] = k;
            k += 1;
        }
    }
    let idx: Vec<(usize, usize)> = picks.iter().map(|(r, i)| (slot[*r], *i)).collect();
    let b = interleave_record_batch(&live, &idx)?;
    picks.clear();
    out.write(&b)
}

struct RunCursor {
    reader: Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>>>,
    batch: Option<RecordBatch>,
    rows: Option<Rows>,
    idx: usize,
}

impl RunCursor {
    /// Loads the run's next non-empty batch (conformed to the final schema) and its sort keys.
    fn advance(
        &mut self,
        schema: &SchemaRef,
        keys: &[String],
        converter: &mut Option<RowConverter>,
    ) -> anyhow::Result<()> {
        self.batch = None;
        self.rows = None;
        self.idx = 0;
        for b in self.reader.by_ref() {
            let b = schema::conform(&b?, schema)?;
            if b.num_rows() == 0 {
                continue;
            }
            let cols: Vec<ArrayRef> = sort_columns(&b, keys)?
                .into_iter()
                .map(|c| c.values)
                .collect();
            if converter.is_none() {
                let fields = cols
                    .iter()
                    .map(|c| SortField::new_with_options(c.data_type().clone(), sort_options()))
                    .collect();
                *converter = Some(RowConverter::new(fields)?);
            }
            self.rows = Some(converter.as_ref().expect("set").convert_columns(&cols)?);
            self.batch = Some(b);
            return Ok(());
        }
        Ok(())
    }
}

/// Buffered batches under the current (unified) schema.
fn conform_all(batches: Vec<RecordBatch>, schema: &SchemaRef) -> anyhow::Result<Vec<RecordBatch>> {
    Ok(batches
        .iter()
        .map(|b| schema::conform(b, schema))
        .collect::<Result<Vec<_>, _>>()?)
}

/// Whether `batches`, one after the other, are already sorted by `keys`: one comparison per row,
/// against a sort's copy of every value.
fn in_order(batches: &[RecordBatch], keys: &[String]) -> anyhow::Result<bool> {
    fn le(cmps: &[DynComparator], i: usize, j: usize) -> bool {
        for c in cmps {
            match c(i, j) {
                Ordering::Less => return true,
                Ordering::Greater => return false,
                Ordering::Equal => {}
            }
        }
        true
    }
    let mut prev: Option<Vec<ArrayRef>> = None;
    for b in batches.iter().filter(|b| b.num_rows() > 0) {
        let cols: Vec<ArrayRef> = sort_columns(b, keys)?
            .into_iter()
            .map(|c| c.values)
            .collect();
        if let Some(p) = &prev {
            let across = p
                .iter()
                .zip(&cols)
                .map(|(a, c)| make_comparator(a.as_ref(), c.as_ref(), sort_options()))
                .collect::<Result<Vec<_>, _>>()?;
            if !le(&across, p[0].len() - 1, 0) {
                return Ok(false);
            }
        }
        let within = cols
            .iter()
            .map(|c| make_comparator(c.as_ref(), c.as_ref(), sort_options()))
            .collect::<Result<Vec<_>, _>>()?;
        if !(1..b.num_rows()).all(|i| le(&within, i - 1, i)) {
            return Ok(false);
        }
        prev = Some(cols);
    }
    Ok(true)
}

fn sort_options() -> SortOptions {
    SortOptions {
        descending: false,
        nulls_first: true,
    }
}

fn sort_columns(batch: &RecordBatch, keys: &[String]) -> anyhow::Result<Vec<SortColumn>> {
    keys.iter()
        .map(|k| {
            let values = column_by_path(batch, k)
                .with_context(|| format!("sort key {k:?} is not a column"))?;
            Ok(SortColumn {
                values,
                options: Some(sort_options()),
            })
        })
        .collect()
}

/// The output file: opened with the first batch (the store sizes dictionaries from it).
struct Output<'a> {
    path: &'a Path,
    table: TableName,
    cfg: &'a WriterConfig,
    schema: &'a SchemaRef,
    sort: Vec<String>,
    open: Option<(PendingFile, Box<dyn store::FileSink>)>,
    rows: u64,
    expected_rows: usize,
}

impl<'a> Output<'a> {
    fn new(
        path: &'a Path,
        table: TableName,
        cfg: &'a WriterConfig,
        schema: &'a SchemaRef,
        sort: Vec<String>,
    ) -> Self {
        Self {
            path,
            table,
            cfg,
            schema,
            sort,
            open: None,
            rows: 0,
            expected_rows: OUT_ROWS,
        }
    }

    fn write(&mut self, b: &RecordBatch) -> anyhow::Result<()> {
        if b.num_rows() == 0 {
            return Ok(());
        }
        let b = schema::conform(b, self.schema)?;
        if self.open.is_none() {
            let (file, w) = PendingFile::create(self.table.clone(), self.path.to_path_buf())?;
            let sink = store::open(self.cfg, self.schema, &self.sort, self.expected_rows, &b, w)?;
            self.open = Some((file, sink));
        }
        let (_, sink) = self.open.as_mut().expect("open");
        sink.write(&b)?;
        self.rows += b.num_rows() as u64;
        Ok(())
    }

    fn finish(self, publisher: &mut dyn Publisher) -> anyhow::Result<Option<PublishedFile>> {
        let Some((file, sink)) = self.open else {
            return Ok(None);
        };
        let w = sink.finish()?;
        Ok(Some(publisher.publish(file, w, self.rows)?))
    }
}

/// A single file appears only when it is whole, at [`SingleFileWriter::finish`]: a commit before
/// that publishes nothing and acknowledges nothing.
impl silt_core::Sink for SingleFileWriter {
    fn commit(&mut self, _now: std::time::SystemTime) -> anyhow::Result<silt_core::Committed> {
        Ok(silt_core::Committed::No)
    }
}

impl Emit for SingleFileWriter {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        self.push(table, batch)
            .with_context(|| format!("writing {}", self.path.display()))
    }

    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.summary.rejects += 1;
        self.rejects.write(&reject)
    }

    fn progress(&mut self, bytes: u64) {
        self.summary.bytes_in += bytes;
    }
}
