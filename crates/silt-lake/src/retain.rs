//! Retention: whole partitions older than a table's window are dropped, judged by the
//! partition's time (its `dt=`, `hour=` or `month=` directory), never by file times, so a
//! re-import of old logs ages out with the data it holds.
//!
//! A partition is dropped when its whole time range ends at or before `now - keep`: a `dt=` day
//! whose last hour is older goes as one directory, otherwise the `hour=` directories that are
//! older go one by one; a `month=` when the month has ended before the cutoff. The null partition
//! (`__HIVE_DEFAULT_PARTITION__`, rows without a time) and unpartitioned tables are never
//! dropped: nothing says how old their rows are (the report says so).
//!
//! Dropping is one atomic rename of the partition directory into `<lake>/_silt/trash/`, so every
//! reader (silt, a DuckDB or Spark glob) sees the partition whole or not at all; the trash is then
//! removed, and `silt vacuum` removes what a crash left there. A partition that an import or a
//! `silt serve` flush is writing into (a journal names one of its files, or it holds a temporary
//! file modified in the last hour) is left for the next run.
//!
//! Touches the lake's partition directories, `_silt/trash/` and `_silt/maintenance.lock`.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use silt_core::TableName;

use crate::imports::ImportLog;
use crate::layout::{self, NULL_PARTITION};
use crate::publish;
use crate::replace::MaintenanceLock;

/// Directory partitions are moved into before they are removed, below the lake root.
pub const TRASH_DIR: &str = "_silt/trash";

/// A temporary file modified this recently marks its partition as being written.
const BUSY: Duration = Duration::from_secs(3600);

/// What to drop.
#[derive(Debug, Clone, Default)]
pub struct RetainOptions {
    /// The window for every table not in `per_table`; `None` = only the tables in `per_table`.
    pub keep: Option<Duration>,
    /// Windows of their own (`--table suricata.flow=7d`).
    pub per_table: BTreeMap<TableName, Duration>,
    /// Report only.
    pub dry_run: bool,
}

/// One partition dropped (or to drop, in a dry run).
#[derive(Debug, Clone)]
pub struct Dropped {
    pub table: TableName,
    /// Relative to the table directory: `dt=2024-01-01`, `dt=2024-01-02/hour=05`, `month=2023-11`.
    pub partition: String,
    pub files: usize,
    pub bytes: u64,
}

/// What a retention run did.
#[derive(Debug, Default)]
pub struct RetainReport {
    pub dropped: Vec<Dropped>,
    /// Partitions past the window left because they are being written.
    pub busy: Vec<(TableName, String)>,
    /// Tables whose rows have no partition time, with the reason.
    pub not_partitioned: Vec<TableName>,
}

const HOUR_US: i64 = 3_600_000_000;
const DAY_US: i64 = 24 * HOUR_US;

fn micros(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}

/// A partition directory below a table that may be dropped: where it is and when it ends.
struct Candidate {
    rel: PathBuf,
    end_us: i64,
}

/// The time partitions of a table directory, each with the end of its range (exclusive); hour
/// directories of a day appear both as the day and as hours, the caller picks.
fn partitions(table_dir: &Path) -> anyhow::Result<(Vec<Candidate>, bool)> {
    let mut out = Vec::new();
    let mut unpartitioned = false;
    let rd = match fs::read_dir(table_dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((out, false)),
        Err(e) => return Err(e).with_context(|| format!("cannot list {}", table_dir.display())),
    };
    for e in rd {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if layout::is_hidden(&name) {
            continue;
        }
        if !e.file_type()?.is_dir() {
            if crate::config::StoreKind::from_path(&e.path()).is_some() {
                unpartitioned = true;
            }
            continue;
        }
        if let Some(d) = name.strip_prefix("dt=") {
            if d == NULL_PARTITION {
                continue;
            }
            let Some(day) = layout::parse_date(d) else {
                continue;
            };
            let day_start = day as i64 * DAY_US;
            out.push(Candidate {
                rel: PathBuf::from(&name),
                end_us: day_start + DAY_US,
            });
            for h in fs::read_dir(e.path())? {
                let h = h?;
                let hn = h.file_name().to_string_lossy().into_owned();
                let Some(hour) = hn.strip_prefix("hour=").and_then(|x| x.parse::<i64>().ok())
                else {
                    continue;
                };
                if (0..24).contains(&hour) && h.file_type()?.is_dir() {
                    out.push(Candidate {
                        rel: PathBuf::from(&name).join(&hn),
                        end_us: day_start + (hour + 1) * HOUR_US,
                    });
                }
            }
        } else if let Some(m) = name.strip_prefix("month=") {
            if let Some((y, mo)) = layout::parse_month(m) {
                let (_, next) = layout::month_days(y, mo);
                out.push(Candidate {
                    rel: PathBuf::from(&name),
                    end_us: next * DAY_US,
                });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok((out, unpartitioned))
}

/// Files (count, bytes) below a directory, and whether a temporary file in it is fresh.
fn contents(dir: &Path, now: SystemTime) -> (usize, u64, bool) {
    let (mut n, mut bytes, mut busy) = (0, 0, false);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(md) = e.metadata() else { continue };
            if md.is_dir() {
                stack.push(e.path());
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(layout::IN_PROGRESS_SUFFIX) {
                let age = md
                    .modified()
                    .ok()
                    .and_then(|m| now.duration_since(m).ok())
                    .unwrap_or_default();
                busy |= age < BUSY;
            } else if !layout::is_hidden(&name) {
                n += 1;
                bytes += md.len();
            }
        }
    }
    (n, bytes, busy)
}

/// Drops what is past each table's window (see the module documentation).
pub fn retain(root: &Path, opts: &RetainOptions, now: SystemTime) -> anyhow::Result<RetainReport> {
    retain_with(root, opts, now, &mut |_| {})
}

/// [`retain`], calling `before_drop` with each partition directory just before it disappears
/// (a server takes its files out of its own index there).
pub fn retain_with(
    root: &Path,
    opts: &RetainOptions,
    now: SystemTime,
    before_drop: &mut dyn FnMut(&Path),
) -> anyhow::Result<RetainReport> {
    anyhow::ensure!(
        opts.keep.is_some() || !opts.per_table.is_empty(),
        "nothing to do: give --keep DURATION (e.g. 30d) or --table NAME=DURATION"
    );
    let lock = MaintenanceLock::acquire(root)?;
    let mut report = RetainReport::default();
    let tables = layout::tables(root)?;
    for t in opts.per_table.keys() {
        anyhow::ensure!(
            tables.contains(t),
            "table {t} is not in the lake {} (`silt tables --lake {}` lists them)",
            root.display(),
            root.display()
        );
    }
    let now_us = micros(now);
    for table in tables {
        let Some(keep) = opts.per_table.get(&table).copied().or(opts.keep) else {
            continue;
        };
        let cutoff = now_us - keep.as_micros() as i64;
        let dir = root.join(table.to_string());
        let (cands, unpartitioned) = partitions(&dir)?;
        if unpartitioned && cands.is_empty() {
            report.not_partitioned.push(table.clone());
            continue;
        }
        let in_flight: HashSet<String> = ImportLog::open(root)?.in_flight()?;
        let prefix = format!("{table}/");
        // A whole day that is past goes as one; its hours are then not looked at.
        let mut dropped_days: Vec<PathBuf> = Vec::new();
        for c in cands {
            if c.end_us > cutoff || dropped_days.iter().any(|d| c.rel.starts_with(d)) {
                continue;
            }
            let rel = c.rel.to_string_lossy().into_owned();
            let abs = dir.join(&c.rel);
            let (files, bytes, fresh_temp) = contents(&abs, now);
            let journaled = in_flight.iter().any(|f| {
                f.strip_prefix(&prefix)
                    .is_some_and(|r| r.starts_with(&format!("{rel}/")))
            });
            if fresh_temp || journaled {
                report.busy.push((table.clone(), rel));
                continue;
            }
            if !opts.dry_run {
                before_drop(&abs);
                drop_dir(&lock, &abs)?;
            }
            if c.rel.components().count() == 1 {
                dropped_days.push(c.rel.clone());
            }
            report.dropped.push(Dropped {
                table: table.clone(),
                partition: rel,
                files,
                bytes,
            });
        }
    }
    Ok(report)
}

/// Moves a directory into the trash (atomic: readers see it whole or not at all), then removes
/// it.
fn drop_dir(lock: &MaintenanceLock, dir: &Path) -> anyhow::Result<()> {
    let trash = lock.root().join(TRASH_DIR);
    fs::create_dir_all(&trash).with_context(|| format!("cannot create {}", trash.display()))?;
    let to = trash.join(uuid::Uuid::new_v4().simple().to_string());
    fs::rename(dir, &to)
        .with_context(|| format!("cannot move {} to {}", dir.display(), to.display()))?;
    publish::sync_dir(dir.parent().unwrap_or(Path::new(".")));
    publish::sync_dir(&trash);
    crate::replace::failpoint("retain-moved");
    fs::remove_dir_all(&to).with_context(|| format!("cannot remove {}", to.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, b"x").unwrap();
    }

    fn at(date: &str, hour: i64) -> SystemTime {
        let d = layout::parse_date(date).unwrap() as u64;
        SystemTime::UNIX_EPOCH + Duration::from_secs(d * 86400 + hour as u64 * 3600)
    }

    #[test]
    fn drops_whole_days_and_past_hours_by_partition_time() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let t = root.join("zeek.conn");
        for p in [
            "dt=2024-01-01/hour=23/a.parquet",
            "dt=2024-01-02/hour=00/b.parquet",
            "dt=2024-01-02/hour=05/c.parquet",
            "dt=2024-01-02/hour=06/d.parquet",
            "dt=2024-01-03/hour=00/e.parquet",
            "dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__/n.parquet",
        ] {
            touch(&t.join(p));
        }
        let m = root.join("app.logs");
        touch(&m.join("month=2023-12/a.parquet"));
        touch(&m.join("month=2024-01/b.parquet"));
        let u = root.join("flat.table");
        touch(&u.join("x.parquet"));
        // A fresh temporary file keeps its partition.
        touch(&t.join("dt=2024-01-02/hour=00/.b2.parquet.inprogress"));

        // Cutoff 2024-01-02 06:00: hours ending at or before it go.
        let opts = RetainOptions {
            keep: Some(Duration::from_secs(2 * 86400)),
            ..Default::default()
        };
        let now = at("2024-01-04", 6);
        let rep = retain(root, &opts, now).unwrap();
        let got: Vec<String> = rep
            .dropped
            .iter()
            .map(|d| format!("{}/{}", d.table, d.partition))
            .collect();
        assert_eq!(
            got,
            [
                "app.logs/month=2023-12",
                "zeek.conn/dt=2024-01-01",
                "zeek.conn/dt=2024-01-02/hour=05"
            ]
        );
        assert_eq!(rep.busy.len(), 1, "{:?}", rep.busy);
        assert_eq!(
            rep.not_partitioned,
            [TableName::parse("flat.table").unwrap()]
        );
        assert!(!t.join("dt=2024-01-01").exists());
        assert!(t.join("dt=2024-01-02/hour=00/b.parquet").exists());
        assert!(t.join("dt=2024-01-02/hour=06/d.parquet").exists());
        assert!(t.join("dt=__HIVE_DEFAULT_PARTITION__").exists());
        assert!(m.join("month=2024-01/b.parquet").exists());
        assert_eq!(fs::read_dir(root.join(TRASH_DIR)).unwrap().count(), 0);

        // A per-table window overrides; tables without one are left when there is no --keep.
        let mut per_table = BTreeMap::new();
        per_table.insert(TableName::parse("app.logs").unwrap(), Duration::ZERO);
        let rep = retain(
            root,
            &RetainOptions {
                keep: None,
                per_table,
                dry_run: true,
            },
            at("2024-03-01", 0),
        )
        .unwrap();
        assert_eq!(rep.dropped.len(), 1);
        assert_eq!(rep.dropped[0].partition, "month=2024-01");
        assert!(
            m.join("month=2024-01/b.parquet").exists(),
            "dry run changes nothing"
        );
    }
}
