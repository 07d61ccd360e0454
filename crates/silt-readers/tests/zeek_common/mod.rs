//! Helpers shared by the `zeek_*` integration tests: locating the shared corpus, reading
//! (possibly gzipped) files, running the readers, and flattening batches into comparable rows.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, TimeUnit};
use arrow::record_batch::RecordBatch;
use silt_core::{CollectEmit, ReadOptions, SourceInfo};

/// The shared corpus (`$SILT_CORPUS`, else `../shared/corpus` next to the repository), if present.
pub fn corpus() -> Option<PathBuf> {
    let p = match std::env::var_os("SILT_CORPUS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
    };
    p.is_dir().then_some(p)
}

/// File contents, gunzipped when the file starts with the gzip magic (independent of the
/// readers' own source handling).
pub fn bytes(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        raw
    }
}

/// All files under `dir`, sorted.
pub fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

pub fn source_for(path: &Path) -> SourceInfo {
    SourceInfo::from_path(path)
}

pub fn source_named(name: &str) -> SourceInfo {
    SourceInfo {
        display: name.to_string(),
        file_name: Some(name.to_string()),
    }
}

/// Runs the TSV reader through its streaming entry point over a small-buffered reader, so that
/// lines straddle buffer refills.
pub fn tsv(data: &[u8], src: &SourceInfo, batch_rows: usize) -> CollectEmit {
    let mut out = CollectEmit::default();
    let mut r = std::io::BufReader::with_capacity(4096, data);
    silt_readers::zeek::tsv::read(&mut r, src, &ReadOptions { batch_rows }, &mut out).unwrap();
    out
}

pub fn json(data: &[u8], src: &SourceInfo, batch_rows: usize) -> CollectEmit {
    let mut out = CollectEmit::default();
    let mut r = std::io::BufReader::with_capacity(4096, data);
    silt_readers::zeek::json::read(&mut r, src, &ReadOptions { batch_rows }, &mut out).unwrap();
    out
}

/// One value, in a form both readers' output can be compared in.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Bool(bool),
    U(u64),
    I(i64),
    F(f64),
    Ts(i64),
    S(String),
    List(Vec<Cell>),
}

impl Cell {
    /// Equality with doubles compared at 6-decimal precision.
    pub fn close(&self, other: &Cell) -> bool {
        match (self, other) {
            (Cell::F(a), Cell::F(b)) => {
                (a - b).abs() <= 1e-6 + 1e-12 * a.abs() || (a.is_nan() && b.is_nan())
            }
            (Cell::List(a), Cell::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.close(y))
            }
            (a, b) => a == b,
        }
    }

    /// Rendering without doubles (for grouping rows).
    pub fn key(&self) -> String {
        match self {
            Cell::F(_) => "F".into(),
            Cell::List(v) => format!(
                "[{}]",
                v.iter().map(Cell::key).collect::<Vec<_>>().join(",")
            ),
            c => format!("{c:?}"),
        }
    }
}

pub fn cell(a: &ArrayRef, i: usize) -> Cell {
    if a.is_null(i) || a.data_type() == &DataType::Null {
        return Cell::Null;
    }
    match a.data_type() {
        DataType::Boolean => Cell::Bool(a.as_boolean().value(i)),
        DataType::UInt64 => Cell::U(a.as_primitive::<arrow::datatypes::UInt64Type>().value(i)),
        DataType::UInt16 => {
            Cell::U(a.as_primitive::<arrow::datatypes::UInt16Type>().value(i) as u64)
        }
        DataType::Int64 => Cell::I(a.as_primitive::<arrow::datatypes::Int64Type>().value(i)),
        DataType::Float64 => Cell::F(a.as_primitive::<arrow::datatypes::Float64Type>().value(i)),
        // Intervals: exact microseconds (Decimal128(18, 6) seconds).
        DataType::Decimal128(18, 6) => Cell::I(
            a.as_primitive::<arrow::datatypes::Decimal128Type>()
                .value(i) as i64,
        ),
        DataType::Timestamp(TimeUnit::Microsecond, _) => Cell::Ts(
            a.as_primitive::<arrow::datatypes::TimestampMicrosecondType>()
                .value(i),
        ),
        DataType::Utf8 => Cell::S(a.as_string::<i32>().value(i).to_string()),
        DataType::List(_) => {
            let v = a.as_list::<i32>().value(i);
            Cell::List((0..v.len()).map(|j| cell(&v, j)).collect())
        }
        t => panic!("unexpected type {t}"),
    }
}

/// Leaf columns of a batch as `(dotted path, array)`, structs flattened.
pub fn leaves(batch: &RecordBatch) -> Vec<(String, ArrayRef)> {
    fn walk(prefix: &str, name: &str, a: &ArrayRef, out: &mut Vec<(String, ArrayRef)>) {
        let path = if prefix.is_empty() {
            name.to_string()
        } else {
            format!("{prefix}.{name}")
        };
        if let DataType::Struct(fields) = a.data_type() {
            let s = a.as_struct();
            for (f, c) in fields.iter().zip(s.columns()) {
                walk(&path, f.name(), c, out);
            }
        } else {
            out.push((path, a.clone()));
        }
    }
    let mut out = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        walk("", f.name(), c, &mut out);
    }
    out
}

/// Leaf column types of all batches of a table (a column keeps the type of its first batch;
/// the test asserts batches agree).
pub fn leaf_types(batches: &[RecordBatch]) -> BTreeMap<String, DataType> {
    let mut out = BTreeMap::new();
    for b in batches {
        for (p, a) in leaves(b) {
            let prev = out.insert(p.clone(), a.data_type().clone());
            if let Some(prev) = prev {
                assert_eq!(
                    &prev,
                    a.data_type(),
                    "column {p} changes type between batches"
                );
            }
        }
    }
    out
}

/// All rows of a table as `column path -> cell` (columns missing in a batch are absent).
pub fn rows(batches: &[RecordBatch]) -> Vec<BTreeMap<String, Cell>> {
    let mut out = Vec::new();
    for b in batches {
        let cols = leaves(b);
        for i in 0..b.num_rows() {
            out.push(cols.iter().map(|(p, a)| (p.clone(), cell(a, i))).collect());
        }
    }
    out
}

/// Non-empty lines (after removing a `\r`) not starting with `prefix`.
pub fn count_lines_not_starting(data: &[u8], prefix: &[u8]) -> usize {
    data.split(|&c| c == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.is_empty() && !l.starts_with(prefix))
        .count()
}

/// Lines that are not blank.
pub fn count_nonblank_lines(data: &[u8]) -> usize {
    data.split(|&c| c == b'\n')
        .filter(|l| !l.trim_ascii().is_empty())
        .count()
}
