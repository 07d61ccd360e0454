//! What a lake holds: tables and their data files (listed by [`crate::layout`], the rules every
//! command shares), with rows, bytes and time range read from the files themselves (Parquet
//! footers; Feather files are read).

use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use anyhow::Context;
use arrow::array::{Array, TimestampMicrosecondArray};
use arrow::datatypes::{DataType, TimeUnit};
use parquet::file::reader::{ChunkReader, FileReader, SerializedFileReader};
use parquet::file::statistics::Statistics;
use silt_core::TableName;

use crate::config::StoreKind;
use crate::remote::LakeRoot;

pub use crate::layout::{data_files, tables, DataFile};

/// A table's figures.
#[derive(Debug, Clone)]
pub struct TableInfo {
    pub name: TableName,
    pub dir: PathBuf,
    pub files: usize,
    pub bytes: u64,
    pub rows: u64,
    /// Name of the time column (from file metadata).
    pub time_column: Option<String>,
    /// Earliest and latest event time, UTC microseconds.
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    /// Files whose footer cannot be read, with why: counted in `files` and `bytes` but not in
    /// `rows` (queries skip them too, with a warning).
    pub damaged: Vec<(PathBuf, String)>,
}

/// Rows, files, bytes and time range of one table.
pub fn table_info(lake: &Path, name: &TableName) -> anyhow::Result<TableInfo> {
    table_info_in(&LakeRoot::Dir(lake.to_path_buf()), name)
}

/// [`table_info`] of a table in a lake that may be in an object store (footers read with range
/// requests; a Feather file is read whole).
pub fn table_info_in(lake: &LakeRoot, name: &TableName) -> anyhow::Result<TableInfo> {
    let dir = lake.root_path().join(name.to_string());
    let files = lake.data_files(name)?;
    let mut info = TableInfo {
        name: name.clone(),
        dir,
        files: files.len(),
        bytes: files.iter().map(|f| f.bytes).sum(),
        rows: 0,
        time_column: None,
        first_ts: None,
        last_ts: None,
        damaged: Vec::new(),
    };
    for f in &files {
        let facts = match (lake, f.store) {
            (LakeRoot::Dir(_), StoreKind::Parquet) => File::open(&f.path)
                .map_err(anyhow::Error::from)
                .and_then(|file| parquet_file_facts(file, &f.path)),
            (LakeRoot::Dir(_), StoreKind::Feather) => File::open(&f.path)
                .map_err(anyhow::Error::from)
                .and_then(|file| feather_file_facts(file, &f.path)),
            (LakeRoot::Remote(r), StoreKind::Parquet) => {
                r.file(f).and_then(|file| parquet_file_facts(file, &f.path))
            }
            (LakeRoot::Remote(r), StoreKind::Feather) => r
                .file(f)
                .and_then(|file| feather_file_facts(file.reader(), &f.path)),
        };
        // One damaged file does not hide the table: it is named, as a query names it.
        let (rows, tcol, range) = match facts {
            Ok(facts) => facts,
            Err(e) => {
                info.damaged
                    .push((f.path.clone(), format!("{:#}", e.root_cause())));
                continue;
            }
        };
        info.rows += rows;
        if info.time_column.is_none() {
            info.time_column = tcol;
        }
        if let Some((lo, hi)) = range {
            info.first_ts = Some(info.first_ts.map_or(lo, |x| x.min(lo)));
            info.last_ts = Some(info.last_ts.map_or(hi, |x| x.max(hi)));
        }
    }
    Ok(info)
}

type Facts = (u64, Option<String>, Option<(i64, i64)>);

fn parquet_file_facts<C: ChunkReader + 'static>(file: C, path: &Path) -> anyhow::Result<Facts> {
    let r = SerializedFileReader::new(file)
        .with_context(|| format!("{} is not a readable Parquet file", path.display()))?;
    let md = r.metadata();
    let rows = md.file_metadata().num_rows() as u64;
    let tcol = md
        .file_metadata()
        .key_value_metadata()
        .and_then(|kv| kv.iter().find(|k| k.key == silt_core::meta::TIME_COLUMN))
        .and_then(|k| k.value.clone());
    let mut range: Option<(i64, i64)> = None;
    if let Some(tc) = &tcol {
        let schema = md.file_metadata().schema_descr();
        if let Some(ci) =
            (0..schema.num_columns()).find(|&i| schema.column(i).path().string() == *tc)
        {
            for rg in md.row_groups() {
                if let Some(Statistics::Int64(s)) = rg.column(ci).statistics() {
                    if let (Some(lo), Some(hi)) = (s.min_opt(), s.max_opt()) {
                        range = Some(range.map_or((*lo, *hi), |(a, b)| (a.min(*lo), b.max(*hi))));
                    }
                }
            }
        }
    }
    Ok((rows, tcol, range))
}

fn feather_file_facts<R: Read + Seek>(file: R, path: &Path) -> anyhow::Result<Facts> {
    let r = crate::ipc::open(file)
        .with_context(|| format!("{} is not a readable Arrow IPC file", path.display()))?;
    let schema = r.schema();
    let tcol = silt_core::meta::time_column(&schema).map(str::to_string);
    let mut rows = 0u64;
    let mut range: Option<(i64, i64)> = None;
    for b in r {
        let b = b?;
        rows += b.num_rows() as u64;
        let Some(c) = tcol.as_deref().and_then(|t| b.column_by_name(t)) else {
            continue;
        };
        if let DataType::Timestamp(TimeUnit::Microsecond, _) = c.data_type() {
            let a = c
                .as_any()
                .downcast_ref::<TimestampMicrosecondArray>()
                .expect("ts");
            if let (Some(lo), Some(hi)) = (arrow::compute::min(a), arrow::compute::max(a)) {
                range = Some(range.map_or((lo, hi), |(x, y)| (x.min(lo), y.max(hi))));
            }
            let _ = a.null_count();
        }
    }
    Ok((rows, tcol, range))
}
