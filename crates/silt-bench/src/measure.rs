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

use arrow::array::{Array, ArrayRef, AsArray, GenericListArray, OffsetSizeTrait, StructArray};
use arrow::compute::{
    cast_with_options, concat_batches, sort_to_indices, take_record_batch, CastOptions, SortOptions,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
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
    /// Rows per slice.
    pub batch_rows: usize,
}

/// Source-address columns, in order of preference, for the `by-host` variant.
const HOST_COLUMNS: &[&str] = &["id.orig_h", "src_ip", "src", "remote_addr"];

impl Prepared {
    /// The source-address column the `by-host` variant sorts by, if the table has one.
    pub fn host_column(&self) -> Option<&'static str> {
        let first = self.sorted.first()?;
        HOST_COLUMNS
            .iter()
            .copied()
            .find(|c| silt_lake::writer::column_by_path(first, c).is_some())
    }
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
        batch_rows,
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
    // The as-text and by-host rows are made before the clock starts (conversion and sorting
    // are not the writer's cost; the default rows were sorted before any timing too).
    let variant_rows: Vec<RecordBatch>;
    let host_keys: Vec<String>;
    let mut schema = Arc::clone(&p.schema);
    let (batches, sort): (&[RecordBatch], &[String]) = match c.variant {
        Variant::Unsorted => (&p.unsorted, &[]),
        Variant::ByHost => {
            let host = p
                .host_column()
                .ok_or_else(|| anyhow::anyhow!("no source address column to sort by"))?;
            let all = concat_batches(&p.schema, &p.sorted)?;
            host_keys = std::iter::once(host.to_string())
                .chain(p.sort_keys.iter().cloned())
                .collect();
            let by = |path: &str| -> anyhow::Result<arrow::compute::SortColumn> {
                Ok(arrow::compute::SortColumn {
                    values: silt_lake::writer::column_by_path(&all, path)
                        .ok_or_else(|| anyhow::anyhow!("column {path} missing"))?,
                    options: Some(SortOptions {
                        descending: false,
                        nulls_first: true,
                    }),
                })
            };
            let keys = host_keys
                .iter()
                .map(|k| by(k))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let order = arrow::compute::lexsort_to_indices(&keys, None)?;
            variant_rows = slices(&take_record_batch(&all, &order)?, p.batch_rows);
            (&variant_rows, &host_keys)
        }
        Variant::AsText => {
            variant_rows = p
                .sorted
                .iter()
                .map(as_text)
                .collect::<anyhow::Result<_>>()?;
            if let Some(b) = variant_rows.first() {
                schema = b.schema();
            }
            // Rows keep the time order, but text times do not sort as text (chrono prints
            // 0, 3 or 6 fraction digits), so no `sorting_columns` claim.
            (&variant_rows, &[])
        }
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
            empty = RecordBatch::new_empty(Arc::clone(&schema));
            &empty
        }
    };
    let cpu0 = process_cpu_seconds();
    let t0 = Instant::now();
    let out = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut sink = silt_lake::store::open(&cfg, &schema, sort, rows, first, out)?;
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

/// `b` with every typed leaf as text (the `as-text` variant): times as RFC 3339, numbers,
/// decimals and booleans as arrow prints them; text and binary leaves as they are; structs and
/// lists keep their shape with text leaves; maps and types arrow cannot print stay as they are.
/// Names, nullability of rows and field metadata stay, so silt's writer makes the same
/// per-column choices it would for a log read as text.
pub fn as_text(b: &RecordBatch) -> anyhow::Result<RecordBatch> {
    let mut fields = Vec::with_capacity(b.num_columns());
    let mut cols = Vec::with_capacity(b.num_columns());
    for (f, c) in b.schema().fields().iter().zip(b.columns()) {
        let c = text_array(c)?;
        fields.push(text_field(f, c.data_type()));
        cols.push(c);
    }
    let schema = Schema::new_with_metadata(fields, b.schema().metadata().clone());
    Ok(RecordBatch::try_new(Arc::new(schema), cols)?)
}

/// A list (`i32` offsets) or large list (`i64`) with its items as text.
fn text_list<O: OffsetSizeTrait>(a: &ArrayRef, item: &Field) -> anyhow::Result<ArrayRef> {
    let l = a.as_list::<O>();
    let values = text_array(l.values())?;
    let item = Arc::new(text_field(item, values.data_type()));
    Ok(Arc::new(GenericListArray::<O>::try_new(
        item,
        l.offsets().clone(),
        values,
        l.nulls().cloned(),
    )?))
}

fn text_field(f: &Field, dt: &DataType) -> Field {
    Field::new(f.name(), dt.clone(), true).with_metadata(f.metadata().clone())
}

fn text_array(a: &ArrayRef) -> anyhow::Result<ArrayRef> {
    Ok(match a.data_type() {
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Null
        // Maps are rare in telemetry; kept as they are rather than guessed at.
        | DataType::Map(_, _) => Arc::clone(a),
        DataType::Struct(fields) => {
            let s = a.as_struct();
            let mut new_fields = Vec::with_capacity(fields.len());
            let mut cols = Vec::with_capacity(fields.len());
            for (f, c) in fields.iter().zip(s.columns()) {
                let c = text_array(c)?;
                new_fields.push(text_field(f, c.data_type()));
                cols.push(c);
            }
            Arc::new(StructArray::try_new(
                new_fields.into(),
                cols,
                s.nulls().cloned(),
            )?)
        }
        DataType::List(item) => text_list::<i32>(a, item)?,
        DataType::LargeList(item) => text_list::<i64>(a, item)?,
        // Every scalar arrow can print: numbers, decimals, booleans, times, dictionaries. A
        // type arrow cannot cast to text stays as it is (the variant is then typed there).
        _ => cast_with_options(
            a,
            &DataType::Utf8,
            &CastOptions {
                safe: false,
                ..Default::default()
            },
        )
        .unwrap_or_else(|_| Arc::clone(a)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{
        BooleanArray, Decimal128Array, DictionaryArray, ListArray, StringArray,
        TimestampMicrosecondArray, UInt16Array,
    };
    use arrow::buffer::OffsetBuffer;
    use arrow::datatypes::Int32Type;

    #[test]
    fn as_text_prints_every_typed_leaf_and_keeps_the_shape() {
        let ts = TimestampMicrosecondArray::from(vec![Some(1_521_911_721_123_456), None])
            .with_timezone("UTC");
        let port = UInt16Array::from(vec![Some(80), Some(53)]);
        let id = StructArray::from(vec![
            (
                Arc::new(Field::new("ts", ts.data_type().clone(), true)),
                Arc::new(ts) as ArrayRef,
            ),
            (
                Arc::new(Field::new("port", DataType::UInt16, true)),
                Arc::new(port) as ArrayRef,
            ),
        ]);
        let dec = Decimal128Array::from(vec![300, 1_500_000, 7])
            .with_precision_and_scale(18, 6)
            .unwrap();
        let ttls = ListArray::new(
            Arc::new(Field::new("item", dec.data_type().clone(), true)),
            OffsetBuffer::from_lengths([2, 1]),
            Arc::new(dec),
            None,
        );
        let dict: DictionaryArray<Int32Type> = vec!["tcp", "udp"].into_iter().collect();
        let flag = BooleanArray::from(vec![Some(true), None]);
        let name = StringArray::from(vec!["a", "b"]);
        let b = RecordBatch::try_from_iter(vec![
            ("id", Arc::new(id) as ArrayRef),
            ("ttls", Arc::new(ttls) as ArrayRef),
            ("proto", Arc::new(dict) as ArrayRef),
            ("flag", Arc::new(flag) as ArrayRef),
            ("name", Arc::new(name) as ArrayRef),
        ])
        .unwrap();
        let t = as_text(&b).unwrap();
        assert_eq!(t.num_rows(), 2);
        let id = t.column(0).as_struct();
        let ts = id.column(0).as_string::<i32>();
        assert_eq!(ts.value(0), "2018-03-24T17:15:21.123456Z");
        assert!(ts.is_null(1), "a null stays null");
        assert_eq!(id.column(1).as_string::<i32>().value(0), "80");
        let ttls = t.column(1).as_list::<i32>();
        assert_eq!(ttls.value_length(0), 2);
        let v = ttls.values().as_string::<i32>();
        assert_eq!(
            (v.value(0), v.value(1), v.value(2)),
            ("0.000300", "1.500000", "0.000007")
        );
        assert_eq!(t.column(2).as_string::<i32>().value(1), "udp");
        assert_eq!(t.column(3).as_string::<i32>().value(0), "true");
        assert!(t.column(3).is_null(1));
        assert_eq!(t.column(4).as_string::<i32>().value(1), "b");
    }
}
