//! [`LakeWriter`]: the [`Emit`] that turns a reader's batches into lake files.
//!
//! For every table it keeps the unified schema of what it has seen, splits each batch by event
//! time into partitions, and for every partition:
//! 1. buffers rows (unsorted) up to `sort_buffer_bytes`;
//! 2. then sorts the buffer by the sort keys and writes its lower half, keeping the upper half
//!    (replacement-selection style: input that is out of order by less than the buffer still
//!    comes out as one sorted run);
//! 3. appends the sorted chunk to the partition's open file (its *run*); rows older than what that
//!    file already holds (a connection logged many minutes after it started) cannot go there
//!    without breaking its order, so they go to a second *tier*: a buffer of late rows that is
//!    sorted and written as a file of its own when it fills or at the end. Every file is sorted
//!    and its Parquet `sorting_columns` metadata is true, and typical logs make one large file
//!    per partition plus one small file of late rows.
//!
//! Memory is bounded by configuration: sort buffers (`sort_buffer_bytes` per partition, and
//! `memory_bytes` overall, beyond which the largest buffers are written early), in-progress row
//! groups (flushed at `row_group_bytes`), and at most `max_open_partitions` open files (the least
//! recently used is finished first); beyond that many partitions, those no recent batch touched
//! are finished too, however few rows they buffer. Input size does not matter, nor the number of
//! partitions an input touches.
//!
//! A schema change for a table (a new field, a widened type) finishes that table's open files and
//! continues with the unified schema; rows already buffered are conformed to it.
//!
//! Files appear when buffers fill, at [`LakeWriter::finish`], and whenever the caller asks with
//! [`LakeWriter::commit`]: a long-running ingest (`silt serve`) commits on a clock so that what
//! it received is published (and its rejects file rotated) within a bounded time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use anyhow::Context;
use arrow::array::{Array, ArrayRef, StructArray, TimestampMicrosecondArray, UInt32Array};
use arrow::compute::{
    concat, concat_batches, lexsort_to_indices, take_record_batch, SortColumn, SortOptions,
};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;
use arrow_row::{OwnedRow, RowConverter, SortField};
use silt_core::{meta, schema, Emit, Reject, TableName};

use crate::config::{PartitionChoice, Partitioning, WriterConfig};
use crate::granularity::{self, TableRecord};
use crate::layout::{self, PartKey};
use crate::publish::{DirectoryPublisher, PendingFile, PublishedFile, Publisher};
use crate::rejects::RejectWriter;
use crate::store::{self, FileSink};
use crate::summary::{human_bytes, ImportSummary, TableSummary};

/// What a [`LakeWriter::commit`] published.
#[derive(Debug, Clone)]
pub struct Commit {
    pub at: SystemTime,
    /// Data files published since the previous commit (by this one or because buffers filled).
    pub files: Vec<PublishedFile>,
    /// The rejects file this commit published, if there were rejects since the previous one.
    pub rejects_file: Option<PathBuf>,
}

/// Writes batches into a lake; see the module documentation.
pub struct LakeWriter {
    root: PathBuf,
    cfg: WriterConfig,
    publisher: Box<dyn Publisher>,
    tables: HashMap<TableName, TableState>,
    rejects: RejectWriter,
    summary: ImportSummary,
    clock: u64,
    started: Instant,
    /// `summary.files` up to here were reported by an earlier commit.
    committed_files: usize,
    /// Whether each table seen has (or gets) a Delta log, whose files hold no `Null` columns.
    delta: HashMap<TableName, bool>,
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
    /// A new table with `--partition auto`: its first rows, held until there are enough to choose
    /// the partitioning from ([`crate::granularity`]); `None` once chosen.
    probe: Option<Probe>,
    /// The most codec state one of its open files has held, once that passed half of
    /// `--memory` (0 until then): the summary's note.
    codec_peak: usize,
}

#[derive(Default)]
struct Probe {
    batches: Vec<RecordBatch>,
    rows: usize,
    bytes: usize,
}

/// Tiers per partition. The last tier takes every row that is late for the tier before it and
/// has no open file: when its buffer fills (or at the end) it is sorted and written as one
/// complete file. With two tiers, a partition gets one large sorted file plus, when the input
/// has late rows, one file of them per `sort_buffer_bytes` of late rows.
const MAX_TIERS: usize = 2;

/// A partition not touched by any of the last this many batches is finished when there are more
/// than `max_open_partitions` partitions, or more memory held than `--memory`
/// ([`LakeWriter::enforce_bounds`]).
const STALE_BATCHES: u64 = 4;

#[derive(Default)]
struct Partition {
    /// Tier 0 takes the input; tier i+1 takes the rows too late for tier i's file.
    tiers: Vec<Tier>,
    last_used: u64,
}

#[derive(Default)]
struct Tier {
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    pending_bytes: usize,
    run: Option<Run>,
}

impl Partition {
    fn pending_bytes(&self) -> usize {
        self.tiers.iter().map(|t| t.pending_bytes).sum()
    }

    fn pending_rows(&self) -> usize {
        self.tiers.iter().map(|t| t.pending_rows).sum()
    }

    fn open_files(&self) -> usize {
        self.tiers.iter().filter(|t| t.run.is_some()).count()
    }

    fn memory(&self) -> usize {
        self.pending_bytes()
            + self
                .tiers
                .iter()
                .filter_map(|t| t.run.as_ref())
                .map(|r| r.sink.memory_size())
                .sum::<usize>()
    }

    fn push(&mut self, tier: usize, b: RecordBatch) {
        while self.tiers.len() <= tier {
            self.tiers.push(Tier::default());
        }
        let t = &mut self.tiers[tier];
        t.pending_rows += b.num_rows();
        t.pending_bytes += b.get_array_memory_size();
        t.pending.push(b);
    }
}

struct Run {
    file: PendingFile,
    sink: Box<dyn FileSink>,
    rows: u64,
    /// Sort key of the last row written (`None` when the table has no sort keys).
    last_key: Option<OwnedRow>,
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
            clock: 0,
            started: Instant::now(),
            committed_files: 0,
            delta: HashMap::new(),
        })
    }

    /// Replaces how finished files are made visible (e.g. a transaction log).
    pub fn with_publisher(mut self, p: Box<dyn Publisher>) -> Self {
        self.publisher = p;
        self
    }

    /// Tables known to have a Delta log elsewhere than below [`LakeWriter::root`] (an
    /// object-store lake, whose files are written in a staging directory): their files are
    /// written without `Null` columns, as for a local Delta table.
    pub fn with_delta_tables(mut self, tables: impl IntoIterator<Item = TableName>) -> Self {
        self.delta.extend(tables.into_iter().map(|t| (t, true)));
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
            let seconds = self.tables[&name].first_seen.elapsed().as_secs_f64();
            if let Err(e) = self.finish_table(&name) {
                self.table_failed(&name, e);
            }
            self.summary.table(&name).seconds = seconds;
        }
        if let Some(p) = self.rejects.finish()? {
            self.summary.rejects_files.push(p);
        }
        self.summary.seconds = self.started.elapsed().as_secs_f64();
        Ok(self.summary)
    }

    /// Publishes everything received so far: buffered rows are sorted and written, every open
    /// file is finished and published (same encodings, statistics and atomic publish as at the
    /// end of an import), and the rejects file, if any, is published (the next reject starts a
    /// new one). The writer then goes on taking batches. Returns the files published since the
    /// last commit and the rejects file; `now` is the commit's time, kept in the report.
    ///
    /// Each commit ends the open files of every partition, so committing often makes small
    /// files: a caller chooses the interval (size and age) and leaves merging to compaction.
    pub fn commit(&mut self, now: SystemTime) -> anyhow::Result<Commit> {
        let names: Vec<TableName> = self.tables.keys().cloned().collect();
        for name in &names {
            if let Err(e) = self.finish_table(name) {
                self.table_failed(name, e);
            }
        }
        let rejects_file = self.rejects.finish()?;
        if let Some(p) = &rejects_file {
            self.summary.rejects_files.push(p.clone());
        }
        let files = self.summary.files[self.committed_files..].to_vec();
        self.committed_files = self.summary.files.len();
        Ok(Commit {
            at: now,
            files,
            rejects_file,
        })
    }

    fn table_state(
        &mut self,
        name: &TableName,
        batch_schema: &SchemaRef,
    ) -> anyhow::Result<&mut TableState> {
        if !self.tables.contains_key(name) {
            let dir = self.root.join(name.to_string());
            let existing = granularity::current(&self.root, name)?;
            if let Some(r) = &existing {
                self.check_store(name, &dir, r)?;
            }
            let partitioning = match (self.cfg.partition, existing) {
                (PartitionChoice::Fixed(p), Some(r)) => {
                    let q = r.partitioning()?;
                    anyhow::ensure!(
                        q == p,
                        "table {name} in {} is partitioned by {q}, not {p}: import with --partition {q} (or auto) or into another lake",
                        self.root.display(),
                    );
                    Some(p)
                }
                (PartitionChoice::Auto, Some(r)) => Some(r.partitioning()?),
                (PartitionChoice::Fixed(p), None) => {
                    granularity::write_record(
                        &self.root,
                        &new_record(name, p, "user", None, self.cfg.store),
                    )?;
                    Some(p)
                }
                // Chosen once the first rows are in (see `decide`).
                (PartitionChoice::Auto, None) => None,
            };
            // `--partition-by FIELD` overrides the time column the schema metadata names.
            let time_col = match &self.cfg.time_column {
                Some(f) => Some(partition_field(name, batch_schema, f)?),
                None => meta::time_column(batch_schema)
                    .filter(|c| batch_schema.field_with_name(c).is_ok())
                    .map(str::to_string),
            };
            let sort_keys = if self.cfg.sort.is_empty() {
                time_col.iter().cloned().collect()
            } else {
                self.cfg.sort.clone()
            };
            let mut schema = batch_schema.as_ref().clone();
            schema.metadata.insert(meta::TABLE.into(), name.to_string());
            if let Some(f) = &self.cfg.time_column {
                // The files then say which column they are partitioned and sorted by.
                schema.metadata.insert(meta::TIME_COLUMN.into(), f.clone());
            }
            if self.cfg.store == crate::config::StoreKind::Parquet {
                // Encoding hints that name no column (or a column of the wrong type) fail here,
                // at the table's first batch, before any file is written.
                store::encoding_plan(&self.cfg, &schema)
                    .map_err(|e| anyhow::anyhow!("table {name}: {e}"))?;
            }
            self.tables.insert(
                name.clone(),
                TableState {
                    name: name.clone(),
                    dir,
                    schema: Arc::new(schema),
                    partitioning: partitioning.unwrap_or(Partitioning::None),
                    time_col,
                    sort_keys,
                    converter: None,
                    partitions: HashMap::new(),
                    first_seen: Instant::now(),
                    probe: partitioning.is_none().then(Probe::default),
                    codec_peak: 0,
                },
            );
            if let Some(p) = partitioning {
                self.summary.table(name).partitioning = Some(p.name().into());
            }
            let t = self.tables.get_mut(name).expect("inserted");
            if t.probe.is_some() && t.time_col.is_none() {
                // Nothing to partition by: no need to look at rows first.
                self.decide(name)?;
            }
        }
        Ok(self.tables.get_mut(name).expect("inserted"))
    }

    /// Whether `name` is (or becomes) a table with a Delta log ([`crate::delta`]).
    fn is_delta(&mut self, name: &TableName) -> bool {
        if let Some(d) = self.delta.get(name) {
            return *d;
        }
        let d = self.cfg.table_format == crate::config::TableFormat::Delta
            || crate::delta::has_log(&self.root.join(name.to_string()));
        self.delta.insert(name.clone(), d);
        d
    }

    fn handle_batch(&mut self, name: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = override_time_column(batch, &self.cfg)?;
        let batch = if self.is_delta(name) {
            crate::delta::spark_readable(&batch)?
        } else {
            batch
        };
        self.table_state(name, &batch.schema())
            .map_err(UsageError::wrap)?;
        let limit = granularity::probe_bytes(&self.cfg);
        let t = self.tables.get_mut(name).expect("table");
        if let Some(probe) = &mut t.probe {
            probe.rows += batch.num_rows();
            probe.bytes += batch.get_array_memory_size();
            probe.batches.push(batch);
            if probe.rows >= granularity::PROBE_ROWS || probe.bytes >= limit {
                self.decide(name)?;
            }
            return Ok(());
        }
        self.route_batch(name, batch)
    }

    /// Refuses to write `name` (whose record is `r`, its directory `dir`) in another format than
    /// its files have: the recorded one, or, for a record written before silt recorded it, that
    /// of the table's first file (then recorded, so that later imports need not look).
    fn check_store(&self, name: &TableName, dir: &Path, r: &TableRecord) -> anyhow::Result<()> {
        let kept = match r.store_kind()? {
            Some(s) => s,
            None => {
                // In a remote lake's staging directory no files are seen: nothing to check.
                let Some(f) = layout::data_files(dir)?.into_iter().next() else {
                    return Ok(());
                };
                let mut r = r.clone();
                r.store = Some(f.store.extension().into());
                granularity::write_record(&self.root, &r)?;
                f.store
            }
        };
        anyhow::ensure!(
            kept == self.cfg.store,
            "table {name} in {} is stored as {} files, not {}: import with --store {} (or into \
             another lake); a table's files share one format, so that every engine reading it \
             sees all of its rows",
            self.root.display(),
            kept.extension(),
            self.cfg.store.extension(),
            kept.extension(),
        );
        Ok(())
    }

    /// Chooses a new table's partitioning from the rows it holds back (`--partition auto`),
    /// records the choice in the lake, and sends those rows on. Does nothing once chosen.
    fn decide(&mut self, name: &TableName) -> anyhow::Result<()> {
        let t = self.tables.get_mut(name).expect("table");
        let Some(probe) = t.probe.take() else {
            return Ok(());
        };
        let (partitioning, estimate) = if t.time_col.is_none() {
            (Partitioning::None, None)
        } else {
            let e = granularity::estimate(&probe.batches, t.time_col.as_deref(), &self.cfg)?;
            (granularity::choose(&e, self.cfg.row_group_bytes), Some(e))
        };
        t.partitioning = partitioning;
        let record = new_record(name, partitioning, "auto", estimate, self.cfg.store);
        granularity::write_record(&self.root, &record)?;
        let s = self.summary.table(name);
        s.partitioning = Some(partitioning.name().into());
        s.partition_choice = Some(record.describe());
        for b in probe.batches {
            self.route_batch(name, b)?;
        }
        Ok(())
    }

    /// A batch of a table whose partitioning is known: conformed to the table's schema (which
    /// evolves with it), split by partition, buffered.
    fn route_batch(&mut self, name: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        let batch_schema = batch.schema();
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
                for tier in p.tiers.iter_mut() {
                    for b in tier.pending.iter_mut() {
                        *b = schema::conform(b, &unified)?;
                    }
                }
            }
            t.schema = unified;
            t.converter = None;
        }
        let t = self.tables.get_mut(name).expect("table");
        let batch = schema::conform(&batch, &t.schema)?;
        validate_sort_keys(t, &batch).map_err(UsageError::wrap)?;

        self.clock += 1;
        let clock = self.clock;
        let parts = split_by_partition(&batch, t.time_col.as_deref(), t.partitioning)?;
        let mut full = Vec::new();
        for (key, b) in parts {
            let p = t.partitions.entry(key).or_default();
            p.last_used = clock;
            p.push(0, b);
            if p.tiers[0].pending_bytes >= self.cfg.sort_buffer_bytes {
                full.push(key);
            }
        }
        for key in full {
            self.spill(name, key, 0, false, false)?;
        }
        self.enforce_bounds()?;
        Ok(())
    }

    /// Sorts a tier's buffer and writes its lower half (or all of it when `all`) to the tier's
    /// file; rows older than that file's last row move on to the next tier. `closing`: the
    /// partition is being finished, so a file this opens gets nothing more.
    fn spill(
        &mut self,
        name: &TableName,
        key: PartKey,
        tier: usize,
        all: bool,
        closing: bool,
    ) -> anyhow::Result<()> {
        let cfg = &self.cfg;
        let t = self.tables.get_mut(name).expect("table");
        let p = t.partitions.get_mut(&key).expect("partition");
        let Some(tr) = p.tiers.get_mut(tier) else {
            return Ok(());
        };
        if tr.pending_rows == 0 {
            return Ok(());
        }
        let catch_all = tier + 1 == MAX_TIERS;
        let all = all || catch_all;
        // A file opened now holds exactly this chunk (the catch-all tier's files are published
        // right away; a closing partition's files are published next).
        let whole = catch_all || closing;
        let schema = t.schema.clone();
        let buffered = std::mem::take(&mut tr.pending);
        let total_bytes = tr.pending_bytes;
        tr.pending_rows = 0;
        tr.pending_bytes = 0;
        let sorted = sorted_batches(&schema, &buffered, &t.sort_keys)?;
        drop(buffered);
        let n: usize = sorted.iter().map(|b| b.num_rows()).sum();
        let emit = if all { n } else { n / 2 };
        let keep = n - emit;
        if keep > 0 {
            tr.pending_rows = keep;
            tr.pending_bytes = total_bytes * keep / n.max(1);
            tr.pending.extend(slice_rows(&sorted, emit, keep));
        }
        if emit == 0 {
            return Ok(());
        }
        let chunk = slice_rows(&sorted, 0, emit);
        drop(sorted);
        let keys = key_columns(&chunk, &t.sort_keys)?;
        let rows = if keys.is_empty() {
            // No time column and no --sort: one unsorted file per partition.
            None
        } else {
            if t.converter.is_none() {
                let fields = keys
                    .iter()
                    .map(|c| SortField::new(c.values.data_type().clone()))
                    .collect();
                t.converter = Some(RowConverter::new(fields)?);
            }
            let conv = t.converter.as_ref().expect("converter");
            Some(conv.convert_columns(&keys.iter().map(|c| c.values.clone()).collect::<Vec<_>>())?)
        };
        // Rows [start, emit) extend this tier's file; rows [0, start) are older than its last row.
        let start = match (&rows, tr.run.as_ref().and_then(|r| r.last_key.as_ref())) {
            (Some(rows), Some(w)) => partition_point(0, emit, |j| rows.row(j) < w.row()),
            _ => 0,
        };
        // Late rows are copied out of the chunk, so that they hold none of its buffers.
        let late = if start > 0 {
            Some(copy_rows(&schema, &slice_rows(&chunk, 0, start))?)
        } else {
            None
        };
        debug_assert!(
            !(catch_all && late.is_some()),
            "the catch-all tier has no open file"
        );
        if start < emit {
            let part = slice_rows(&chunk, start, emit - start);
            let part_rows = emit - start;
            let last_key = rows.as_ref().map(|r| r.row(emit - 1).owned());
            match tr.run.as_mut() {
                Some(run) => {
                    for b in &part {
                        run.sink.write(b)?;
                    }
                    run.rows += part_rows as u64;
                    run.last_key = last_key;
                }
                None => {
                    let dir = t.dir.join(key.relative_dir(t.partitioning));
                    // The name carries the schema's tag (`crate::schema_tag`).
                    let name = layout::data_file_name(
                        cfg.store.extension(),
                        crate::schema_tag::tag(&schema, cfg.store),
                    );
                    let final_path = dir.join(name);
                    let (file, out) = PendingFile::create(t.name.clone(), final_path)?;
                    // The file's encodings are chosen on its first rows (`store::CARDINALITY_SAMPLE`
                    // of them), copied together when they span several batches.
                    let first = concat_batches(
                        &schema,
                        &slice_rows(&part, 0, part_rows.min(store::CARDINALITY_SAMPLE)),
                    )?;
                    let mut sink = if whole {
                        store::open_whole(cfg, &schema, &t.sort_keys, &first, part_rows, out)?
                    } else {
                        store::open(cfg, &schema, &t.sort_keys, n * 2, &first, out)?
                    };
                    for b in &part {
                        sink.write(b)?;
                    }
                    tr.run = Some(Run {
                        file,
                        sink,
                        rows: part_rows as u64,
                        last_key,
                    });
                }
            }
        }
        if let Some(run) = &tr.run {
            let codecs = run.sink.codec_memory();
            if codecs > cfg.memory_bytes / 2 && codecs > t.codec_peak {
                t.codec_peak = codecs;
                let level = cfg.level.map(|l| format!(" level {l}")).unwrap_or_default();
                self.summary.table(&t.name).memory_note = Some(format!(
                    "{}{level} can hold up to {} of compression state per open file (zstd's \
                     estimate for its columns' pages), more than half of --memory ({}), so its \
                     files are finished early to stay within it; a lower --level or a larger \
                     --memory keeps them whole",
                    format!("{:?}", cfg.codec).to_lowercase(),
                    human_bytes(codecs as u64),
                    human_bytes(cfg.memory_bytes as u64),
                ));
            }
        }
        if catch_all {
            // The catch-all tier writes whole files: publish it now.
            if let Some(run) = tr.run.take() {
                publish_run(&mut *self.publisher, &mut self.summary, run)?;
            }
            return Ok(());
        }
        let Some(late) = late else {
            return Ok(());
        };
        p.push(tier + 1, late);
        if p.tiers[tier + 1].pending_bytes >= cfg.sort_buffer_bytes {
            self.spill(name, key, tier + 1, false, false)?;
        }
        Ok(())
    }

    /// Writes everything of a table and publishes its files.
    fn finish_table(&mut self, name: &TableName) -> anyhow::Result<()> {
        self.decide(name)?;
        let keys: Vec<PartKey> = self.tables[name].partitions.keys().copied().collect();
        for k in keys {
            self.finish_partition(name, k)?;
        }
        Ok(())
    }

    /// Writes a partition's buffers (tier by tier, each possibly passing late rows to the next)
    /// and publishes its files.
    fn flush_partition(&mut self, name: &TableName, key: PartKey) -> anyhow::Result<()> {
        let mut tier = 0;
        while tier < self.tables[name].partitions[&key].tiers.len() {
            self.spill(name, key, tier, true, true)?;
            tier += 1;
        }
        let t = self.tables.get_mut(name).expect("table");
        let p = t.partitions.get_mut(&key).expect("partition");
        for tr in p.tiers.iter_mut() {
            if let Some(run) = tr.run.take() {
                publish_run(&mut *self.publisher, &mut self.summary, run)?;
            }
        }
        Ok(())
    }

    fn finish_partition(&mut self, name: &TableName, key: PartKey) -> anyhow::Result<()> {
        self.flush_partition(name, key)?;
        self.tables
            .get_mut(name)
            .expect("table")
            .partitions
            .remove(&key);
        Ok(())
    }

    /// Finishes open files of a table before a schema change: buffered rows still have the old
    /// schema, so they are written into the old files first.
    fn close_runs(&mut self, name: &TableName) -> anyhow::Result<()> {
        let keys: Vec<PartKey> = self.tables[name].partitions.keys().copied().collect();
        for k in keys {
            self.flush_partition(name, k)?;
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
            let mut parts = 0usize;
            let mut stalest: Option<(u64, TableName, PartKey)> = None;
            let mut largest_probe: Option<(usize, TableName)> = None;
            for (tn, t) in &self.tables {
                if let Some(p) = &t.probe {
                    mem += p.bytes;
                    if largest_probe.as_ref().is_none_or(|(lm, _)| p.bytes > *lm) {
                        largest_probe = Some((p.bytes, tn.clone()));
                    }
                }
                for (k, p) in &t.partitions {
                    let m = p.memory();
                    mem += m;
                    open += p.open_files();
                    parts += 1;
                    if stalest.as_ref().is_none_or(|(c, _, _)| p.last_used < *c) {
                        stalest = Some((p.last_used, tn.clone(), *k));
                    }
                    if largest.as_ref().is_none_or(|(lm, _, _)| m > *lm) {
                        largest = Some((m, tn.clone(), *k));
                    }
                    if p.open_files() > 0
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
            // Partitions the input has left behind (sparse data in time order: every batch
            // touches new hours, never the old ones again) are finished too, not only those
            // with a file open: otherwise each keeps its few buffered rows until the end, and
            // thousands of them hold far more memory than their rows count for (an import of
            // a sparse 200 MB trace into hour partitions peaked at 273 MiB, growing with the
            // input). Partitions touched by one of the last batches stay, so input in no
            // time order keeps its partitions together and only the memory bound applies.
            // Beyond the memory bound, too, left-behind partitions go first: finishing one
            // frees its buffers and its open file (every column's codec state with it) without
            // cutting short the files the input is still writing (an import of 2M real-derived
            // conn records in time order into month partitions kept all nine months open).
            if parts > self.cfg.max_open_partitions || mem > self.cfg.memory_bytes {
                if let Some((used, tn, k)) = stalest {
                    if used + STALE_BATCHES < self.clock {
                        self.finish_partition(&tn, k)?;
                        continue;
                    }
                }
            }
            if mem > self.cfg.memory_bytes {
                if let Some((pm, tn)) = largest_probe {
                    if largest.as_ref().is_none_or(|(lm, _, _)| pm >= *lm) {
                        // Rows held back to choose a new table's partitioning: choose now.
                        if let Err(e) = self.decide(&tn) {
                            self.table_failed(&tn, e);
                        }
                        continue;
                    }
                }
                let (_, tn, k) = largest.expect("partitions exist");
                if self.tables[&tn].partitions[&k].pending_rows() > 0 {
                    // Write the buffers early (smaller sorted runs, bounded memory).
                    let tiers = self.tables[&tn].partitions[&k].tiers.len();
                    for tier in 0..tiers {
                        self.spill(&tn, k, tier, true, false)?;
                    }
                } else {
                    // Only in-progress row groups are left: finishing the files frees them.
                    self.finish_partition(&tn, k)?;
                }
                continue;
            }
            return Ok(());
        }
    }
}

pub(crate) fn partition_point(lo: usize, hi: usize, pred: impl Fn(usize) -> bool) -> usize {
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

/// The rows of `batches` as one batch sorted by `keys` (concatenated as they are without keys).
pub(crate) fn sort_buffered(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    keys: &[String],
) -> anyhow::Result<RecordBatch> {
    let sorted = sorted_batches(schema, batches, keys)?;
    match <[RecordBatch; 1]>::try_from(sorted) {
        Ok([one]) => Ok(one),
        Err(many) => Ok(concat_batches(schema, &many)?),
    }
}

/// The rows of `batches` sorted by `keys`, as a sequence of batches under `schema`: the buffered
/// batches themselves when their rows already are in order (or there are no keys), else one
/// batch gathered from them.
///
/// In order is the common case (logs and flow exports are written in time order), and copying
/// nothing there matters: concatenating the buffer was 8 % of an enriched sFlow import's CPU in a
/// profile, and the half of it that a spill keeps was copied again by the next one. Only the
/// key columns are concatenated to compute the order.
///
/// Nearly in order is the next most common: a server's buffer holds many senders' batches,
/// each in time order, arriving a little out of step. The sorted order is then long runs of
/// consecutive rows ([`sorted_runs`]), and those runs are handed on as slices of the buffered
/// batches (short ones copied together, [`MIN_SLICE_ROWS`]), copying little or nothing.
/// Gathering every row one by one (`interleave`) was half of `silt serve`'s flush thread in a
/// profile. Truly shuffled rows (runs shorter than [`MIN_MEAN_RUN`] on average) are still
/// moved in one pass, so every value is copied once, not twice as with concatenating
/// everything and then `take`: each column read in order and each value written to its sorted
/// place ([`crate::permute`]), which waits on the cache less than gathering does.
pub(crate) fn sorted_batches(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    keys: &[String],
) -> anyhow::Result<Vec<RecordBatch>> {
    // Under the table's schema (with its metadata), as `concat_batches(schema, ..)` gives.
    let as_is = || -> anyhow::Result<Vec<RecordBatch>> {
        batches
            .iter()
            .filter(|b| b.num_rows() > 0)
            .map(|b| Ok(RecordBatch::try_new(schema.clone(), b.columns().to_vec())?))
            .collect()
    };
    if keys.is_empty() || batches.is_empty() {
        return as_is();
    }
    let key_cols = key_columns(batches, keys)?;
    let order = sort_order(&key_cols)?;
    if order.iter().enumerate().all(|(i, &j)| j as usize == i) {
        return as_is();
    }
    let starts: Vec<usize> = batches
        .iter()
        .scan(0, |at, b| {
            let s = *at;
            *at += b.num_rows();
            Some(s)
        })
        .collect();
    if let Some(runs) = sorted_runs(&order, &starts) {
        return runs_to_batches(schema, batches, &starts, &runs);
    }
    Ok(vec![crate::permute::permute_batch(
        schema, batches, &order,
    )?])
}

/// The rows' order sorted by `key_cols` (ascending, nulls first).
///
/// One 64-bit integer key (the time column, nearly always) is sorted here, stably: a merge sort
/// of row numbers finds the runs of input already in order, and a Zeek log is out of order only locally (a
/// connection is written when it ends), where arrow's unstable sort was ~2 % of a generated
/// conn import's CPU. Rows with equal keys keep their arrival order. Other keys go to arrow's
/// `lexsort_to_indices`.
fn sort_order(key_cols: &[SortColumn]) -> anyhow::Result<Vec<u32>> {
    let single_i64 = match key_cols {
        [k] => matches!(
            k.values.data_type(),
            DataType::Int64
                | DataType::Timestamp(_, _)
                | DataType::Date64
                | DataType::Duration(_)
                | DataType::Time64(_)
        ),
        _ => false,
    };
    if !single_i64 || key_cols[0].values.len() > u32::MAX as usize {
        return Ok(lexsort_to_indices(key_cols, None)?.values().to_vec());
    }
    let data = key_cols[0].values.to_data();
    let values = &data.buffer::<i64>(0)[..data.len()];
    // Nulls first, in arrival order; then the valid rows by value. Row numbers are sorted, not
    // (value, row) pairs: 4 bytes a row instead of 16, and the merge sort's buffer with them.
    let mut order: Vec<u32> = Vec::with_capacity(values.len());
    let first_valid = match data.nulls().filter(|n| n.null_count() > 0) {
        None => {
            order.extend(0..values.len() as u32);
            0
        }
        Some(nulls) => {
            order.extend((0..values.len() as u32).filter(|&i| nulls.is_null(i as usize)));
            let k = order.len();
            order.extend(nulls.valid_indices().map(|i| i as u32));
            k
        }
    };
    order[first_valid..].sort_by_key(|&i| values[i as usize]);
    Ok(order)
}

/// Below this many rows per run on average, sorted rows are moved one by one ([`crate::permute`]).
const MIN_MEAN_RUN: usize = 16;

/// Runs shorter than this are copied together with their neighbours into one batch rather than
/// handed on as slices: each batch costs the Parquet sink a round of its encoding threads, which
/// a few hundred rows amortise.
const MIN_SLICE_ROWS: usize = 512;

/// `order` (the sorted order of the rows of batches starting at global rows `starts`) as runs
/// of consecutive rows within one batch: `(first global row, rows)` each, in output order.
/// `None` when the runs are too short on average ([`MIN_MEAN_RUN`]) to be worth slicing.
fn sorted_runs(order: &[u32], starts: &[usize]) -> Option<Vec<(usize, usize)>> {
    let max_runs = order.len() / MIN_MEAN_RUN;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        if runs.len() >= max_runs {
            return None;
        }
        let first = order[i] as usize;
        // The end of the batch `first` is in: a run does not cross it.
        let b = starts.partition_point(|&s| s <= first);
        let end = starts.get(b).copied().unwrap_or(usize::MAX);
        let mut len = 1;
        while i + len < order.len() && order[i + len] as usize == first + len && first + len < end {
            len += 1;
        }
        runs.push((first, len));
        i += len;
    }
    Some(runs)
}

/// The rows of `runs` (from [`sorted_runs`]) as batches under `schema`: a run of at least
/// [`MIN_SLICE_ROWS`] as a slice of its batch (nothing copied), shorter neighbours copied into
/// one batch together.
fn runs_to_batches(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    starts: &[usize],
    runs: &[(usize, usize)],
) -> anyhow::Result<Vec<RecordBatch>> {
    let slice = |(first, len): (usize, usize)| {
        let b = starts.partition_point(|&s| s <= first) - 1;
        batches[b].slice(first - starts[b], len)
    };
    let mut out = Vec::new();
    let mut small: Vec<RecordBatch> = Vec::new();
    let mut small_rows = 0;
    let copy_small = |small: &mut Vec<RecordBatch>, out: &mut Vec<RecordBatch>| {
        if !small.is_empty() {
            out.push(concat_batches(schema, small.iter())?);
            small.clear();
        }
        anyhow::Ok(())
    };
    for &(first, len) in runs {
        if len >= MIN_SLICE_ROWS {
            copy_small(&mut small, &mut out)?;
            small_rows = 0;
            let s = slice((first, len));
            out.push(RecordBatch::try_new(schema.clone(), s.columns().to_vec())?);
        } else {
            small.push(slice((first, len)));
            small_rows += len;
            if small_rows >= MIN_SLICE_ROWS {
                copy_small(&mut small, &mut out)?;
                small_rows = 0;
            }
        }
    }
    copy_small(&mut small, &mut out)?;
    Ok(out)
}

/// The sort-key columns of `batches`, each concatenated over them.
fn key_columns(batches: &[RecordBatch], keys: &[String]) -> anyhow::Result<Vec<SortColumn>> {
    let per_batch = batches
        .iter()
        .map(|b| sort_columns(b, keys))
        .collect::<anyhow::Result<Vec<_>>>()?;
    (0..keys.len())
        .map(|k| {
            let parts: Vec<&dyn Array> = per_batch.iter().map(|c| c[k].values.as_ref()).collect();
            Ok(SortColumn {
                values: concat(&parts)?,
                options: per_batch[0][k].options,
            })
        })
        .collect()
}

/// Rows `[off, off + len)` of `batches` read as one sequence, as slices of them (nothing copied).
fn slice_rows(batches: &[RecordBatch], mut off: usize, mut len: usize) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    for b in batches {
        if len == 0 {
            break;
        }
        let n = b.num_rows();
        if off >= n {
            off -= n;
            continue;
        }
        let take = (n - off).min(len);
        out.push(b.slice(off, take));
        off = 0;
        len -= take;
    }
    out
}

/// `batches` copied into one batch of their own, so that it holds none of their buffers (a slice
/// would keep a whole batch alive and count as its full size against a buffer's budget).
fn copy_rows(schema: &SchemaRef, batches: &[RecordBatch]) -> anyhow::Result<RecordBatch> {
    match batches {
        // `concat_batches` of one batch would return it as it is; `take` copies.
        [one] => Ok(take_record_batch(
            one,
            &UInt32Array::from_iter_values(0..one.num_rows() as u32),
        )?),
        many => Ok(concat_batches(schema, many)?),
    }
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

/// With `--partition-by FIELD`, a batch's metadata names FIELD as its time column, as the table
/// schema does (a batch conforms to the table schema only if their metadata agree).
fn override_time_column(batch: RecordBatch, cfg: &WriterConfig) -> anyhow::Result<RecordBatch> {
    let Some(f) = &cfg.time_column else {
        return Ok(batch);
    };
    if meta::time_column(&batch.schema()) == Some(f.as_str()) {
        return Ok(batch);
    }
    let mut s = batch.schema().as_ref().clone();
    s.metadata.insert(meta::TIME_COLUMN.into(), f.clone());
    let opts =
        arrow::record_batch::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        Arc::new(s),
        batch.columns().to_vec(),
        &opts,
    )?)
}

/// Checks a `--partition-by` field against a table's schema: a top-level timestamp column.
fn partition_field(table: &TableName, s: &SchemaRef, f: &str) -> anyhow::Result<String> {
    let field = s.field_with_name(f).map_err(|_| {
        anyhow::anyhow!(
            "--partition-by {f}: table {table} has no column {f} (columns: {})",
            top_level_names(s)
        )
    })?;
    anyhow::ensure!(
        matches!(field.data_type(), DataType::Timestamp(_, _)),
        "--partition-by {f}: column {f} of {table} is {}, not a timestamp (epoch numbers and text must be parsed into a timestamp by the reader, e.g. with a generic log reader's time options)",
        field.data_type()
    );
    Ok(f.to_string())
}

fn top_level_names(s: &SchemaRef) -> String {
    s.fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A table record made now.
fn new_record(
    name: &TableName,
    p: Partitioning,
    chosen_by: &str,
    estimate: Option<granularity::Estimate>,
    store: crate::config::StoreKind,
) -> TableRecord {
    TableRecord {
        table: name.to_string(),
        partition: p.name().into(),
        chosen_by: chosen_by.into(),
        estimate,
        at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        store: Some(store.extension().into()),
    }
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

impl silt_core::Sink for LakeWriter {
    fn commit(&mut self, now: SystemTime) -> anyhow::Result<silt_core::Committed> {
        LakeWriter::commit(self, now)?;
        Ok(silt_core::Committed::Durable)
    }
}

/// An error in what the user asked for (an option that does not fit a table: an encoding hint
/// or `--sort` key naming no column, `--partition-by` not a timestamp, another partitioning than
/// the table's files have). It stops the import, unlike an error writing one table's data.
#[derive(Debug)]
struct UsageError(String);

impl UsageError {
    fn wrap(e: anyhow::Error) -> anyhow::Error {
        anyhow::Error::new(UsageError(format!("{e:#}")))
    }
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

impl LakeWriter {
    /// After table `name` failed with `err`: publish what of it can still be published, drop
    /// the rest of its state (in-progress files are removed), and keep the error for the
    /// summary. Later batches of the table start afresh; other tables are not touched.
    fn table_failed(&mut self, name: &TableName, err: anyhow::Error) {
        let mut msg = format!("{err:#}");
        if self.tables.contains_key(name) {
            if let Err(e) = self.finish_table(name) {
                msg.push_str(&format!("; publishing its buffered rows failed too: {e:#}"));
            }
            if let Some(t) = self.tables.remove(name) {
                for p in t.partitions.into_values() {
                    for tier in p.tiers {
                        if let Some(run) = tier.run {
                            run.file.abandon();
                        }
                    }
                }
            }
        }
        let s = self.summary.table(name);
        s.errors += 1;
        if s.error.is_none() {
            s.error = Some(msg);
        }
    }
}

impl Emit for LakeWriter {
    /// A batch that cannot be written fails its table only (see [`LakeWriter::table_failed`]):
    /// the error is kept in the summary and the import goes on with the other tables. An option
    /// that does not fit the table (a usage error) stops the import instead.
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        self.summary.table(table).events += batch.num_rows() as u64;
        let res = self
            .handle_batch(table, batch)
            .with_context(|| format!("writing table {table} into {}", self.root.display()));
        match res {
            Err(e) if e.downcast_ref::<UsageError>().is_some() => Err(e),
            Err(e) => {
                self.table_failed(table, e);
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.summary.record_reject(&reject);
        self.rejects.write(&reject)
    }

    fn progress(&mut self, bytes: u64) {
        self.summary.bytes_in += bytes;
    }

    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        self.summary.table(table).bytes_in += bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::datatypes::{Field, Schema};

    fn batches(runs: &[&[i64]]) -> (SchemaRef, Vec<RecordBatch>) {
        let schema = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, true)]));
        let b = runs
            .iter()
            .map(|r| {
                RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(r.to_vec()))])
                    .unwrap()
            })
            .collect();
        (schema, b)
    }

    fn values(b: &[RecordBatch]) -> Vec<i64> {
        b.iter()
            .flat_map(|b| {
                let a = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                a.values().to_vec()
            })
            .collect()
    }

    proptest::proptest! {
        /// The hand-written order of one 64-bit key against arrow's sort: the same keys in the
        /// same sequence (nulls first), every row once, rows with equal keys (or both null) in
        /// arrival order; for each type that takes the hand-written path, and sliced arrays.
        #[test]
        fn sort_order_is_arrows_stable(
            vals in proptest::collection::vec(proptest::option::weighted(0.9, -5i64..40), 0..300),
            skip in 0usize..5,
            ty in 0usize..3,
        ) {
            use arrow::array::{TimestampMicrosecondArray, DurationNanosecondArray};
            let skip = skip.min(vals.len());
            let values: ArrayRef = match ty {
                0 => Arc::new(Int64Array::from(vals.clone())),
                1 => Arc::new(TimestampMicrosecondArray::from(vals.clone())),
                _ => Arc::new(DurationNanosecondArray::from(vals.clone())),
            };
            let values = values.slice(skip, vals.len() - skip);
            let vals = &vals[skip..];
            let col = SortColumn {
                values,
                options: Some(SortOptions { descending: false, nulls_first: true }),
            };
            let ours = sort_order(std::slice::from_ref(&col)).unwrap();
            let theirs = lexsort_to_indices(std::slice::from_ref(&col), None).unwrap();
            let key = |i: u32| vals[i as usize];
            let ours_keys: Vec<_> = ours.iter().map(|&i| key(i)).collect();
            let theirs_keys: Vec<_> = theirs.values().iter().map(|&i| key(i)).collect();
            proptest::prop_assert_eq!(&ours_keys, &theirs_keys);
            let mut seen = ours.clone();
            seen.sort_unstable();
            proptest::prop_assert_eq!(seen, (0..vals.len() as u32).collect::<Vec<_>>());
            for w in ours.windows(2) {
                if key(w[0]) == key(w[1]) {
                    proptest::prop_assert!(w[0] < w[1], "ties keep arrival order: {:?}", w);
                }
            }
        }
    }

    #[test]
    fn slices_across_batch_boundaries() {
        let (_, b) = batches(&[&[0, 1, 2], &[], &[3, 4], &[5, 6, 7, 8]]);
        for off in 0..=9 {
            for len in 0..=9 - off {
                let got = slice_rows(&b, off, len);
                let want: Vec<i64> = (off as i64..(off + len) as i64).collect();
                assert_eq!(values(&got), want, "off {off} len {len}");
                assert!(got.iter().all(|g| g.num_rows() > 0));
            }
        }
    }

    #[test]
    fn runs_of_sorted_rows_go_on_as_slices() {
        let keys = vec!["t".to_string()];
        // Senders' batches of n rows each (runs long enough to go on as slices), arriving a
        // little out of step: rows 0..n in batch 0, n..2n in batch 2, 2n..3n in batch 1.
        let n = MIN_SLICE_ROWS as i64 * 2;
        let run = |k: i64| (k * n..(k + 1) * n).collect::<Vec<i64>>();
        let (r0, r1, r2, r3) = (run(0), run(1), run(2), run(3));
        let (schema, b) = batches(&[&r0, &r2, &r1, &r3]);
        let got = sorted_batches(&schema, &b, &keys).unwrap();
        assert_eq!(values(&got), (0..4 * n).collect::<Vec<_>>());
        assert_eq!(got.len(), 4);
        for (g, src) in got.iter().zip([0, 2, 1, 3]) {
            assert_eq!(
                g.column(0).to_data().buffers()[0].as_ptr(),
                b[src].column(0).to_data().buffers()[0].as_ptr(),
                "a long run is a slice of its batch, not a copy"
            );
        }
        // A run stops at the end of its batch even when the next batch goes on from it.
        let order: Vec<u32> = (48..96).chain(0..48).collect();
        assert_eq!(
            sorted_runs(&order, &[0, 32, 64]).unwrap(),
            vec![(48, 16), (64, 32), (0, 32), (32, 16)]
        );
        // Short runs are copied together; the order is right either way.
        let short: Vec<Vec<i64>> = (0..64).map(|k| (k * 20..(k + 1) * 20).collect()).collect();
        let mut shuffled: Vec<&[i64]> = short.iter().map(|v| v.as_slice()).collect();
        shuffled.reverse();
        let (schema, b) = batches(&shuffled);
        let got = sorted_batches(&schema, &b, &keys).unwrap();
        assert_eq!(values(&got), (0..64 * 20).collect::<Vec<_>>());
        assert!(got.len() < 64 && got.iter().all(|g| g.num_rows() >= 20));
        // Shuffled rows (runs of one) are gathered one by one, into one batch.
        let order: Vec<u32> = (0..1000u32).map(|i| (i * 7) % 1000).collect();
        assert!(sorted_runs(&order, &[0]).is_none());
        let vals: Vec<i64> = order.iter().map(|&i| i as i64).collect();
        let (schema, b) = batches(&[&vals]);
        let got = sorted_batches(&schema, &b, &keys).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(values(&got), (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn rows_in_order_are_not_copied_and_others_are_sorted() {
        let keys = vec!["t".to_string()];
        let (schema, b) = batches(&[&[1, 2, 2], &[3, 9]]);
        let got = sorted_batches(&schema, &b, &keys).unwrap();
        assert_eq!(got.len(), 2);
        // The same buffers, not copies.
        assert_eq!(
            got[1].column(0).to_data().buffers()[0].as_ptr(),
            b[1].column(0).to_data().buffers()[0].as_ptr()
        );
        let (schema, b) = batches(&[&[1, 5, 2], &[3, 0]]);
        let got = sorted_batches(&schema, &b, &keys).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(values(&got), vec![0, 1, 2, 3, 5]);
        assert_eq!(
            values(&[sort_buffered(&schema, &b, &keys).unwrap()]),
            vec![0, 1, 2, 3, 5]
        );
        // A copy holds none of the original buffers.
        let c = copy_rows(&schema, &slice_rows(&b, 1, 1)).unwrap();
        assert_eq!(values(std::slice::from_ref(&c)), vec![5]);
        let src = b[0].column(0).to_data().buffers()[0]
            .as_slice()
            .as_ptr_range();
        let copy = c.column(0).to_data().buffers()[0].as_ptr();
        assert!(!src.contains(&copy), "the copy points into its source");
    }
}
