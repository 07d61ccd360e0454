//! Replacing and dropping files in an object-store lake, so that silt's readers never see a
//! compaction's output together with its inputs, nor part of a partition that retention drops.
//!
//! An object store has no rename, so the local protocol ([`crate::replace`]) changes in one
//! place: the output is not renamed into place but uploaded to its final key, which S3 makes
//! visible whole and at once. The steps of a compaction:
//! 1. the merged file is written and sealed in a local staging directory;
//! 2. the replacement record `_silt/replace/<output stem>.json` (output and inputs, keys relative
//!    to the lake) is written;
//! 3. the output is uploaded: **the commit point**;
//! 4. the inputs are deleted;
//! 5. the record stays for the grace period, then [`recover`] removes it.
//!
//! Retention writes a *drop record* `_silt/drop/<id>.json` naming the partition
//! (`zeek.conn/dt=2024-01-01`) before it deletes the partition's objects; the record also stays
//! for the grace period.
//!
//! Readers ([`Hidden`]: `silt query`, `silt tables`, compaction's own planning) list the data
//! first and the records after, and leave out the inputs of every replacement whose output they
//! listed, and every object under a dropped partition that is not newer than its drop record (a
//! later import into the same partition stays visible). Records are written before the change
//! they announce and outlive it, so a reader that listed some of the old objects always finds
//! the record.
//!
//! [`recover`] (under the lake's [`super::lock::RemoteLock`]) finishes what a crash left: a
//! replacement whose output exists has its remaining inputs deleted, one whose output does not
//! exist died before its commit and its record goes (the inputs stay); a drop record has the
//! rest of its partition deleted. Records past the grace period are removed.
//!
//! Other engines (DuckDB, Spark and Athena globs) do not read the records: during a compaction
//! they see the output and the inputs together between steps 3 and 4 (milliseconds, or until
//! the next maintenance command after a crash there), and during a retention the partition's
//! objects disappear one request at a time.
//!
//! In a table with a Delta log ([`crate::delta`]), step 3 also checks that the log names every
//! input (before the upload), and the swap is committed to the log between steps 3 and 4 (also
//! by [`recover`], before it deletes the inputs of a replacement whose output exists).
//!
//! Touches `_silt/replace/`, `_silt/drop/`, the objects records name, the objects under
//! dropped partitions, and the Delta logs of the tables it replaces files in.

use std::collections::HashSet;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::lock::{LockWatch, RemoteLock};
use super::{Listed, RemoteLake};
use crate::delta::Lake;
use crate::publish::{PendingFile, PublishedFile, Publisher};
use crate::replace::{self, failpoint, Recovery, Replacement, Written, REPLACE_DIR};

/// Directory of the drop records, below the lake's prefix.
pub const DROP_DIR: &str = "_silt/drop";

/// A partition retention is dropping.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DropRecord {
    pub table: String,
    /// The partition, relative to the lake (`zeek.conn/dt=2024-01-01`).
    pub partition: String,
    /// RFC 3339 time the record was written.
    pub created: String,
}

/// Writes the drop record of `partition` (relative to the lake); returns its key.
pub fn record_drop(lake: &RemoteLake, table: &str, partition: &str) -> anyhow::Result<String> {
    let rec = DropRecord {
        table: table.to_string(),
        partition: partition.to_string(),
        created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    };
    let rel = format!("{DROP_DIR}/{}.json", uuid::Uuid::new_v4().simple());
    lake.put(&rel, serde_json::to_vec_pretty(&rec)?)
        .context("cannot write the drop record")?;
    Ok(rel)
}

/// The records in `dir` with each object's listing entry; records that vanish or do not parse
/// are left out (a record removed meanwhile hides nothing any more).
fn records<T: serde::de::DeserializeOwned>(
    lake: &RemoteLake,
    dir: &str,
) -> anyhow::Result<Vec<(Listed, T)>> {
    let listed: Vec<Listed> = lake
        .list(dir)?
        .into_iter()
        .filter(|o| o.rel.ends_with(".json"))
        .collect();
    let rels: Vec<String> = listed.iter().map(|o| o.rel.clone()).collect();
    let bodies = lake.get_many(&rels)?;
    Ok(listed
        .into_iter()
        .zip(bodies)
        .filter_map(|(o, b)| Some((o, serde_json::from_slice(&b?).ok()?)))
        .collect())
}

/// What silt's readers leave out of a listing (see the module documentation).
#[derive(Debug, Default)]
pub struct Hidden {
    /// Inputs of committed replacements (relative to the lake).
    replaced: HashSet<String>,
    /// Dropped partitions (`table/dt=…/`) and their records' times.
    dropped: Vec<(String, SystemTime)>,
}

impl Hidden {
    /// Reads the records; call it after listing the data, with what that listing found.
    pub fn load(lake: &RemoteLake, listed: &[Listed]) -> anyhow::Result<Self> {
        let names: HashSet<&str> = listed.iter().map(|o| o.rel.as_str()).collect();
        let mut h = Hidden::default();
        for (_, r) in records::<Replacement>(lake, REPLACE_DIR)? {
            if names.contains(r.output.as_str()) {
                h.replaced.extend(r.inputs);
            }
        }
        for (o, d) in records::<DropRecord>(lake, DROP_DIR)? {
            h.dropped.push((
                format!("{}/", d.partition.trim_end_matches('/')),
                o.modified,
            ));
        }
        Ok(h)
    }

    /// Whether the listed object `o` is left out.
    pub fn hides(&self, o: &Listed) -> bool {
        self.replaced.contains(&o.rel)
            || self
                .dropped
                .iter()
                .any(|(p, at)| o.rel.starts_with(p.as_str()) && o.modified <= *at)
    }

    /// Whether nothing is hidden.
    pub fn is_empty(&self) -> bool {
        self.replaced.is_empty() && self.dropped.is_empty()
    }
}

/// What [`recover`] did besides the replacements: drop records finished and removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Drops {
    /// Drop records whose partitions still had objects (deleted now).
    pub finished: usize,
    pub objects: usize,
    /// Drop records past the grace period, removed.
    pub expired: usize,
}

/// Finishes or undoes what crashed compactions and retentions left, and removes records older
/// than `grace` (see the module documentation). Needs the lock, so it never touches a live one.
pub fn recover(lock: &RemoteLock, grace: Duration) -> anyhow::Result<(Recovery, Drops)> {
    recover_or_survey(lock, grace, false)
}

/// What [`recover`] would do now, changing nothing (`silt vacuum --dry-run`).
pub fn survey(lock: &RemoteLock, grace: Duration) -> anyhow::Result<(Recovery, Drops)> {
    recover_or_survey(lock, grace, true)
}

/// [`survey`] when `dry`, else [`recover`].
pub fn recover_or_survey(
    lock: &RemoteLock,
    grace: Duration,
    dry: bool,
) -> anyhow::Result<(Recovery, Drops)> {
    let lake = lock.lake();
    let now = SystemTime::now();
    let delete = |rel: &str| if dry { Ok(()) } else { lake.delete(rel) };
    let mut rep = Recovery::default();
    for (o, r) in records::<Replacement>(lake, REPLACE_DIR)? {
        lock.check()?;
        if lake.exists(&r.output)? {
            let n = if dry {
                there(lake, &r.inputs)?.len()
            } else {
                // A Delta table's log must have the swap before its inputs go.
                crate::delta::commit_replacement(
                    Lake::Remote(lake),
                    &r.output,
                    &r.inputs,
                    "silt recovery",
                )?;
                remove_inputs(lake, &r)?
            };
            if n > 0 {
                rep.completed += 1;
                rep.inputs_removed += n;
            }
            if now.duration_since(o.modified).unwrap_or_default() >= grace {
                delete(&o.rel)?;
                rep.expired += 1;
            }
        } else {
            // Neither output nor inputs (retention dropped the partition since): an old
            // record, nothing to undo.
            if there(lake, &r.inputs)?.is_empty() {
                rep.expired += 1;
            } else {
                rep.abandoned += 1;
            }
            delete(&o.rel)?;
        }
    }
    let mut drops = Drops::default();
    for (o, d) in records::<DropRecord>(lake, DROP_DIR)? {
        lock.check()?;
        let doomed = partition_upto(lake, &d.partition, o.modified)?;
        if !dry {
            delete_objects(lake, &d.partition, &doomed)?;
        }
        if !doomed.is_empty() {
            drops.finished += 1;
            drops.objects += doomed.len();
        }
        if now.duration_since(o.modified).unwrap_or_default() >= grace {
            delete(&o.rel)?;
            drops.expired += 1;
        }
    }
    Ok((rep, drops))
}

/// Runs [`recover`] when records are there and no maintenance command is running (an import
/// calls this first, so that other engines' globs see the lake right again after a crash).
pub fn recover_if_idle(
    lake: &Arc<RemoteLake>,
    grace: Duration,
) -> anyhow::Result<Option<Recovery>> {
    if lake.list(REPLACE_DIR)?.is_empty() && lake.list(DROP_DIR)?.is_empty() {
        return Ok(None);
    }
    match RemoteLock::try_acquire(lake, "silt import (recovery)")? {
        Some(lock) => Ok(Some(recover(&lock, grace)?.0)),
        None => Ok(None),
    }
}

/// Deletes the objects under `partition` (relative to the lake) not newer than `upto`; returns
/// how many there were.
pub fn delete_partition(
    lake: &RemoteLake,
    partition: &str,
    upto: SystemTime,
) -> anyhow::Result<usize> {
    let doomed = partition_upto(lake, partition, upto)?;
    delete_objects(lake, partition, &doomed)?;
    Ok(doomed.len())
}

/// The objects under `partition` not newer than `upto`.
fn partition_upto(
    lake: &RemoteLake,
    partition: &str,
    upto: SystemTime,
) -> anyhow::Result<Vec<String>> {
    Ok(lake
        .list(partition)?
        .into_iter()
        .filter(|o| o.modified <= upto)
        .map(|o| o.rel)
        .collect())
}

fn delete_objects(lake: &RemoteLake, partition: &str, doomed: &[String]) -> anyhow::Result<()> {
    lake.delete_many(doomed)
        .with_context(|| format!("cannot delete the partition {}/{partition}", lake.url()))
}

/// Those of `rels` that exist.
fn there(lake: &RemoteLake, rels: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for i in rels {
        if lake.exists(i)? {
            out.push(i.clone());
        }
    }
    Ok(out)
}

/// Deletes the inputs of a committed replacement (step 4); returns how many were there.
pub fn remove_inputs(lake: &RemoteLake, rec: &Replacement) -> anyhow::Result<usize> {
    let there = there(lake, &rec.inputs)?;
    for i in &there {
        lake.delete(i)?;
        failpoint("compact-removing");
    }
    Ok(there.len())
}

/// The [`Publisher`] of one compaction output in an object-store lake: checks the row count,
/// writes the replacement record, then uploads the output from the staging directory (the
/// commit).
pub struct RemoteReplacingPublisher {
    lake: Arc<RemoteLake>,
    lock: LockWatch,
    staging: PathBuf,
    table: String,
    inputs: Vec<String>,
    expected_rows: Arc<AtomicU64>,
    pub written: Written,
}

impl RemoteReplacingPublisher {
    /// `inputs` are paths below the lake's root path; the output is written below `staging`,
    /// at the place it takes below the lake.
    pub fn new(
        lock: &RemoteLock,
        staging: &Path,
        table: &str,
        inputs: &[PathBuf],
        expected_rows: Arc<AtomicU64>,
    ) -> anyhow::Result<Self> {
        let lake = lock.lake().clone();
        let inputs = inputs
            .iter()
            .map(|p| lake.rel_of(p))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            lake,
            lock: lock.watch(),
            staging: staging.to_path_buf(),
            table: table.to_string(),
            inputs,
            expected_rows,
            written: Arc::default(),
        })
    }
}

impl Publisher for RemoteReplacingPublisher {
    fn publish(
        &mut self,
        file: PendingFile,
        writer: BufWriter<File>,
        rows: u64,
    ) -> anyhow::Result<PublishedFile> {
        let expected = self.expected_rows.load(Ordering::SeqCst);
        // A Delta table can only swap files its log names (checked before the output appears,
        // so that the commit after the upload cannot fail for that reason).
        let checked = replace::check_rows(&self.table, self.inputs.len(), rows, expected)
            .and_then(|()| self.lock.check())
            .and_then(|()| crate::delta::check_replaceable(Lake::Remote(&self.lake), &self.inputs));
        if let Err(e) = checked {
            drop(writer);
            file.abandon();
            return Err(e);
        }
        let output = super::record::close_staged(&self.staging, &file, writer)?;
        let rec = Replacement::new(
            &self.table,
            output.clone(),
            String::new(),
            self.inputs.clone(),
            rows,
        );
        let record = format!("{REPLACE_DIR}/{}", rec.file_name());
        let uploaded = self
            .lake
            .put(&record, serde_json::to_vec_pretty(&rec)?)
            .context("cannot write the replacement record")
            .and_then(|()| {
                failpoint("compact-recorded");
                self.lake.upload(&file.temp_path, &output)
            });
        let _ = std::fs::remove_file(&file.temp_path);
        let bytes = uploaded?;
        failpoint("compact-renamed");
        crate::delta::commit_replacement(
            Lake::Remote(&self.lake),
            &rec.output,
            &rec.inputs,
            "silt compact",
        )?;
        *self
            .written
            .lock()
            .map_err(|_| anyhow::anyhow!("lock poisoned"))? = Some((PathBuf::from(record), rec));
        Ok(PublishedFile {
            table: file.table,
            path: self.lake.root_path().join(&output),
            bytes,
            rows,
        })
    }
}
