//! Tailing real files in temporary directories: appends and partial lines, rotation by rename
//! (under load) and by copytruncate, deletion, resuming from checkpoints, Zeek header blocks,
//! many files, inode reuse, and hostile inputs.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{assert_increasing, config, Consumer};
use silt_tail::{FileId, TailCheckpoint, TailConfig, TailEvent, Tailer};

fn append(path: &std::path::Path, bytes: &[u8]) {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
}

fn numbered(range: std::ops::Range<u64>) -> Vec<u8> {
    range
        .map(|i| format!("{i}\n"))
        .collect::<String>()
        .into_bytes()
}

const ZEEK_HEADER: &str = "#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n\
#unset_field\t-\n#path\tconn\n#open\t2024-05-01-10-00-00\n#fields\tts\tuid\n#types\ttime\tstring\n";

#[test]
fn append_and_partial_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.log");
    fs::write(&path, b"one\ntw").unwrap();
    let mut t = Tailer::new(config(dir.path(), "*.log"), vec![]).unwrap();
    let ev = t.poll();
    let TailEvent::Opened {
        id,
        offset: 0,
        reason: "new",
        ..
    } = &ev[0]
    else {
        panic!("{ev:?}");
    };
    let id = id.clone();
    assert_eq!(
        ev[1..],
        [TailEvent::Data {
            id: id.clone(),
            path: path.clone(),
            start: 0,
            end: 4,
            lines: b"one\n".to_vec(),
            header: None
        }]
    );
    assert!(t.poll().is_empty());
    append(&path, b"o\nthree");
    assert_eq!(
        t.poll(),
        [TailEvent::Data {
            id: id.clone(),
            path: path.clone(),
            start: 4,
            end: 8,
            lines: b"two\n".to_vec(),
            header: None
        }]
    );
    assert!(t.poll().is_empty(), "a partial line waits for its newline");
    assert_eq!(t.positions()[0].offset, 8);
    append(&path, b"\n\nfour\n");
    assert_eq!(
        t.poll(),
        [TailEvent::Data {
            id,
            path,
            start: 8,
            end: 20,
            lines: b"three\n\nfour\n".to_vec(),
            header: None
        }]
    );
    assert_eq!(t.positions()[0].offset, 20);
}

#[test]
fn empty_file_is_announced_with_its_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.log");
    File::create(&path).unwrap();
    let mut t = Tailer::new(config(dir.path(), "*.log"), vec![]).unwrap();
    assert!(t.poll().is_empty());
    assert!(t.positions().is_empty());
    append(&path, b"partial");
    assert!(t.poll().is_empty());
    append(&path, b" line\n");
    let mut c = Consumer::default();
    c.take(t.poll());
    assert_eq!(c.opened.len(), 1);
    assert_eq!(c.lines[&c.order[0]], vec![b"partial line\n".to_vec()]);
}

/// A writer thread writes numbered lines (some in two writes, so the tailer sees partial
/// lines) while the test renames the file away five times; the writer reopens the path only
/// some lines after each rename, so the renamed file keeps growing for a while.
#[test]
fn rotation_by_rename_under_load() {
    const N: u64 = 30_000;
    const ROTATIONS: u64 = 5;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("conn.log");
    File::create(&log).unwrap();
    let reopen = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let rotated = Arc::new(AtomicU64::new(0));
    let writer = {
        let (log, reopen, written) = (log.clone(), reopen.clone(), written.clone());
        let rotated = rotated.clone();
        std::thread::spawn(move || {
            let mut f = OpenOptions::new().append(true).open(&log).unwrap();
            let mut late = 0;
            for i in 0..N {
                // Past each rotation point, wait for the test to have rotated (a slow test
                // thread would otherwise see the writer finish first).
                let due = (i * (ROTATIONS + 2) / N)
                    .min(ROTATIONS + 1)
                    .saturating_sub(1);
                while rotated.load(Ordering::Acquire) < due {
                    std::thread::sleep(Duration::from_micros(200));
                }
                if reopen.load(Ordering::Acquire) {
                    // Keep writing to the renamed file for a few lines, as writers do.
                    late += 1;
                    if late == 50 {
                        f = OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(&log)
                            .unwrap();
                        reopen.store(false, Ordering::Release);
                        late = 0;
                    }
                }
                let line = format!("{i}\n");
                let (a, b) = line.as_bytes().split_at(line.len() / 2);
                f.write_all(a).unwrap();
                if i % 7 == 0 {
                    std::thread::yield_now();
                }
                f.write_all(b).unwrap();
                written.store(i + 1, Ordering::Release);
                if i % 100 == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        })
    };
    let mut cfg = config(dir.path(), "*.log");
    cfg.rotate_wait = Duration::from_millis(200);
    let mut t = Tailer::new(cfg, vec![]).unwrap();
    let mut c = Consumer::default();
    let mut rotations = 0;
    while !writer.is_finished() {
        c.take(t.poll());
        let w = written.load(Ordering::Acquire);
        if rotations < ROTATIONS
            && w > (rotations + 1) * N / (ROTATIONS + 2)
            && !reopen.load(Ordering::Acquire)
        {
            fs::rename(&log, dir.path().join(format!("conn.log.{rotations}"))).unwrap();
            reopen.store(true, Ordering::Release);
            rotations += 1;
            rotated.store(rotations, Ordering::Release);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    writer.join().unwrap();
    assert_eq!(rotations, ROTATIONS);
    c.poll_until(&mut t, Duration::from_secs(20), |c| {
        c.line_count() as u64 >= N && c.closed.len() as u64 == ROTATIONS
    });
    let numbers = c.numbers();
    assert_increasing(&numbers);
    assert_eq!(c.all_numbers_sorted(), (0..N).collect::<Vec<_>>());
    assert_eq!(numbers.len() as u64, ROTATIONS + 1, "one stream per file");
    assert!(c.closed.iter().all(|(_, p, r)| *r == "rotated"
        && p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("conn.log.")));
    assert_eq!(
        c.opened.iter().filter(|o| o.3 == "rotated").count() as u64,
        ROTATIONS
    );
    // Nothing more comes.
    assert!(t.poll().is_empty());
    assert_eq!(t.positions().len(), 1);
}

#[test]
fn rotated_name_that_still_matches_is_the_same_stream() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("conn.log");
    fs::write(&log, numbered(0..10)).unwrap();
    let mut t = Tailer::new(config(dir.path(), "*.log"), vec![]).unwrap();
    let mut c = Consumer::default();
    c.take(t.poll());
    let mut old = OpenOptions::new().append(true).open(&log).unwrap();
    fs::rename(&log, dir.path().join("conn.1.log")).unwrap();
    old.write_all(&numbered(10..20)).unwrap();
    fs::write(&log, numbered(20..30)).unwrap();
    c.poll_until(&mut t, Duration::from_secs(5), |c| c.line_count() >= 30);
    std::thread::sleep(Duration::from_millis(60));
    c.take(t.poll());
    assert_eq!(
        c.numbers(),
        vec![(0..20).collect::<Vec<_>>(), (20..30).collect()]
    );
    assert!(c.closed.is_empty(), "still matched: still followed");
    let mut paths: Vec<_> = t.positions().into_iter().map(|p| p.path).collect();
    paths.sort();
    assert_eq!(paths, vec![dir.path().join("conn.1.log"), log]);
}

#[test]
fn copytruncate_and_its_loss_window() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("eve.json");
    let copy = dir.path().join("eve.json.1");
    let mut w = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .unwrap();
    w.write_all(&numbered(0..100)).unwrap();
    let mut t = Tailer::new(config(dir.path(), "eve.json"), vec![]).unwrap();
    let mut c = Consumer::default();
    c.take(t.poll());
    // Written after the tailer's last read and before the copy: in the copy only.
    w.write_all(&numbered(100..150)).unwrap();
    fs::copy(&log, &copy).unwrap();
    // Written between the copy and the truncate: nowhere.
    w.write_all(&numbered(150..155)).unwrap();
    OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    w.write_all(&numbered(155..160)).unwrap();
    c.take(t.poll());
    let numbers = c.numbers();
    assert_eq!(numbers.len(), 2);
    assert_eq!(numbers[0], (0..100).collect::<Vec<_>>());
    assert_eq!(numbers[1], (155..160).collect::<Vec<_>>());
    assert_eq!(c.closed[0].2, "truncated");
    assert_eq!((c.opened[1].2, c.opened[1].3), (0, "truncated"));
    assert!(c.warnings.iter().any(|(_, m)| m.contains("truncated")));
    // The window: what the tailer had not read at the truncate is in the copy or lost.
    let in_copy = String::from_utf8(fs::read(&copy).unwrap()).unwrap();
    assert!(in_copy.ends_with("149\n"));

    // Truncated and grown back past the old offset before the next poll: caught by the
    // fingerprint of the first bytes.
    let before = c.line_count();
    OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    w.write_all(&numbered(1000..1400)).unwrap();
    assert!(fs::metadata(&log).unwrap().len() > 20);
    c.take(t.poll());
    assert_eq!(c.line_count(), before + 400);
    assert_eq!(c.numbers()[2], (1000..1400).collect::<Vec<_>>());
    assert_eq!(c.closed.len(), 2);
}

#[test]
fn deleted_file_is_drained_then_closed() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    let mut w = File::create(&log).unwrap();
    w.write_all(&numbered(0..5)).unwrap();
    let mut t = Tailer::new(config(dir.path(), "*.log"), vec![]).unwrap();
    let mut c = Consumer::default();
    c.take(t.poll());
    w.write_all(&numbered(5..10)).unwrap();
    fs::remove_file(&log).unwrap();
    w.write_all(&numbered(10..12)).unwrap();
    c.poll_until(&mut t, Duration::from_secs(5), |c| !c.closed.is_empty());
    assert_eq!(c.numbers(), vec![(0..12).collect::<Vec<_>>()]);
    assert_eq!(c.closed[0].2, "deleted");
    assert!(t.positions().is_empty());
}

#[test]
fn partial_last_line_of_a_rotated_file_is_delivered_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    fs::write(&log, b"x\nno newline").unwrap();
    let mut t = Tailer::new(config(dir.path(), "*.log"), vec![]).unwrap();
    let mut c = Consumer::default();
    c.take(t.poll());
    fs::rename(&log, dir.path().join("a.old")).unwrap();
    c.poll_until(&mut t, Duration::from_secs(5), |c| !c.closed.is_empty());
    let id = &c.order[0];
    assert_eq!(c.lines[id], vec![b"x\n".to_vec(), b"no newline".to_vec()]);
    assert!(c.warnings.iter().any(|(_, m)| m.contains("no newline")));
    assert_eq!(
        c.closed[0].1,
        dir.path().join("a.old"),
        "closed under its new name"
    );
}

#[test]
fn resume_continues_at_the_checkpoint_with_the_zeek_header() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("conn.log");
    fs::write(&log, format!("{ZEEK_HEADER}1\tCa\n2\tCb\n")).unwrap();
    let mut t = Tailer::new(config(dir.path(), "*.log"), vec![]).unwrap();
    let mut c = Consumer::default();
    c.take(t.poll());
    assert!(
        c.headers.is_empty(),
        "read from 0: the header is in the data"
    );
    let cps = c.checkpoints();
    assert_eq!(cps[0].offset, t.positions()[0].offset);
    drop(t);
    append(&log, b"3\tCc\n");

    let mut t = Tailer::new(config(dir.path(), "*.log"), cps.clone()).unwrap();
    let mut c2 = Consumer::default();
    c2.take(t.poll());
    assert_eq!(c2.opened[0].3, "resumed");
    assert_eq!(c2.opened[0].2, cps[0].offset);
    let id = &c2.order[0];
    assert_eq!(c2.lines[id], vec![b"3\tCc\n".to_vec()]);
    assert_eq!(
        c2.headers,
        vec![(id.clone(), cps[0].offset, ZEEK_HEADER.as_bytes().to_vec())]
    );
    append(&log, b"4\tCd\n");
    c2.take(t.poll());
    assert_eq!(
        c2.headers.len(),
        1,
        "only the first data carries the header"
    );

    // A checkpoint inside the header block: the header is what lies before it.
    let two_lines = ZEEK_HEADER
        .split_inclusive('\n')
        .take(2)
        .collect::<String>();
    let cp = TailCheckpoint {
        offset: two_lines.len() as u64,
        ..cps[0].clone()
    };
    let mut t = Tailer::new(config(dir.path(), "*.log"), vec![cp]).unwrap();
    let mut c3 = Consumer::default();
    c3.take(t.poll());
    assert_eq!(c3.headers[0].2, two_lines.as_bytes());
    let all: Vec<u8> = c3.lines[&c3.order[0]].concat();
    assert_eq!(
        [two_lines.as_bytes(), &all[..]].concat(),
        fs::read(&log).unwrap()
    );
}

#[test]
fn resume_finds_a_file_renamed_while_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("conn.log");
    fs::write(&log, numbered(0..10)).unwrap();
    let mut t = Tailer::new(config(dir.path(), "*.log"), vec![]).unwrap();
    let mut c = Consumer::default();
    c.take(t.poll());
    drop(t);
    append(&log, &numbered(10..15));
    fs::rename(&log, dir.path().join("conn.log.1")).unwrap();
    fs::write(&log, numbered(15..20)).unwrap();

    let mut t = Tailer::new(config(dir.path(), "*.log"), c.checkpoints()).unwrap();
    c.open.clear();
    c.poll_until(&mut t, Duration::from_secs(5), |c| {
        c.line_count() >= 20 && !c.closed.is_empty()
    });
    assert_eq!(
        c.numbers(),
        vec![(0..15).collect::<Vec<_>>(), (15..20).collect()]
    );
    assert_eq!(c.opened[1].1, dir.path().join("conn.log.1"));
    assert_eq!(c.opened[1].3, "resumed");
    assert_eq!(c.closed[0].2, "rotated");
}

#[test]
fn start_at_end_skips_existing_content_up_to_the_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("conn.log");
    fs::write(&log, format!("{ZEEK_HEADER}old\nhalf")).unwrap();
    let mut cfg = config(dir.path(), "*.log");
    cfg.start_at_end_for_new_files = true;
    let mut t = Tailer::new(cfg, vec![]).unwrap();
    let mut c = Consumer::default();
    c.take(t.poll());
    assert_eq!(c.line_count(), 0);
    append(&log, b" done\nnew\n");
    c.take(t.poll());
    assert_eq!(
        c.lines[&c.order[0]],
        vec![b"half done\n".to_vec(), b"new\n".to_vec()]
    );
    assert_eq!(c.headers[0].2, ZEEK_HEADER.as_bytes());
    // A file appearing later is read from its start.
    fs::write(dir.path().join("dns.log"), b"first\n").unwrap();
    c.take(t.poll());
    assert_eq!(c.lines[&c.order[1]], vec![b"first\n".to_vec()]);
}

#[test]
fn many_files_with_a_small_read_budget() {
    const FILES: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    for f in 0..FILES {
        fs::write(dir.path().join(format!("f{f:03}.log")), numbered(0..20)).unwrap();
    }
    let mut cfg = config(dir.path(), "*.log");
    cfg.max_read_bytes = 4096;
    let mut t = Tailer::new(cfg, vec![]).unwrap();
    let mut c = Consumer::default();
    let mut polls = 0;
    while c.line_count() < FILES * 20 {
        c.take(t.poll());
        polls += 1;
        assert!(polls < 1000);
    }
    assert!(polls > 1, "the budget spreads the reading over polls");
    for f in 0..FILES {
        append(&dir.path().join(format!("f{f:03}.log")), &numbered(20..25));
    }
    c.poll_until(&mut t, Duration::from_secs(10), |c| {
        c.line_count() >= FILES * 25
    });
    assert_eq!(t.positions().len(), FILES);
    for n in c.numbers() {
        assert_eq!(n, (0..25).collect::<Vec<_>>());
    }
}

#[test]
fn reused_inode_is_read_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("conn.log");
    fs::write(&log, numbered(0..10)).unwrap();
    let mut t = Tailer::new(config(dir.path(), "*.log"), vec![]).unwrap();
    let mut c = Consumer::default();
    c.take(t.poll());
    drop(t);
    let old = c.checkpoints()[0].clone();
    fs::remove_file(&log).unwrap();
    fs::write(&log, numbered(100..130)).unwrap();
    let meta = fs::metadata(&log).unwrap();
    // Filesystems usually hand the freed inode to the next file; where this one did not, the
    // checkpoint is moved onto the new inode, which is the same situation.
    let cp = TailCheckpoint {
        id: FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            fingerprint: old.id.fingerprint,
        },
        ..old
    };
    let mut t = Tailer::new(config(dir.path(), "*.log"), vec![cp]).unwrap();
    let mut c = Consumer::default();
    c.take(t.poll());
    assert_eq!(c.numbers(), vec![(100..130).collect::<Vec<_>>()]);
    assert_eq!(c.opened[0].3, "inode reused");
    assert_eq!(c.opened[0].2, 0);
}

#[test]
fn hostile_inputs_give_warnings_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("sub.log")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/x", dir.path().join("dangling.log")).unwrap();
    let fifo = dir.path().join("pipe.log");
    let have_fifo = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    let bin = dir.path().join("bin.log");
    let mut junk: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    junk.push(b'\n');
    fs::write(&bin, &junk).unwrap();
    let huge = dir.path().join("huge.log");
    let mut content = b"short\n".to_vec();
    content.extend(std::iter::repeat_n(b'x', 10_000));
    content.extend(b"\nafter\n");
    content.extend(std::iter::repeat_n(b'y', 300));
    fs::write(&huge, &content).unwrap();

    let mut cfg = config(dir.path(), "*.log");
    cfg.max_line_bytes = 100;
    cfg.max_read_bytes = 1000;
    let mut t = Tailer::new(cfg, vec![]).unwrap();
    let mut c = Consumer::default();
    for _ in 0..30 {
        c.take(t.poll());
    }
    let dir_warnings = c
        .warnings
        .iter()
        .filter(|(p, _)| p.ends_with("sub.log"))
        .count();
    assert_eq!(dir_warnings, 1, "reported once: {:?}", c.warnings);
    if have_fifo {
        assert!(c.warnings.iter().any(|(p, _)| p.ends_with("pipe.log")));
    }
    let huge_id = c.opened.iter().find(|o| o.1 == huge).unwrap().0.clone();
    assert_eq!(
        c.lines[&huge_id],
        vec![b"short\n".to_vec(), b"after\n".to_vec()]
    );
    assert!(c
        .warnings
        .iter()
        .any(|(p, m)| p == &huge && m.contains("at bytes 6..10007")));
    // The binary file's lines are all over the limit except the pieces between its newlines.
    let bin_id = c.opened.iter().find(|o| o.1 == bin).unwrap().0.clone();
    let bin_lines: usize = c.lines[&bin_id].iter().map(Vec::len).sum();
    let skipped: u64 = c.warnings.iter().filter(|(p, _)| p == &bin).count() as u64;
    assert!(bin_lines > 0 && skipped > 0);
    // Unterminated over-long tail of huge.log, then the file goes away: reported, not lost.
    fs::remove_file(&huge).unwrap();
    c.poll_until(&mut t, Duration::from_secs(5), |c| {
        c.closed.iter().any(|x| x.0 == huge_id)
    });
    assert!(c
        .warnings
        .iter()
        .any(|(p, m)| p == &huge && m.contains("skipped bytes 10013..10313")));
}

#[test]
fn invalid_pattern_is_an_error() {
    let cfg = TailConfig::new(["/tmp/[unclosed"]);
    assert!(Tailer::new(cfg, vec![]).is_err());
}

#[test]
fn checkpoints_round_trip_through_json() {
    let cp = TailCheckpoint {
        id: FileId {
            dev: 1,
            ino: 2,
            fingerprint: u64::MAX,
        },
        path: "/var/log/x.log".into(),
        offset: 42,
    };
    let s = serde_json::to_string(&cp).unwrap();
    let back: TailCheckpoint = serde_json::from_str(&s).unwrap();
    assert_eq!(
        (back.id, back.path, back.offset),
        (cp.id, cp.path, cp.offset)
    );
}
