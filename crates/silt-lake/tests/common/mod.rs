//! Helpers shared by the integration tests of `silt-lake`.

use std::io::BufWriter;
use std::path::Path;

use arrow::record_batch::RecordBatch;
use silt_lake::WriterConfig;

/// Writes `all` to `path` through `silt_lake::store::open`, as `silt import` does: the first
/// `batch` rows are the sample the writer judges columns on, the file's expected rows are all of
/// `all`, and the rows arrive in slices of `batch`.
#[allow(dead_code)]
pub fn write_in_batches(cfg: &WriterConfig, all: &RecordBatch, batch: usize, path: &Path) {
    let n = all.num_rows();
    let out = BufWriter::new(std::fs::File::create(path).unwrap());
    let first = all.slice(0, batch.min(n));
    let mut sink = silt_lake::store::open(cfg, &all.schema(), &[], n, &first, out).unwrap();
    for off in (0..n).step_by(batch) {
        sink.write(&all.slice(off, batch.min(n - off))).unwrap();
    }
    drop(sink.finish().unwrap());
}

/// The small conn-like schema of the writer and compaction tests: `ts` (the time column), `uid`
/// (a lookup column), `n`, and with `extra` a later field `extra`.
#[allow(dead_code)]
pub fn conn_schema(extra: bool) -> arrow::datatypes::SchemaRef {
    use arrow::datatypes::{DataType, Field, Schema};
    use silt_core::meta;
    let mut fields = vec![
        Field::new("ts", silt_core::time::timestamp_type(), true),
        Field::new("uid", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
    ];
    if extra {
        fields.push(Field::new("extra", DataType::Utf8, true));
    }
    let md: std::collections::HashMap<String, String> = [
        (meta::TIME_COLUMN.to_string(), "ts".to_string()),
        (meta::LOOKUP_COLUMNS.to_string(), "uid".to_string()),
    ]
    .into();
    std::sync::Arc::new(Schema::new_with_metadata(fields, md))
}
