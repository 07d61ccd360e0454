//! Transforms: what happens to a decoder's batches before they reach a sink (`--parse-field`,
//! and enrichment later). A transform sees one batch at a time, with its table, and returns the
//! batch to pass on; it keeps its own counters and says what it did in [`Transform::report`].
//! The pipeline (`silt_ingest::pipeline`) runs them in order on the sink's thread.

use arrow::record_batch::RecordBatch;

use crate::{Emit, Reject, TableName};

/// One step between decoder and sink; see the module documentation.
pub trait Transform: Send {
    /// A short name for messages (`parse-field log=access`).
    fn name(&self) -> String;

    /// The batch to pass on for `table`.
    fn apply(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<RecordBatch>;

    /// What the transform did, for the summary (empty when there is nothing to say).
    fn report(&self) -> Vec<String> {
        Vec::new()
    }
}

/// An [`Emit`] that runs `transforms` on every batch before handing it to `inner`.
pub struct TransformEmit<'a> {
    inner: &'a mut dyn Emit,
    transforms: &'a mut [Box<dyn Transform>],
}

impl<'a> TransformEmit<'a> {
    pub fn new(inner: &'a mut dyn Emit, transforms: &'a mut [Box<dyn Transform>]) -> Self {
        Self { inner, transforms }
    }
}

/// Runs `transforms` in order on one batch.
pub fn apply_all(
    transforms: &mut [Box<dyn Transform>],
    table: &TableName,
    mut batch: RecordBatch,
) -> anyhow::Result<RecordBatch> {
    for t in transforms.iter_mut() {
        batch = t.apply(table, batch)?;
    }
    Ok(batch)
}

impl Emit for TransformEmit<'_> {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        let b = apply_all(self.transforms, table, batch)?;
        self.inner.batch(table, b)
    }
    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.inner.reject(reject)
    }
    fn progress(&mut self, bytes: u64) {
        self.inner.progress(bytes)
    }
    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        self.inner.table_bytes(table, bytes)
    }
}
