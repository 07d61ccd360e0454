//! List columns written through `store::open` in large sliced batches come back exactly.
//!
//! `ParquetSink` cuts each batch into slices and narrows every list's child array to the slice
//! before parquet-rs encodes it (`silt_lake::narrow`); this checks the whole path end to end:
//! a list of decimals (converted to INT64 by parquet-rs), a list of strings inside a nullable
//! struct, and a list of lists, with null and empty lists, written as slices of one large
//! batch (the way `silt bench` and the single-file writer hand rows over) and read back.

use std::io::BufWriter;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, Decimal128Builder, Int64Builder, ListBuilder, StringBuilder, StructArray,
};
use arrow::buffer::NullBuffer;
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Field, Fields, Schema};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use silt_lake::{Codec, WriterConfig};

const N: usize = 150_000;

fn batch() -> RecordBatch {
    let mut ttls =
        ListBuilder::new(Decimal128Builder::new().with_data_type(DataType::Decimal128(18, 6)));
    let mut names = ListBuilder::new(StringBuilder::new());
    let mut nested = ListBuilder::new(ListBuilder::new(Int64Builder::new()));
    for i in 0..N as i64 {
        match i % 11 {
            3 => ttls.append_null(),
            5 => ttls.append(true), // empty
            _ => {
                for k in 0..(i % 4) {
                    ttls.values()
                        .append_value((i * 1_000_000 + k * 250_000) as i128);
                }
                ttls.append(true);
            }
        }
        for k in 0..(i % 3) {
            names
                .values()
                .append_value(format!("host{}.example", (i + k) % 997));
        }
        names.append(i % 13 != 7);
        for k in 0..(i % 3) {
            for j in 0..k {
                nested.values().values().append_value(i + j);
            }
            nested.values().append(true);
        }
        nested.append(i % 17 != 2);
    }
    let ttls = ttls.finish();
    let names = names.finish();
    let inner = Fields::from(vec![Field::new("names", names.data_type().clone(), true)]);
    let st = StructArray::new(
        inner.clone(),
        vec![Arc::new(names) as ArrayRef],
        Some(NullBuffer::from_iter((0..N).map(|i| i % 19 != 4))),
    );
    let nested = nested.finish();
    let schema = Arc::new(Schema::new(vec![
        Field::new("ttls", ttls.data_type().clone(), true),
        Field::new("answers", DataType::Struct(inner), true),
        Field::new("nested", nested.data_type().clone(), true),
    ]));
    RecordBatch::try_new(schema, vec![Arc::new(ttls), Arc::new(st), Arc::new(nested)]).unwrap()
}

#[test]
fn sliced_list_batches_round_trip() {
    let all = batch();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lists.parquet");
    let cfg = WriterConfig {
        codec: Codec::Zstd,
        level: Some(1),
        ..WriterConfig::default()
    };
    let out = BufWriter::new(std::fs::File::create(&path).unwrap());
    let schema = all.schema();
    let mut sink = silt_lake::store::open(&cfg, &schema, &[], N, &all.slice(0, 1000), out).unwrap();
    // Uneven slices of one batch, each larger than the sink's own 64Ki-row slices.
    let mut off = 0;
    for n in [70_001, 66_000, N - 136_001] {
        sink.write(&all.slice(off, n)).unwrap();
        off += n;
    }
    drop(sink.finish().unwrap());

    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let read: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    let back = concat_batches(&read[0].schema(), &read).unwrap();
    assert_eq!(back.num_rows(), N);
    for (i, f) in schema.fields().iter().enumerate() {
        assert_eq!(
            back.column(i).to_data(),
            all.column(i).to_data(),
            "column {} differs after the round trip",
            f.name()
        );
    }
}
