//! The decoder contract: a capture gives the same `pcap.packet` and `pcap.flow` rows, the same
//! rejects (frame number, reason, raw bytes) and the same tables whether it is read whole
//! (`silt_pcap::read`, `Decoder::read`) or fed in random pieces (seeded; runs of 1-byte pieces
//! included) with `flush` calls in between: on every corpus capture, and on truncated and
//! corrupted captures (where the rejects and the bytes kept in them must not depend on the
//! pieces either). Also: input that is not a capture is one reject, and what the decoder holds
//! back between pieces stays below one block.
//!
//! The corpus part skips (with a message) when the corpus is absent; it fails instead when
//! CI=true or SILT_REQUIRE_ALL=1.

mod common;

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use arrow::util::display::{ArrayFormatter, FormatOptions as DisplayOptions};
use common::build::*;
use silt_core::format::FormatOptions;
use silt_core::{CollectEmit, Decoder, ReadOptions, SourceInfo, TableName};
use silt_pcap::{PcapDecoder, PcapOptions, Tables};

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

fn opts() -> PcapOptions {
    PcapOptions {
        batch_rows: 50,
        payload: Some(48),
        tables: Tables::PacketsAndFlows,
        flow: silt_flow::FlowConfig {
            batch_rows: 7,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A decoder made the way the format registry makes it.
fn from_spec(src: &SourceInfo) -> Box<dyn Decoder> {
    let o = FormatOptions::new(ReadOptions { batch_rows: 50 }).with(opts());
    (silt_pcap::FORMAT.open)(&o, src).unwrap()
}

/// Through the public wrapper, over a reader with a small buffer.
fn read_whole(data: &[u8], src: &SourceInfo) -> CollectEmit {
    let mut out = CollectEmit::default();
    let mut input = std::io::BufReader::with_capacity(4096, data);
    silt_pcap::read(&mut input, src, &opts(), &mut out).unwrap();
    assert_eq!(
        out.bytes,
        data.len() as u64,
        "progress counts every byte once"
    );
    out
}

/// Fed in random pieces: runs of 1-byte pieces, small, medium and big pieces, a `flush` now
/// and then.
fn read_pieces(mut d: Box<dyn Decoder>, data: &[u8], seed: u64, flushes: u64) -> CollectEmit {
    let mut rng = Rng(seed | 1);
    let mut out = CollectEmit::default();
    let mut at = 0;
    while at < data.len() {
        let n = match rng.below(10) {
            0..=2 => 1,
            3..=5 => 1 + rng.below(24) as usize,
            6..=8 => 1 + rng.below(3000) as usize,
            _ => 1 + rng.below(1 << 18) as usize,
        };
        if n == 1 {
            let run = (1 + rng.below(200) as usize).min(data.len() - at);
            for i in 0..run {
                d.feed(&data[at + i..at + i + 1], &mut out).unwrap();
            }
            at += run;
        } else {
            let n = n.min(data.len() - at);
            d.feed(&data[at..at + n], &mut out).unwrap();
            at += n;
        }
        if rng.below(flushes.max(1)) == 0 {
            d.flush(&mut out).unwrap();
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
    if a.rejects != b.rejects {
        return Some(format!("rejects:\n{:?}\n{:?}", a.rejects, b.rejects));
    }
    if a.table_bytes != b.table_bytes {
        return Some(format!(
            "table bytes {:?} vs {:?}",
            a.table_bytes, b.table_bytes
        ));
    }
    None
}

fn bytes(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        raw
    }
}

#[test]
fn corpus_fed_in_pieces_equals_read_whole() {
    let Some(root) = silt_testkit::corpus() else {
        return;
    };
    let files = common::corpus_pcaps(&root);
    assert!(
        files.len() >= 60,
        "expected the corpus pcaps, found {}",
        files.len()
    );
    let (mut rows, mut flows) = (0, 0);
    for (i, f) in files.iter().enumerate() {
        let data = bytes(f);
        let src = SourceInfo::from_path(f);
        let whole = read_whole(&data, &src);
        let seed = 0x9e37_79b9 + i as u64 * 104_729;
        let pieces = read_pieces(from_spec(&src), &data, seed, 20);
        if let Some(d) = difference(&whole, &pieces) {
            panic!(
                "{} (seed {seed}): fed in pieces differs from read: {d}",
                f.display()
            );
        }
        rows += whole.rows("pcap.packet");
        flows += whole.rows("pcap.flow");
    }
    eprintln!("{} captures, {rows} packets, {flows} flows", files.len());
    assert!(rows > 4000 && flows > 100, "{rows} packets, {flows} flows");
}

/// Valid captures of each framing: classic pcap (both byte orders, µs and ns), pcapng.
fn samples() -> Vec<Vec<u8>> {
    let frames: Vec<Vec<u8>> = (0..12u8)
        .map(|i| {
            let t = tcp(
                1000 + u16::from(i % 3),
                80,
                0x18,
                &vec![i; usize::from(i) * 9],
            );
            eth(0x0800, &ipv4([10, 0, 0, 1], [10, 0, 0, 2 + i % 2], 6, &t))
        })
        .collect();
    let timed = |k: u32| -> Vec<(u32, u32, Vec<u8>)> {
        frames
            .iter()
            .enumerate()
            .map(|(i, f)| (1_600_000_000 + i as u32 * k, 5, f.clone()))
            .collect()
    };
    vec![
        pcap(1, false, false, &timed(1)),
        pcap(1, true, true, &timed(40)),
        pcapng(
            &[(1, None), (1, Some(9))],
            &frames
                .iter()
                .enumerate()
                .map(|(i, f)| ((i % 2) as u32, 1_600_000_000_000_000 + i as u64, f.clone()))
                .collect::<Vec<_>>(),
        ),
    ]
}

/// Truncated and corrupted captures: whatever the damage, the pieces give what the whole gives.
#[test]
fn damaged_captures_fed_in_pieces_equal_read_whole() {
    let src = SourceInfo::stdin();
    let mut rng = Rng(7);
    let mut checked = 0;
    let mut rejected = 0;
    for s in samples() {
        let mut inputs: Vec<Vec<u8>> = (0..=s.len()).step_by(7).map(|c| s[..c].to_vec()).collect();
        for _ in 0..300 {
            let mut v = s.clone();
            for _ in 0..(1 + rng.below(3)) {
                let at = rng.below(v.len() as u64) as usize;
                v[at] = rng.next() as u8;
            }
            inputs.push(v);
        }
        for (k, v) in inputs.iter().enumerate() {
            let whole = read_whole(v, &src);
            for (j, seed) in [3u64, 11].into_iter().enumerate() {
                let d = Box::new(PcapDecoder::new(&src, opts()));
                let pieces = read_pieces(d, v, seed + k as u64, 4);
                if let Some(diff) = difference(&whole, &pieces) {
                    panic!("input {k} ({} bytes), run {j}: {diff}", v.len());
                }
            }
            let mut ones = CollectEmit::default();
            let mut d = PcapDecoder::new(&src, opts());
            for b in v.chunks(1) {
                d.feed(b, &mut ones).unwrap();
            }
            d.finish(&mut ones).unwrap();
            assert_eq!(difference(&whole, &ones), None, "input {k}, 1-byte pieces");
            checked += 1;
            rejected += usize::from(!whole.rejects.is_empty());
        }
    }
    assert!(
        checked > 900 && rejected > 300,
        "{checked} inputs, {rejected} with rejects"
    );
}

#[test]
fn not_a_capture_is_one_reject_for_the_whole_input() {
    let elf = b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00>\x00".repeat(20);
    let cases: [(&[u8], &str); 5] = [
        (b"", "empty input: not a pcap or pcapng file"),
        (
            b"#separator \\x09\n#fields\tts\n",
            "not a pcap or pcapng file",
        ),
        (&elf, "not a pcap or pcapng file"),
        (
            b"\xd4\xc3\xb2\xa1\x02\x00",
            "not a pcap or pcapng file (Incomplete",
        ),
        (
            b"\x0a\x0d\x0d\x0a\x1c\x00\x00\x00junk junk junk",
            "not a pcapng file",
        ),
    ];
    for (data, want) in cases {
        let out = read_whole(data, &SourceInfo::stdin());
        assert_eq!(out.total_rows(), 0);
        assert_eq!(out.rejects.len(), 1, "{want}: {:?}", out.rejects);
        let r = &out.rejects[0];
        assert_eq!(r.line, 0);
        assert!(r.reason.starts_with(want), "{}", r.reason);
        assert_eq!(r.raw, &data[..data.len().min(128)]);
        assert_eq!(r.table.as_ref().unwrap().to_string(), "pcap.packet");
        let d = Box::new(PcapDecoder::new(&SourceInfo::stdin(), opts()));
        assert_eq!(difference(&out, &read_pieces(d, data, 5, 3)), None);
    }
}

/// A corrupt length stops reading with one reject, at once, keeping 128 bytes from the bad
/// record; what the decoder holds back between pieces is never more than one block.
#[test]
fn corrupt_lengths_and_bounded_buffer() {
    let f = eth(
        0x0800,
        &ipv4([1, 1, 1, 1], [2, 2, 2, 2], 17, &udp(1, 2, &[0; 300])),
    );
    let good = pcap(1, false, false, &vec![(1, 0, f.clone()); 40]);
    let record = 16 + f.len();
    let mut bad = good.clone();
    // Record 3's captured length becomes 0x7fff_ffff (2 GiB).
    let at = 24 + 2 * record + 8;
    bad[at..at + 4].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let out = read_whole(&bad, &SourceInfo::stdin());
    assert_eq!(out.rows("pcap.packet"), 2);
    assert_eq!(out.rejects.len(), 1);
    let r = &out.rejects[0];
    assert_eq!(r.line, 3);
    assert_eq!(
        r.reason,
        "block length exceeds 256 MiB: corrupt file, stopped reading"
    );
    assert_eq!(r.raw, &bad[24 + 2 * record..24 + 2 * record + 128]);
    for piece in [1, 5, 100, 4096] {
        let mut out = CollectEmit::default();
        let mut d = PcapDecoder::new(&SourceInfo::stdin(), opts());
        for p in good.chunks(piece) {
            d.feed(p, &mut out).unwrap();
            assert!(d.pending() < record, "piece {piece}: holds {}", d.pending());
        }
        d.finish(&mut out).unwrap();
        assert_eq!(out.rows("pcap.packet"), 40);
        let mut out = CollectEmit::default();
        let mut d = PcapDecoder::new(&SourceInfo::stdin(), opts());
        for p in bad.chunks(piece) {
            d.feed(p, &mut out).unwrap();
            assert!(d.pending() < record, "piece {piece}: holds {}", d.pending());
        }
        // Reading stopped: more input is skipped, not held.
        d.feed(&vec![0u8; 1 << 20], &mut out).unwrap();
        assert_eq!(d.pending(), 0);
        d.finish(&mut out).unwrap();
        assert_eq!(out.rejects.len(), 1);
        assert_eq!(out.rejects[0].raw, r.raw, "piece {piece}");
    }
}
