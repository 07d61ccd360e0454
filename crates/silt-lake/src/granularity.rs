//! A table's time partitioning: chosen from the data when the table is first written
//! (`--partition auto`, the default) and recorded in the lake, so that every later import,
//! `silt ddl` (partition projection) and `silt query` agree on it.
//!
//! **Why.** Hour partitions suit a busy sensor (millions of rows an hour), but a small site's
//! archive (a few hundred rows an hour) becomes thousands of files of a few kilobytes each, the
//! classic small-files problem of Athena and Trino: every file costs a request, a footer and
//! statistics, and compresses worse. So the writer looks at the first rows of a new table
//! ([`PROBE_ROWS`] at most) and estimates:
//! - the density: rows per hour between the 1st and 99th percentile of the event times (outliers
//!   such as a zero timestamp do not stretch the span), over at least one hour;
//! - the compressed bytes per row: the sample encoded as Parquet with the configured codec.
//!
//! and picks the finest of hour, day and month whose partition is expected to hold at least a
//! quarter of the row-group target (8 MiB at the default 32 MiB), else no partitioning. A table
//! without a time column, or whose first rows have no times, is not partitioned.
//!
//! **The record.** `<lake>/_silt/tables/<module.type>.json` holds the choice, who made it (`auto`
//! or the user's `--partition`) and the estimate behind it; it is written (atomically) before the
//! table's first file. A lake written before the record existed is judged from its first file's
//! directories ([`crate::layout::partitioning_of_rel`]).
//!
//! The record also keeps the format of the table's files (Parquet or Feather): an import with
//! another `--store` is refused, since a table whose files mix formats is one that Spark, Trino,
//! Athena and DuckDB's Parquet glob see only part of.
//!
//! Touches only `<lake>/_silt/tables/`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use arrow::array::{Array, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, TimeUnit};
use arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};
use silt_core::TableName;

use crate::config::{Partitioning, StoreKind, WriterConfig};
use crate::layout;

/// Directory of the table records, below the lake root.
pub const TABLES_DIR: &str = "_silt/tables";

/// Rows a new table's writer looks at before choosing (also bounded by memory, see
/// [`probe_bytes`]).
pub const PROBE_ROWS: usize = 100_000;

/// Rows of the sample encoded to measure compressed bytes per row.
const SAMPLE_ROWS: usize = 20_000;

/// Hours in a partition of each granularity (a month as 30.44 days).
const HOURS: [(Partitioning, f64); 3] = [
    (Partitioning::Hour, 1.0),
    (Partitioning::Day, 24.0),
    (Partitioning::Month, 730.5),
];

/// Bytes of Arrow memory a new table's writer holds while it decides.
pub fn probe_bytes(cfg: &WriterConfig) -> usize {
    cfg.sort_buffer_bytes.min(cfg.memory_bytes / 4).max(1 << 20)
}

/// What a choice was made from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Rows looked at.
    pub rows: u64,
    /// Rows with an event time.
    pub timed_rows: u64,
    /// Rows per hour of event time (0 when no row has a time).
    pub rows_per_hour: f64,
    /// Compressed bytes per row, measured on a sample.
    pub bytes_per_row: f64,
}

impl Estimate {
    /// Expected compressed bytes of one partition of `p`.
    pub fn partition_bytes(&self, p: Partitioning) -> Option<f64> {
        HOURS
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, h)| self.rows_per_hour * h * self.bytes_per_row)
    }
}

/// A table's recorded partitioning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableRecord {
    pub table: String,
    pub partition: String,
    /// `auto` (chosen from the data) or `user` (`--partition`, or found in the directories of a
    /// lake written before records existed).
    pub chosen_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimate>,
    /// RFC 3339 time of the choice.
    pub at: String,
    /// The format of the table's files (`parquet` or `feather`), which every later import keeps
    /// to; `None` in records written before silt recorded it (then the table's files say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
}

impl TableRecord {
    pub fn partitioning(&self) -> anyhow::Result<Partitioning> {
        self.partition
            .parse()
            .map_err(|e: String| anyhow::anyhow!("table record of {}: {e}", self.table))
    }

    /// The recorded format of the table's files, if the record has one.
    pub fn store_kind(&self) -> anyhow::Result<Option<StoreKind>> {
        self.store
            .as_deref()
            .map(|s| {
                s.parse()
                    .map_err(|e: String| anyhow::anyhow!("table record of {}: {e}", self.table))
            })
            .transpose()
    }

    /// One line for the import summary, e.g. `month (auto: ~350 rows/hour, ~8.1 MB/month)`.
    pub fn describe(&self) -> String {
        let p = &self.partition;
        match (&self.estimate, self.chosen_by.as_str()) {
            (Some(e), "auto") if e.timed_rows == 0 => format!("{p} (auto: no event times)"),
            (Some(e), "auto") => {
                let per = match self.partitioning() {
                    Ok(Partitioning::None) | Err(_) => Partitioning::Month,
                    Ok(q) => q,
                };
                let bytes = e.partition_bytes(per).unwrap_or(0.0);
                format!(
                    "{p} (auto: ~{} rows/hour, ~{} per {})",
                    round_sig(e.rows_per_hour),
                    human_bytes(bytes),
                    per.name()
                )
            }
            (None, "auto") => format!("{p} (auto: no time column)"),
            _ => format!("{p} (--partition)"),
        }
    }
}

/// Path of a table's record.
pub fn record_path(root: &Path, table: &TableName) -> PathBuf {
    root.join(TABLES_DIR).join(format!("{table}.json"))
}

/// The table's record, if the lake has one.
pub fn read_record(root: &Path, table: &TableName) -> anyhow::Result<Option<TableRecord>> {
    let p = record_path(root, table);
    match std::fs::read(&p) {
        Ok(b) => serde_json::from_slice(&b).map(Some).with_context(|| {
            format!(
                "{} is not a silt table record; remove it to let the next import choose again",
                p.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", p.display())),
    }
}

/// Writes the table's record atomically.
pub fn write_record(root: &Path, rec: &TableRecord) -> anyhow::Result<()> {
    let table = TableName::parse(&rec.table)
        .with_context(|| format!("{:?} is not a table name", rec.table))?;
    let mut bytes = serde_json::to_vec_pretty(rec)?;
    bytes.push(b'\n');
    crate::publish::write_atomic(&record_path(root, &table), &bytes)
}

/// The partitioning (and file format) a table of the lake already has: its record, else its
/// first file's directories and name; `None` for a new table.
pub fn current(root: &Path, table: &TableName) -> anyhow::Result<Option<TableRecord>> {
    if let Some(r) = read_record(root, table)? {
        return Ok(Some(r));
    }
    let dir = root.join(table.to_string());
    let Some(first) = layout::data_files(&dir)
        .ok()
        .and_then(|f| f.into_iter().next())
    else {
        return Ok(None);
    };
    Ok(first
        .path
        .strip_prefix(&dir)
        .ok()
        .and_then(layout::partitioning_of_rel)
        .map(|p| TableRecord {
            table: table.to_string(),
            partition: p.name().into(),
            chosen_by: "user".into(),
            estimate: None,
            at: String::new(),
            store: Some(first.store.extension().into()),
        }))
}

/// Estimates density and compressed row size from a new table's first batches (all of one
/// schema or conformable to the first; only the time column and a sample are read).
pub fn estimate(
    batches: &[RecordBatch],
    time_col: Option<&str>,
    cfg: &WriterConfig,
) -> anyhow::Result<Estimate> {
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let mut times: Vec<i64> = Vec::new();
    if let Some(tc) = time_col {
        for b in batches {
            let Some(c) = b.column_by_name(tc) else {
                continue;
            };
            let c = arrow::compute::cast(c, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
            let ts = c
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .context("time column cast")?;
            times.extend(ts.iter().flatten());
        }
    }
    times.sort_unstable();
    let rows_per_hour = if times.is_empty() {
        0.0
    } else {
        let (lo, hi) = (times.len() / 100, times.len() - 1 - times.len() / 100);
        let span_hours = ((times[hi] - times[lo]) as f64 / 3.6e9).max(1.0);
        (hi - lo + 1) as f64 / span_hours
    };
    Ok(Estimate {
        rows: rows as u64,
        timed_rows: times.len() as u64,
        rows_per_hour,
        bytes_per_row: bytes_per_row(batches, cfg)?,
    })
}

/// Compressed bytes per row of up to [`SAMPLE_ROWS`] rows encoded with the configured codec
/// (Parquet; Feather tables use the Arrow memory size, which is what an IPC file holds).
fn bytes_per_row(batches: &[RecordBatch], cfg: &WriterConfig) -> anyhow::Result<f64> {
    let Some(first) = batches.first() else {
        return Ok(0.0);
    };
    let mut sample = Vec::new();
    let mut n = 0;
    for b in batches {
        if n >= SAMPLE_ROWS {
            break;
        }
        let take = b.num_rows().min(SAMPLE_ROWS - n);
        // Batches of a new table may still differ (schema evolution); sample those of the
        // first schema.
        if b.schema() == first.schema() {
            sample.push(b.slice(0, take));
            n += take;
        }
    }
    if n == 0 {
        return Ok(0.0);
    }
    if cfg.store == StoreKind::Feather {
        let mem: usize = sample.iter().map(|b| b.get_array_memory_size()).sum();
        return Ok(mem as f64 / n as f64);
    }
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(crate::store::compression(cfg.codec, cfg.level)?)
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(Vec::new(), first.schema(), Some(props))?;
    for b in &sample {
        w.write(b)?;
    }
    let bytes = w.into_inner()?;
    Ok(bytes.len() as f64 / n as f64)
}

/// The finest granularity whose partitions are expected to hold at least a quarter of
/// `row_group_bytes`; none when even a month falls short or nothing has a time.
pub fn choose(e: &Estimate, row_group_bytes: usize) -> Partitioning {
    if e.timed_rows == 0 {
        return Partitioning::None;
    }
    let goal = row_group_bytes as f64 / 4.0;
    HOURS
        .iter()
        .find(|(p, _)| e.partition_bytes(*p).unwrap_or(0.0) >= goal)
        .map(|(p, _)| *p)
        .unwrap_or(Partitioning::None)
}

fn round_sig(x: f64) -> String {
    if x >= 100.0 {
        format!("{:.0}", x)
    } else if x >= 1.0 {
        format!("{:.1}", x)
    } else {
        format!("{:.3}", x)
    }
}

fn human_bytes(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.0} kB", b / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(rows_per_hour: f64, bytes_per_row: f64) -> Estimate {
        Estimate {
            rows: 1000,
            timed_rows: 1000,
            rows_per_hour,
            bytes_per_row,
        }
    }

    #[test]
    fn density_picks_granularity() {
        let target = 32 << 20;
        // A busy sensor: 1M rows/hour at 30 B = 30 MB an hour.
        assert_eq!(choose(&est(1e6, 30.0), target), Partitioning::Hour);
        // 20k rows/hour: 600 kB an hour, 14 MB a day.
        assert_eq!(choose(&est(2e4, 30.0), target), Partitioning::Day);
        // A small site's archive: 350 rows/hour at 35 B = 9 MB a month.
        assert_eq!(choose(&est(350.0, 35.0), target), Partitioning::Month);
        // Sparser still: one directory.
        assert_eq!(choose(&est(10.0, 35.0), target), Partitioning::None);
        let mut none = est(0.0, 30.0);
        none.timed_rows = 0;
        assert_eq!(choose(&none, target), Partitioning::None);
    }

    #[test]
    fn records_round_trip_and_describe() {
        let d = tempfile::tempdir().unwrap();
        let t = TableName::new("zeek", "conn");
        assert!(read_record(d.path(), &t).unwrap().is_none());
        let rec = TableRecord {
            table: t.to_string(),
            partition: "month".into(),
            chosen_by: "auto".into(),
            estimate: Some(est(350.0, 35.0)),
            at: "2026-11-25T00:00:00Z".into(),
            store: Some("feather".into()),
        };
        write_record(d.path(), &rec).unwrap();
        assert_eq!(rec.store_kind().unwrap(), Some(StoreKind::Feather));
        assert_eq!(read_record(d.path(), &t).unwrap(), Some(rec.clone()));
        assert_eq!(
            rec.describe(),
            "month (auto: ~350 rows/hour, ~8.9 MB per month)"
        );
        std::fs::write(record_path(d.path(), &t), b"{").unwrap();
        let e = read_record(d.path(), &t).unwrap_err().to_string();
        assert!(e.contains("not a silt table record"), "{e}");
    }
}
