//! Scan statistics for `silt query --stats`: how much of the lake a query touched.
//!
//! Two sources are combined after a query ran:
//! - the [`ScanLog`] each table scan writes while the plan is built (what the table holds and
//!   what silt's own time/partition pruning selected);
//! - the executed physical plan's metrics (DataFusion's Parquet source counts row groups pruned
//!   by statistics and by bloom filters, rows pruned by the page index, and the bytes it read,
//!   per file).
//!
//! Definitions (summed over every scan of the query; a table scanned twice counts twice):
//! - files total / bytes total / row groups total: all data files of the scanned tables;
//! - files selected: files left after time and `dt`/`hour` pruning;
//! - files scanned: Parquet files of which at least one row group was read, plus the selected
//!   Feather files (Feather has no statistics to skip with);
//! - bytes scanned: bytes DataFusion fetched from Parquet files (footers, indexes, pages), plus the
//!   size of every selected Feather file; like Athena's `data_scanned_in_bytes`;
//! - row groups pruned by statistics / bloom filter: from DataFusion's metrics; row groups
//!   scanned: those that passed both;
//! - footers unread: files of an object-store lake pruned by time or partition before their
//!   footers were read (`crate::lake`: deferred footers), whose row groups are therefore not
//!   counted in the row-group totals.
//!
//! Touches nothing but plans and its own counters.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::ExecutionPlan;

use crate::lake::{DataFile, FileFormat, TableIndex};

/// What one table scan selected; written by [`crate::provider::SiltTable`] while planning.
#[derive(Debug, Clone, Default)]
pub struct ScanNote {
    pub table: String,
    pub files_total: u64,
    pub bytes_total: u64,
    pub row_groups_total: u64,
    pub files_selected: u64,
    pub row_groups_selected: u64,
    pub feather_files_selected: u64,
    pub feather_bytes_selected: u64,
    /// Files pruned before their footers were ever read (an object-store lake opened for one
    /// query: `crate::lake`); their row groups are not in `row_groups_total`.
    pub footers_unread: u64,
}

impl ScanNote {
    pub fn new(index: &TableIndex, selected: &[&DataFile]) -> Self {
        let feather: Vec<_> = selected
            .iter()
            .filter(|f| f.format == FileFormat::Feather)
            .collect();
        Self {
            table: index.name.to_string(),
            files_total: index.files.len() as u64,
            bytes_total: index.total_bytes(),
            row_groups_total: index.total_row_groups() as u64,
            files_selected: selected.len() as u64,
            row_groups_selected: selected
                .iter()
                .filter(|f| f.format == FileFormat::Parquet)
                .map(|f| f.row_groups as u64)
                .sum(),
            feather_files_selected: feather.len() as u64,
            feather_bytes_selected: feather.iter().map(|f| f.size).sum(),
            footers_unread: 0,
        }
    }
}

/// The notes of one query's scans; a session config extension set per query.
#[derive(Debug, Default)]
pub struct ScanLog {
    notes: Mutex<Vec<ScanNote>>,
}

impl ScanLog {
    pub fn push(&self, note: ScanNote) {
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(note);
    }

    pub fn notes(&self) -> Vec<ScanNote> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// How much of the lake a query read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanStats {
    /// Tables scanned, in order of first scan.
    pub tables: Vec<String>,
    pub files_total: u64,
    pub files_selected: u64,
    pub files_scanned: u64,
    pub row_groups_total: u64,
    pub row_groups_selected: u64,
    pub row_groups_pruned_statistics: u64,
    pub row_groups_pruned_bloom_filter: u64,
    pub row_groups_scanned: u64,
    /// Rows the Parquet page index let the reader skip.
    pub page_index_rows_pruned: u64,
    pub bytes_total: u64,
    pub bytes_scanned: u64,
    /// Files pruned before their footers were read (see [`ScanNote::footers_unread`]).
    pub footers_unread: u64,
}

impl ScanStats {
    /// Combines the notes of a query's scans with the metrics of its executed plan.
    pub fn collect(notes: &[ScanNote], plan: &Arc<dyn ExecutionPlan>) -> Self {
        let mut s = ScanStats::default();
        for n in notes {
            if !s.tables.contains(&n.table) {
                s.tables.push(n.table.clone());
            }
            s.files_total += n.files_total;
            s.bytes_total += n.bytes_total;
            s.row_groups_total += n.row_groups_total;
            s.files_selected += n.files_selected;
            s.row_groups_selected += n.row_groups_selected;
            s.files_scanned += n.feather_files_selected;
            s.bytes_scanned += n.feather_bytes_selected;
            s.footers_unread += n.footers_unread;
        }
        let mut read_files = BTreeSet::new();
        visit(plan.as_ref(), &mut s, &mut read_files);
        s.files_scanned += read_files.len() as u64;
        s
    }
}

fn visit(plan: &dyn ExecutionPlan, s: &mut ScanStats, read_files: &mut BTreeSet<String>) {
    if let Some(m) = plan.metrics() {
        for metric in m.iter() {
            match metric.value() {
                MetricValue::Count { name, count } if name == "bytes_scanned" => {
                    s.bytes_scanned += count.value() as u64
                }
                MetricValue::PruningMetrics {
                    name,
                    pruning_metrics: p,
                } => match name.as_ref() {
                    "row_groups_pruned_statistics" => {
                        s.row_groups_pruned_statistics += p.pruned() as u64
                    }
                    "row_groups_pruned_bloom_filter" => {
                        s.row_groups_pruned_bloom_filter += p.pruned() as u64;
                        s.row_groups_scanned += p.matched() as u64;
                        if p.matched() > 0 {
                            if let Some(l) = metric.labels().iter().find(|l| l.name() == "filename")
                            {
                                read_files.insert(l.value().to_string());
                            }
                        }
                    }
                    "page_index_rows_pruned" => s.page_index_rows_pruned += p.pruned() as u64,
                    _ => {}
                },
                _ => {}
            }
        }
    }
    for c in plan.children() {
        visit(c.as_ref(), s, read_files);
    }
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".into()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

impl fmt::Display for ScanStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tables = if self.tables.is_empty() {
            "(none)".to_string()
        } else {
            self.tables.join(", ")
        };
        writeln!(f, "tables:      {tables}")?;
        writeln!(
            f,
            "files:       {} of {} scanned ({} pruned unopened: time, partition or file bounds; {} opened but not read: statistics, bloom filters or LIMIT)",
            self.files_scanned,
            self.files_total,
            self.files_total - self.files_selected.min(self.files_total),
            self.files_selected.saturating_sub(self.files_scanned),
        )?;
        if self.row_groups_total > 0 {
            writeln!(
            f,
            "row groups:  {} of {} scanned ({} in pruned files, {} pruned by statistics, {} by bloom filter)",
            self.row_groups_scanned,
            self.row_groups_total,
            self.row_groups_total.saturating_sub(self.row_groups_selected),
            self.row_groups_pruned_statistics,
            self.row_groups_pruned_bloom_filter,
        )?;
        }
        if self.footers_unread > 0 {
            writeln!(
                f,
                "footers:     {} of the pruned files never read (their row groups are not counted above)",
                self.footers_unread
            )?;
        }
        if self.page_index_rows_pruned > 0 {
            writeln!(
                f,
                "page index:  {} rows skipped",
                self.page_index_rows_pruned
            )?;
        }
        write!(
            f,
            "bytes:       {} of {} scanned ({})",
            self.bytes_scanned,
            self.bytes_total,
            pct(self.bytes_scanned, self.bytes_total)
        )
    }
}
