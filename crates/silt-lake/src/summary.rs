//! What an import did, per table: events, rejects, bytes in and out, ratio, files, seconds.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use silt_core::{Reject, TableName};

use crate::publish::PublishedFile;

/// Per-table figures.
#[derive(Debug, Default, Clone)]
pub struct TableSummary {
    /// Rows received from readers.
    pub events: u64,
    /// Rows in published files (equals `events` after [`crate::LakeWriter::finish`]).
    pub rows_written: u64,
    pub rejects: u64,
    /// Input bytes (decompressed) of the lines that became this table's rows.
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub files: u64,
    /// Wall-clock seconds from the table's first batch to its last file.
    pub seconds: f64,
    /// Why writing the table failed (the first error); its other rows were still written and
    /// the other tables are not affected. `events - rows_written` rows are not in the lake.
    pub error: Option<String>,
    /// How many times writing the table failed.
    pub errors: u64,
    /// The table's partitioning (`hour`, `day`, `month`, `none`).
    pub partitioning: Option<String>,
    /// When this import chose the partitioning from the data: why
    /// (`month (auto: ~350 rows/hour, ~8.9 MB per month)`, see
    /// [`crate::granularity::TableRecord::describe`]).
    pub partition_choice: Option<String>,
    /// Set when one open file of the table holds more than half of `--memory` by itself (the
    /// codecs' state at a high zstd level): what that does and what to change.
    pub memory_note: Option<String>,
}

impl TableSummary {
    /// Input bytes per output byte.
    pub fn ratio(&self) -> Option<f64> {
        (self.bytes_out > 0 && self.bytes_in > 0)
            .then(|| self.bytes_in as f64 / self.bytes_out as f64)
    }
}

/// The whole import.
#[derive(Debug, Default)]
pub struct ImportSummary {
    pub tables: BTreeMap<TableName, TableSummary>,
    /// Rejects that belong to no known table, by source.
    pub unattributed_rejects: BTreeMap<String, u64>,
    /// The first rejects, for showing to the user (at most [`ImportSummary::SAMPLE`]).
    pub sample_rejects: Vec<Reject>,
    /// The rejects files published (one per run, or one per commit that had rejects).
    pub rejects_files: Vec<PathBuf>,
    /// Total input bytes read (decompressed).
    pub bytes_in: u64,
    pub files: Vec<PublishedFile>,
    pub seconds: f64,
}

impl ImportSummary {
    pub const SAMPLE: usize = 10;

    pub fn table(&mut self, t: &TableName) -> &mut TableSummary {
        self.tables.entry(t.clone()).or_default()
    }

    pub fn record_reject(&mut self, r: &Reject) {
        match &r.table {
            Some(t) => self.table(t).rejects += 1,
            None => {
                *self
                    .unattributed_rejects
                    .entry(r.source.clone())
                    .or_default() += 1
            }
        }
        if self.sample_rejects.len() < Self::SAMPLE {
            self.sample_rejects.push(r.clone());
        }
    }

    pub fn total_events(&self) -> u64 {
        self.tables.values().map(|t| t.events).sum()
    }

    pub fn total_rejects(&self) -> u64 {
        self.tables.values().map(|t| t.rejects).sum::<u64>()
            + self.unattributed_rejects.values().sum::<u64>()
    }

    /// The tables whose writing failed, with the first error.
    pub fn failed_tables(&self) -> impl Iterator<Item = (&TableName, &TableSummary)> {
        self.tables.iter().filter(|(_, t)| t.error.is_some())
    }

    pub fn total_bytes_out(&self) -> u64 {
        self.tables.values().map(|t| t.bytes_out).sum()
    }
}

/// Human-readable byte count (`12.3 MB`, decimal units).
pub fn human_bytes(n: u64) -> String {
    let n = n as f64;
    if n < 1e3 {
        format!("{n} B")
    } else if n < 1e6 {
        format!("{:.1} kB", n / 1e3)
    } else if n < 1e9 {
        format!("{:.1} MB", n / 1e6)
    } else {
        format!("{:.2} GB", n / 1e9)
    }
}

impl fmt::Display for ImportSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:<28} {:>10} {:>8} {:>10} {:>10} {:>7} {:>6} {:>9} {:>8}",
            "table",
            "events",
            "rejects",
            "bytes in",
            "bytes out",
            "ratio",
            "files",
            "partition",
            "seconds"
        )?;
        for (t, s) in &self.tables {
            writeln!(
                f,
                "{:<28} {:>10} {:>8} {:>10} {:>10} {:>7} {:>6} {:>9} {:>8.2}",
                t.to_string(),
                s.events,
                s.rejects,
                human_bytes(s.bytes_in),
                human_bytes(s.bytes_out),
                s.ratio()
                    .map(|r| format!("{r:.1}x"))
                    .unwrap_or_else(|| "-".into()),
                s.files,
                s.partitioning.as_deref().unwrap_or("-"),
                s.seconds
            )?;
        }
        for (t, s) in &self.tables {
            if let Some(why) = &s.partition_choice {
                writeln!(
                    f,
                    "new table {t}: partitioned by {why}; recorded in the lake for later imports"
                )?;
            }
        }
        for (t, s) in &self.tables {
            if let Some(note) = &s.memory_note {
                writeln!(f, "note: table {t}: {note}")?;
            }
        }
        for (t, s) in self.failed_tables() {
            writeln!(
                f,
                "error: table {t}: {} of {} events not written: {}",
                s.events.saturating_sub(s.rows_written),
                s.events,
                s.error.as_deref().unwrap_or_default()
            )?;
        }
        for (src, n) in &self.unattributed_rejects {
            writeln!(
                f,
                "{:<28} {:>10} {:>8}   (no table: {src})",
                "(rejected)", 0, n
            )?;
        }
        let out = self.total_bytes_out();
        write!(
            f,
            "total: {} events, {} rejects, {} in, {} out{}, {:.2} s",
            self.total_events(),
            self.total_rejects(),
            human_bytes(self.bytes_in),
            human_bytes(out),
            if out > 0 && self.bytes_in > 0 {
                format!(" (ratio {:.1}x)", self.bytes_in as f64 / out as f64)
            } else {
                String::new()
            },
            self.seconds
        )
    }
}
