//! Replacing files: how compaction swaps some of a partition's files for one merged file so that
//! every silt reader sees either the old files or the new one, never both, and a crash at any
//! point leaves a lake that is whole once silt next opens it. Plain Hive lakes have no
//! transaction log, so this small protocol is silt's own:
//!
//! 1. the merged file is written under a hidden temporary name and fsynced;
//! 2. a *replacement record* `<lake>/_silt/replace/<id>.json` naming the output and its inputs
//!    (paths relative to the lake) is written atomically;
//! 3. the output is renamed into place: **the commit point**;
//! 4. the inputs are removed;
//! 5. the record stays for a grace period, so that a reader that listed the inputs just before
//!    step 4 still leaves them out, then [`recover`] (run by `silt vacuum` and every maintenance
//!    command) removes it.
//!
//! Readers ([`crate::layout::data_files`], so `silt query`, `silt tables`, `silt serve`) list the
//! files first and read the records after: the inputs of a record whose output is in the listing
//! are left out. Before step 3 the output is not listed, so the inputs count; from step 3 on the
//! output counts and the inputs do not.
//!
//! Recovery ([`recover`]): a record whose output exists has its remaining inputs removed, so that
//! other engines' globs (DuckDB, Spark) see the lake right again; a record whose output does not
//! exist is a compaction that died before its commit: its temporary file and the record go, the
//! inputs stay. Recovery only runs under the [`MaintenanceLock`], which every `compact`, `retain`
//! and `vacuum` holds for its whole run, so it never undoes a compaction that is still going.
//!
//! Touches only `<lake>/_silt/replace/`, `<lake>/_silt/maintenance.lock`, and the files records
//! name.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::publish::{self, PendingFile, PublishedFile, Publisher};

/// Directory of the replacement records, below the lake root.
pub const REPLACE_DIR: &str = "_silt/replace";
/// The lock every maintenance command holds, below the lake root.
pub const LOCK_FILE: &str = "_silt/maintenance.lock";

/// How long a finished record stays when import or serve recover a lake (maintenance commands
/// take theirs from `--grace`): longer than any listing-then-reading takes.
pub const RECORD_GRACE: Duration = Duration::from_secs(3600);

/// One replacement: `output` takes the place of `inputs` (paths relative to the lake root).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Replacement {
    pub table: String,
    pub output: String,
    /// The output's temporary name until the commit (removed if the compaction died before).
    #[serde(default)]
    pub temp: String,
    pub inputs: Vec<String>,
    /// Rows in the output (= rows in the inputs).
    pub rows: u64,
    /// RFC 3339 time the record was written.
    pub created: String,
}

impl Replacement {
    /// A record of `output` replacing `inputs` (paths relative to the lake), written now.
    pub fn new(table: &str, output: String, temp: String, inputs: Vec<String>, rows: u64) -> Self {
        Self {
            table: table.to_string(),
            output,
            temp,
            inputs,
            rows,
            created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }
    }

    /// The record's name in [`REPLACE_DIR`]: the output's stem (unique) with `.json`.
    pub fn file_name(&self) -> String {
        let stem = Path::new(&self.output)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        format!("{stem}.json")
    }
}

/// An error unless a compaction's output holds exactly the rows read from its inputs.
pub(crate) fn check_rows(
    table: &str,
    inputs: usize,
    rows: u64,
    expected: u64,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        rows == expected,
        "compaction of {inputs} files of {table} wrote {rows} rows but read {expected}: nothing \
         was replaced (this is a bug in silt; please report it)"
    );
    Ok(())
}

/// The exclusive right to change a lake's existing files (compact, retain, vacuum, recovery),
/// held until dropped. Writers that only add files (import, serve) do not take it.
#[derive(Debug)]
pub struct MaintenanceLock {
    _file: File,
    root: PathBuf,
}

impl MaintenanceLock {
    /// Takes the lock, or says who holds it.
    pub fn acquire(root: &Path) -> anyhow::Result<Self> {
        match Self::try_acquire(root)? {
            Some(l) => Ok(l),
            None => {
                let p = root.join(LOCK_FILE);
                let who = fs::read_to_string(&p).unwrap_or_default();
                anyhow::bail!(
                    "another silt compact, retain or vacuum is working on {} (it holds {}{}); \
                     wait for it to finish, or stop it",
                    root.display(),
                    p.display(),
                    if who.trim().is_empty() {
                        String::new()
                    } else {
                        format!(", {}", who.trim())
                    }
                )
            }
        }
    }

    /// Takes the lock if nobody holds it.
    pub fn try_acquire(root: &Path) -> anyhow::Result<Option<Self>> {
        let p = root.join(LOCK_FILE);
        if let Some(d) = p.parent() {
            fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        let mut f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .read(true)
            .open(&p)
            .with_context(|| format!("cannot open {}", p.display()))?;
        match f.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => return Ok(None),
            Err(fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", p.display()))
            }
        }
        // Who holds it, for the message another process prints.
        let _ = f.set_len(0);
        let _ = writeln!(f, "pid {}", std::process::id());
        Ok(Some(Self {
            _file: f,
            root: root.to_path_buf(),
        }))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// Every record of the lake with its file name, unreadable ones left out (a record is written
/// atomically, so one that does not parse is not silt's).
fn records(root: &Path) -> anyhow::Result<Vec<(PathBuf, Replacement)>> {
    let dir = root.join(REPLACE_DIR);
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    let mut out = Vec::new();
    for e in rd {
        let p = e?.path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        // A record removed between listing and reading (recovery) hides nothing any more.
        let Ok(bytes) = fs::read(&p) else { continue };
        if let Ok(r) = serde_json::from_slice::<Replacement>(&bytes) {
            out.push((p, r));
        }
    }
    Ok(out)
}

/// The files of `table` (paths relative to its directory) that a committed replacement took out:
/// inputs of records whose output is in `listed` (also relative to the table directory).
pub fn replaced(
    root: &Path,
    table: &str,
    listed: &HashSet<PathBuf>,
) -> anyhow::Result<HashSet<PathBuf>> {
    let mut out = HashSet::new();
    for (_, r) in records(root)? {
        if r.table != table {
            continue;
        }
        let Ok(output) = Path::new(&r.output).strip_prefix(table) else {
            continue;
        };
        if !listed.contains(output) {
            continue;
        }
        for i in &r.inputs {
            if let Ok(i) = Path::new(i).strip_prefix(table) {
                out.insert(i.to_path_buf());
            }
        }
    }
    Ok(out)
}

/// What a [`ReplacingPublisher`] recorded: the record's path and content.
pub type Written = Arc<std::sync::Mutex<Option<(PathBuf, Replacement)>>>;

/// A [`Publisher`] for one compaction output: checks the row count, writes the replacement
/// record between sealing the file and revealing it (see the module documentation).
pub struct ReplacingPublisher {
    root: PathBuf,
    table: String,
    inputs: Vec<String>,
    /// Rows read from the inputs; the output must hold exactly these.
    expected_rows: Arc<AtomicU64>,
    /// The record written (set by `publish`): where, and what it says.
    pub written: Written,
}

impl ReplacingPublisher {
    /// `inputs` are absolute paths below `root`; `expected_rows` is filled while they are read.
    pub fn new(
        root: &Path,
        table: &str,
        inputs: &[PathBuf],
        expected_rows: Arc<AtomicU64>,
    ) -> anyhow::Result<Self> {
        let inputs = inputs
            .iter()
            .map(|p| relative(root, p))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Self {
            root: root.to_path_buf(),
            table: table.to_string(),
            inputs,
            expected_rows,
            written: Arc::default(),
        })
    }
}

fn relative(root: &Path, p: &Path) -> anyhow::Result<String> {
    Ok(p.strip_prefix(root)
        .with_context(|| format!("{} is not below the lake {}", p.display(), root.display()))?
        .to_string_lossy()
        .into_owned())
}

impl Publisher for ReplacingPublisher {
    fn publish(
        &mut self,
        file: PendingFile,
        writer: BufWriter<File>,
        rows: u64,
    ) -> anyhow::Result<PublishedFile> {
        let expected = self.expected_rows.load(Ordering::SeqCst);
        if let Err(e) = check_rows(&self.table, self.inputs.len(), rows, expected) {
            drop(writer);
            file.abandon();
            return Err(e);
        }
        // A Delta table can only swap files its log names (checked before the output appears,
        // so that the commit below cannot fail for that reason).
        if let Err(e) =
            crate::delta::check_replaceable(crate::delta::Lake::Dir(&self.root), &self.inputs)
        {
            drop(writer);
            file.abandon();
            return Err(e);
        }
        let bytes = publish::seal(&file, writer)?;
        let rec = Replacement::new(
            &self.table,
            relative(&self.root, &file.final_path)?,
            relative(&self.root, &file.temp_path)?,
            self.inputs.clone(),
            rows,
        );
        let record = self.root.join(REPLACE_DIR).join(rec.file_name());
        publish::write_atomic(&record, &serde_json::to_vec_pretty(&rec)?)
            .with_context(|| format!("cannot write {}", record.display()))?;
        failpoint("compact-recorded");
        let published = publish::reveal(file, bytes, rows)?;
        failpoint("compact-renamed");
        crate::delta::commit_replacement(
            crate::delta::Lake::Dir(&self.root),
            &rec.output,
            &rec.inputs,
            "silt compact",
        )?;
        *self
            .written
            .lock()
            .map_err(|_| anyhow::anyhow!("lock poisoned"))? = Some((record, rec));
        Ok(published)
    }
}

/// Removes the inputs of a committed replacement (step 4); files already gone are fine.
pub fn remove_inputs(root: &Path, rec: &Replacement) -> anyhow::Result<usize> {
    let mut removed = 0;
    let mut dirs = HashSet::new();
    for i in &rec.inputs {
        let p = root.join(i);
        match fs::remove_file(&p) {
            Ok(()) => {
                removed += 1;
                if let Some(d) = p.parent() {
                    dirs.insert(d.to_path_buf());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", p.display())),
        }
        failpoint("compact-removing");
    }
    for d in dirs {
        publish::sync_dir(&d);
    }
    Ok(removed)
}

/// What [`recover`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Committed replacements whose leftover inputs were removed.
    pub completed: usize,
    /// Input files removed for them.
    pub inputs_removed: usize,
    /// Replacements that died before their commit (record and temporary file removed).
    pub abandoned: usize,
    /// Finished records past the grace period, and records whose output and inputs are both
    /// gone (retention dropped their partition), removed.
    pub expired: usize,
}

impl Recovery {
    pub fn is_empty(&self) -> bool {
        *self == Recovery::default()
    }
}

/// Finishes or undoes every replacement a crash left (see the module documentation), and removes
/// finished records older than `grace`. Needs the lock, so it never touches a live compaction.
pub fn recover(lock: &MaintenanceLock, grace: Duration) -> anyhow::Result<Recovery> {
    recover_or_survey(lock, grace, false)
}

/// What [`recover`] would do now, changing nothing (`silt vacuum --dry-run`).
pub fn survey(lock: &MaintenanceLock, grace: Duration) -> anyhow::Result<Recovery> {
    recover_or_survey(lock, grace, true)
}

/// [`survey`] when `dry`, else [`recover`].
pub fn recover_or_survey(
    lock: &MaintenanceLock,
    grace: Duration,
    dry: bool,
) -> anyhow::Result<Recovery> {
    let root = lock.root();
    let mut rep = Recovery::default();
    let now = SystemTime::now();
    for (path, r) in records(root)? {
        let output = root.join(&r.output);
        if output.exists() {
            let n = if dry {
                r.inputs.iter().filter(|i| root.join(i).is_file()).count()
            } else {
                // A Delta table's log must have the swap before its inputs go.
                crate::delta::commit_replacement(
                    crate::delta::Lake::Dir(root),
                    &r.output,
                    &r.inputs,
                    "silt recovery",
                )?;
                remove_inputs(root, &r)?
            };
            if n > 0 {
                rep.completed += 1;
                rep.inputs_removed += n;
            }
            let age = fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default();
            if age >= grace {
                if !dry {
                    fs::remove_file(&path)
                        .with_context(|| format!("cannot remove {}", path.display()))?;
                }
                rep.expired += 1;
            }
        } else {
            if !dry {
                if !r.temp.is_empty() {
                    let _ = fs::remove_file(root.join(&r.temp));
                }
                fs::remove_file(&path)
                    .with_context(|| format!("cannot remove {}", path.display()))?;
            }
            // Neither output nor inputs (retention dropped the partition since): an old
            // record, nothing to undo.
            if r.inputs.iter().any(|i| root.join(i).exists()) {
                rep.abandoned += 1;
            } else {
                rep.expired += 1;
            }
        }
    }
    if !dry {
        publish::sync_dir(&root.join(REPLACE_DIR));
    }
    Ok(rep)
}

/// Runs [`recover`] when no maintenance command is running (import and serve call this at start,
/// so a lake a crashed compaction left is whole for other engines once silt next opens it).
pub fn recover_if_idle(root: &Path, grace: Duration) -> anyhow::Result<Option<Recovery>> {
    if !root.join(REPLACE_DIR).is_dir() {
        return Ok(None);
    }
    match MaintenanceLock::try_acquire(root)? {
        Some(lock) => recover(&lock, grace).map(Some),
        None => Ok(None),
    }
}

/// Test hook: `SILT_FAILPOINT=<name>` makes the process abort (as a SIGKILL would stop it) when it
/// reaches the named point, so tests can crash a maintenance command at each of its steps;
/// `SILT_FAILPOINT=stall:<name>` makes the thread that reaches it wait there for ever instead (as
/// one held by a hung disk or network mount would), so tests can see what waits for it.
pub fn failpoint(name: &str) {
    if failpoint_set(name) {
        eprintln!("silt: failpoint {name} reached, aborting");
        std::process::abort();
    }
    if std::env::var_os("SILT_FAILPOINT").and_then(|v| {
        v.to_str()
            .and_then(|v| v.strip_prefix("stall:").map(|n| n == name))
    }) == Some(true)
    {
        eprintln!("silt: failpoint {name} reached, stalling");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// Test hook: true when `SILT_FAILPOINT=<name>`, where the caller then fails the I/O the point
/// stands for, every time, as a full or failing disk would (a test of how a run copes with an
/// error that persists).
pub fn failpoint_set(name: &str) -> bool {
    std::env::var_os("SILT_FAILPOINT").is_some_and(|v| v.to_str() == Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(output: &str, inputs: &[&str]) -> Replacement {
        Replacement {
            table: "t.x".into(),
            output: output.into(),
            temp: output.replace("/c.", "/.c.").replace("/d.", "/.d.") + ".inprogress",
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            rows: 1,
            created: String::new(),
        }
    }

    #[test]
    fn inputs_are_hidden_only_once_the_output_is_listed() {
        let d = tempfile::tempdir().unwrap();
        let r = rec(
            "t.x/dt=2024-01-01/c.parquet",
            &["t.x/dt=2024-01-01/a.parquet"],
        );
        publish::write_atomic(
            &d.path().join(REPLACE_DIR).join("c.json"),
            &serde_json::to_vec(&r).unwrap(),
        )
        .unwrap();
        let a = PathBuf::from("dt=2024-01-01/a.parquet");
        let c = PathBuf::from("dt=2024-01-01/c.parquet");
        let before: HashSet<PathBuf> = [a.clone()].into();
        assert!(replaced(d.path(), "t.x", &before).unwrap().is_empty());
        let after: HashSet<PathBuf> = [a.clone(), c].into();
        assert_eq!(
            replaced(d.path(), "t.x", &after).unwrap(),
            [a.clone()].into()
        );
        // Another table's record hides nothing here.
        assert!(replaced(d.path(), "t.y", &after).unwrap().is_empty());
    }

    #[test]
    fn recovery_completes_committed_and_undoes_uncommitted_replacements() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let part = root.join("t.x/dt=2024-01-01");
        fs::create_dir_all(&part).unwrap();
        for f in ["a.parquet", "b.parquet", "c.parquet", "x.parquet"] {
            fs::write(part.join(f), b"data").unwrap();
        }
        // c replaced a (committed); d replaced b but died before its rename.
        let done = rec(
            "t.x/dt=2024-01-01/c.parquet",
            &["t.x/dt=2024-01-01/a.parquet"],
        );
        let died = rec(
            "t.x/dt=2024-01-01/d.parquet",
            &["t.x/dt=2024-01-01/b.parquet"],
        );
        fs::write(part.join(".d.parquet.inprogress"), b"half").unwrap();
        // e's output and input are both gone (retention dropped them since): an old record.
        let gone = rec(
            "t.x/dt=2024-01-01/e.parquet",
            &["t.x/dt=2024-01-01/y.parquet"],
        );
        for (n, r) in [("c", &done), ("d", &died), ("e", &gone)] {
            publish::write_atomic(
                &root.join(REPLACE_DIR).join(format!("{n}.json")),
                &serde_json::to_vec(r).unwrap(),
            )
            .unwrap();
        }
        let lock = MaintenanceLock::acquire(root).unwrap();
        // A second maintenance command is refused while the lock is held.
        let err = MaintenanceLock::acquire(root).unwrap_err().to_string();
        assert!(err.contains("another silt compact"), "{err}");
        // A survey (vacuum --dry-run) reports the same and changes nothing.
        let seen = survey(&lock, Duration::from_secs(3600)).unwrap();
        assert!(part.join("a.parquet").exists());
        assert!(root.join(REPLACE_DIR).join("d.json").exists());
        let rep = recover(&lock, Duration::from_secs(3600)).unwrap();
        assert_eq!(seen, rep);
        assert_eq!(
            rep,
            Recovery {
                completed: 1,
                inputs_removed: 1,
                abandoned: 1,
                expired: 1
            }
        );
        assert!(!part.join("a.parquet").exists());
        assert!(part.join("b.parquet").exists());
        assert!(!part.join(".d.parquet.inprogress").exists());
        // The committed record stays for its grace period, then goes.
        assert!(root.join(REPLACE_DIR).join("c.json").exists());
        assert!(!root.join(REPLACE_DIR).join("d.json").exists());
        let rep = recover(&lock, Duration::ZERO).unwrap();
        assert_eq!(rep.expired, 1);
        assert!(!root.join(REPLACE_DIR).join("c.json").exists());
    }
}
