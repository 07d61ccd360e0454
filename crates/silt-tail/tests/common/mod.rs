//! A model consumer shared by the integration tests: it checks the event protocol (Data only
//! inside Opened..Closed, contiguous offsets), keeps the lines per stream, and builds
//! checkpoints from `Data.end` the way `silt serve` will.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use silt_tail::{FileId, TailCheckpoint, TailConfig, TailEvent, Tailer};

pub fn config(dir: &Path, pattern: &str) -> TailConfig {
    TailConfig {
        rotate_wait: Duration::from_millis(50),
        poll_interval: Duration::from_millis(5),
        ..TailConfig::new([dir.join(pattern).to_string_lossy().into_owned()])
    }
}

#[derive(Default)]
pub struct Consumer {
    /// Lines per stream, in the order delivered.
    pub lines: HashMap<FileId, Vec<Vec<u8>>>,
    /// Stream order of first appearance.
    pub order: Vec<FileId>,
    pub open: HashSet<FileId>,
    pub next: HashMap<FileId, u64>,
    pub checkpoints: HashMap<FileId, TailCheckpoint>,
    pub opened: Vec<(FileId, PathBuf, u64, &'static str)>,
    pub closed: Vec<(FileId, PathBuf, &'static str)>,
    pub warnings: Vec<(PathBuf, String)>,
    pub headers: Vec<(FileId, u64, Vec<u8>)>,
}

impl Consumer {
    pub fn take(&mut self, events: Vec<TailEvent>) -> usize {
        let mut data = 0;
        for e in events {
            match e {
                TailEvent::Opened {
                    id,
                    path,
                    offset,
                    reason,
                } => {
                    assert!(
                        self.open.insert(id.clone()),
                        "opened twice: {id:?} {path:?}"
                    );
                    self.next.insert(id.clone(), offset);
                    if !self.lines.contains_key(&id) {
                        self.order.push(id.clone());
                        self.lines.insert(id.clone(), Vec::new());
                    }
                    self.opened.push((id, path, offset, reason));
                }
                TailEvent::Data {
                    id,
                    path,
                    start,
                    end,
                    lines,
                    header,
                } => {
                    assert!(self.open.contains(&id), "data outside a stream: {path:?}");
                    let next = self.next[&id];
                    if next != start {
                        // Only skipped over-long lines may leave a gap, and a warning says so.
                        let range = format!("{next}..{start}");
                        assert!(
                            next < start
                                && self
                                    .warnings
                                    .iter()
                                    .any(|(p, m)| *p == path && m.contains(&range)),
                            "gap or overlap in {path:?}: {next} vs {start}"
                        );
                    }
                    assert_eq!(end - start, lines.len() as u64);
                    self.next.insert(id.clone(), end);
                    if let Some(h) = header {
                        self.headers.push((id.clone(), start, h));
                    }
                    let v = self.lines.get_mut(&id).unwrap();
                    for l in lines.split_inclusive(|&b| b == b'\n') {
                        v.push(l.to_vec());
                        data += 1;
                    }
                    self.checkpoints.insert(
                        id.clone(),
                        TailCheckpoint {
                            id,
                            path,
                            offset: end,
                        },
                    );
                }
                TailEvent::Closed { id, path, reason } => {
                    assert!(self.open.remove(&id), "closed but not open: {path:?}");
                    self.closed.push((id, path, reason));
                }
                TailEvent::Warning { path, message } => self.warnings.push((path, message)),
            }
        }
        data
    }

    /// Polls until `done` holds, failing after `limit`.
    pub fn poll_until(
        &mut self,
        t: &mut Tailer,
        limit: Duration,
        done: impl Fn(&Consumer) -> bool,
    ) {
        let until = Instant::now() + limit;
        loop {
            let ev = t.poll();
            self.take(ev);
            if done(self) {
                return;
            }
            assert!(Instant::now() < until, "timed out");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Every delivered line parsed as a number, per stream in delivery order.
    pub fn numbers(&self) -> Vec<Vec<u64>> {
        self.order
            .iter()
            .map(|id| {
                self.lines[id]
                    .iter()
                    .map(|l| {
                        let s = std::str::from_utf8(l).unwrap();
                        assert!(s.ends_with('\n'), "incomplete line {s:?}");
                        s.trim_end().parse::<u64>().unwrap()
                    })
                    .collect()
            })
            .collect()
    }

    pub fn all_numbers_sorted(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.numbers().into_iter().flatten().collect();
        v.sort_unstable();
        v
    }

    pub fn line_count(&self) -> usize {
        self.lines.values().map(Vec::len).sum()
    }

    pub fn checkpoints(&self) -> Vec<TailCheckpoint> {
        self.checkpoints.values().cloned().collect()
    }
}

/// Asserts that each stream's numbers increase.
pub fn assert_increasing(numbers: &[Vec<u64>]) {
    for s in numbers {
        assert!(s.windows(2).all(|w| w[0] < w[1]), "out of order: {s:?}");
    }
}
