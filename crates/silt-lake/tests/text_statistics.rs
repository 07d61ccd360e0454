//! Text columns whose values come in no order get no min/max statistics; ordered and constant
//! ones keep them (`silt_lake::store`, `unordered_text_leaves`).
//!
//! Min/max of random ids, or of hosts in a table sorted by time, cover about the whole range in
//! every page and row group: they prune nothing, and computing them (two comparisons per value)
//! was a tenth of a zeek.conn write's CPU. Six text columns, 200k rows, written through
//! `store::open` as `silt import` does:
//! - `key`: ascending (a sort key): statistics kept;
//! - `ulid`: time-ordered ids (a 10-character time prefix, then random characters): kept;
//! - `proto`: one value: kept (nothing to judge);
//! - `uid`: random base62 ids: none;
//! - `host`: 500 addresses in random order: none;
//! - `tls.sni`: random names inside a struct: none.
//!
//! Whatever the statistics, every value must read back unchanged.

mod common;

use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray, StructArray};
use arrow::datatypes::{DataType, Field, Fields, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::{FileReader, SerializedFileReader};
use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use silt_lake::{Codec, WriterConfig};

const N: usize = 200_000;
const BATCH: usize = 20_000;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn random_text(r: &mut TestRng, prefix: &str, len: usize) -> String {
    let mut s = String::from(prefix);
    for _ in 0..len {
        s.push(BASE62[(r.next_u64() % 62) as usize] as char);
    }
    s
}

fn table() -> RecordBatch {
    let mut r = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let key: Vec<String> = (0..N).map(|i| format!("k{i:08}")).collect();
    let ulid: Vec<String> = (0..N)
        .map(|i| {
            let t = format!("{:010}", 1_700_000_000 + i / 7);
            random_text(&mut r, &t, 16)
        })
        .collect();
    let proto: Vec<&str> = vec!["tcp"; N];
    let uid: Vec<String> = (0..N).map(|_| random_text(&mut r, "C", 17)).collect();
    let hosts: Vec<String> = (0..500)
        .map(|i| format!("10.{}.{}.{}", i / 250, i % 250, (i * 7) % 256))
        .collect();
    let host: Vec<&str> = (0..N)
        .map(|_| hosts[(r.next_u64() % 500) as usize].as_str())
        .collect();
    let sni: Vec<String> = (0..N)
        .map(|_| random_text(&mut r, "", 8) + ".example.com")
        .collect();
    let text = |v: Vec<String>| -> ArrayRef { Arc::new(StringArray::from(v)) };
    let tls_fields = Fields::from(vec![Field::new("sni", DataType::Utf8, true)]);
    let tls = StructArray::new(tls_fields.clone(), vec![text(sni)], None);
    let schema = Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("ulid", DataType::Utf8, true),
        Field::new("proto", DataType::Utf8, true),
        Field::new("uid", DataType::Utf8, true),
        Field::new("host", DataType::Utf8, true),
        Field::new("tls", DataType::Struct(tls_fields), true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            text(key),
            text(ulid),
            Arc::new(StringArray::from(proto)),
            text(uid),
            Arc::new(StringArray::from(host)),
            Arc::new(tls),
        ],
    )
    .unwrap()
}

#[test]
fn unordered_text_has_no_min_max_and_reads_back_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let all = table();
    let schema = all.schema();
    let cfg = WriterConfig {
        codec: Codec::Zstd,
        level: Some(1),
        ..WriterConfig::default()
    };
    let path = dir.path().join("silt.parquet");
    common::write_in_batches(&cfg, &all, BATCH, &path);

    let r = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let md = r.metadata();
    let descr = md.file_metadata().schema_descr();
    for c in 0..descr.num_columns() {
        let name = descr.column(c).path().string();
        let want = matches!(name.as_str(), "key" | "ulid" | "proto");
        for rg in md.row_groups() {
            let stats = rg.column(c).statistics();
            let has = stats.is_some_and(|s| s.min_bytes_opt().is_some());
            assert_eq!(has, want, "{name}: min/max present = {has}");
        }
    }
    // The ordered key's statistics are right, so they can prune.
    let first = md.row_group(0).column(0).statistics().unwrap();
    assert_eq!(first.min_bytes_opt(), Some("k00000000".as_bytes()));

    // Every value reads back unchanged.
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    let back = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
    assert_eq!(back.num_rows(), N);
    for (i, f) in schema.fields().iter().enumerate() {
        assert_eq!(
            back.column(i).to_data(),
            all.column(i).to_data(),
            "{} differs after reading back",
            f.name()
        );
    }
}
