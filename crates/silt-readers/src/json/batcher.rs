//! Collecting records of one table into Arrow batches with a growing schema.
//!
//! A [`Batcher`] buffers parsed records (the caller decides when to flush: after
//! `ReadOptions::batch_rows` records or when memory grows). On [`Batcher::flush`] the buffered
//! records' types are folded into the table's running schema (schema rules of
//! [`silt_core::schema`]), the result becomes the new running schema, and the batch is built in
//! it. The running schema only ever grows: every batch of a table has a schema that unifies with
//! all earlier ones to itself, so the lake writer never has to narrow anything.
//!
//! Touches nothing but the records it is given.

use std::sync::Arc;

use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use super::build::build_batch;
use super::infer::unify_value;
use super::value::Value;

/// One table's buffered records and running schema.
#[derive(Debug)]
pub struct Batcher {
    schema: SchemaRef,
    rows: Vec<Value>,
    bytes: usize,
    mismatches: u64,
}

impl Batcher {
    /// A batcher whose running schema starts as `initial` (e.g. the time column, so it exists and
    /// comes first even before a record has one).
    pub fn new(initial: Schema) -> Self {
        Self {
            schema: Arc::new(initial),
            rows: Vec::new(),
            bytes: 0,
            mismatches: 0,
        }
    }

    /// The running schema (as of the last flush).
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Buffers a record; `bytes` is its size in the input, for the caller's memory accounting.
    pub fn push(&mut self, record: Value, bytes: usize) {
        self.rows.push(record);
        self.bytes += bytes;
    }

    /// Records buffered.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Input bytes of the buffered records.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Values that did not fit their inferred column so far (0 unless there is a bug).
    pub fn mismatches(&self) -> u64 {
        self.mismatches
    }

    /// Builds a batch from the buffered records, or `None` if there are none. `finish` may add
    /// schema and field metadata to the unified schema; it must be idempotent (it is applied to
    /// every batch's schema, and its output becomes the running schema).
    pub fn flush(
        &mut self,
        finish: &dyn Fn(Schema) -> Schema,
    ) -> Result<Option<RecordBatch>, ArrowError> {
        if self.rows.is_empty() {
            return Ok(None);
        }
        let mut t = DataType::Struct(self.schema.fields().clone());
        for r in &self.rows {
            unify_value(&mut t, r);
        }
        let fields = match t {
            DataType::Struct(f) => f,
            // Records that are not objects would make the row type a conflict; inference only
            // ever sees objects because callers reject everything else.
            other => {
                return Err(ArrowError::SchemaError(format!(
                    "records are not all JSON objects (row type {other})"
                )))
            }
        };
        let schema = Arc::new(finish(Schema::new_with_metadata(
            fields,
            self.schema.metadata().clone(),
        )));
        let rows = std::mem::take(&mut self.rows);
        self.bytes = 0;
        let built = build_batch(&rows, &schema)?;
        // Inference guarantees every value fits its column; catch a disagreement in tests, and
        // never make it a silent null in a release build (as `ColumnBatcher::flush`).
        debug_assert_eq!(
            built.mismatches, 0,
            "values that do not fit the inferred schema"
        );
        self.mismatches += built.mismatches;
        if built.mismatches > 0 {
            return Err(ArrowError::ComputeError(format!(
                "{} values do not fit the inferred schema (a bug in silt); the batch of {} \
                 records is not written",
                built.mismatches,
                rows.len()
            )));
        }
        self.schema = schema;
        Ok(Some(built.batch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::Field;

    #[test]
    fn running_schema_only_grows() {
        let mut b = Batcher::new(Schema::new(vec![Field::new("t", DataType::Int64, true)]));
        let id = |s: Schema| s;
        b.push(Value::from_slice(br#"{"a":1}"#).unwrap(), 7);
        let first = b.flush(&id).unwrap().unwrap();
        assert_eq!(first.schema().fields().len(), 2);
        b.push(Value::from_slice(br#"{"a":[2.5],"b":"x"}"#).unwrap(), 7);
        let second = b.flush(&id).unwrap().unwrap();
        let s = second.schema();
        assert_eq!(s.field(0).name(), "t");
        assert_eq!(
            s.field(1).data_type(),
            &DataType::List(Arc::new(Field::new("item", DataType::Float64, true)))
        );
        assert_eq!(s.field(2).name(), "b");
        // The first batch conforms to the running schema.
        let u = silt_core::schema::unify_schemas(&first.schema(), &s);
        assert_eq!(u.fields(), s.fields());
        assert!(b.flush(&id).unwrap().is_none());
        assert_eq!(b.mismatches(), 0);
    }
}
