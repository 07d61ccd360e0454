//! Which data file a failed query could not decode.
//!
//! A Parquet file whose footer reads but whose pages do not (blocks zeroed by a crash of the
//! disk below it, bytes overwritten) passes every check made when a lake is opened (footers
//! only), and a query that reaches its pages fails with DataFusion's error, which names no file:
//! `Parquet error: Required field type_ is missing`. After such a failure ([`decode_failure`]),
//! [`explain_damage`] reads the files of the tables the SQL names again, one by one, every
//! column of every row group, until it has found the damaged ones or spent its time budget, and
//! says which file it is and what to do with it.
//!
//! Reads only the data files of a local lake; an object-store lake is not read again.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use silt_core::TableName;
use silt_lake::StoreKind;

/// Whether `e` is a failure to decode data that a damaged file would give (and that no SQL
/// mistake gives): Parquet and Arrow IPC decoding errors.
pub fn decode_failure(e: &anyhow::Error) -> bool {
    let msg = format!("{e:#}");
    [
        "Parquet error",
        "Parquet argument error",
        "Ipc error",
        // An object-store lake's Feather file refused by `crate::feather_check`.
        "damaged Arrow IPC data in",
        "Data corruption",
        "ZSTD",
        "zstd",
        // Arrow's checks of the buffers it read (a damaged Feather file).
        "Arrow error: Invalid argument error",
        "Offset invariant",
        // A reader's panic on a damaged page (caught by silt or by DataFusion's tasks).
        "panicked",
    ]
    .iter()
    .any(|k| msg.contains(k))
}

/// A file that did not decode, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damaged {
    pub path: PathBuf,
    pub error: String,
}

/// What [`find_damaged`] found.
#[derive(Debug, Default)]
pub struct DamageCheck {
    pub damaged: Vec<Damaged>,
    /// Files read whole.
    pub checked: usize,
    /// Files of the tables in all.
    pub files: usize,
}

/// Reads every data file of `tables` (every table when `None`) under the local lake `lake`
/// whole, until `budget` is spent; returns the files that do not decode.
pub fn find_damaged(
    lake: &Path,
    tables: Option<&BTreeSet<TableName>>,
    budget: Duration,
) -> anyhow::Result<DamageCheck> {
    let started = Instant::now();
    let names: Vec<TableName> = match tables {
        Some(t) => t.iter().cloned().collect(),
        None => silt_lake::layout::tables(lake)?,
    };
    let mut files = Vec::new();
    for name in names {
        files.extend(silt_lake::layout::data_files(&lake.join(name.to_string()))?);
    }
    let mut check = DamageCheck {
        files: files.len(),
        ..Default::default()
    };
    for f in files {
        if started.elapsed() >= budget {
            break;
        }
        if let Err(e) = read_whole(&f.path, f.store) {
            check.damaged.push(Damaged {
                path: f.path,
                error: format!("{e:#}"),
            });
        }
        check.checked += 1;
    }
    Ok(check)
}

/// Decodes every row of the file at `path` as compaction reads it
/// ([`silt_lake::compact::read_whole`]): `Err` when its data does not decode. A file whose
/// footer does not read is `Ok`: opening the lake skipped it already, with a warning.
fn read_whole(path: &Path, store: StoreKind) -> anyhow::Result<()> {
    let Ok(file) = File::open(path) else {
        return Ok(());
    };
    let footer = match store {
        StoreKind::Parquet => {
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).is_ok()
        }
        StoreKind::Feather => silt_lake::ipc::open(file).is_ok(),
    };
    if !footer {
        return Ok(());
    }
    silt_lake::compact::read_whole(path, store).map(|_| ())
}

/// `e` (a query over the local lake `lake` that failed decoding data, see [`decode_failure`])
/// with the damaged files of the tables `sql` names, found by [`find_damaged`] within
/// `budget`, and what to do; `e` as it is when it is no such failure or the lake is not local.
pub fn explain_damage(e: anyhow::Error, lake: &Path, sql: &str, budget: Duration) -> anyhow::Error {
    if !decode_failure(&e) || !lake.is_dir() {
        return e;
    }
    let tables = crate::tables_named(sql);
    let check = match find_damaged(lake, tables.as_ref(), budget) {
        Ok(c) => c,
        Err(_) => return e,
    };
    let found = match check.damaged.as_slice() {
        [] if check.checked < check.files => format!(
            "no damaged file among the first {} of the {} files the query's tables have \
             (checked for {} s); `silt compact` reads every file and names one that is damaged",
            check.checked,
            check.files,
            budget.as_secs()
        ),
        [] => return e,
        [one] => format!(
            "the file {} is damaged: its footer reads, but its data does not{}; move it out of \
             the lake (or restore it from a copy) and run the query again",
            one.path.display(),
            // The query's own error follows; the file's is told only when it differs.
            if format!("{e:#}").contains(&one.error) {
                String::new()
            } else {
                format!(" ({})", one.error)
            }
        ),
        many => {
            let shown: Vec<String> = many
                .iter()
                .take(5)
                .map(|d| format!("{} ({})", d.path.display(), d.error))
                .collect();
            format!(
                "{} files are damaged: their footers read, but their data does not: {}{}; move \
                 them out of the lake (or restore them from a copy) and run the query again",
                many.len(),
                shown.join("; "),
                if many.len() > 5 { "; ..." } else { "" }
            )
        }
    };
    e.context(found)
}
