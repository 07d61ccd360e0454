//! Adapters around a [`Sink`].
//!
//! - [`OneTable`]: everything goes to one table, the first one seen (`silt convert` writes one
//!   file, so all its inputs are one table: the first input names it, and rejects and per-table
//!   byte counts of the later inputs are attributed to it too);
//! - [`InMemory`]: any [`Emit`] (an in-memory collector) as a sink.
//!
//! Touches nothing but the sink it wraps.

use std::time::SystemTime;

use arrow::record_batch::RecordBatch;
use silt_core::{Committed, Emit, Reject, Sink, TableName};

/// See the module documentation.
pub struct OneTable<'a> {
    inner: &'a mut dyn Sink,
    table: Option<TableName>,
}

impl<'a> OneTable<'a> {
    pub fn new(inner: &'a mut dyn Sink) -> Self {
        Self { inner, table: None }
    }

    fn name(&mut self, t: &TableName) -> TableName {
        self.table.get_or_insert_with(|| t.clone()).clone()
    }
}

impl Emit for OneTable<'_> {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        let t = self.name(table);
        self.inner.batch(&t, batch)
    }
    fn reject(&mut self, mut reject: Reject) -> anyhow::Result<()> {
        if let Some(t) = &reject.table {
            reject.table = Some(self.name(t));
        }
        self.inner.reject(reject)
    }
    fn progress(&mut self, bytes: u64) {
        self.inner.progress(bytes)
    }
    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        let t = self.name(table);
        self.inner.table_bytes(&t, bytes)
    }
}

impl Sink for OneTable<'_> {
    fn commit(&mut self, now: SystemTime) -> anyhow::Result<Committed> {
        self.inner.commit(now)
    }
}

/// Any [`Emit`] as a sink whose data is as durable as it gets once received (memory: `silt
/// bench` collecting tables, tests): every commit succeeds.
pub struct InMemory<'a>(pub &'a mut (dyn Emit + Send));

impl Emit for InMemory<'_> {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        self.0.batch(table, batch)
    }
    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.0.reject(reject)
    }
    fn progress(&mut self, bytes: u64) {
        self.0.progress(bytes)
    }
    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        self.0.table_bytes(table, bytes)
    }
}

impl Sink for InMemory<'_> {
    fn commit(&mut self, _now: SystemTime) -> anyhow::Result<Committed> {
        Ok(Committed::Durable)
    }
}
