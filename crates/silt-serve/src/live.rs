//! What queries see: the lake's index and the rows acknowledged but not yet in a file.
//!
//! [`Live`] holds, under one lock, the [`LakeIndex`] (read once at start, then extended with the
//! footers of each flush's new files, never re-listed) and, per table, the batches decoded from
//! the write-ahead log, each tagged with the generation (flush) it belongs to. A flush publishes a
//! generation's files and then, in one step under the lock, adds them to the index and drops the
//! generation's batches ([`Live::published`]); a query takes a snapshot under the same lock
//! ([`Live::snapshot`]), so it sees every acknowledged row exactly once: in memory or in a file,
//! never both, never neither.
//!
//! Touches nothing on disk.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use arrow::record_batch::RecordBatch;
use silt_core::TableName;
use silt_query::lake::LakeIndex;

/// See the module documentation.
pub struct Live {
    inner: RwLock<Inner>,
}

struct Inner {
    index: Arc<LakeIndex>,
    tails: BTreeMap<TableName, Vec<(u64, RecordBatch)>>,
}

/// A consistent view for one query.
pub struct Snapshot {
    pub index: Arc<LakeIndex>,
    pub tails: BTreeMap<TableName, Vec<RecordBatch>>,
}

impl Snapshot {
    /// Rows in memory (not yet in files), all tables.
    pub fn tail_rows(&self) -> usize {
        self.tails
            .values()
            .flatten()
            .map(RecordBatch::num_rows)
            .sum()
    }
}

impl Live {
    pub fn new(index: LakeIndex) -> Self {
        Self {
            inner: RwLock::new(Inner {
                index: Arc::new(index),
                tails: BTreeMap::new(),
            }),
        }
    }

    /// Rows of `table` for generation `gen`, visible to queries from now on.
    pub fn push(&self, gen: u64, table: &TableName, batch: RecordBatch) {
        let mut g = self.inner.write().expect("not poisoned");
        g.tails.entry(table.clone()).or_default().push((gen, batch));
    }

    /// Generation `gen`'s files are published: `index` (the old index with their footers) replaces
    /// the index and the generation's rows leave memory, atomically for queries.
    pub fn published(&self, gen: u64, index: LakeIndex) {
        let mut g = self.inner.write().expect("not poisoned");
        g.index = Arc::new(index);
        for v in g.tails.values_mut() {
            v.retain(|(g, _)| *g != gen);
        }
        g.tails.retain(|_, v| !v.is_empty());
    }

    /// The current index.
    pub fn index(&self) -> Arc<LakeIndex> {
        self.inner.read().expect("not poisoned").index.clone()
    }

    /// A consistent view (see the module documentation).
    pub fn snapshot(&self) -> Snapshot {
        let g = self.inner.read().expect("not poisoned");
        Snapshot {
            index: g.index.clone(),
            tails: g
                .tails
                .iter()
                .map(|(t, v)| (t.clone(), v.iter().map(|(_, b)| b.clone()).collect()))
                .collect(),
        }
    }
}
