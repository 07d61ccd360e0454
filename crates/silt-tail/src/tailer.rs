//! The [`Tailer`]: one synchronous [`Tailer::poll`] at a time rescans the glob patterns, stats
//! every followed file through its open descriptor, reads what was appended (within the
//! per-poll byte budget), and turns renames, deletions and truncations into stream events.
//!
//! A poll, in order:
//! 1. **Scan.** Every pattern is expanded; regular files are keyed by device and inode (a file
//!    matched by two patterns, or by two names, is followed once). Directories and other
//!    non-files that match are reported once each and skipped.
//! 2. **Presence.** A followed file found under another matching name keeps its stream (only its
//!    path changes). A followed file no longer matched was renamed away or deleted: it is
//!    looked for once in its directory (so its events and checkpoints carry its new name) and
//!    from then on is *gone*: it is read until it stops growing, and closed once it has been at
//!    its end for `rotate_wait`, since writers commonly keep writing to the old descriptor for a
//!    moment after a rename.
//! 3. **New files.** A matched file that is not followed is opened. Files found by the first scan
//!    with no checkpoint start at their end when `start_at_end_for_new_files` (at the last line
//!    boundary, so no half line is delivered); every other new file starts at 0: a file that
//!    appears while running, a rotated-in replacement, a file whose inode was reused.
//! 4. **Reads.** Gone files first (draining the old file of a rotation before its successor is
//!    read, as far as the budget allows), then the others round-robin from a cursor: the next
//!    poll starts with the file the budget ran out on, so a busy file cannot starve the rest. Each file is `fstat`ed: shorter than the
//!    read position, or grown with its first bytes no longer matching its fingerprint, means it
//!    was truncated (copytruncate) and the stream restarts at 0.
//! 5. **Closes.** Gone files that are drained and quiet are closed (a last partial line is
//!    delivered with a warning) and their descriptors dropped.
//!
//! A stream is announced ([`TailEvent::Opened`]) once its file holds a complete line (or 1 KiB),
//! because that is when its fingerprint can be taken; an empty new file is held open silently.
//!
//! Touches only the files and directories the patterns match (and, when a followed file is
//! renamed away, the directory it was in); it only ever reads.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{self, File, Metadata};
use std::io;
use std::os::unix::fs::{DirEntryExt, FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::id::{
    fingerprint_matches, fingerprint_of, read_prefix, FileId, TailCheckpoint, FINGERPRINT_BYTES,
};
use crate::lines::{LineBuffer, Piece};

/// Most bytes read from one file by one `read` call.
const CHUNK: usize = 1 << 20;
/// Most bytes looked at for a file's leading `#` header block.
const MAX_HEADER_BYTES: usize = 1 << 20;
/// How many closed, renamed-away streams are remembered (so one that shows up again under a
/// matching name continues where it ended instead of being read twice).
const FINISHED_MEMORY: usize = 4096;

/// What to follow and how.
#[derive(Clone, Debug)]
pub struct TailConfig {
    /// Glob patterns (`glob` crate syntax: `*`, `?`, `[...]`, `**`).
    pub patterns: Vec<String>,
    /// Files found by the first scan without a checkpoint start at their end (as `tail -F -n0`)
    /// instead of their start. Files that appear later always start at their start.
    pub start_at_end_for_new_files: bool,
    /// Longest line kept, without its newline; longer ones are skipped with a warning.
    pub max_line_bytes: usize,
    /// Most bytes read by one poll, over all files (backpressure: what was not read is read by
    /// the next polls).
    pub max_read_bytes: usize,
    /// How often the caller is expected to poll (the tailer itself never sleeps).
    pub poll_interval: Duration,
    /// How long a renamed-away or deleted file is still read after it last grew.
    pub rotate_wait: Duration,
}

impl Default for TailConfig {
    fn default() -> Self {
        TailConfig {
            patterns: Vec::new(),
            start_at_end_for_new_files: false,
            max_line_bytes: 1 << 20,
            max_read_bytes: 16 << 20,
            poll_interval: Duration::from_millis(250),
            rotate_wait: Duration::from_secs(5),
        }
    }
}

impl TailConfig {
    /// The defaults with these patterns.
    pub fn new<S: Into<String>>(patterns: impl IntoIterator<Item = S>) -> Self {
        TailConfig {
            patterns: patterns.into_iter().map(Into::into).collect(),
            ..TailConfig::default()
        }
    }
}

/// What a poll reports; see the variants. Per stream, events come in offset order, between its
/// `Opened` and its `Closed`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TailEvent {
    /// Complete lines (each ending in '\n') read from `path` at [start, end). `header` is set on
    /// the first data of a stream resumed mid-file: the file's leading header block
    /// (consecutive lines starting with '#' at offset 0 — Zeek logs — as far as they lie before
    /// `start`) so a decoder that needs it can be primed; None otherwise. The one exception to
    /// "complete": the last line of a stream that ended without its newline, which comes with a
    /// [`TailEvent::Warning`] saying so.
    Data {
        id: FileId,
        path: PathBuf,
        start: u64,
        end: u64,
        lines: Vec<u8>,
        header: Option<Vec<u8>>,
    },
    /// A new stream begins at `offset` (reasons: `new`, `rotated` — a file replacing one that
    /// was renamed away, `truncated` — a truncated file restarting at 0, `resumed` — from a
    /// checkpoint, `inode reused` — a checkpoint's inode now holds another file): the consumer
    /// starts a fresh decoder.
    Opened {
        id: FileId,
        path: PathBuf,
        offset: u64,
        reason: &'static str,
    },
    /// The stream ended (reasons: `rotated` — renamed away and drained, `deleted` — deleted and
    /// drained, `truncated`, `error`).
    Closed {
        id: FileId,
        path: PathBuf,
        reason: &'static str,
    },
    /// Something the user should know (unreadable file, a line over max_line_bytes skipped — the
    /// skipped bytes are reported with offsets, never silently dropped).
    Warning { path: PathBuf, message: String },
}

/// One followed file.
struct Stream {
    dev: u64,
    ino: u64,
    /// Set once the stream is announced (see the module documentation).
    id: Option<FileId>,
    /// Where the file was last seen.
    path: PathBuf,
    file: File,
    lines: LineBuffer,
    /// The next data carries the header block (the stream started mid-file).
    header_due: bool,
    /// The reason its `Opened` will give.
    reason: &'static str,
    /// When it was first found unmatched (renamed away or deleted).
    gone_since: Option<Instant>,
    /// When it last grew (or was opened).
    last_growth: Instant,
}

impl Stream {
    fn key(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
}

/// Follows files; see the crate and module documentation.
pub struct Tailer {
    cfg: TailConfig,
    streams: Vec<Stream>,
    /// Whether the first scan (the one `start_at_end_for_new_files` applies to) happened.
    scanned: bool,
    /// Inodes whose checkpoint did not match the file now there.
    reused: HashSet<(u64, u64)>,
    /// Paths whose file went away (renamed or deleted) and that no file has taken since: the
    /// next file there is a rotated-in replacement.
    replaced: HashSet<PathBuf>,
    /// Closed renamed-away streams: inode -> (id, end offset), oldest first in `finished_order`.
    finished: HashMap<(u64, u64), (FileId, u64)>,
    finished_order: VecDeque<(u64, u64)>,
    /// The last warning given per path, so a persistent condition is reported once.
    warned: HashMap<PathBuf, String>,
    /// Events produced outside a poll (by `new`), handed out by the next poll.
    queued: Vec<TailEvent>,
    cursor: usize,
    scratch: Vec<u8>,
}

impl Tailer {
    /// A tailer for `cfg.patterns`, resuming the streams of `checkpoints` (see the crate
    /// documentation). Fails only on an invalid pattern.
    pub fn new(mut cfg: TailConfig, checkpoints: Vec<TailCheckpoint>) -> io::Result<Self> {
        for p in &cfg.patterns {
            glob::Pattern::new(p).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("invalid tail pattern {p:?}: {e}"),
                )
            })?;
        }
        cfg.max_read_bytes = cfg.max_read_bytes.max(1);
        let mut t = Tailer {
            cfg,
            streams: Vec::new(),
            scanned: false,
            reused: HashSet::new(),
            replaced: HashSet::new(),
            finished: HashMap::new(),
            finished_order: VecDeque::new(),
            warned: HashMap::new(),
            queued: Vec::new(),
            cursor: 0,
            scratch: Vec::new(),
        };
        // One checkpoint per stream: the furthest.
        let mut best: HashMap<FileId, TailCheckpoint> = HashMap::new();
        for cp in checkpoints {
            match best.get(&cp.id) {
                Some(b) if b.offset >= cp.offset => {}
                _ => {
                    best.insert(cp.id.clone(), cp);
                }
            }
        }
        let mut cps: Vec<TailCheckpoint> = best.into_values().collect();
        cps.sort_by(|a, b| (&a.path, a.offset).cmp(&(&b.path, b.offset)));
        for cp in cps {
            t.resume(cp);
        }
        Ok(t)
    }

    /// Finds the file of `cp` (at its path, or renamed within its directory) and follows it
    /// from the checkpoint's offset.
    fn resume(&mut self, cp: TailCheckpoint) {
        let key = (cp.id.dev, cp.id.ino);
        if self.streams.iter().any(|s| s.key() == key) {
            return;
        }
        let found = match open_regular(&cp.path) {
            Ok((file, meta)) if (meta.dev(), meta.ino()) == key => {
                match fingerprint_matches(&file, cp.id.fingerprint) {
                    Ok(true) => Some((cp.path.clone(), file, meta)),
                    Ok(false) => {
                        tracing::info!(path = %cp.path.display(), "inode of a checkpoint reused by another file");
                        self.reused.insert(key);
                        None
                    }
                    Err(e) => {
                        self.warn(&cp.path, format!("cannot read: {e}"));
                        None
                    }
                }
            }
            _ => match find_in_dir(&cp.path, key).map(|p| (open_regular(&p), p)) {
                Some((Ok((file, meta)), p)) if (meta.dev(), meta.ino()) == key => {
                    if fingerprint_matches(&file, cp.id.fingerprint).unwrap_or(false) {
                        Some((p, file, meta))
                    } else {
                        self.reused.insert(key);
                        None
                    }
                }
                _ => None,
            },
        };
        let Some((path, file, meta)) = found else {
            tracing::debug!(path = %cp.path.display(), "checkpointed file not found");
            return;
        };
        let (offset, reason) = if meta.len() < cp.offset {
            self.queued.push(TailEvent::Warning {
                path: path.clone(),
                message: format!(
                    "file is shorter ({} bytes) than its checkpoint ({}): it was truncated while \
                     not followed; reading it again from its start",
                    meta.len(),
                    cp.offset
                ),
            });
            (0, "truncated")
        } else {
            (cp.offset, "resumed")
        };
        self.queued.push(TailEvent::Opened {
            id: cp.id.clone(),
            path: path.clone(),
            offset,
            reason,
        });
        self.streams.push(Stream {
            dev: key.0,
            ino: key.1,
            id: Some(cp.id),
            path,
            file,
            lines: LineBuffer::new(offset, self.cfg.max_line_bytes),
            header_due: offset > 0,
            reason,
            gone_since: None,
            last_growth: Instant::now(),
        });
    }

    /// The configuration in use.
    pub fn config(&self) -> &TailConfig {
        &self.cfg
    }

    /// One round: rescans the globs (new files), reads what has been appended, handles rotation;
    /// returns events in order (per file, offsets increasing). Never blocks longer than reading
    /// what is there.
    pub fn poll(&mut self) -> Vec<TailEvent> {
        let now = Instant::now();
        let mut ev = std::mem::take(&mut self.queued);
        let scan = self.scan(&mut ev);
        let by_key: HashMap<(u64, u64), &PathBuf> = scan.iter().map(|(p, k)| (*k, p)).collect();

        // Presence of the followed files.
        for s in &mut self.streams {
            if let Some(&p) = by_key.get(&s.key()) {
                if *p != s.path {
                    s.path = p.clone();
                }
                s.gone_since = None;
            } else if s.gone_since.is_none() {
                s.gone_since = Some(now);
                self.replaced.insert(s.path.clone());
                if let Some(p) = find_in_dir(&s.path, s.key()) {
                    s.path = p;
                }
            }
        }

        // New files.
        let first = !self.scanned;
        self.scanned = true;
        let known: HashSet<(u64, u64)> = self.streams.iter().map(Stream::key).collect();
        for (path, key) in &scan {
            if !known.contains(key) {
                let reason = if self.replaced.remove(path) {
                    "rotated"
                } else {
                    "new"
                };
                self.open_new(path, first, reason, now, &mut ev);
            }
        }

        // Reads: gone files first, then the rest round-robin.
        let n = self.streams.len();
        let mut order: Vec<usize> = (0..n)
            .filter(|&i| self.streams[i].gone_since.is_some())
            .collect();
        order.sort_by_key(|&i| self.streams[i].gone_since);
        if n > 0 {
            let c = self.cursor % n;
            order.extend(
                (c..n)
                    .chain(0..c)
                    .filter(|&i| self.streams[i].gone_since.is_none()),
            );
        }
        let mut budget = self.cfg.max_read_bytes;
        let mut exhausted_at = None;
        for i in order {
            let had_budget = budget > 0;
            self.service(i, now, &mut budget, &mut ev);
            if had_budget && budget == 0 {
                exhausted_at = Some(i);
            }
        }
        // The next poll starts with the file the budget ran out on (it may have more), or
        // with the next one when everything was read.
        self.cursor = match exhausted_at {
            Some(i) if self.streams[i].gone_since.is_none() => i,
            Some(_) => self.cursor,
            None => self.cursor.wrapping_add(1),
        };

        // Closes.
        let mut i = 0;
        while i < self.streams.len() {
            if self.close_if_done(i, now, &mut ev) {
                self.streams.swap_remove(i);
            } else {
                i += 1;
            }
        }
        ev
    }

    /// Current read positions (what a consumer would checkpoint after it made the data durable;
    /// the consumer usually builds checkpoints from `Data.end` itself). Streams not announced
    /// yet have nothing to checkpoint and are left out.
    pub fn positions(&self) -> Vec<TailCheckpoint> {
        self.streams
            .iter()
            .filter_map(|s| {
                s.id.as_ref().map(|id| TailCheckpoint {
                    id: id.clone(),
                    path: s.path.clone(),
                    offset: s.lines.offset(),
                })
            })
            .collect()
    }

    /// Regular files matched by the patterns, each inode once, with the first name found.
    fn scan(&mut self, ev: &mut Vec<TailEvent>) -> Vec<(PathBuf, (u64, u64))> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let patterns = self.cfg.patterns.clone();
        for pattern in &patterns {
            let Ok(paths) = glob::glob(pattern) else {
                continue; // validated in `new`
            };
            for entry in paths {
                match entry {
                    Ok(path) => match fs::metadata(&path) {
                        Ok(m) if m.is_file() => {
                            if seen.insert((m.dev(), m.ino())) {
                                out.push((path, (m.dev(), m.ino())));
                            }
                        }
                        Ok(_) => {
                            self.warn_to(ev, &path, "not a regular file; skipped".into());
                        }
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => self.warn_to(ev, &path, format!("cannot stat: {e}")),
                    },
                    Err(e) => {
                        let path = e.path().to_path_buf();
                        self.warn_to(ev, &path, format!("cannot list: {}", e.error()));
                    }
                }
            }
        }
        out
    }

    /// Starts following the file at `path`.
    fn open_new(
        &mut self,
        path: &Path,
        first_scan: bool,
        reason: &'static str,
        now: Instant,
        ev: &mut Vec<TailEvent>,
    ) {
        let (file, meta) = match open_regular(path) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => {
                self.warn_to(ev, path, format!("cannot open: {e}"));
                return;
            }
        };
        let key = (meta.dev(), meta.ino());
        if self.streams.iter().any(|s| s.key() == key) {
            return; // replaced between the scan and the open by a file already followed
        }
        self.warned.remove(path);
        let max_line = self.cfg.max_line_bytes;
        let mut s = Stream {
            dev: key.0,
            ino: key.1,
            id: None,
            path: path.to_path_buf(),
            file,
            lines: LineBuffer::new(0, max_line),
            header_due: false,
            reason,
            gone_since: None,
            last_growth: now,
        };
        if self.reused.remove(&key) {
            s.reason = "inode reused";
        } else if let Some((id, offset)) = self.finished.remove(&key) {
            if fingerprint_matches(&s.file, id.fingerprint).unwrap_or(false) && meta.len() >= offset
            {
                s.lines = LineBuffer::new(offset, max_line);
                s.header_due = offset > 0;
                s.reason = "resumed";
                s.id = Some(id);
                ev.push(TailEvent::Opened {
                    id: s.id.clone().expect("just set"),
                    path: s.path.clone(),
                    offset,
                    reason: s.reason,
                });
            }
        } else if first_scan && self.cfg.start_at_end_for_new_files && meta.len() > 0 {
            match end_start(&s.file, meta.len(), max_line) {
                Ok((offset, false)) => s.lines = LineBuffer::new(offset, max_line),
                Ok((offset, true)) => s.lines = LineBuffer::skipping(offset, max_line),
                Err(e) => {
                    self.warn_to(ev, path, format!("cannot read: {e}"));
                    return;
                }
            }
            s.header_due = s.lines.offset() > 0;
        }
        self.streams.push(s);
    }

    /// Checks stream `i` for truncation, announces it when it can be, and reads what the budget
    /// allows.
    fn service(&mut self, i: usize, now: Instant, budget: &mut usize, ev: &mut Vec<TailEvent>) {
        let size = match self.streams[i].file.metadata() {
            Ok(m) => m.len(),
            Err(e) => {
                let path = self.streams[i].path.clone();
                self.warn_to(ev, &path, format!("cannot stat: {e}"));
                return;
            }
        };
        let s = &mut self.streams[i];
        let truncated = if size < s.lines.read_pos() {
            Some("it shrank below the read offset")
        } else if size > s.lines.read_pos() {
            match &s.id {
                Some(id) => match fingerprint_matches(&s.file, id.fingerprint) {
                    Ok(true) => None,
                    Ok(false) => Some("its first bytes changed"),
                    Err(_) => None, // reported by the read below
                },
                None => None,
            }
        } else {
            None
        };
        if let Some(why) = truncated {
            restart_truncated(s, why, ev);
        }
        if s.id.is_none() && !announce(s, size, false, ev) {
            return;
        }
        while s.lines.read_pos() < size && *budget > 0 {
            let want = (size - s.lines.read_pos())
                .min(*budget as u64)
                .min(CHUNK as u64) as usize;
            self.scratch.resize(want, 0);
            let got = match s.file.read_at(&mut self.scratch, s.lines.read_pos()) {
                Ok(0) => break, // shrank since the stat: seen next poll
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let (path, msg) = (s.path.clone(), format!("cannot read: {e}"));
                    warn_once(&mut self.warned, ev, &path, msg);
                    return;
                }
            };
            *budget -= got;
            s.last_growth = now;
            let mut pieces = Vec::new();
            s.lines.push(&self.scratch[..got], &mut pieces);
            emit(s, pieces, self.cfg.max_line_bytes, ev);
        }
        if self.scratch.capacity() > 4 * CHUNK {
            self.scratch = Vec::new();
        }
    }

    /// Closes stream `i` if it is gone, drained and quiet for `rotate_wait`; true if it did.
    fn close_if_done(&mut self, i: usize, now: Instant, ev: &mut Vec<TailEvent>) -> bool {
        let rotate_wait = self.cfg.rotate_wait;
        let max_line = self.cfg.max_line_bytes;
        let s = &mut self.streams[i];
        let Some(gone) = s.gone_since else {
            return false;
        };
        let meta = match s.file.metadata() {
            Ok(m) => m,
            Err(e) => {
                ev.push(TailEvent::Warning {
                    path: s.path.clone(),
                    message: format!("cannot stat, closing: {e}"),
                });
                if let Some(id) = s.id.clone() {
                    ev.push(TailEvent::Closed {
                        id,
                        path: s.path.clone(),
                        reason: "error",
                    });
                }
                return true;
            }
        };
        if meta.len() > s.lines.read_pos()
            || now.duration_since(gone.max(s.last_growth)) < rotate_wait
        {
            return false;
        }
        if meta.len() < s.lines.read_pos() {
            // Truncated after it was renamed away: the poll after this one restarts it.
            restart_truncated(s, "it shrank below the read offset", ev);
            return false;
        }
        if s.id.is_none() && !announce(s, meta.len(), true, ev) {
            return true; // empty: never announced, nothing to close
        }
        let mut pieces = Vec::new();
        s.lines.finish(&mut pieces);
        emit(s, pieces, max_line, ev);
        let deleted = meta.nlink() == 0;
        let id = s.id.clone().expect("announced above");
        ev.push(TailEvent::Closed {
            id: id.clone(),
            path: s.path.clone(),
            reason: if deleted { "deleted" } else { "rotated" },
        });
        if !deleted {
            let key = s.key();
            let offset = s.lines.offset();
            if self.finished.insert(key, (id, offset)).is_none() {
                self.finished_order.push_back(key);
            }
            while self.finished_order.len() > FINISHED_MEMORY {
                if let Some(k) = self.finished_order.pop_front() {
                    self.finished.remove(&k);
                }
            }
        }
        true
    }

    fn warn_to(&mut self, ev: &mut Vec<TailEvent>, path: &Path, message: String) {
        warn_once(&mut self.warned, ev, path, message);
    }

    fn warn(&mut self, path: &Path, message: String) {
        let mut ev = std::mem::take(&mut self.queued);
        warn_once(&mut self.warned, &mut ev, path, message);
        self.queued = ev;
    }
}

/// Reports `message` about `path` unless it was the last thing reported about it.
fn warn_once(
    warned: &mut HashMap<PathBuf, String>,
    ev: &mut Vec<TailEvent>,
    path: &Path,
    message: String,
) {
    if warned.get(path) == Some(&message) {
        return;
    }
    tracing::warn!(path = %path.display(), "{message}");
    warned.insert(path.to_path_buf(), message.clone());
    ev.push(TailEvent::Warning {
        path: path.to_path_buf(),
        message,
    });
}

/// Ends the stream of a truncated file (delivering a partial last line) and starts it again at 0.
fn restart_truncated(s: &mut Stream, why: &str, ev: &mut Vec<TailEvent>) {
    let max_line = s.lines.max_line();
    if let Some(id) = s.id.clone() {
        let mut pieces = Vec::new();
        s.lines.finish(&mut pieces);
        emit(s, pieces, max_line, ev);
        ev.push(TailEvent::Warning {
            path: s.path.clone(),
            message: format!(
                "truncated at offset {} ({why}); reading it again from its start",
                s.lines.offset()
            ),
        });
        ev.push(TailEvent::Closed {
            id,
            path: s.path.clone(),
            reason: "truncated",
        });
    } else if s.lines.has_unfinished() {
        ev.push(TailEvent::Warning {
            path: s.path.clone(),
            message: format!(
                "truncated ({why}) before its first line was complete: bytes {}..{} were never \
                 delivered",
                s.lines.offset(),
                s.lines.read_pos()
            ),
        });
    }
    s.id = None;
    s.lines = LineBuffer::new(0, max_line);
    s.header_due = false;
    s.reason = "truncated";
}

/// Takes the stream's fingerprint and announces it, once its file holds a complete line or
/// [`FINGERPRINT_BYTES`] (or anything at all, when `closing`). False if not yet.
fn announce(s: &mut Stream, size: u64, closing: bool, ev: &mut Vec<TailEvent>) -> bool {
    if size == 0 {
        return false;
    }
    let len = size.min(FINGERPRINT_BYTES as u64) as usize;
    let prefix = match read_prefix(&s.file, len) {
        Ok(p) => p,
        Err(e) => {
            ev.push(TailEvent::Warning {
                path: s.path.clone(),
                message: format!("cannot read: {e}"),
            });
            return false;
        }
    };
    if prefix.is_empty()
        || !(closing || prefix.len() == FINGERPRINT_BYTES || prefix.contains(&b'\n'))
    {
        return false;
    }
    let id = FileId {
        dev: s.dev,
        ino: s.ino,
        fingerprint: fingerprint_of(&prefix),
    };
    ev.push(TailEvent::Opened {
        id: id.clone(),
        path: s.path.clone(),
        offset: s.lines.offset(),
        reason: s.reason,
    });
    s.id = Some(id);
    true
}

/// Turns line pieces into events.
fn emit(s: &mut Stream, pieces: Vec<Piece>, max_line: usize, ev: &mut Vec<TailEvent>) {
    let Some(id) = s.id.clone() else {
        return;
    };
    for p in pieces {
        match p {
            Piece::Lines { start, end, bytes } | Piece::Partial { start, end, bytes } => {
                let partial = bytes.last() != Some(&b'\n');
                let header = if s.header_due {
                    s.header_due = false;
                    header_block(&s.file, start)
                } else {
                    None
                };
                ev.push(TailEvent::Data {
                    id: id.clone(),
                    path: s.path.clone(),
                    start,
                    end,
                    lines: bytes,
                    header,
                });
                if partial {
                    ev.push(TailEvent::Warning {
                        path: s.path.clone(),
                        message: format!(
                            "the stream ended with an incomplete last line (no newline) at \
                             bytes {start}..{end}; delivered as it is"
                        ),
                    });
                }
            }
            Piece::Skipped {
                start,
                end,
                complete,
            } => ev.push(TailEvent::Warning {
                path: s.path.clone(),
                message: if complete {
                    format!(
                        "skipped a line of {} bytes at bytes {start}..{end}: longer than \
                         max_line_bytes ({max_line})",
                        end - start
                    )
                } else {
                    format!(
                        "skipped bytes {start}..{end}: a line longer than max_line_bytes \
                         ({max_line}) that the stream ended in"
                    )
                },
            }),
        }
    }
}

/// The leading `#` lines of `file` that end at or before `upto`; None if there are none.
fn header_block(file: &File, upto: u64) -> Option<Vec<u8>> {
    let len = upto.min(MAX_HEADER_BYTES as u64) as usize;
    let mut buf = read_prefix(file, len).ok()?;
    let mut end = 0;
    while end < buf.len() && buf[end] == b'#' {
        match buf[end..].iter().position(|&b| b == b'\n') {
            Some(i) => end += i + 1,
            None => break,
        }
    }
    if end == 0 {
        return None;
    }
    buf.truncate(end);
    Some(buf)
}

/// Where a stream started at the end of a file of `size` bytes begins: after its last newline
/// (false), or, when the last `max_line + 1` bytes hold none, at `size` in the middle of a line
/// too long to keep (true).
fn end_start(file: &File, size: u64, max_line: usize) -> io::Result<(u64, bool)> {
    let window = (max_line as u64).saturating_add(1).min(size);
    let mut hi = size;
    let lo = size - window;
    let mut buf = vec![0u8; (window as usize).min(64 << 10)];
    while hi > lo {
        let n = ((hi - lo) as usize).min(buf.len());
        let at = hi - n as u64;
        file.read_exact_at(&mut buf[..n], at)?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            return Ok((at + i as u64 + 1, false));
        }
        hi = at;
    }
    Ok(if lo == 0 { (0, false) } else { (size, true) })
}

/// Opens `path` if it is a regular file (checked before the open too: opening a FIFO blocks).
fn open_regular(path: &Path) -> io::Result<(File, Metadata)> {
    if !fs::metadata(path)?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    let file = File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((file, meta))
}

/// The name, in the directory of `path`, of the file with inode `key` (a file renamed within
/// its directory), if any.
fn find_in_dir(path: &Path, key: (u64, u64)) -> Option<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    for entry in fs::read_dir(dir).ok()?.flatten() {
        if entry.ino() != key.1 {
            continue;
        }
        if let Ok(m) = entry.metadata() {
            if m.is_file() && m.dev() == key.0 && m.ino() == key.1 {
                return Some(entry.path());
            }
        }
    }
    None
}
