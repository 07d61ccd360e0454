//! Helpers shared by the integration tests of `silt-lake`.

use std::io::BufWriter;
use std::path::Path;

use arrow::record_batch::RecordBatch;
use silt_lake::WriterConfig;

/// Writes `all` to `path` through `silt_lake::store::open`, as `silt import` does: the first
/// `batch` rows are the sample the writer judges columns on, the file's expected rows are all of
/// `all`, and the rows arrive in slices of `batch`.
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
