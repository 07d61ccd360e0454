//! Vacuum: removes what no reader counts any more, once it is older than a grace period.
//!
//! - files of imports or `silt serve` flushes that died (the journal nobody holds, see
//!   [`crate::imports`]): their inputs import again, or the server replays its log;
//! - inputs a committed compaction replaced that a crash left behind, and replacement records
//!   past the grace period ([`crate::replace::recover`]);
//! - temporary files (`.*.inprogress`) not modified within the grace period and not locked: a
//!   writer that died left them (a live writer holds a lock on its file,
//!   [`crate::publish::in_use`], and may leave it untouched for long while its rows wait in a
//!   sort buffer, as a slow standard input's do);
//! - the retention trash (`_silt/trash/`), and partition directories left empty, also after the
//!   grace period (a writer may have just created one).
//!
//! - in a table with a Delta log ([`crate::delta`]), data files the log does not name, not
//!   modified within the grace period, and not listed by a live import's journal (silt commits
//!   every file it writes, so these are files another tool left, or whose commit a crash lost
//!   after the run's recovery).
//!
//! Plain Hive lakes have no other unreferenced files: every data file that is not hidden is part
//! of its table.
//!
//! Touches the lake's hidden files and empty directories, the files the records above name, and
//! `_silt/`.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;

use crate::imports::ImportLog;
use crate::layout;
use crate::replace::{self, MaintenanceLock, Recovery};
use crate::retain::TRASH_DIR;

/// What to remove.
#[derive(Debug, Clone)]
pub struct VacuumOptions {
    pub grace: Duration,
    /// Report only.
    pub dry_run: bool,
}

impl Default for VacuumOptions {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(3600),
            dry_run: false,
        }
    }
}

/// What a vacuum removed (or would remove).
#[derive(Debug, Default)]
pub struct VacuumReport {
    /// Imports or flushes that died, and their files removed.
    pub dead_imports: usize,
    pub dead_import_files: usize,
    pub replacements: Recovery,
    /// Temporary files removed and their bytes.
    pub temp_files: usize,
    pub temp_bytes: u64,
    /// Trash entries and empty directories removed.
    pub trash: usize,
    pub empty_dirs: usize,
    /// Data files of Delta tables that their log does not name, and their bytes.
    pub unreferenced: usize,
    pub unreferenced_bytes: u64,
}

fn age(md: &fs::Metadata, now: SystemTime) -> Duration {
    md.modified()
        .ok()
        .and_then(|m| now.duration_since(m).ok())
        .unwrap_or_default()
}

/// Vacuums `root` (see the module documentation).
pub fn vacuum(root: &Path, opts: &VacuumOptions, now: SystemTime) -> anyhow::Result<VacuumReport> {
    if !layout::require_lake_dir(root)? {
        return Ok(VacuumReport::default());
    }
    let lock = MaintenanceLock::acquire(root)?;
    let mut rep = VacuumReport::default();
    let r = ImportLog::open(root)?.recover_or_survey(opts.dry_run)?;
    rep.dead_imports = r.runs.len();
    rep.dead_import_files = r.files;
    rep.replacements = replace::recover_or_survey(&lock, opts.grace, opts.dry_run)?;
    let in_flight = ImportLog::open(root)?.in_flight()?;
    for table in layout::tables(root)? {
        let dir = root.join(table.to_string());
        let lake = crate::delta::Lake::Dir(root);
        for rel in crate::delta::unreferenced(lake, &table.to_string())?.unwrap_or_default() {
            let p = root.join(&rel);
            let Ok(md) = fs::metadata(&p) else { continue };
            if in_flight.contains(&rel) || age(&md, now) < opts.grace {
                continue;
            }
            rep.unreferenced += 1;
            rep.unreferenced_bytes += md.len();
            if !opts.dry_run {
                fs::remove_file(&p).with_context(|| format!("cannot remove {}", p.display()))?;
            }
        }
        sweep(&dir, opts, now, &mut rep, false)?;
    }
    let trash = root.join(TRASH_DIR);
    if let Ok(rd) = fs::read_dir(&trash) {
        for e in rd.flatten() {
            let Ok(md) = e.metadata() else { continue };
            if age(&md, now) < opts.grace {
                continue;
            }
            rep.trash += 1;
            if !opts.dry_run {
                let p = e.path();
                let r = if md.is_dir() {
                    fs::remove_dir_all(&p)
                } else {
                    fs::remove_file(&p)
                };
                r.with_context(|| format!("cannot remove {}", p.display()))?;
            }
        }
    }
    drop(lock);
    Ok(rep)
}

/// Removes old temporary files below `dir`, then `dir` itself when it is left empty and old
/// (never the table directory, `top`); returns whether `dir` is gone.
fn sweep(
    dir: &Path,
    opts: &VacuumOptions,
    now: SystemTime,
    rep: &mut VacuumReport,
    removable: bool,
) -> anyhow::Result<bool> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
    };
    let mut left = 0usize;
    for e in rd {
        let e = e?;
        let p = e.path();
        let Ok(md) = e.metadata() else { continue };
        let name = e.file_name().to_string_lossy().into_owned();
        if md.is_dir() {
            // `_delta_log/` and other markers belong to other tools.
            if layout::is_hidden(&name) || !sweep(&p, opts, now, rep, true)? {
                left += 1;
            }
            continue;
        }
        if name.starts_with('.')
            && name.ends_with(layout::IN_PROGRESS_SUFFIX)
            && age(&md, now) >= opts.grace
            && !crate::publish::in_use(&p)
        {
            rep.temp_files += 1;
            rep.temp_bytes += md.len();
            if !opts.dry_run {
                fs::remove_file(&p).with_context(|| format!("cannot remove {}", p.display()))?;
            }
            continue;
        }
        left += 1;
    }
    if removable && left == 0 {
        let old = fs::metadata(dir)
            .map(|m| age(&m, now) >= opts.grace)
            .unwrap_or(false);
        if old {
            rep.empty_dirs += 1;
            if !opts.dry_run {
                // A writer that created a file meanwhile keeps the directory (not empty).
                if fs::remove_dir(dir).is_err() {
                    rep.empty_dirs -= 1;
                    return Ok(false);
                }
            }
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_old_temporaries_trash_and_empty_partitions_only() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let t = root.join("zeek.conn");
        let part = t.join("dt=2024-01-01/hour=00");
        fs::create_dir_all(&part).unwrap();
        fs::create_dir_all(t.join("dt=2024-01-02/hour=01")).unwrap();
        fs::write(part.join("a.parquet"), b"data").unwrap();
        fs::write(part.join(".b.parquet.inprogress"), b"half").unwrap();
        fs::create_dir_all(root.join(TRASH_DIR).join("x/dt=2023-01-01")).unwrap();
        let opts = VacuumOptions {
            grace: Duration::from_secs(3600),
            dry_run: false,
        };
        // Within the grace period nothing goes.
        let rep = vacuum(root, &opts, SystemTime::now()).unwrap();
        assert_eq!((rep.temp_files, rep.trash, rep.empty_dirs), (0, 0, 0));
        assert!(part.join(".b.parquet.inprogress").exists());
        // Two hours later: the temporary file, the trash and the empty partition go; data stays.
        let later = SystemTime::now() + Duration::from_secs(7200);
        let rep = vacuum(root, &opts, later).unwrap();
        assert_eq!((rep.temp_files, rep.trash, rep.empty_dirs), (1, 1, 2));
        assert!(part.join("a.parquet").exists());
        assert!(!part.join(".b.parquet.inprogress").exists());
        assert!(!t.join("dt=2024-01-02").exists());
        assert!(t.is_dir());
    }

    #[test]
    fn a_live_writers_temporary_file_stays_however_old() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let final_path = root.join("zeek.conn/dt=2024-01-01/a.parquet");
        let (pending, w) = crate::publish::PendingFile::create(
            silt_core::TableName::parse("zeek.conn").unwrap(),
            final_path,
        )
        .unwrap();
        std::fs::create_dir_all(root.join("_silt")).unwrap();
        let opts = VacuumOptions {
            grace: Duration::ZERO,
            dry_run: false,
        };
        let later = SystemTime::now() + Duration::from_secs(7200);
        let rep = vacuum(root, &opts, later).unwrap();
        assert_eq!(rep.temp_files, 0);
        assert!(pending.temp_path.exists());
        // The writer died (its file closed, the lock gone): the file goes.
        drop(w);
        let rep = vacuum(root, &opts, later).unwrap();
        assert_eq!(rep.temp_files, 1);
        assert!(!pending.temp_path.exists());
    }
}
