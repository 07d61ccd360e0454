//! Publishing: the single seam through which a finished file becomes part of a table.
//!
//! A file is written under a hidden temporary name in its final directory, flushed and fsynced,
//! then renamed to its final name, and the directory is fsynced. A rename within one directory is
//! atomic, so a reader sees either no file or the whole file, and a crash at any point leaves a
//! readable lake (at worst a hidden `.*.inprogress` file that no reader looks at).
//!
//! Everything that adds files to a table goes through [`Publisher`]; a later transaction log (Delta
//! Lake) implements the same trait, committing the file to the log after the rename.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use silt_core::TableName;

use crate::layout;

/// A file being written: where the bytes go now, and where they will appear.
#[derive(Debug)]
pub struct PendingFile {
    pub table: TableName,
    pub final_path: PathBuf,
    pub temp_path: PathBuf,
}

impl PendingFile {
    /// Creates the temporary file (and the partition directory).
    pub fn create(
        table: TableName,
        final_path: PathBuf,
    ) -> anyhow::Result<(Self, BufWriter<File>)> {
        let dir = final_path.parent().context("file has no directory")?;
        fs::create_dir_all(dir)
            .with_context(|| format!("cannot create directory {}", dir.display()))?;
        let temp_path = layout::temp_path(&final_path);
        let f = File::create(&temp_path)
            .with_context(|| format!("cannot create {}", temp_path.display()))?;
        // Held until the file is closed (renamed into place or abandoned): `silt vacuum` and
        // retention tell a live writer's file from a dead one's by it ([`in_use`]), since a
        // writer may leave its file untouched for as long as its rows wait in a sort buffer.
        // A file system without `flock` leaves them the file's age to go by.
        let _ = f.try_lock();
        Ok((
            Self {
                table,
                final_path,
                temp_path,
            },
            BufWriter::with_capacity(1 << 20, f),
        ))
    }

    /// Removes the temporary file of a write that was given up.
    pub fn abandon(self) {
        let _ = fs::remove_file(&self.temp_path);
    }
}

/// Whether the temporary file at `path` is held by a live writer ([`PendingFile::create`]
/// locks it for as long as it writes). `false` when the lock is free, the file is gone, or the
/// file system cannot lock.
pub fn in_use(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| matches!(f.try_lock(), Err(fs::TryLockError::WouldBlock)))
}

/// A file that is now part of its table.
#[derive(Debug, Clone)]
pub struct PublishedFile {
    pub table: TableName,
    pub path: PathBuf,
    pub bytes: u64,
    pub rows: u64,
}

/// Makes finished files visible.
pub trait Publisher: Send {
    /// `file`'s bytes are complete and flushed into `writer`; make it durable and visible.
    fn publish(
        &mut self,
        file: PendingFile,
        writer: BufWriter<File>,
        rows: u64,
    ) -> anyhow::Result<PublishedFile>;
}

/// Publishing by atomic rename in a plain directory tree.
#[derive(Debug, Default)]
pub struct DirectoryPublisher;

impl Publisher for DirectoryPublisher {
    fn publish(
        &mut self,
        file: PendingFile,
        writer: BufWriter<File>,
        rows: u64,
    ) -> anyhow::Result<PublishedFile> {
        let bytes = seal(&file, writer)?;
        reveal(file, bytes, rows)
    }
}

/// The first half of publishing: flushes and fsyncs the temporary file; returns its size. A
/// publisher that must record something before the file becomes visible (the replacement record
/// of a compaction, [`crate::replace`]) does it between [`seal`] and [`reveal`].
pub fn seal(file: &PendingFile, writer: BufWriter<File>) -> anyhow::Result<u64> {
    let f = writer
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("cannot write {}", file.temp_path.display()))?;
    f.sync_all()
        .with_context(|| format!("cannot fsync {}", file.temp_path.display()))?;
    Ok(f.metadata()?.len())
}

/// The second half: renames the sealed file to its final name (the moment it becomes visible)
/// and fsyncs the directory.
pub fn reveal(file: PendingFile, bytes: u64, rows: u64) -> anyhow::Result<PublishedFile> {
    fs::rename(&file.temp_path, &file.final_path).with_context(|| {
        format!(
            "cannot rename {} to {}",
            file.temp_path.display(),
            file.final_path.display()
        )
    })?;
    sync_dir(file.final_path.parent().unwrap_or(Path::new(".")));
    Ok(PublishedFile {
        table: file.table,
        path: file.final_path,
        bytes,
        rows,
    })
}

/// Fsyncs a directory so a rename in it survives a crash (best effort: not every platform
/// can open a directory for syncing).
pub fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Writes `bytes` to `final_path` atomically (temp, fsync, rename); for small files such as rejects
/// and table records. The temporary name is unique: several processes may write the same file at
/// once (importers creating one table each write its record), and the last rename wins whole.
pub fn write_atomic(final_path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = final_path.parent().context("path has no directory")?;
    fs::create_dir_all(dir)?;
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = final_path.with_file_name(format!(
        ".{name}.{}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8],
        layout::IN_PROGRESS_SUFFIX
    ));
    let written = File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, final_path)
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e.into());
    }
    sync_dir(dir);
    Ok(())
}
