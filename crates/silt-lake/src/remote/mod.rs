//! Object-store lakes: `--lake s3://bucket/prefix` (S3 or any S3-compatible server), through the
//! `object_store` crate that DataFusion reads with.
//!
//! The layout is the local one, with object keys for paths:
//! `s3://bucket/prefix/zeek.conn/dt=2024-03-24/hour=17/<unique>.parquet`, `_silt/` for silt's
//! own records, `_rejects/` for rejected input. Nothing else is stored: DuckDB, Spark, Trino and
//! Athena read the prefix as they read a local directory.
//!
//! - [`LakeRoot`]: what a `--lake` argument names (a local directory or an object store);
//! - [`RemoteLake`]: one lake's store, prefix and the blocking calls the (synchronous) lake code
//!   makes: list, get, put, delete, and [`RemoteLake::upload`] of a finished local file;
//! - [`file`]: an object read in ranges, as Parquet's and Arrow IPC's readers want it;
//! - [`footers`]: Parquet footers read once and kept in a local cache (files are immutable);
//! - [`record`]: the import record and the publisher of an object-store lake.
//!
//! **Writes are atomic.** A data file is written and sealed in a local staging directory first
//! (the same writer as a local import), then uploaded: a small file with one `PUT`, a large one
//! as a multipart upload that is completed only when the whole file is sent. S3 makes an object
//! visible only when its `PUT` or `CompleteMultipartUpload` succeeds, so a reader lists either
//! no file or the whole file; an upload that fails or is interrupted leaves no object (S3 keeps
//! the parts of an aborted upload until a bucket lifecycle rule removes them; silt aborts the
//! uploads it sees fail).
//!
//! **Credentials** come from the usual AWS environment variables (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`/`AWS_DEFAULT_REGION`,
//! `AWS_ENDPOINT_URL` for S3-compatible servers, `AWS_ALLOW_HTTP=true` for a plain-HTTP one),
//! then from the shared files' profile (`AWS_PROFILE`, default `default`, in
//! `~/.aws/credentials` and `~/.aws/config`, or `AWS_SHARED_CREDENTIALS_FILE` and
//! `AWS_CONFIG_FILE`), then from the instance or container metadata as `object_store` finds it.
//! The profile files are read here (a dozen lines of INI) rather than through the AWS SDK, whose
//! crates would double the build for two keys and a region.
//!
//! Touches only objects below the lake's prefix.

pub mod compact;
pub mod file;
pub mod footers;
pub mod lock;
pub mod record;
pub mod replace;
pub mod retain;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{
    ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion, WriteMultipart,
};
use silt_core::TableName;

use crate::config::StoreKind;
use crate::layout::DataFile;

/// Files up to this size are uploaded with one `PUT`; larger ones in parts of this size.
const PART: usize = 16 << 20;
/// Parts of one multipart upload in flight at once (bounds the memory an upload takes).
const PARTS_IN_FLIGHT: usize = 4;
/// Small objects read, or objects deleted, at once by [`RemoteLake::get_many`] and
/// [`RemoteLake::delete_many`].
const REQUESTS_IN_FLIGHT: usize = 16;

/// What a `--lake` argument names.
#[derive(Clone)]
pub enum LakeRoot {
    /// A local directory (a plain path, or `file:///path`).
    Dir(PathBuf),
    /// An object store (`s3://bucket/prefix`).
    Remote(Arc<RemoteLake>),
}

impl std::fmt::Debug for LakeRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LakeRoot::Dir(p) => write!(f, "Dir({})", p.display()),
            LakeRoot::Remote(r) => write!(f, "Remote({})", r.url()),
        }
    }
}

/// Whether `arg` names a lake in an object store (`s3://…`), without contacting it.
pub fn is_remote(arg: &Path) -> bool {
    matches!(
        arg.to_str().and_then(|s| s.split_once("://")),
        Some(("s3" | "s3a", _))
    )
}

/// The local directory a `--lake` argument names: a plain path, or the path of a `file://` URL
/// (`None` for any other URL; [`LakeRoot::open`] says which ones work). Touches nothing.
pub fn local_dir(arg: &Path) -> Option<&Path> {
    let Some(s) = arg.to_str() else {
        return Some(arg);
    };
    match s.split_once("://") {
        None => Some(arg),
        Some(("file", rest)) => Some(Path::new(rest)),
        Some(_) => None,
    }
}

impl LakeRoot {
    /// The lake `arg` names: `s3://bucket[/prefix]` opens the object store (credentials as the
    /// module documentation says), `file:///path` and plain paths are directories. Other URL
    /// schemes are refused with the ones that work.
    pub fn open(arg: &Path) -> anyhow::Result<Self> {
        if let Some(dir) = local_dir(arg) {
            anyhow::ensure!(
                dir == arg || dir.is_absolute(),
                "--lake {}: a file URL needs an absolute path (file:///path/to/lake)",
                arg.display()
            );
            return Ok(LakeRoot::Dir(dir.to_path_buf()));
        }
        // Not local, so a URL (`local_dir` takes every path that is not UTF-8).
        let s = arg.to_str().unwrap_or_default();
        match s.split_once("://").map_or(s, |(scheme, _)| scheme) {
            "s3" | "s3a" => Ok(LakeRoot::Remote(Arc::new(RemoteLake::open(s)?))),
            scheme => anyhow::bail!(
                "--lake {s}: {scheme}:// is not a lake location silt can use; give a directory, \
                 file:///path or s3://bucket/prefix"
            ),
        }
    }

    /// The lake as it is shown to the user (a path or the URL).
    pub fn display(&self) -> String {
        match self {
            LakeRoot::Dir(p) => p.display().to_string(),
            LakeRoot::Remote(r) => r.url().to_string(),
        }
    }
}

impl LakeRoot {
    /// The lake's root as a path: the directory, or the URL (see [`RemoteLake::root_path`]).
    pub fn root_path(&self) -> PathBuf {
        match self {
            LakeRoot::Dir(d) => d.clone(),
            LakeRoot::Remote(r) => r.root_path(),
        }
    }

    /// The tables, sorted ([`crate::layout::tables`] for a directory).
    pub fn tables(&self) -> anyhow::Result<Vec<TableName>> {
        match self {
            LakeRoot::Dir(d) => crate::layout::tables(d),
            LakeRoot::Remote(r) => r.tables(),
        }
    }

    /// A table's data files sorted by path ([`crate::layout::data_files`] for a directory);
    /// remote paths are below [`RemoteLake::root_path`].
    pub fn data_files(&self, table: &TableName) -> anyhow::Result<Vec<DataFile>> {
        match self {
            LakeRoot::Dir(d) => crate::layout::data_files(&d.join(table.to_string())),
            LakeRoot::Remote(r) => r.data_files(table),
        }
    }

    /// The small record `rel` below the lake (`_silt/...`), or `None`.
    pub fn read_record(&self, rel: &str) -> anyhow::Result<Option<Vec<u8>>> {
        match self {
            LakeRoot::Dir(d) => match std::fs::read(d.join(rel)) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e).with_context(|| format!("cannot read {}", d.join(rel).display())),
            },
            LakeRoot::Remote(r) => Ok(r.get(rel)?.map(|b| b.to_vec())),
        }
    }
}

/// `s3://bucket/a/b/` -> (`bucket`, `a/b`).
fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url.split_once("://").map(|(_, r)| r).context("not a URL")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    anyhow::ensure!(
        !bucket.is_empty(),
        "--lake {url}: no bucket; write s3://BUCKET/PREFIX"
    );
    Ok((bucket.to_string(), prefix.trim_matches('/').to_string()))
}

/// When [`RemoteLake::put_if`] may write.
#[derive(Debug, Clone)]
pub enum PutIf {
    /// Only if no object has the key (`If-None-Match: *`).
    Absent,
    /// Only if the object is still the version read (`If-Match: <etag>`).
    Unchanged(UpdateVersion),
}

/// A small object with the version that a conditional write compares with.
#[derive(Debug, Clone)]
pub struct Versioned {
    pub bytes: Bytes,
    /// From the response's Last-Modified header: whole seconds (a listing has milliseconds;
    /// compare with listed times only through a listing).
    pub modified: SystemTime,
    pub version: UpdateVersion,
}

/// One object listed below the lake.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Key below the lake's prefix, `/`-separated (`zeek.conn/dt=…/x.parquet`).
    pub rel: String,
    pub size: u64,
    pub modified: SystemTime,
}

/// Rounds of a bulk delete before [`RemoteLake::delete_many`] gives up.
const DELETE_ROUNDS: u64 = 3;

/// An object-store lake: its store, bucket and prefix, and a runtime of its own for the
/// blocking calls the synchronous lake code makes.
pub struct RemoteLake {
    url: String,
    bucket: String,
    prefix: String,
    store: Arc<dyn ObjectStore>,
    /// Always `Some` until dropped (see the `Drop` impl).
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for RemoteLake {
    /// A runtime dropped inside another runtime's task panics; shutting it down in the
    /// background is allowed anywhere, and the lake's own calls have all returned by now.
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for RemoteLake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteLake")
            .field("url", &self.url)
            .finish()
    }
}

impl RemoteLake {
    /// Opens `s3://bucket/prefix` with credentials from the environment or the profile.
    pub fn open(url: &str) -> anyhow::Result<Self> {
        let (bucket, prefix) = split_url(url)?;
        let mut b = AmazonS3Builder::from_env().with_bucket_name(&bucket);
        for (k, v) in profile_settings(&std::env::vars().collect::<Vec<_>>())? {
            b = b.with_config(k, v);
        }
        let store = b.build().with_context(|| {
            format!("--lake {url}: cannot set up the S3 client (check AWS_REGION, AWS_ENDPOINT_URL and the credentials)")
        })?;
        Self::with_store(url, bucket, prefix, Arc::new(store))
    }

    /// A lake over a store built elsewhere (tests, other stores).
    pub fn with_store(
        url: &str,
        bucket: String,
        prefix: String,
        store: Arc<dyn ObjectStore>,
    ) -> anyhow::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("silt-objstore")
            .enable_all()
            .build()?;
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("s3");
        let url = if prefix.is_empty() {
            format!("{scheme}://{bucket}")
        } else {
            format!("{scheme}://{bucket}/{prefix}")
        };
        Ok(Self {
            url,
            bucket,
            prefix,
            store,
            rt: Some(rt),
        })
    }

    /// `s3://bucket/prefix`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `s3://bucket`: the URL DataFusion registers the store under.
    pub fn store_url(&self) -> String {
        let scheme = self.url.split_once("://").map(|(s, _)| s).unwrap_or("s3");
        format!("{scheme}://{}", self.bucket)
    }

    pub fn store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    /// The lake's root as a path (`s3://bucket/prefix`), for code that joins and displays paths;
    /// [`RemoteLake::key_of`] turns such a path back into an object key.
    pub fn root_path(&self) -> PathBuf {
        PathBuf::from(&self.url)
    }

    /// The object key of `rel` (a `/`-separated path below the lake).
    pub fn key(&self, rel: &str) -> ObjectPath {
        let rel = rel.trim_start_matches('/');
        if self.prefix.is_empty() {
            ObjectPath::from(rel)
        } else if rel.is_empty() {
            ObjectPath::from(self.prefix.as_str())
        } else {
            ObjectPath::from(format!("{}/{rel}", self.prefix))
        }
    }

    /// The object key of a path below [`RemoteLake::root_path`].
    pub fn key_of(&self, path: &Path) -> anyhow::Result<ObjectPath> {
        Ok(self.key(&self.rel_of(path)?))
    }

    /// The `/`-separated path of `path` below [`RemoteLake::root_path`].
    pub fn rel_of(&self, path: &Path) -> anyhow::Result<String> {
        let rel = path
            .strip_prefix(self.root_path())
            .with_context(|| format!("{} is not below the lake {}", path.display(), self.url))?;
        Ok(rel
            .iter()
            .map(|c| c.to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"))
    }

    /// Runs `f` on the lake's runtime and waits for it; callable from any thread, also from
    /// inside another tokio runtime (the caller's thread blocks, as with any blocking I/O).
    pub fn block_on<F>(&self, f: F) -> F::Output
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let handle = self.rt.as_ref().expect("runtime lives until drop").spawn(f);
        match futures::executor::block_on(handle) {
            Ok(v) => v,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => panic!("object store task cancelled: {e}"),
        }
    }

    /// Every object below `rel_dir` (recursively; `""` for the whole lake), keys relative to
    /// the lake.
    pub fn list(&self, rel_dir: &str) -> anyhow::Result<Vec<Listed>> {
        let store = self.store.clone();
        let key = self.key(rel_dir);
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        let what = format!("{}/{}", self.url, rel_dir.trim_matches('/'));
        self.block_on(async move {
            let prefix = (!key.as_ref().is_empty()).then_some(&key);
            let metas: Vec<object_store::ObjectMeta> = store
                .list(prefix)
                .try_collect()
                .await
                .map_err(|e| explain(e, &what))?;
            Ok(metas
                .into_iter()
                .filter_map(|m| {
                    let rel = m.location.as_ref().strip_prefix(&strip)?.to_string();
                    Some(Listed {
                        rel,
                        size: m.size,
                        modified: m.last_modified.into(),
                    })
                })
                .collect())
        })
    }

    /// The tables: the top-level "directories" whose names are table names (one delimited
    /// listing, not a walk of the lake), and those a retention emptied.
    pub fn tables(&self) -> anyhow::Result<Vec<TableName>> {
        let store = self.store.clone();
        let key = self.key("");
        let what = self.url.clone();
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        let dirs: Vec<String> = self.block_on(async move {
            let prefix = (!key.as_ref().is_empty()).then_some(&key);
            let l = store
                .list_with_delimiter(prefix)
                .await
                .map_err(|e| explain(e, &what))?;
            anyhow::Ok(
                l.common_prefixes
                    .into_iter()
                    .filter_map(|p| p.as_ref().strip_prefix(&strip).map(str::to_string))
                    .collect(),
            )
        })?;
        let mut out: Vec<TableName> = dirs
            .iter()
            .filter(|d| !crate::layout::is_hidden(d))
            .filter_map(|d| TableName::parse(d))
            .collect();
        // A table a retention emptied has no object of its own left, only its kept schema
        // (crate::emptied); a local lake keeps its directory.
        for o in self.list(crate::granularity::TABLES_DIR)? {
            if let Some(t) = crate::emptied::table_of(&o.rel) {
                out.push(t);
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// A table's data files, sorted by path (the listing rules of [`crate::layout`]; files a
    /// compaction replaced or a retention is dropping are left out, [`replace::Hidden`]).
    pub fn data_files(&self, table: &TableName) -> anyhow::Result<Vec<DataFile>> {
        Ok(self
            .data_files_listed(table)?
            .into_iter()
            .map(|(f, _)| f)
            .collect())
    }

    /// [`RemoteLake::data_files`] with each file's modification time.
    pub fn data_files_listed(
        &self,
        table: &TableName,
    ) -> anyhow::Result<Vec<(DataFile, SystemTime)>> {
        let root = self.root_path();
        let listed = self.list(&table.to_string())?;
        let hidden = replace::Hidden::load(self, &listed)?;
        let mut out: Vec<(DataFile, SystemTime)> = listed
            .into_iter()
            .filter(|o| !o.rel.split('/').any(crate::layout::is_hidden) && !hidden.hides(o))
            .filter_map(|o| {
                let path = root.join(&o.rel);
                let store = StoreKind::from_path(&path)?;
                Some((
                    DataFile {
                        path,
                        bytes: o.size,
                        store,
                    },
                    o.modified,
                ))
            })
            .collect();
        out.sort_by(|a, b| a.0.path.cmp(&b.0.path));
        Ok(out)
    }

    /// The data file `f` (listed by [`RemoteLake::data_files`]) for reading in ranges.
    pub fn file(self: &Arc<Self>, f: &DataFile) -> anyhow::Result<file::RemoteFile> {
        Ok(file::RemoteFile::new(
            self.clone(),
            self.key_of(&f.path)?,
            f.bytes,
        ))
    }

    /// The object `rel`, or `None` when there is none.
    pub fn get(&self, rel: &str) -> anyhow::Result<Option<Bytes>> {
        Ok(self.get_versioned(rel)?.map(|v| v.bytes))
    }

    /// Whether the object `rel` exists.
    pub fn exists(&self, rel: &str) -> anyhow::Result<bool> {
        let store = self.store.clone();
        let key = self.key(rel);
        let what = format!("{}/{rel}", self.url);
        self.block_on(async move {
            match store.head(&key).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::NotFound { .. }) => Ok(false),
                Err(e) => Err(explain(e, &what)),
            }
        })
    }

    /// Whether any object is below `rel_dir` (one listing request, however many there are).
    pub fn any_below(&self, rel_dir: &str) -> anyhow::Result<bool> {
        let store = self.store.clone();
        let key = self.key(rel_dir.trim_end_matches('/'));
        let what = format!("{}/{rel_dir}", self.url);
        self.block_on(async move {
            let first = store.list(Some(&key)).try_next().await;
            Ok(first.map_err(|e| explain(e, &what))?.is_some())
        })
    }

    /// The size of the object `rel`.
    pub fn size(&self, rel: &str) -> anyhow::Result<u64> {
        Ok(self.head(rel)?.0)
    }

    /// The size and modification time of the object `rel`.
    pub fn head(&self, rel: &str) -> anyhow::Result<(u64, SystemTime)> {
        let store = self.store.clone();
        let key = self.key(rel);
        let what = format!("{}/{rel}", self.url);
        self.block_on(async move {
            let m = store.head(&key).await.map_err(|e| explain(e, &what))?;
            Ok((m.size, m.last_modified.into()))
        })
    }

    /// Bytes `range` of the object `key`.
    pub fn get_range(
        &self,
        key: &ObjectPath,
        range: std::ops::Range<u64>,
    ) -> anyhow::Result<Bytes> {
        let store = self.store.clone();
        let key = key.clone();
        let what = format!("{}:{key}", self.store_url());
        self.block_on(async move {
            store
                .get_range(&key, range)
                .await
                .map_err(|e| explain(e, &what))
        })
    }

    /// Copies the object `rel` into the local file `to` (streamed: memory stays small whatever
    /// the object's size); returns its size.
    pub fn download(&self, rel: &str, to: &Path) -> anyhow::Result<u64> {
        use futures::StreamExt;
        use tokio::io::AsyncWriteExt;
        let store = self.store.clone();
        let key = self.key(rel);
        let what = format!("{}/{rel}", self.url);
        let to = to.to_path_buf();
        self.block_on(async move {
            let mut body = store
                .get(&key)
                .await
                .map_err(|e| explain(e, &what))?
                .into_stream();
            let mut f = tokio::fs::File::create(&to)
                .await
                .with_context(|| format!("cannot create {}", to.display()))?;
            let mut n = 0u64;
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|e| explain(e, &what))?;
                n += chunk.len() as u64;
                f.write_all(&chunk)
                    .await
                    .with_context(|| format!("cannot write {}", to.display()))?;
            }
            f.flush().await?;
            Ok(n)
        })
    }

    /// Writes the object `rel` in one `PUT` (atomic: readers see the old or the new object).
    pub fn put(&self, rel: &str, bytes: Vec<u8>) -> anyhow::Result<()> {
        let store = self.store.clone();
        let key = self.key(rel);
        let what = format!("{}/{rel}", self.url);
        self.block_on(async move {
            store
                .put(&key, PutPayload::from(bytes))
                .await
                .map_err(|e| explain(e, &what))?;
            Ok(())
        })
    }

    /// The objects `rels` (small records), read [`REQUESTS_IN_FLIGHT`] at a time, in order;
    /// `None` for one that is gone.
    pub fn get_many(&self, rels: &[String]) -> anyhow::Result<Vec<Option<Bytes>>> {
        use futures::StreamExt;
        let store = self.store.clone();
        let jobs: Vec<(ObjectPath, String)> = rels
            .iter()
            .map(|r| (self.key(r), format!("{}/{r}", self.url)))
            .collect();
        self.block_on(async move {
            futures::stream::iter(jobs)
                .map(|(key, what)| {
                    let store = store.clone();
                    async move {
                        match store.get(&key).await {
                            Ok(r) => Ok(Some(r.bytes().await.map_err(|e| explain(e, &what))?)),
                            Err(object_store::Error::NotFound { .. }) => Ok(None),
                            Err(e) => Err(explain(e, &what)),
                        }
                    }
                })
                .buffered(REQUESTS_IN_FLIGHT)
                .try_collect()
                .await
        })
    }

    /// The object `rel` with its version, or `None` when there is none.
    pub fn get_versioned(&self, rel: &str) -> anyhow::Result<Option<Versioned>> {
        let store = self.store.clone();
        let key = self.key(rel);
        let what = format!("{}/{rel}", self.url);
        self.block_on(async move {
            match store.get(&key).await {
                Ok(r) => {
                    let meta = r.meta.clone();
                    let bytes = r.bytes().await.map_err(|e| explain(e, &what))?;
                    Ok(Some(Versioned {
                        bytes,
                        modified: meta.last_modified.into(),
                        version: UpdateVersion {
                            e_tag: meta.e_tag,
                            version: meta.version,
                        },
                    }))
                }
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(explain(e, &what)),
            }
        })
    }

    /// Writes the object `rel` only when `cond` holds (S3 conditional writes); returns the new
    /// version, or `None` when another writer got there first. A store without conditional
    /// writes is an error that says so.
    pub fn put_if(
        &self,
        rel: &str,
        bytes: Vec<u8>,
        cond: PutIf,
    ) -> anyhow::Result<Option<UpdateVersion>> {
        let store = self.store.clone();
        let key = self.key(rel);
        let what = format!("{}/{rel}", self.url);
        let mode = match cond {
            PutIf::Absent => PutMode::Create,
            PutIf::Unchanged(v) => PutMode::Update(v),
        };
        self.block_on(async move {
            match store
                .put_opts(&key, PutPayload::from(bytes), PutOptions::from(mode))
                .await
            {
                Ok(r) => Ok(Some(UpdateVersion {
                    e_tag: r.e_tag,
                    version: r.version,
                })),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => Ok(None),
                Err(e @ object_store::Error::NotImplemented { .. }) => Err(anyhow::anyhow!(
                    "{what}: {e} (silt's maintenance commands need an object store with \
                     conditional writes, If-None-Match and If-Match, as S3 and MinIO have)"
                )),
                Err(e) => Err(explain(e, &what)),
            }
        })
    }

    /// Removes the objects `rels` (bulk deletes where the store has them; objects already gone
    /// are fine).
    ///
    /// A bulk delete is a `POST`, which `object_store` does not retry after a timeout (a `POST`
    /// is not idempotent in general); deleting is, so a failed round is sent again, up to
    /// [`DELETE_ROUNDS`] in all, after a pause (seen here: MinIO under load left one such request
    /// unanswered for the client's 30 s, and a vacuum failed on it).
    pub fn delete_many(&self, rels: &[String]) -> anyhow::Result<()> {
        if rels.is_empty() {
            return Ok(());
        }
        let keys: Vec<ObjectPath> = rels.iter().map(|r| self.key(r)).collect();
        self.delete_keys(keys, self.url.clone())
    }

    /// [`RemoteLake::delete_many`] of `keys`; `what` names them in the error.
    fn delete_keys(&self, keys: Vec<ObjectPath>, what: String) -> anyhow::Result<()> {
        use futures::StreamExt;
        let store = self.store.clone();
        self.block_on(async move {
            let mut round = 1;
            loop {
                let round_keys: Vec<object_store::Result<ObjectPath>> =
                    keys.iter().cloned().map(Ok).collect();
                let stream = futures::stream::iter(round_keys).boxed();
                let mut done = store.delete_stream(stream);
                let mut failed = None;
                while let Some(r) = done.next().await {
                    match r {
                        Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                match failed {
                    None => return Ok(()),
                    Some(e) if round >= DELETE_ROUNDS => return Err(explain(e, &what)),
                    Some(e) => {
                        tracing::warn!(
                            "deleting {} objects in {what} failed ({e}); sending it again",
                            keys.len()
                        );
                        tokio::time::sleep(std::time::Duration::from_secs(round)).await;
                        round += 1;
                    }
                }
            }
        })
    }

    /// Removes the object `rel` (an object already gone is fine).
    ///
    /// Sent again as [`RemoteLake::delete_many`] sends a failed round: `object_store` deletes a
    /// single S3 object with the same bulk-delete `POST`, which it does not retry after a timeout
    /// (seen here: a vacuum's recovery of an interrupted import failed on one such request).
    pub fn delete(&self, rel: &str) -> anyhow::Result<()> {
        self.delete_keys(vec![self.key(rel)], format!("{}/{rel}", self.url))
    }

    /// Uploads the finished local file `local` as the object `rel` (see the module
    /// documentation: the object appears whole or not at all); returns its size.
    pub fn upload(&self, local: &Path, rel: &str) -> anyhow::Result<u64> {
        let size = std::fs::metadata(local)
            .with_context(|| format!("cannot read {}", local.display()))?
            .len();
        let store = self.store.clone();
        let key = self.key(rel);
        let what = format!("{}/{rel}", self.url);
        let local = local.to_path_buf();
        self.block_on(async move {
            if size as usize <= PART {
                let bytes = tokio::fs::read(&local)
                    .await
                    .with_context(|| format!("cannot read {}", local.display()))?;
                store
                    .put(&key, PutPayload::from(bytes))
                    .await
                    .map_err(|e| explain(e, &what))?;
                return Ok(size);
            }
            let upload = store
                .put_multipart(&key)
                .await
                .map_err(|e| explain(e, &what))?;
            let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
            let sent: anyhow::Result<()> = async {
                let mut f = tokio::fs::File::open(&local)
                    .await
                    .with_context(|| format!("cannot read {}", local.display()))?;
                let mut buf = vec![0u8; PART];
                loop {
                    w.wait_for_capacity(PARTS_IN_FLIGHT)
                        .await
                        .map_err(|e| explain(e, &what))?;
                    let n = read_full(&mut f, &mut buf).await?;
                    if n == 0 {
                        break;
                    }
                    w.write(&buf[..n]);
                }
                Ok(())
            }
            .await;
            match sent {
                Ok(()) => {
                    w.finish().await.map_err(|e| explain(e, &what))?;
                    Ok(size)
                }
                Err(e) => {
                    let _ = w.abort().await;
                    Err(e)
                }
            }
        })
    }
}

/// Reads until `buf` is full or the file ends.
async fn read_full(f: &mut tokio::fs::File, buf: &mut [u8]) -> anyhow::Result<usize> {
    use tokio::io::AsyncReadExt;
    let mut n = 0;
    while n < buf.len() {
        let k = f.read(&mut buf[n..]).await?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(n)
}

/// An object-store error with the object and what to check.
fn explain(e: object_store::Error, what: &str) -> anyhow::Error {
    let hint = match &e {
        object_store::Error::NotFound { .. } => " (does the bucket exist?)",
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => {
            " (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or AWS_PROFILE)"
        }
        _ => "",
    };
    anyhow::anyhow!("{what}: {e}{hint}")
}

/// Settings from the shared AWS files for the profile `AWS_PROFILE` (default `default`), for
/// the keys the environment does not set: the access key, secret, session token, region and
/// endpoint. `env` is the process environment (a parameter for tests).
pub fn profile_settings(
    env: &[(String, String)],
) -> anyhow::Result<Vec<(AmazonS3ConfigKey, String)>> {
    let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let home = var("HOME").map(PathBuf::from);
    let profile = var("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
    let creds_file = var("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".aws/credentials")));
    let config_file = var("AWS_CONFIG_FILE")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".aws/config")));
    let read = |p: &Option<PathBuf>, section: &str| -> Vec<(String, String)> {
        p.as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|s| ini_section(&s, section))
            .unwrap_or_default()
    };
    let mut found = read(&creds_file, &profile);
    // ~/.aws/config names profiles `[profile NAME]`, except `[default]`.
    let config_section = if profile == "default" {
        "default".to_string()
    } else {
        format!("profile {profile}")
    };
    found.extend(read(&config_file, &config_section));
    if var("AWS_PROFILE").is_some() && found.is_empty() {
        anyhow::bail!(
            "AWS_PROFILE={profile}: no such profile in {} or {}",
            creds_file
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            config_file
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        );
    }
    let keys_in_env = var("AWS_ACCESS_KEY_ID").is_some();
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (k, v) in found {
        if !seen.insert(k.clone()) {
            continue;
        }
        let (key, env_name) = match k.as_str() {
            "aws_access_key_id" => (AmazonS3ConfigKey::AccessKeyId, "AWS_ACCESS_KEY_ID"),
            "aws_secret_access_key" => {
                (AmazonS3ConfigKey::SecretAccessKey, "AWS_SECRET_ACCESS_KEY")
            }
            "aws_session_token" => (AmazonS3ConfigKey::Token, "AWS_SESSION_TOKEN"),
            "region" => (AmazonS3ConfigKey::Region, "AWS_REGION"),
            "endpoint_url" => (AmazonS3ConfigKey::Endpoint, "AWS_ENDPOINT_URL"),
            _ => continue,
        };
        // The environment wins; keys from the environment are never mixed with a profile's.
        let from_env = var(env_name).is_some()
            || (env_name == "AWS_REGION" && var("AWS_DEFAULT_REGION").is_some())
            || (env_name == "AWS_ENDPOINT_URL" && var("AWS_ENDPOINT").is_some());
        let is_key = matches!(
            key,
            AmazonS3ConfigKey::AccessKeyId
                | AmazonS3ConfigKey::SecretAccessKey
                | AmazonS3ConfigKey::Token
        );
        if from_env || (is_key && keys_in_env) {
            continue;
        }
        out.push((key, v));
    }
    Ok(out)
}

/// The `key = value` lines of `[section]` in an INI text (keys lowercased).
fn ini_section(text: &str, section: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == section;
            continue;
        }
        if inside {
            if let Some((k, v)) = line.split_once('=') {
                out.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store whose first `failures` bulk deletes fail (as a timed-out `POST` does).
    #[derive(Debug)]
    struct FlakyDeletes {
        inner: object_store::memory::InMemory,
        failures: std::sync::atomic::AtomicUsize,
    }

    impl std::fmt::Display for FlakyDeletes {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "FlakyDeletes")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for FlakyDeletes {
        async fn put_opts(
            &self,
            location: &ObjectPath,
            payload: object_store::PutPayload,
            opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.inner.put_opts(location, payload, opts).await
        }

        async fn put_multipart_opts(
            &self,
            location: &ObjectPath,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }

        async fn get_opts(
            &self,
            location: &ObjectPath,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            self.inner.get_opts(location, options).await
        }

        fn delete_stream(
            &self,
            locations: futures::stream::BoxStream<'static, object_store::Result<ObjectPath>>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<ObjectPath>> {
            use futures::StreamExt;
            use std::sync::atomic::Ordering;
            let left = self.failures.load(Ordering::SeqCst);
            if left > 0 {
                self.failures.store(left - 1, Ordering::SeqCst);
                let e = object_store::Error::Generic {
                    store: "S3",
                    source: "Error performing POST in 30s - HTTP error: error sending request"
                        .into(),
                };
                return futures::stream::iter([Err(e)]).boxed();
            }
            self.inner.delete_stream(locations)
        }

        fn list(
            &self,
            prefix: Option<&ObjectPath>,
        ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
        {
            self.inner.list(prefix)
        }

        async fn list_with_delimiter(
            &self,
            prefix: Option<&ObjectPath>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }

        async fn copy_opts(
            &self,
            from: &ObjectPath,
            to: &ObjectPath,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    /// A lake in memory whose first `failures` deletes fail.
    fn flaky_lake(failures: usize) -> RemoteLake {
        let store = FlakyDeletes {
            inner: object_store::memory::InMemory::new(),
            failures: failures.into(),
        };
        RemoteLake::with_store("s3://b/l", "b".into(), "l".into(), Arc::new(store)).unwrap()
    }

    /// Bulk deletes that fail are sent again, [`DELETE_ROUNDS`] in all; then the error is
    /// returned, saying which lake.
    #[test]
    fn a_failed_bulk_delete_is_sent_again() {
        for (failures, ok) in [
            (DELETE_ROUNDS as usize - 1, true),
            (DELETE_ROUNDS as usize, false),
        ] {
            let lake = flaky_lake(failures);
            let rels: Vec<String> = (0..3).map(|i| format!("t.a/f{i}.parquet")).collect();
            for r in &rels {
                lake.put(r, b"x".to_vec()).unwrap();
            }
            let r = lake.delete_many(&rels);
            assert_eq!(r.is_ok(), ok, "{failures} failures: {r:?}");
            let left = lake.list("").unwrap().len();
            if ok {
                assert_eq!(left, 0);
            } else {
                assert_eq!(left, 3);
                assert!(format!("{:#}", r.unwrap_err()).contains("s3://b/l"));
            }
        }
    }

    /// A single object's delete is the same bulk `POST` in `object_store`: sent again the same
    /// way, and its error names the object.
    #[test]
    fn a_failed_single_delete_is_sent_again() {
        for (failures, ok) in [
            (DELETE_ROUNDS as usize - 1, true),
            (DELETE_ROUNDS as usize, false),
        ] {
            let lake = flaky_lake(failures);
            lake.put("t.a/one.parquet", b"x".to_vec()).unwrap();
            let r = lake.delete("t.a/one.parquet");
            assert_eq!(r.is_ok(), ok, "{failures} failures: {r:?}");
            assert_eq!(lake.list("").unwrap().len(), usize::from(!ok));
            if !ok {
                assert!(format!("{:#}", r.unwrap_err()).contains("s3://b/l/t.a/one.parquet"));
            }
        }
    }

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn urls_split_into_bucket_and_prefix() {
        assert_eq!(
            split_url("s3://b/a/b/").unwrap(),
            ("b".to_string(), "a/b".to_string())
        );
        assert_eq!(
            split_url("s3://b").unwrap(),
            ("b".to_string(), String::new())
        );
        assert!(split_url("s3:///x").is_err());
        let e = LakeRoot::open(Path::new("gs://b/x"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("s3://bucket/prefix"), "{e}");
        assert!(matches!(
            LakeRoot::open(Path::new("file:///tmp/l")).unwrap(),
            LakeRoot::Dir(p) if p == Path::new("/tmp/l")
        ));
        assert!(matches!(
            LakeRoot::open(Path::new("lake")).unwrap(),
            LakeRoot::Dir(_)
        ));
    }

    #[test]
    fn profile_files_fill_what_the_environment_leaves_out() {
        let dir = tempfile::tempdir().unwrap();
        let creds = dir.path().join("credentials");
        let config = dir.path().join("config");
        std::fs::write(
            &creds,
            "[default]\naws_access_key_id = D\naws_secret_access_key = DS\n\n[work]\n# c\nAWS_ACCESS_KEY_ID=W\naws_secret_access_key = WS\n",
        )
        .unwrap();
        std::fs::write(
            &config,
            "[default]\nregion = eu-west-1\n[profile work]\nregion = us-east-2\nendpoint_url = http://127.0.0.1:9000\n",
        )
        .unwrap();
        let c = creds.to_str().unwrap();
        let g = config.to_str().unwrap();
        let got = profile_settings(&env(&[
            ("AWS_SHARED_CREDENTIALS_FILE", c),
            ("AWS_CONFIG_FILE", g),
            ("AWS_PROFILE", "work"),
        ]))
        .unwrap();
        let find =
            |k: AmazonS3ConfigKey| got.iter().find(|(x, _)| *x == k).map(|(_, v)| v.as_str());
        assert_eq!(find(AmazonS3ConfigKey::AccessKeyId), Some("W"));
        assert_eq!(find(AmazonS3ConfigKey::SecretAccessKey), Some("WS"));
        assert_eq!(find(AmazonS3ConfigKey::Region), Some("us-east-2"));
        assert_eq!(
            find(AmazonS3ConfigKey::Endpoint),
            Some("http://127.0.0.1:9000")
        );
        // Keys in the environment win, and are not mixed with the profile's.
        let got = profile_settings(&env(&[
            ("AWS_SHARED_CREDENTIALS_FILE", c),
            ("AWS_CONFIG_FILE", g),
            ("AWS_ACCESS_KEY_ID", "E"),
            ("AWS_DEFAULT_REGION", "ap-south-1"),
        ]))
        .unwrap();
        assert!(got.iter().all(|(k, _)| !matches!(
            k,
            AmazonS3ConfigKey::AccessKeyId
                | AmazonS3ConfigKey::SecretAccessKey
                | AmazonS3ConfigKey::Region
        )));
        let e = profile_settings(&env(&[
            ("AWS_SHARED_CREDENTIALS_FILE", c),
            ("AWS_CONFIG_FILE", g),
            ("AWS_PROFILE", "nope"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("no such profile"), "{e}");
    }
}
