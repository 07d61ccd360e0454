//! The seam between a reader and whatever consumes its output.
//!
//! A reader is a function of the shape
//! `fn read(input: &mut dyn BufRead, source: &SourceInfo, opts: &ReadOptions, out: &mut dyn Emit) -> anyhow::Result<()>`.
//! It turns bytes into [`RecordBatch`]es for one or more tables and hands every line or record
//! it cannot use to [`Emit::reject`] with the reason, so nothing is ever silently dropped.
//! A reader returns `Err` only when the input itself cannot be read any further (an I/O error,
//! a corrupt gzip stream); whatever it emitted before stays emitted.

use std::collections::BTreeMap;

use arrow::record_batch::RecordBatch;

use crate::TableName;

/// Where the bytes come from, for messages and for readers that take hints from a file name.
#[derive(Debug, Clone)]
pub struct SourceInfo {
    /// What to show the user: a path, or `-` for standard input.
    pub display: String,
    /// The file name without directories and compression suffix (`conn.log` for
    /// `/x/conn.log.gz`); Zeek JSON uses it to name the log when records lack `_path`.
    pub file_name: Option<String>,
}

impl SourceInfo {
    /// Describes a file path, stripping `.gz` from the file name hint.
    pub fn from_path(path: &std::path::Path) -> Self {
        let file_name = path
            .file_name()
            .map(|f| f.to_string_lossy().trim_end_matches(".gz").to_string());
        Self {
            display: path.display().to_string(),
            file_name,
        }
    }

    /// Standard input.
    pub fn stdin() -> Self {
        Self {
            display: "-".into(),
            file_name: None,
        }
    }
}

/// Options every reader honours.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Rows per emitted batch (a reader may emit fewer at the end of input or on a schema change).
    pub batch_rows: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            batch_rows: 16 * 1024,
        }
    }
}

/// One line or record a reader could not use.
#[derive(Debug, Clone, PartialEq)]
pub struct Reject {
    /// [`SourceInfo::display`] of the input.
    pub source: String,
    /// 1-based line number (or record number for binary formats).
    pub line: u64,
    /// What was wrong, for a person: `invalid JSON at column 17: EOF while parsing a string`.
    pub reason: String,
    /// The raw bytes of the line, without its line terminator.
    pub raw: Vec<u8>,
    /// The table the record was meant for, when the reader knows it (`zeek.conn`).
    pub table: Option<TableName>,
}

/// The consumer of a reader's output.
pub trait Emit {
    /// Rows for `table`. Successive batches for one table may have different schemas (a new Zeek
    /// header block, a new EVE field); the consumer unifies them.
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()>;
    /// A line or record that could not be used.
    fn reject(&mut self, reject: Reject) -> anyhow::Result<()>;
    /// The reader has consumed `bytes` more bytes of (decompressed) input; drives progress bars.
    fn progress(&mut self, _bytes: u64) {}
    /// `bytes` of (decompressed) input lines became rows of `table` (the rows emitted, or about
    /// to be emitted, in batches for it). Gives the per-table "bytes in" and compression ratio;
    /// header and rejected lines count for no table. Readers call it once per batch.
    fn table_bytes(&mut self, _table: &TableName, _bytes: u64) {}
    /// A line for the run's summary that is neither rows nor a reject: what a decoder counted
    /// along the way (flow-export sequence gaps, data held for a template that never came).
    /// Decoders send them when the stream ends.
    fn note(&mut self, _line: String) {}
    /// The stream gave something other streams of the run use, though maybe no rows: a capture
    /// of NetFlow/IPFIX templates for the data captures after it. An input that gave no rows
    /// but this is not "nothing imported".
    fn useful(&mut self) {}
}

/// An [`Emit`] that keeps everything in memory; for tests and small tools.
#[derive(Debug, Default)]
pub struct CollectEmit {
    pub batches: BTreeMap<TableName, Vec<RecordBatch>>,
    pub rejects: Vec<Reject>,
    /// Sum of [`Emit::progress`] calls.
    pub bytes: u64,
    /// [`Emit::table_bytes`] per table.
    pub table_bytes: BTreeMap<TableName, u64>,
}

impl CollectEmit {
    /// Total rows emitted for a table.
    pub fn rows(&self, table: &str) -> usize {
        self.batches
            .iter()
            .filter(|(t, _)| t.to_string() == table)
            .flat_map(|(_, b)| b.iter())
            .map(RecordBatch::num_rows)
            .sum()
    }

    /// Total rows emitted for all tables.
    pub fn total_rows(&self) -> usize {
        self.batches
            .values()
            .flatten()
            .map(RecordBatch::num_rows)
            .sum()
    }
}

impl Emit for CollectEmit {
    fn batch(&mut self, table: &TableName, batch: RecordBatch) -> anyhow::Result<()> {
        self.batches.entry(table.clone()).or_default().push(batch);
        Ok(())
    }

    fn reject(&mut self, reject: Reject) -> anyhow::Result<()> {
        self.rejects.push(reject);
        Ok(())
    }

    fn progress(&mut self, bytes: u64) {
        self.bytes += bytes;
    }

    fn table_bytes(&mut self, table: &TableName, bytes: u64) {
        *self.table_bytes.entry(table.clone()).or_default() += bytes;
    }
}
