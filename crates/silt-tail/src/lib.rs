//! silt-tail: file tailing for `silt serve --tail '/opt/zeek/logs/current/*.log' --tail
//! /var/log/suricata/eve.json`. Follows the files that glob patterns match, delivers whole lines
//! with the byte offsets they came from, survives rotation, and resumes from checkpoints with
//! nothing lost and nothing read twice. Synchronous: the caller runs a [`Tailer`] on a thread and
//! calls [`Tailer::poll`] every `poll_interval`.
//!
//! ```text
//!   glob patterns ──scan──> followed files (kept open, keyed by device+inode)
//!                              │ pread what was appended (per-poll byte budget)
//!                              ▼
//!                          line assembly ──> Opened / Data{start,end,lines,header} / Closed / Warning
//!                                                         │
//!   Tailer::new(.., checkpoints) <── consumer saves (id, path, Data.end) once durable
//! ```
//!
//! - [`id`]: [`FileId`] (device, inode, fingerprint of the first bytes) and [`TailCheckpoint`];
//! - `lines` (private): whole lines out of appended bytes, partial lines held back, over-long
//!   lines skipped and reported;
//! - [`tailer`]: [`Tailer`], [`TailConfig`], [`TailEvent`]: scanning, rotation, truncation,
//!   resuming.
//!
//! # What holds
//! - **Lines.** Only complete lines are delivered; a partial last line waits for its newline. A
//!   renamed-away or deleted file that stays partial for `rotate_wait` after it last grew is
//!   closed with its partial line delivered and a warning. A line over `max_line_bytes` is
//!   skipped, and a warning gives its offsets.
//! - **Rotation by rename** (logrotate `create`, Zeek moving `current/conn.log` away): the old
//!   file stays open, is read to its end (before the new file, within a poll) and for as long as
//!   it keeps growing, then closed `rotate_wait` after it last grew (`Closed("rotated")`, or
//!   `"deleted"` when it has no name left); the new file at the path is a new stream read from its
//!   start (`Opened("rotated")`). A rotated name that still matches a pattern is the same stream
//!   under a new path, never read twice. A writer that keeps writing to the renamed file longer
//!   than `rotate_wait` after its last write loses what it writes after the close.
//! - **Rotation by copytruncate**: the file shrinks below the read offset (or, grown back past it
//!   by the next poll, its first bytes no longer match its fingerprint) → `Closed("truncated")` +
//!   `Opened` at 0. copytruncate has an unavoidable loss window: lines appended after the tailer's
//!   last read and before the truncate are in the copy only (which is not followed) and are
//!   never delivered; so are lines of a file truncated and grown back past the old offset with an
//!   unchanged first 1 KiB between two polls. Prefer rename rotation; with copytruncate, a short
//!   `poll_interval` narrows the window.
//! - **Resume.** A checkpoint whose device, inode and fingerprint match the file at its path
//!   continues at its offset (`Opened("resumed")`; the first `Data` carries the file's `#`
//!   header block when it resumes mid-file). A checkpointed file renamed within its directory
//!   (`conn.log` → `conn.log.1`, matching no pattern) is found there and drained. A checkpoint
//!   whose inode now holds another file (the fingerprint differs) does not apply: that file is
//!   read from 0 (`Opened("inode reused")`). What a restart cannot find, because no checkpoint
//!   leads to it: the rest of a file rotated away *and* moved out of its directory (or deleted)
//!   while no tailer ran; a file created and rotated away entirely while no tailer ran; a file
//!   rotated away before any of its lines were delivered, when the tailer stops before
//!   delivering them.
//! - **Files** stay open while followed (hundreds are fine; each costs a descriptor), and are
//!   closed once drained after deletion or rotation. Unreadable files, directories matched by a
//!   pattern, vanishing files, binary data and huge lines give warnings (each condition once per
//!   path), never a panic.
//!
//! Events of one stream come in order (`Opened`, `Data` with increasing offsets, `Closed`), and
//! the `Data` of a stream are contiguous except where a warning reports skipped bytes. The key of
//! a stream is its [`FileId`]; its path is where the file was last seen and changes when a
//! followed file is renamed.
//!
//! Touches only the files the patterns match and their directories, read-only. Linux (Unix)
//! only: identities come from `std::os::unix::fs::MetadataExt`.

pub mod id;
mod lines;
pub mod tailer;

pub use id::{FileId, TailCheckpoint};
pub use tailer::{TailConfig, TailEvent, Tailer};
