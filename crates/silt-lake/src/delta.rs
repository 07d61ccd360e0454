//! Tables with a Delta Lake log (`--table-format delta`): when silt commits to the log.
//!
//! The log itself (`<table>/_delta_log/`, commits, schema mapping, conflicts) is the
//! `silt_delta` crate. This module ties it to the lake's own protocols, so that the log always
//! names exactly the files silt's readers see, at most a moment late:
//!
//! - **Import and `silt serve` flushes** ([`crate::imports::Run::finish_with`]): the run's files
//!   are renamed into place first (journaled, as for any table), then committed to the log in one
//!   commit per table, and only then is the run recorded as done. A table gets its log when a run
//!   with `--table-format delta` first writes to it; a plain Hive table that already has files is
//!   converted then (its files go into that first commit). Once a table has a log every run
//!   commits to it, whatever its `--table-format`.
//! - **Recovery of a dead run** ([`crate::imports::ImportLog::recover`]): the files a dead run
//!   left are taken out of the log (a commit that removes them) before they are deleted, since
//!   the run's inputs are imported again in full.
//! - **Compaction** ([`crate::replace`]): before the merged file is renamed into place, its
//!   inputs must all be in the log ([`check_replaceable`]); after the rename, one commit swaps
//!   them (`dataChange=false`), and only then are the inputs deleted. Recovery of a committed
//!   replacement makes sure the log has it before it deletes inputs.
//! - **Retention** ([`crate::retain`]): one commit removes a partition's files before the
//!   partition moves to the trash.
//!
//! A Delta table holds Parquet files only, and its files never have Arrow `Null` columns (the
//! writer leaves them out, see [`silt_delta::spark_readable`]). A column whose type changes
//! between runs cannot be committed (Delta has no such change without rewriting the table): the
//! run fails with the column named.
//!
//! **Object-store lakes** (`--lake s3://…`) keep the log at the same place below the table's
//! prefix (`s3://bucket/prefix/zeek.conn/_delta_log/`), committed through the lake's own store
//! with put-if-absent (see [`silt_delta::delta::TableLocation`]). The hooks are the same, in the
//! object-store versions of those protocols: an import run's files are committed after they are
//! uploaded and before the run's `done` record ([`crate::remote::record`]); recovery of a dead
//! run takes its files out of the log before it deletes them; a compaction checks its inputs
//! before the output is uploaded and commits the swap after it, before the inputs are deleted
//! ([`crate::remote::replace`]); retention removes a partition's files from the log before it
//! writes the drop record ([`crate::remote::retain`]).
//!
//! Touches `<table>/_delta_log/` and reads the footers of the files it commits.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context};
use arrow::datatypes::Schema;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use silt_core::TableName;

use crate::config::StoreKind;
use crate::layout;
use crate::remote::footers::FooterCache;
use crate::remote::{LakeRoot, RemoteLake};

pub use silt_delta::delta::{spark_readable, DeltaLog, NewFile, TableLocation, LOG_DIR};

/// Runs `f` on a thread of its own when called from inside a tokio runtime (`silt serve`'s
/// start, its Kafka consumer): [`DeltaLog`] blocks on a runtime of its own, which tokio refuses
/// inside another.
fn outside_runtime<T: Send>(f: impl FnOnce() -> anyhow::Result<T> + Send) -> anyhow::Result<T> {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the Delta log thread panicked")))
    })
}

/// Whether the table in `table_dir` has a Delta log.
pub fn has_log(table_dir: &Path) -> bool {
    table_dir.join(LOG_DIR).is_dir()
}

/// The lake whose tables' logs the functions below keep: a directory or an object store.
#[derive(Clone, Copy)]
pub enum Lake<'a> {
    Dir(&'a Path),
    Remote(&'a RemoteLake),
}

impl<'a> Lake<'a> {
    /// The lake `root` names.
    pub fn of(root: &'a LakeRoot) -> Self {
        match root {
            LakeRoot::Dir(d) => Lake::Dir(d),
            LakeRoot::Remote(r) => Lake::Remote(r),
        }
    }

    /// Where the table directory `table` (`zeek.conn`) is.
    pub fn location(&self, table: &str) -> anyhow::Result<TableLocation> {
        Ok(match self {
            Lake::Dir(root) => TableLocation::Dir(root.join(table)),
            Lake::Remote(lake) => {
                let url = format!("{}/{table}", lake.url());
                TableLocation::Store {
                    store: lake.store(),
                    url: url::Url::parse(&url).with_context(|| format!("not a URL: {url}"))?,
                }
            }
        })
    }

    /// Whether `table` has a Delta log (in an object store: one listing request, however long
    /// the log is).
    pub fn has_log(&self, table: &str) -> anyhow::Result<bool> {
        match self {
            Lake::Dir(root) => Ok(has_log(&root.join(table))),
            Lake::Remote(lake) => lake.any_below(&format!("{table}/{LOG_DIR}")),
        }
    }

    /// The table's log, or `None` when it has none.
    ///
    /// In an object store the log is opened once per table and store and kept for the
    /// process: a fresh [`DeltaLog`] reads the table's snapshot from its last checkpoint on, up
    /// to 100 commit objects one request each (measured on MinIO: an import's commit took
    /// 0.27 s longer at version 99 than at version 1), while a kept one reads only the commits
    /// made since it last looked. `silt serve` commits every flush, so it reads each commit
    /// about once. A directory's log is cheap to read again and is not kept.
    fn open_log(&self, table: &str) -> anyhow::Result<Option<Arc<DeltaLog>>> {
        type Kept = std::sync::Mutex<HashMap<(String, usize), Arc<DeltaLog>>>;
        static KEPT: std::sync::OnceLock<Kept> = std::sync::OnceLock::new();
        let location = self.location(table)?;
        let key = match self {
            Lake::Dir(_) => None,
            // The store's address tells two stores with one URL apart (another endpoint or
            // credentials); the kept log holds the store, so the address is not reused.
            Lake::Remote(lake) => Some((
                location.to_string(),
                Arc::as_ptr(&lake.store()) as *const () as usize,
            )),
        };
        let kept = KEPT.get_or_init(Default::default);
        if !self.has_log(table)? {
            if let Some(k) = &key {
                kept.lock().unwrap_or_else(|e| e.into_inner()).remove(k);
            }
            return Ok(None);
        }
        let Some(key) = key else {
            return DeltaLog::at(&location).map(|l| Some(Arc::new(l)));
        };
        if let Some(l) = kept.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(Some(l.clone()));
        }
        let log = Arc::new(DeltaLog::at(&location)?);
        kept.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, log.clone());
        Ok(Some(log))
    }

    /// The data files of `table`, paths below the table directory.
    fn data_files(&self, table: &str) -> anyhow::Result<Vec<String>> {
        let (files, root) = match self {
            Lake::Dir(root) => (layout::data_files(&root.join(table))?, root.join(table)),
            Lake::Remote(lake) => {
                let name = TableName::parse(table)
                    .with_context(|| format!("{table} is not a table name"))?;
                (lake.data_files(&name)?, lake.root_path().join(table))
            }
        };
        Ok(files.into_iter().map(|f| below(&root, &f.path)).collect())
    }

    /// A Parquet file of `table` (`rel` below its directory), described for the log from its
    /// footer, and the file's Arrow schema.
    fn describe(&self, table: &str, rel: &str) -> anyhow::Result<(NewFile, Arc<Schema>)> {
        let (size, meta) = match self {
            Lake::Dir(root) => {
                let path = root.join(table).join(rel);
                let f = std::fs::File::open(&path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                let size = f.metadata()?.len();
                let meta = ArrowReaderMetadata::load(&f, ArrowReaderOptions::new())
                    .with_context(|| format!("cannot read the footer of {}", path.display()))?;
                (size, meta)
            }
            Lake::Remote(lake) => {
                let key = format!("{table}/{rel}");
                let (size, modified) = lake.head(&key)?;
                let footer = FooterCache::new(None)
                    .footer(lake, &lake.key(&key), size, modified)
                    .with_context(|| format!("cannot read the footer of {}/{key}", lake.url()))?;
                let meta = ArrowReaderMetadata::try_new(footer, ArrowReaderOptions::new())
                    .with_context(|| format!("cannot read the footer of {}/{key}", lake.url()))?;
                (size, meta)
            }
        };
        let schema = meta.schema().clone();
        Ok((NewFile::from_metadata(rel, size, &meta)?, schema))
    }
}

/// `path` below `root`, `/`-separated.
fn below(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .iter()
        .map(|c| c.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Splits a path relative to the lake root into the table directory's name and the path below
/// it (`zeek.conn/dt=2024-03-24/x.parquet` -> `("zeek.conn", "dt=2024-03-24/x.parquet")`).
fn split_table(rel: &str) -> anyhow::Result<(&str, &str)> {
    rel.split_once('/')
        .with_context(|| format!("{rel} is not a file below a table directory"))
}

/// Groups paths relative to the lake root by table directory (paths below it).
fn by_table(rels: &[String]) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rel in rels {
        let (t, below) = split_table(rel)?;
        out.entry(t.to_string())
            .or_default()
            .push(below.to_string());
    }
    Ok(out)
}

/// One schema for files of one table, or an error naming the column whose type differs.
fn merged_schema(
    location: &TableLocation,
    files: &[(NewFile, Arc<Schema>)],
) -> anyhow::Result<Schema> {
    let mut merged = Schema::empty();
    for (f, s) in files {
        // Schema metadata (silt's time column, sort keys) is not part of a Delta schema, and
        // files written at different times may disagree on it.
        let s = Schema::new(s.fields().clone());
        merged = Schema::try_merge([merged, s]).with_context(|| {
            format!(
                "the Delta table {location} cannot take {}: a column's type differs from the \
                 table's other files (a Delta table's column keeps its type; import this data \
                 into a new table or lake)",
                f.path
            )
        })?;
    }
    Ok(merged)
}

/// The partition columns of a file's path below its table directory, in order.
fn partition_columns(rel: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = rel.split('/').collect();
    parts.pop();
    parts
        .into_iter()
        .filter_map(|p| p.split_once('=').map(|(k, _)| k))
        .collect()
}

fn check_parquet(location: &TableLocation, files: &[String]) -> anyhow::Result<()> {
    for f in files {
        if StoreKind::from_path(Path::new(f)) != Some(StoreKind::Parquet) {
            bail!(
                "{location} is a Delta table, which holds Parquet files only, not {f} (import it with --store parquet)"
            );
        }
    }
    Ok(())
}

/// Commits the files a run published (paths relative to the lake root, already in place) to the
/// logs of their tables: tables that have a log, and with `create` also those that have none yet
/// (their log is created, and the files they already hold, apart from `in_flight` ones of other
/// runs, are committed with the run's). `app` names the writer in the log (`silt import`).
pub fn commit_published(
    lake: Lake,
    files: &[String],
    create: bool,
    in_flight: &HashSet<String>,
    app: &str,
) -> anyhow::Result<()> {
    outside_runtime(|| {
        for (table, mut rels) in by_table(files)? {
            if layout::is_hidden(&table) {
                // `_rejects/` and other non-table files of a run.
                continue;
            }
            let location = lake.location(&table)?;
            let log = lake.open_log(&table)?;
            if log.is_none() {
                if !create {
                    continue;
                }
                // A plain Hive table so far: its files become part of the new table.
                let ours: HashSet<String> = rels.iter().cloned().collect();
                for rel in lake.data_files(&table)? {
                    if !ours.contains(&rel) && !in_flight.contains(&format!("{table}/{rel}")) {
                        rels.push(rel);
                    }
                }
            }
            check_parquet(&location, &rels)?;
            let described = rels
                .iter()
                .map(|r| lake.describe(&table, r))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let schema = merged_schema(&location, &described)?;
            let log = match log {
                Some(log) => log,
                None => Arc::new({
                    let cols = rels
                        .first()
                        .map(|f| partition_columns(f))
                        .unwrap_or_default();
                    if let Some(other) = rels.iter().find(|r| partition_columns(r) != cols) {
                        bail!(
                            "cannot create a Delta log for {location}: {} and {other} are partitioned differently",
                            rels[0]
                        );
                    }
                    DeltaLog::create_at(&location, &schema, &cols)
                        .with_context(|| format!("cannot create the Delta log of {table}"))?
                }),
            };
            let new: Vec<NewFile> = described.into_iter().map(|(f, _)| f).collect();
            log.append(&new, &schema, app).with_context(|| {
                format!(
                    "cannot commit {} files to the Delta log of {table}",
                    new.len()
                )
            })?;
        }
        Ok(())
    })
}

/// Takes files (paths relative to the lake root) out of the logs of their tables, where they
/// are in one (recovery of a dead run, before its files are deleted).
pub fn uncommit(lake: Lake, files: &[String], app: &str) -> anyhow::Result<()> {
    outside_runtime(|| {
        for (table, rels) in by_table(files)? {
            if layout::is_hidden(&table) {
                continue;
            }
            if let Some(log) = lake.open_log(&table)? {
                log.remove(&rels, app).with_context(|| {
                    format!("cannot remove files from the Delta log of {table}")
                })?;
            }
        }
        Ok(())
    })
}

/// For a compaction of a Delta table: fails unless every input (relative to the lake root) is
/// in the log, so that the swap can be committed once the output is in place.
pub fn check_replaceable(lake: Lake, inputs: &[String]) -> anyhow::Result<()> {
    outside_runtime(|| {
        for (table, rels) in by_table(inputs)? {
            if let Some(log) = lake.open_log(&table)? {
                let live: HashSet<String> = log.files()?.into_iter().collect();
                if let Some(missing) = rels.iter().find(|r| !live.contains(*r)) {
                    bail!(
                        "cannot compact {table}/{missing}: the file is not in the table's Delta log \
                         (run `silt vacuum` to remove files the log does not name)"
                    );
                }
            }
        }
        Ok(())
    })
}

/// Commits a replacement (paths relative to the lake root) whose output is in place, unless the
/// log already has it (the output is in the log, or none of the inputs is any more); does
/// nothing for a table without a log. Fails when only some inputs are still in the log.
pub fn commit_replacement(
    lake: Lake,
    output: &str,
    inputs: &[String],
    app: &str,
) -> anyhow::Result<()> {
    outside_runtime(|| {
        let (table, out_rel) = split_table(output)?;
        let Some(log) = lake.open_log(table)? else {
            return Ok(());
        };
        let live: HashSet<String> = log.files()?.into_iter().collect();
        if live.contains(out_rel) {
            return Ok(());
        }
        let removed = by_table(inputs)?.remove(table).unwrap_or_default();
        if !removed.iter().any(|r| live.contains(r)) {
            // Committed before, and the output itself replaced since (a later compaction that
            // took it as an input): nothing left to swap.
            return Ok(());
        }
        let (added, _) = lake.describe(table, out_rel)?;
        log.replace(&removed, &[added], app)
            .with_context(|| format!("cannot commit the compaction of {table} to its Delta log"))?;
        Ok(())
    })
}

/// Before a partition of a Delta table is dropped: one commit removes the files below
/// `partition` (relative to the table directory, `dt=2024-03-24`) from the table's log.
pub fn remove_partition(lake: Lake, table: &str, partition: &str, app: &str) -> anyhow::Result<()> {
    outside_runtime(|| {
        let Some(log) = lake.open_log(table)? else {
            return Ok(());
        };
        let prefix = format!("{}/", partition.trim_end_matches('/'));
        let gone: Vec<String> = log
            .files()?
            .into_iter()
            .filter(|f| f.starts_with(&prefix))
            .collect();
        log.remove(&gone, app)
            .with_context(|| format!("cannot remove {table}/{partition} from the Delta log"))?;
        Ok(())
    })
}

/// The data files of a Delta table that its log does not name (paths relative to the lake
/// root), for `silt vacuum`; `None` for a table without a log.
pub fn unreferenced(lake: Lake, table: &str) -> anyhow::Result<Option<Vec<String>>> {
    outside_runtime(|| {
        let Some(log) = lake.open_log(table)? else {
            return Ok(None);
        };
        let live: HashSet<String> = log.files()?.into_iter().collect();
        Ok(Some(
            lake.data_files(table)?
                .into_iter()
                .filter(|rel| !live.contains(rel))
                .map(|rel| format!("{table}/{rel}"))
                .collect(),
        ))
    })
}

/// The tables of an object-store lake that have a Delta log (one listing request each).
pub fn remote_delta_tables(lake: &RemoteLake) -> anyhow::Result<Vec<TableName>> {
    let mut out = Vec::new();
    for t in lake.tables()? {
        if Lake::Remote(lake).has_log(&t.to_string())? {
            out.push(t);
        }
    }
    Ok(out)
}
