//! Property: whatever the interleaving of writes (some leaving half a line), rotations by
//! rename, polls, stops and restarts from the consumer's checkpoints, every line written is
//! delivered exactly once, and in order within its file.
//!
//! The one rule the generated runs follow is the documented limit of checkpoints: a file is
//! rotated away only once the consumer holds a checkpoint for it (a file rotated away before any
//! of its lines were delivered, or created and rotated away while no tailer ran, has nothing
//! that leads a restarted tailer to it).

mod common;

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use common::{assert_increasing, config, Consumer};
use proptest::prelude::*;
use silt_tail::Tailer;

#[derive(Clone, Debug)]
enum Op {
    /// Write this many lines; when `split`, the last one only half (the rest comes first in the
    /// next write).
    Write {
        lines: u8,
        split: bool,
    },
    Rotate,
    Poll,
    Stop,
    Start,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (1u8..30, any::<bool>()).prop_map(|(lines, split)| Op::Write { lines, split }),
        1 => Just(Op::Rotate),
        3 => Just(Op::Poll),
        1 => Just(Op::Stop),
        1 => Just(Op::Start),
    ]
}

struct Writer {
    file: File,
    next: u64,
    rest: Option<String>,
    rotations: u32,
}

impl Writer {
    fn finish_line(&mut self) {
        if let Some(r) = self.rest.take() {
            self.file.write_all(r.as_bytes()).unwrap();
        }
    }

    fn write(&mut self, lines: u8, split: bool) {
        self.finish_line();
        for k in 0..lines {
            let line = format!("{}\n", self.next);
            self.next += 1;
            if split && k + 1 == lines {
                let (a, b) = line.split_at(line.len() / 2);
                self.file.write_all(a.as_bytes()).unwrap();
                self.rest = Some(b.to_string());
            } else {
                self.file.write_all(line.as_bytes()).unwrap();
            }
        }
    }
}

fn open_log(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
}

fn run(ops: &[Op], max_read_bytes: usize) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("conn.log");
    let mut cfg = config(dir.path(), "*.log");
    cfg.rotate_wait = Duration::ZERO;
    cfg.max_read_bytes = max_read_bytes;
    let mut w = Writer {
        file: open_log(&log),
        next: 0,
        rest: None,
        rotations: 0,
    };
    let mut c = Consumer::default();
    let mut t = Some(Tailer::new(cfg.clone(), vec![]).unwrap());
    for op in ops {
        match op {
            Op::Write { lines, split } => w.write(*lines, *split),
            Op::Rotate => {
                let m = fs::metadata(&log).unwrap();
                let key = (m.dev(), m.ino());
                let checkpointed: HashSet<_> =
                    c.checkpoints.keys().map(|id| (id.dev, id.ino)).collect();
                if !checkpointed.contains(&key) {
                    continue;
                }
                w.finish_line();
                let to = dir.path().join(format!("conn.log.{}", w.rotations));
                fs::rename(&log, to).unwrap();
                w.rotations += 1;
                w.file = open_log(&log);
            }
            Op::Poll => {
                if let Some(t) = t.as_mut() {
                    let ev = t.poll();
                    c.take(ev);
                }
            }
            Op::Stop => {
                if t.take().is_some() {
                    // A new process: no stream is open for it until the new tailer says so.
                    c.open.clear();
                    c.next.clear();
                }
            }
            Op::Start => {
                if t.is_none() {
                    t = Some(Tailer::new(cfg.clone(), c.checkpoints()).unwrap());
                }
            }
        }
    }
    w.finish_line();
    let mut t = t.unwrap_or_else(|| Tailer::new(cfg.clone(), c.checkpoints()).unwrap());
    let total = w.next as usize;
    c.poll_until(&mut t, Duration::from_secs(5), |c| c.line_count() >= total);
    for _ in 0..3 {
        let ev = t.poll();
        c.take(ev);
    }
    let numbers = c.numbers();
    assert_increasing(&numbers);
    assert_eq!(c.all_numbers_sorted(), (0..w.next).collect::<Vec<_>>());
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn restarts_and_rotations_lose_nothing_and_repeat_nothing(
        ops in proptest::collection::vec(op(), 1..60),
        max_read_bytes in prop_oneof![Just(1usize << 20), 5usize..200],
    ) {
        run(&ops, max_read_bytes);
    }
}

#[test]
fn a_rotation_while_stopped_then_a_restart() {
    run(
        &[
            Op::Write {
                lines: 5,
                split: true,
            },
            Op::Poll,
            Op::Stop,
            Op::Write {
                lines: 3,
                split: false,
            },
            Op::Rotate,
            Op::Write {
                lines: 4,
                split: true,
            },
            Op::Start,
            Op::Poll,
            Op::Rotate,
            Op::Stop,
            Op::Write {
                lines: 2,
                split: false,
            },
            Op::Start,
        ],
        7,
    );
}
