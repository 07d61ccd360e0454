//! Holding each table's rows in memory as Arrow, bounded: [`BoundedCollect`] is the
//! [`Emit`] that readers write into during `silt bench`, and [`load_lake`] fills one from the
//! files of an existing lake (`silt bench --lake`).
//!
//! The study held each schema in memory before writing it; we do the same, but keep at most
//! `max_events` rows per table (the first ones in input order) so memory stays bounded. The
//! input bytes of a capped table are scaled to the rows kept (`bytes_seen × kept / seen`);
//! the `capped` column of `results.csv` says when that happened. Touches nothing on disk
//! except the lake files [`load_lake`] reads.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use silt_core::{Emit, Reject, TableName};
use silt_lake::StoreKind;

/// One table's rows, conformed to one unified schema.
#[derive(Debug, Clone)]
pub struct TableData {
    pub name: TableName,
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    /// Rows kept (at most the cap).
    pub events: u64,
    /// Rows the readers produced for this table (before the cap).
    pub events_seen: u64,
    /// Input bytes (decompressed) of all rows seen, from [`Emit::table_bytes`]; `None` when
    /// unknown (tables loaded from a lake).
    pub input_bytes_seen: Option<u64>,
}

impl TableData {
    /// Input bytes attributable to the rows kept (exact unless the table was capped, then
    /// scaled by the fraction of rows kept).
    pub fn input_bytes(&self) -> Option<u64> {
        let seen = self.input_bytes_seen?;
        if seen == 0 {
            return None;
        }
        if self.events_seen == self.events || self.events_seen == 0 {
            return Some(seen);
        }
        Some((seen as f64 * self.events as f64 / self.events_seen as f64).round() as u64)
    }

    /// Whether the cap left rows out.
    pub fn capped(&self) -> bool {
        self.events < self.events_seen
    }

    /// Arrow in-memory bytes: the sum of `RecordBatch::get_array_memory_size` over the batches
    /// (buffer capacity actually allocated, including validity bitmaps and offsets).
    pub fn arrow_bytes(&self) -> u64 {
        self.batches
            .iter()
            .map(|b| b.get_array_memory_size() as u64)
            .sum()
    }
}

#[derive(Default)]
struct Partial {
    schema: Option<Schema>,
    batches: Vec<RecordBatch>,
    kept: u64,
    seen: u64,
    bytes: u64,
}

/// An [`Emit`] that keeps up to `max_events` rows per table in memory and counts the rest.
pub struct BoundedCollect {
    max_events: u64,
    tables: BTreeMap<TableName, Partial>,
    /// Lines or records the readers rejected.
    pub rejects: u64,
    /// The first few rejects, for messages.
    pub sample_rejects: Vec<Reject>,
    /// Input bytes read (decompressed), from [`Emit::progress`].
    pub bytes_read: u64,
}

impl BoundedCollect {
    pub fn new(max_events: u64) -> Self {
        Self {
            max_events: max_events.max(1),
            tables: BTreeMap::new(),
            rejects: 0,
            sample_rejects: Vec::new(),
            bytes_read: 0,
        }
    }

    /// The tables collected, each conformed to its unified schema. `with_input_bytes` is false
    /// when the byte counts are meaningless (rows loaded from a lake).
    pub fn finish(self, with_input_bytes: bool) -> anyhow::Result<Vec<TableData>> {
        let mut out = Vec::new();
        for (name, p) in self.tables {
            let Some(schema) = p.schema else { continue };
            let schema: SchemaRef = Arc::new(schema);
            let batches = p
                .batches
                .iter()
                .map(|b| silt_core::schema::conform(b, &schema))
                .collect::<Result<Vec<_>, _>>()?;
            out.push(TableData {
                name,
                schema,
                batches,
                events: p.kept,
                events_seen: p.seen,
                input_bytes_seen: with_input_bytes.then_some(p.bytes),
            });
        }
        Ok(out)
    }
}

impl Emit for BoundedCollect {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        let p = self.tables.entry(table.clone()).or_default();
        let n = batch.num_rows() as u64;
        p.seen += n;
        if p.kept >= self.max_events || n == 0 {
            return Ok(());
        }
        let take = n.min(self.max_events - p.kept);
        let batch = if take < n {
            batch.slice(0, take as usize)
        } else {
            batch
        };
        p.schema = Some(match p.schema.take() {
            None => batch.schema().as_ref().clone(),
            Some(s) if s.fields() == batch.schema().fields() => s,
            Some(s) => silt_core::schema::unify_schemas(&s, &batch.schema()),
        });
        p.kept += take;
        p.batches.push(batch);
        Ok(())
    }

    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.rejects += 1;
        if self.sample_rejects.len() < 5 {
            self.sample_rejects.push(reject);
        }
        Ok(())
    }

    fn progress(&mut self, bytes: u64) {
        self.bytes_read += bytes;
    }

    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        self.tables.entry(table.clone()).or_default().bytes += bytes;
    }
}

/// Loads the tables of a lake (every Parquet and Feather file, in path order, which is time
/// order for silt's layout), at most `max_events` rows per table. Input bytes are unknown.
pub fn load_lake(lake: &Path, max_events: u64) -> anyhow::Result<Vec<TableData>> {
    let mut c = BoundedCollect::new(max_events);
    for name in silt_lake::catalog::tables(lake)? {
        let dir = lake.join(name.to_string());
        for f in silt_lake::catalog::data_files(&dir)? {
            if c.tables.get(&name).is_some_and(|p| p.kept >= c.max_events) {
                break;
            }
            let file = File::open(&f.path)?;
            match f.store {
                StoreKind::Parquet => {
                    let builder =
                        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                            file,
                        )?;
                    // silt keeps its `silt.*` schema metadata as Parquet key-value metadata;
                    // put it back on the Arrow schema (the time column, lookup columns).
                    let mut md = builder.schema().metadata().clone();
                    if let Some(kv) = builder.metadata().file_metadata().key_value_metadata() {
                        for e in kv.iter().filter(|e| e.key.starts_with("silt.")) {
                            if let Some(v) = &e.value {
                                md.insert(e.key.clone(), v.clone());
                            }
                        }
                    }
                    let schema = Arc::new(builder.schema().as_ref().clone().with_metadata(md));
                    let r = builder.with_batch_size(16 * 1024).build()?;
                    for b in r {
                        c.batch(&name, b?.with_schema(schema.clone())?)?;
                    }
                }
                StoreKind::Feather => {
                    let r = arrow::ipc::reader::FileReader::try_new(file, None)?;
                    for b in r {
                        c.batch(&name, b?)?;
                    }
                }
            }
        }
    }
    c.finish(false)
}
