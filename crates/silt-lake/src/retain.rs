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
//! A table left without any file keeps its schema ([`crate::emptied`]), so it stays queryable
//! (zero rows) rather than unknown.
//!
//! Touches the lake's partition directories, `_silt/trash/`, `_silt/maintenance.lock` and, for a
//! table it empties, `_silt/tables/<table>.schema.arrow`.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use silt_core::TableName;

use crate::imports::ImportLog;
use crate::layout;
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
    /// The observer stopped the run ([`RetainObserver::cancelled`]) before it had looked at
    /// every partition; the next run drops the rest.
    pub stopped: bool,
}

/// What a caller sees of a retention run while it goes (a server keeps its index true and stops
/// the run at shutdown).
pub trait RetainObserver {
    /// A partition (its directory, or its path below an object-store lake's root) is about to
    /// disappear: a server takes its files out of its own index here.
    fn before_drop(&mut self, _partition: &Path) {}
    /// Asked before each partition is dropped: `true` stops the run there. What was dropped
    /// stays dropped; each drop is whole (one rename, or a drop record that recovery finishes).
    fn cancelled(&self) -> bool {
        false
    }
}

/// Nothing to tell, never stopped (`silt retain`).
impl RetainObserver for () {}

const HOUR_US: i64 = 3_600_000_000;
const DAY_US: i64 = 24 * HOUR_US;

fn micros(t: SystemTime) -> i64 {
    match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}

/// A partition directory below a table that may be dropped: where it is and when it ends.
pub(crate) struct Candidate {
    /// Relative to the table, `/`-separated (`dt=2024-01-02/hour=05`).
    pub rel: String,
    pub end_us: i64,
}

/// The end (exclusive, microseconds since the epoch) of the time partition `rel` below a table:
/// `dt=D`, `dt=D/hour=H` or `month=M`; `None` for the null partition and anything else.
pub(crate) fn partition_end(rel: &str) -> Option<i64> {
    let mut parts = rel.split('/');
    let first = parts.next()?;
    let second = parts.next();
    if parts.next().is_some() {
        return None;
    }
    if let Some(d) = first.strip_prefix("dt=") {
        let day_start = layout::parse_date(d)? as i64 * DAY_US;
        return match second {
            None => Some(day_start + DAY_US),
            Some(h) => {
                let hour = h.strip_prefix("hour=")?.parse::<i64>().ok()?;
                (0..24)
                    .contains(&hour)
                    .then_some(day_start + (hour + 1) * HOUR_US)
            }
        };
    }
    let m = first.strip_prefix("month=")?;
    if second.is_some() {
        return None;
    }
    let (y, mo) = layout::parse_month(m)?;
    Some(layout::month_days(y, mo).1 * DAY_US)
}

/// The time partitions of a table directory, each with the end of its range (exclusive); hour
/// directories of a day appear both as the day and as hours, [`choose`] picks.
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
        let Some(end_us) = partition_end(&name) else {
            continue;
        };
        out.push(Candidate {
            rel: name.clone(),
            end_us,
        });
        if !name.starts_with("dt=") {
            continue;
        }
        for h in fs::read_dir(e.path())? {
            let h = h?;
            let rel = format!("{name}/{}", h.file_name().to_string_lossy());
            if let (Some(end_us), true) = (partition_end(&rel), h.file_type()?.is_dir()) {
                out.push(Candidate { rel, end_us });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok((out, unpartitioned))
}

/// The partitions past `cutoff` to drop, from `cands` sorted by `rel`: a whole day that is past
/// goes as one and its hours are then not looked at; one that `busy` says is being written is
/// returned apart, for later.
pub(crate) fn choose(
    cands: Vec<Candidate>,
    cutoff: i64,
    busy: &mut dyn FnMut(&str) -> bool,
) -> (Vec<String>, Vec<String>) {
    let (mut drop, mut kept) = (Vec::new(), Vec::new());
    let mut dropped_days: Vec<String> = Vec::new();
    for c in cands {
        let in_dropped_day = dropped_days
            .iter()
            .any(|d| c.rel.starts_with(&format!("{d}/")));
        if c.end_us > cutoff || in_dropped_day {
            continue;
        }
        if busy(&c.rel) {
            kept.push(c.rel);
            continue;
        }
        if !c.rel.contains('/') {
            dropped_days.push(c.rel.clone());
        }
        drop.push(c.rel);
    }
    (drop, kept)
}

/// Whether a journaled file (relative to the lake) lies below `table`'s partition `rel`.
pub(crate) fn journaled(in_flight: &HashSet<String>, table: &TableName, rel: &str) -> bool {
    let prefix = format!("{table}/{rel}/");
    in_flight.iter().any(|f| f.starts_with(&prefix))
}

/// An error when there is nothing to do, or a table the options name is not in the lake.
pub(crate) fn check_tables(
    opts: &RetainOptions,
    tables: &[TableName],
    lake: &str,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        opts.keep.is_some() || !opts.per_table.is_empty(),
        "nothing to do: give --keep DURATION (e.g. 30d) or --table NAME=DURATION"
    );
    for t in opts.per_table.keys() {
        anyhow::ensure!(
            tables.contains(t),
            "table {t} is not in the lake {lake} (`silt tables --lake {lake}` lists them)"
        );
    }
    Ok(())
}

/// The start of what `table` keeps (microseconds since the epoch), or `None` when no window
/// applies to it.
pub(crate) fn cutoff(opts: &RetainOptions, table: &TableName, now: SystemTime) -> Option<i64> {
    let keep = opts.per_table.get(table).copied().or(opts.keep)?;
    Some(micros(now) - keep.as_micros() as i64)
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
                busy |= age < BUSY || crate::publish::in_use(&e.path());
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
    retain_with(root, opts, now, &mut ())
}

/// [`retain`], telling `obs` of each partition directory just before it disappears and asking
/// it before each whether to stop.
pub fn retain_with(
    root: &Path,
    opts: &RetainOptions,
    now: SystemTime,
    obs: &mut dyn RetainObserver,
) -> anyhow::Result<RetainReport> {
    // Before the lock, which would create `_silt/` in a mistyped path.
    if !layout::require_lake_dir(root)? {
        return Ok(RetainReport::default());
    }
    let lock = MaintenanceLock::acquire(root)?;
    let mut report = RetainReport::default();
    let tables = layout::tables(root)?;
    check_tables(opts, &tables, &root.display().to_string())?;
    for table in tables {
        let Some(cutoff) = cutoff(opts, &table, now) else {
            continue;
        };
        let dir = root.join(table.to_string());
        let (cands, unpartitioned) = partitions(&dir)?;
        if unpartitioned && cands.is_empty() {
            report.not_partitioned.push(table.clone());
            continue;
        }
        let in_flight: HashSet<String> = ImportLog::open(root)?.in_flight()?;
        let (drop, busy) = choose(cands, cutoff, &mut |rel| {
            contents(&dir.join(rel), now).2 || journaled(&in_flight, &table, rel)
        });
        report
            .busy
            .extend(busy.into_iter().map(|rel| (table.clone(), rel)));
        if !opts.dry_run && !drop.is_empty() {
            keep_schema_if_emptied(root, &table, &dir, &drop)?;
        }
        for rel in drop {
            let abs = dir.join(&rel);
            let (files, bytes, _) = contents(&abs, now);
            if !opts.dry_run {
                if obs.cancelled() {
                    report.stopped = true;
                    return Ok(report);
                }
                obs.before_drop(&abs);
                // A Delta table's log stops naming the files first.
                crate::delta::remove_partition(
                    crate::delta::Lake::Dir(root),
                    &table.to_string(),
                    &rel,
                    "silt retain",
                )?;
                drop_dir(&lock, &abs)?;
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

/// Keeps the table's schema ([`crate::emptied`]) when dropping the partitions `drop` leaves it
/// without any data file.
fn keep_schema_if_emptied(
    root: &Path,
    table: &TableName,
    dir: &Path,
    drop: &[String],
) -> anyhow::Result<()> {
    let files = layout::data_files(dir)?;
    let dropped = |p: &Path| drop.iter().any(|rel| p.starts_with(dir.join(rel)));
    if files.is_empty() || !files.iter().all(|f| dropped(&f.path)) {
        return Ok(());
    }
    let month = drop.iter().any(|rel| rel.starts_with("month="));
    let files: Vec<_> = files.into_iter().map(|f| (f.path, f.store)).collect();
    crate::emptied::keep_local(root, table, &files, month)
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
pub(crate) mod tests {
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

        // Written by hand, not by an import: marked as a lake.
        std::fs::create_dir_all(root.join("_silt")).unwrap();
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

    /// Stops the run once it has seen `after` partitions go.
    pub(crate) struct StopAfter {
        pub(crate) after: usize,
        pub(crate) seen: Vec<std::path::PathBuf>,
    }

    impl RetainObserver for StopAfter {
        fn before_drop(&mut self, partition: &Path) {
            self.seen.push(partition.to_path_buf());
        }
        fn cancelled(&self) -> bool {
            self.seen.len() >= self.after
        }
    }

    #[test]
    fn a_stop_between_partitions_leaves_the_rest_for_the_next_run() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let t = root.join("zeek.conn");
        let days = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"];
        for day in days {
            touch(&t.join(format!("dt={day}/hour=00/a.parquet")));
        }
        touch(&t.join("dt=2024-01-09/hour=00/a.parquet"));
        std::fs::create_dir_all(root.join("_silt")).unwrap();
        let opts = RetainOptions {
            keep: Some(Duration::from_secs(86400)),
            ..Default::default()
        };
        let now = at("2024-01-09", 6);
        let mut obs = StopAfter {
            after: 2,
            seen: Vec::new(),
        };
        let rep = retain_with(root, &opts, now, &mut obs).unwrap();
        assert!(rep.stopped);
        assert_eq!(rep.dropped.len(), 2, "{:?}", rep.dropped);
        let told: Vec<std::path::PathBuf> = ["2024-01-01", "2024-01-02"]
            .iter()
            .map(|day| t.join(format!("dt={day}")))
            .collect();
        assert_eq!(obs.seen, told);
        let left: Vec<bool> = days
            .iter()
            .map(|day| t.join(format!("dt={day}")).exists())
            .collect();
        assert_eq!(left, [false, false, true, true]);

        // The next run drops the rest, and only the rest.
        let rep = retain(root, &opts, now).unwrap();
        assert!(!rep.stopped);
        let got: Vec<&str> = rep.dropped.iter().map(|d| d.partition.as_str()).collect();
        assert_eq!(got, ["dt=2024-01-03", "dt=2024-01-04"]);
        assert!(t.join("dt=2024-01-09/hour=00/a.parquet").exists());
        assert_eq!(fs::read_dir(root.join(TRASH_DIR)).unwrap().count(), 0);
    }
}
