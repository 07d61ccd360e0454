//! The bloom filters silt builds for lookup columns (`silt_lake::bloom`) are the ones parquet-rs
//! would build, bit for bit.
//!
//! A table with one column of each handled kind (unique text, repeated text inside a struct
//! whose parent is sometimes null, binary, text views, signed and unsigned 32- and 64-bit
//! integers, nulls in most) is written through `store::open` as `silt import` does, with row
//! groups small enough that there are several. The oracle is parquet-rs's own bloom filter: the
//! same rows written by `ArrowWriter` with bloom filters on the same columns, at the same size and
//! probability, cut into the same row groups. Every row group's filter must have the same bytes.

mod common;

use std::io::BufWriter;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, Int32Array, Int64Array, StringArray, StringViewArray,
    StructArray, UInt32Array, UInt64Array,
};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{ReaderProperties, WriterProperties};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::serialized_reader::ReadOptionsBuilder;
use parquet::schema::types::ColumnPath;
use proptest::prelude::Rng as _;
use proptest::test_runner::{RngAlgorithm, TestRng};
use silt_lake::{Codec, WriterConfig};

const N: usize = 300_000;
const BATCH: usize = 30_000;
/// Every lookup column of the table, as dotted paths.
const LOOKUP: [&str; 8] = [
    "uid",
    "id.orig_h",
    "id.orig_p",
    "payload",
    "view",
    "flow_id",
    "hash",
    "vlan",
];

fn table() -> RecordBatch {
    let mut r = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let mut maybe = |p: u64| r.next_u64() % 100 >= p;
    let valid: Vec<bool> = (0..N).map(|_| maybe(5)).collect();
    let parent: Vec<bool> = (0..N).map(|_| maybe(3)).collect();
    let mut r = TestRng::deterministic_rng(RngAlgorithm::XorShift);
    let uid: StringArray = (0..N)
        .map(|i| valid[i].then(|| format!("C{:017x}", r.next_u64())))
        .collect();
    let hosts: Vec<String> = (0..3000)
        .map(|i| format!("10.{}.{}.{}", i / 65536, i / 256 % 256, i % 256))
        .collect();
    // Hosts come in runs, as a host's connections do.
    let mut host = 0;
    let orig_h: StringArray = (0..N)
        .map(|i| {
            if r.next_u64().is_multiple_of(4) {
                host = (r.next_u64() % 3000) as usize;
            }
            valid[(i + 1) % N].then(|| hosts[host].clone())
        })
        .collect();
    let orig_p: UInt32Array = (0..N)
        .map(|_| Some(1024 + (r.next_u64() % 60000) as u32))
        .collect();
    let id = StructArray::try_new(
        Fields::from(vec![
            Field::new("orig_h", DataType::Utf8, true),
            Field::new("orig_p", DataType::UInt32, true),
        ]),
        vec![Arc::new(orig_h) as ArrayRef, Arc::new(orig_p)],
        Some(NullBuffer::from(parent)),
    )
    .unwrap();
    let payload: BinaryArray = (0..N)
        .map(|i| valid[(i + 2) % N].then(|| r.next_u64().to_be_bytes()[..(i % 9)].to_vec()))
        .collect();
    let view: StringViewArray = (0..N)
        .map(|i| {
            valid[(i + 3) % N].then(|| format!("a longer text value {}", r.next_u64() % 50_000))
        })
        .collect();
    let flow_id: Int64Array = (0..N)
        .map(|i| valid[(i + 4) % N].then(|| (r.next_u64() >> 12) as i64 - (1 << 50)))
        .collect();
    let hash: UInt64Array = (0..N).map(|_| Some(r.next_u64())).collect();
    let vlan: Int32Array = (0..N)
        .map(|i| valid[(i + 5) % N].then(|| (i % 4096) as i32 - 2048))
        .collect();
    let id_type = id.data_type().clone();
    let schema: SchemaRef = Arc::new(Schema::new(vec![
        Field::new("uid", DataType::Utf8, true),
        Field::new("id", id_type, true),
        Field::new("payload", DataType::Binary, true),
        Field::new("view", DataType::Utf8View, true),
        Field::new("flow_id", DataType::Int64, true),
        Field::new("hash", DataType::UInt64, true),
        Field::new("vlan", DataType::Int32, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(uid),
            Arc::new(id),
            Arc::new(payload),
            Arc::new(view),
            Arc::new(flow_id),
            Arc::new(hash),
            Arc::new(vlan),
        ],
    )
    .unwrap()
}

/// Per row group, each leaf column's bloom filter bytes (if it has one).
type Filters = Vec<Vec<Option<Vec<u8>>>>;

/// Every row group's row count and bloom filters.
fn filters(path: &std::path::Path) -> (Vec<usize>, Filters) {
    let opts = ReadOptionsBuilder::new()
        .with_reader_properties(
            ReaderProperties::builder()
                .set_read_bloom_filter(true)
                .build(),
        )
        .build();
    let r =
        SerializedFileReader::new_with_options(std::fs::File::open(path).unwrap(), opts).unwrap();
    let md = r.metadata();
    let mut rows = Vec::new();
    let mut out = Vec::new();
    for i in 0..md.num_row_groups() {
        rows.push(md.row_group(i).num_rows() as usize);
        let rg = r.get_row_group(i).unwrap();
        out.push(
            (0..md.row_group(i).num_columns())
                .map(|c| {
                    rg.get_column_bloom_filter(c).map(|f| {
                        let mut b = Vec::new();
                        f.write_bitset(&mut b).unwrap();
                        b
                    })
                })
                .collect(),
        );
    }
    (rows, out)
}

#[test]
fn lookup_column_filters_are_parquet_rs_filters_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let all = table();
    let schema = all.schema();
    let cfg = WriterConfig {
        codec: Codec::Zstd,
        level: Some(1),
        bloom_lookup_columns: false,
        bloom_columns: LOOKUP.iter().map(|s| s.to_string()).collect(),
        row_group_bytes: 1 << 20,
        ..WriterConfig::default()
    };
    let path = dir.path().join("silt.parquet");
    common::write_in_batches(&cfg, &all, BATCH, &path);
    let (rows, ours) = filters(&path);
    assert!(rows.len() >= 3, "several row groups: {rows:?}");

    // The oracle: parquet-rs's filters on the same row groups.
    let ndv = N as u64; // what silt sizes them for: the expected rows, within [1024, 2^20]
    let mut props = WriterProperties::builder();
    for c in LOOKUP {
        let cp = ColumnPath::new(c.split('.').map(str::to_string).collect());
        props = props
            .set_column_bloom_filter_enabled(cp.clone(), true)
            .set_column_bloom_filter_fpp(cp.clone(), cfg.bloom_fpp)
            .set_column_bloom_filter_max_ndv(cp, ndv);
    }
    let want_path = dir.path().join("parquet-rs.parquet");
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(&want_path).unwrap(),
        schema.clone(),
        Some(props.build()),
    )
    .unwrap();
    let mut off = 0;
    for n in &rows {
        w.write(&all.slice(off, *n)).unwrap();
        w.flush().unwrap();
        off += n;
    }
    w.close().unwrap();
    let (want_rows, want) = filters(&want_path);
    assert_eq!(rows, want_rows);

    for (g, (a, b)) in ours.iter().zip(&want).enumerate() {
        assert_eq!(a.len(), LOOKUP.len(), "one leaf per lookup column");
        for (c, name) in LOOKUP.iter().enumerate() {
            let (a, b) = (a[c].as_ref(), b[c].as_ref());
            assert!(
                a.is_some() && b.is_some(),
                "row group {g}, {name}: a filter"
            );
            assert!(
                a == b,
                "row group {g}, {name}: silt's filter ({} bytes) differs from parquet-rs's ({} bytes)",
                a.unwrap().len(),
                b.unwrap().len()
            );
        }
    }
    // Not trivially equal: the unique column's filter is large, the repeated one folded small.
    let (uid, host) = (ours[0][0].as_ref().unwrap(), ours[0][1].as_ref().unwrap());
    assert!(
        uid.len() >= rows[0],
        "uid filter {} bytes for {} rows",
        uid.len(),
        rows[0]
    );
    assert!(
        host.len() <= uid.len() / 4,
        "orig_h filter {} bytes",
        host.len()
    );
}

/// A lookup column whose filter silt does not build itself (the keys of a map) keeps
/// parquet-rs's filter, and writing it is no error.
#[test]
fn map_keys_keep_parquet_rs_filters() {
    use arrow::array::{MapBuilder, StringBuilder};
    let dir = tempfile::tempdir().unwrap();
    let mut b = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for i in 0..1000 {
        b.keys().append_value(format!("k{}", i % 7));
        b.values().append_value(format!("v{i}"));
        b.append(true).unwrap();
    }
    let tags: ArrayRef = Arc::new(b.finish());
    let schema: SchemaRef = Arc::new(Schema::new(vec![Field::new(
        "tags",
        tags.data_type().clone(),
        true,
    )]));
    let batch = RecordBatch::try_new(schema.clone(), vec![tags]).unwrap();
    let cfg = WriterConfig {
        bloom_lookup_columns: false,
        bloom_columns: vec!["tags.entries.keys".to_string()],
        ..WriterConfig::default()
    };
    let path = dir.path().join("map.parquet");
    let out = BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut sink = silt_lake::store::open(&cfg, &schema, &[], 1000, &batch, out).unwrap();
    sink.write(&batch).unwrap();
    drop(sink.finish().unwrap());
    let (_, filters) = filters(&path);
    let keys = filters[0][0].as_ref().expect("a filter on the map's keys");
    let f = parquet::bloom_filter::Sbbf::new(keys);
    assert!((0..7).all(|i| f.check(format!("k{i}").as_str())));
    assert!(filters[0][1].is_none(), "none on the values");
}
