//! The lake's layout, the one place that says where files go and which files a reader sees.
//! Every command lists a lake through this module (`silt tables`, `silt ddl`, `silt bench`
//! through [`crate::catalog`]; `silt query` through `silt_query::lake`), so all of them see the
//! same files.
//!
//! - A **table** is a directory directly under the lake whose name is a canonical
//!   `module.type` ([`TableName::parse`]); anything else (`_rejects`, hidden directories, stray
//!   files) is not a table ([`tables`]).
//! - Its **data files** ([`data_files`]) are `*.parquet` and `*.feather` (also `*.arrow` and
//!   `*.ipc`, as other tools name Arrow IPC files) anywhere below the table directory. Names
//!   starting with `.` (the writer's in-progress files) or `_` (Hive/Spark markers such as
//!   `_SUCCESS`, `_temporary/`, a `_delta_log/`) are never data, for files and directories alike.
//! - **Partitions** are `dt=YYYY-MM-DD/hour=HH/` directories (Hive style, understood by DuckDB,
//!   Spark, Trino, Athena), `dt=` alone for day partitioning, `month=YYYY-MM/` for month
//!   partitioning, or none; rows whose time is null go under `__HIVE_DEFAULT_PARTITION__`,
//!   Hive's name for a null partition value ([`partition_of`] reads a path back). Which one a
//!   table uses is recorded in the lake when the table is first written
//!   ([`crate::granularity`]).
//! - Files a committed compaction replaced are left out until they are removed
//!   ([`crate::replace`]).
//! - New files get unique names ([`unique_file_name`]) and are written under a hidden temporary
//!   name first ([`temp_path`]).
//!
//! Touches nothing: it lists directories, reads replacement records and builds paths.

use std::path::{Path, PathBuf};

use anyhow::Context;
use silt_core::TableName;

use crate::config::{Partitioning, StoreKind};

/// Hive's directory value for a null partition key.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Suffix of files that are still being written (they also start with `.`, so every reader
/// that skips hidden files skips them).
pub const IN_PROGRESS_SUFFIX: &str = ".inprogress";

/// A partition: the hour, day or month bucket of the event time, or null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PartKey {
    Null,
    /// Hours (hour partitioning), days (day partitioning) or months (month partitioning: year ×
    /// 12 + month − 1) since the epoch; 0 for no partitioning.
    Bucket(i64),
}

const HOUR_MICROS: i64 = 3_600_000_000;
const DAY_MICROS: i64 = 24 * HOUR_MICROS;

impl PartKey {
    /// The partition of an event time (UTC microseconds).
    pub fn of(micros: Option<i64>, p: Partitioning) -> PartKey {
        match (micros, p) {
            (_, Partitioning::None) => PartKey::Bucket(0),
            (None, _) => PartKey::Null,
            (Some(t), Partitioning::Hour) => PartKey::Bucket(t.div_euclid(HOUR_MICROS)),
            (Some(t), Partitioning::Day) => PartKey::Bucket(t.div_euclid(DAY_MICROS)),
            (Some(t), Partitioning::Month) => {
                let (y, m, _) = silt_core::time::civil_from_days(t.div_euclid(DAY_MICROS));
                PartKey::Bucket(y * 12 + m as i64 - 1)
            }
        }
    }

    /// Directory of the partition relative to the table directory (empty for no partitioning).
    pub fn relative_dir(self, p: Partitioning) -> PathBuf {
        match (self, p) {
            (_, Partitioning::None) => PathBuf::new(),
            (PartKey::Null, Partitioning::Hour) => {
                PathBuf::from(format!("dt={NULL_PARTITION}/hour={NULL_PARTITION}"))
            }
            (PartKey::Null, Partitioning::Day) => PathBuf::from(format!("dt={NULL_PARTITION}")),
            (PartKey::Null, Partitioning::Month) => {
                PathBuf::from(format!("month={NULL_PARTITION}"))
            }
            (PartKey::Bucket(b), Partitioning::Hour) => {
                let (date, hour) = silt_core::time::date_hour(b * HOUR_MICROS);
                PathBuf::from(format!("dt={date}/hour={hour:02}"))
            }
            (PartKey::Bucket(b), Partitioning::Day) => {
                let (date, _) = silt_core::time::date_hour(b * DAY_MICROS);
                PathBuf::from(format!("dt={date}"))
            }
            (PartKey::Bucket(b), Partitioning::Month) => PathBuf::from(format!(
                "month={:04}-{:02}",
                b.div_euclid(12),
                b.rem_euclid(12) + 1
            )),
        }
    }
}

/// A new, unique file name: import time (for a readable order) plus a random UUID, so that
/// concurrent importers on one or several machines never collide.
pub fn unique_file_name(extension: &str) -> String {
    let now = chrono::Utc::now().format("%Y%m%dT%H%M%S");
    format!("{now}-{}.{extension}", uuid::Uuid::new_v4().simple())
}

/// A new, unique name for a data file written with the schema whose [`crate::schema_tag`] is
/// `tag`: [`unique_file_name`] with `-s<tag>` (16 hex digits) before the extension.
pub fn data_file_name(extension: &str, tag: u64) -> String {
    tagged(&unique_file_name(extension), tag)
}

/// `path` renamed for a file written with `schema` in format `store`: `-s<tag>` before its
/// extension, as [`data_file_name`] names it (unless its name has a tag already).
pub fn with_schema_tag(
    path: &Path,
    schema: &arrow::datatypes::Schema,
    store: StoreKind,
) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if crate::schema_tag::of_file_name(&name).is_some() {
        return path.to_path_buf();
    }
    path.with_file_name(tagged(&name, crate::schema_tag::tag(schema, store)))
}

fn tagged(name: &str, tag: u64) -> String {
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}-s{tag:016x}.{ext}"),
        None => format!("{name}-s{tag:016x}"),
    }
}

/// The hidden temporary name under which `final_path` is written.
pub fn temp_path(final_path: &Path) -> PathBuf {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    final_path.with_file_name(format!(".{name}{IN_PROGRESS_SUFFIX}"))
}

/// Names that are never tables or data: hidden (`.`, in-progress files) or markers (`_`).
pub fn is_hidden(name: &str) -> bool {
    name.starts_with('.') || name.starts_with('_')
}

/// The tables of a lake, sorted by name.
pub fn tables(root: &Path) -> anyhow::Result<Vec<TableName>> {
    let mut out = Vec::new();
    let rd = std::fs::read_dir(root).with_context(|| {
        format!(
            "cannot read lake {}: is it a silt lake directory?",
            root.display()
        )
    })?;
    for e in rd {
        let e = e.with_context(|| format!("cannot list lake {}", root.display()))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if is_hidden(name) || !e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        if let Some(t) = TableName::parse(name) {
            out.push(t);
        }
    }
    out.sort();
    Ok(out)
}

/// Refuses a `root` that is no lake before maintenance (compact, vacuum, retain) touches it:
/// its lock would create `_silt/` there, and vacuum and retention remove files. A lake is a
/// directory that holds `_silt/` (every import and server makes it), or else a table directory
/// (`module.type`) with a data file silt named ([`is_silt_data_file`]); a directory name with a
/// dot (`my.project`) is not enough. `Ok(false)` for an empty directory: nothing to maintain,
/// and nothing may be created there either.
pub fn require_lake_dir(root: &Path) -> anyhow::Result<bool> {
    anyhow::ensure!(
        root.is_dir(),
        "lake {} is not a directory: give the --lake an import wrote",
        root.display()
    );
    let empty = std::fs::read_dir(root)
        .with_context(|| format!("cannot read lake {}", root.display()))?
        .next()
        .is_none();
    if empty {
        return Ok(false);
    }
    if root.join("_silt").is_dir() {
        return Ok(true);
    }
    for t in tables(root)? {
        let files = data_files(&root.join(t.to_string())).unwrap_or_default();
        if files.iter().any(|f| {
            f.path
                .file_name()
                .is_some_and(|n| is_silt_data_file(&n.to_string_lossy()))
        }) {
            return Ok(true);
        }
    }
    anyhow::bail!(
        "{} holds no silt lake (no _silt/, and no table directory such as zeek.conn with files \
         silt wrote): give the --lake an import wrote (for a dataset another tool wrote in \
         silt's layout, create {}/_silt/ first)",
        root.display(),
        root.display()
    )
}

/// Whether `name` is a data file name [`unique_file_name`] made: `YYYYMMDDTHHMMSS-` and 32 hex
/// digits.
pub fn is_silt_data_file(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() > 48
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'-'
        && b[16..48].iter().all(|c| c.is_ascii_hexdigit())
}

/// One data file of a table.
#[derive(Debug, Clone)]
pub struct DataFile {
    pub path: PathBuf,
    pub bytes: u64,
    pub store: StoreKind,
}

/// The data files below a table directory (see the module documentation), sorted by path; an
/// empty list when the directory does not exist.
///
/// A listing is one moment's: a file or partition directory that vanishes while it is walked (a
/// compaction removed its inputs, retention moved a partition away) makes the walk start over.
/// Skipping the vanished file alone would be wrong: a compaction renames its output in before
/// it removes its inputs, so a walk that found the inputs gone may have listed their directory
/// before the output came, and would leave the rows of both out.
pub fn data_files(table_dir: &Path) -> anyhow::Result<Vec<DataFile>> {
    /// `Ok(false)`: something listed vanished before it was looked at.
    fn walk(d: &Path, out: &mut Vec<DataFile>) -> anyhow::Result<bool> {
        let rd = match std::fs::read_dir(d) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", d.display())),
        };
        for e in rd {
            let e = e.with_context(|| format!("cannot list {}", d.display()))?;
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if is_hidden(name) {
                continue;
            }
            let p = e.path();
            let ft = e
                .file_type()
                .with_context(|| format!("cannot stat {}", p.display()))?;
            if ft.is_dir() {
                if !walk(&p, out)? {
                    return Ok(false);
                }
            } else if let Some(store) = StoreKind::from_path(&p) {
                let md = match e.metadata() {
                    Ok(md) => md,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
                    Err(e) => {
                        return Err(e).with_context(|| format!("cannot stat {}", p.display()))
                    }
                };
                out.push(DataFile {
                    path: p,
                    bytes: md.len(),
                    store,
                });
            }
        }
        Ok(true)
    }
    /// Walks that may start over before the table is reported as changing too fast to list.
    const ATTEMPTS: usize = 50;
    let mut out = Vec::new();
    for attempt in 1.. {
        out.clear();
        if !table_dir.is_dir() || walk(table_dir, &mut out)? {
            break;
        }
        anyhow::ensure!(
            attempt < ATTEMPTS,
            "the files of {} kept vanishing while they were listed ({ATTEMPTS} tries): is a \
compaction or retention removing them? Try again once it has finished",
            table_dir.display()
        );
    }
    // Files a committed compaction replaced are not data any more (crate::replace): the
    // listing comes first, the records after, so a replacement is seen whole or not at all.
    if let (Some(root), Some(table)) = (
        table_dir.parent(),
        table_dir.file_name().and_then(|n| n.to_str()),
    ) {
        let rel = |p: &Path| p.strip_prefix(table_dir).unwrap_or(p).to_path_buf();
        let listed: std::collections::HashSet<PathBuf> = out.iter().map(|f| rel(&f.path)).collect();
        let gone = crate::replace::replaced(root, table, &listed)?;
        if !gone.is_empty() {
            out.retain(|f| !gone.contains(&rel(&f.path)));
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The partition values a file's path holds below its table directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PartitionValues {
    /// `dt=` as days since the Unix epoch (`None` without a `dt=` directory or for the null
    /// partition).
    pub dt: Option<i32>,
    /// `hour=` (0..=23).
    pub hour: Option<i32>,
    /// `month=YYYY-MM` as (year, month).
    pub month: Option<(i32, u32)>,
    /// The file is under `__HIVE_DEFAULT_PARTITION__`: its rows' times are null.
    pub null: bool,
}

/// Partition values from the `key=value` directories of `path` below `table_dir`.
pub fn partition_of(table_dir: &Path, path: &Path) -> PartitionValues {
    let rel = path.strip_prefix(table_dir).unwrap_or(path);
    let mut v = PartitionValues::default();
    let comps: Vec<_> = rel.components().collect();
    for c in comps.iter().take(comps.len().saturating_sub(1)) {
        let Some(s) = c.as_os_str().to_str() else {
            continue;
        };
        if let Some(x) = s.strip_prefix("dt=") {
            if x == NULL_PARTITION {
                v.null = true;
            } else {
                v.dt = parse_date(x);
            }
        } else if let Some(x) = s.strip_prefix("month=") {
            if x == NULL_PARTITION {
                v.null = true;
            } else {
                v.month = parse_month(x);
            }
        } else if let Some(x) = s.strip_prefix("hour=") {
            if x == NULL_PARTITION {
                v.null = true;
            } else {
                v.hour = x.parse::<i32>().ok().filter(|h| (0..24).contains(h));
            }
        }
    }
    if v.null {
        v.dt = None;
        v.hour = None;
        v.month = None;
    }
    v
}

/// `(year, month)` of `YYYY-MM`; `None` for anything else.
pub fn parse_month(s: &str) -> Option<(i32, u32)> {
    let b = s.as_bytes();
    if b.len() != 7 || b[4] != b'-' || !b[..4].iter().chain(&b[5..]).all(u8::is_ascii_digit) {
        return None;
    }
    let y: i32 = s[0..4].parse().ok()?;
    let m: u32 = s[5..7].parse().ok()?;
    (1..=12).contains(&m).then_some((y, m))
}

/// Days since the epoch of the first day of `(year, month)` and of the month after it.
pub fn month_days(year: i32, month: u32) -> (i64, i64) {
    let (ny, nm) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    (
        silt_core::time::days_from_civil(year as i64, month as i64, 1),
        silt_core::time::days_from_civil(ny as i64, nm as i64, 1),
    )
}

/// Days since the epoch of `YYYY-MM-DD`; `None` for anything else (also `2018-02-30`).
pub fn parse_date(s: &str) -> Option<i32> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y: i64 = s[0..4].parse().ok()?;
    let m: i64 = s[5..7].parse().ok()?;
    let d: i64 = s[8..10].parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let days = silt_core::time::days_from_civil(y, m, d);
    let (y2, m2, d2) = silt_core::time::civil_from_days(days);
    (y2 == y && m2 as i64 == m && d2 as i64 == d).then_some(days as i32)
}

/// The partitioning a data file's path below its table directory shows (`dt=…/hour=…/f` is
/// hour partitioning); `None` for a layout silt does not write.
pub fn partitioning_of_rel(rel: &Path) -> Option<Partitioning> {
    let parts: Vec<String> = rel
        .parent()
        .map(|p| p.iter().map(|c| c.to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    match parts.as_slice() {
        [] => Some(Partitioning::None),
        [d] if d.starts_with("dt=") => Some(Partitioning::Day),
        [d] if d.starts_with("month=") => Some(Partitioning::Month),
        [d, h] if d.starts_with("dt=") && h.starts_with("hour=") => Some(Partitioning::Hour),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lake_holds_silt_or_a_table_of_silt_files_and_an_empty_one_has_nothing_to_do() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        assert!(!require_lake_dir(root).unwrap());
        std::fs::write(root.join("notes.txt"), "x").unwrap();
        // Directory names with a dot, even with Parquet files in them, are not tables.
        std::fs::create_dir_all(root.join("my.project/dt=2020-01-01")).unwrap();
        std::fs::write(root.join("my.project/dt=2020-01-01/x.parquet"), "x").unwrap();
        let e = require_lake_dir(root).unwrap_err().to_string();
        assert!(e.contains("holds no silt lake"), "{e}");
        assert!(!root.join("_silt").exists());
        let name = data_file_name("parquet", 7);
        assert!(is_silt_data_file(&name), "{name}");
        std::fs::create_dir_all(root.join("zeek.conn/dt=2020-01-01")).unwrap();
        std::fs::write(root.join("zeek.conn/dt=2020-01-01").join(&name), "x").unwrap();
        assert!(require_lake_dir(root).unwrap());
        let e = require_lake_dir(&root.join("notes.txt"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a directory"), "{e}");
        let other = tempfile::tempdir().unwrap();
        std::fs::create_dir(other.path().join("_silt")).unwrap();
        assert!(require_lake_dir(other.path()).unwrap());
    }

    #[test]
    fn partition_dirs() {
        let t = 1_521_911_721_000_000; // 2018-03-24T17:15:21Z
        let h = PartKey::of(Some(t), Partitioning::Hour);
        assert_eq!(
            h.relative_dir(Partitioning::Hour),
            PathBuf::from("dt=2018-03-24/hour=17")
        );
        let d = PartKey::of(Some(t), Partitioning::Day);
        assert_eq!(
            d.relative_dir(Partitioning::Day),
            PathBuf::from("dt=2018-03-24")
        );
        let n = PartKey::of(None, Partitioning::Hour);
        assert_eq!(
            n.relative_dir(Partitioning::Hour),
            PathBuf::from("dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__")
        );
        assert_eq!(
            PartKey::of(Some(-1), Partitioning::Hour).relative_dir(Partitioning::Hour),
            PathBuf::from("dt=1969-12-31/hour=23")
        );
        assert_eq!(
            PartKey::of(None, Partitioning::None).relative_dir(Partitioning::None),
            PathBuf::new()
        );
    }

    #[test]
    fn partitions_from_paths() {
        let t = Path::new("/l/zeek.conn");
        let p = |s: &str| {
            let v = partition_of(t, &t.join(s));
            (v.dt, v.hour, v.null)
        };
        assert_eq!(
            p("dt=2018-03-24/hour=17/a.parquet"),
            (Some(17_614), Some(17), false)
        );
        assert_eq!(p("dt=2018-03-24/a.parquet"), (Some(17_614), None, false));
        assert_eq!(p("a.parquet"), (None, None, false));
        assert_eq!(
            p("dt=__HIVE_DEFAULT_PARTITION__/hour=__HIVE_DEFAULT_PARTITION__/a.parquet"),
            (None, None, true)
        );
        assert_eq!(parse_date("2018-02-30"), None);
        assert_eq!(parse_date("1970-01-02"), Some(1));
    }

    #[test]
    fn listing_rules() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for f in [
            "zeek.conn/dt=2018-03-24/hour=17/a.parquet",
            "zeek.conn/dt=2018-03-24/hour=17/.b.parquet.inprogress",
            "zeek.conn/dt=2018-03-24/hour=17/_SUCCESS",
            "zeek.conn/_temporary/c.parquet",
            "zeek.conn/.hidden/d.parquet",
            "zeek.conn/e.feather",
            "zeek.conn/f.arrow",
            "zeek.conn/g.ipc",
            "zeek.conn/h.csv",
            "_rejects/dt=2018-03-24/x.ndjson",
            "Not.A.Table/a.parquet",
            ".zeek.dns/a.parquet",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"x").unwrap();
        }
        assert_eq!(tables(root).unwrap(), vec![TableName::new("zeek", "conn")]);
        let files: Vec<String> = data_files(&root.join("zeek.conn"))
            .unwrap()
            .iter()
            .map(|f| {
                f.path
                    .strip_prefix(root.join("zeek.conn"))
                    .unwrap()
                    .display()
                    .to_string()
            })
            .collect();
        assert_eq!(
            files,
            [
                "dt=2018-03-24/hour=17/a.parquet",
                "e.feather",
                "f.arrow",
                "g.ipc"
            ]
        );
    }

    #[test]
    fn names_are_unique_and_temp_is_hidden() {
        let a = unique_file_name("parquet");
        let b = unique_file_name("parquet");
        assert_ne!(a, b);
        assert!(a.ends_with(".parquet"));
        let t = temp_path(Path::new("/l/t/dt=x/a.parquet"));
        assert_eq!(t, PathBuf::from("/l/t/dt=x/.a.parquet.inprogress"));
    }
}
