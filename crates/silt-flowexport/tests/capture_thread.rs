//! `silt import sflow` decodes on a thread of its own (`capture` module): the reader copies the
//! datagrams into chunks, the decoding thread owns the collector, and what it emits is handed
//! on in order. This checks, on a generated capture of many chunks with bad frames, bad
//! datagrams and a truncated last record mixed in, that the capture decoder gives the same rows
//! and the same datagram rejects as one collector fed directly, every reject in frame order,
//! and the same outcome whatever pieces the input is fed in.

mod common;

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use silt_core::{CollectEmit, Decoder, FormatOptions, SourceInfo};
use silt_flowexport::{capture, sflow_sample_table, Protocol};

/// A classic pcap of generated sFlow, then rewritten: every 1000th frame cut to 20 bytes (the
/// link layers reject it), every 777th datagram's version changed (the collector rejects it),
/// and the last record cut short (the framing rejects it).
fn capture_with_bad_input() -> (Vec<u8>, usize, usize) {
    let mut gen = Vec::new();
    silt_gen::sflow::write_sflow(
        &mut gen,
        &silt_gen::sflow::SflowOptions {
            samples: 40_000,
            ..Default::default()
        },
    )
    .expect("generate");
    let (_, cap) = pcap_parser::parse_pcap(&gen).expect("classic pcap");
    let mut out = gen[..24].to_vec();
    let frames = cap.blocks.len();
    let mut whole = 0;
    for (i, b) in cap.blocks.iter().enumerate() {
        let n = i + 1;
        let mut data = b.data.to_vec();
        if n % 1000 == 0 {
            data.truncate(20);
        } else if n % 777 == 0 {
            // Ethernet 14 + IPv4 20 + UDP 8: the sFlow version's last byte.
            data[14 + 20 + 8 + 3] = 4;
        }
        let mut rec = Vec::new();
        rec.extend_from_slice(&b.ts_sec.to_le_bytes());
        rec.extend_from_slice(&b.ts_usec.to_le_bytes());
        rec.extend_from_slice(&(data.len() as u32).to_le_bytes());
        rec.extend_from_slice(&(data.len() as u32).to_le_bytes());
        rec.extend_from_slice(&data);
        if n == frames {
            whole = out.len();
            rec.truncate(rec.len() / 2);
        }
        out.extend_from_slice(&rec);
    }
    (out, frames, whole)
}

fn decode(data: &[u8], piece: usize) -> CollectEmit {
    let source = SourceInfo {
        display: "test".into(),
        file_name: None,
    };
    let mut d = capture::decoder(Protocol::Sflow, &FormatOptions::default(), &source);
    let mut out = CollectEmit::default();
    for p in data.chunks(piece) {
        d.feed(p, &mut out).expect("feed");
    }
    d.finish(&mut out).expect("finish");
    out
}

fn rows(out: &CollectEmit) -> RecordBatch {
    let b: Vec<RecordBatch> = common::batches(out, "sflow.sample")
        .into_iter()
        .cloned()
        .collect();
    arrow::compute::concat_batches(&Arc::new(b[0].schema().as_ref().clone()), &b).expect("concat")
}

#[test]
fn the_decoding_thread_keeps_rows_and_rejects_in_order() {
    let (data, frames, whole_records) = capture_with_bad_input();
    assert!(data.len() > 5 * capture::CHUNK_BYTES, "several chunks");
    let out = decode(&data, data.len());

    // Reference: one collector fed the datagrams directly (the test helper skips frames it
    // cannot parse, and the cut last record).
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("c.pcap");
    // The reference reader wants whole records: without the cut one.
    std::fs::write(&path, &data[..whole_records]).expect("write");
    let (reference, _, _) = common::collect(Protocol::Sflow, &[path]);

    assert_eq!(rows(&out), rows(&reference), "the same sflow.sample rows");
    let datagram_rejects = |o: &CollectEmit| -> Vec<(u64, String)> {
        o.rejects
            .iter()
            .filter(|r| r.reason.starts_with("sFlow:"))
            .map(|r| (r.line, r.reason.clone()))
            .collect()
    };
    assert_eq!(datagram_rejects(&out), datagram_rejects(&reference));
    assert_eq!(
        datagram_rejects(&out).len(),
        (1..frames)
            .filter(|n| n % 777 == 0 && n % 1000 != 0)
            .count()
    );
    let lines: Vec<u64> = out.rejects.iter().map(|r| r.line).collect();
    let mut sorted = lines.clone();
    sorted.sort_unstable();
    assert_eq!(lines, sorted, "rejects in frame order");
    let cut: Vec<u64> = (1..frames as u64).filter(|n| n % 1000 == 0).collect();
    for n in &cut {
        assert!(lines.contains(n), "frame {n} (cut to 20 bytes) is a reject");
    }
    assert_eq!(lines.last(), Some(&(frames as u64)), "the cut last record");
    assert!(out
        .rejects
        .iter()
        .all(|r| r.table == Some(sflow_sample_table())));

    // Fed in pieces: the same outcome.
    let pieces = decode(&data, 7919);
    assert_eq!(rows(&pieces), rows(&out));
    let all = |o: &CollectEmit| -> Vec<(u64, String)> {
        o.rejects
            .iter()
            .map(|r| (r.line, r.reason.clone()))
            .collect()
    };
    assert_eq!(all(&pieces), all(&out));
}
