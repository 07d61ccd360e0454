//! [`LakeWriter`]: the [`Emit`] that turns a reader's batches into lake files.
//!
//! For every table it keeps the unified schema of what it has seen, splits each batch by event
//! time into partitions, and for every partition:
//! 1. buffers rows (unsorted) up to `sort_buffer_bytes`;
//! 2. then sorts the buffer by the sort keys and writes its lower half, keeping the upper half
//!    (replacement-selection style: input that is out of order by less than the buffer still
//!    comes out as one sorted run);
//! 3. routes each sorted chunk to a *run*: an open file whose last written key is at most the
//!    chunk's keys. Rows older than every open run's last key (a connection logged hours after it
//!    started) start a new run instead of breaking the order of an existing file, so every file is
//!    sorted and its Parquet `sorting_columns` metadata is true.
//!
//! Memory is bounded by configuration: sort buffers (`sort_buffer_bytes` per partition, and
//! `memory_bytes` overall, beyond which the largest buffers are written early), in-progress row
//! groups (flushed at `row_group_bytes`), and at most `max_open_partitions` open files (the least
//! recently used is finished first). Input size does not matter.
//!
//! A schema change for a table (a new field, a widened type) finishes that table's open files and
//! continues with the unified schema; rows already buffered are conformed to it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use arrow::array::{Array, ArrayRef, StructArray, TimestampMicrosecondArray, UInt32Array};
use arrow::compute::{
    concat_batches, lexsort_to_indices, take_record_batch, SortColumn, SortOptions,
};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use arrow_row::{OwnedRow, RowConverter, Rows, SortField};
use silt_core::{meta, schema, Emit, Reject, TableName};

use crate::config::{Partitioning, WriterConfig};
use crate::layout::{self, PartKey};
use crate::publish::{DirectoryPublisher, PendingFile, PublishedFile, Publisher};
use crate::rejects::RejectWriter;
use crate::store::{self, FileSink};
use crate::summary::{ImportSummary, TableSummary};

/// Most sorted runs (open files) one partition keeps before finishing the oldest.
const MAX_RUNS_PER_PARTITION: usize = 4;

/// Writes batches into a lake; see the module documentation.
pub struct LakeWriter {
    root: PathBuf,
    cfg: WriterConfig,
    publisher: Box<dyn Publisher>,
    tables: HashMap<TableName, TableState>,
    rejects: RejectWriter,
    summary: ImportSummary,
    unattributed_bytes: u64,
    clock: u64,
    started: Instant,
}

struct TableState {
    name: TableName,
    dir: PathBuf,
    schema: SchemaRef,
    partitioning: Partitioning,
    time_col: Option<String>,
    sort_keys: Vec<String>,
    converter: Option<RowConverter>,
    partitions: HashMap<PartKey, Partition>,
    first_seen: Instant,
}

#[derive(Default)]
struct Partition {
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    pending_bytes: usize,
    /// Open sorted runs, by last written key descending.
    runs: Vec<Run>,
    last_used: u64,
}

struct Run {
    file: PendingFile,
    sink: Box<dyn FileSink>,
    rows: u64,
    last_key: OwnedRow,
}

impl LakeWriter {
    /// A writer into the lake at `root` (created if missing).
    pub fn new(root: impl AsRef<Path>, cfg: WriterConfig) -> anyhow::Result<Self> {
        cfg.validate().map_err(anyhow::Error::msg)?;
        let root = root.as_ref().to_path_buf();
        std::fs::create_dir_all(&root)
            .with_context(|| format!("cannot create lake directory {}", root.display()))?;
        Ok(Self {
            rejects: RejectWriter::new(&root),
            root,
            cfg,
            publisher: Box::new(DirectoryPublisher),
            tables: HashMap::new(),
            summary: ImportSummary::default(),
            unattributed_bytes: 0,
            clock: 0,
            started: Instant::now(),
        })
    }

    /// Replaces how finished files are made visible (e.g. a transaction log).
    pub fn with_publisher(mut self, p: Box<dyn Publisher>) -> Self {
        self.publisher = p;
        self
    }

    /// The lake directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Counts so far (files published so far; buffered rows are not yet in `bytes_out`).
    pub fn summary(&self) -> &ImportSummary {
        &self.summary
    }

    /// Writes everything buffered, publishes every open file and the rejects file, and returns
    /// the import summary.
    pub fn finish(mut self) -> anyhow::Result<ImportSummary> {
        let names: Vec<TableName> = self.tables.keys().cloned().collect();
        for name in names {
            self.finish_table(&name)?;
            let t = &self.tables[&name];
            self.summary.table(&name).seconds = t.first_seen.elapsed().as_secs_f64();
        }
        if self.unattributed_bytes > 0 {
            self.summary.unattributed_bytes_in += self.unattributed_bytes;
        }
        self.summary.rejects_file = self.rejects.finish()?;
        self.summary.seconds = self.started.elapsed().as_secs_f64();
        Ok(self.summary)
    }

    fn table_state(
        &mut self,
        name: &TableName,
        batch_schema: &SchemaRef,
    ) -> anyhow::Result<&mut TableState> {
        if !self.tables.contains_key(name) {
            let dir = self.root.join(name.to_string());
            let partitioning = match layout::existing_partitioning(&dir) {
                Some(p) if p != self.cfg.partition => anyhow::bail!(
                    "table {name} in {} is partitioned by {p:?}, not {:?}: import with --partition {} or into another lake",
                    self.root.display(),
                    self.cfg.partition,
                    format!("{p:?}").to_lowercase()
                ),
                _ => self.cfg.partition,
            };
            let time_col = meta::time_column(batch_schema)
                .filter(|c| batch_schema.field_with_name(c).is_ok())
                .map(str::to_string);
            let sort_keys = if self.cfg.sort.is_empty() {
                time_col.iter().cloned().collect()
            } else {
                self.cfg.sort.clone()
            };
            let mut schema = batch_schema.as_ref().clone();
            schema.metadata.insert(meta::TABLE.into(), name.to_string());
            self.tables.insert(
                name.clone(),
                TableState {
                    name: name.clone(),
                    dir,
                    schema: Arc::new(schema),
                    partitioning,
                    time_col,
                    sort_keys,
                    converter: None,
                    partitions: HashMap::new(),
                    first_seen: Instant::now(),
                },
            );
        }
        Ok(self.tables.get_mut(name).expect("inserted"))
    }

    fn handle_batch(&mut self, name: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch_schema = batch.schema();
        self.table_state(name, &batch_schema)?;
        // Schema evolution: finish open files, conform buffered rows.
        let needs_change = {
            let t = &self.tables[name];
            t.schema.fields() != batch_schema.fields() && {
                let unified = schema::unify_schemas(&t.schema, &batch_schema);
                unified.fields() != t.schema.fields()
            }
        };
        if needs_change {
            self.close_runs(name)?;
            let t = self.tables.get_mut(name).expect("table");
            let mut unified = schema::unify_schemas(&t.schema, &batch_schema);
            unified.metadata = t.schema.metadata().clone();
            let unified = Arc::new(unified);
            for p in t.partitions.values_mut() {
                for b in p.pending.iter_mut() {
                    *b = schema::conform(b, &unified)?;
                }
            }
            t.schema = unified;
            t.converter = None;
        }
        let t = self.tables.get_mut(name).expect("table");
        let batch = schema::conform(&batch, &t.schema)?;
        validate_sort_keys(t, &batch)?;

        self.clock += 1;
        let clock = self.clock;
        let parts = split_by_partition(&batch, t.time_col.as_deref(), t.partitioning)?;
        let mut full = Vec::new();
        for (key, b) in parts {
            let p = t.partitions.entry(key).or_default();
            p.last_used = clock;
            p.pending_rows += b.num_rows();
            p.pending_bytes += b.get_array_memory_size();
            p.pending.push(b);
            if p.pending_bytes >= self.cfg.sort_buffer_bytes {
                full.push(key);
            }
        }
        for key in full {
            self.spill(name, key, false)?;
        }
        self.enforce_bounds()?;
        Ok(())
    }

    /// Sorts a partition's buffer and writes its lower half (or all of it when `all`).
    fn spill(&mut self, name: &TableName, key: PartKey, all: bool) -> anyhow::Result<()> {
        let cfg = &self.cfg;
        let t = self.tables.get_mut(name).expect("table");
        let p = t.partitions.get_mut(&key).expect("partition");
        if p.pending_rows == 0 {
            return Ok(());
        }
        let schema = t.schema.clone();
        let buffered = std::mem::take(&mut p.pending);
        let total_bytes = p.pending_bytes;
        p.pending_rows = 0;
        p.pending_bytes = 0;
        let batch = concat_batches(&schema, &buffered)?;
        drop(buffered);
        let sort_cols = sort_columns(&batch, &t.sort_keys)?;
        let sorted = if sort_cols.is_empty() {
            batch
        } else {
            let idx = lexsort_to_indices(&sort_cols, None)?;
            take_record_batch(&batch, &idx)?
        };
        let n = sorted.num_rows();
        let emit = if all { n } else { n / 2 };
        let keep = n - emit;
        if keep > 0 {
            let rest = sorted.slice(emit, keep);
            p.pending_rows = keep;
            p.pending_bytes = total_bytes * keep / n.max(1);
            p.pending.push(rest);
        }
        if emit == 0 {
            return Ok(());
        }
        let chunk = sorted.slice(0, emit);
        let keys = sort_columns(&chunk, &t.sort_keys)?;
        let fields: Vec<SortField> = keys
            .iter()
            .map(|c| SortField::new(c.values.data_type().clone()))
            .collect();
        if t.converter.is_none() {
            t.converter = Some(RowConverter::new(fields)?);
        }
        let conv = t.converter.as_ref().expect("converter");
        let rows = if keys.is_empty() {
            // No sort keys: every row compares equal, one run.
            conv.convert_columns(&[])?
        } else {
            conv.convert_columns(&keys.iter().map(|c| c.values.clone()).collect::<Vec<_>>())?
        };
        let dir = t.dir.join(key.relative_dir(t.partitioning));
        route_to_runs(
            cfg,
            &mut *self.publisher,
            &mut self.summary,
            &t.name,
            &dir,
            &schema,
            &t.sort_keys,
            p,
            &chunk,
            &rows,
        )
    }

    /// Writes everything of a table and publishes its files.
    fn finish_table(&mut self, name: &TableName) -> anyhow::Result<()> {
        let keys: Vec<PartKey> = self.tables[name].partitions.keys().copied().collect();
        for k in keys {
            self.finish_partition(name, k)?;
        }
        Ok(())
    }

    fn finish_partition(&mut self, name: &TableName, key: PartKey) -> anyhow::Result<()> {
        self.spill(name, key, true)?;
        let t = self.tables.get_mut(name).expect("table");
        if let Some(mut p) = t.partitions.remove(&key) {
            for run in p.runs.drain(..) {
                publish_run(&mut *self.publisher, &mut self.summary, run)?;
            }
        }
        Ok(())
    }

    /// Finishes open files of a table (before a schema change), keeping buffered rows.
    fn close_runs(&mut self, name: &TableName) -> anyhow::Result<()> {
        let keys: Vec<PartKey> = self.tables[name].partitions.keys().copied().collect();
        for k in keys {
            // Buffered rows have the old schema: write them into the old files first.
            self.spill(name, k, true)?;
            let t = self.tables.get_mut(name).expect("table");
            let p = t.partitions.get_mut(&k).expect("partition");
            for run in p.runs.drain(..) {
                publish_run(&mut *self.publisher, &mut self.summary, run)?;
            }
        }
        Ok(())
    }

    /// Keeps memory and open files within the configured bounds.
    fn enforce_bounds(&mut self) -> anyhow::Result<()> {
        loop {
            let mut open = 0usize;
            let mut mem = 0usize;
            let mut largest: Option<(usize, TableName, PartKey)> = None;
            let mut oldest: Option<(u64, TableName, PartKey)> = None;
            for (tn, t) in &self.tables {
                for (k, p) in &t.partitions {
                    let sink_mem: usize = p.runs.iter().map(|r| r.sink.memory_size()).sum();
                    let m = p.pending_bytes + sink_mem;
                    mem += m;
                    open += p.runs.len();
                    if largest.as_ref().is_none_or(|(lm, _, _)| m > *lm) {
                        largest = Some((m, tn.clone(), *k));
                    }
                    if !p.runs.is_empty()
                        && oldest.as_ref().is_none_or(|(c, _, _)| p.last_used < *c)
                    {
                        oldest = Some((p.last_used, tn.clone(), *k));
                    }
                }
            }
            if open > self.cfg.max_open_partitions {
                let (_, tn, k) = oldest.expect("open files exist");
                self.finish_partition(&tn, k)?;
                continue;
            }
            if mem > self.cfg.memory_bytes {
                let (_, tn, k) = largest.expect("partitions exist");
                let p = &self.tables[&tn].partitions[&k];
                if p.pending_rows > 0 {
                    self.spill(&tn, k, true)?;
                }
                // Still over: finish that partition's files (publishing frees their row groups).
                let (m2, _) = self.partition_memory(&tn, k);
                if m2 > 0 {
                    self.finish_partition(&tn, k)?;
                }
                continue;
            }
            return Ok(());
        }
    }

    fn partition_memory(&self, tn: &TableName, k: PartKey) -> (usize, usize) {
        self.tables[tn]
            .partitions
            .get(&k)
            .map(|p| {
                (
                    p.pending_bytes + p.runs.iter().map(|r| r.sink.memory_size()).sum::<usize>(),
                    p.runs.len(),
                )
            })
            .unwrap_or((0, 0))
    }
}

#[allow(clippy::too_many_arguments)]
fn route_to_runs(
    cfg: &WriterConfig,
    publisher: &mut dyn Publisher,
    summary: &mut ImportSummary,
    table: &TableName,
    dir: &Path,
    schema: &SchemaRef,
    sort_keys: &[String],
    p: &mut Partition,
    chunk: &RecordBatch,
    rows: &Rows,
) -> anyhow::Result<()> {
    let mut end = chunk.num_rows();
    let mut i = 0;
    while end > 0 && i < p.runs.len() {
        let w = p.runs[i].last_key.row();
        // First row (in [0, end)) whose key is >= the run's last key: rows from there on extend it.
        let start = partition_point(0, end, |j| rows.row(j) < w);
        if start < end {
            let run = &mut p.runs[i];
            run.sink.write(&chunk.slice(start, end - start))?;
            run.rows += (end - start) as u64;
            run.last_key = rows.row(end - 1).owned();
            end = start;
        }
        i += 1;
    }
    if end > 0 {
        if p.runs.len() >= MAX_RUNS_PER_PARTITION {
            let run = p.runs.pop().expect("runs");
            publish_run(publisher, summary, run)?;
        }
        let final_path = dir.join(layout::unique_file_name(cfg.store.extension()));
        let (file, out) = PendingFile::create(table.clone(), final_path)?;
        let mut sink = store::open(cfg, schema, sort_keys, end.max(chunk.num_rows()) * 2, out)?;
        sink.write(&chunk.slice(0, end))?;
        p.runs.push(Run {
            file,
            sink,
            rows: end as u64,
            last_key: rows.row(end - 1).owned(),
        });
    }
    Ok(())
}

fn partition_point(lo: usize, hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (lo, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

fn publish_run(
    publisher: &mut dyn Publisher,
    summary: &mut ImportSummary,
    run: Run,
) -> anyhow::Result<()> {
    let out = run.sink.finish()?;
    let published: PublishedFile = publisher.publish(run.file, out, run.rows)?;
    let s: &mut TableSummary = summary.table(&published.table);
    s.files += 1;
    s.bytes_out += published.bytes;
    s.rows_written += published.rows;
    summary.files.push(published);
    Ok(())
}

/// Resolves a dotted column path (`id.orig_h`) to an array of the batch.
pub fn column_by_path(batch: &RecordBatch, path: &str) -> Option<ArrayRef> {
    let mut parts = path.split('.');
    let mut arr = batch.column_by_name(parts.next()?)?.clone();
    for p in parts {
        let s = arr.as_any().downcast_ref::<StructArray>()?;
        arr = s.column_by_name(p)?.clone();
    }
    Some(arr)
}

fn sort_columns(batch: &RecordBatch, keys: &[String]) -> anyhow::Result<Vec<SortColumn>> {
    keys.iter()
        .map(|k| {
            let values = column_by_path(batch, k)
                .with_context(|| format!("sort key {k:?} is not a column"))?;
            Ok(SortColumn {
                values,
                options: Some(SortOptions {
                    descending: false,
                    nulls_first: true,
                }),
            })
        })
        .collect()
}

fn validate_sort_keys(t: &TableState, batch: &RecordBatch) -> anyhow::Result<()> {
    for k in &t.sort_keys {
        let c = column_by_path(batch, k).with_context(|| {
            format!(
                "--sort {k}: table {} has no column {k} (columns: {})",
                t.name,
                top_level_names(&t.schema)
            )
        })?;
        anyhow::ensure!(
            !c.data_type().is_nested(),
            "--sort {k}: column {k} of {} is {} and cannot be sorted",
            t.name,
            c.data_type()
        );
    }
    Ok(())
}

fn top_level_names(s: &SchemaRef) -> String {
    s.fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Splits a batch by the partition of each row's event time.
fn split_by_partition(
    batch: &RecordBatch,
    time_col: Option<&str>,
    partitioning: Partitioning,
) -> anyhow::Result<Vec<(PartKey, RecordBatch)>> {
    let Some(col) = time_col.and_then(|c| batch.column_by_name(c)) else {
        let key = PartKey::of(
            None,
            if partitioning == Partitioning::None {
                Partitioning::None
            } else {
                partitioning
            },
        );
        return Ok(vec![(key, batch.clone())]);
    };
    let ts: TimestampMicrosecondArray = match col.data_type() {
        DataType::Timestamp(TimeUnit::Microsecond, _) => col
            .as_any()
            .downcast_ref::<TimestampMicrosecondArray>()
            .expect("timestamp")
            .clone(),
        _ => {
            let c = arrow::compute::cast(col, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
            c.as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .expect("cast")
                .clone()
        }
    };
    let key_of = |i: usize| PartKey::of(ts.is_valid(i).then(|| ts.value(i)), partitioning);
    let first = key_of(0);
    if (1..ts.len()).all(|i| key_of(i) == first) {
        return Ok(vec![(first, batch.clone())]);
    }
    let mut groups: HashMap<PartKey, Vec<u32>> = HashMap::new();
    for i in 0..ts.len() {
        groups.entry(key_of(i)).or_default().push(i as u32);
    }
    let mut out: Vec<(PartKey, RecordBatch)> = groups
        .into_iter()
        .map(|(k, idx)| Ok((k, take_record_batch(batch, &UInt32Array::from(idx))?)))
        .collect::<anyhow::Result<_>>()?;
    out.sort_by_key(|(k, _)| *k);
    Ok(out)
}

impl Emit for LakeWriter {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        let rows = batch.num_rows() as u64;
        let bytes = std::mem::take(&mut self.unattributed_bytes);
        let s = self.summary.table(table);
        s.events += rows;
        s.bytes_in += bytes;
        self.handle_batch(table, batch)
            .with_context(|| format!("writing table {table} into {}", self.root.display()))
    }

    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.summary.record_reject(&reject);
        self.rejects.write(&reject)
    }

    fn progress(&mut self, bytes: u64) {
        self.unattributed_bytes += bytes;
        self.summary.bytes_in += bytes;
    }
}
