//! Scratch directories (an object-store import's staging, a compaction's outputs, a Kafka
//! import's server state) that a later run removes when the run that made them died.
//!
//! A run that ends, even with an error, removes its scratch directory ([`tempfile::TempDir`]'s
//! drop). A run killed with SIGKILL (or by the OOM killer, or a power cut) cannot: its directory
//! stays in `$TMPDIR` with whatever it held, up to one file per table and partition being
//! written, and nothing would ever remove it. So each scratch directory holds an exclusive lock
//! on its `.owner` file for as long as its run lives (the kernel releases a `flock` when its
//! process dies, however it dies), and [`ScratchDir::new`] first removes every directory next to
//! the new one with the same prefix whose `.owner` lock it can take.
//!
//! The lock file is made under another name, locked, and only then renamed to `.owner`, so a
//! sweeping run never takes the lock of a directory whose owner has not locked it yet. A
//! directory without an `.owner` file (made by a silt before this module, or by an owner still
//! between creating the directory and renaming its lock) is removed only once it has not changed
//! for [`UNOWNED_AGE`]; so is a directory on a file system where `flock` fails, whose run then
//! makes no `.owner` at all.
//!
//! Touches only the directories whose names start with the prefix it is given, in the parent it
//! is given (`$TMPDIR` by default).

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Age after which a scratch directory without an `.owner` file is taken for a dead run's.
pub const UNOWNED_AGE: Duration = Duration::from_secs(24 * 3600);

const OWNER: &str = ".owner";
const OWNER_NEW: &str = ".owner.new";

/// A scratch directory, removed when dropped; locked as its run's while it exists.
#[derive(Debug)]
pub struct ScratchDir {
    // Field order matters: the directory is removed before the lock is released, so that a
    // sweeping run never finds the lock free on a directory that is still being removed.
    dir: tempfile::TempDir,
    _owner: Option<File>,
}

impl ScratchDir {
    /// A new directory `<parent>/<prefix><random>` (`parent`: `$TMPDIR` when `None`), after
    /// removing the dead runs' directories of the same prefix there ([`sweep`]).
    pub fn new(parent: Option<&Path>, prefix: &str) -> io::Result<ScratchDir> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        sweep(&parent, prefix);
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&parent)?;
        let new = dir.path().join(OWNER_NEW);
        let owner = File::create(&new)?;
        let owner = match owner.try_lock() {
            Ok(()) => {
                std::fs::rename(&new, dir.path().join(OWNER))?;
                Some(owner)
            }
            // A file system without `flock` (some network mounts): no `.owner`, so no sweep
            // takes the directory for a dead run's while it lives (only once unchanged for
            // UNOWNED_AGE); the run still removes it when it ends.
            Err(_) => {
                drop(owner);
                std::fs::remove_file(&new)?;
                None
            }
        };
        Ok(ScratchDir { dir, _owner: owner })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the directories `<parent>/<prefix>*` of runs that died: those whose `.owner` lock is
/// free, and those without one that have not changed for [`UNOWNED_AGE`]. Returns the
/// directories removed. Errors (another user's directory, a race with another sweep) leave a
/// directory where it is: sweeping is a courtesy, never a reason for a run to fail.
pub fn sweep(parent: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(parent) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_str().is_some_and(|n| n.starts_with(prefix)) {
            continue;
        }
        // Not through a symbolic link: only directories a silt made.
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = e.path();
        if dead(&path) && std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Whether the run that made scratch directory `dir` is gone: its `.owner` lock is free, or it
/// has no `.owner` and is older than [`UNOWNED_AGE`]. The lock taken to find out is released
/// when this returns, before the caller removes the directory; that is safe because a live owner
/// never releases its lock while its directory exists (it removes the directory first), and two
/// sweeps removing the same directory only make one of them fail.
fn dead(dir: &Path) -> bool {
    match File::open(dir.join(OWNER)) {
        Ok(f) => f.try_lock().is_ok(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::metadata(dir)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= UNOWNED_AGE),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_runs_directory_stays_and_a_dead_ones_goes() {
        let parent = tempfile::tempdir().unwrap();
        let live = ScratchDir::new(Some(parent.path()), "silt-t-").unwrap();
        std::fs::write(live.path().join("part.parquet"), b"x").unwrap();
        assert!(live.path().join(OWNER).exists());
        // A second run of the same prefix leaves the first one's directory alone.
        let other = ScratchDir::new(Some(parent.path()), "silt-t-").unwrap();
        assert!(live.path().join("part.parquet").exists());
        // A dead run: its directory and `.owner` stay, its lock is gone (here: a directory made
        // as `new` makes it, whose lock file was closed).
        let dead_dir = parent.path().join("silt-t-dead");
        std::fs::create_dir(&dead_dir).unwrap();
        File::create(dead_dir.join(OWNER)).unwrap();
        std::fs::write(dead_dir.join("x.parquet.inprogress"), b"half").unwrap();
        // Not of this prefix: never touched.
        let foreign = parent.path().join("other-dead");
        std::fs::create_dir(&foreign).unwrap();
        File::create(foreign.join(OWNER)).unwrap();
        // Without an owner file and fresh: perhaps a run between mkdir and rename; kept.
        let fresh = parent.path().join("silt-t-fresh");
        std::fs::create_dir(&fresh).unwrap();
        let removed = sweep(parent.path(), "silt-t-");
        assert_eq!(removed, vec![dead_dir.clone()]);
        assert!(!dead_dir.exists());
        assert!(foreign.exists() && fresh.exists());
        assert!(live.path().exists() && other.path().exists());
        // Old and without an owner file: a dead run of a silt before the lock.
        let old = std::time::SystemTime::now() - UNOWNED_AGE - Duration::from_secs(60);
        File::open(&fresh).unwrap().set_modified(old).unwrap();
        assert_eq!(sweep(parent.path(), "silt-t-"), vec![fresh.clone()]);
        // A run that ends removes its own directory.
        let p = live.path().to_path_buf();
        drop(live);
        assert!(!p.exists());
        assert!(other.path().exists());
    }

    /// The lock is the process's: a child process killed with SIGKILL leaves its directory,
    /// which the next run removes.
    #[cfg(unix)]
    #[test]
    fn a_killed_processs_directory_is_swept() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("silt-k-1");
        std::fs::create_dir(&dir).unwrap();
        // The child locks `.owner` with util-linux's `flock` on a descriptor that `sleep`
        // inherits (the child's pid is `sleep`'s after the last `exec`).
        let owner = dir.join(OWNER);
        File::create(&owner).unwrap();
        let mut child = std::process::Command::new("sh")
            .args(["-c", r#"exec 9>>"$0" && flock -x 9 && exec sleep 30"#])
            .arg(&owner)
            .spawn()
            .unwrap();
        // Wait until the child holds the lock.
        let t0 = std::time::Instant::now();
        while File::open(&owner).unwrap().try_lock().is_ok() {
            assert!(t0.elapsed() < Duration::from_secs(10), "flock never locked");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(sweep(parent.path(), "silt-k-").is_empty());
        assert!(dir.exists());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(sweep(parent.path(), "silt-k-"), vec![dir.clone()]);
        assert!(!dir.exists());
    }
}
