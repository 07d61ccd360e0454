//! `--parse-field log=access`: a [`Transform`] that parses a string column holding access-log
//! lines (the Docker `log` field of an nginx container) into typed columns.
//!
//! Touches only the batches passing through it, and keeps its own counters
//! ([`ParseField::parsed`], [`ParseField::unparsed`]); [`Transform::report`] says how many values
//! did not match.
//!
//! ## Rules
//! - The parsed columns are plain top-level columns (not a struct), so `status = 200` is a
//!   simple column filter in DuckDB, Athena, Trino and Spark and each column gets its own
//!   Parquet statistics for row-group pruning. They are inserted where the field was, in
//!   format order (for `access`: `remote_addr, remote_user, time, method, path, protocol,
//!   request, status, bytes, referer, user_agent, x_forwarded_for`; see [`crate::columns`]).
//! - A parsed column whose name is already taken by another column of the batch is named
//!   `<field>_<name>` instead (Docker json-file's own `time` next to the parsed `time`
//!   becomes `log_time`), with more `_` appended while that is taken too.
//! - The original column follows the parsed ones, under its own name. Without `--keep-field`
//!   it holds only the values that did NOT parse (null for every parsed row), so nothing is
//!   ever lost and the common case stores the text once. With `--keep-field` it keeps every
//!   value.
//! - A value that does not match the format keeps its row: the parsed columns are null and the
//!   raw text stays in the original column. It is NOT also sent as a reject, so every input
//!   record is counted exactly once (as a row); [`ParseField::unparsed`] counts them and
//!   `WHERE log IS NOT NULL` (without `--keep-field`) finds them.
//! - A null value gives null parsed columns. A batch without the field passes unchanged.
//!   A field that is not a string column is an error.
//! - If the batch's schema names no event-time column (`silt.time_column`), the parsed time
//!   column becomes it; a time column the reader already chose (`--time-field log_time`) stays.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use silt_core::{meta, TableName, Transform};

use crate::columns::RowBuilder;
use crate::format::LogFormat;

/// What to parse: `FIELD=FORMAT`.
#[derive(Debug, Clone)]
pub struct ParseFieldSpec {
    /// Top-level column name (`log`).
    pub field: String,
    pub format: Arc<LogFormat>,
    /// Keep every original value (otherwise only the unparsed ones).
    pub keep: bool,
}

impl ParseFieldSpec {
    /// Parses `log=access`, `log=combined`, `log=<nginx log_format or Apache LogFormat>`;
    /// a bare `log` means `log=access` (combined, nginx main or common, per line).
    pub fn parse(s: &str, keep: bool) -> anyhow::Result<Self> {
        let (field, format) = s.split_once('=').unwrap_or((s, "access"));
        let field = field.trim();
        if field.is_empty() {
            anyhow::bail!("--parse-field {s:?}: the field name is empty (expected FIELD=FORMAT, e.g. log=access)");
        }
        Ok(ParseFieldSpec {
            field: field.to_string(),
            format: Arc::new(LogFormat::parse(format)?),
            keep,
        })
    }
}

/// Parses one string column of every batch (see the module documentation).
pub struct ParseField {
    spec: ParseFieldSpec,
    rows: RowBuilder,
    unparsed: u64,
    parsed: u64,
}

impl ParseField {
    pub fn new(spec: ParseFieldSpec) -> Self {
        let rows = RowBuilder::new(spec.format.clone(), 1024);
        ParseField {
            spec,
            rows,
            unparsed: 0,
            parsed: 0,
        }
    }

    /// Non-null values that did not match the format (kept in the original column).
    pub fn unparsed(&self) -> u64 {
        self.unparsed
    }

    /// Values that parsed.
    pub fn parsed(&self) -> u64 {
        self.parsed
    }

    /// The batch with the field parsed (or unchanged when it lacks the field).
    pub fn transform(&mut self, batch: RecordBatch) -> anyhow::Result<RecordBatch> {
        let schema = batch.schema();
        let Ok(idx) = schema.index_of(&self.spec.field) else {
            return Ok(batch);
        };
        let col = batch.column(idx);
        let col: ArrayRef = match col.data_type() {
            DataType::Utf8 => col.clone(),
            DataType::LargeUtf8 | DataType::Utf8View => arrow::compute::cast(col, &DataType::Utf8)?,
            other => anyhow::bail!(
                "--parse-field {}: the field is {other}, not a string",
                self.spec.field
            ),
        };
        let strings: &StringArray = col.as_string::<i32>();
        let mut ok = BooleanBufferBuilder::new(strings.len());
        for i in 0..strings.len() {
            if strings.is_null(i) {
                self.rows.push_null();
                ok.append(false);
                continue;
            }
            match self.rows.push_line(strings.value(i)) {
                Ok(()) => {
                    self.parsed += 1;
                    ok.append(true);
                }
                Err(_) => {
                    self.rows.push_null();
                    self.unparsed += 1;
                    ok.append(false);
                }
            }
        }
        let parsed_cols = self.rows.finish();
        let original: ArrayRef = if self.spec.keep {
            col.clone()
        } else {
            let mask = BooleanArray::new(ok.finish(), None);
            arrow::compute::nullif(&col, &mask)?
        };

        let taken: Vec<&str> = schema
            .fields()
            .iter()
            .filter(|f| f.name() != &self.spec.field)
            .map(|f| f.name().as_str())
            .collect();
        let mut fields: Vec<Arc<Field>> =
            Vec::with_capacity(schema.fields().len() + parsed_cols.len());
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(fields.capacity());
        fields.extend(schema.fields().iter().take(idx).cloned());
        arrays.extend(batch.columns().iter().take(idx).cloned());
        let mut time_name = None;
        for (c, a) in self.rows.columns().iter().zip(parsed_cols) {
            let mut name = c.name.clone();
            if taken.contains(&name.as_str()) || name == self.spec.field {
                name = format!("{}_{}", self.spec.field, c.name);
                while taken.contains(&name.as_str()) || name == self.spec.field {
                    name.push('_');
                }
            }
            if time_name.is_none() && matches!(c.data_type, DataType::Timestamp(..)) {
                time_name = Some(name.clone());
            }
            let f = c.field();
            fields.push(Arc::new(
                Field::new(name, f.data_type().clone(), true).with_metadata(f.metadata().clone()),
            ));
            arrays.push(a);
        }
        let orig = schema.field(idx);
        fields.push(Arc::new(
            Field::new(orig.name(), DataType::Utf8, true).with_metadata(orig.metadata().clone()),
        ));
        arrays.push(original);
        fields.extend(schema.fields().iter().skip(idx + 1).cloned());
        arrays.extend(batch.columns().iter().skip(idx + 1).cloned());

        let mut md = schema.metadata().clone();
        if meta::time_column(&schema).is_none() {
            if let Some(t) = time_name {
                md.insert(meta::TIME_COLUMN.to_string(), t);
            }
        }
        let out_schema = Arc::new(Schema::new_with_metadata(fields, md));
        Ok(RecordBatch::try_new(out_schema, arrays)?)
    }
}

impl Transform for ParseField {
    fn name(&self) -> String {
        format!("parse-field {}={}", self.spec.field, self.spec.format.spec)
    }

    fn apply(&mut self, _table: &TableName, batch: RecordBatch) -> anyhow::Result<RecordBatch> {
        self.transform(batch)
    }

    /// `3 of 120 values did not match the access-log format; ...` when any did not.
    fn report(&self) -> Vec<String> {
        if self.unparsed == 0 {
            return Vec::new();
        }
        vec![format!(
            "{} of {} values did not match the access-log format; their rows are kept with the raw text in the original column and null parsed columns",
            self.unparsed,
            self.unparsed + self.parsed
        )]
    }
}
