//! [`SingleFileWriter`]: the [`Emit`] behind `silt convert`: all batches of one table into exactly
//! one Parquet or Feather file (no partition directories), written through [`store::open`] with
//! the [`WriterConfig`]'s codec, level, row-group and page sizes, bloom filters and sort keys, and
//! published atomically (hidden temp name, fsync, rename) like lake files.
//!
//! Sorting: rows are sorted by `cfg.sort` (or the time column named in `silt.time_column`) in
//! bounded memory. Batches are buffered until they hold a third of `cfg.memory_bytes` (Arrow
//! memory; the sort needs about as much again), then sorted and spilled as a *run* to a hidden
//! temporary Arrow IPC file next to the output. At the end, if nothing was spilled, the buffer is
//! sorted and written directly; otherwise the runs are merged (k-way, comparing `arrow-row`
//! keys) into the output, one batch of each run in memory at a time. Without sort keys the
//! batches are written in input order (through the same runs when they exceed the budget).
//!
//! Schemas: successive batches may differ (a new field, a widened type); the output's schema is
//! the unification of all of them (`silt_core::schema`), and every batch and run is conformed to
//! it before it is written. Rejects go to `<rejects root>/_rejects/` as for a lake.
//!
//! Touches only the output file, its hidden temporary files in the same directory, and the
//! rejects directory.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::{
    concat_batches, interleave_record_batch, lexsort_to_indices, take_record_batch, SortColumn,
    SortOptions,
};
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::FileReader;
use arrow::ipc::writer::FileWriter;
use arrow_row::{RowConverter, Rows, SortField};
use silt_core::{meta, schema, Emit, Reject, TableName};

use crate::config::WriterConfig;
use crate::publish::{DirectoryPublisher, PendingFile, PublishedFile, Publisher};
use crate::rejects::RejectWriter;
use crate::store;
use crate::writer::column_by_path;

/// Rows per batch handed to the file sink.
const OUT_ROWS: usize = 65536;

/// What a conversion produced.
#[derive(Debug, Default)]
pub struct SingleSummary {
    /// The published file (`None` when there were no rows).
    pub file: Option<PublishedFile>,
    pub rows: u64,
    pub rejects: u64,
    pub rejects_file: Option<PathBuf>,
    /// Sorted runs spilled to temporary files (0 = sorted in memory).
    pub runs: usize,
    pub bytes_in: u64,
}

/// Writes one file; see the module documentation.
pub struct SingleFileWriter {
    path: PathBuf,
    cfg: WriterConfig,
    table: Option<TableName>,
    schema: Option<SchemaRef>,
    sort_keys: Option<Vec<String>>,
    pending: Vec<RecordBatch>,
    pending_bytes: usize,
    runs: Vec<PathBuf>,
    /// Rows received (sizes the bloom filters).
    rows_in: usize,
    rejects: RejectWriter,
    summary: SingleSummary,
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
            pending: Vec::new(),
            pending_bytes: 0,
            runs: Vec::new(),
            rows_in: 0,
            rejects: RejectWriter::new(rejects_root),
            summary: SingleSummary::default(),
        })
    }

    fn budget(&self) -> usize {
        (self.cfg.memory_bytes / 3).max(1 << 20)
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
        self.schema = Some(unified);
        self.rows_in += batch.num_rows();
        self.pending_bytes += batch.get_array_memory_size();
        self.pending.push(batch);
        if self.pending_bytes >= self.budget() {
            self.spill()?;
        }
        Ok(())
    }

    fn keys(&self) -> &[String] {
        self.sort_keys.as_deref().unwrap_or(&[])
    }

    /// The buffered rows, conformed to the current schema and sorted.
    fn take_sorted(&mut self) -> anyhow::Result<Option<RecordBatch>> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        let schema = self.schema.clone().expect("schema");
        let parts = std::mem::take(&mut self.pending)
            .iter()
            .map(|b| schema::conform(b, &schema))
            .collect::<Result<Vec<_>, _>>()?;
        self.pending_bytes = 0;
        let all = concat_batches(&schema, &parts)?;
        drop(parts);
        let cols = sort_columns(&all, self.keys())?;
        if cols.is_empty() {
            return Ok(Some(all));
        }
        let idx = lexsort_to_indices(&cols, None)?;
        Ok(Some(take_record_batch(&all, &idx)?))
    }

    fn run_path(&self, n: usize) -> PathBuf {
        let name = self
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        self.path
            .with_file_name(format!(".{name}.run{n}.{}.inprogress", std::process::id()))
    }

    /// Sorts the buffer and writes it as a run file.
    fn spill(&mut self) -> anyhow::Result<()> {
        let Some(sorted) = self.take_sorted()? else {
            return Ok(());
        };
        let path = self.run_path(self.runs.len());
        self.runs.push(path.clone());
        let f = File::create(&path)
            .with_context(|| format!("cannot create temporary file {}", path.display()))?;
        let mut w = FileWriter::try_new(std::io::BufWriter::new(f), &sorted.schema())?;
        let mut off = 0;
        while off < sorted.num_rows() {
            let n = OUT_ROWS.min(sorted.num_rows() - off);
            w.write(&sorted.slice(off, n))?;
            off += n;
        }
        w.finish()?;
        Ok(())
    }

    /// Writes the file and publishes it.
    pub fn finish(mut self) -> anyhow::Result<SingleSummary> {
        let result = self.write_output();
        for r in &self.runs {
            let _ = std::fs::remove_file(r);
        }
        let file = result?;
        self.summary.runs = self.runs.len();
        self.summary.file = file;
        let rejects = std::mem::replace(&mut self.rejects, RejectWriter::new(Path::new(".")));
        self.summary.rejects_file = rejects.finish()?;
        Ok(self.summary)
    }

    fn write_output(&mut self) -> anyhow::Result<Option<PublishedFile>> {
        let Some(schema) = self.schema.clone() else {
            return Ok(None);
        };
        let table = self.table.clone().expect("table with schema");
        let (path, cfg) = (self.path.clone(), self.cfg.clone());
        let mut out = Output::new(&path, table, &cfg, &schema, self.keys().to_vec());
        out.expected_rows = self.rows_in;
        if self.runs.is_empty() {
            if let Some(sorted) = self.take_sorted()? {
                let mut off = 0;
                while off < sorted.num_rows() {
                    let n = OUT_ROWS.min(sorted.num_rows() - off);
                    out.write(&sorted.slice(off, n))?;
                    off += n;
                }
            }
        } else {
            self.spill()?;
            self.merge(&schema, &mut out)?;
        }
        self.summary.rows = out.rows;
        out.finish()
    }

    /// K-way merge of the sorted runs (or their concatenation without sort keys).
    fn merge(&self, schema: &SchemaRef, out: &mut Output) -> anyhow::Result<()> {
        let mut runs: Vec<RunCursor> = Vec::new();
        for p in &self.runs {
            let f = File::open(p).with_context(|| format!("cannot reopen {}", p.display()))?;
            let reader = FileReader::try_new(BufReader::new(f), None)?;
            runs.push(RunCursor {
                reader,
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
    reader: FileReader<BufReader<File>>,
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

    fn finish(self) -> anyhow::Result<Option<PublishedFile>> {
        let Some((file, sink)) = self.open else {
            return Ok(None);
        };
        let w = sink.finish()?;
        Ok(Some(DirectoryPublisher.publish(file, w, self.rows)?))
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
