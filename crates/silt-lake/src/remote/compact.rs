//! `silt compact` on an object-store lake: the planning, merging and checks of
//! [`crate::compact`], with the lake's [`RemoteLock`] for the maintenance lock, the replacement
//! protocol of [`super::replace`] (record, upload, delete), and the inputs read from the store in
//! one request each: an object up to [`WHOLE`] into memory, a larger one into the staging
//! directory. Outputs are written in the staging directory (a temporary directory) and uploaded
//! whole.
//!
//! Touches the lake's data files, `_silt/replace/`, `_silt/drop/` (recovery),
//! `_silt/imports/` (recovery of dead imports), `_silt/maintenance.lock`, and its staging
//! directory.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use anyhow::Context;
use parquet::file::metadata::ParquetMetaData;
use silt_core::TableName;

use super::footers::FooterCache;
use super::lock::RemoteLock;
use super::record::RemoteImportLog;
use super::replace::{self, RemoteReplacingPublisher};
use super::RemoteLake;
use crate::compact::{self, CompactObserver, CompactOptions, CompactReport, Files, Group, Source};
use crate::config::WriterConfig;
use crate::layout::{self, DataFile};
use crate::replace::{Replacement, Written};
use crate::single::SingleFileWriter;

/// Objects up to this size are read into memory (compaction reads every column anyway); larger
/// ones are copied to the staging directory, so memory stays bounded.
pub const WHOLE: u64 = 32 << 20;

/// An object-store lake as compaction sees it.
struct RemoteFiles<'a> {
    lock: &'a RemoteLock,
    staging: PathBuf,
    /// Inputs up to this size are read into memory ([`WHOLE`]).
    whole: u64,
    footers: FooterCache,
    /// Modification times of listed files (the footer cache's key).
    modified: Mutex<HashMap<PathBuf, SystemTime>>,
}

impl RemoteFiles<'_> {
    fn lake(&self) -> &Arc<RemoteLake> {
        self.lock.lake()
    }
}

impl Files for RemoteFiles<'_> {
    fn root(&self) -> PathBuf {
        self.lake().root_path()
    }

    fn tables(&self) -> anyhow::Result<Vec<TableName>> {
        self.lake().tables()
    }

    fn has_table(&self, t: &TableName) -> anyhow::Result<bool> {
        Ok(self.lake().tables()?.contains(t))
    }

    fn data_files(&self, t: &TableName) -> anyhow::Result<Vec<(DataFile, SystemTime)>> {
        let files = self.lake().data_files_listed(t)?;
        let mut m = self.modified.lock().unwrap_or_else(|e| e.into_inner());
        for (f, at) in &files {
            m.insert(f.path.clone(), *at);
        }
        Ok(files)
    }

    fn in_flight(&self) -> anyhow::Result<HashSet<String>> {
        RemoteImportLog::new(self.lake().clone()).in_flight()
    }

    fn open(&self, f: &DataFile) -> anyhow::Result<Source> {
        open_object(self.lake(), &self.staging, self.whole, f)?
            .ok_or_else(|| anyhow::anyhow!("{} is gone", f.path.display()))
    }

    fn footer(&self, f: &DataFile) -> anyhow::Result<Arc<ParquetMetaData>> {
        let at = self
            .modified
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&f.path)
            .copied()
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let lake = self.lake();
        self.footers
            .footer(lake, &lake.key_of(&f.path)?, f.bytes, at)
    }

    fn writer(
        &self,
        g: &Group,
        cfg: WriterConfig,
        inputs: &[PathBuf],
        expected_rows: Arc<AtomicU64>,
    ) -> anyhow::Result<(SingleFileWriter, Written)> {
        let publisher = RemoteReplacingPublisher::new(
            self.lock,
            &self.staging,
            &g.table.to_string(),
            inputs,
            expected_rows,
        )?;
        let written = publisher.written.clone();
        let out = self
            .staging
            .join(self.lake().rel_of(&g.dir)?)
            .join(layout::unique_file_name(g.store.extension()));
        if let Some(d) = out.parent() {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        let w = SingleFileWriter::new(&out, cfg, &self.staging)?
            .with_publisher(Box::new(publisher))
            .with_schema_tag();
        Ok((w, written))
    }

    fn remove_inputs(&self, rec: &Replacement) -> anyhow::Result<usize> {
        self.lock.check()?;
        replace::remove_inputs(self.lake(), rec)
    }
}

/// Compacts an object-store lake (see the module documentation and [`crate::compact`]); the
/// outputs are staged below `staging` (a temporary directory when `None`).
pub fn compact(
    lake: &Arc<RemoteLake>,
    opts: &CompactOptions,
    staging: Option<&std::path::Path>,
    obs: &mut dyn CompactObserver,
) -> anyhow::Result<CompactReport> {
    compact_with(lake, opts, staging, WHOLE, obs)
}

/// [`compact`] reading inputs up to `whole` bytes into memory.
fn compact_with(
    lake: &Arc<RemoteLake>,
    opts: &CompactOptions,
    staging: Option<&std::path::Path>,
    whole: u64,
    obs: &mut dyn CompactObserver,
) -> anyhow::Result<CompactReport> {
    let started = Instant::now();
    let lock = RemoteLock::acquire(lake, "silt compact")?;
    let mut report = CompactReport::default();
    if !opts.dry_run {
        report.recovery = replace::recover(&lock, opts.grace)?.0;
        report.dead_import_files = RemoteImportLog::new(lake.clone()).recover()?.files;
    }
    let dir = match staging {
        Some(d) => crate::scratch::ScratchDir::new(Some(d), ".silt-compact-")?,
        None => crate::scratch::ScratchDir::new(None, "silt-compact-")?,
    };
    let files = RemoteFiles {
        lock: &lock,
        staging: dir.path().to_path_buf(),
        whole,
        footers: FooterCache::from_env(),
        modified: Mutex::default(),
    };
    let watch = lock.watch();
    compact::run(&files, opts, obs, &mut report, &mut || watch.check())?;
    report.seconds = started.elapsed().as_secs_f64();
    drop(lock);
    Ok(report)
}

/// The data file `f` of `lake` for reading whole; `None` when it is gone. An object up to
/// `whole` bytes is read into memory; a larger one is copied to `staging` in one streamed request
/// (a range request per column chunk is several times slower), opened, and unlinked at once: the
/// open file lives until its reader is done.
pub(crate) fn open_object(
    lake: &Arc<RemoteLake>,
    staging: &std::path::Path,
    whole: u64,
    f: &DataFile,
) -> anyhow::Result<Option<Source>> {
    let rel = lake.rel_of(&f.path)?;
    if f.bytes <= whole {
        return Ok(lake.get(&rel)?.map(Source::Bytes));
    }
    if !lake.exists(&rel)? {
        return Ok(None);
    }
    let local = staging.join(format!(".input-{}", uuid::Uuid::new_v4().simple()));
    let copied = lake.download(&rel, &local).and_then(|_| {
        std::fs::File::open(&local).with_context(|| format!("cannot open {}", local.display()))
    });
    let _ = std::fs::remove_file(&local);
    Ok(Some(Source::File(copied?)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;

    /// A lake over an in-memory store (the same calls as S3's, with conditional writes).
    pub(crate) fn lake() -> Arc<RemoteLake> {
        let store = object_store::memory::InMemory::new();
        Arc::new(
            RemoteLake::with_store("s3://b/p", "b".into(), "p".into(), Arc::new(store)).unwrap(),
        )
    }

    /// A Parquet file of one column `a` holding `values`.
    pub(crate) fn parquet(values: std::ops::Range<i64>) -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        let b = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from_iter_values(values))],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema, None).unwrap();
        w.write(&b).unwrap();
        w.close().unwrap();
        out
    }

    /// Every value of column `a` in the table's visible files, sorted, and the file count.
    pub(crate) fn values(lake: &RemoteLake, table: &str) -> (Vec<i64>, usize) {
        let files = lake.data_files(&TableName::parse(table).unwrap()).unwrap();
        let mut out = Vec::new();
        for f in &files {
            let bytes = lake.get(&lake.rel_of(&f.path).unwrap()).unwrap().unwrap();
            for b in ParquetRecordBatchReaderBuilder::try_new(bytes)
                .unwrap()
                .build()
                .unwrap()
            {
                let b = b.unwrap();
                let a = b
                    .column_by_name("a")
                    .unwrap()
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .clone();
                out.extend(a.values().iter().copied());
            }
        }
        out.sort_unstable();
        (out, files.len())
    }

    #[test]
    fn small_files_are_merged_and_readers_never_count_a_row_twice() {
        let lake = lake();
        for (i, name) in ["a", "b", "c"].iter().enumerate() {
            let lo = i as i64 * 10;
            lake.put(
                &format!("t.x/dt=2024-01-01/{name}.parquet"),
                parquet(lo..lo + 10),
            )
            .unwrap();
        }
        lake.put("t.x/dt=2024-01-02/d.parquet", parquet(30..40))
            .unwrap();
        let expected: Vec<i64> = (0..40).collect();
        assert_eq!(values(&lake, "t.x"), (expected.clone(), 4));

        let rep = compact(&lake, &CompactOptions::default(), None, &mut |_: &_| {}).unwrap();
        assert_eq!(rep.failed(), 0, "{:?}", rep.groups);
        assert_eq!(rep.groups.len(), 1, "the one-file partition is left alone");
        assert_eq!((rep.groups[0].inputs, rep.groups[0].rows), (3, 30));
        assert_eq!(values(&lake, "t.x"), (expected.clone(), 2));
        // The inputs are gone, the record stays for the grace period, the lock is released.
        assert!(!lake.exists("t.x/dt=2024-01-01/a.parquet").unwrap());
        assert_eq!(lake.list(crate::replace::REPLACE_DIR).unwrap().len(), 1);
        assert!(!lake.exists(super::super::lock::LOCK).unwrap());

        // A crash after the commit, before the inputs were deleted: readers leave the inputs
        // out, and recovery deletes them.
        let out = lake.list("t.x/dt=2024-01-01").unwrap()[0].rel.clone();
        let stale = "t.x/dt=2024-01-01/stale.parquet".to_string();
        lake.put(&stale, parquet(0..10)).unwrap();
        let rec = Replacement::new("t.x", out, String::new(), vec![stale.clone()], 10);
        lake.put(
            &format!("{}/x.json", crate::replace::REPLACE_DIR),
            serde_json::to_vec(&rec).unwrap(),
        )
        .unwrap();
        assert_eq!(values(&lake, "t.x"), (expected.clone(), 2));
        // A crash before the commit: the output is not there, so its inputs count.
        let orphan = Replacement::new(
            "t.x",
            "t.x/dt=2024-01-02/never.parquet".into(),
            String::new(),
            vec!["t.x/dt=2024-01-02/d.parquet".into()],
            10,
        );
        lake.put(
            &format!("{}/y.json", crate::replace::REPLACE_DIR),
            serde_json::to_vec(&orphan).unwrap(),
        )
        .unwrap();
        assert_eq!(values(&lake, "t.x"), (expected.clone(), 2));
        let lock = RemoteLock::acquire(&lake, "test").unwrap();
        let hour = std::time::Duration::from_secs(3600);
        // A survey (vacuum --dry-run) reports the same and changes nothing.
        let (seen, _) = replace::survey(&lock, hour).unwrap();
        assert!(lake.exists(&stale).unwrap());
        let (r, _) = replace::recover(&lock, hour).unwrap();
        assert_eq!(seen, r);
        assert_eq!((r.completed, r.inputs_removed, r.abandoned), (1, 1, 1));
        assert!(!lake.exists(&stale).unwrap());
        drop(lock);
        assert_eq!(values(&lake, "t.x"), (expected.clone(), 2));

        // Inputs above the in-memory size are copied to the staging directory and read there
        // (here every input is: the limit is 0), and nothing of them is left behind.
        lake.put("t.x/dt=2024-01-02/e.parquet", parquet(40..50))
            .unwrap();
        let staging = tempfile::tempdir().unwrap();
        let rep = compact_with(
            &lake,
            &CompactOptions::default(),
            Some(staging.path()),
            0,
            &mut |_: &_| {},
        )
        .unwrap();
        assert_eq!(rep.failed(), 0, "{:?}", rep.groups);
        assert_eq!((rep.groups.len(), rep.groups[0].rows), (1, 20));
        let all: Vec<i64> = (0..50).collect();
        assert_eq!(values(&lake, "t.x"), (all, 2));
        assert_eq!(std::fs::read_dir(staging.path()).unwrap().count(), 0);
    }
}
