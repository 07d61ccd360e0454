//! Writing one file and timing it, through silt's real writer code (`silt_lake::store::open`
//! with a [`silt_lake::WriterConfig`], the same sinks `silt import` uses).
//!
//! What is timed, as the study fenced it: conversion only. The rows are already in memory as
//! Arrow and already sorted by the table's time column (sorting happens once per table, before
//! any timing, because the lake writer sorts too and the sort is the same for every store and
//! codec). The timed span is: create the file, open the sink (Parquet properties, cardinality
//! probe), write every batch, write the footer, flush the buffered writer to the OS. No fsync:
//! the figure is the encoder's cost, not the disk's. Touches only the file it is told to write.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow::compute::{concat_batches, sort_to_indices, take_record_batch, SortOptions};
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::collect::TableData;
use crate::cpu::process_cpu_seconds;
use crate::matrix::{BenchConfig, Variant};

/// A table's rows ready for writing: sorted by time (for the default writer) and as read.
pub struct Prepared {
    pub schema: SchemaRef,
    /// Sorted by the time column (nulls first, like the lake writer), in `batch_rows` slices.
    pub sorted: Vec<RecordBatch>,
    /// In input order.
    pub unsorted: Vec<RecordBatch>,
    /// Sort key column paths (the time column), empty when the table has none.
    pub sort_keys: Vec<String>,
}

/// Sorts a table once (untimed) and cuts it into `batch_rows` slices.
pub fn prepare(t: &TableData, batch_rows: usize) -> anyhow::Result<Prepared> {
    let schema = t.schema.clone();
    let all = concat_batches(&schema, &t.batches)?;
    let time = silt_core::meta::time_column(&schema).map(str::to_string);
    let (sorted_all, sort_keys) = match time
        .as_deref()
        .and_then(|c| silt_lake::writer::column_by_path(&all, c))
    {
        Some(col) => {
            let idx = sort_to_indices(
                &col,
                Some(SortOptions {
                    descending: false,
                    nulls_first: true,
                }),
                None,
            )?;
            (
                take_record_batch(&all, &idx)?,
                vec![time.clone().unwrap_or_default()],
            )
        }
        None => (all.clone(), Vec::new()),
    };
    Ok(Prepared {
        schema,
        sorted: slices(&sorted_all, batch_rows),
        unsorted: slices(&all, batch_rows),
        sort_keys,
    })
}

fn slices(b: &RecordBatch, rows: usize) -> Vec<RecordBatch> {
    let rows = rows.max(1);
    (0..b.num_rows())
        .step_by(rows)
        .map(|off| b.slice(off, rows.min(b.num_rows() - off)))
        .collect()
}

/// What writing one file measured.
#[derive(Debug, Clone)]
pub struct WriteResult {
    pub output_bytes: u64,
    /// Process CPU seconds (see [`crate::cpu`]).
    pub cpu_s: f64,
    pub wall_s: f64,
    pub batches: usize,
}

/// Writes `p` with configuration `c` to `path` and times it.
pub fn write_file(c: &BenchConfig, p: &Prepared, path: &Path) -> anyhow::Result<WriteResult> {
    let mut cfg = c.writer_config();
    if c.variant == Variant::NoDictionary {
        // Every leaf outside lists (list elements keep parquet-rs's default).
        cfg.encodings.no_dictionary = silt_lake::store::leaf_paths(&p.schema)
            .into_iter()
            .filter(|(path, _)| !path.iter().any(|s| s == "list"))
            .map(|(path, _)| path.join("."))
            .collect();
    }
    let (batches, sort): (&[RecordBatch], &[String]) = match c.variant {
        Variant::Unsorted => (&p.unsorted, &[]),
        _ => (&p.sorted, &p.sort_keys),
    };
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let empty;
    let first = match batches.first() {
        Some(b) => b,
        None => {
            empty = RecordBatch::new_empty(Arc::clone(&p.schema));
            &empty
        }
    };
    let cpu0 = process_cpu_seconds();
    let t0 = Instant::now();
    let out = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut sink = silt_lake::store::open(&cfg, &p.schema, sort, rows, first, out)?;
    for b in batches {
        sink.write(b)?;
    }
    let mut w = sink.finish()?;
    w.flush()?;
    drop(w);
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_s = process_cpu_seconds() - cpu0;
    Ok(WriteResult {
        output_bytes: std::fs::metadata(path)?.len(),
        cpu_s,
        wall_s,
        batches: batches.len(),
    })
}
