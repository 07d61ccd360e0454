//! Lake maintenance inside `silt serve`: compaction every `--compact-every` and retention by
//! `--keep`, on a thread of their own, with the query index kept true while files change.
//!
//! - Compaction ([`silt_lake::compact`]) leaves the files of the flush in progress alone (its
//!   journal names them). When a group's merged file is committed, and before its inputs are
//!   removed, the index swaps the inputs for the output in one step ([`crate::live::IndexUpdate`]),
//!   so a query sees the old files or the new one, never both and never neither; the inputs
//!   are removed once every query that started before the swap has finished (each holds a pin
//!   of the index it started with).
//! - Retention ([`silt_lake::retain`]) takes a partition's files out of the index before the
//!   partition disappears.
//! - Another process changing the lake (an operator's `silt compact`, `silt retain` or
//!   `silt vacuum`) is noticed within [`WATCH`] by the records such commands leave
//!   (`_silt/replace/`, `_silt/trash/`); the lake is then listed again and the index replaced.
//!   Queries that started before that may fail on a file that was removed; running maintenance
//!   through the server (these options) avoids it.
//!
//! On an object-store lake the same runs through [`silt_lake::remote::compact`] and
//! [`silt_lake::remote::retain`] (outputs staged in the server's state directory), and other
//! processes' changes are noticed by listing `_silt/replace/` and `_silt/drop/` in the bucket.
//!
//! Touches the lake's data files through silt-lake's maintenance, and the index in [`Live`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use silt_lake::compact::{self, CompactObserver, CompactOptions, GroupResult};
use silt_lake::remote::replace::DROP_DIR;
use silt_lake::remote::LakeRoot;
use silt_lake::replace::REPLACE_DIR;
use silt_lake::retain::{self, RetainOptions, TRASH_DIR};
use silt_query::lake::LakeIndex;

use crate::live::Live;

/// How often the lake is checked for changes made by other processes.
pub const WATCH: Duration = Duration::from_secs(5);

/// What maintenance the server runs.
#[derive(Debug, Clone)]
pub struct MaintainConfig {
    /// Compact this often (`None`: never).
    pub compact_every: Option<Duration>,
    /// How to compact (tables, target size, `older_than`, writer).
    pub compact: CompactOptions,
    /// Retention windows (`None`: keep everything); applied at every compaction interval, or
    /// hourly without one.
    pub retain: Option<RetainOptions>,
    /// How long files taken out of the index wait for queries that may still read them (the
    /// query timeout).
    pub reader_wait: Duration,
}

impl Default for MaintainConfig {
    fn default() -> Self {
        Self {
            compact_every: None,
            compact: CompactOptions::default(),
            retain: None,
            reader_wait: Duration::from_secs(300),
        }
    }
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct MaintainStats {
    pub runs: AtomicU64,
    pub groups: AtomicU64,
    pub files_in: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub partitions_dropped: AtomicU64,
    pub rescans: AtomicU64,
    pub failures: AtomicU64,
    pub last_error: Mutex<Option<String>>,
}

/// The state of the records other processes' maintenance leaves; `None` when it cannot be
/// read now (an object store that does not answer).
fn stamp(root: &LakeRoot) -> Option<Vec<(String, Option<SystemTime>)>> {
    match root {
        LakeRoot::Dir(root) => {
            let m = |d: &str| {
                std::fs::metadata(root.join(d))
                    .and_then(|m| m.modified())
                    .ok()
            };
            Some(vec![
                (REPLACE_DIR.to_string(), m(REPLACE_DIR)),
                (TRASH_DIR.to_string(), m(TRASH_DIR)),
            ])
        }
        LakeRoot::Remote(lake) => {
            let mut out = Vec::new();
            for d in [REPLACE_DIR, DROP_DIR] {
                match lake.list(d) {
                    Ok(l) => out.extend(l.into_iter().map(|o| (o.rel, Some(o.modified)))),
                    Err(e) => {
                        tracing::debug!("listing {}/{d}: {e:#}", lake.url());
                        return None;
                    }
                }
            }
            out.sort();
            Some(out)
        }
    }
}

/// Keeps `live`'s index true while a compaction swaps files.
struct Swap<'a> {
    live: &'a Live,
    stats: &'a MaintainStats,
    stop: &'a Receiver<()>,
    reader_wait: Duration,
}

/// Waits until no query that started before a swap may still open the files it took out (the
/// pin's last other holder is gone), at most `limit` (the query timeout) or until shutdown.
fn wait_for_readers(pin: Arc<()>, limit: Duration, stop: &Receiver<()>) {
    let started = Instant::now();
    while Arc::strong_count(&pin) > 1 {
        if started.elapsed() >= limit {
            tracing::warn!(
                "a query is still running after {limit:?}; removing the files it may read anyway"
            );
            return;
        }
        if !matches!(stop.try_recv(), Err(std::sync::mpsc::TryRecvError::Empty)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

impl CompactObserver for Swap<'_> {
    fn committed(&mut self, output: &Path, inputs: &[PathBuf]) {
        let update = self.live.begin_update();
        let index = update.current.without_files(inputs);
        let index = match index.with_files(&[output.to_path_buf()]) {
            Ok(i) => i,
            Err(e) => {
                // The inputs stay listed: the old files are still there to read.
                tracing::error!("compaction: cannot add {}: {e:#}", output.display());
                return;
            }
        };
        let pin = update.replace_before_removal(index);
        wait_for_readers(pin, self.reader_wait, self.stop);
    }

    fn group(&mut self, r: &GroupResult) {
        match &r.error {
            Some(e) => {
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
                let msg = format!("compaction of {}/{}: {e}", r.table, r.partition);
                tracing::warn!("{msg}");
                *self.stats.last_error.lock().expect("not poisoned") = Some(msg);
            }
            None => {
                self.stats.groups.fetch_add(1, Ordering::Relaxed);
                self.stats
                    .files_in
                    .fetch_add(r.inputs as u64, Ordering::Relaxed);
                self.stats.bytes_in.fetch_add(r.bytes_in, Ordering::Relaxed);
                self.stats
                    .bytes_out
                    .fetch_add(r.bytes_out, Ordering::Relaxed);
                tracing::debug!(
                    "compacted {}/{}: {} files, {} -> {} bytes",
                    r.table,
                    r.partition,
                    r.inputs,
                    r.bytes_in,
                    r.bytes_out
                );
            }
        }
    }

    fn cancelled(&self) -> bool {
        // A message or a closed channel both mean: stop.
        !matches!(
            self.stop.try_recv(),
            Err(std::sync::mpsc::TryRecvError::Empty)
        )
    }
}

/// One round: retention, then compaction.
fn run_once(
    root: &LakeRoot,
    staging: &Path,
    cfg: &MaintainConfig,
    live: &Live,
    stats: &MaintainStats,
    stop: &Receiver<()>,
) {
    stats.runs.fetch_add(1, Ordering::Relaxed);
    if let Some(r) = &cfg.retain {
        let mut before_drop = |dir: &Path| {
            let update = live.begin_update();
            let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
            let gone: Vec<PathBuf> = update
                .current
                .tables
                .values()
                .flat_map(|t| t.files.iter())
                .filter(|f| f.path.starts_with(&dir))
                .map(|f| f.path.clone())
                .collect();
            let index = update.current.without_files(&gone);
            let pin = update.replace_before_removal(index);
            wait_for_readers(pin, cfg.reader_wait, stop);
        };
        let now = SystemTime::now();
        let done = match root {
            LakeRoot::Dir(d) => retain::retain_with(d, r, now, &mut before_drop),
            LakeRoot::Remote(lake) => {
                silt_lake::remote::retain::retain_with(lake, r, now, &mut before_drop)
            }
        };
        match done {
            Ok(rep) => {
                stats
                    .partitions_dropped
                    .fetch_add(rep.dropped.len() as u64, Ordering::Relaxed);
                for d in &rep.dropped {
                    tracing::info!(
                        "retention dropped {}/{} ({} files)",
                        d.table,
                        d.partition,
                        d.files
                    );
                }
            }
            Err(e) => {
                stats.failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!("retention: {e:#}");
                *stats.last_error.lock().expect("not poisoned") = Some(format!("retention: {e:#}"));
            }
        }
    }
    if cfg.compact_every.is_some() {
        let mut swap = Swap {
            live,
            stats,
            stop,
            reader_wait: cfg.reader_wait,
        };
        let done = match root {
            LakeRoot::Dir(d) => compact::compact(d, &cfg.compact, &mut swap),
            LakeRoot::Remote(lake) => {
                silt_lake::remote::compact::compact(lake, &cfg.compact, Some(staging), &mut swap)
            }
        };
        if let Err(e) = done {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("compaction: {e:#}");
            *stats.last_error.lock().expect("not poisoned") = Some(format!("compaction: {e:#}"));
        }
    }
}

/// Starts the maintenance thread; it ends when `stop` receives a message or its sender is
/// dropped (what shutdown does: unlike a message, which the first check consumes, a closed
/// channel stays closed for every check after it).
pub fn start(
    root: LakeRoot,
    staging: PathBuf,
    cfg: MaintainConfig,
    live: Arc<Live>,
    stats: Arc<MaintainStats>,
    stop: Receiver<()>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("silt-maintain".into())
        .spawn(move || {
            let every = cfg
                .compact_every
                .or(cfg.retain.as_ref().map(|_| Duration::from_secs(3600)));
            let mut last_run = Instant::now();
            let mut seen = stamp(&root);
            loop {
                let wait = match every {
                    Some(e) => e.saturating_sub(last_run.elapsed()).min(WATCH),
                    None => WATCH,
                };
                match stop.recv_timeout(wait) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                if every.is_some_and(|e| last_run.elapsed() >= e) {
                    run_once(&root, &staging, &cfg, &live, &stats, &stop);
                    last_run = Instant::now();
                    seen = stamp(&root).or(seen);
                    continue;
                }
                if let Some(now) = stamp(&root) {
                    if seen.as_ref() != Some(&now) {
                        seen = Some(now);
                        rescan(&root, &live, &stats);
                    }
                }
            }
        })
}

/// Lists the lake again after another process changed its files.
fn rescan(root: &LakeRoot, live: &Live, stats: &MaintainStats) {
    let update = live.begin_update();
    match LakeIndex::open(root) {
        Ok(index) => {
            stats.rescans.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                "the lake changed under the server (compact, retain or vacuum): listed it again"
            );
            update.replace(index);
        }
        Err(e) => tracing::warn!("listing the lake again: {e:#}"),
    }
}
