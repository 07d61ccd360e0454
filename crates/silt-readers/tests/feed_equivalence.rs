//! The decoder contract on real data: every Zeek TSV, Zeek JSON and Suricata EVE file of the
//! shared corpus gives the same rows, rejects (line, reason, raw bytes) and tables whether it is
//! read whole (`Decoder::read`) or fed in random pieces (seeded; runs of 1-byte pieces included)
//! with `flush` calls in between. Rows are compared by value after the tables' batches are
//! unified (`silt_core::schema`), since flushing early may cut batches at other places.
//!
//! Skips (with a message) when the corpus is absent; fails instead when CI=true or
//! SILT_REQUIRE_ALL=1.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use arrow::util::display::{ArrayFormatter, FormatOptions as DisplayOptions};
use silt_core::format::FormatOptions;
use silt_core::{CollectEmit, Decoder, FormatSpec, ReadOptions, SourceInfo, TableName};

/// Small deterministic generator (xorshift) so that a failure reproduces from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn bytes(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&raw[..]), &mut out)
            .unwrap();
        out
    } else {
        raw
    }
}

/// The whole stream through `Decoder::read` (over a reader with a small buffer).
fn read_whole(mut d: Box<dyn Decoder>, data: &[u8]) -> CollectEmit {
    let mut out = CollectEmit::default();
    let mut input = std::io::BufReader::with_capacity(8192, data);
    d.read(&mut input, &mut out).unwrap();
    out
}

/// The stream fed in random pieces: stretches of 1-byte pieces, small and large pieces, and a
/// `flush` now and then (about 40 per stream, so that big files do not become tiny batches).
fn read_pieces(mut d: Box<dyn Decoder>, data: &[u8], seed: u64) -> CollectEmit {
    let mut rng = Rng(seed | 1);
    let mut out = CollectEmit::default();
    let flush_every = (data.len() as u64 / 40).max(1);
    let mut since_flush = 0u64;
    let mut at = 0;
    while at < data.len() {
        let n = match rng.below(10) {
            0..=2 => 1,
            3..=5 => 1 + rng.below(16) as usize,
            6..=8 => 1 + rng.below(4096) as usize,
            _ => 1 + rng.below(1 << 20) as usize,
        };
        let n = n.min(data.len() - at);
        if n == 1 {
            // A run of single bytes: crosses line ends and multi-byte headers one byte at a time.
            let run = (1 + rng.below(300) as usize).min(data.len() - at);
            for i in 0..run {
                d.feed(&data[at + i..at + i + 1], &mut out).unwrap();
            }
            at += run;
            since_flush += run as u64;
        } else {
            d.feed(&data[at..at + n], &mut out).unwrap();
            at += n;
            since_flush += n as u64;
        }
        if since_flush >= flush_every && rng.below(2) == 0 {
            d.flush(&mut out).unwrap();
            since_flush = 0;
        }
    }
    d.finish(&mut out).unwrap();
    out
}

/// Every row of every batch, conformed to `schema`, as text per column.
fn rendered(batches: &[RecordBatch], schema: &Arc<Schema>) -> Vec<Vec<String>> {
    let opts = DisplayOptions::default().with_null("<null>");
    let mut rows = Vec::new();
    for b in batches {
        let b = silt_core::schema::conform(b, schema).unwrap();
        let cols: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts).unwrap())
            .collect();
        for i in 0..b.num_rows() {
            rows.push(cols.iter().map(|c| c.value(i).to_string()).collect());
        }
    }
    rows
}

/// What differs between two outputs of the same stream (`None`: nothing).
fn difference(a: &CollectEmit, b: &CollectEmit) -> Option<String> {
    let ta: Vec<&TableName> = a.batches.keys().collect();
    let tb: Vec<&TableName> = b.batches.keys().collect();
    if ta != tb {
        return Some(format!("tables {ta:?} vs {tb:?}"));
    }
    for (t, ba) in &a.batches {
        let bb = &b.batches[t];
        let schema = ba.iter().chain(bb).fold(Schema::empty(), |s, x| {
            silt_core::schema::unify_schemas(&s, &x.schema())
        });
        let schema = Arc::new(schema);
        let (ra, rb) = (rendered(ba, &schema), rendered(bb, &schema));
        if ra.len() != rb.len() {
            return Some(format!("{t}: {} rows vs {}", ra.len(), rb.len()));
        }
        if let Some(i) = (0..ra.len()).find(|&i| ra[i] != rb[i]) {
            return Some(format!("{t}: row {i} differs:\n{:?}\n{:?}", ra[i], rb[i]));
        }
    }
    if a.rejects.len() != b.rejects.len() {
        return Some(format!(
            "{} rejects vs {}",
            a.rejects.len(),
            b.rejects.len()
        ));
    }
    if let Some((x, y)) = a.rejects.iter().zip(&b.rejects).find(|(x, y)| x != y) {
        return Some(format!("reject differs:\n{x:?}\n{y:?}"));
    }
    if a.table_bytes != b.table_bytes {
        return Some(format!(
            "table bytes {:?} vs {:?}",
            a.table_bytes, b.table_bytes
        ));
    }
    None
}

type Make = dyn Fn(&SourceInfo) -> Box<dyn Decoder>;

fn from_spec(spec: &'static FormatSpec, batch_rows: usize) -> Box<Make> {
    Box::new(move |src| {
        let opts = FormatOptions::new(ReadOptions { batch_rows });
        (spec.open)(&opts, src).unwrap()
    })
}

/// Checks every file under `dir` with each decoder maker; returns (files, rows, rejects).
fn check_dir(dir: &Path, makers: &[(&str, Box<Make>)], seed: u64) -> (usize, usize, usize) {
    let (mut n, mut rows, mut rejects) = (0, 0, 0);
    for (i, f) in files(dir).iter().enumerate() {
        let data = bytes(f);
        let src = SourceInfo::from_path(f);
        for (name, make) in makers {
            let whole = read_whole(make(&src), &data);
            let s = seed.wrapping_add(i as u64 * 7919);
            let pieces = read_pieces(make(&src), &data, s);
            if let Some(d) = difference(&whole, &pieces) {
                panic!(
                    "{} ({name}, seed {s}): fed in pieces differs from read: {d}",
                    f.display()
                );
            }
            rows += whole.total_rows();
            rejects += whole.rejects.len();
        }
        n += 1;
    }
    (n, rows, rejects)
}

#[test]
fn corpus_fed_in_pieces_equals_read_whole() {
    let Some(root) = silt_testkit::corpus() else {
        return;
    };
    let tsv = |r| -> Box<Make> {
        Box::new(move |src| {
            Box::new(silt_readers::zeek::tsv::ZeekTsvDecoder::new(
                src,
                &ReadOptions { batch_rows: r },
            ))
        })
    };
    let json = |r| -> Box<Make> {
        Box::new(move |src| {
            Box::new(silt_readers::zeek::json::ZeekJsonDecoder::new(
                src,
                &ReadOptions { batch_rows: r },
            ))
        })
    };
    let zeek = &silt_readers::zeek::FORMAT;
    let eve = &silt_readers::suricata::FORMAT;
    let (n, rows, rej) = check_dir(
        &root.join("zeek-tsv"),
        &[
            ("ZeekTsvDecoder", tsv(500)),
            ("zeek::FORMAT", from_spec(zeek, 16 * 1024)),
        ],
        0x5eed_0001,
    );
    eprintln!("zeek-tsv: {n} files, {rows} rows, {rej} rejects");
    assert!(n >= 89 && rows > 50_000, "zeek-tsv: {n} files, {rows} rows");
    let (n, rows, rej) = check_dir(
        &root.join("zeek-json"),
        &[
            ("ZeekJsonDecoder", json(300)),
            ("zeek::FORMAT", from_spec(zeek, 16 * 1024)),
        ],
        0x5eed_0002,
    );
    eprintln!("zeek-json: {n} files, {rows} rows, {rej} rejects");
    assert!(n >= 10 && rows > 1000 && rej > 0, "zeek-json: {n} files");
    let (n, rows, rej) = check_dir(
        &root.join("suricata"),
        &[
            ("suricata::FORMAT", from_spec(eve, 200)),
            ("suricata::FORMAT", from_spec(eve, 16 * 1024)),
        ],
        0x5eed_0003,
    );
    eprintln!("suricata: {n} files, {rows} rows, {rej} rejects");
    assert!(n >= 90 && rows > 1000 && rej > 0, "suricata: {n} files");
}

/// The comparison above can fail: outputs that differ in one value, one reject or one table are
/// told apart.
#[test]
fn the_comparison_sees_differences() {
    let src = SourceInfo {
        display: "conn.log".into(),
        file_name: Some("conn.log".into()),
    };
    let run = |data: &[u8]| {
        read_whole(
            Box::new(silt_readers::zeek::tsv::ZeekTsvDecoder::new(
                &src,
                &ReadOptions::default(),
            )),
            data,
        )
    };
    let base = b"#fields\tts\tn\n#types\ttime\tcount\n1.0\t1\n2.0\t2\nbad\n";
    let same = run(base);
    assert_eq!(difference(&run(base), &same), None);
    let other_value = run(b"#fields\tts\tn\n#types\ttime\tcount\n1.0\t1\n2.0\t3\nbad\n");
    assert!(difference(&same, &other_value).unwrap().contains("row 1"));
    let other_reject = run(b"#fields\tts\tn\n#types\ttime\tcount\n1.0\t1\n2.0\t2\nbad!\n");
    assert!(difference(&same, &other_reject).unwrap().contains("reject"));
    let other_line = run(b"#fields\tts\tn\n#types\ttime\tcount\n1.0\t1\n2.0\t2\n\nbad\n");
    assert!(difference(&same, &other_line).unwrap().contains("reject"));
    let other_table = run(b"#path\tx\n#fields\tts\tn\n#types\ttime\tcount\n1.0\t1\n2.0\t2\nbad\n");
    assert!(difference(&same, &other_table).unwrap().contains("tables"));
}

/// Small streams with headers, a byte-order mark, CRLF, blank and bad lines, several tables and
/// a last line without its end: every cut into two pieces (with and without a flush between) and
/// 1-byte pieces with a flush after each give what reading the whole stream gives.
#[test]
fn every_split_of_a_small_stream() {
    let src = SourceInfo {
        display: "x.log".into(),
        file_name: Some("x.log".into()),
    };
    let tsv: &[u8] = b"\xEF\xBB\xBF#separator \\x09\n#fields\tts\tn\ts\n#types\ttime\tcount\tset[string]\r\n1.0\t1\ta,b\nbad\n\n2.5\t-\t(empty)\n#separator \\x09\n#fields\tts\n#types\ttime\n3.0";
    let json: &[u8] = b"\n{\"_path\":\"a\",\"ts\":1.5,\"x\":1}\nnot json\n{\"_path\":\"b\",\"x\":\"s\"}\r\n{\"_path\":\"a\",\"x\":2.5}";
    let eve: &[u8] = b"{\"event_type\":\"dns\",\"timestamp\":\"2020-01-01T00:00:00+0000\"}\n[1]\n{\"event_type\":\"flow\",\"flow_id\":7}";
    let cases: [(&[u8], &FormatSpec); 3] = [
        (tsv, &silt_readers::zeek::FORMAT),
        (json, &silt_readers::zeek::FORMAT),
        (eve, &silt_readers::suricata::FORMAT),
    ];
    for (data, spec) in cases {
        let make = from_spec(spec, 1);
        let whole = read_whole(make(&src), data);
        assert!(whole.total_rows() >= 2 && !whole.rejects.is_empty());
        for cut in 0..=data.len() {
            for flush in [false, true] {
                let mut d = make(&src);
                let mut out = CollectEmit::default();
                d.feed(&data[..cut], &mut out).unwrap();
                if flush {
                    d.flush(&mut out).unwrap();
                }
                d.feed(&data[cut..], &mut out).unwrap();
                d.finish(&mut out).unwrap();
                if let Some(diff) = difference(&whole, &out) {
                    panic!("{} cut at {cut} (flush {flush}): {diff}", spec.name);
                }
            }
        }
        let ones = {
            let mut d = make(&src);
            let mut out = CollectEmit::default();
            for b in data.chunks(1) {
                d.feed(b, &mut out).unwrap();
                d.flush(&mut out).unwrap();
            }
            d.finish(&mut out).unwrap();
            out
        };
        assert_eq!(difference(&whole, &ones), None, "{}", spec.name);
    }
}

/// A Zeek TSV stream decoded on several threads (`silt_core::split`) with blocks of `block`
/// bytes: the whole stream through `read_split`, and whether it ended in an error.
fn read_split_tsv(
    src: &SourceInfo,
    input: &mut dyn std::io::BufRead,
    threads: usize,
    block: usize,
    batch_rows: usize,
) -> (CollectEmit, bool) {
    let mut d = silt_readers::zeek::tsv::ZeekTsvDecoder::new(src, &ReadOptions { batch_rows });
    let mut out = CollectEmit::default();
    let split = silt_core::split::Split {
        threads,
        block_bytes: block,
    };
    let failed = silt_core::split::read_split(&mut d, input, &mut out, split).is_err();
    (out, failed)
}

/// The reference: the same stream on one thread, fed whole.
fn read_serial_tsv(src: &SourceInfo, data: &[u8], batch_rows: usize) -> CollectEmit {
    let mut d = silt_readers::zeek::tsv::ZeekTsvDecoder::new(src, &ReadOptions { batch_rows });
    let mut out = CollectEmit::default();
    silt_core::decode::decode_slice(&mut d, data, &mut out).unwrap();
    out
}

/// Every Zeek TSV file of the corpus decoded in blocks on three threads (blocks from a few
/// lines to many, seeded) gives the rows, rejects with their stream-wide line numbers, and
/// per-table bytes that one thread gives.
#[test]
fn corpus_decoded_in_blocks_on_threads_equals_one_thread() {
    let Some(root) = silt_testkit::corpus() else {
        return;
    };
    let mut rng = Rng(0x5eed_0004);
    let (mut n, mut rows, mut rejects) = (0, 0, 0);
    for f in files(&root.join("zeek-tsv")) {
        let data = bytes(&f);
        let src = SourceInfo::from_path(&f);
        let serial = read_serial_tsv(&src, &data, 700);
        for block in [
            200 + rng.below(400) as usize,
            4096 + rng.below(60000) as usize,
        ] {
            let (split, failed) = read_split_tsv(&src, &mut &data[..], 3, block, 700);
            assert!(!failed, "{}: read_split failed", f.display());
            if let Some(d) = difference(&serial, &split) {
                panic!("{} (blocks of {block}): {d}", f.display());
            }
        }
        n += 1;
        rows += serial.total_rows();
        rejects += serial.rejects.len();
    }
    eprintln!("zeek-tsv in blocks: {n} files, {rows} rows, {rejects} rejects");
    assert!(n >= 89 && rows > 50_000, "zeek-tsv: {n} files, {rows} rows");
}

/// The hard cases of splitting, at every block size from 1 byte to the whole stream, on two and
/// three threads: a byte-order mark and blank lines before the first header, a meta prefix of
/// the stream's own, header blocks that change the separator, fields and table part-way, CRLF,
/// `#` inside data, bad lines, a line longer than many blocks (the rest then decodes on the
/// reading thread), and a last line without its end.
#[test]
fn every_block_size_of_a_hard_stream() {
    let src = SourceInfo {
        display: "x.log".into(),
        file_name: Some("x.log".into()),
    };
    let long = "y".repeat(300);
    let streams: Vec<Vec<u8>> = vec![
        format!(
            "\u{feff}\n\n#separator \\x09\n#path\ta\n#fields\tts\tn\ts\n#types\ttime\tcount\tstring\r\n\
             1.0\t1\ta#b\nbad\n\n2.5\t-\t#x\n#separator |\n#path|b\n#fields|ts|s\n#types|time|string\n\
             3.0|z\n4.0|{long}\n5.0|w\nno|no|no\n#separator \\x09\n#path\ta\n#fields\tts\tn\ts\n\
             #types\ttime\tcount\tstring\n6.0\t6\tq\n7.0\t7\tlast"
        )
        .into_bytes(),
        b"@separator \\x09\n@fields\tts\tn\n@types\ttime\tcount\n1.0\t1\n#x\t2\n2.0\t2\n@path\tc\n3.0\t3\n"
            .to_vec(),
        b"1.0\t1\n#fields\tts\n#types\ttime\n\xEF\xBB\xBF2.0\n3.0\n".to_vec(),
    ];
    for data in &streams {
        let serial = read_serial_tsv(&src, data, 2);
        assert!(serial.total_rows() >= 1 && !serial.rejects.is_empty());
        for block in 1..=data.len() + 1 {
            for threads in [2, 3] {
                let (split, failed) = read_split_tsv(&src, &mut &data[..], threads, block, 2);
                assert!(!failed);
                if let Some(d) = difference(&serial, &split) {
                    panic!(
                        "{:?}... in blocks of {block} on {threads} threads: {d}",
                        String::from_utf8_lossy(&data[..20])
                    );
                }
            }
        }
    }
}

/// An input that breaks off with an I/O error after `ok` bytes.
struct Breaks<'a> {
    data: &'a [u8],
    ok: usize,
}

impl std::io::Read for Breaks<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.ok == 0 {
            return Err(std::io::Error::other("disk gone"));
        }
        let n = buf.len().min(self.ok).min(self.data.len()).min(7);
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        self.ok -= n;
        Ok(n)
    }
}

/// A stream that breaks off part-way decodes, split, what it decodes on one thread (rows up to
/// the break, the cut last line included, as `read_stream` does), and the error is returned.
#[test]
fn a_broken_stream_split_keeps_what_was_read() {
    let src = SourceInfo {
        display: "x.log".into(),
        file_name: Some("x.log".into()),
    };
    let mut data = b"#fields\tts\tn\n#types\ttime\tcount\n".to_vec();
    for i in 0..200 {
        data.extend_from_slice(format!("{i}.5\t{i}\n").as_bytes());
    }
    for ok in [0, 5, 40, 333, 1000, data.len() - 3] {
        let mut serial_d =
            silt_readers::zeek::tsv::ZeekTsvDecoder::new(&src, &ReadOptions { batch_rows: 9 });
        let mut serial = CollectEmit::default();
        let mut input = std::io::BufReader::with_capacity(16, Breaks { data: &data, ok });
        let serial_failed =
            silt_core::decode::read_stream(&mut serial_d, &mut input, &mut serial).is_err();
        assert!(serial_failed);
        for block in [10, 64, 500] {
            let mut input = std::io::BufReader::with_capacity(16, Breaks { data: &data, ok });
            let (split, failed) = read_split_tsv(&src, &mut input, 2, block, 9);
            assert!(failed, "break after {ok}, blocks of {block}: no error");
            if let Some(d) = difference(&serial, &split) {
                panic!("break after {ok}, blocks of {block}: {d}");
            }
        }
    }
}
