//! Compaction: a partition's small files merged into files of a target size, sorted by the
//! table's sort keys, written like a fresh import (same store, codec, encodings, statistics, page
//! index and bloom filters: the merge goes through [`SingleFileWriter`], the writer of
//! `silt convert`), in bounded memory (the writer sorts in a window and spills late rows; inputs
//! are read one batch at a time).
//!
//! Which files: per table, per partition directory and per store kind, the data files smaller
//! than half the target size that were published at least `older_than` ago and belong to no
//! import or flush still in flight (`_silt/imports/*.journal`). In path order (names start with
//! their publication time, so this is arrival order) they are packed into groups of at most the
//! target size; each group of two or more files becomes one file. A merged file is usually smaller
//! than its inputs together (one dictionary and one set of row groups instead of many), so
//! outputs stay under the target.
//!
//! Types: when a table's files disagree on a column's type (an integer in some, a list in others,
//! as Suricata's `vlan` across EVE versions; an integer widened to a float), silt reads the
//! unification, but Spark and DuckDB refuse the table. Compaction then writes every output with
//! the table's unified types and also rewrites, alone if need be, every file whose types
//! disagree, whatever its size: after it, every engine reads the table.
//!
//! Each group is swapped in with the replacement protocol of [`crate::replace`]: the output is
//! checked to hold exactly the rows read, recorded with its inputs, renamed into place, then the
//! inputs are removed. A crash at any point leaves the old files or the new one visible to silt,
//! never both, and the next maintenance command (or import, or serve start) finishes the job for
//! other engines' globs. A group that fails (an unreadable input) is reported and the others go
//! on.
//!
//! Touches the lake's data files, `_silt/replace/` and `_silt/maintenance.lock`.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::FileReader;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use silt_core::{Emit, TableName};

use crate::config::{StoreKind, WriterConfig};
use crate::imports::ImportLog;
use crate::layout::{self, DataFile};
use crate::replace::{self, MaintenanceLock, Recovery, ReplacingPublisher};
use crate::single::SingleFileWriter;

/// Rows per batch read from an input.
const READ_ROWS: usize = 8192;

/// What to compact and how.
#[derive(Debug, Clone)]
pub struct CompactOptions {
    /// Tables to compact; empty = all.
    pub tables: Vec<TableName>,
    /// Only files published at least this long ago (leave what a live ingest just wrote).
    pub older_than: Duration,
    /// Largest output file; files of at least half of it are left as they are.
    pub target_bytes: u64,
    /// How outputs are written (store kind is taken from the inputs; sort keys, when not given,
    /// from the inputs' Parquet `sorting_columns`, else the table's time column).
    pub writer: WriterConfig,
    /// Plan only: report the groups, change nothing.
    pub dry_run: bool,
    /// Age after which finished replacement records are removed.
    pub grace: Duration,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            tables: Vec::new(),
            older_than: Duration::ZERO,
            target_bytes: 256 << 20,
            writer: WriterConfig::default(),
            dry_run: false,
            grace: Duration::from_secs(3600),
        }
    }
}

/// Files of one partition to merge into one.
#[derive(Debug, Clone)]
pub struct Group {
    pub table: TableName,
    /// The partition directory (absolute or as the lake path was given).
    pub dir: PathBuf,
    pub store: StoreKind,
    pub inputs: Vec<DataFile>,
    /// The table's unified schema, when its files disagree on a column's type: the output is
    /// written with it (see the module documentation).
    pub table_schema: Option<SchemaRef>,
}

impl Group {
    pub fn bytes(&self) -> u64 {
        self.inputs.iter().map(|f| f.bytes).sum()
    }
}

/// The outcome of one group.
#[derive(Debug, Clone)]
pub struct GroupResult {
    pub table: TableName,
    /// Partition directory relative to the table (`dt=2024-03-24/hour=17`; empty without one).
    pub partition: String,
    pub inputs: usize,
    pub bytes_in: u64,
    /// 0 for a dry run or a failure.
    pub bytes_out: u64,
    pub rows: u64,
    pub seconds: f64,
    pub output: Option<PathBuf>,
    /// Why the group was not compacted (the inputs are untouched).
    pub error: Option<String>,
}

/// What a compaction did.
#[derive(Debug, Default)]
pub struct CompactReport {
    /// Replacements a crash had left, finished or undone first.
    pub recovery: Recovery,
    /// Files of dead imports removed first (their inputs import again on the next run).
    pub dead_import_files: usize,
    /// Small files left alone because an import or flush that is still going published them.
    pub in_flight: usize,
    pub groups: Vec<GroupResult>,
    pub seconds: f64,
}

impl CompactReport {
    pub fn failed(&self) -> usize {
        self.groups.iter().filter(|g| g.error.is_some()).count()
    }
}

/// What a caller sees of a compaction while it runs.
pub trait CompactObserver {
    /// A group's output is committed (visible); its inputs are removed as soon as this returns,
    /// so a server takes them out of its own index here.
    fn committed(&mut self, _output: &Path, _inputs: &[PathBuf]) {}
    /// A group finished (or failed, or was planned in a dry run).
    fn group(&mut self, _r: &GroupResult) {}
    /// Asked before each group: `true` stops the compaction there (a server shutting down).
    fn cancelled(&self) -> bool {
        false
    }
}

/// A closure sees each finished group.
impl<F: FnMut(&GroupResult)> CompactObserver for F {
    fn group(&mut self, r: &GroupResult) {
        self(r)
    }
}

/// Compacts `root` (see the module documentation).
pub fn compact(
    root: &Path,
    opts: &CompactOptions,
    obs: &mut dyn CompactObserver,
) -> anyhow::Result<CompactReport> {
    let started = Instant::now();
    anyhow::ensure!(
        root.is_dir(),
        "lake {} is not a directory: give the --lake an import wrote",
        root.display()
    );
    let lock = MaintenanceLock::acquire(root)?;
    let mut report = CompactReport::default();
    if !opts.dry_run {
        report.recovery = replace::recover(&lock, opts.grace)?;
        report.dead_import_files = ImportLog::open(root)?.recover()?.files;
    }
    let (groups, in_flight) = plan(root, opts, SystemTime::now())?;
    report.in_flight = in_flight;
    for g in groups {
        if obs.cancelled() {
            break;
        }
        let partition = g
            .dir
            .strip_prefix(root.join(g.table.to_string()))
            .unwrap_or(Path::new(""))
            .display()
            .to_string();
        let mut r = GroupResult {
            table: g.table.clone(),
            partition,
            inputs: g.inputs.len(),
            bytes_in: g.bytes(),
            bytes_out: 0,
            rows: 0,
            seconds: 0.0,
            output: None,
            error: None,
        };
        if !opts.dry_run {
            let t = Instant::now();
            match compact_group(root, &g, &opts.writer, obs) {
                Ok((out, rows)) => {
                    r.bytes_out = out.1;
                    r.output = Some(out.0);
                    r.rows = rows;
                }
                Err(e) => r.error = Some(format!("{e:#}")),
            }
            r.seconds = t.elapsed().as_secs_f64();
        }
        obs.group(&r);
        report.groups.push(r);
    }
    report.seconds = started.elapsed().as_secs_f64();
    drop(lock);
    Ok(report)
}

/// The groups to merge, and how many small files were left alone as in flight.
pub fn plan(
    root: &Path,
    opts: &CompactOptions,
    now: SystemTime,
) -> anyhow::Result<(Vec<Group>, usize)> {
    let tables = if opts.tables.is_empty() {
        layout::tables(root)?
    } else {
        for t in &opts.tables {
            anyhow::ensure!(
                root.join(t.to_string()).is_dir(),
                "table {t} is not in the lake {} (`silt tables --lake {}` lists them)",
                root.display(),
                root.display()
            );
        }
        opts.tables.clone()
    };
    let mut groups = Vec::new();
    let mut in_flight_skipped = 0;
    for table in tables {
        let dir = root.join(table.to_string());
        let files = layout::data_files(&dir)?;
        // Journals are read after the listing: a listed file of a live run is in its journal.
        let in_flight: HashSet<String> = ImportLog::open(root)?.in_flight()?;
        let (table_schema, disagree) = table_schema(&files);
        let mut parts: BTreeMap<(PathBuf, StoreKind), Vec<DataFile>> = BTreeMap::new();
        for f in files {
            if f.bytes * 2 >= opts.target_bytes && !disagree.contains(&f.path) {
                continue;
            }
            let rel = f
                .path
                .strip_prefix(root)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            if in_flight.contains(&rel) {
                in_flight_skipped += 1;
                continue;
            }
            let age = std::fs::metadata(&f.path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default();
            if age < opts.older_than {
                continue;
            }
            let Some(parent) = f.path.parent() else {
                continue;
            };
            parts
                .entry((parent.to_path_buf(), f.store))
                .or_default()
                .push(f);
        }
        for ((pdir, store), files) in parts {
            let mut bin: Vec<DataFile> = Vec::new();
            let mut bytes = 0;
            let close = |bin: &mut Vec<DataFile>, groups: &mut Vec<Group>| {
                // One file is rewritten alone only when its types disagree with the table's.
                if bin.len() >= 2 || bin.iter().any(|f| disagree.contains(&f.path)) {
                    groups.push(Group {
                        table: table.clone(),
                        dir: pdir.clone(),
                        store,
                        inputs: std::mem::take(bin),
                        table_schema: (!disagree.is_empty()).then(|| table_schema.clone()),
                    });
                } else {
                    bin.clear();
                }
            };
            for f in files {
                if !bin.is_empty() && bytes + f.bytes > opts.target_bytes {
                    close(&mut bin, &mut groups);
                    bytes = 0;
                }
                bytes += f.bytes;
                bin.push(f);
            }
            close(&mut bin, &mut groups);
        }
    }
    Ok((groups, in_flight_skipped))
}

/// The Arrow schema a data file holds (its footer), or `None` when it cannot be read.
fn file_schema(path: &Path, store: StoreKind) -> Option<SchemaRef> {
    let f = File::open(path).ok()?;
    match store {
        StoreKind::Parquet => Some(
            ParquetRecordBatchReaderBuilder::try_new(f)
                .ok()?
                .schema()
                .clone(),
        ),
        StoreKind::Feather => Some(FileReader::try_new(BufReader::new(f), None).ok()?.schema()),
    }
}

/// The unification of a table's file schemas (metadata of the first file), and the files whose
/// types disagree with it: a column that is an integer in one file and a list in another
/// (Suricata's `vlan` across EVE versions), an integer widened to a float. silt's own reader
/// unifies them as it reads, but Spark (`mergeSchema`) and DuckDB refuse such a table, so
/// compaction rewrites those files with the table's types. A column a file merely lacks is no
/// disagreement (every engine reads it as null).
fn table_schema(files: &[DataFile]) -> (SchemaRef, HashSet<PathBuf>) {
    let schemas: Vec<(PathBuf, SchemaRef)> = files
        .iter()
        .filter_map(|f| file_schema(&f.path, f.store).map(|s| (f.path.clone(), s)))
        .collect();
    let mut unified: Option<arrow::datatypes::Schema> = None;
    for (_, s) in &schemas {
        unified = Some(match unified {
            None => s.as_ref().clone(),
            Some(u) => {
                let md = u.metadata().clone();
                let mut n = silt_core::schema::unify_schemas(&u, s);
                n.metadata = md;
                n
            }
        });
    }
    let unified = Arc::new(unified.unwrap_or_else(arrow::datatypes::Schema::empty));
    let disagree = schemas
        .iter()
        .filter(|(_, s)| {
            s.fields().iter().any(|f| {
                unified
                    .field_with_name(f.name())
                    .is_ok_and(|u| !same_shape(f.data_type(), u.data_type()))
            })
        })
        .map(|(p, _)| p.clone())
        .collect();
    (unified, disagree)
}

/// Whether `a` (a file's type) reads as `b` (the table's) without conversion: equal up to
/// nullability, metadata and struct fields `a` lacks.
fn same_shape(a: &arrow::datatypes::DataType, b: &arrow::datatypes::DataType) -> bool {
    use arrow::datatypes::DataType as T;
    match (a, b) {
        (T::Struct(fa), T::Struct(fb)) => fa.iter().all(|f| {
            fb.find(f.name())
                .is_some_and(|(_, g)| same_shape(f.data_type(), g.data_type()))
        }),
        (T::List(x), T::List(y)) | (T::LargeList(x), T::LargeList(y)) => {
            same_shape(x.data_type(), y.data_type())
        }
        (T::Map(x, _), T::Map(y, _)) => same_shape(x.data_type(), y.data_type()),
        (T::Null, _) => true,
        _ => a == b,
    }
}

/// The sort keys a Parquet file says it is sorted by (`sorting_columns` of its first row group),
/// as column paths; `None` for Feather or a file without them.
pub fn file_sort_keys(path: &Path) -> Option<Vec<String>> {
    let f = File::open(path).ok()?;
    let b = ParquetRecordBatchReaderBuilder::try_new(f).ok()?;
    let md = b.metadata();
    let rg = md.row_groups().first()?;
    let cols = rg.sorting_columns()?;
    let descr = md.file_metadata().schema_descr();
    let keys: Vec<String> = cols
        .iter()
        .filter_map(|c| {
            let i = usize::try_from(c.column_idx).ok()?;
            (i < descr.num_columns()).then(|| descr.column(i).path().string())
        })
        .collect();
    (!keys.is_empty() && keys.len() == cols.len()).then_some(keys)
}

/// Reads every batch of a data file into `f`; returns the rows read.
fn read_file(
    path: &Path,
    store: StoreKind,
    f: &mut dyn FnMut(RecordBatch) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut rows = 0u64;
    let mut each = |b: RecordBatch| -> anyhow::Result<()> {
        rows += b.num_rows() as u64;
        f(b)
    };
    match store {
        StoreKind::Parquet => {
            let builder = ParquetRecordBatchReaderBuilder::try_new(file)?;
            // The reader's batches lack the schema's metadata (time column, lookup columns),
            // which the output must keep.
            let schema = builder.schema().clone();
            for b in builder.with_batch_size(READ_ROWS).build()? {
                each(b?.with_schema(schema.clone())?)?;
            }
        }
        StoreKind::Feather => {
            for b in FileReader::try_new(BufReader::new(file), None)? {
                each(b?)?;
            }
        }
    }
    Ok(rows)
}

/// Merges one group; returns the output (path, bytes) and its rows.
fn compact_group(
    root: &Path,
    g: &Group,
    cfg: &WriterConfig,
    obs: &mut dyn CompactObserver,
) -> anyhow::Result<((PathBuf, u64), u64)> {
    let mut cfg = cfg.clone();
    cfg.store = g.store;
    cfg.time_column = None;
    if cfg.sort.is_empty() {
        if let Some(keys) = g.inputs.iter().find_map(|f| file_sort_keys(&f.path)) {
            cfg.sort = keys;
        }
    }
    let expected = Arc::new(AtomicU64::new(0));
    let inputs: Vec<PathBuf> = g.inputs.iter().map(|f| f.path.clone()).collect();
    let publisher = ReplacingPublisher::new(root, &g.table.to_string(), &inputs, expected.clone())?;
    let written = publisher.written.clone();
    let out = g.dir.join(layout::unique_file_name(g.store.extension()));
    let mut w = SingleFileWriter::new(&out, cfg, root)?.with_publisher(Box::new(publisher));
    for f in &g.inputs {
        let read = read_file(&f.path, f.store, &mut |b| match &g.table_schema {
            Some(s) => w.batch(&g.table, silt_core::schema::conform(&b, s)?),
            None => w.batch(&g.table, b),
        });
        match read {
            Ok(n) => {
                expected.fetch_add(n, Ordering::SeqCst);
            }
            Err(e) => {
                w.abandon();
                return Err(e.context(format!("reading {}", f.path.display())));
            }
        }
    }
    replace::failpoint("compact-read");
    let summary = w.finish()?;
    let published = summary
        .file
        .context("compaction wrote no file although its inputs have rows")?;
    replace::failpoint("compact-published");
    let rec = written
        .lock()
        .map_err(|_| anyhow::anyhow!("replacement record lock poisoned"))?
        .take()
        .context("the output was published without its replacement record")?;
    obs.committed(&published.path, &inputs);
    replace::remove_inputs(root, &rec.1)?;
    Ok(((published.path, published.bytes), published.rows))
}
