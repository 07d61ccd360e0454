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
//!   (`_silt/replace/`, `_silt/trash/`) and by each replacement's output arriving ([`Watch`]);
//!   the lake is then listed again and the index replaced.
//!   Queries that started before that may fail on a file that was removed; running maintenance
//!   through the server (these options) avoids it.
//!
//! On an object-store lake the same runs through [`silt_lake::remote::compact`] and
//! [`silt_lake::remote::retain`] (outputs staged in the server's state directory), and other
//! processes' changes are noticed by listing `_silt/replace/` and `_silt/drop/` in the bucket.
//!
//! Touches the lake's data files through silt-lake's maintenance, and the index in [`Live`].

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use silt_lake::compact::{self, CompactObserver, CompactOptions, GroupResult};
use silt_lake::remote::replace::DROP_DIR;
use silt_lake::remote::LakeRoot;
use silt_lake::replace::REPLACE_DIR;
use silt_lake::retain::{self, RetainObserver, RetainOptions, TRASH_DIR};
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

/// What the server watches of other processes' maintenance: the records their commands leave
/// (`_silt/replace/`, and `_silt/trash/` or `_silt/drop/`), and whether each replacement's output
/// is in place yet. A compaction writes its record before its output: a listing taken between
/// the two still has the inputs and not the output, and the inputs go right after, so the
/// output's arrival must change the stamp too (else the index would keep the removed inputs
/// until the next record).
#[derive(Default)]
struct Watch {
    /// Each replacement record's output (relative to the lake), read once per record.
    outputs: HashMap<String, String>,
    /// Records whose output was seen in place (checked no more).
    committed: HashSet<String>,
}

/// One entry per record: its name, its time, whether its output is in place.
type Stamp = Vec<(String, Option<SystemTime>, bool)>;

impl Watch {
    /// The stamp of the records now; `None` when it cannot be read now (an object store that
    /// does not answer).
    fn stamp(&mut self, root: &LakeRoot) -> Option<Stamp> {
        let mut out: Stamp = Vec::new();
        match root {
            LakeRoot::Dir(root) => {
                let trash = std::fs::metadata(root.join(TRASH_DIR)).and_then(|m| m.modified());
                out.push((TRASH_DIR.to_string(), trash.ok(), true));
                if let Ok(rd) = std::fs::read_dir(root.join(REPLACE_DIR)) {
                    for e in rd.flatten() {
                        let name = e.file_name().to_string_lossy().into_owned();
                        if !name.ends_with(".json") {
                            continue;
                        }
                        let rel = format!("{REPLACE_DIR}/{name}");
                        let modified = e.metadata().and_then(|m| m.modified()).ok();
                        let done = self.committed(
                            &rel,
                            |rel| std::fs::read(root.join(rel)).ok(),
                            |o| root.join(o).exists(),
                        );
                        out.push((rel, modified, done));
                    }
                }
            }
            LakeRoot::Remote(lake) => {
                for d in [REPLACE_DIR, DROP_DIR] {
                    let listed = match lake.list(d) {
                        Ok(l) => l,
                        Err(e) => {
                            tracing::debug!("listing {}/{d}: {e:#}", lake.url());
                            return None;
                        }
                    };
                    for o in listed {
                        let done = d == DROP_DIR
                            || self.committed(
                                &o.rel,
                                |rel| lake.get(rel).ok().flatten().map(|b| b.to_vec()),
                                |out| lake.exists(out).unwrap_or(false),
                            );
                        out.push((o.rel, Some(o.modified), done));
                    }
                }
            }
        }
        // Records gone (vacuum) are forgotten.
        let names: HashSet<&str> = out.iter().map(|(n, _, _)| n.as_str()).collect();
        self.outputs.retain(|k, _| names.contains(k.as_str()));
        self.committed.retain(|k| names.contains(k.as_str()));
        out.sort();
        Some(out)
    }

    /// Whether the output of the replacement record `rel` is in place (`read` gives the
    /// record's bytes, `exists` says whether an output is there).
    fn committed(
        &mut self,
        rel: &str,
        read: impl FnOnce(&str) -> Option<Vec<u8>>,
        exists: impl FnOnce(&str) -> bool,
    ) -> bool {
        if self.committed.contains(rel) {
            return true;
        }
        if !self.outputs.contains_key(rel) {
            let Some(r) = read(rel)
                .and_then(|b| serde_json::from_slice::<silt_lake::replace::Replacement>(&b).ok())
            else {
                // Not readable yet (being written): looked at again next time.
                return false;
            };
            self.outputs.insert(rel.to_string(), r.output);
        }
        let done = exists(&self.outputs[rel]);
        if done {
            self.committed.insert(rel.to_string());
        }
        done
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
        for (path, e) in &r.damaged {
            // Told on every round it is still there: the lake needs a hand.
            self.stats.failures.fetch_add(1, Ordering::Relaxed);
            let msg = format!(
                "compaction of {}/{}: {} left in place, damaged ({e}); move it out of the lake \
                 (or restore it from a copy)",
                r.table,
                r.partition,
                path.display()
            );
            tracing::warn!("{msg}");
            *self.stats.last_error.lock().expect("not poisoned") = Some(msg);
        }
        match &r.error {
            Some(e) => {
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
                let msg = format!("compaction of {}/{}: {e}", r.table, r.partition);
                tracing::warn!("{msg}");
                *self.stats.last_error.lock().expect("not poisoned") = Some(msg);
            }
            // Damaged inputs left fewer than two to merge: nothing was written.
            None if r.output.is_none() => {}
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
        stopping(self.stop)
    }
}

/// A message or a closed channel both mean: stop.
fn stopping(stop: &Receiver<()>) -> bool {
    !matches!(stop.try_recv(), Err(std::sync::mpsc::TryRecvError::Empty))
}

/// Keeps `live`'s index true while a retention run drops partitions, and stops the run at
/// shutdown between partitions.
struct Prune<'a> {
    live: &'a Live,
    stop: &'a Receiver<()>,
    reader_wait: Duration,
}

impl RetainObserver for Prune<'_> {
    fn before_drop(&mut self, dir: &Path) {
        let update = self.live.begin_update();
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
        wait_for_readers(pin, self.reader_wait, self.stop);
    }

    fn cancelled(&self) -> bool {
        stopping(self.stop)
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
        let mut prune = Prune {
            live,
            stop,
            reader_wait: cfg.reader_wait,
        };
        let now = SystemTime::now();
        let done = match root {
            LakeRoot::Dir(d) => retain::retain_with(d, r, now, &mut prune),
            LakeRoot::Remote(lake) => {
                silt_lake::remote::retain::retain_with(lake, r, now, &mut prune)
            }
        };
        match done {
            Ok(rep) => {
                if rep.stopped {
                    tracing::info!(
                        "retention stopped for the shutdown after {} partitions; the next run \
                         drops the rest",
                        rep.dropped.len()
                    );
                }
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
            let mut watch = Watch::default();
            let mut seen = watch.stamp(&root);
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
                    seen = watch.stamp(&root).or(seen);
                    continue;
                }
                if let Some(now) = watch.stamp(&root) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A compaction's record arrives before its output: the stamp changes again when the
    /// output is in place (the rescan after that finds the output, not the removed inputs),
    /// and once more when the record goes.
    #[test]
    fn the_stamp_changes_when_a_replacements_output_arrives() {
        let d = tempfile::tempdir().unwrap();
        let root = LakeRoot::Dir(d.path().to_path_buf());
        let mut w = Watch::default();
        let empty = w.stamp(&root).unwrap();
        assert_eq!(w.stamp(&root).unwrap(), empty);
        let rec = silt_lake::replace::Replacement::new(
            "t.x",
            "t.x/dt=2024-01-01/c.parquet".into(),
            String::new(),
            vec!["t.x/dt=2024-01-01/a.parquet".into()],
            1,
        );
        std::fs::create_dir_all(d.path().join(REPLACE_DIR)).unwrap();
        let rec_path = d.path().join(REPLACE_DIR).join("c.json");
        std::fs::write(&rec_path, serde_json::to_vec(&rec).unwrap()).unwrap();
        let recorded = w.stamp(&root).unwrap();
        assert_ne!(recorded, empty);
        assert_eq!(w.stamp(&root).unwrap(), recorded, "nothing changed");
        let out = d.path().join("t.x/dt=2024-01-01/c.parquet");
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(&out, b"merged").unwrap();
        let committed = w.stamp(&root).unwrap();
        assert_ne!(committed, recorded, "the output's arrival is a change");
        assert_eq!(w.stamp(&root).unwrap(), committed);
        std::fs::remove_file(&rec_path).unwrap();
        assert_ne!(w.stamp(&root).unwrap(), committed);
        assert!(w.outputs.is_empty() && w.committed.is_empty());
    }
}
