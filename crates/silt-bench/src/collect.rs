//! Holding each table's rows in memory as Arrow, bounded: [`BoundedCollect`] is the
//! [`Emit`] that readers write into during `silt bench`, and [`load_lake`] fills one from the
//! files of an existing lake (`silt bench --lake`).
//!
//! The study held each schema in memory before writing it; we do the same, but keep at most
//! `max_events` rows per table (the first ones in input order) so memory stays bounded. The
//! input bytes of a capped table are scaled to the rows kept (`bytes_seen × kept / seen`);
//! the `capped` column of `results.csv` says when that happened. Rejected lines are counted
//! and, when asked ([`BoundedCollect::keep_rejects`]), kept in a rejects file under the report
//! directory, as `silt import` keeps them under the lake. Touches nothing else on disk except
//! the lake files [`load_lake_into`] reads.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use silt_core::{Emit, Reject, TableName};
use silt_lake::rejects::RejectWriter;
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
    /// Where every reject goes, when [`keep_rejects`](Self::keep_rejects) was called.
    rejects_out: Option<RejectWriter>,
}

/// What [`BoundedCollect::finish`] returns.
pub struct Collected {
    pub tables: Vec<TableData>,
    /// The rejects file, when rejects were kept and there were any.
    pub rejects_file: Option<PathBuf>,
}

impl BoundedCollect {
    pub fn new(max_events: u64) -> Self {
        Self {
            max_events: max_events.max(1),
            tables: BTreeMap::new(),
            rejects: 0,
            sample_rejects: Vec::new(),
            bytes_read: 0,
            rejects_out: None,
        }
    }

    /// Keeps every reject in an NDJSON file under `root` (`<root>/_rejects/dt=…/<unique>.ndjson`,
    /// the format of [`silt_lake::rejects`]), published when [`finish`](Self::finish) is called.
    pub fn keep_rejects(mut self, root: &Path) -> Self {
        self.rejects_out = Some(RejectWriter::new(root));
        self
    }

    /// The tables collected, each conformed to its unified schema, and the rejects file.
    /// `with_input_bytes` is false when the byte counts are meaningless (rows loaded from a
    /// lake).
    pub fn finish(self, with_input_bytes: bool) -> anyhow::Result<Collected> {
        let rejects_file = match self.rejects_out {
            Some(mut w) => w.finish()?,
            None => None,
        };
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
        Ok(Collected {
            tables: out,
            rejects_file,
        })
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
        if let Some(w) = &mut self.rejects_out {
            w.write(&reject)?;
        }
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
/// A file that cannot be read is an error here; [`load_lake_into`] counts it as a reject.
pub fn load_lake(lake: &Path, max_events: u64) -> anyhow::Result<Vec<TableData>> {
    let mut c = BoundedCollect::new(max_events);
    load_lake_into(lake, &mut c)?;
    if let Some(r) = c.sample_rejects.first() {
        anyhow::bail!("{}: {}", r.source, r.reason);
    }
    Ok(c.finish(false)?.tables)
}

/// Reads the tables of a lake into `c` (see [`load_lake`]). A data file that cannot be read
/// (not Parquet or Feather, truncated, corrupt) is reported to `c` as a reject with line 0 and
/// the reason, and the run goes on with the other files; rows already read from that file
/// before the error stay.
pub fn load_lake_into(lake: &Path, c: &mut BoundedCollect) -> anyhow::Result<()> {
    for name in silt_lake::catalog::tables(lake)? {
        let dir = lake.join(name.to_string());
        for f in silt_lake::catalog::data_files(&dir)? {
            if c.tables.get(&name).is_some_and(|p| p.kept >= c.max_events) {
                break;
            }
            if let Err(e) = load_file(&f.path, f.store, &name, c) {
                c.reject(Reject {
                    source: f.path.display().to_string(),
                    line: 0,
                    reason: format!(
                        "cannot read this {} file ({e:#}); it was not written whole by silt \
                         or was damaged since: move it out of the lake",
                        f.store.extension()
                    ),
                    raw: Vec::new(),
                    table: Some(name.clone()),
                })?;
            }
        }
    }
    Ok(())
}

/// Reads one lake file's rows into `c`.
fn load_file(
    path: &Path,
    store: StoreKind,
    name: &TableName,
    c: &mut BoundedCollect,
) -> anyhow::Result<()> {
    let file = File::open(path)?;
    match store {
        StoreKind::Parquet => {
            let builder =
                parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)?;
            // silt keeps its `silt.*` schema metadata as Parquet key-value metadata; put it
            // back on the Arrow schema (the time column, lookup columns).
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
                c.batch(name, b?.with_schema(schema.clone())?)?;
            }
        }
        StoreKind::Feather => {
            let r = silt_lake::ipc::open(file)?;
            for b in r {
                c.batch(name, b?)?;
            }
        }
    }
    Ok(())
}
