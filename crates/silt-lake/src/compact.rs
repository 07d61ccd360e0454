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
//! The steps are the same on an object-store lake ([`crate::remote::compact`]): the [`Files`]
//! trait is what differs (listing, reading, publishing the output and removing the inputs).
//!
//! Touches the lake's data files, `_silt/replace/` and `_silt/maintenance.lock`.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};
use silt_core::{Emit, TableName};

use crate::config::{StoreKind, WriterConfig};
use crate::imports::ImportLog;
use crate::layout::{self, DataFile};
use crate::replace::{self, MaintenanceLock, Recovery, Replacement, ReplacingPublisher, Written};
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
    /// Inputs left in place because they are damaged (their footer reads, but their pages do
    /// not sum to what the footer says, [`crate::checksum`], or do not decode), with why; the
    /// group's other inputs were merged without them.
    pub damaged: Vec<(PathBuf, String)>,
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
    /// Groups that failed or left a damaged input in place.
    pub fn failed(&self) -> usize {
        self.groups
            .iter()
            .filter(|g| g.error.is_some() || !g.damaged.is_empty())
            .count()
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

/// Where a lake's files live, as compaction reads and replaces them: a local directory
/// ([`LocalFiles`]) or an object store ([`crate::remote::compact`]). Planning, reading, merging and
/// the order of the steps are the same for both.
pub(crate) trait Files {
    /// The lake root (a directory, or an object-store lake's URL as a path).
    fn root(&self) -> PathBuf;
    fn tables(&self) -> anyhow::Result<Vec<TableName>>;
    fn has_table(&self, t: &TableName) -> anyhow::Result<bool>;
    /// A table's data files with their modification times, sorted by path.
    fn data_files(&self, t: &TableName) -> anyhow::Result<Vec<(DataFile, SystemTime)>>;
    /// Files (relative to the root, `/`-separated) that imports not yet finished published.
    fn in_flight(&self) -> anyhow::Result<HashSet<String>>;
    /// A data file for reading.
    fn open(&self, f: &DataFile) -> anyhow::Result<Source>;
    /// A Parquet file's footer.
    fn footer(&self, f: &DataFile) -> anyhow::Result<Arc<ParquetMetaData>> {
        let md = ParquetMetaDataReader::new().parse_and_finish(&self.open(f)?)?;
        Ok(Arc::new(md))
    }
    /// The writer of a group's output, publishing it with its replacement record (what that
    /// record says is left in the returned cell once the output is committed).
    fn writer(
        &self,
        g: &Group,
        cfg: WriterConfig,
        inputs: &[PathBuf],
        expected_rows: Arc<AtomicU64>,
    ) -> anyhow::Result<(SingleFileWriter, Written)>;
    /// Removes the inputs of a committed replacement; returns how many were there.
    fn remove_inputs(&self, rec: &Replacement) -> anyhow::Result<usize>;
}

/// A data file opened for reading: a local file, or an object read whole.
pub(crate) enum Source {
    File(File),
    Bytes(Bytes),
}

trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

impl Source {
    /// A `Read + Seek` view from the start (Arrow IPC's file reader).
    fn into_reader(self) -> Box<dyn ReadSeek> {
        match self {
            Source::File(f) => Box::new(BufReader::new(f)),
            Source::Bytes(b) => Box::new(std::io::Cursor::new(b)),
        }
    }
}

impl Length for Source {
    fn len(&self) -> u64 {
        match self {
            Source::File(f) => Length::len(f),
            Source::Bytes(b) => Length::len(b),
        }
    }
}

impl ChunkReader for Source {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(match self {
            Source::File(f) => Box::new(f.get_read(start)?),
            Source::Bytes(b) => Box::new(b.get_read(start)?),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        match self {
            Source::File(f) => f.get_bytes(start, length),
            Source::Bytes(b) => b.get_bytes(start, length),
        }
    }
}

/// A local lake directory.
pub(crate) struct LocalFiles {
    root: PathBuf,
}

impl Files for LocalFiles {
    fn root(&self) -> PathBuf {
        self.root.clone()
    }

    fn tables(&self) -> anyhow::Result<Vec<TableName>> {
        layout::tables(&self.root)
    }

    fn has_table(&self, t: &TableName) -> anyhow::Result<bool> {
        Ok(self.root.join(t.to_string()).is_dir())
    }

    fn data_files(&self, t: &TableName) -> anyhow::Result<Vec<(DataFile, SystemTime)>> {
        Ok(layout::data_files(&self.root.join(t.to_string()))?
            .into_iter()
            .map(|f| {
                let m = std::fs::metadata(&f.path)
                    .and_then(|m| m.modified())
                    .unwrap_or_else(|_| SystemTime::now());
                (f, m)
            })
            .collect())
    }

    fn in_flight(&self) -> anyhow::Result<HashSet<String>> {
        ImportLog::open(&self.root)?.in_flight()
    }

    fn open(&self, f: &DataFile) -> anyhow::Result<Source> {
        Ok(Source::File(File::open(&f.path).with_context(|| {
            format!("cannot open {}", f.path.display())
        })?))
    }

    fn writer(
        &self,
        g: &Group,
        cfg: WriterConfig,
        inputs: &[PathBuf],
        expected_rows: Arc<AtomicU64>,
    ) -> anyhow::Result<(SingleFileWriter, Written)> {
        let publisher =
            ReplacingPublisher::new(&self.root, &g.table.to_string(), inputs, expected_rows)?;
        let written = publisher.written.clone();
        let out = g.dir.join(layout::unique_file_name(g.store.extension()));
        let w = SingleFileWriter::new(&out, cfg, &self.root)?
            .with_publisher(Box::new(publisher))
            .with_schema_tag();
        Ok((w, written))
    }

    fn remove_inputs(&self, rec: &Replacement) -> anyhow::Result<usize> {
        replace::remove_inputs(&self.root, rec)
    }
}

/// Compacts `root` (see the module documentation).
pub fn compact(
    root: &Path,
    opts: &CompactOptions,
    obs: &mut dyn CompactObserver,
) -> anyhow::Result<CompactReport> {
    let started = Instant::now();
    if !layout::require_lake_dir(root)? {
        return Ok(CompactReport::default());
    }
    let lock = MaintenanceLock::acquire(root)?;
    let mut report = CompactReport::default();
    if !opts.dry_run {
        report.recovery = replace::recover(&lock, opts.grace)?;
        report.dead_import_files = ImportLog::open(root)?.recover()?.files;
    }
    let files = LocalFiles {
        root: root.to_path_buf(),
    };
    run(&files, opts, obs, &mut report, &mut || Ok(()))?;
    report.seconds = started.elapsed().as_secs_f64();
    drop(lock);
    Ok(report)
}

/// Plans and merges the groups of `files` into `report` (the caller holds the lake's maintenance
/// lock and has recovered it); `check` is asked before each group (an error stops the run).
pub(crate) fn run(
    files: &dyn Files,
    opts: &CompactOptions,
    obs: &mut dyn CompactObserver,
    report: &mut CompactReport,
    check: &mut dyn FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let root = files.root();
    let (groups, in_flight) = plan_in(files, opts, SystemTime::now())?;
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
            damaged: Vec::new(),
        };
        if !opts.dry_run {
            check()?;
            let t = Instant::now();
            // A damaged input (its sum does not match, or its data does not decode) is left
            // in place and the rest merged without it (a dry run reads no data, so it cannot
            // tell such a file).
            let mut g = g;
            loop {
                match compact_group(files, &g, &opts.writer, obs) {
                    Ok((out, rows)) => {
                        r.bytes_out = out.1;
                        r.output = Some(out.0);
                        r.rows = rows;
                    }
                    Err(GroupFailure::Damaged(i, e)) => {
                        let bad = g.inputs.remove(i);
                        r.damaged.push((bad.path, format!("{e:#}")));
                        r.inputs = g.inputs.len();
                        r.bytes_in = g.bytes();
                        if g.inputs.len() >= 2 {
                            continue;
                        }
                    }
                    Err(GroupFailure::Other(e)) => r.error = Some(format!("{e:#}")),
                }
                break;
            }
            r.seconds = t.elapsed().as_secs_f64();
        }
        obs.group(&r);
        report.groups.push(r);
    }
    Ok(())
}

/// The groups to merge, and how many small files were left alone as in flight.
pub fn plan(
    root: &Path,
    opts: &CompactOptions,
    now: SystemTime,
) -> anyhow::Result<(Vec<Group>, usize)> {
    plan_in(
        &LocalFiles {
            root: root.to_path_buf(),
        },
        opts,
        now,
    )
}

fn plan_in(
    files: &dyn Files,
    opts: &CompactOptions,
    now: SystemTime,
) -> anyhow::Result<(Vec<Group>, usize)> {
    let root = files.root();
    let tables = if opts.tables.is_empty() {
        files.tables()?
    } else {
        for t in &opts.tables {
            anyhow::ensure!(
                files.has_table(t)?,
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
        let listed = files.data_files(&table)?;
        // Journals are read after the listing: a listed file of a live run is in its journal.
        let in_flight: HashSet<String> = files.in_flight()?;
        let (table_schema, disagree) = table_schema(files, &listed);
        let mut parts: BTreeMap<(PathBuf, StoreKind), Vec<DataFile>> = BTreeMap::new();
        for (f, modified) in listed {
            if f.bytes * 2 >= opts.target_bytes && !disagree.contains(&f.path) {
                continue;
            }
            let rel = f
                .path
                .strip_prefix(&root)
                .map(|p| {
                    p.iter()
                        .map(|c| c.to_string_lossy())
                        .collect::<Vec<_>>()
                        .join("/")
                })
                .unwrap_or_default();
            if in_flight.contains(&rel) {
                in_flight_skipped += 1;
                continue;
            }
            let age = now.duration_since(modified).unwrap_or_default();
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
fn file_schema(files: &dyn Files, f: &DataFile) -> Option<SchemaRef> {
    match f.store {
        StoreKind::Parquet => {
            let md = files.footer(f).ok()?;
            Some(
                ArrowReaderMetadata::try_new(md, ArrowReaderOptions::new())
                    .ok()?
                    .schema()
                    .clone(),
            )
        }
        StoreKind::Feather => Some(
            crate::ipc::open(files.open(f).ok()?.into_reader())
                .ok()?
                .schema(),
        ),
    }
}

/// The unification of a table's file schemas (metadata of the first file), and the files whose
/// types disagree with it: a column that is an integer in one file and a list in another
/// (Suricata's `vlan` across EVE versions), an integer widened to a float. silt's own reader
/// unifies them as it reads, but Spark (`mergeSchema`) and DuckDB refuse such a table, so
/// compaction rewrites those files with the table's types. A column a file merely lacks is no
/// disagreement (every engine reads it as null).
fn table_schema(
    files: &dyn Files,
    listed: &[(DataFile, SystemTime)],
) -> (SchemaRef, HashSet<PathBuf>) {
    let schemas: Vec<(PathBuf, SchemaRef)> = listed
        .iter()
        .filter_map(|(f, _)| file_schema(files, f).map(|s| (f.path.clone(), s)))
        .collect();
    let unified = Arc::new(silt_core::schema::unify_all(schemas.iter().map(|(_, s)| s)));
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
    let md = ParquetMetaDataReader::new().parse_and_finish(&f).ok()?;
    sort_keys_of(&md)
}

/// The sort keys a Parquet footer names (see [`file_sort_keys`]).
fn sort_keys_of(md: &ParquetMetaData) -> Option<Vec<String>> {
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

/// Reads every batch of a data file into `f`, after checking its sum ([`crate::checksum`]);
/// returns the rows read.
fn read_file(
    src: Source,
    store: StoreKind,
    f: &mut dyn FnMut(RecordBatch) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    // Damage that still decodes is found by the sum silt keeps in the file, before any row
    // is read (a file without one is only decoded).
    if let crate::checksum::Check::Damaged(why) = crate::checksum::check(&src, store)? {
        anyhow::bail!("{why}");
    }
    decode_file(src, store, f)
}

/// Reads every batch of a data file into `f` (its sum not checked); returns the rows read.
pub(crate) fn decode_file(
    src: Source,
    store: StoreKind,
    f: &mut dyn FnMut(RecordBatch) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let mut rows = 0u64;
    let mut each = |b: RecordBatch| -> anyhow::Result<()> {
        rows += b.num_rows() as u64;
        f(b)
    };
    // A reader's panic on a damaged page is an error of this file (`silt_core::panics`), and
    // a damaged page can decode into arrays whose buffers disagree with their lengths (Arrow
    // checks them only when asked): the writer would panic on them, or write them.
    let caught = |p: String| anyhow::anyhow!("the reader panicked on it: {p}");
    let checked =
        |b: Result<RecordBatch, arrow::error::ArrowError>| -> anyhow::Result<RecordBatch> {
            let b = b?;
            for c in b.columns() {
                c.to_data().validate_full()?;
            }
            Ok(b)
        };
    match store {
        StoreKind::Parquet => {
            // Opening reads the footer, which the readers panic on too (a damaged schema).
            let builder =
                silt_core::panics::catch(|| ParquetRecordBatchReaderBuilder::try_new(src))
                    .map_err(caught)??;
            // The reader's batches lack the schema's metadata (time column, lookup columns),
            // which the output must keep.
            let schema = builder.schema().clone();
            let mut reader = builder.with_batch_size(READ_ROWS).build()?;
            while let Some(b) = silt_core::panics::catch(|| reader.next()).map_err(caught)? {
                each(checked(b)?.with_schema(schema.clone())?)?;
            }
        }
        StoreKind::Feather => {
            // Panics on damaged bytes come back as errors (`crate::ipc`).
            for b in crate::ipc::open(src.into_reader())? {
                each(checked(b)?)?;
            }
        }
    }
    Ok(rows)
}

/// Reads every row of the local data file `path` as compaction does (its sum checked, a reader's
/// panic caught, every batch validated); `Err` when the file or its data does not read.
pub fn read_whole(path: &Path, store: StoreKind) -> anyhow::Result<u64> {
    read_file(Source::File(File::open(path)?), store, &mut |_| Ok(()))
}

/// Why a group was not merged.
enum GroupFailure {
    /// Input `.0` opened but its data did not decode.
    Damaged(usize, anyhow::Error),
    Other(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for GroupFailure {
    fn from(e: E) -> Self {
        GroupFailure::Other(e.into())
    }
}

/// Merges one group; returns the output (path, bytes) and its rows.
fn compact_group(
    files: &dyn Files,
    g: &Group,
    cfg: &WriterConfig,
    obs: &mut dyn CompactObserver,
) -> Result<((PathBuf, u64), u64), GroupFailure> {
    let mut cfg = cfg.clone();
    cfg.store = g.store;
    cfg.time_column = None;
    if cfg.sort.is_empty() {
        let keys = g
            .inputs
            .iter()
            .filter(|f| f.store == StoreKind::Parquet)
            .find_map(|f| sort_keys_of(&*files.footer(f).ok()?));
        if let Some(keys) = keys {
            cfg.sort = keys;
        }
    }
    let expected = Arc::new(AtomicU64::new(0));
    let inputs: Vec<PathBuf> = g.inputs.iter().map(|f| f.path.clone()).collect();
    let (mut w, written) = files.writer(g, cfg, &inputs, expected.clone())?;
    for (i, f) in g.inputs.iter().enumerate() {
        let src = match files.open(f) {
            Ok(src) => src,
            Err(e) => {
                w.abandon();
                return Err(e.context(format!("reading {}", f.path.display())).into());
            }
        };
        // Whether the input's data failed to decode, or the output to take it.
        let mut writing = None;
        let read = read_file(src, f.store, &mut |b| {
            let res = match &g.table_schema {
                Some(s) => silt_core::schema::conform(&b, s)
                    .map_err(anyhow::Error::from)
                    .and_then(|b| w.batch(&g.table, b)),
                None => w.batch(&g.table, b),
            };
            res.map_err(|e| {
                writing = Some(format!("{e:#}"));
                e
            })
        });
        match read {
            Ok(n) => {
                expected.fetch_add(n, Ordering::SeqCst);
            }
            Err(e) => {
                w.abandon();
                return Err(match writing {
                    Some(_) => {
                        GroupFailure::Other(e.context(format!("reading {}", f.path.display())))
                    }
                    // The file is named where it is reported.
                    None => GroupFailure::Damaged(i, e),
                });
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
    files.remove_inputs(&rec.1)?;
    Ok(((published.path, published.bytes), published.rows))
}
