//! Parquet footers of an object-store lake, read once and kept in a local cache.
//!
//! A query on a remote lake needs the footers (schema, row counts, the time column's statistics)
//! of the files it reads, and of one file per schema tag before it can plan (`silt_query::lake`);
//! `silt serve` reads every file's footer when it starts. Reading one costs one or two range
//! requests, every time. Lake files are immutable (unique names, written once, deleted by
//! compaction or retention, never rewritten in place), so a footer read once is valid for as long
//! as an object with the same key, size and modification time exists. [`FooterCache`] keeps the
//! footers' bytes (the Thrift-encoded `FileMetaData`, without page indexes, which the scan reads
//! when it needs them) in a local directory:
//!
//! - `SILT_FOOTER_CACHE=/some/dir` puts it there, `SILT_FOOTER_CACHE=off` turns it off; by default
//!   `$XDG_CACHE_HOME/silt/footers` or `~/.cache/silt/footers` (off when neither is set);
//! - one file per footer, named by a 128-bit hash of the store URL, object key, size and
//!   modification time, written to a temporary name and renamed (no fsync: a torn or foreign file
//!   fails to decode, is reported at debug level and read again from the store);
//! - at most [`FooterCache::MAX_BYTES`]: [`FooterCache::trim`] deletes the oldest entries
//!   (by modification time, i.e. when they were stored) down to three quarters of that.
//!
//! A cache that cannot be written (read-only home, full disk) only costs the round trips: the
//! footer is returned from the store all the same.
//!
//! Touches the object it is asked about (ranged reads) and the cache directory.

use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use object_store::path::Path as ObjectPath;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use twox_hash::XxHash64;

use super::RemoteLake;

/// Bytes read from the end of an object on a miss: most footers fit, so one request suffices.
const TAIL: u64 = 64 << 10;

/// The local cache of remote footers (see the module documentation).
#[derive(Debug)]
pub struct FooterCache {
    dir: Option<PathBuf>,
    /// Bytes this cache stored: [`FooterCache::trim`] looks at the directory only after some.
    stored: AtomicU64,
}

impl FooterCache {
    /// Entries kept at most, in bytes of footers.
    pub const MAX_BYTES: u64 = 512 << 20;

    /// The cache `SILT_FOOTER_CACHE`, `XDG_CACHE_HOME` and `HOME` name (see the module
    /// documentation).
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let dir = match var("SILT_FOOTER_CACHE") {
            Some(v) if v == "off" => None,
            Some(v) => Some(PathBuf::from(v)),
            None => var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache")))
                .map(|c| c.join("silt").join("footers")),
        };
        Self::new(dir)
    }

    /// A cache in `dir`, or none.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self {
            dir,
            stored: AtomicU64::new(0),
        }
    }

    /// The cache's directory, if it is on.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The footer of the Parquet object `key` (`size` bytes, modified at `modified`), from the
    /// cache or else from the store (then stored in the cache).
    pub fn footer(
        &self,
        lake: &RemoteLake,
        key: &ObjectPath,
        size: u64,
        modified: SystemTime,
    ) -> anyhow::Result<Arc<ParquetMetaData>> {
        if let Some(md) = self.cached(lake, key, size, modified) {
            return Ok(md);
        }
        let entry = self.entry(lake, key, size, modified);
        let bytes = fetch_footer(lake, key, size)?;
        let md = ParquetMetaDataReader::decode_metadata(&bytes)
            .with_context(|| format!("decoding the Parquet footer of {key}"))?;
        if let Some(path) = &entry {
            match store(path, &bytes) {
                Ok(()) => {
                    self.stored.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                }
                Err(e) => tracing::debug!("cannot keep a footer in {}: {e:#}", path.display()),
            }
        }
        Ok(Arc::new(md))
    }

    /// The footer of the object `key` (of `size` bytes, modified at `modified`) if this cache
    /// has it; never asks the store.
    pub fn cached(
        &self,
        lake: &RemoteLake,
        key: &ObjectPath,
        size: u64,
        modified: SystemTime,
    ) -> Option<Arc<ParquetMetaData>> {
        let path = self.entry(lake, key, size, modified)?;
        let bytes = std::fs::read(&path).ok()?;
        match ParquetMetaDataReader::decode_metadata(&bytes) {
            Ok(md) => Some(Arc::new(md)),
            Err(e) => {
                tracing::debug!(
                    "footer cache entry {} does not decode ({e}); reading it again",
                    path.display()
                );
                None
            }
        }
    }

    /// Where the footer of that object is kept (`None` without a cache directory).
    fn entry(
        &self,
        lake: &RemoteLake,
        key: &ObjectPath,
        size: u64,
        modified: SystemTime,
    ) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(entry_name(&lake.store_url(), key, size, modified)))
    }

    /// When this cache stored entries, deletes the oldest entries while the cache holds more
    /// than [`Self::MAX_BYTES`], down to three quarters of it; returns the bytes freed. Errors are
    /// ignored (another process may trim at the same time).
    pub fn trim(&self) -> u64 {
        if self.stored.swap(0, Ordering::Relaxed) == 0 {
            return 0;
        }
        self.trim_to(Self::MAX_BYTES)
    }

    fn trim_to(&self, max: u64) -> u64 {
        let Some(dir) = &self.dir else { return 0 };
        let Ok(rd) = std::fs::read_dir(dir) else {
            return 0;
        };
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = rd
            .flatten()
            .filter_map(|e| {
                let md = e.metadata().ok()?;
                md.is_file()
                    .then(|| (md.modified().unwrap_or(UNIX_EPOCH), md.len(), e.path()))
            })
            .collect();
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        if total <= max {
            return 0;
        }
        entries.sort();
        let mut freed = 0;
        for (_, len, path) in entries {
            if total <= max / 4 * 3 {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
                freed += len;
            }
        }
        freed
    }
}

/// The entry's file name: 128 bits of hash over what identifies one immutable object.
fn entry_name(store_url: &str, key: &ObjectPath, size: u64, modified: SystemTime) -> String {
    let since = modified.duration_since(UNIX_EPOCH).unwrap_or_default();
    let hash = |seed: u64| {
        let mut h = XxHash64::with_seed(seed);
        for part in [store_url.as_bytes(), b"\0", key.as_ref().as_bytes(), b"\0"] {
            h.write(part);
        }
        h.write_u64(size);
        h.write_u64(since.as_secs());
        h.write_u32(since.subsec_nanos());
        h.finish()
    };
    format!("{:016x}{:016x}.footer", hash(0), hash(0x5117))
}

/// The Thrift bytes of the footer of `key`: the last [`TAIL`] bytes, then what is missing.
fn fetch_footer(lake: &RemoteLake, key: &ObjectPath, size: u64) -> anyhow::Result<Bytes> {
    anyhow::ensure!(
        size >= 12,
        "{key} is not a Parquet file: {size} bytes, fewer than a header and footer take"
    );
    let start = size.saturating_sub(TAIL);
    let tail = lake.get_range(key, start..size)?;
    anyhow::ensure!(
        tail.len() as u64 == size - start,
        "{key}: the store returned {} bytes for a range of {}",
        tail.len(),
        size - start
    );
    let end = &tail[tail.len() - 8..];
    anyhow::ensure!(
        &end[4..] == b"PAR1",
        "{key} is not a plain Parquet file (it does not end with PAR1{})",
        if &end[4..] == b"PARE" {
            "; encrypted footers are not supported"
        } else {
            ""
        }
    );
    let len = u32::from_le_bytes(end[..4].try_into().expect("4 bytes")) as u64;
    anyhow::ensure!(
        len + 12 <= size,
        "{key}: its footer claims {len} bytes, more than the file's {size}"
    );
    let have = tail.len() as u64 - 8;
    if len <= have {
        let at = (have - len) as usize;
        return Ok(tail.slice(at..at + len as usize));
    }
    // A footer larger than the tail read: fetch the part before it.
    let more = lake.get_range(key, size - 8 - len..start)?;
    let mut all = BytesMut::with_capacity(len as usize);
    all.extend_from_slice(&more);
    all.extend_from_slice(&tail[..tail.len() - 8]);
    Ok(all.freeze())
}

/// Writes an entry under a temporary name and renames it into place.
fn store(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path.parent().context("entry without a directory")?;
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;

    /// A Parquet file whose footer is larger than [`TAIL`] when `columns` is large.
    fn parquet(columns: usize, rows: i64) -> Vec<u8> {
        let fields: Vec<Field> = (0..columns)
            .map(|i| {
                Field::new(
                    format!("column_with_a_long_name_{i:05}"),
                    DataType::Int64,
                    true,
                )
            })
            .chain([Field::new("s", DataType::Utf8, true)])
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let mut cols: Vec<arrow::array::ArrayRef> = (0..columns)
            .map(|_| Arc::new(Int64Array::from_iter_values(0..rows)) as _)
            .collect();
        cols.push(Arc::new(StringArray::from_iter_values(
            (0..rows).map(|i| format!("row {i}")),
        )));
        let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
        let mut out = Vec::new();
        let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        out
    }

    fn lake_with(objects: &[(&str, Vec<u8>)]) -> RemoteLake {
        let store = Arc::new(object_store::memory::InMemory::new());
        let lake = RemoteLake::with_store("s3://b/lake", "b".into(), "lake".into(), store).unwrap();
        for (rel, bytes) in objects {
            lake.put(rel, bytes.clone()).unwrap();
        }
        lake
    }

    #[test]
    fn footers_come_from_the_store_once_then_from_the_cache() {
        let small = parquet(3, 100);
        let large = parquet(2000, 2);
        let lake = lake_with(&[
            ("t.a/small.parquet", small.clone()),
            ("t.a/large.parquet", large.clone()),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let cache = FooterCache::new(Some(dir.path().to_path_buf()));
        let now = SystemTime::now();
        for (rel, bytes, columns) in [
            ("t.a/small.parquet", &small, 4),
            ("t.a/large.parquet", &large, 2001),
        ] {
            let key = lake.key(rel);
            let size = bytes.len() as u64;
            let expected = ParquetMetaDataReader::new()
                .parse_and_finish(&Bytes::from(bytes.clone()))
                .unwrap();
            let from_store = cache.footer(&lake, &key, size, now).unwrap();
            assert_eq!(
                from_store.file_metadata().schema_descr().num_columns(),
                columns
            );
            assert_eq!(
                from_store.file_metadata().num_rows(),
                expected.file_metadata().num_rows()
            );
            // Gone from the store: the cache answers.
            lake.delete(rel).unwrap();
            let cached = cache.footer(&lake, &key, size, now).unwrap();
            assert_eq!(
                cached.file_metadata().num_rows(),
                from_store.file_metadata().num_rows()
            );
            assert_eq!(cached.row_groups().len(), expected.row_groups().len());
            // Another size or time is another object: not answered from the cache.
            assert!(cache
                .footer(&lake, &key, size, now + std::time::Duration::from_secs(1))
                .is_err());
        }
        assert!(
            large.len() as u64 > TAIL,
            "the large file must need a second request"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_damaged_entry_is_read_again_and_replaced() {
        let file = parquet(3, 10);
        let lake = lake_with(&[("t.a/f.parquet", file.clone())]);
        let dir = tempfile::tempdir().unwrap();
        let cache = FooterCache::new(Some(dir.path().to_path_buf()));
        let key = lake.key("t.a/f.parquet");
        let now = SystemTime::now();
        cache.footer(&lake, &key, file.len() as u64, now).unwrap();
        let entry = std::fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let good = std::fs::read(&entry).unwrap();
        std::fs::write(&entry, &good[..good.len() / 2]).unwrap();
        let md = cache.footer(&lake, &key, file.len() as u64, now).unwrap();
        assert_eq!(md.file_metadata().num_rows(), 10);
        assert_eq!(std::fs::read(&entry).unwrap(), good);
    }

    #[test]
    fn not_parquet_and_lying_footers_are_errors_not_panics() {
        let mut lying = parquet(1, 1);
        let n = lying.len();
        lying[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let lake = lake_with(&[
            (
                "t.a/text.parquet",
                b"hello, this is not parquet at all".to_vec(),
            ),
            ("t.a/tiny.parquet", b"PAR1".to_vec()),
            ("t.a/lying.parquet", lying.clone()),
        ]);
        let cache = FooterCache::new(None);
        let now = SystemTime::now();
        for (rel, size) in [
            ("t.a/text.parquet", 33),
            ("t.a/tiny.parquet", 4),
            ("t.a/lying.parquet", n as u64),
        ] {
            let err = cache.footer(&lake, &lake.key(rel), size, now).unwrap_err();
            assert!(
                format!("{err:#}").contains(rel.rsplit('/').next().unwrap()),
                "{err:#}"
            );
        }
    }

    #[test]
    fn trimming_deletes_the_oldest_entries_first() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FooterCache::new(Some(dir.path().to_path_buf()));
        let base = SystemTime::now() - std::time::Duration::from_secs(1000);
        for i in 0..10u64 {
            let p = dir.path().join(format!("{i}.footer"));
            std::fs::write(&p, vec![0u8; 100]).unwrap();
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(base + std::time::Duration::from_secs(i))
                .unwrap();
        }
        assert_eq!(cache.trim_to(1000), 0);
        assert_eq!(cache.trim_to(800), 400);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["4.footer", "5.footer", "6.footer", "7.footer", "8.footer", "9.footer"]
        );
        assert_eq!(FooterCache::new(None).trim(), 0);
    }

    #[test]
    fn entry_names_differ_by_store_key_size_and_time() {
        let name = entry_name("s3://b", &ObjectPath::from("a/b"), 1, UNIX_EPOCH);
        assert_eq!(name.len(), 32 + ".footer".len());
        assert_ne!(
            name,
            entry_name("s3://b", &ObjectPath::from("a/b"), 2, UNIX_EPOCH)
        );
        assert_ne!(
            name,
            entry_name("s3://c", &ObjectPath::from("a/b"), 1, UNIX_EPOCH)
        );
    }
}
