//! Writing query results: `csv`, `json` (one JSON array), `ndjson` (one object per line),
//! `table` (a pretty ASCII table) and `parquet` (a Parquet file).
//!
//! Timestamps print as ISO 8601 in UTC with a `Z` and the digits of their unit
//! (`2018-03-24T17:15:21.123456Z` for microseconds); timestamps without a zone are taken as UTC.
//! In CSV, structs and lists are written as JSON text (CSV has no nesting); JSON keeps them
//! nested. SQL NULL is an empty CSV field, JSON `null` and `NULL` in the table. Parquet keeps the
//! Arrow types unchanged and is built in memory before it is written (Parquet's writer needs a
//! `Send` sink and the whole file is written at once anyway).
//!
//! [`ResultWriter`] writes batch by batch (csv, json and ndjson stream);
//! [`write_results`] writes collected batches.
//!
//! Only writes to the `Write` it is given.

use std::io::Write;
use std::str::FromStr;
use std::sync::Arc;

use anyhow::Context;
use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::{
    DataType, Field, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use arrow::util::display::FormatOptions;
use chrono::{DateTime, SecondsFormat, Utc};

/// A result format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Csv,
    Json,
    Ndjson,
    Table,
    Parquet,
}

impl OutputFormat {
    pub const ALL: [OutputFormat; 5] = [
        OutputFormat::Csv,
        OutputFormat::Json,
        OutputFormat::Ndjson,
        OutputFormat::Table,
        OutputFormat::Parquet,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Csv => "csv",
            OutputFormat::Json => "json",
            OutputFormat::Ndjson => "ndjson",
            OutputFormat::Table => "table",
            OutputFormat::Parquet => "parquet",
        }
    }
}

impl FromStr for OutputFormat {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        Self::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                anyhow::anyhow!("unknown output format '{s}' (csv, json, ndjson, table, parquet)")
            })
    }
}

impl std::fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Writes `batches` in `format`. With no batches nothing is known about the columns: `json`
/// writes `[]`, `table` an empty table, the others nothing. Prefer [`write_results_with_schema`]
/// when the schema is known.
pub fn write_results(
    batches: &[RecordBatch],
    format: OutputFormat,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let schema = batches
        .first()
        .map(|b| b.schema())
        .unwrap_or_else(|| Arc::new(Schema::empty()));
    write_results_with_schema(&schema, batches, format, out)
}

/// Writes `batches` (all of `schema`) in `format`; column headers are written even when there
/// are no rows.
pub fn write_results_with_schema(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    format: OutputFormat,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut w = ResultWriter::new(schema, format, out)?;
    for b in batches {
        w.write(b)?;
    }
    w.finish()?;
    Ok(())
}

/// Writes results batch by batch, so that `csv`, `json` and `ndjson` output streams while a
/// query runs; `table` and `parquet` are produced at [`ResultWriter::finish`] (a table needs all
/// rows to size its columns; a Parquet file is written whole).
pub struct ResultWriter<'a> {
    inner: Inner<'a>,
    /// Schema of the batches as written (timestamps, and for CSV nested values, as text).
    text_schema: SchemaRef,
    flatten_nested: bool,
    rows: u64,
}

enum Inner<'a> {
    Csv(arrow::csv::Writer<&'a mut dyn Write>),
    Json(arrow::json::Writer<&'a mut dyn Write, arrow::json::writer::JsonArray>),
    Ndjson(arrow::json::Writer<&'a mut dyn Write, arrow::json::writer::LineDelimited>),
    Table(&'a mut dyn Write, Vec<RecordBatch>),
    Parquet(&'a mut dyn Write, parquet::arrow::ArrowWriter<Vec<u8>>),
}

impl<'a> ResultWriter<'a> {
    pub fn new(
        schema: &SchemaRef,
        format: OutputFormat,
        out: &'a mut dyn Write,
    ) -> anyhow::Result<Self> {
        let flatten_nested = format == OutputFormat::Csv;
        let text_schema = if format == OutputFormat::Parquet {
            schema.clone()
        } else {
            textual_schema(schema, flatten_nested)
        };
        let json = || arrow::json::WriterBuilder::new().with_explicit_nulls(true);
        let inner = match format {
            OutputFormat::Csv => Inner::Csv(
                arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(out),
            ),
            OutputFormat::Json => Inner::Json(json().build(out)),
            OutputFormat::Ndjson => Inner::Ndjson(json().build(out)),
            OutputFormat::Table => Inner::Table(out, Vec::new()),
            OutputFormat::Parquet => {
                let props = parquet::file::properties::WriterProperties::builder()
                    .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
                    .build();
                let w =
                    parquet::arrow::ArrowWriter::try_new(Vec::new(), schema.clone(), Some(props))?;
                Inner::Parquet(out, w)
            }
        };
        Ok(Self {
            inner,
            text_schema,
            flatten_nested,
            rows: 0,
        })
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn write(&mut self, batch: &RecordBatch) -> anyhow::Result<()> {
        self.rows += batch.num_rows() as u64;
        if let Inner::Parquet(_, w) = &mut self.inner {
            w.write(batch)?;
            return Ok(());
        }
        let b = textual_batch(batch, &self.text_schema, self.flatten_nested)?;
        match &mut self.inner {
            Inner::Csv(w) => w.write(&b)?,
            Inner::Json(w) => w.write(&b)?,
            Inner::Ndjson(w) => w.write(&b)?,
            Inner::Table(_, v) => v.push(b),
            Inner::Parquet(..) => unreachable!("handled above"),
        }
        Ok(())
    }

    /// Completes the output (closing brackets, the table, the Parquet footer) and flushes it.
    pub fn finish(self) -> anyhow::Result<()> {
        match self.inner {
            Inner::Csv(mut w) => {
                if self.rows == 0 {
                    // The CSV writer writes its header with the first batch.
                    w.write(&RecordBatch::new_empty(self.text_schema.clone()))?;
                }
                w.into_inner().flush()?;
            }
            Inner::Json(mut w) => {
                // Writes `[]` when there were no rows.
                w.finish()?;
                let out = w.into_inner();
                writeln!(out)?;
                out.flush()?;
            }
            Inner::Ndjson(mut w) => {
                w.finish()?;
                w.into_inner().flush()?;
            }
            Inner::Table(out, batches) => {
                let opts = FormatOptions::default().with_null("NULL");
                let t = if self.rows == 0 {
                    arrow::util::pretty::pretty_format_batches_with_schema(
                        self.text_schema.clone(),
                        &[],
                    )?
                    .to_string()
                } else {
                    arrow::util::pretty::pretty_format_batches_with_options(&batches, &opts)?
                        .to_string()
                };
                writeln!(out, "{t}")?;
                out.flush()?;
            }
            Inner::Parquet(out, w) => {
                let buf = w.into_inner()?;
                out.write_all(&buf).context("cannot write Parquet output")?;
                out.flush()?;
            }
        }
        Ok(())
    }
}

fn converts(t: &DataType, flatten_nested: bool) -> bool {
    matches!(t, DataType::Timestamp(_, _)) || (flatten_nested && t.is_nested())
}

/// The schema after [`textual_batch`]: top-level timestamps (and with `flatten_nested`,
/// structs and lists) become text.
fn textual_schema(schema: &SchemaRef, flatten_nested: bool) -> SchemaRef {
    if !schema
        .fields()
        .iter()
        .any(|f| converts(f.data_type(), flatten_nested))
    {
        return schema.clone();
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| {
            if converts(f.data_type(), flatten_nested) {
                Field::new(f.name(), DataType::Utf8, true)
            } else {
                f.as_ref().clone()
            }
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// Turns top-level timestamps into ISO 8601 text and, with `flatten_nested`, structs and lists
/// into JSON text (silt-core's rendering of a nested value as text).
fn textual_batch(
    b: &RecordBatch,
    text_schema: &SchemaRef,
    flatten_nested: bool,
) -> anyhow::Result<RecordBatch> {
    if b.schema().fields() == text_schema.fields() {
        return Ok(b.clone());
    }
    let cols = b
        .columns()
        .iter()
        .map(|c| -> anyhow::Result<ArrayRef> {
            Ok(match c.data_type() {
                DataType::Timestamp(_, _) => Arc::new(format_timestamps(c)),
                t if flatten_nested && t.is_nested() => {
                    silt_core::schema::conform_array(c, &DataType::Utf8)?
                }
                _ => c.clone(),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
    Ok(RecordBatch::try_new_with_options(
        text_schema.clone(),
        cols,
        &opts,
    )?)
}

/// ISO 8601 UTC text of a timestamp array of any unit.
pub fn format_timestamps(a: &ArrayRef) -> StringArray {
    let (unit, fmt): (TimeUnit, SecondsFormat) = match a.data_type() {
        DataType::Timestamp(u, _) => (
            *u,
            match u {
                TimeUnit::Second => SecondsFormat::Secs,
                TimeUnit::Millisecond => SecondsFormat::Millis,
                TimeUnit::Microsecond => SecondsFormat::Micros,
                TimeUnit::Nanosecond => SecondsFormat::Nanos,
            },
        ),
        _ => return StringArray::from(vec![None::<&str>; a.len()]),
    };
    let to_dt = |i: usize| -> Option<DateTime<Utc>> {
        if a.is_null(i) {
            return None;
        }
        match unit {
            TimeUnit::Second => {
                DateTime::from_timestamp(a.as_primitive::<TimestampSecondType>().value(i), 0)
            }
            TimeUnit::Millisecond => DateTime::from_timestamp_millis(
                a.as_primitive::<TimestampMillisecondType>().value(i),
            ),
            TimeUnit::Microsecond => DateTime::from_timestamp_micros(
                a.as_primitive::<TimestampMicrosecondType>().value(i),
            ),
            TimeUnit::Nanosecond => Some(DateTime::from_timestamp_nanos(
                a.as_primitive::<TimestampNanosecondType>().value(i),
            )),
        }
    };
    (0..a.len())
        .map(|i| to_dt(i).map(|d| d.to_rfc3339_opts(fmt, true)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::TimestampMicrosecondArray;

    #[test]
    fn timestamps_are_iso_utc() {
        let a: ArrayRef = Arc::new(
            TimestampMicrosecondArray::from(vec![Some(1_521_911_721_123_456), None, Some(-1)])
                .with_timezone("UTC"),
        );
        let s = format_timestamps(&a);
        assert_eq!(s.value(0), "2018-03-24T17:15:21.123456Z");
        assert!(s.is_null(1));
        assert_eq!(s.value(2), "1969-12-31T23:59:59.999999Z");
    }

    #[test]
    fn parses_formats() {
        assert_eq!(
            "NDJSON".parse::<OutputFormat>().unwrap(),
            OutputFormat::Ndjson
        );
        assert!("xml".parse::<OutputFormat>().is_err());
    }
}
