//! The import record of an object-store lake, and the publisher that uploads finished files.
//!
//! It keeps the promises of the local record ([`crate::imports`]): a re-run never adds the same
//! rows twice, and the files of a run that died are removed before its inputs are imported
//! again. An object store has no append and no locks, so the record is laid out differently:
//! - `_silt/imports/done/<run>.json`: one object per finished run (the local `done.ndjson`
//!   line), written before the run's journal is removed;
//! - `_silt/imports/<run>.journal`: the run's journal (JSON: host, process, and the files it
//!   publishes), rewritten *before* each file is uploaded and every [`HEARTBEAT`] while the run
//!   lives. A journal is a dead run's when its run marked it abandoned (it failed), when it
//!   names this machine and a process that is not running (it crashed or was killed here), or
//!   when it has not been rewritten for [`STALE`] (a run on another machine; by the store's
//!   clock and this machine's, so allow for skew). The next import removes the files a dead
//!   run's journal lists, then the journal. A re-run on another machine within [`STALE`] of a
//!   crash there imports the inputs again before the dead run's files go: until the import after
//!   it, those rows are in the lake twice.
//!
//! Data files are written and sealed in a local staging directory by the ordinary
//! [`crate::LakeWriter`] and uploaded by [`RemoteRun::publisher`]; the table records
//! (`_silt/tables/`) are copied into the staging directory before a run
//! ([`pull_records`]) and the ones it wrote or changed, with its rejects files, are uploaded
//! after it ([`push_records`]).
//!
//! A run's files go into the Delta logs of their tables ([`crate::delta`]; created for a run
//! begun with `--table-format delta`) after they are uploaded and before the run's `done` (or
//! flush) record is written; recovery takes a dead run's files out of the logs before it
//! deletes them.
//!
//! Touches `_silt/imports/`, `_silt/tables/`, `_rejects/`, the data files runs publish and the
//! Delta logs of their tables, below the lake's prefix, and the staging directory it is given.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::RemoteLake;
use crate::config::TableFormat;
use crate::delta::Lake;
use crate::imports::{InputIdentity, Recovered, RunRecord, IMPORTS_DIR};
use crate::publish::{PendingFile, PublishedFile, Publisher};

/// How often a live run rewrites its journal.
pub const HEARTBEAT: Duration = Duration::from_secs(20);
/// A journal not rewritten for this long belongs to a run that died.
pub const STALE: Duration = Duration::from_secs(120);

/// Directories of small records copied to and from the staging directory.
const RECORD_DIRS: [&str; 2] = [crate::granularity::TABLES_DIR, crate::rejects::REJECTS_DIR];

fn done_rel(run: &str) -> String {
    format!("{IMPORTS_DIR}/done/{run}.json")
}

fn journal_rel(run: &str) -> String {
    format!("{IMPORTS_DIR}/{run}.journal")
}

/// A run's journal as stored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Journal {
    run: String,
    host: String,
    pid: u32,
    /// Files (relative to the lake) the run published or is about to.
    files: Vec<String>,
    /// The run failed and gave up: recover it at once instead of waiting for [`STALE`].
    #[serde(default)]
    abandoned: bool,
}

/// The import record of one object-store lake.
pub struct RemoteImportLog {
    lake: Arc<RemoteLake>,
    format: TableFormat,
}

impl RemoteImportLog {
    pub fn new(lake: Arc<RemoteLake>) -> Self {
        Self {
            lake,
            format: TableFormat::Hive,
        }
    }

    /// Runs begun from here with `--table-format delta` give the tables they write a Delta log
    /// ([`crate::delta`]); tables that have one get every run's files whatever the format.
    pub fn with_table_format(mut self, format: TableFormat) -> Self {
        self.format = format;
        self
    }

    /// Every finished run, oldest first.
    pub fn runs(&self) -> anyhow::Result<Vec<RunRecord>> {
        let mut out = Vec::new();
        for o in self.lake.list(&format!("{IMPORTS_DIR}/done"))? {
            if !o.rel.ends_with(".json") {
                continue;
            }
            if let Some(b) = self.lake.get(&o.rel)? {
                if let Ok(r) = serde_json::from_slice::<RunRecord>(&b) {
                    out.push(r);
                }
            }
        }
        out.sort_by(|a, b| (&a.finished, &a.run).cmp(&(&b.finished, &b.run)));
        Ok(out)
    }

    /// The `silt serve` flush record `name` ([`crate::imports::flush_record_name`]): the last
    /// finished flush of that instance, or `None`.
    pub fn last_flush(&self, name: &str) -> anyhow::Result<Option<RunRecord>> {
        let rel = format!("{IMPORTS_DIR}/{name}");
        match self.lake.get(&rel)? {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .with_context(|| format!("{}/{rel} is not a flush record", self.lake.url())),
        }
    }

    /// Where Kafka consumption resumes: for every topic partition any serve instance flushed,
    /// the highest next offset recorded (as [`crate::imports::ImportLog::kafka_positions`]).
    pub fn kafka_positions(&self) -> anyhow::Result<crate::imports::KafkaPositions> {
        let mut out = crate::imports::KafkaPositions::new();
        for o in self.lake.list(IMPORTS_DIR)? {
            let Some(name) = o.rel.strip_prefix(&format!("{IMPORTS_DIR}/")) else {
                continue;
            };
            if !name.contains('/') && crate::imports::is_flush_record(name) {
                if let Some(r) = self.last_flush(name)? {
                    crate::imports::merge_positions(&mut out, &r.kafka);
                }
            }
        }
        Ok(out)
    }

    /// Removes the files of dead runs (see the module documentation), then their journals.
    pub fn recover(&self) -> anyhow::Result<Recovered> {
        self.recover_at(SystemTime::now(), false)
    }

    /// What [`RemoteImportLog::recover`] would remove now, changing nothing (`silt vacuum
    /// --dry-run`): `paths` are the dead runs' files that exist.
    pub fn survey(&self) -> anyhow::Result<Recovered> {
        self.recover_at(SystemTime::now(), true)
    }

    /// [`RemoteImportLog::survey`] when `dry`, else [`RemoteImportLog::recover`].
    pub fn recover_or_survey(&self, dry: bool) -> anyhow::Result<Recovered> {
        self.recover_at(SystemTime::now(), dry)
    }

    fn recover_at(&self, now: SystemTime, dry: bool) -> anyhow::Result<Recovered> {
        let mut rec = Recovered::default();
        let listed = self.lake.list(IMPORTS_DIR)?;
        let name_of = |rel: &str| {
            rel.strip_prefix(&format!("{IMPORTS_DIR}/"))
                .filter(|n| !n.contains('/'))
                .map(str::to_string)
        };
        // The runs serve flush records name: finished, though they have no `done/` record.
        let mut flushed = std::collections::HashSet::new();
        for o in &listed {
            if name_of(&o.rel).is_some_and(|n| crate::imports::is_flush_record(&n)) {
                if let Some(r) = self.lake.get(&o.rel)? {
                    if let Ok(r) = serde_json::from_slice::<RunRecord>(&r) {
                        flushed.insert(r.run);
                    }
                }
            }
        }
        for o in listed {
            let Some(name) = name_of(&o.rel) else {
                continue;
            };
            let Some(run) = name.strip_suffix(".journal") else {
                continue;
            };
            if flushed.contains(run) || self.lake.get(&done_rel(run))?.is_some() {
                // Finished; it died between recording the run and removing the journal.
                if !dry {
                    self.lake.delete(&o.rel)?;
                }
                continue;
            }
            let Some(bytes) = self.lake.get(&o.rel)? else {
                continue;
            };
            let journal: Journal = serde_json::from_slice(&bytes).unwrap_or_default();
            let age = now.duration_since(o.modified).unwrap_or_default();
            let died_here = journal.host == host_name() && !process_alive(journal.pid);
            if !journal.abandoned && !died_here && age < STALE {
                continue; // a live run
            }
            rec.runs.push(run.to_string());
            if dry {
                for f in &journal.files {
                    if self.lake.exists(f)? {
                        rec.files += 1;
                        rec.paths.push(self.lake.root_path().join(f));
                    }
                }
                continue;
            }
            // The run may have committed its files to a Delta log before it died: the log
            // must stop naming them before they go.
            crate::delta::uncommit(Lake::Remote(&self.lake), &journal.files, "silt recovery")?;
            for f in &journal.files {
                self.lake.delete(f).with_context(|| {
                    format!("cannot remove {f} of the interrupted import {run}")
                })?;
                rec.files += 1;
                rec.paths.push(self.lake.root_path().join(f));
            }
            self.lake.delete(&o.rel)?;
        }
        Ok(rec)
    }

    /// Files (relative to the lake) that runs not yet finished, live or dead, have published or
    /// are about to: maintenance leaves them alone (as [`crate::imports::ImportLog::in_flight`]).
    pub fn in_flight(&self) -> anyhow::Result<std::collections::HashSet<String>> {
        let journals: Vec<String> = self
            .lake
            .list(IMPORTS_DIR)?
            .into_iter()
            .map(|o| o.rel)
            .filter(|r| r.ends_with(".journal"))
            .collect();
        let mut out = std::collections::HashSet::new();
        for body in self.lake.get_many(&journals)?.into_iter().flatten() {
            if let Ok(j) = serde_json::from_slice::<Journal>(&body) {
                out.extend(j.files);
            }
        }
        Ok(out)
    }

    /// Starts a run: writes its journal and keeps it fresh until the run finishes or is dropped.
    pub fn begin(&self) -> anyhow::Result<RemoteRun> {
        let id = crate::imports::new_run_id();
        let journal = Journal {
            run: id.clone(),
            host: host_name(),
            pid: std::process::id(),
            files: Vec::new(),
            abandoned: false,
        };
        write_journal(&self.lake, &journal)?;
        let state = Arc::new(Mutex::new(journal));
        let stop = Arc::new(AtomicBool::new(false));
        let beat = {
            let (lake, state, stop) = (self.lake.clone(), state.clone(), stop.clone());
            std::thread::Builder::new()
                .name("silt-journal".into())
                .spawn(move || heartbeat(lake, state, stop))?
        };
        Ok(RemoteRun {
            id,
            format: self.format,
            lake: self.lake.clone(),
            state,
            stop,
            beat: Some(beat),
            finished: false,
        })
    }
}

/// This machine's name (empty when unknown: then only [`STALE`] tells a dead run).
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Whether process `pid` of this machine runs (Linux; elsewhere assumed to, so that only
/// [`STALE`] tells).
pub(crate) fn process_alive(pid: u32) -> bool {
    if !Path::new("/proc/self").exists() {
        return true;
    }
    Path::new("/proc").join(pid.to_string()).exists()
}

fn write_journal(lake: &RemoteLake, j: &Journal) -> anyhow::Result<()> {
    lake.put(&journal_rel(&j.run), serde_json::to_vec(j)?)
        .context("cannot write the import journal")
}

fn heartbeat(lake: Arc<RemoteLake>, state: Arc<Mutex<Journal>>, stop: Arc<AtomicBool>) {
    let tick = Duration::from_millis(200);
    let mut waited = Duration::ZERO;
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(tick);
        waited += tick;
        if waited < HEARTBEAT {
            continue;
        }
        waited = Duration::ZERO;
        let j = state.lock().unwrap_or_else(|e| e.into_inner());
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let Err(e) = write_journal(&lake, &j) {
            tracing::warn!("import journal heartbeat: {e:#}");
        }
    }
}

/// A run in progress on an object-store lake.
pub struct RemoteRun {
    pub id: String,
    format: TableFormat,
    lake: Arc<RemoteLake>,
    state: Arc<Mutex<Journal>>,
    stop: Arc<AtomicBool>,
    beat: Option<std::thread::JoinHandle<()>>,
    finished: bool,
}

impl RemoteRun {
    /// A publisher that journals each file, then uploads it from `staging` (the root the lake
    /// writer writes under) to the same place below the lake.
    pub fn publisher(&self, staging: &Path) -> Box<dyn Publisher> {
        Box::new(RemotePublisher {
            lake: self.lake.clone(),
            staging: staging.to_path_buf(),
            state: self.state.clone(),
        })
    }

    /// The run finished: records it under `done/`, then removes the journal.
    pub fn finish(
        mut self,
        inputs: Vec<InputIdentity>,
        files: &[PublishedFile],
    ) -> anyhow::Result<RunRecord> {
        self.stop_heartbeat();
        let rec = self.record(inputs, files, None);
        self.commit_delta(&rec, "silt import")?;
        crate::replace::failpoint("import-committed");
        self.lake
            .put(&done_rel(&self.id), serde_json::to_vec(&rec)?)
            .context("cannot record the finished import")?;
        self.lake.delete(&journal_rel(&self.id))?;
        self.finished = true;
        Ok(rec)
    }

    /// The run was a flush of `silt serve` holding its write-ahead log up to and including
    /// record `wal_upto`: replaces the instance's flush record `name` (one object, rewritten by
    /// every flush: only the last position matters), then removes the journal. The flush record
    /// is the commit point: a crash before it leaves the journal, whose files the next start
    /// removes before the log is replayed.
    ///
    /// A flush holding records of Kafka partitions (`fence`) is recorded only while their claims
    /// stand ([`crate::claims`]), with `kafka` (this instance's positions after it); a fenced
    /// one removes its files and journal and fails with [`crate::claims::Fenced`].
    pub fn finish_flush(
        mut self,
        files: &[PublishedFile],
        (wal_upto, kafka): (u64, crate::imports::KafkaPositions),
        name: &str,
        fence: &crate::claims::Fence,
    ) -> anyhow::Result<RunRecord> {
        // Held until the record is in place: a claim made meanwhile waits for it.
        let _held = match fence.hold_in(&super::LakeRoot::Remote(self.lake.clone())) {
            Ok(h) => h,
            Err(e) if e.is::<crate::claims::Fenced>() => {
                let removed = self.abandon()?;
                tracing::warn!(
                    "{e}; removed the {removed} file(s) this flush had published (their records are the new owner's)"
                );
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        self.stop_heartbeat();
        let mut rec = self.record(Vec::new(), files, Some(wal_upto));
        rec.kafka = kafka;
        self.commit_delta(&rec, "silt serve")?;
        self.lake
            .put(&format!("{IMPORTS_DIR}/{name}"), serde_json::to_vec(&rec)?)
            .context("cannot record the finished flush")?;
        self.lake.delete(&journal_rel(&self.id))?;
        self.finished = true;
        Ok(rec)
    }

    /// Gives the run up at once: the files it published are removed, then its journal; returns
    /// how many files there were.
    pub fn abandon(mut self) -> anyhow::Result<usize> {
        self.stop_heartbeat();
        let files = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .files
            .clone();
        self.lake.delete_many(&files)?;
        self.lake.delete(&journal_rel(&self.id))?;
        self.finished = true;
        Ok(files.len())
    }

    /// Commits the run's files to the Delta logs of their tables (creating them under
    /// `--table-format delta`) before the run counts as done: a crash from here on leaves the
    /// journal, whose recovery takes the files out of the log again.
    fn commit_delta(&self, rec: &RunRecord, app: &str) -> anyhow::Result<()> {
        let create = self.format == TableFormat::Delta;
        let in_flight = if create {
            RemoteImportLog::new(self.lake.clone()).in_flight()?
        } else {
            Default::default()
        };
        crate::delta::commit_published(
            Lake::Remote(&self.lake),
            &rec.files,
            create,
            &in_flight,
            app,
        )
    }

    /// The record of this run, finished now.
    fn record(
        &self,
        inputs: Vec<InputIdentity>,
        files: &[PublishedFile],
        wal_upto: Option<u64>,
    ) -> RunRecord {
        RunRecord {
            run: self.id.clone(),
            finished: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            inputs,
            files: files
                .iter()
                .map(|f| {
                    self.lake
                        .rel_of(&f.path)
                        .unwrap_or_else(|_| f.path.display().to_string())
                })
                .collect(),
            wal_upto,
            kafka: Default::default(),
        }
    }

    fn stop_heartbeat(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.beat.take() {
            let _ = h.join();
        }
    }
}

impl Drop for RemoteRun {
    /// A run dropped unfinished (an error) marks its journal abandoned, so the next import
    /// removes its files at once rather than after [`STALE`].
    fn drop(&mut self) {
        self.stop_heartbeat();
        if !self.finished {
            let mut j = self.state.lock().unwrap_or_else(|e| e.into_inner());
            j.abandoned = true;
            if let Err(e) = write_journal(&self.lake, &j) {
                tracing::warn!("cannot mark the failed import {} abandoned: {e:#}", self.id);
            }
        }
    }
}

struct RemotePublisher {
    lake: Arc<RemoteLake>,
    staging: PathBuf,
    state: Arc<Mutex<Journal>>,
}

impl Publisher for RemotePublisher {
    fn publish(
        &mut self,
        file: PendingFile,
        writer: BufWriter<File>,
        rows: u64,
    ) -> anyhow::Result<PublishedFile> {
        // A crash loses the staging directory with the run (whose journal makes the next
        // import clean up).
        let rel = close_staged(&self.staging, &file, writer)?;
        {
            let mut j = self.state.lock().unwrap_or_else(|e| e.into_inner());
            j.files.push(rel.clone());
            write_journal(&self.lake, &j)?;
        }
        let bytes = self.lake.upload(&file.temp_path, &rel);
        let _ = std::fs::remove_file(&file.temp_path);
        Ok(PublishedFile {
            table: file.table,
            path: self.lake.root_path().join(&rel),
            bytes: bytes?,
            rows,
        })
    }
}

/// Closes a file written in the staging directory `staging`; returns its place below the lake
/// (`/`-separated). No fsync: the staged copy is read back once by the upload, and a crash
/// before the upload leaves nothing in the lake to protect.
pub(crate) fn close_staged(
    staging: &Path,
    file: &PendingFile,
    writer: BufWriter<File>,
) -> anyhow::Result<String> {
    let mut f = writer
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("cannot write {}", file.temp_path.display()))?;
    f.flush()?;
    drop(f);
    rel_below(staging, &file.final_path)
}

/// `path` below `root`, `/`-separated.
pub(crate) fn rel_below(root: &Path, path: &Path) -> anyhow::Result<String> {
    let rel = path
        .strip_prefix(root)
        .with_context(|| format!("{} is not below {}", path.display(), root.display()))?;
    Ok(rel
        .iter()
        .map(|c| c.to_string_lossy())
        .collect::<Vec<_>>()
        .join("/"))
}

/// What [`pull_records`] copied, to tell later what a run changed.
#[derive(Debug, Default)]
pub struct Pulled(HashMap<String, Vec<u8>>);

/// Copies the lake's table records into `staging` (so the writer keeps each table's
/// partitioning).
pub fn pull_records(lake: &RemoteLake, staging: &Path) -> anyhow::Result<Pulled> {
    let mut pulled = Pulled::default();
    for o in lake.list(crate::granularity::TABLES_DIR)? {
        let Some(bytes) = lake.get(&o.rel)? else {
            continue;
        };
        let local = staging.join(&o.rel);
        if let Some(d) = local.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(&local, &bytes)?;
        pulled.0.insert(o.rel, bytes.to_vec());
    }
    Ok(pulled)
}

/// Uploads the table records a run wrote or changed and its rejects files from `staging`;
/// returns each uploaded file's local path with its path below [`RemoteLake::root_path`].
pub fn push_records(
    lake: &RemoteLake,
    staging: &Path,
    pulled: &Pulled,
) -> anyhow::Result<Vec<(PathBuf, PathBuf)>> {
    let mut out = Vec::new();
    for dir in RECORD_DIRS {
        let mut files = Vec::new();
        walk(&staging.join(dir), &mut files)?;
        files.sort();
        for local in files {
            let rel = rel_below(staging, &local)?;
            let bytes = std::fs::read(&local)?;
            if pulled.0.get(&rel) == Some(&bytes) {
                continue;
            }
            lake.put(&rel, bytes)?;
            out.push((local, lake.root_path().join(&rel)));
        }
    }
    Ok(out)
}

/// Regular files below `dir` whose names are not hidden temporaries.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    for e in rd {
        let e = e?;
        let p = e.path();
        if e.file_type()?.is_dir() {
            walk(&p, out)?;
        } else if !e.file_name().to_string_lossy().starts_with('.') {
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lake over object_store's local-filesystem store (the same calls as S3's).
    fn lake(dir: &Path) -> Arc<RemoteLake> {
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap();
        Arc::new(
            RemoteLake::with_store("s3://b/p", "b".into(), "p".into(), Arc::new(store)).unwrap(),
        )
    }

    #[test]
    fn dead_runs_lose_their_files_and_live_ones_keep_them() {
        let dir = tempfile::tempdir().unwrap();
        let lake = lake(dir.path());
        let log = RemoteImportLog::new(lake.clone());
        lake.put("t.x/a.parquet", b"a".to_vec()).unwrap();
        lake.put("t.x/b.parquet", b"b".to_vec()).unwrap();
        // A live run that journaled a.parquet.
        let mut live = log.begin().unwrap();
        live.state
            .lock()
            .unwrap()
            .files
            .push("t.x/a.parquet".into());
        write_journal(&lake, &live.state.lock().unwrap()).unwrap();
        // A run that failed after journaling b.parquet.
        let failed = log.begin().unwrap();
        failed
            .state
            .lock()
            .unwrap()
            .files
            .push("t.x/b.parquet".into());
        drop(failed);
        // A survey (vacuum --dry-run) sees the failed run and changes nothing.
        let seen = log.survey().unwrap();
        assert_eq!((seen.runs.len(), seen.files), (1, 1));
        assert!(lake.get("t.x/b.parquet").unwrap().is_some());
        let rec = log.recover().unwrap();
        assert_eq!(rec.runs.len(), 1);
        assert_eq!(lake.get("t.x/b.parquet").unwrap(), None);
        assert!(lake.get("t.x/a.parquet").unwrap().is_some());
        // A run of another machine whose journal nobody rewrites any more: dead after STALE.
        // (Forgotten, not dropped: as if the process had died, without its heartbeat.)
        live.stop_heartbeat();
        std::mem::forget(live);
        {
            let mut j = serde_json::from_slice::<Journal>(
                &lake.get(&journal_rel(&log_run_id(&lake))).unwrap().unwrap(),
            )
            .unwrap();
            j.host = "elsewhere".into();
            write_journal(&lake, &j).unwrap();
        }
        assert!(log.recover().unwrap().runs.is_empty());
        let later = SystemTime::now() + STALE + Duration::from_secs(1);
        let rec = log.recover_at(later, false).unwrap();
        assert_eq!(rec.files, 1);
        assert_eq!(lake.get("t.x/a.parquet").unwrap(), None);
        assert!(lake.list(IMPORTS_DIR).unwrap().is_empty());
    }

    /// A serve flush: its record replaces the last one; a flush that died after its record but
    /// before removing its journal keeps its files (its rows are what the record covers); an
    /// abandoned one loses them at once.
    #[test]
    fn flush_records_commit_and_an_abandoned_flush_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let lake = lake(dir.path());
        let log = RemoteImportLog::new(lake.clone());
        assert!(log.last_flush("flush.json").unwrap().is_none());
        let published = |rel: &str| PublishedFile {
            table: silt_core::TableName::parse("t.x").unwrap(),
            path: lake.root_path().join(rel),
            bytes: 1,
            rows: 1,
        };
        let run = log.begin().unwrap();
        let none = crate::claims::Fence::default();
        run.finish_flush(
            &[published("t.x/a.parquet")],
            (7, Default::default()),
            "flush.json",
            &none,
        )
        .unwrap();
        let run = log.begin().unwrap();
        let id = run.id.clone();
        let mut kafka = crate::imports::KafkaPositions::new();
        kafka.entry("ids".into()).or_default().insert(0, 42);
        run.finish_flush(
            &[published("t.x/b.parquet")],
            (9, kafka.clone()),
            "flush.json",
            &none,
        )
        .unwrap();
        let rec = log.last_flush("flush.json").unwrap().unwrap();
        assert_eq!(
            (rec.wal_upto, rec.files.clone()),
            (Some(9), vec!["t.x/b.parquet".to_string()])
        );
        assert!(log.last_flush("flush-other.json").unwrap().is_none());
        assert_eq!(log.kafka_positions().unwrap(), kafka);

        // Killed between its record and removing its journal: the journal goes, the file stays.
        lake.put("t.x/b.parquet", b"b".to_vec()).unwrap();
        let j = Journal {
            run: id,
            host: host_name(),
            pid: u32::MAX - 1,
            files: vec!["t.x/b.parquet".into()],
            abandoned: false,
        };
        write_journal(&lake, &j).unwrap();
        let rec = log.recover().unwrap();
        assert!(rec.runs.is_empty() && rec.files == 0, "{rec:?}");
        assert!(lake.get("t.x/b.parquet").unwrap().is_some());
        assert!(!lake.exists(&journal_rel(&j.run)).unwrap());

        // Given up: its file and journal are removed at once.
        let run = log.begin().unwrap();
        lake.put("t.x/c.parquet", b"c".to_vec()).unwrap();
        run.state.lock().unwrap().files.push("t.x/c.parquet".into());
        let id = run.id.clone();
        assert_eq!(run.abandon().unwrap(), 1);
        assert!(lake.get("t.x/c.parquet").unwrap().is_none());
        assert!(!lake.exists(&journal_rel(&id)).unwrap());
    }

    /// The id of the one journal in `lake`.
    fn log_run_id(lake: &RemoteLake) -> String {
        let j: Vec<_> = lake
            .list(IMPORTS_DIR)
            .unwrap()
            .into_iter()
            .filter_map(|o| o.rel.strip_suffix(".journal").map(str::to_string))
            .collect();
        assert_eq!(j.len(), 1, "{j:?}");
        j[0].rsplit('/').next().unwrap().to_string()
    }

    #[test]
    fn a_run_killed_on_this_machine_is_dead_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let lake = lake(dir.path());
        let log = RemoteImportLog::new(lake.clone());
        lake.put("t.x/a.parquet", b"a".to_vec()).unwrap();
        let mut run = log.begin().unwrap();
        run.stop_heartbeat();
        {
            let mut j = run.state.lock().unwrap();
            j.files.push("t.x/a.parquet".into());
            // A process id that cannot be running (above the kernel's pid_max).
            j.pid = u32::MAX - 1;
            write_journal(&lake, &j).unwrap();
        }
        std::mem::forget(run);
        let rec = log.recover().unwrap();
        assert_eq!((rec.runs.len(), rec.files), (1, 1));
        assert_eq!(lake.get("t.x/a.parquet").unwrap(), None);
    }

    #[test]
    fn finished_runs_are_recorded_and_listed_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let lake = lake(dir.path());
        let log = RemoteImportLog::new(lake.clone());
        let id = InputIdentity {
            path: "x.log".into(),
            size: 3,
            head: 1,
            tail: 1,
        };
        let run = log.begin().unwrap();
        let file = PublishedFile {
            table: silt_core::TableName::parse("t.x").unwrap(),
            path: lake.root_path().join("t.x/a.parquet"),
            bytes: 1,
            rows: 1,
        };
        let r = run.finish(vec![id.clone()], &[file]).unwrap();
        assert_eq!(r.files, vec!["t.x/a.parquet".to_string()]);
        let runs = log.runs().unwrap();
        assert_eq!(runs.len(), 1);
        assert!(runs[0].inputs[0].same_content(&id));
        // No journal is left, and recovery has nothing to do.
        let rec = log.recover().unwrap();
        assert!(rec.runs.is_empty());
        assert_eq!(
            lake.list(IMPORTS_DIR).unwrap().len(),
            1,
            "only the done record"
        );
    }
}
