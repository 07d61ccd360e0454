//! Discovering a lake: which tables exist, which data files each has, and what their footers say.
//!
//! The files are the only truth (there is no catalog file), so [`LakeIndex::scan`] walks the lake
//! directory once when a session opens, with the listing rules every silt command shares
//! (`silt_lake::layout`: which directories are tables, which files are data, what `dt=`/`hour=`
//! and `__HIVE_DEFAULT_PARTITION__` mean), and:
//! - every file's footer is read for its Arrow schema (Parquet: the embedded `ARROW:schema`,
//!   or Parquet's own schema in a file that needs none), its row-group count and, for Parquet,
//!   the min/max statistics of the time column and the bounds of every flat column
//!   ([`FileBounds`], for pruning whole files).
//!
//! A server keeps one index for its lifetime and extends it with each flush's files
//! ([`LakeIndex::with_files`]): tables are shared between index versions, and adding files
//! costs their footers, not the table's other files.
//!
//! A file whose footer cannot be read is left out of its table and reported in
//! [`LakeIndex::warnings`] (the caller shows them), so one damaged file does not make a whole lake
//! unqueryable and is never skipped silently.
//!
//! A lake in an object store ([`silt_lake::remote`]) is listed with one recursive listing and
//! its footers are read with range requests, 16 at a time, through the local footer cache
//! ([`silt_lake::remote::footers`]: lake files are immutable, so a footer is read from the store
//! once per machine); see [`LakeIndex::scan_remote`].
//!
//! A query opens a remote lake with its footers **deferred** ([`LakeIndex::open_for_query`]):
//! silt's data files are named with a tag of the schema they were written with
//! ([`silt_lake::schema_tag`]), so a table's columns are known from one footer per tag; the
//! other files' footers (unless the footer cache has them) are read by the scan, only for the
//! files its time and partition filters keep ([`TableIndex::read_deferred`]). A first query over
//! the last hour of a year of data reads a handful of footers, not thousands.
//!
//! This module only reads files under the lake directory (or prefix).

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context;
use arrow::array::Array;
use arrow::datatypes::{DataType, Field, FieldRef, Schema, SchemaRef, TimeUnit};
use datafusion::common::ScalarValue;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::metadata::ParquetMetaData;
use silt_core::TableName;
use silt_lake::remote::file::RemoteFile;
use silt_lake::remote::footers::FooterCache;
use silt_lake::remote::{LakeRoot, RemoteLake};

/// Microseconds in an hour and in a day.
const HOUR_US: i64 = 3_600_000_000;
const DAY_US: i64 = 24 * HOUR_US;

/// Storage format of one data file (Parquet, or Arrow IPC "Feather v2").
pub use silt_lake::StoreKind as FileFormat;

/// What a file's location and footer say about the event times it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeBounds {
    /// Nothing is known (no partition directories, no usable statistics).
    Unknown,
    /// Every row has a null time (the `__HIVE_DEFAULT_PARTITION__` directory, or statistics
    /// that count only nulls).
    AllNull,
    /// Every non-null time lies in `[lo, hi]` (UTC microseconds, inclusive).
    Range { lo: i64, hi: i64 },
}

/// One data file of a table.
#[derive(Debug, Clone)]
pub struct DataFile {
    pub path: PathBuf,
    pub format: FileFormat,
    pub size: u64,
    pub modified: SystemTime,
    /// `dt=` value as days since the Unix epoch; `None` without a `dt=` directory or for the
    /// default partition.
    pub dt: Option<i32>,
    /// `hour=` value; `None` without an `hour=` directory or for the default partition.
    pub hour: Option<i32>,
    /// `month=` value (`YYYY-MM`); `None` without a `month=` directory or for the default
    /// partition.
    pub month: Option<String>,
    /// The file's own Arrow schema.
    pub schema: SchemaRef,
    /// Parquet row groups (Feather: record batches).
    pub row_groups: usize,
    /// Event-time bounds used for pruning.
    pub time: TimeBounds,
    /// Min/max and null counts of the file's flat columns, from its Parquet footer: what lets
    /// a query skip the file without opening it (`None` for Feather files).
    pub bounds: Option<Arc<FileBounds>>,
    /// The Parquet footer as read, for a file in an object store (up to [`FOOTERS_KEPT`] bytes
    /// of them per lake): handed to DataFusion's metadata cache so that a scan does not read it
    /// from the store a second time.
    pub footer: Option<Arc<ParquetMetaData>>,
    /// The footer is not read yet ([`LakeIndex::open_for_query`]): `schema` is that of the file
    /// read for the same schema tag, `row_groups` is 0, `bounds` is `None` and `time` comes from
    /// the directories alone. A scan that keeps the file reads it first
    /// ([`TableIndex::read_deferred`]).
    pub deferred: bool,
}

/// What a Parquet file's footer says about its flat columns, over all its row groups: a query
/// whose filters no row of these bounds can satisfy skips the file before opening it
/// ([`crate::provider`]), which matters when a table has thousands of small files (a server
/// between compactions). Only bounds of at most [`BOUND_BYTES`] are kept (long strings such as
/// user agents prune almost nothing and would make the index large).
#[derive(Debug)]
pub struct FileBounds {
    /// Rows in the file.
    pub rows: u64,
    /// By column of the file's schema (same positions): `(min, max, nulls)`, `None` when some
    /// row group lacks statistics of that column, or for nested columns. `min`/`max` are null
    /// scalars when the column holds only nulls.
    pub columns: Vec<Option<(ScalarValue, ScalarValue, u64)>>,
}

/// Largest min or max (bytes) a [`FileBounds`] keeps.
pub const BOUND_BYTES: usize = 64;

/// One table: its name, files and unified schema.
#[derive(Debug, Clone)]
pub struct TableIndex {
    pub name: TableName,
    pub dir: PathBuf,
    /// Files sorted by path (partition order).
    pub files: Vec<DataFile>,
    /// Unification of all file schemas by [`silt_core::schema::unify_schemas`], every field
    /// nullable. The columns a query sees, before the partition columns.
    pub file_schema: SchemaRef,
    /// The event-time column (`silt.time_column`), when it exists and is a timestamp.
    pub time_column: Option<String>,
    /// The object store holding the files, for a lake in one ([`silt_lake::remote`]); the
    /// file paths are then below [`RemoteLake::root_path`].
    pub remote: Option<Arc<RemoteLake>>,
    /// Whether some file is in a `month=` directory (the table then has a `month` column).
    pub has_month: bool,
    /// Whether every Parquet file's columns may take predicates inside the Parquet decoder
    /// against [`Self::file_schema`] ([`crate::adapter::pushdown_safe`]).
    pub pushdown_safe: bool,
    /// Where the footers of [`DataFile::deferred`] files are read from (an object-store lake
    /// opened for a query).
    pub footers: Option<Arc<FooterCache>>,
}

impl TableIndex {
    /// A table without files whose columns are `schema` (every field made nullable): one whose
    /// last files a retention dropped ([`silt_lake::emptied`]), or a server's table after the
    /// same. `month`: its partitions were `month=` directories.
    pub fn without_data(name: TableName, dir: &Path, schema: &Schema, month: bool) -> Self {
        let file_schema = Arc::new(nullable_schema(schema));
        TableIndex {
            name,
            dir: dir.to_path_buf(),
            files: Vec::new(),
            time_column: time_column_of(&file_schema),
            file_schema,
            remote: None,
            has_month: month,
            pushdown_safe: true,
            footers: None,
        }
    }

    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// The table's partitioning as its files are placed: `None` when no file tells (no files,
    /// or only files of the null partition).
    pub fn partitioning_of_files(&self) -> Option<silt_lake::Partitioning> {
        use silt_lake::Partitioning as P;
        self.files.iter().find_map(|f| {
            if f.month.is_some() {
                Some(P::Month)
            } else if f.hour.is_some() {
                Some(P::Hour)
            } else if f.dt.is_some() {
                Some(P::Day)
            } else if f.path.parent() == Some(self.dir.as_path()) {
                Some(P::None)
            } else {
                None
            }
        })
    }

    pub fn total_row_groups(&self) -> usize {
        self.files
            .iter()
            .filter(|f| f.format == FileFormat::Parquet)
            .map(|f| f.row_groups)
            .sum()
    }
}

/// All tables of a lake.
///
/// Tables are shared (`Arc`): a server takes a snapshot of the index per query and makes a new
/// index per flush, so neither may cost time in proportion to the files of the tables it does
/// not change (a server's lake grows by thousands of files an hour between compactions).
#[derive(Debug, Clone, Default)]
pub struct LakeIndex {
    pub root: PathBuf,
    pub tables: BTreeMap<TableName, Arc<TableIndex>>,
    /// Files left out because they could not be read, with the reason.
    pub warnings: Vec<String>,
    /// The object store, for a lake in one (`root` is then its URL).
    pub remote: Option<Arc<RemoteLake>>,
}

impl LakeIndex {
    /// [`LakeIndex::scan`] of a local lake, or [`LakeIndex::scan_remote`] of one in an object
    /// store.
    pub fn open(root: &LakeRoot) -> anyhow::Result<Self> {
        Self::open_tables(root, None)
    }

    /// [`LakeIndex::open`] of the tables `only` names (those the lake has), or of every table:
    /// a query that names its tables reads no other table's footers, which in an object store
    /// are a request each the first time.
    pub fn open_tables(
        root: &LakeRoot,
        only: Option<&BTreeSet<TableName>>,
    ) -> anyhow::Result<Self> {
        Self::open_with(root, only, false)
    }

    /// [`LakeIndex::open_tables`] for one query: in an object-store lake, footers are deferred
    /// (see the module documentation), read through the footer cache `SILT_FOOTER_CACHE` names.
    pub fn open_for_query(
        root: &LakeRoot,
        only: Option<&BTreeSet<TableName>>,
    ) -> anyhow::Result<Self> {
        Self::open_with(root, only, true)
    }

    fn open_with(
        root: &LakeRoot,
        only: Option<&BTreeSet<TableName>>,
        defer: bool,
    ) -> anyhow::Result<Self> {
        match root {
            LakeRoot::Dir(d) => Self::scan_tables(d, only),
            LakeRoot::Remote(r) => {
                let footers = Arc::new(FooterCache::from_env());
                Self::scan_remote_impl(r.clone(), &footers, defer.then_some(&footers), only)
            }
        }
    }

    /// [`LakeIndex::scan_remote_tables`] with deferred footers (see the module documentation):
    /// a table's files are read for their schema one per schema tag, the rest when a scan keeps
    /// them, through `footers` (also when the cache has them now).
    pub fn scan_remote_deferred(
        lake: Arc<RemoteLake>,
        footers: Arc<FooterCache>,
        only: Option<&BTreeSet<TableName>>,
    ) -> anyhow::Result<Self> {
        Self::scan_remote_impl(lake, &footers, Some(&footers), only)
    }

    /// Lists an object-store lake (one recursive listing) and reads every data file's footer
    /// with range requests, through the footer cache `SILT_FOOTER_CACHE` names
    /// ([`FooterCache::from_env`]); the same listing rules as a local lake (files a compaction
    /// replaced or a retention is dropping are left out, [`silt_lake::remote::replace::Hidden`]).
    pub fn scan_remote(lake: Arc<RemoteLake>) -> anyhow::Result<Self> {
        Self::scan_remote_with(lake, &FooterCache::from_env())
    }

    /// [`LakeIndex::scan_remote`] with the footer cache `footers`.
    pub fn scan_remote_with(lake: Arc<RemoteLake>, footers: &FooterCache) -> anyhow::Result<Self> {
        Self::scan_remote_tables(lake, footers, None)
    }

    /// [`LakeIndex::scan_remote_with`] of the tables `only` names, or of every table: one
    /// listing per table named (and one of the kept schemas), or one of the whole lake.
    pub fn scan_remote_tables(
        lake: Arc<RemoteLake>,
        footers: &FooterCache,
        only: Option<&BTreeSet<TableName>>,
    ) -> anyhow::Result<Self> {
        Self::scan_remote_impl(lake, footers, None, only)
    }

    /// The scan of an object-store lake, footers deferred when `deferred` gives the cache to
    /// read them through later.
    fn scan_remote_impl(
        lake: Arc<RemoteLake>,
        footers: &FooterCache,
        deferred: Option<&Arc<FooterCache>>,
        only: Option<&BTreeSet<TableName>>,
    ) -> anyhow::Result<Self> {
        let root = lake.root_path();
        let mut by_table: BTreeMap<TableName, Vec<(PathBuf, FileFormat, u64, SystemTime)>> =
            BTreeMap::new();
        let listed = match only {
            None => lake.list("")?,
            Some(only) => {
                let mut l = lake.list(silt_lake::granularity::TABLES_DIR)?;
                for t in only {
                    l.extend(lake.list(&t.to_string())?);
                }
                l
            }
        };
        // Read after the listing (silt_lake::remote::replace): what a compaction replaced or a
        // retention is dropping.
        let hidden = silt_lake::remote::replace::Hidden::load(&lake, &listed)?;
        // Tables whose last files a retention dropped ([`silt_lake::emptied`]).
        let mut kept_schemas = BTreeMap::new();
        for o in listed {
            if let Some(t) = silt_lake::emptied::table_of(&o.rel) {
                if only.is_none_or(|only| only.contains(&t)) {
                    kept_schemas.insert(t, o.rel.clone());
                }
                continue;
            }
            let parts: Vec<&str> = o.rel.split('/').collect();
            if parts.len() < 2
                || parts.iter().any(|c| silt_lake::layout::is_hidden(c))
                || hidden.hides(&o)
            {
                continue;
            }
            let Some(table) = TableName::parse(parts[0]) else {
                continue;
            };
            let path = root.join(&o.rel);
            let Some(format) = FileFormat::from_path(&path) else {
                continue;
            };
            by_table
                .entry(table)
                .or_default()
                .push((path, format, o.size, o.modified));
        }
        let mut index = LakeIndex {
            root: root.clone(),
            remote: Some(lake.clone()),
            ..Default::default()
        };
        let mut kept = 0;
        for (table, mut listed) in by_table {
            listed.sort_by(|a, b| a.0.cmp(&b.0));
            let dir = root.join(table.to_string());
            let infos = match deferred {
                None => parallel(&listed, REMOTE_READERS, 2, |l| {
                    read_remote_info(&lake, footers, &dir, l)
                }),
                Some(_) => read_deferring(&lake, footers, &dir, &listed),
            };
            let mut files = Vec::with_capacity(listed.len());
            for ((path, ..), info) in listed.iter().zip(infos) {
                match info {
                    Ok(f) => files.push(f),
                    Err(e) => index
                        .warnings
                        .push(format!("skipped {}: {e:#}", path.display())),
                }
            }
            if let Some(mut t) = assemble_table(table.clone(), &dir, files) {
                // Footers beyond the budget are read again by the scan when it needs them.
                for f in &mut t.files {
                    if let Some(md) = &f.footer {
                        kept += md.memory_size();
                        if kept > FOOTERS_KEPT {
                            f.footer = None;
                        }
                    }
                }
                t.remote = Some(lake.clone());
                t.footers = deferred.cloned();
                index.tables.insert(table, Arc::new(t));
            }
        }
        for (table, rel) in kept_schemas {
            if index.tables.contains_key(&table) {
                continue;
            }
            let Some(bytes) = lake.get(&rel)? else {
                continue;
            };
            let (schema, month) = silt_lake::emptied::decode(&bytes)
                .with_context(|| format!("{rel} in {} is not a kept table schema", lake.url()))?;
            let dir = root.join(table.to_string());
            let mut t = TableIndex::without_data(table.clone(), &dir, &schema, month);
            t.remote = Some(lake.clone());
            index.tables.insert(table, Arc::new(t));
        }
        footers.trim();
        Ok(index)
    }

    /// Walks `root` and reads every data file's footer.
    pub fn scan(root: &Path) -> anyhow::Result<Self> {
        Self::scan_tables(root, None)
    }

    /// [`LakeIndex::scan`] of the tables `only` names, or of every table.
    pub fn scan_tables(root: &Path, only: Option<&BTreeSet<TableName>>) -> anyhow::Result<Self> {
        let root = root
            .canonicalize()
            .with_context(|| format!("cannot open lake {}", root.display()))?;
        anyhow::ensure!(root.is_dir(), "lake {} is not a directory", root.display());
        let mut index = LakeIndex {
            root: root.clone(),
            ..Default::default()
        };
        for table in silt_lake::layout::tables(&root)? {
            if only.is_some_and(|only| !only.contains(&table)) {
                continue;
            }
            let dir = root.join(table.to_string());
            let t = match scan_table(table.clone(), &dir, &mut index.warnings)? {
                Some(t) => t,
                None => match silt_lake::emptied::load(&root, &table)? {
                    Some((schema, month)) => {
                        TableIndex::without_data(table.clone(), &dir, &schema, month)
                    }
                    None => continue,
                },
            };
            index.tables.insert(table, Arc::new(t));
        }
        Ok(index)
    }
}

/// A table's index from its files' footers. A file that cannot be read is left out with a
/// warning, unless it is gone: removed since the listing by a compaction (which renamed its
/// output in first) or a retention in another process, which a new listing sees whole, so
/// the table is listed again (leaving the file out would leave its rows out of every answer).
fn scan_table(
    name: TableName,
    dir: &Path,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Option<TableIndex>> {
    /// Listings that may be made again before a file gone is reported like a damaged one.
    const ATTEMPTS: usize = 20;
    let mut attempt = 0;
    'list: loop {
        attempt += 1;
        let paths: Vec<(PathBuf, FileFormat)> = silt_lake::layout::data_files(dir)?
            .into_iter()
            .map(|f| (f.path, f.store))
            .collect();
        let mut files = Vec::with_capacity(paths.len());
        let mut skipped = Vec::new();
        for ((path, _), info) in paths.iter().zip(read_all(dir, &paths)) {
            match info {
                Ok(f) => files.push(f),
                Err(_) if attempt < ATTEMPTS && !path.exists() => continue 'list,
                Err(e) => skipped.push(format!("skipped {}: {e:#}", path.display())),
            }
        }
        warnings.extend(skipped);
        return Ok(assemble_table(name, dir, files));
    }
}

impl LakeIndex {
    /// This index with the data files `paths` added (files just published below [`Self::root`]):
    /// only their footers are read, so a server keeps its catalog current without re-listing the
    /// lake. A path already in the index is read again (it replaces the old entry); a file that
    /// cannot be read is left out and reported in [`Self::warnings`], as in [`Self::scan`].
    ///
    /// In an object-store lake ([`Self::remote`]) the paths are below its
    /// [`RemoteLake::root_path`]; each file costs a `HEAD` and its footer's range requests.
    pub fn with_files(&self, paths: &[PathBuf]) -> anyhow::Result<Self> {
        let mut out = self.clone();
        let mut added: BTreeMap<TableName, Vec<DataFile>> = BTreeMap::new();
        for p in paths {
            let p = match &self.remote {
                Some(_) => p.clone(),
                None => p
                    .canonicalize()
                    .with_context(|| format!("cannot open {}", p.display()))?,
            };
            let rel = p.strip_prefix(&self.root).with_context(|| {
                format!(
                    "{} is not below the lake {}",
                    p.display(),
                    self.root.display()
                )
            })?;
            let table = rel
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .and_then(TableName::parse)
                .with_context(|| format!("{} is not in a table directory", p.display()))?;
            let Some(format) = FileFormat::from_path(&p) else {
                anyhow::bail!("{} is not a data file", p.display());
            };
            let dir = self.root.join(table.to_string());
            let read = match &self.remote {
                None => read_file_info(&dir, &p, format),
                Some(lake) => lake.head(&lake.rel_of(&p)?).and_then(|(size, modified)| {
                    let footers = FooterCache::new(None);
                    // Not kept (memory stays bounded however many flushes add files): queries
                    // read footers through their own cache.
                    read_remote_info(lake, &footers, &dir, &(p.clone(), format, size, modified))
                        .map(|mut f| {
                            f.footer = None;
                            f
                        })
                }),
            };
            match read {
                Ok(f) => added.entry(table).or_default().push(f),
                Err(e) => out.warnings.push(format!("skipped {}: {e:#}", p.display())),
            }
        }
        for (table, new) in added {
            let dir = self.root.join(table.to_string());
            let t = match out.tables.remove(&table) {
                Some(t) => extend_table(&t, new),
                None => assemble_table(table.clone(), &dir, new),
            };
            if let Some(mut t) = t {
                t.remote = self.remote.clone();
                out.tables.insert(table, Arc::new(t));
            }
        }
        Ok(out)
    }
}

impl LakeIndex {
    /// This index without the data files `paths` (files a compaction replaced or a retention
    /// dropped: the server takes them out before they are removed). Paths need not exist any
    /// more; a table left without files keeps its columns and has no rows.
    pub fn without_files(&self, paths: &[PathBuf]) -> Self {
        let canon = |p: &Path| -> PathBuf {
            p.canonicalize()
                .or_else(|_| match (p.parent(), p.file_name()) {
                    (Some(d), Some(n)) => d.canonicalize().map(|d| d.join(n)),
                    _ => Ok(p.to_path_buf()),
                })
                .unwrap_or_else(|_| p.to_path_buf())
        };
        let gone: std::collections::HashSet<PathBuf> = paths.iter().map(|p| canon(p)).collect();
        let mut out = self.clone();
        out.tables = BTreeMap::new();
        for (name, t) in &self.tables {
            if !t.files.iter().any(|f| gone.contains(&f.path)) {
                out.tables.insert(name.clone(), t.clone());
                continue;
            }
            let files: Vec<DataFile> = t
                .files
                .iter()
                .filter(|f| !gone.contains(&f.path))
                .cloned()
                .collect();
            // A table left without files keeps its columns, as a fresh scan finds them in
            // the schema a retention keeps.
            let mut kept = assemble_table(name.clone(), &t.dir, files).unwrap_or_else(|| {
                TableIndex::without_data(name.clone(), &t.dir, &t.file_schema, t.has_month)
            });
            kept.remote = t.remote.clone();
            kept.footers = t.footers.clone();
            out.tables.insert(name.clone(), Arc::new(kept));
        }
        out
    }
}

/// A table's index from its readable files: the unified schema (every field nullable), the time
/// column, and each file's time bounds tightened by its footer statistics. `None` without files.
fn assemble_table(name: TableName, dir: &Path, files: Vec<DataFile>) -> Option<TableIndex> {
    let mut files = files.into_iter();
    let first = files.next()?;
    let mut schema = first.schema.as_ref().clone();
    let files: Vec<DataFile> = std::iter::once(first)
        .chain(files.inspect(|f| schema = silt_core::schema::unify_schemas(&schema, &f.schema)))
        .collect();
    let mut t = TableIndex {
        name,
        dir: dir.to_path_buf(),
        files: Vec::new(),
        file_schema: Arc::new(nullable_schema(&schema)),
        time_column: None,
        remote: None,
        has_month: false,
        pushdown_safe: true,
        footers: None,
    };
    t.time_column = time_column_of(&t.file_schema);
    t.add_files(files);
    Some(t)
}

/// `t` with the data files `new` added (a file at a path `t` has already replaces it): the
/// schema is `t`'s unified with the new files' only, so adding a flush's files to a table of
/// thousands costs the new files' footers, not the table's (only a change of the unified schema
/// makes the per-file facts be worked out again for every file).
fn extend_table(t: &TableIndex, new: Vec<DataFile>) -> Option<TableIndex> {
    let fresh: std::collections::HashSet<PathBuf> = new.iter().map(|f| f.path.clone()).collect();
    // A table without files (emptied by a retention) is what its new files say, as in a scan.
    if t.files.is_empty() || t.files.iter().any(|f| fresh.contains(&f.path)) {
        // A file read again: its old schema may be what made the unified one.
        let kept = t.files.iter().filter(|f| !fresh.contains(&f.path));
        let mut files: Vec<DataFile> = kept.cloned().chain(new).collect();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        return assemble_table(t.name.clone(), &t.dir, files).map(|mut a| {
            a.remote = t.remote.clone();
            a.footers = t.footers.clone();
            a
        });
    }
    let mut schema = t.file_schema.as_ref().clone();
    for f in &new {
        schema = silt_core::schema::unify_schemas(&schema, &f.schema);
    }
    let schema = nullable_schema(&schema);
    let mut out = TableIndex {
        name: t.name.clone(),
        dir: t.dir.clone(),
        files: Vec::with_capacity(t.files.len() + new.len()),
        file_schema: t.file_schema.clone(),
        time_column: t.time_column.clone(),
        remote: t.remote.clone(),
        has_month: t.has_month,
        pushdown_safe: t.pushdown_safe,
        footers: t.footers.clone(),
    };
    if schema != *t.file_schema {
        out.file_schema = Arc::new(schema);
        out.time_column = time_column_of(&out.file_schema);
        out.has_month = false;
        out.pushdown_safe = true;
        out.add_files(t.files.to_vec());
    } else {
        out.files.extend(t.files.iter().cloned());
    }
    out.add_files(new);
    out.files.sort_by(|a, b| a.path.cmp(&b.path));
    Some(out)
}

impl TableIndex {
    /// Adds `files` (their schemas already unified into [`Self::file_schema`]): each file's time
    /// bounds tightened by its footer statistics of the time column, and the table-wide facts.
    fn add_files(&mut self, files: Vec<DataFile>) {
        let fs = self.file_schema.clone();
        for mut f in files {
            self.tighten_time(&mut f);
            // Files of one table mostly have one schema: share it rather than keep a copy per
            // file (a server's index holds thousands of files between compactions).
            if let Some(last) = self.files.last() {
                if !Arc::ptr_eq(&last.schema, &f.schema) && last.schema == f.schema {
                    f.schema = last.schema.clone();
                }
            }
            self.has_month |= f.month.is_some();
            self.pushdown_safe &= f.pushdown_safe(&fs);
            self.files.push(f);
        }
    }
}

impl TableIndex {
    /// Footer statistics of the time column are tighter than directory bounds (and the only
    /// bounds in the `none` layout); a file without the time column has only null times.
    fn tighten_time(&self, f: &mut DataFile) {
        if let Some(tc) = &self.time_column {
            if f.schema.field_with_name(tc).is_err() {
                f.time = TimeBounds::AllNull;
            } else if let Some(b) = f.footer_time(tc) {
                f.time = b;
            }
        }
    }
}

impl DataFile {
    /// Bounds of the time column `tc` (microsecond timestamps) from the footer statistics
    /// ([`FileBounds`]), when every row group has them.
    fn footer_time(&self, tc: &str) -> Option<TimeBounds> {
        let i = self.schema.index_of(tc).ok()?;
        if !matches!(
            self.schema.field(i).data_type(),
            DataType::Timestamp(TimeUnit::Microsecond, _)
        ) {
            return None;
        }
        match self.bounds.as_ref()?.columns.get(i)?.as_ref()? {
            (
                ScalarValue::TimestampMicrosecond(Some(lo), _),
                ScalarValue::TimestampMicrosecond(Some(hi), _),
                _,
            ) => Some(TimeBounds::Range { lo: *lo, hi: *hi }),
            (lo, hi, _) if lo.is_null() && hi.is_null() => Some(TimeBounds::AllNull),
            _ => None,
        }
    }

    /// Whether predicates on this file's columns may be evaluated inside the Parquet decoder
    /// when the table's columns are `table` ([`crate::adapter::pushdown_safe`]; Feather files
    /// are not decoded by it).
    pub fn pushdown_safe(&self, table: &Schema) -> bool {
        self.format != FileFormat::Parquet
            || self.schema.fields().iter().all(|p| {
                table
                    .field_with_name(p.name())
                    .map(|l| crate::adapter::pushdown_safe(p.data_type(), l.data_type()))
                    .unwrap_or(true)
            })
    }
}

/// `schema` with every field nullable.
fn nullable_schema(schema: &Schema) -> Schema {
    Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(nullable_field)
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    )
}

/// The event-time column of a table with `schema`: `silt.time_column`, when it is a timestamp.
fn time_column_of(schema: &Schema) -> Option<String> {
    silt_core::meta::time_column(schema)
        .filter(|c| {
            schema
                .field_with_name(c)
                .map(|f| matches!(f.data_type(), DataType::Timestamp(_, _)))
                .unwrap_or(false)
        })
        .map(str::to_string)
}

/// Reads the footers of `paths`, on several threads for large tables (footer reads are small
/// random reads: latency-bound, not bandwidth-bound).
fn read_all(dir: &Path, paths: &[(PathBuf, FileFormat)]) -> Vec<anyhow::Result<DataFile>> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8);
    parallel(paths, threads, 64, |(p, f)| read_file_info(dir, p, *f))
}

/// Footer reads of an object store in flight at once: each is a round trip or two, so the
/// number of cores does not bound them.
const REMOTE_READERS: usize = 16;

/// A remote data file's entry: its footer through `footers` (Parquet) or its schema read in
/// ranges (Feather).
fn read_remote_info(
    lake: &Arc<RemoteLake>,
    footers: &FooterCache,
    dir: &Path,
    (p, f, size, modified): &(PathBuf, FileFormat, u64, SystemTime),
) -> anyhow::Result<DataFile> {
    let key = lake.key_of(p)?;
    if *f == FileFormat::Parquet {
        let md = footers.footer(lake, &key, *size, *modified)?;
        return info_from_footer(dir, p, *size, *modified, md);
    }
    // Its batches are not checked as a local file's are (`read_file_info`): that would read
    // most of the object again, in ranges.
    let reader = silt_lake::ipc::open(RemoteFile::new(lake.clone(), key, *size).reader())?;
    Ok(feather_entry(dir, p, *size, *modified, &reader))
}

/// A Parquet file's entry from its footer `md` (kept in [`DataFile::footer`]).
fn info_from_footer(
    dir: &Path,
    p: &Path,
    size: u64,
    modified: SystemTime,
    md: Arc<ParquetMetaData>,
) -> anyhow::Result<DataFile> {
    let meta = ArrowReaderMetadata::try_new(md.clone(), ArrowReaderOptions::new())?;
    let mut info = parquet_info(dir, p, size, modified, &meta);
    info.footer = Some(md);
    Ok(info)
}

/// The entries of a table's `listed` files with footers deferred (see the module documentation):
/// read now are the Parquet files without a schema tag in their name, the first file of each
/// tag, and files whose footer `footers` holds already; the others are [`DataFile::deferred`],
/// with the schema of the file read for their tag (or read now too when that one failed).
fn read_deferring(
    lake: &Arc<RemoteLake>,
    footers: &FooterCache,
    dir: &Path,
    listed: &[(PathBuf, FileFormat, u64, SystemTime)],
) -> Vec<anyhow::Result<DataFile>> {
    let tags: Vec<Option<u64>> = listed
        .iter()
        .map(|(p, f, ..)| {
            let name = p.file_name()?.to_str()?;
            (*f == FileFormat::Parquet)
                .then(|| silt_lake::schema_tag::of_file_name(name))
                .flatten()
        })
        .collect();
    let mut first_of: std::collections::HashMap<u64, usize> = Default::default();
    let now: Vec<usize> = (0..listed.len())
        .filter(|&i| match tags[i] {
            None => true,
            Some(t) => *first_of.entry(t).or_insert(i) == i,
        })
        .collect();
    let mut out: Vec<Option<anyhow::Result<DataFile>>> = (0..listed.len()).map(|_| None).collect();
    let read = parallel(&now, REMOTE_READERS, 2, |&i| {
        read_remote_info(lake, footers, dir, &listed[i])
    });
    for (i, r) in now.into_iter().zip(read) {
        out[i] = Some(r);
    }
    let rest: Vec<usize> = (0..listed.len()).filter(|&i| out[i].is_none()).collect();
    let schema_of = |i: usize| -> Option<SchemaRef> {
        let first = first_of[&tags[i]?];
        out[first].as_ref()?.as_ref().ok().map(|f| f.schema.clone())
    };
    let later = parallel(&rest, REMOTE_READERS, 64, |&i| {
        let l @ (p, _, size, modified) = &listed[i];
        // A tag whose first file could not be read: its files are read one by one.
        let Some(schema) = schema_of(i) else {
            return read_remote_info(lake, footers, dir, l);
        };
        match footers.cached(lake, &lake.key_of(p)?, *size, *modified) {
            Some(md) => info_from_footer(dir, p, *size, *modified, md),
            None => Ok(deferred_info(dir, l, schema)),
        }
    });
    for (i, r) in rest.into_iter().zip(later) {
        out[i] = Some(r);
    }
    out.into_iter()
        .map(|r| r.expect("every file has an entry"))
        .collect()
}

/// A Parquet file's entry with its footer not read yet ([`DataFile::deferred`]).
fn deferred_info(
    dir: &Path,
    (p, f, size, modified): &(PathBuf, FileFormat, u64, SystemTime),
    schema: SchemaRef,
) -> DataFile {
    let mut d = located(dir, p, *f, *size, *modified, schema, 0, None);
    d.deferred = true;
    d
}

impl TableIndex {
    /// `files` (of this table) with the footers of the [`DataFile::deferred`] ones read, through
    /// [`Self::footers`], up to 16 at a time: each then has its row groups, column bounds and
    /// tighter time bounds, and its footer for DataFusion's metadata cache. A footer whose
    /// schema this table's columns do not cover (a file renamed by hand with another file's
    /// schema tag) is an error that says so, rather than a column silently left out.
    pub fn read_deferred<'a>(
        &self,
        files: Vec<std::borrow::Cow<'a, DataFile>>,
    ) -> anyhow::Result<Vec<std::borrow::Cow<'a, DataFile>>> {
        use std::borrow::Cow;
        let (Some(lake), Some(footers)) = (&self.remote, &self.footers) else {
            return Ok(files);
        };
        let at: Vec<usize> = (0..files.len()).filter(|&i| files[i].deferred).collect();
        let read = parallel(&at, REMOTE_READERS, 2, |&i| {
            let f = &files[i];
            read_remote_info(
                lake,
                footers,
                &self.dir,
                &(f.path.clone(), f.format, f.size, f.modified),
            )
        });
        let mut files = files;
        for (i, r) in at.into_iter().zip(read) {
            let was = &files[i];
            let mut f = r.with_context(|| {
                format!(
                    "cannot read the footer of {} (listed when the query started)",
                    was.path.display()
                )
            })?;
            if f.schema.fields() != was.schema.fields() && !self.covers(&f.schema) {
                anyhow::bail!(
                    "{} has columns its table's other files with the schema tag in its name do \
                     not have; a data file must not be renamed (rename it back, or without the \
                     `-s<tag>` part so that every query reads its footer)",
                    f.path.display()
                );
            }
            self.tighten_time(&mut f);
            files[i] = Cow::Owned(f);
        }
        Ok(files)
    }

    /// Whether a file of `schema` reads as this table's columns: unifying it changes nothing.
    fn covers(&self, schema: &Schema) -> bool {
        let u = nullable_schema(&silt_core::schema::unify_schemas(&self.file_schema, schema));
        u.fields() == self.file_schema.fields()
    }
}

/// `one` over `items` (in order), on up to `threads` threads when there are at least `min`.
fn parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    min: usize,
    one: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if items.len() < min || threads <= 1 {
        return items.iter().map(&one).collect();
    }
    let one = &one;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(items.len().div_ceil(threads))
            .map(|chunk| s.spawn(move || chunk.iter().map(one).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("footer reader thread panicked"))
            .collect()
    })
}

/// Makes a field and all fields nested in it nullable: a table's files may lack any of them.
pub fn nullable_field(f: &FieldRef) -> Field {
    let dt = nullable_type(f.data_type());
    f.as_ref().clone().with_data_type(dt).with_nullable(true)
}

fn nullable_type(t: &DataType) -> DataType {
    match t {
        DataType::Struct(fs) => {
            DataType::Struct(fs.iter().map(nullable_field).collect::<Vec<_>>().into())
        }
        DataType::List(e) => DataType::List(Arc::new(nullable_field(e))),
        DataType::LargeList(e) => DataType::LargeList(Arc::new(nullable_field(e))),
        other => other.clone(),
    }
}

fn read_file_info(table_dir: &Path, path: &Path, format: FileFormat) -> anyhow::Result<DataFile> {
    let file = File::open(path)?;
    let md = file.metadata()?;
    let modified = md.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    match format {
        FileFormat::Parquet => {
            let meta = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())?;
            Ok(parquet_info(table_dir, path, md.len(), modified, &meta))
        }
        FileFormat::Feather => {
            let mut reader = silt_lake::ipc::open(file)?;
            // DataFusion decodes the file's batches with arrow-ipc, which reserves what a
            // damaged compressed buffer claims (and aborts): such a file is left out here.
            reader.check_batches()?;
            Ok(feather_entry(table_dir, path, md.len(), modified, &reader))
        }
    }
}

/// Bytes of Parquet footers a remote lake's index keeps for DataFusion's metadata cache (whose
/// own default limit is 50 MiB); the rest are read again when a scan needs them.
const FOOTERS_KEPT: usize = 64 << 20;

/// A Parquet file's entry from its footer, read as `meta`.
fn parquet_info(
    table_dir: &Path,
    path: &Path,
    size: u64,
    modified: SystemTime,
    meta: &ArrowReaderMetadata,
) -> DataFile {
    located(
        table_dir,
        path,
        FileFormat::Parquet,
        size,
        modified,
        meta.schema().clone(),
        meta.metadata().num_row_groups(),
        Some(Arc::new(parquet_bounds(meta))),
    )
}

/// A Feather (Arrow IPC) file's entry, from its footer read by `reader`.
fn feather_entry<R: std::io::Read + std::io::Seek>(
    table_dir: &Path,
    path: &Path,
    size: u64,
    modified: SystemTime,
    reader: &silt_lake::ipc::Reader<R>,
) -> DataFile {
    located(
        table_dir,
        path,
        FileFormat::Feather,
        size,
        modified,
        reader.schema(),
        reader.num_batches(),
        None,
    )
}

/// A data file's entry from what its footer says (`schema`, `row_groups`, `bounds`) and what its
/// path says (partition values, time bounds of its directories).
#[allow(clippy::too_many_arguments)]
fn located(
    table_dir: &Path,
    path: &Path,
    format: FileFormat,
    size: u64,
    modified: SystemTime,
    schema: SchemaRef,
    row_groups: usize,
    bounds: Option<Arc<FileBounds>>,
) -> DataFile {
    let part = silt_lake::layout::partition_of(table_dir, path);
    let (dt, hour, default) = (part.dt, part.hour, part.null);
    let time = if default {
        TimeBounds::AllNull
    } else {
        match (dt, hour) {
            (Some(d), Some(h)) => {
                let lo = d as i64 * DAY_US + h as i64 * HOUR_US;
                TimeBounds::Range {
                    lo,
                    hi: lo + HOUR_US - 1,
                }
            }
            (Some(d), None) => {
                let lo = d as i64 * DAY_US;
                TimeBounds::Range {
                    lo,
                    hi: lo + DAY_US - 1,
                }
            }
            _ => match part.month {
                Some((y, m)) => {
                    let (first, next) = silt_lake::layout::month_days(y, m);
                    TimeBounds::Range {
                        lo: first * DAY_US,
                        hi: next * DAY_US - 1,
                    }
                }
                None => TimeBounds::Unknown,
            },
        }
    };
    DataFile {
        path: path.to_path_buf(),
        format,
        size,
        modified,
        dt: if default { None } else { dt },
        hour: if default { None } else { hour },
        month: part.month.map(|(y, m)| format!("{y:04}-{m:02}")),
        schema,
        row_groups,
        time,
        bounds,
        footer: None,
        deferred: false,
    }
}

/// The [`FileBounds`] of a Parquet file from its footer's row-group statistics.
fn parquet_bounds(meta: &ArrowReaderMetadata) -> FileBounds {
    let md = meta.metadata();
    let rgs = md.row_groups();
    let rows = rgs.iter().map(|rg| rg.num_rows().max(0) as u64).sum();
    let columns = meta
        .schema()
        .fields()
        .iter()
        .map(|f| column_bounds(meta, f, rows).ok().flatten())
        .collect();
    FileBounds { rows, columns }
}

/// `(min, max, nulls)` of the flat column `field` over every row group (see [`FileBounds`]).
fn column_bounds(
    meta: &ArrowReaderMetadata,
    field: &Field,
    rows: u64,
) -> anyhow::Result<Option<(ScalarValue, ScalarValue, u64)>> {
    let t = field.data_type();
    if !(t.is_primitive()
        || matches!(
            t,
            DataType::Boolean
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::BinaryView
        ))
    {
        return Ok(None);
    }
    let md = meta.metadata();
    let rgs = md.row_groups();
    let conv = StatisticsConverter::try_new(
        field.name(),
        meta.schema(),
        md.file_metadata().schema_descr(),
    )?;
    let (mins, maxes) = (conv.row_group_mins(rgs)?, conv.row_group_maxes(rgs)?);
    let nulls = conv.row_group_null_counts(rgs)?;
    let null = ScalarValue::try_from(t)?;
    let (mut lo, mut hi, mut all_nulls) = (null.clone(), null, 0u64);
    for (i, rg) in rgs.iter().enumerate() {
        if !nulls.is_valid(i) {
            return Ok(None);
        }
        let n = nulls.value(i);
        all_nulls += n;
        if n == rg.num_rows().max(0) as u64 {
            continue; // only nulls: no bounds needed
        }
        if !mins.is_valid(i) || !maxes.is_valid(i) {
            return Ok(None);
        }
        let (a, b) = (
            ScalarValue::try_from_array(&mins, i)?,
            ScalarValue::try_from_array(&maxes, i)?,
        );
        if lo.is_null() {
            (lo, hi) = (a, b);
            continue;
        }
        // Values that do not compare (NaN) leave the column without bounds.
        match (a.partial_cmp(&lo), b.partial_cmp(&hi)) {
            (Some(x), Some(y)) => {
                if x.is_lt() {
                    lo = a;
                }
                if y.is_gt() {
                    hi = b;
                }
            }
            _ => return Ok(None),
        }
    }
    if all_nulls > rows || bytes_of(&lo) > BOUND_BYTES || bytes_of(&hi) > BOUND_BYTES {
        return Ok(None);
    }
    Ok(Some((lo, hi, all_nulls)))
}

/// Bytes of a string or binary value (0 for other values).
fn bytes_of(v: &ScalarValue) -> usize {
    match v {
        ScalarValue::Utf8(Some(s))
        | ScalarValue::LargeUtf8(Some(s))
        | ScalarValue::Utf8View(Some(s)) => s.len(),
        ScalarValue::Binary(Some(b))
        | ScalarValue::LargeBinary(Some(b))
        | ScalarValue::BinaryView(Some(b)) => b.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
    use std::collections::HashMap;

    /// Writes a Parquet file of `rows` rows at `rel` below `root`: `ts` (the time column, in
    /// hour 17 of 2024-03-24), `x`, and `extra` when asked. Returns its path.
    fn write(root: &Path, rel: &str, rows: i64, extra: bool) -> PathBuf {
        let meta = HashMap::from([(silt_core::meta::TIME_COLUMN.to_string(), "ts".to_string())]);
        let mut fields = vec![
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                false,
            ),
            Field::new("x", DataType::Int64, false),
        ];
        let base = 1_711_299_600_000_000i64;
        let mut cols: Vec<arrow::array::ArrayRef> = vec![
            Arc::new(
                TimestampMicrosecondArray::from_iter_values((0..rows).map(|i| base + i))
                    .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from_iter_values(0..rows)),
        ];
        if extra {
            fields.push(Field::new("extra", DataType::Utf8, true));
            cols.push(Arc::new(StringArray::from_iter_values(
                (0..rows).map(|i| i.to_string()),
            )));
        }
        let schema = Arc::new(Schema::new_with_metadata(fields, meta));
        let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(File::create(&path).unwrap(), schema, None)
                .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        path
    }

    /// What a query depends on, per table.
    fn facts(i: &LakeIndex) -> Vec<String> {
        i.tables
            .values()
            .map(|t| {
                let files: Vec<String> = t
                    .files
                    .iter()
                    .map(|f| {
                        format!(
                            "{} {:?} {}",
                            f.path.display(),
                            f.time,
                            f.schema.fields().len()
                        )
                    })
                    .collect();
                format!(
                    "{} {:?} {:?} month={} pushdown={} {files:?}",
                    t.name, t.file_schema, t.time_column, t.has_month, t.pushdown_safe
                )
            })
            .collect()
    }

    /// A server adds each flush's files to its index ([`LakeIndex::with_files`]) without
    /// re-working the table's other files; the index it ends with is the one a fresh scan of
    /// the same lake makes: the same files, schema, time bounds and table facts, whether the
    /// new files have the table's columns, a new one, or replace a file already indexed.
    #[test]
    fn adding_files_gives_the_index_a_scan_gives() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let part = "t.a/dt=2024-03-24/hour=17";
        write(&root, &format!("{part}/a.parquet"), 5, false);
        write(&root, "t.b/dt=2024-03-24/hour=17/a.parquet", 5, false);
        let mut index = LakeIndex::scan(&root).unwrap();
        let untouched = index.tables[&TableName::parse("t.b").unwrap()].clone();

        // Same columns, then a new column, then a file read again, then a new table.
        let steps = [
            (format!("{part}/b.parquet"), 3, false),
            (format!("{part}/0.parquet"), 2, true),
            (format!("{part}/b.parquet"), 4, true),
            ("t.c/x.parquet".to_string(), 1, false),
        ];
        for (n, (rel, rows, extra)) in steps.iter().enumerate() {
            let path = write(&root, rel, *rows, *extra);
            index = index.with_files(&[path]).unwrap();
            assert_eq!(
                facts(&index),
                facts(&LakeIndex::scan(&root).unwrap()),
                "after step {n}"
            );
        }
        let a = &index.tables[&TableName::parse("t.a").unwrap()];
        assert_eq!(a.files.len(), 3);
        assert!(a.file_schema.field_with_name("extra").is_ok());
        assert_eq!(
            a.files.iter().map(|f| f.time).collect::<Vec<_>>(),
            [2, 5, 4]
                .map(|n| TimeBounds::Range {
                    lo: 1_711_299_600_000_000,
                    hi: 1_711_299_600_000_000 + n - 1
                })
                .to_vec()
        );
        // A table the files did not touch is shared, not copied.
        assert!(Arc::ptr_eq(
            &untouched,
            &index.tables[&TableName::parse("t.b").unwrap()]
        ));
    }

    /// A table whose every file a retention dropped stays in the index with the columns it had
    /// and no file, whether the index is scanned afresh (the schema the retention kept) or is a
    /// server's that took the files out; a file published into it later makes it what that
    /// file says, in both.
    #[test]
    fn a_table_retention_emptied_keeps_its_columns() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let paths = [
            write(&root, "t.a/dt=2024-03-24/hour=17/a.parquet", 5, false),
            write(&root, "t.a/dt=2024-03-24/hour=17/b.parquet", 3, true),
        ];
        let before = LakeIndex::scan(&root).unwrap();
        // Written by hand, not by an import: marked as a lake for the retention.
        std::fs::create_dir(root.join("_silt")).unwrap();
        let opts = silt_lake::retain::RetainOptions {
            keep: Some(std::time::Duration::from_secs(86400)),
            ..Default::default()
        };
        let rep = silt_lake::retain::retain(&root, &opts, SystemTime::now()).unwrap();
        assert_eq!(rep.dropped.len(), 1);
        assert!(paths.iter().all(|p| !p.exists()));

        let scanned = LakeIndex::scan(&root).unwrap();
        let served = before.without_files(&paths);
        assert_eq!(facts(&scanned), facts(&served));
        let t = &scanned.tables[&TableName::parse("t.a").unwrap()];
        assert!(t.files.is_empty());
        let names: Vec<&str> = t
            .file_schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        assert_eq!(names, ["ts", "x", "extra"]);
        assert_eq!(t.time_column.as_deref(), Some("ts"));

        let new = write(&root, "t.a/dt=2024-03-25/hour=01/c.parquet", 2, false);
        let fresh = LakeIndex::scan(&root).unwrap();
        assert_eq!(facts(&served.with_files(&[new]).unwrap()), facts(&fresh));
        let t = &fresh.tables[&TableName::parse("t.a").unwrap()];
        assert!(t.file_schema.field_with_name("extra").is_err());
    }
}
