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
//! Touches `<table>/_delta_log/` and reads the footers of the files it commits.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use arrow::datatypes::Schema;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};

use crate::config::StoreKind;
use crate::layout;

pub use silt_delta::delta::{spark_readable, DeltaLog, NewFile, LOG_DIR};

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

/// The Arrow schema in a Parquet file's footer.
fn file_schema(path: &Path) -> anyhow::Result<Arc<Schema>> {
    let f = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let md = ArrowReaderMetadata::load(&f, ArrowReaderOptions::new())
        .with_context(|| format!("cannot read the footer of {}", path.display()))?;
    Ok(md.schema().clone())
}

/// One schema for files of one table, or an error naming the column whose type differs.
fn merged_schema(table_dir: &Path, files: &[String]) -> anyhow::Result<Schema> {
    let mut merged = Schema::empty();
    for f in files {
        let s = file_schema(&table_dir.join(f))?;
        // Schema metadata (silt's time column, sort keys) is not part of a Delta schema, and
        // files written at different times may disagree on it.
        let s = Schema::new(s.fields().clone());
        merged = Schema::try_merge([merged, s]).with_context(|| {
            format!(
                "the Delta table {} cannot take {f}: a column's type differs from the table's \
                 other files (a Delta table's column keeps its type; import this data into a new table \
                 or lake)",
                table_dir.display()
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

fn check_parquet(table_dir: &Path, files: &[String]) -> anyhow::Result<()> {
    for f in files {
        if StoreKind::from_path(Path::new(f)) != Some(StoreKind::Parquet) {
            bail!(
                "{} is a Delta table, which holds Parquet files only, not {f} (import it with --store parquet)",
                table_dir.display()
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
    root: &Path,
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
            let table_dir = root.join(&table);
            let log = DeltaLog::open(&table_dir)?;
            if log.is_none() {
                if !create {
                    continue;
                }
                // A plain Hive table so far: its files become part of the new table.
                let ours: HashSet<String> = rels.iter().cloned().collect();
                for f in layout::data_files(&table_dir)? {
                    let rel = f
                        .path
                        .strip_prefix(&table_dir)
                        .unwrap_or(&f.path)
                        .to_string_lossy()
                        .into_owned();
                    if !ours.contains(&rel) && !in_flight.contains(&format!("{table}/{rel}")) {
                        rels.push(rel);
                    }
                }
            }
            check_parquet(&table_dir, &rels)?;
            let schema = merged_schema(&table_dir, &rels)?;
            let log = match log {
                Some(log) => log,
                None => {
                    let cols = rels
                        .first()
                        .map(|f| partition_columns(f))
                        .unwrap_or_default();
                    if let Some(other) = rels.iter().find(|r| partition_columns(r) != cols) {
                        bail!(
                            "cannot create a Delta log for {}: {} and {other} are partitioned differently",
                            table_dir.display(),
                            rels[0]
                        );
                    }
                    DeltaLog::create(&table_dir, &schema, &cols)
                        .with_context(|| format!("cannot create the Delta log of {table}"))?
                }
            };
            let new = rels
                .iter()
                .map(|r| NewFile::from_parquet(&table_dir, r))
                .collect::<anyhow::Result<Vec<_>>>()?;
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
pub fn uncommit(root: &Path, files: &[String], app: &str) -> anyhow::Result<()> {
    outside_runtime(|| {
        for (table, rels) in by_table(files)? {
            if let Some(log) = DeltaLog::open(&root.join(&table))? {
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
pub fn check_replaceable(root: &Path, inputs: &[String]) -> anyhow::Result<()> {
    outside_runtime(|| {
        for (table, rels) in by_table(inputs)? {
            if let Some(log) = DeltaLog::open(&root.join(&table))? {
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
    root: &Path,
    output: &str,
    inputs: &[String],
    app: &str,
) -> anyhow::Result<()> {
    outside_runtime(|| {
        let (table, out_rel) = split_table(output)?;
        let table_dir = root.join(table);
        let Some(log) = DeltaLog::open(&table_dir)? else {
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
        let added = NewFile::from_parquet(&table_dir, out_rel)?;
        log.replace(&removed, &[added], app)
            .with_context(|| format!("cannot commit the compaction of {table} to its Delta log"))?;
        Ok(())
    })
}

/// Before a partition of a Delta table is dropped: one commit removes its files from the log.
pub fn remove_partition(table_dir: &Path, partition_dir: &Path, app: &str) -> anyhow::Result<()> {
    outside_runtime(|| {
        let Some(log) = DeltaLog::open(table_dir)? else {
            return Ok(());
        };
        let prefix = partition_dir
            .strip_prefix(table_dir)
            .unwrap_or(partition_dir)
            .to_string_lossy()
            .into_owned();
        let prefix = format!("{prefix}/");
        let gone: Vec<String> = log
            .files()?
            .into_iter()
            .filter(|f| f.starts_with(&prefix))
            .collect();
        log.remove(&gone, app).with_context(|| {
            format!(
                "cannot remove {} from the Delta log",
                partition_dir.display()
            )
        })?;
        Ok(())
    })
}

/// The data files of a Delta table that its log does not name (paths below the table
/// directory), for `silt vacuum`.
pub fn unreferenced(table_dir: &Path) -> anyhow::Result<Option<Vec<PathBuf>>> {
    outside_runtime(|| {
        let Some(log) = DeltaLog::open(table_dir)? else {
            return Ok(None);
        };
        let live: HashSet<String> = log.files()?.into_iter().collect();
        let mut out = Vec::new();
        for f in layout::data_files(table_dir)? {
            let rel = f.path.strip_prefix(table_dir).unwrap_or(&f.path);
            if !live.contains(rel.to_string_lossy().as_ref()) {
                out.push(f.path);
            }
        }
        Ok(Some(out))
    })
}
