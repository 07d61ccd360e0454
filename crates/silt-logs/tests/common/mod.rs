//! Helpers shared by the silt-logs tests: run a reader into memory or into one Parquet file.

#![allow(dead_code)]

use std::io::BufReader;
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use silt_core::{CollectEmit, ReadOptions, SourceInfo};
use silt_lake::single::SingleFileWriter;
use silt_lake::WriterConfig;
use silt_logs::{LogFormat, LogOptions};

pub fn corpus() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("corpus not found, skipping");
        None
    }
}

pub fn source(name: &str) -> SourceInfo {
    SourceInfo {
        display: name.to_string(),
        file_name: Some(name.to_string()),
    }
}

/// Reads `bytes` in `format` into memory.
pub fn collect(
    format: LogFormat,
    bytes: &[u8],
    lo: &LogOptions,
) -> (CollectEmit, anyhow::Result<()>) {
    let mut out = CollectEmit::default();
    let mut input = BufReader::new(bytes);
    let r = silt_logs::read(
        format,
        &mut input,
        &source("input"),
        &ReadOptions::default(),
        lo,
        &mut out,
    );
    (out, r)
}

/// All batches of the (single) table, concatenated.
pub fn one_table(out: &CollectEmit) -> RecordBatch {
    assert_eq!(out.batches.len(), 1, "tables: {:?}", out.batches.keys());
    let batches = out.batches.values().next().unwrap();
    let schema = batches.last().unwrap().schema();
    let conformed: Vec<RecordBatch> = batches
        .iter()
        .map(|b| silt_core::schema::conform(b, &schema).unwrap())
        .collect();
    concat_batches(&schema, &conformed).unwrap()
}

/// Converts `bytes` to a Parquet file in `dir` (like `silt convert`) and reads it back.
pub fn convert(
    dir: &Path,
    name: &str,
    format: LogFormat,
    bytes: &[u8],
    lo: &LogOptions,
) -> (RecordBatch, u64) {
    let path = dir.join(format!("{name}.parquet"));
    let mut w = SingleFileWriter::new(&path, WriterConfig::default(), dir).unwrap();
    let mut input = BufReader::new(bytes);
    silt_logs::read(
        format,
        &mut input,
        &source(name),
        &ReadOptions::default(),
        lo,
        &mut w,
    )
    .unwrap();
    let s = w.finish().unwrap();
    (read_parquet(&path), s.rejects)
}

pub fn read_parquet(path: &Path) -> RecordBatch {
    let f = std::fs::File::open(path).unwrap();
    let builder = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
    // The builder's schema has the file's metadata; the reader's own schema does not.
    let schema = builder.schema().clone();
    let r = builder.build().unwrap();
    let batches: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
    concat_batches(&schema, &batches).unwrap()
}

/// A column as strings (nulls as "NULL"), through Arrow's display formatting.
pub fn strings(b: &RecordBatch, col: &str) -> Vec<String> {
    let c = b
        .column_by_name(col)
        .unwrap_or_else(|| panic!("no column {col} in {:?}", b.schema()));
    let f = arrow::util::display::ArrayFormatter::try_new(
        c.as_ref(),
        &arrow::util::display::FormatOptions::default().with_null("NULL"),
    )
    .unwrap();
    (0..c.len()).map(|i| f.value(i).to_string()).collect()
}

/// Deterministic pseudo-random bytes (no RNG dependency needed for fuzz-ish tests).
pub fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}
