//! What queries see: the lake's index and the rows acknowledged but not yet in a file.
//!
//! [`Live`] holds, under one lock, the [`LakeIndex`] (read at start, then extended with the
//! footers of each flush's new files, changed by the server's own compaction and retention, and
//! re-listed only after another process's maintenance) and, per table, the batches decoded from
//! the write-ahead log, each tagged with the generation (flush) it belongs to. A flush publishes a
//! generation's files and then, in one step under the lock, adds them to the index and drops the
//! generation's batches ([`IndexUpdate::published`]); maintenance takes files out of the index in
//! one step before it removes them ([`IndexUpdate::replace_before_removal`]) and waits for the
//! queries that started before (each holds the pin of its [`Snapshot`]). A query takes a snapshot
//! under the same lock ([`Live::snapshot`]), so it sees every acknowledged row exactly once: in
//! memory or in a file, never both, never neither.
//!
//! Touches nothing on disk.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use arrow::record_batch::RecordBatch;
use silt_core::TableName;
use silt_query::lake::LakeIndex;

/// See the module documentation.
pub struct Live {
    inner: RwLock<Inner>,
    /// Held by whoever derives a new index from the current one (a flush, maintenance), so that
    /// two such updates never overwrite each other's (queries do not wait on it).
    updating: Mutex<()>,
}

/// The right to replace the index, derived from [`IndexUpdate::current`]; see [`Live::begin_update`].
pub struct IndexUpdate<'a> {
    live: &'a Live,
    _guard: MutexGuard<'a, ()>,
    pub current: Arc<LakeIndex>,
}

impl IndexUpdate<'_> {
    /// Generation `gen`'s files are published: `index` (the current index with their footers)
    /// replaces the index and the generation's rows leave memory, atomically for queries.
    pub fn published(self, gen: u64, index: LakeIndex) {
        let mut g = self.live.inner.write().expect("not poisoned");
        g.index = Arc::new(index);
        for v in g.tails.values_mut() {
            v.retain(|(g, _)| *g != gen);
        }
        g.tails.retain(|_, v| !v.is_empty());
    }

    /// Files changed under the index (a re-scan after another process changed the lake):
    /// `index` replaces it.
    pub fn replace(self, index: LakeIndex) {
        self.live.inner.write().expect("not poisoned").index = Arc::new(index);
    }

    /// Files are about to be removed (compaction, retention): `index`, which no longer lists
    /// them, replaces the index, and the returned pin is held by every query that started
    /// before: once it is the only holder (`Arc::strong_count == 1`), no query can open the
    /// files any more and they may go.
    pub fn replace_before_removal(self, index: LakeIndex) -> Arc<()> {
        let mut g = self.live.inner.write().expect("not poisoned");
        g.index = Arc::new(index);
        std::mem::replace(&mut g.pin, Arc::new(()))
    }
}

struct Inner {
    index: Arc<LakeIndex>,
    tails: BTreeMap<TableName, Vec<(u64, RecordBatch)>>,
    /// Held (cloned) by every query for as long as it may open files of `index`; replaced when
    /// files are about to be removed, so the remover can wait for the queries that still may.
    pin: Arc<()>,
}

/// A consistent view for one query.
pub struct Snapshot {
    pub index: Arc<LakeIndex>,
    pub tails: BTreeMap<TableName, Vec<RecordBatch>>,
    /// Keep this while the query runs (see [`IndexUpdate::replace_before_removal`]).
    pub pin: Arc<()>,
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
                pin: Arc::new(()),
            }),
            updating: Mutex::new(()),
        }
    }

    /// Starts an update of the index: holds off other updates until the returned value is used
    /// or dropped.
    pub fn begin_update(&self) -> IndexUpdate<'_> {
        let guard = self.updating.lock().expect("not poisoned");
        IndexUpdate {
            live: self,
            _guard: guard,
            current: self.index(),
        }
    }

    /// Rows of `table` for generation `gen`, visible to queries from now on.
    pub fn push(&self, gen: u64, table: &TableName, batch: RecordBatch) {
        let mut g = self.inner.write().expect("not poisoned");
        g.tails.entry(table.clone()).or_default().push((gen, batch));
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
            pin: g.pin.clone(),
            tails: g
                .tails
                .iter()
                .map(|(t, v)| (t.clone(), v.iter().map(|(_, b)| b.clone()).collect()))
                .collect(),
        }
    }
}
