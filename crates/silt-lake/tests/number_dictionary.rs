//! A number column keeps its dictionary only when the dictionary will fit its page for the whole
//! file, as projected from the first rows (`silt_lake::store`, `high_cardinality_leaves`).
//!
//! Four columns, 600k rows, written through `store::open` as `silt import` does:
//! - `pair_id`: random ids that each come three times a few rows apart (the rows of one flow
//!   share a flow id). A third of the sampled values are distinct, so a rule that looked only at
//!   the sample kept a dictionary, which overflowed its page two thirds of the way in; it must
//!   be written plain;
//! - `duration`: a DECIMAL(18,6), 60 % from a thousand short values, 40 % from a range wider than
//!   the file: plain, for the same reason;
//! - `pool`: 30k values drawn uniformly, most of them already seen in the sample: dictionary;
//! - `port`: 200 values: dictionary.
//! - `counter`: a UInt32 like sFlow's sample pools: datagrams of six samples from one of four
//!   agents, each agent's counter stepping by 1000 (sometimes 2000), about a quarter of the
//!   values distinct. Its dictionary would fit, but DELTA_BINARY_PACKED is much smaller: no
//!   dictionary, deltas.
//! - `datagram_seq`: a UInt32 like sFlow's datagram sequence numbers: the same datagrams, each
//!   agent's number counting on by one, so a value comes six times in a row and the agents'
//!   numbers drift apart. Few values are distinct (a 24th) and the dictionary would fit, but
//!   plain values through zstd take far less than its indices (and less than deltas, which jump
//!   between agents): no dictionary, plain.
//! - `client_port`: a UInt16 of random ephemeral ports (32768-60999), 60 % distinct in the
//!   sample, which would make a wider type lose its dictionary; a 16-bit dictionary cannot
//!   overflow, and its indices beat plain values: dictionary.
//! - `cycle_port`: a UInt16 whose 2,001 random values repeat in the same order (a log made of
//!   one day's records repeated, as in the real-derived Zeek benchmark): zstd finds the repeats
//!   in byte-aligned plain values, not in 11-bit indices whose cycle ends mid-byte, so plain
//!   takes a fraction of the indices' bytes: no dictionary, plain.
//!
//! The oracle for sizes is independent of silt's choice: each column written alone by parquet-rs
//! with and without a dictionary; silt's chunk must be no larger than the smaller of the two
//! (plus 2 %, for the page statistics silt writes).

mod common;

use std::sync::Arc;

use arrow::array::{ArrayRef, Decimal128Array, UInt16Array, UInt32Array, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use silt_lake::{Codec, WriterConfig};

const N: usize = 600_000;
const BATCH: usize = 50_000;

fn columns() -> (SchemaRef, Vec<ArrayRef>) {
    let mut r = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    // Each id three times within a few rows: a third of the values are distinct.
    let mut pair = Vec::with_capacity(N);
    let mut pending: Vec<(u64, u8)> = Vec::new();
    while pair.len() < N {
        if pending.len() > 3 || (!pending.is_empty() && !r.next_u64().is_multiple_of(3)) {
            let i = (r.next_u64() as usize) % pending.len();
            pair.push(pending[i].0);
            pending[i].1 -= 1;
            if pending[i].1 == 0 {
                pending.swap_remove(i);
            }
        } else {
            let id = r.next_u64() >> 14;
            pair.push(id);
            pending.push((id, 2));
        }
    }
    pair.truncate(N);
    let duration: Vec<i128> = (0..N)
        .map(|_| {
            // 60 % a thousand short values, 40 % anything up to ~70 minutes.
            if r.next_u64() % 10 < 6 {
                (r.next_u64() % 1000) as i128
            } else {
                (r.next_u64() % (1 << 32)) as i128
            }
        })
        .collect();
    let pool: Vec<u64> = (0..N).map(|_| 10_000_000 + r.next_u64() % 30_000).collect();
    let port: Vec<u64> = (0..N).map(|_| 1024 + r.next_u64() % 200).collect();
    // Datagrams of six samples from one of four agents, each agent's pool counting on.
    let mut counters = [0u32; 4];
    let mut agent = 0;
    let counter: Vec<u32> = (0..N)
        .map(|i| {
            if i % 6 == 0 {
                agent = (r.next_u64() % 4) as usize;
            }
            let c = &mut counters[agent];
            *c += 1000
                + if r.next_u64().is_multiple_of(8) {
                    1000
                } else {
                    0
                };
            *c
        })
        .collect();
    // The same datagrams' sequence numbers, one counter per agent.
    let mut seqs = [0u32; 4];
    let mut agent = 0;
    let datagram_seq: Vec<u32> = (0..N)
        .map(|i| {
            if i % 6 == 0 {
                agent = (r.next_u64() % 4) as usize;
                seqs[agent] += 1;
            }
            seqs[agent]
        })
        .collect();
    let client_port: Vec<u16> = (0..N)
        .map(|_| 32768 + (r.next_u64() % 28232) as u16)
        .collect();
    let cycle: Vec<u16> = (0..2001).map(|_| (r.next_u64() % 65536) as u16).collect();
    let cycle_port: Vec<u16> = (0..N).map(|i| cycle[i % cycle.len()]).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("pair_id", DataType::UInt64, true),
        Field::new("duration", DataType::Decimal128(18, 6), true),
        Field::new("pool", DataType::UInt64, true),
        Field::new("port", DataType::UInt64, true),
        Field::new("counter", DataType::UInt32, true),
        Field::new("datagram_seq", DataType::UInt32, true),
        Field::new("client_port", DataType::UInt16, true),
        Field::new("cycle_port", DataType::UInt16, true),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from(pair)),
        Arc::new(
            Decimal128Array::from(duration)
                .with_precision_and_scale(18, 6)
                .unwrap(),
        ),
        Arc::new(UInt64Array::from(pool)),
        Arc::new(UInt64Array::from(port)),
        Arc::new(UInt32Array::from(counter)),
        Arc::new(UInt32Array::from(datagram_seq)),
        Arc::new(UInt16Array::from(client_port)),
        Arc::new(UInt16Array::from(cycle_port)),
    ];
    (schema, cols)
}

/// (compressed bytes, data-page encodings) per column of a Parquet file.
fn chunks(path: &std::path::Path) -> Vec<(u64, Vec<Encoding>)> {
    let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let md = r.metadata();
    let n = md.file_metadata().schema_descr().num_columns();
    (0..n)
        .map(|c| {
            let mut bytes = 0u64;
            let mut enc = Vec::new();
            for rg in md.row_groups() {
                let cc = rg.column(c);
                bytes += cc.compressed_size() as u64;
                for e in cc.encodings() {
                    if !enc.contains(&e) {
                        enc.push(e);
                    }
                }
            }
            (bytes, enc)
        })
        .collect()
}

/// The column written alone by parquet-rs, zstd level 1, with or without a dictionary.
fn alone(name: &str, col: &ArrayRef, dictionary: bool, dir: &std::path::Path) -> u64 {
    alone_as(name, col, dictionary, None, dir)
}

/// As [`alone`], with `encoding` (without a dictionary) when given.
fn alone_as(
    name: &str,
    col: &ArrayRef,
    dictionary: bool,
    encoding: Option<Encoding>,
    dir: &std::path::Path,
) -> u64 {
    let schema = Arc::new(Schema::new(vec![Field::new(
        name,
        col.data_type().clone(),
        true,
    )]));
    let path = dir.join(format!("{name}-{dictionary}-{encoding:?}.parquet"));
    let mut props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap()))
        .set_dictionary_enabled(dictionary);
    if let Some(e) = encoding {
        props = props.set_encoding(e);
    }
    let props = props.build();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        schema.clone(),
        Some(props),
    )
    .unwrap();
    w.write(&RecordBatch::try_new(schema, vec![col.clone()]).unwrap())
        .unwrap();
    w.close().unwrap();
    chunks(&path)[0].0
}

#[test]
fn number_dictionaries_only_where_they_fit_the_file_and_beat_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let (schema, cols) = columns();
    let all = RecordBatch::try_new(schema.clone(), cols.clone()).unwrap();
    let cfg = WriterConfig {
        codec: Codec::Zstd,
        level: Some(1),
        bloom_lookup_columns: false,
        ..WriterConfig::default()
    };
    let path = dir.path().join("silt.parquet");
    common::write_in_batches(&cfg, &all, BATCH, &path);

    let got = chunks(&path);
    let dict = |e: &[Encoding]| {
        e.iter()
            .any(|e| matches!(e, Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY))
    };
    for (i, f) in schema.fields().iter().enumerate() {
        let name = f.name().as_str();
        let want_dict = matches!(name, "pool" | "port" | "client_port");
        assert_eq!(dict(&got[i].1), want_dict, "{name}: {:?}", got[i].1);
        let with = alone(name, &cols[i], true, dir.path());
        let without = alone(name, &cols[i], false, dir.path());
        let mut best = with.min(without);
        let delta = alone_as(
            name,
            &cols[i],
            false,
            Some(Encoding::DELTA_BINARY_PACKED),
            dir.path(),
        );
        let deltas = got[i].1.contains(&Encoding::DELTA_BINARY_PACKED);
        if name == "counter" {
            assert!(deltas, "{name}: {:?}", got[i].1);
            assert!(
                (delta as f64) < best as f64 * 0.8,
                "{name}: deltas {delta} bytes, best of plain and dictionary {best}"
            );
            // silt's pages hold fewer rows (`--page-rows`), and each delta page starts over
            // with a header and a first value: 2 % more slack.
            best = delta * 102 / 100;
        }
        if name == "datagram_seq" {
            assert!(!deltas, "{name}: {:?}", got[i].1);
            assert!(
                (without as f64) < with.min(delta) as f64 * 0.8,
                "{name}: plain {without} bytes, dictionary {with}, deltas {delta}"
            );
        }
        assert!(
            got[i].0 as f64 <= best as f64 * 1.02,
            "{name}: silt {} bytes, parquet-rs with dictionary {with}, without {without}, best {best}",
            got[i].0
        );
    }
    // The planted columns are ones where the choice matters by more than noise.
    let pair = (alone("pair_id", &cols[0], true, dir.path()) as f64)
        / alone("pair_id", &cols[0], false, dir.path()) as f64;
    assert!(pair > 1.05, "pair_id with/without dictionary: {pair:.3}");
    let pool = (alone("pool", &cols[2], false, dir.path()) as f64)
        / alone("pool", &cols[2], true, dir.path()) as f64;
    assert!(pool > 1.05, "pool without/with dictionary: {pool:.3}");
    let client = (alone("client_port", &cols[6], false, dir.path()) as f64)
        / alone("client_port", &cols[6], true, dir.path()) as f64;
    assert!(
        client > 1.05,
        "client_port without/with dictionary: {client:.3}"
    );
    let cycle = (alone("cycle_port", &cols[7], true, dir.path()) as f64)
        / alone("cycle_port", &cols[7], false, dir.path()) as f64;
    assert!(
        cycle > 1.5,
        "cycle_port with/without dictionary: {cycle:.3}"
    );
}

/// Compressed bytes of `col` written alone by parquet-rs (zstd 1) with a dictionary, and of its
/// dictionary page.
fn with_dictionary_page(col: &ArrayRef) -> (u64, u64) {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "v",
        col.data_type().clone(),
        true,
    )]));
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).unwrap()))
        .build();
    let mut w = ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props)).unwrap();
    w.write(&RecordBatch::try_new(schema, vec![col.clone()]).unwrap())
        .unwrap();
    w.flush().unwrap();
    let c = w.flushed_row_groups()[0].column(0);
    let page = c.data_page_offset() - c.dictionary_page_offset().unwrap();
    (c.compressed_size() as u64, page as u64)
}

/// A file written whole (an hour's partition, all of whose rows are the sample): a column of
/// byte counts (log-uniform up to a million, 42 % distinct) fits a dictionary, and its indices
/// alone are smaller than its plain values, but indices and dictionary page together are not.
/// silt counts the page and writes the column plain; a column of 2,000 random 64-bit ids (whose
/// plain values zstd cannot shrink) keeps its dictionary.
#[test]
fn a_whole_files_dictionary_counts_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let n = 60_000;
    let bytes: Vec<u64> = (0..n)
        .map(|_| ((r.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 13.8).exp() as u64)
        .collect();
    let ids: Vec<u64> = (0..2000).map(|_| r.next_u64()).collect();
    let id: Vec<u64> = (0..n)
        .map(|_| ids[r.next_u64() as usize % ids.len()])
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("bytes", DataType::UInt64, true),
        Field::new("id", DataType::UInt64, true),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(UInt64Array::from(bytes)),
        Arc::new(UInt64Array::from(id)),
    ];
    let all = RecordBatch::try_new(schema.clone(), cols.clone()).unwrap();
    // The premise: indices alone beat plain values, the whole dictionary does not.
    let (with, page) = with_dictionary_page(&cols[0]);
    let without = alone("bytes", &cols[0], false, dir.path());
    assert!(
        with - page < without,
        "indices {} plain {without}",
        with - page
    );
    assert!(
        with as f64 > without as f64 * 1.1,
        "dictionary {with} plain {without}"
    );

    let cfg = WriterConfig {
        codec: Codec::Zstd,
        level: Some(1),
        bloom_lookup_columns: false,
        ..WriterConfig::default()
    };
    let path = dir.path().join("whole.parquet");
    let out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut sink = silt_lake::store::open_whole(&cfg, &schema, &[], &all, n, out).unwrap();
    sink.write(&all).unwrap();
    drop(sink.finish().unwrap());
    let got = chunks(&path);
    assert!(
        !got[0].1.contains(&Encoding::RLE_DICTIONARY),
        "bytes: {:?}",
        got[0].1
    );
    assert!(
        got[0].0 as f64 <= without as f64 * 1.02,
        "bytes: silt {} bytes, plain {without}",
        got[0].0
    );
    assert!(
        got[1].1.contains(&Encoding::RLE_DICTIONARY),
        "id: {:?}",
        got[1].1
    );
    let (with, _) = with_dictionary_page(&cols[1]);
    let without = alone("id", &cols[1], false, dir.path());
    assert!(
        got[1].0 as f64 <= with as f64 * 1.02 && with < without,
        "id: silt {} bytes, dictionary {with}, plain {without}",
        got[1].0
    );
}
