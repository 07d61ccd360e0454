//! `silt verify`: every data file of a lake checked, so that damage is found before a query
//! reads it as data or compaction rewrites it.
//!
//! Each file's sum ([`crate::checksum`]) is checked; a file without one (written by another tool,
//! or by silt before sums existed) is decoded whole instead, every batch validated, as compaction
//! reads it ([`crate::compact`]); with [`VerifyOptions::decode`] every file is also decoded. A file
//! that vanished while the lake was walked (compaction or retention removed it) is counted apart,
//! not as damage.
//!
//! Reads only: it takes no lock and changes nothing, so it can run beside imports, a server and
//! compaction. Local lakes and object-store lakes ([`crate::remote`]) are checked alike.
//!
//! Touches nothing; reads the lake's data files (and, for an object-store lake, stages large
//! objects in a temporary directory while they are read).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use silt_core::TableName;

use crate::checksum::{self, Check};
use crate::compact::{decode_file, Source};
use crate::layout::{self, DataFile};
use crate::remote::RemoteLake;

/// What to check.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// Only these tables (all when empty).
    pub tables: Vec<TableName>,
    /// Decode every file whole, not only those without a sum.
    pub decode: bool,
}

/// What checking one file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Its sum matched (and, when asked, it decoded).
    Summed,
    /// It has no sum and decoded whole.
    Decoded,
    /// It is damaged or could not be read: why.
    Failed(String),
    /// It was removed while the lake was walked.
    Gone,
}

/// One file checked.
#[derive(Debug, Clone)]
pub struct FileResult {
    pub table: TableName,
    pub path: PathBuf,
    pub bytes: u64,
    pub outcome: Outcome,
}

/// A table's files by outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableCounts {
    pub files: u64,
    pub bytes: u64,
    pub summed: u64,
    pub decoded: u64,
    pub failed: u64,
    pub gone: u64,
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub tables: BTreeMap<TableName, TableCounts>,
    /// The files that failed, with why, in the order they were checked.
    pub failed: Vec<(PathBuf, String)>,
    pub seconds: f64,
}

impl VerifyReport {
    pub fn total(&self) -> TableCounts {
        let mut t = TableCounts::default();
        for c in self.tables.values() {
            t.files += c.files;
            t.bytes += c.bytes;
            t.summed += c.summed;
            t.decoded += c.decoded;
            t.failed += c.failed;
            t.gone += c.gone;
        }
        t
    }
}

/// A lake's files as verification reads them.
trait Lake {
    fn tables(&self) -> anyhow::Result<Vec<TableName>>;
    fn data_files(&self, t: &TableName) -> anyhow::Result<Vec<DataFile>>;
    /// The file for reading; `None` when it is gone.
    fn open(&self, f: &DataFile) -> anyhow::Result<Option<Source>>;
}

struct Local<'a>(&'a Path);

impl Lake for Local<'_> {
    fn tables(&self) -> anyhow::Result<Vec<TableName>> {
        layout::tables(self.0)
    }

    fn data_files(&self, t: &TableName) -> anyhow::Result<Vec<DataFile>> {
        layout::data_files(&self.0.join(t.to_string()))
    }

    fn open(&self, f: &DataFile) -> anyhow::Result<Option<Source>> {
        // Not opened unless it is a regular file: opening a FIFO would wait for a writer.
        match std::fs::metadata(&f.path) {
            Ok(m) if !m.is_file() => anyhow::bail!("it is not a regular file"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return match std::fs::symlink_metadata(&f.path) {
                    Ok(_) => Err(anyhow::anyhow!("it is a symbolic link to nothing")),
                    Err(_) => Ok(None),
                };
            }
            _ => {}
        }
        match std::fs::File::open(&f.path) {
            Ok(file) => Ok(Some(Source::File(file))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow::Error::new(e).context("cannot open it")),
        }
    }
}

struct Remote<'a> {
    lake: &'a Arc<RemoteLake>,
    staging: crate::scratch::ScratchDir,
}

impl Lake for Remote<'_> {
    fn tables(&self) -> anyhow::Result<Vec<TableName>> {
        self.lake.tables()
    }

    fn data_files(&self, t: &TableName) -> anyhow::Result<Vec<DataFile>> {
        Ok(self
            .lake
            .data_files_listed(t)?
            .into_iter()
            .map(|(f, _)| f)
            .collect())
    }

    fn open(&self, f: &DataFile) -> anyhow::Result<Option<Source>> {
        crate::remote::compact::open_object(
            self.lake,
            self.staging.path(),
            crate::remote::compact::WHOLE,
            f,
        )
    }
}

/// Verifies the local lake `root`; `on_file` hears of each file once it is checked.
pub fn verify(
    root: &Path,
    opts: &VerifyOptions,
    on_file: &mut dyn FnMut(&FileResult),
) -> anyhow::Result<VerifyReport> {
    if !layout::require_lake_dir(root)? {
        return Ok(VerifyReport::default());
    }
    run(&Local(root), opts, on_file)
}

/// Verifies the object-store lake `lake` (see [`verify`]).
pub fn verify_remote(
    lake: &Arc<RemoteLake>,
    opts: &VerifyOptions,
    on_file: &mut dyn FnMut(&FileResult),
) -> anyhow::Result<VerifyReport> {
    let staging = crate::scratch::ScratchDir::new(None, "silt-verify-")?;
    run(&Remote { lake, staging }, opts, on_file)
}

fn run(
    lake: &dyn Lake,
    opts: &VerifyOptions,
    on_file: &mut dyn FnMut(&FileResult),
) -> anyhow::Result<VerifyReport> {
    let started = Instant::now();
    let all = lake.tables()?;
    for t in &opts.tables {
        anyhow::ensure!(
            all.contains(t),
            "the lake has no table {t} (its tables: {})",
            all.iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let mut report = VerifyReport::default();
    for table in all
        .into_iter()
        .filter(|t| opts.tables.is_empty() || opts.tables.contains(t))
    {
        let counts = report.tables.entry(table.clone()).or_default();
        for f in lake.data_files(&table)? {
            let outcome = match lake.open(&f) {
                Ok(Some(src)) => check_file(src, &f, opts.decode),
                Ok(None) => Outcome::Gone,
                Err(e) => Outcome::Failed(format!("{e:#}")),
            };
            counts.files += 1;
            counts.bytes += f.bytes;
            match &outcome {
                Outcome::Summed => counts.summed += 1,
                Outcome::Decoded => counts.decoded += 1,
                Outcome::Failed(why) => {
                    counts.failed += 1;
                    report.failed.push((f.path.clone(), why.clone()));
                }
                Outcome::Gone => counts.gone += 1,
            }
            on_file(&FileResult {
                table: table.clone(),
                path: f.path,
                bytes: f.bytes,
                outcome,
            });
        }
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Checks one opened file: its sum, and decodes it when it has none or `decode`.
fn check_file(src: Source, f: &DataFile, decode: bool) -> Outcome {
    let summed = match checksum::check(&src, f.store) {
        Ok(Check::Match) => true,
        Ok(Check::Absent | Check::Foreign(_)) => false,
        Ok(Check::Damaged(why)) => return Outcome::Failed(why),
        Err(e) => return Outcome::Failed(format!("its footer does not read: {e:#}")),
    };
    if summed && !decode {
        return Outcome::Summed;
    }
    match decode_file(src, f.store, &mut |_| Ok(())) {
        Ok(_) if summed => Outcome::Summed,
        Ok(_) => Outcome::Decoded,
        Err(e) => Outcome::Failed(format!("its data does not decode: {e:#}")),
    }
}
