//! Where files go: partition directories from event time, unique file names, temp names.
//!
//! `dt=YYYY-MM-DD/hour=HH/` (Hive style, understood by DuckDB, Spark, Trino, Athena), with rows
//! whose time is null under `__HIVE_DEFAULT_PARTITION__`, Hive's name for a null partition value.

use std::path::{Path, PathBuf};

use crate::config::Partitioning;

/// Hive's directory value for a null partition key.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Suffix of files that are still being written (they also start with `.`, so every reader
/// that skips hidden files skips them).
pub const IN_PROGRESS_SUFFIX: &str = ".inprogress";

/// A partition: the hour or day bucket of the event time, or null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PartKey {
    Null,
    /// Hours (hour partitioning) or days (day partitioning) since the epoch; 0 for no partitioning.
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
            (PartKey::Bucket(b), Partitioning::Hour) => {
                let (date, hour) = silt_core::time::date_hour(b * HOUR_MICROS);
                PathBuf::from(format!("dt={date}/hour={hour:02}"))
            }
            (PartKey::Bucket(b), Partitioning::Day) => {
                let (date, _) = silt_core::time::date_hour(b * DAY_MICROS);
                PathBuf::from(format!("dt={date}"))
            }
        }
    }
}

/// A new, unique file name: import time (for a readable order) plus a random UUID, so that
/// concurrent importers on one or several machines never collide.
pub fn unique_file_name(extension: &str) -> String {
    let now = chrono::Utc::now().format("%Y%m%dT%H%M%S");
    format!("{now}-{}.{extension}", uuid::Uuid::new_v4().simple())
}

/// The hidden temporary name under which `final_path` is written.
pub fn temp_path(final_path: &Path) -> PathBuf {
    let name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    final_path.with_file_name(format!(".{name}{IN_PROGRESS_SUFFIX}"))
}

/// The partitioning an existing table directory uses, judged from its first data file; `None`
/// when the table has no files yet.
pub fn existing_partitioning(table_dir: &Path) -> Option<Partitioning> {
    let file = crate::catalog::data_files(table_dir)
        .ok()?
        .into_iter()
        .next()?;
    let rel = file.path.strip_prefix(table_dir).ok()?;
    let parts: Vec<String> = rel
        .parent()
        .map(|p| p.iter().map(|c| c.to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    match parts.as_slice() {
        [] => Some(Partitioning::None),
        [d] if d.starts_with("dt=") => Some(Partitioning::Day),
        [d, h] if d.starts_with("dt=") && h.starts_with("hour=") => Some(Partitioning::Hour),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn names_are_unique_and_temp_is_hidden() {
        let a = unique_file_name("parquet");
        let b = unique_file_name("parquet");
        assert_ne!(a, b);
        assert!(a.ends_with(".parquet"));
        let t = temp_path(Path::new("/l/t/dt=x/a.parquet"));
        assert_eq!(t, PathBuf::from("/l/t/dt=x/.a.parquet.inprogress"));
    }
}
