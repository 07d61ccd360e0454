//! The lake's record of what imports consumed, so that running an import twice (a mistaken
//! re-run, a retry after a crash) never adds the same rows twice.
//!
//! Everything lives under `<lake>/_silt/imports/` (`_` names are never tables or data, see
//! [`crate::layout`]):
//! - `done.ndjson`: one line per finished run: its id, time, and for every input its identity
//!   (path, size, and xxHash64 digests of the first and last 1 MiB: the whole content when it is
//!   at most 2 MiB) with the files the run published. Appended and fsynced when a run finishes.
//! - `flush.json`: the last finished `silt serve` flush (its files, the write-ahead-log
//!   position they cover and, for Kafka sources, the next offset of every topic partition they
//!   hold), replaced atomically by each flush: a server flushing every second would otherwise
//!   add a line per flush to `done.ndjson` forever. A server started with `--instance NAME`
//!   keeps `flush-NAME.json` instead, so several servers can share one lake (members of one
//!   Kafka consumer group); a partition's resume offset is the highest any of them recorded
//!   ([`ImportLog::kafka_positions`]).
//! - `<run>.journal`: while a run is going, every file it is about to publish is appended here
//!   (and fsynced) *before* the file's rename makes it visible, and the run holds an exclusive
//!   lock on the journal. A journal without a lock holder is a run that died: the next import
//!   removes every file it lists (they may hold any part of its inputs: files mix inputs) and then
//!   imports those inputs again in full. A reader that looks between the crash and that next run
//!   sees the dead run's rows once; after it, once.
//!
//! An input whose identity is in `done.ndjson` is skipped (with the run that imported it, so the
//! user can tell); `--force` imports it again. An input whose start is an imported input's whole
//! content (a log appended to since, [`grown_from`]) is not imported either, since its earlier
//! rows would be in the lake twice; `--force` imports it whole. Standard input and empty files
//! have no identity and are always imported.
//!
//! Touches only `<lake>/_silt/imports/` and, when recovering a dead run, the data files its
//! journal lists.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use twox_hash::XxHash64;

use crate::claims::Fence;
use crate::config::TableFormat;
use crate::publish::{self, PendingFile, PublishedFile, Publisher};

/// Directory of the import record, below the lake root.
pub const IMPORTS_DIR: &str = "_silt/imports";
const DONE: &str = "done.ndjson";
/// The last finished `silt serve` flush (rewritten atomically by each flush, so a long-running
/// server does not grow `done.ndjson` by a line per flush).
const FLUSH: &str = "flush.json";
/// Bytes hashed at each end of an input.
const BLOCK: u64 = 1 << 20;

/// What identifies an input's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputIdentity {
    /// The path it was read from (for messages; a renamed file with the same content is the
    /// same input).
    pub path: String,
    pub size: u64,
    /// xxHash64 of the first `min(size, 1 MiB)` bytes.
    pub head: u64,
    /// xxHash64 of the last `min(size, 1 MiB)` bytes (equal to `head` for small files).
    pub tail: u64,
}

impl InputIdentity {
    /// The identity of the file at `path`; `None` for an empty file (nothing to tell apart).
    pub fn of_file(path: &Path) -> anyhow::Result<Option<Self>> {
        let mut f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let size = f.metadata()?.len();
        if size == 0 {
            return Ok(None);
        }
        let n = size.min(BLOCK);
        let mut buf = vec![0u8; n as usize];
        f.read_exact(&mut buf)?;
        let head = XxHash64::oneshot(0, &buf);
        let tail = if size <= BLOCK {
            head
        } else {
            f.seek(SeekFrom::Start(size - n))?;
            f.read_exact(&mut buf)?;
            XxHash64::oneshot(0, &buf)
        };
        // Files of up to 2 MiB are hashed whole (head and tail together cover them).
        Ok(Some(Self {
            path: path.display().to_string(),
            size,
            head,
            tail,
        }))
    }

    /// Same content (the path may differ).
    pub fn same_content(&self, other: &Self) -> bool {
        self.size == other.size && self.head == other.head && self.tail == other.tail
    }
}

/// The earlier input (and the run that imported it) whose content is the start of the file at
/// `path`, which has grown since to the content `now` identifies: a log appended to after an
/// import read it. Importing the file again would add the rows of that start a second time.
///
/// Checked as an identity is: the earlier input's first and last blocks (the whole of it up to
/// 2 MiB) are where they were; an earlier input under 64 KiB counts only at the same path. Reads at most two blocks of `path` for each earlier input
/// smaller than it that could be its start (the same first block), the newest run first.
pub fn grown_from<'a>(
    path: &Path,
    now: &InputIdentity,
    done: &'a [RunRecord],
) -> anyhow::Result<Option<(&'a RunRecord, &'a InputIdentity)>> {
    let mut first: Option<Vec<u8>> = None;
    let mut f: Option<File> = None;
    for r in done.iter().rev() {
        for was in &r.inputs {
            if was.size == 0 || was.size >= now.size {
                continue;
            }
            // A few lines at another path are no evidence: unrelated logs may start alike (a
            // header, a first heartbeat). At the same path, or at 64 KiB and more, they are.
            if was.size < (64 << 10) && was.path != now.path {
                continue;
            }
            // A start of 1 MiB or more has the same first block as `now`: no read needed to
            // rule the rest out.
            if was.size >= BLOCK && was.head != now.head {
                continue;
            }
            let file = match &mut f {
                Some(file) => file,
                None => f.insert(
                    File::open(path).with_context(|| format!("cannot open {}", path.display()))?,
                ),
            };
            let head = match &first {
                Some(b) => b,
                None => {
                    let mut b = vec![0u8; now.size.min(BLOCK) as usize];
                    file.seek(SeekFrom::Start(0))?;
                    file.read_exact(&mut b)?;
                    first.insert(b)
                }
            };
            let n = was.size.min(BLOCK) as usize;
            if XxHash64::oneshot(0, &head[..n]) != was.head {
                continue;
            }
            if was.size > BLOCK {
                let mut b = vec![0u8; n];
                file.seek(SeekFrom::Start(was.size - n as u64))?;
                file.read_exact(&mut b)?;
                if XxHash64::oneshot(0, &b) != was.tail {
                    continue;
                }
            }
            return Ok(Some((r, was)));
        }
    }
    Ok(None)
}

/// One finished run, as `done.ndjson` keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub run: String,
    /// RFC 3339 time the run finished.
    pub finished: String,
    pub inputs: Vec<InputIdentity>,
    /// Files the run published, relative to the lake root.
    pub files: Vec<String>,
    /// For a flush of `silt serve`: the last write-ahead-log record its files hold (the log
    /// before and at it is in the lake; the server replays only what follows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal_upto: Option<u64>,
    /// For a flush of `silt serve` consuming Kafka: topic -> partition -> the next offset to
    /// read (every record before it is in the lake, counting this instance's earlier flushes).
    #[serde(default, skip_serializing_if = "KafkaPositions::is_empty")]
    pub kafka: KafkaPositions,
}

/// Topic -> partition -> next offset to consume.
pub type KafkaPositions = std::collections::BTreeMap<String, std::collections::BTreeMap<i32, i64>>;

/// Merges `from` into `into`, keeping the higher offset of each partition.
pub fn merge_positions(into: &mut KafkaPositions, from: &KafkaPositions) {
    for (t, ps) in from {
        let e = into.entry(t.clone()).or_default();
        for (p, o) in ps {
            let v = e.entry(*p).or_insert(*o);
            *v = (*v).max(*o);
        }
    }
}

/// The name (in `_silt/imports/`) of the flush record of the `silt serve` instance `instance`:
/// `flush.json` for the unnamed one, `flush-NAME.json` for `--instance NAME`.
pub fn flush_record_name(instance: Option<&str>) -> String {
    instance.map_or_else(|| FLUSH.to_string(), |n| format!("flush-{n}.json"))
}

/// Whether `name` (in `_silt/imports/`) is a flush record ([`flush_record_name`]).
pub fn is_flush_record(name: &str) -> bool {
    name == FLUSH || (name.starts_with("flush-") && name.ends_with(".json"))
}

/// The import record of one lake.
pub struct ImportLog {
    dir: PathBuf,
    root: PathBuf,
    /// This server instance's flush record (`flush.json` or `flush-NAME.json`).
    flush: String,
    /// `--table-format`: runs create a Delta log for the tables they write that have none.
    format: TableFormat,
}

/// What [`ImportLog::recover`] cleaned up.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Dead runs whose files were removed.
    pub runs: Vec<String>,
    /// Files removed.
    pub files: usize,
    /// The files removed.
    pub paths: Vec<PathBuf>,
}

impl ImportLog {
    pub fn open(root: &Path) -> anyhow::Result<Self> {
        Self::open_instance(root, None)
    }

    /// The lake root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The record as seen by the `silt serve` instance `instance` (`--instance`): its flushes
    /// go to `flush-NAME.json`; `None` is the unnamed instance (`flush.json`).
    pub fn open_instance(root: &Path, instance: Option<&str>) -> anyhow::Result<Self> {
        let dir = root.join(IMPORTS_DIR);
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Self {
            dir,
            root: root.to_path_buf(),
            flush: flush_record_name(instance),
            format: TableFormat::Hive,
        })
    }

    /// Runs begun from now on give the tables they write that `format` (with
    /// [`TableFormat::Delta`], a Delta log where a table has none; see [`crate::delta`]).
    pub fn with_table_format(mut self, format: TableFormat) -> Self {
        self.format = format;
        self
    }

    /// Every finished run, oldest first. A line that does not parse (a torn last line of a
    /// crash while appending) is skipped: its run did not finish.
    pub fn runs(&self) -> anyhow::Result<Vec<RunRecord>> {
        let mut out = self.done_lines()?;
        out.extend(self.flushes()?);
        Ok(out)
    }

    /// The runs recorded in `done.ndjson`.
    fn done_lines(&self) -> anyhow::Result<Vec<RunRecord>> {
        let p = self.dir.join(DONE);
        let f = match File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", p.display())),
        };
        let mut out = Vec::new();
        for line in BufReader::new(f).lines() {
            let line = line?;
            if let Ok(r) = serde_json::from_str::<RunRecord>(&line) {
                out.push(r);
            }
        }
        Ok(out)
    }

    /// The last finished flush of every serve instance (`flush.json`, `flush-NAME.json`).
    fn flushes(&self) -> anyhow::Result<Vec<RunRecord>> {
        let mut out = Vec::new();
        for e in fs::read_dir(&self.dir)
            .with_context(|| format!("cannot list {}", self.dir.display()))?
        {
            let name = e?.file_name();
            let Some(name) = name.to_str() else { continue };
            if is_flush_record(name) {
                out.extend(self.flush_record(name)?);
            }
        }
        Ok(out)
    }

    fn flush_record(&self, name: &str) -> anyhow::Result<Option<RunRecord>> {
        let p = self.dir.join(name);
        match fs::read(&p) {
            Ok(b) => Ok(serde_json::from_slice(&b).ok()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
        }
    }

    /// This instance's last finished flush.
    pub fn last_flush(&self) -> anyhow::Result<Option<RunRecord>> {
        self.flush_record(&self.flush)
    }

    /// Where Kafka consumption resumes: for every topic partition any serve instance flushed,
    /// the highest next offset recorded.
    pub fn kafka_positions(&self) -> anyhow::Result<KafkaPositions> {
        let mut out = KafkaPositions::new();
        for r in self.flushes()? {
            merge_positions(&mut out, &r.kafka);
        }
        Ok(out)
    }

    /// The finished run that imported content identical to `id`, if any.
    pub fn imported_by(
        &self,
        id: &InputIdentity,
    ) -> anyhow::Result<Option<(RunRecord, InputIdentity)>> {
        for r in self.runs()?.into_iter().rev() {
            if let Some(i) = r.inputs.iter().find(|i| i.same_content(id)).cloned() {
                return Ok(Some((r, i)));
            }
        }
        Ok(None)
    }

    /// The last write-ahead-log record that finished `silt serve` flushes hold (see
    /// [`RunRecord::wal_upto`]); `None` when no flush finished.
    pub fn wal_covered(&self) -> anyhow::Result<Option<u64>> {
        let own = self.last_flush()?.and_then(|r| r.wal_upto);
        if self.flush != FLUSH {
            return Ok(own);
        }
        // Servers before flush.json recorded their flushes in done.ndjson.
        let before: Option<u64> = self.done_lines()?.iter().filter_map(|r| r.wal_upto).max();
        Ok(own.max(before))
    }

    /// Removes the files of runs that died (a journal nobody holds), then their journals. A
    /// journal whose run is already in `done.ndjson` (a crash between recording the run and
    /// removing its journal) only loses its journal: its files are part of the lake.
    pub fn recover(&self) -> anyhow::Result<Recovered> {
        self.recover_or_survey(false)
    }

    /// What [`ImportLog::recover`] would remove now, changing nothing (`silt vacuum
    /// --dry-run`): `paths` are the dead runs' files that exist.
    pub fn survey(&self) -> anyhow::Result<Recovered> {
        self.recover_or_survey(true)
    }

    /// [`ImportLog::survey`] when `dry`, else [`ImportLog::recover`].
    pub fn recover_or_survey(&self, dry: bool) -> anyhow::Result<Recovered> {
        let mut rec = Recovered::default();
        let finished: std::collections::HashSet<String> =
            self.runs()?.into_iter().map(|r| r.run).collect();
        for e in fs::read_dir(&self.dir)? {
            let p = e?.path();
            let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            let Some(run) = name.strip_suffix(".journal") else {
                continue;
            };
            let f = OpenOptions::new().read(true).write(true).open(&p)?;
            match f.try_lock() {
                Ok(()) => {}
                // A live import holds it.
                Err(std::fs::TryLockError::WouldBlock) => continue,
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("cannot lock {}", p.display()))
                }
            }
            if finished.contains(run) {
                if !dry {
                    fs::remove_file(&p)?;
                }
                continue;
            }
            let rels: Vec<String> = BufReader::new(&f)
                .lines()
                .filter(|l| !matches!(l, Ok(l) if l.is_empty()))
                .collect::<std::io::Result<_>>()?;
            rec.runs.push(run.to_string());
            if dry {
                for rel in rels {
                    let file = self.root.join(rel);
                    if file.is_file() {
                        rec.files += 1;
                        rec.paths.push(file);
                    }
                }
                continue;
            }
            // The run may have committed its files to a Delta log before it died: the log
            // must stop naming them before they go.
            crate::delta::uncommit(crate::delta::Lake::Dir(&self.root), &rels, "silt recovery")?;
            remove_files(&self.root, &rels, run, &mut rec)?;
            fs::remove_file(&p)?;
        }
        if !dry {
            publish::sync_dir(&self.dir);
        }
        Ok(rec)
    }

    /// Files (relative to the lake root) that runs not yet finished, live or dead, have
    /// published or are about to: maintenance leaves them alone, since a dead run's files are
    /// removed by the next import and a live run's would be too if it died.
    pub fn in_flight(&self) -> anyhow::Result<std::collections::HashSet<String>> {
        in_flight(&self.dir)
    }

    /// Starts a run: its journal, locked for as long as the returned [`Run`] lives.
    pub fn begin(&self) -> anyhow::Result<Run> {
        let id = new_run_id();
        let path = self.dir.join(format!("{id}.journal"));
        // Locked under a name recovery does not look at, then renamed: another process's
        // recovery must never find the journal unlocked (it would take it for a dead run's).
        let tmp = self.dir.join(format!("{id}.journal-new"));
        let f = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&tmp)
            .with_context(|| format!("cannot create {}", tmp.display()))?;
        f.lock()
            .with_context(|| format!("cannot lock {}", tmp.display()))?;
        fs::rename(&tmp, &path).with_context(|| format!("cannot create {}", path.display()))?;
        publish::sync_dir(&self.dir);
        Ok(Run {
            id,
            journal: path,
            file: f,
            root: self.root.clone(),
            done: self.dir.join(DONE),
            flush: self.dir.join(&self.flush),
            format: self.format,
        })
    }
}

/// [`ImportLog::in_flight`] of the record in `dir`.
fn in_flight(dir: &Path) -> anyhow::Result<std::collections::HashSet<String>> {
    let mut out = std::collections::HashSet::new();
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().and_then(|x| x.to_str()) != Some("journal") {
            continue;
        }
        // A journal removed meanwhile belongs to a run that finished.
        let Ok(f) = File::open(&p) else { continue };
        for line in BufReader::new(f).lines() {
            let rel = line?;
            if !rel.is_empty() {
                out.insert(rel);
            }
        }
    }
    Ok(out)
}

/// Removes the files `rels` (relative to `root`) of the run `run` that will not finish, adding
/// them to `rec`; files already gone are skipped.
fn remove_files(
    root: &Path,
    rels: &[String],
    run: &str,
    rec: &mut Recovered,
) -> anyhow::Result<()> {
    for rel in rels {
        let file = root.join(rel);
        match fs::remove_file(&file) {
            Ok(()) => {
                rec.files += 1;
                rec.paths.push(file.clone());
                publish::sync_dir(file.parent().unwrap_or(root));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot remove {} of the interrupted import {run}",
                        file.display()
                    )
                })
            }
        }
    }
    Ok(())
}

/// A new run's id: its start time (for a readable order) and 8 random hex digits.
pub(crate) fn new_run_id() -> String {
    format!(
        "{}-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S"),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// A run in progress; see the module documentation.
pub struct Run {
    pub id: String,
    journal: PathBuf,
    file: File,
    root: PathBuf,
    done: PathBuf,
    flush: PathBuf,
    format: TableFormat,
}

impl Run {
    /// A publisher that journals each file before it becomes visible, then publishes it as
    /// `inner` does.
    pub fn publisher(&self, inner: Box<dyn Publisher>) -> anyhow::Result<Box<dyn Publisher>> {
        Ok(Box::new(JournalingPublisher {
            journal: self.file.try_clone()?,
            root: self.root.clone(),
            inner,
        }))
    }

    /// The run finished: records its inputs and files in `done.ndjson` (fsynced), then removes
    /// the journal. Until this returns, a crash leaves the run to be recovered.
    pub fn finish(
        self,
        inputs: Vec<InputIdentity>,
        files: &[PublishedFile],
    ) -> anyhow::Result<RunRecord> {
        self.finish_with(inputs, files, None, KafkaPositions::new())
    }

    /// [`Run::finish`] for a flush of `silt serve` that holds the write-ahead log up to and
    /// including record `wal_upto`, and Kafka up to `kafka` (cumulative: what this instance
    /// flushed before too).
    pub fn finish_with(
        self,
        inputs: Vec<InputIdentity>,
        files: &[PublishedFile],
        wal_upto: Option<u64>,
        kafka: KafkaPositions,
    ) -> anyhow::Result<RunRecord> {
        self.finish_fenced(inputs, files, wal_upto, kafka, &Fence::default())
    }

    /// [`Run::finish_with`] for a flush holding records of the Kafka partitions `fence` names:
    /// it is recorded only while their claims stand ([`crate::claims`]). A fenced flush removes
    /// its files and journal and fails with [`crate::claims::Fenced`].
    pub fn finish_fenced(
        self,
        inputs: Vec<InputIdentity>,
        files: &[PublishedFile],
        wal_upto: Option<u64>,
        kafka: KafkaPositions,
        fence: &Fence,
    ) -> anyhow::Result<RunRecord> {
        // Held until the record is in place: a claim made meanwhile waits for it.
        let _held = match fence.hold(&self.root) {
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
        let rec = RunRecord {
            wal_upto,
            kafka,
            run: self.id.clone(),
            finished: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            inputs,
            files: files
                .iter()
                .map(|f| {
                    f.path
                        .strip_prefix(&self.root)
                        .unwrap_or(&f.path)
                        .display()
                        .to_string()
                })
                .collect(),
        };
        // Tables with a Delta log get the files before the run counts as done: a crash from
        // here on leaves the run to recovery, which takes them out of the log again.
        let app = if wal_upto.is_some() {
            "silt serve"
        } else {
            "silt import"
        };
        let create = self.format == TableFormat::Delta;
        let in_flight = if create {
            in_flight(self.done.parent().unwrap_or(Path::new(".")))?
        } else {
            Default::default()
        };
        crate::delta::commit_published(
            crate::delta::Lake::Dir(&self.root),
            &rec.files,
            create,
            &in_flight,
            app,
        )?;
        crate::replace::failpoint("import-committed");
        if rec.inputs.is_empty() && rec.wal_upto.is_some() {
            // A serve flush: only the last one matters (the log position it covers), so it
            // replaces the previous one instead of adding a line.
            publish::write_atomic(&self.flush, &serde_json::to_vec(&rec)?)
                .with_context(|| format!("cannot write {}", self.flush.display()))?;
            fs::remove_file(&self.journal)?;
            publish::sync_dir(self.done.parent().unwrap_or(Path::new(".")));
            return Ok(rec);
        }
        let mut line = serde_json::to_vec(&rec)?;
        line.push(b'\n');
        let mut done = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.done)
            .with_context(|| format!("cannot write {}", self.done.display()))?;
        done.write_all(&line)?;
        done.sync_all()?;
        fs::remove_file(&self.journal)?;
        publish::sync_dir(self.done.parent().unwrap_or(Path::new(".")));
        Ok(rec)
    }

    /// Gives the run up: the files its journal lists are removed, then the journal; returns
    /// how many files were removed.
    pub fn abandon(self) -> anyhow::Result<usize> {
        let text = fs::read_to_string(&self.journal)
            .with_context(|| format!("cannot read {}", self.journal.display()))?;
        let rels: Vec<String> = text
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        let mut rec = Recovered::default();
        remove_files(&self.root, &rels, &self.id, &mut rec)?;
        fs::remove_file(&self.journal)?;
        publish::sync_dir(self.done.parent().unwrap_or(Path::new(".")));
        Ok(rec.files)
    }
}

struct JournalingPublisher {
    journal: File,
    root: PathBuf,
    inner: Box<dyn Publisher>,
}

impl Publisher for JournalingPublisher {
    fn publish(
        &mut self,
        file: PendingFile,
        writer: BufWriter<File>,
        rows: u64,
    ) -> anyhow::Result<PublishedFile> {
        let rel = file
            .final_path
            .strip_prefix(&self.root)
            .unwrap_or(&file.final_path)
            .display()
            .to_string();
        self.journal.write_all(format!("{rel}\n").as_bytes())?;
        self.journal
            .sync_data()
            .context("cannot fsync the import journal")?;
        self.inner.publish(file, writer, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_hashes_ends_and_ignores_the_path() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.log");
        let b = d.path().join("b.log");
        let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        fs::write(&a, &big).unwrap();
        fs::write(&b, &big).unwrap();
        let ia = InputIdentity::of_file(&a).unwrap().unwrap();
        let ib = InputIdentity::of_file(&b).unwrap().unwrap();
        assert!(ia.same_content(&ib));
        assert_ne!(ia.head, ia.tail);
        let mut changed = big.clone();
        *changed.last_mut().unwrap() ^= 1;
        fs::write(&b, &changed).unwrap();
        assert!(!ia.same_content(&InputIdentity::of_file(&b).unwrap().unwrap()));
        fs::write(&b, b"").unwrap();
        assert!(InputIdentity::of_file(&b).unwrap().is_none());
    }

    #[test]
    fn a_grown_input_is_found_by_its_imported_start() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("conn.log");
        let run = |inputs: Vec<InputIdentity>| RunRecord {
            run: "r1".into(),
            finished: "then".into(),
            inputs,
            files: vec![],
            wal_upto: None,
            kafka: Default::default(),
        };
        // Small, then large (over 2 MiB: first and last blocks checked apart).
        for len in [5_000usize, 2_500_000] {
            let text: Vec<u8> = (0..len as u32 * 2).map(|i| (i % 253) as u8).collect();
            fs::write(&p, &text[..len]).unwrap();
            let was = InputIdentity::of_file(&p).unwrap().unwrap();
            let done = vec![run(vec![was.clone()])];
            fs::write(&p, &text).unwrap();
            let now = InputIdentity::of_file(&p).unwrap().unwrap();
            let (r, found) = grown_from(&p, &now, &done).unwrap().expect("grown");
            assert_eq!((r.run.as_str(), found), ("r1", &was));
            // Elsewhere, a small start is no evidence; a large one is.
            let other = d.path().join("other.log");
            fs::write(&other, &text).unwrap();
            let there = InputIdentity::of_file(&other).unwrap().unwrap();
            assert_eq!(
                grown_from(&other, &there, &done).unwrap().is_some(),
                len > 65536
            );
            // Its start changed: the first block, or (large) the last block of what was read.
            for at in [10, len - 10] {
                let mut other = text.clone();
                other[at] ^= 1;
                fs::write(&p, &other).unwrap();
                let now = InputIdentity::of_file(&p).unwrap().unwrap();
                assert!(grown_from(&p, &now, &done).unwrap().is_none(), "{len} {at}");
            }
            // The same size is not growth (that is same_content's question), nor is shrinking.
            fs::write(&p, &text[..len]).unwrap();
            let same = InputIdentity::of_file(&p).unwrap().unwrap();
            assert!(grown_from(&p, &same, &done).unwrap().is_none());
            fs::write(&p, &text[..len - 1]).unwrap();
            let less = InputIdentity::of_file(&p).unwrap().unwrap();
            assert!(grown_from(&p, &less, &done).unwrap().is_none());
        }
    }

    #[test]
    fn a_dead_runs_files_are_removed_and_a_live_runs_are_not() {
        let d = tempfile::tempdir().unwrap();
        let log = ImportLog::open(d.path()).unwrap();
        let f1 = d.path().join("t.x/a.parquet");
        fs::create_dir_all(f1.parent().unwrap()).unwrap();
        fs::write(&f1, b"data").unwrap();
        // A run that died: its journal lists f1 and nobody holds its lock.
        let dead = log.begin().unwrap();
        dead.file
            .try_clone()
            .unwrap()
            .write_all(b"t.x/a.parquet\nt.x/never-renamed.parquet\n")
            .unwrap();
        let dead_id = dead.id.clone();
        drop(dead);
        // A live run holds its lock: untouched.
        let live = log.begin().unwrap();
        let f2 = d.path().join("t.x/b.parquet");
        fs::write(&f2, b"data").unwrap();
        live.file
            .try_clone()
            .unwrap()
            .write_all(b"t.x/b.parquet\n")
            .unwrap();
        // A survey (vacuum --dry-run) says what recovery will do and changes nothing.
        let seen = log.survey().unwrap();
        assert_eq!((seen.runs.clone(), seen.files), (vec![dead_id.clone()], 1));
        assert_eq!(seen.paths, vec![f1.clone()]);
        assert!(f1.exists());
        assert_eq!(log.survey().unwrap().runs, seen.runs);
        let rec = log.recover().unwrap();
        assert_eq!(rec.runs, vec![dead_id]);
        assert_eq!(rec.files, 1);
        assert!(!f1.exists());
        assert!(f2.exists());
        // The live run finishes: recorded, journal gone, nothing more to recover.
        let id = InputIdentity {
            path: "x".into(),
            size: 1,
            head: 2,
            tail: 3,
        };
        let r = live.finish(vec![id.clone()], &[]).unwrap();
        assert_eq!(log.imported_by(&id).unwrap().unwrap().0.run, r.run);
        assert!(log.recover().unwrap().runs.is_empty());
        assert!(f2.exists());
    }

    /// A crash after a run was recorded as done but before its journal was removed: the journal
    /// goes, the files stay (they are the recorded run's), and a serve flush's log position is
    /// what `wal_covered` reports.
    #[test]
    fn a_finished_runs_leftover_journal_keeps_its_files() {
        let d = tempfile::tempdir().unwrap();
        let log = ImportLog::open(d.path()).unwrap();
        let f = d.path().join("t.x/a.parquet");
        fs::create_dir_all(f.parent().unwrap()).unwrap();
        fs::write(&f, b"data").unwrap();
        let run = log.begin().unwrap();
        let (id, journal) = (run.id.clone(), run.journal.clone());
        let published = PublishedFile {
            table: silt_core::TableName::parse("t.x").unwrap(),
            path: f.clone(),
            bytes: 4,
            rows: 1,
        };
        run.finish_with(vec![], &[published], Some(41), KafkaPositions::new())
            .unwrap();
        fs::write(&journal, b"t.x/a.parquet\n").unwrap();
        let rec = log.recover().unwrap();
        assert!(rec.runs.is_empty(), "{:?}", rec.runs);
        assert!(f.exists());
        assert!(!journal.exists());
        assert_eq!(log.wal_covered().unwrap(), Some(41));
        assert_eq!(log.runs().unwrap()[0].run, id);
        // Later flushes replace the record instead of growing done.ndjson.
        for upto in [42, 43] {
            let run = log.begin().unwrap();
            run.finish_with(vec![], &[], Some(upto), KafkaPositions::new())
                .unwrap();
        }
        assert_eq!(log.wal_covered().unwrap(), Some(43));
        assert_eq!(log.runs().unwrap().len(), 1);
        assert!(!d.path().join(IMPORTS_DIR).join(DONE).exists());
    }

    /// Two serve instances on one lake: each covers its own log; Kafka positions are the
    /// highest either recorded; a finished flush of one is never taken for a dead run by the
    /// other's recovery.
    #[test]
    fn instances_keep_their_own_flush_records() {
        let d = tempfile::tempdir().unwrap();
        let a = ImportLog::open_instance(d.path(), Some("a")).unwrap();
        let b = ImportLog::open_instance(d.path(), Some("b")).unwrap();
        let pos = |p: i32, o: i64| {
            let mut k = KafkaPositions::new();
            k.entry("t".into()).or_default().insert(p, o);
            k
        };
        let mut pa = pos(0, 100);
        merge_positions(&mut pa, &pos(1, 5));
        a.begin()
            .unwrap()
            .finish_with(vec![], &[], Some(7), pa)
            .unwrap();
        // b took partition 1 over and went further.
        let f = d.path().join("t.x/b.parquet");
        fs::create_dir_all(f.parent().unwrap()).unwrap();
        fs::write(&f, b"data").unwrap();
        let run = b.begin().unwrap();
        let journal = run.journal.clone();
        run.finish_with(vec![], &[], Some(3), pos(1, 50)).unwrap();
        fs::write(&journal, b"t.x/b.parquet\n").unwrap();
        assert!(a.recover().unwrap().runs.is_empty());
        assert!(f.exists(), "b's finished flush keeps its files");
        assert_eq!(a.wal_covered().unwrap(), Some(7));
        assert_eq!(b.wal_covered().unwrap(), Some(3));
        assert_eq!(
            ImportLog::open(d.path()).unwrap().wal_covered().unwrap(),
            None
        );
        let k = a.kafka_positions().unwrap();
        assert_eq!(k["t"][&0], 100);
        assert_eq!(k["t"][&1], 50);
    }

    /// A member that stalled past its session while flushing: another member claimed its
    /// partition meanwhile, so the flush removes what it published and records nothing; the
    /// new owner's flush goes through.
    #[test]
    fn a_fenced_flush_removes_its_files_and_records_nothing() {
        use crate::claims::{claim, Fence, Fenced};
        let d = tempfile::tempdir().unwrap();
        let a = ImportLog::open_instance(d.path(), Some("a")).unwrap();
        let b = ImportLog::open_instance(d.path(), Some("b")).unwrap();
        let parts = vec![("t".to_string(), 0)];
        let ta = claim(d.path(), "a", &parts).unwrap();
        let run = a.begin().unwrap();
        let journal = run.journal.clone();
        let f = d.path().join("t.x/a.parquet");
        fs::create_dir_all(f.parent().unwrap()).unwrap();
        fs::write(&f, b"data").unwrap();
        run.file
            .try_clone()
            .unwrap()
            .write_all(b"t.x/a.parquet\n")
            .unwrap();
        let tb = claim(d.path(), "b", &parts).unwrap();
        let mut pos = KafkaPositions::new();
        pos.entry("t".into()).or_default().insert(0, 10);
        let fence = |token: &str| Fence {
            partitions: vec![("t".into(), 0, Some(token.to_string()))],
        };
        let e = run
            .finish_fenced(vec![], &[], Some(5), pos.clone(), &fence(&ta))
            .unwrap_err();
        assert!(e.is::<Fenced>(), "{e:#}");
        assert!(!f.exists(), "the fenced flush's file is gone");
        assert!(!journal.exists());
        assert_eq!(a.wal_covered().unwrap(), None, "nothing recorded");
        assert!(a.kafka_positions().unwrap().is_empty());
        b.begin()
            .unwrap()
            .finish_fenced(vec![], &[], Some(2), pos, &fence(&tb))
            .unwrap();
        assert_eq!(b.kafka_positions().unwrap()["t"][&0], 10);
    }
}
