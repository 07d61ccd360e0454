//! Where the bytes go: per-column sizes of the Parquet files goal 3 compares (silt's
//! `parquet+zstd:1`, DuckDB's and pyarrow's), read from each file's footer, so the report can say
//! which encodings buy what column by column, and how small a writer that took the smallest of
//! the three for every column would get (`best_of`).
//!
//! Column names are normalised across writers: a list's `list.item` (arrow-rs) and
//! `list.element` (pyarrow, DuckDB) both become `[]`. Touches only the files it reads.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use parquet::basic::Encoding;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde::{Deserialize, Serialize};

/// The name of the pseudo-column for everything outside column chunks: bloom filters, page
/// indexes, the footer.
pub const OVERHEAD: &str = "(bloom filters, page index, footer)";

/// One column of one writer's file (a row of `columns.csv`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ColumnSize {
    pub schema: String,
    /// `silt`, `duckdb`, `pyarrow`.
    pub writer: String,
    /// Leaf path, dotted, lists as `[]`; or [`OVERHEAD`].
    pub column: String,
    /// Data-page encodings, `+`-joined (`RLE_DICTIONARY+PLAIN` for a dictionary that overflowed).
    pub encodings: String,
    /// Compressed bytes of the column's chunks (dictionary and data pages with their headers).
    pub bytes: u64,
    pub bytes_per_event: f64,
}

/// Reads the per-column sizes of a Parquet file written by `writer`, with the overhead row last.
pub fn of_file(schema: &str, writer: &str, path: &Path) -> anyhow::Result<Vec<ColumnSize>> {
    let file_len = std::fs::metadata(path)?.len();
    let r = SerializedFileReader::new(File::open(path)?)?;
    let md = r.metadata();
    let events = md.file_metadata().num_rows().max(0) as u64;
    let mut by_col: BTreeMap<usize, (String, Vec<Encoding>, u64)> = BTreeMap::new();
    for rg in md.row_groups() {
        for (i, c) in rg.columns().iter().enumerate() {
            let e = by_col
                .entry(i)
                .or_insert_with(|| (normalise(c.column_path().parts()), Vec::new(), 0));
            e.2 += c.compressed_size().max(0) as u64;
            for enc in data_encodings(c) {
                if !e.1.contains(&enc) {
                    e.1.push(enc);
                }
            }
        }
    }
    let per = |b: u64| b as f64 / events.max(1) as f64;
    let mut out: Vec<ColumnSize> = by_col
        .into_values()
        .map(|(column, enc, bytes)| ColumnSize {
            schema: schema.to_string(),
            writer: writer.to_string(),
            column,
            encodings: enc
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("+"),
            bytes,
            bytes_per_event: per(bytes),
        })
        .collect();
    let chunks: u64 = out.iter().map(|c| c.bytes).sum();
    let overhead = file_len.saturating_sub(chunks);
    out.push(ColumnSize {
        schema: schema.to_string(),
        writer: writer.to_string(),
        column: OVERHEAD.to_string(),
        encodings: String::new(),
        bytes: overhead,
        bytes_per_event: per(overhead),
    });
    Ok(out)
}

/// Encodings of the data pages: from the page encoding statistics when the writer wrote them,
/// else the chunk's encoding list without the level encoding (RLE) and without the dictionary
/// page's own PLAIN.
fn data_encodings(c: &ColumnChunkMetaData) -> Vec<Encoding> {
    if let Some(mask) = c.page_encoding_stats_mask() {
        let v: Vec<Encoding> = mask.encodings().collect();
        if !v.is_empty() {
            return v;
        }
    }
    let all: Vec<Encoding> = c.encodings().collect();
    let dict = all
        .iter()
        .any(|e| matches!(e, Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY));
    all.into_iter()
        .filter(|e| *e != Encoding::RLE && !(dict && *e == Encoding::PLAIN))
        .collect()
}

/// `["dns", "answers", "list", "element", "ttl"]` -> `dns.answers[].ttl`.
fn normalise(parts: &[String]) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < parts.len() {
        let p = &parts[i];
        if p == "list"
            && parts
                .get(i + 1)
                .is_some_and(|n| n == "item" || n == "element")
        {
            s.push_str("[]");
            i += 2;
            continue;
        }
        if !s.is_empty() {
            s.push('.');
        }
        s.push_str(p);
        i += 1;
    }
    s
}

/// One schema's columns side by side: `(column, silt's encodings, B/event per writer in
/// `writers` order)`, silt's column order, overhead last; and the B/event of a file that took,
/// for each column and for the overhead, the smallest of the writers (`None` when a column is
/// missing from one of them, since the sum would then not be a file anyone could write).
pub struct SideBySide {
    pub writers: Vec<String>,
    pub rows: Vec<(String, String, Vec<Option<f64>>)>,
    pub best_of: Option<f64>,
}

/// Lines up `sizes` of one schema by column (silt's order first).
pub fn side_by_side(sizes: &[&ColumnSize]) -> SideBySide {
    let mut writers: Vec<String> = Vec::new();
    for s in sizes {
        if !writers.contains(&s.writer) {
            writers.push(s.writer.clone());
        }
    }
    writers.sort_by_key(|w| (w != "silt", w.clone()));
    let mut columns: Vec<String> = Vec::new();
    for w in &writers {
        for s in sizes.iter().filter(|s| &s.writer == w) {
            if !columns.contains(&s.column) {
                columns.push(s.column.clone());
            }
        }
    }
    // Overhead last.
    columns.retain(|c| c != OVERHEAD);
    columns.push(OVERHEAD.to_string());
    let mut best = Some(0.0);
    let rows = columns
        .into_iter()
        .map(|c| {
            let vals: Vec<Option<f64>> = writers
                .iter()
                .map(|w| {
                    sizes
                        .iter()
                        .find(|s| &s.writer == w && s.column == c)
                        .map(|s| s.bytes_per_event)
                })
                .collect();
            let enc = sizes
                .iter()
                .find(|s| s.writer == "silt" && s.column == c)
                .map_or(String::new(), |s| s.encodings.clone());
            best = match (best, vals.iter().copied().collect::<Option<Vec<f64>>>()) {
                (Some(b), Some(v)) => Some(b + v.into_iter().fold(f64::MAX, f64::min)),
                _ => None,
            };
            (c, enc, vals)
        })
        .collect();
    SideBySide {
        writers,
        rows,
        best_of: best,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_paths_agree_across_writers() {
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            normalise(&p(&["dns", "answers", "list", "element", "ttl"])),
            "dns.answers[].ttl"
        );
        assert_eq!(normalise(&p(&["tags", "list", "item"])), "tags[]");
        assert_eq!(normalise(&p(&["id", "orig_h"])), "id.orig_h");
    }

    #[test]
    fn best_of_takes_the_smallest_per_column() {
        let c = |w: &str, col: &str, b: f64| ColumnSize {
            schema: "s".into(),
            writer: w.into(),
            column: col.into(),
            encodings: String::new(),
            bytes: 0,
            bytes_per_event: b,
        };
        let v = [
            c("silt", "a", 1.0),
            c("silt", "b", 5.0),
            c("silt", OVERHEAD, 2.0),
            c("duckdb", "a", 3.0),
            c("duckdb", "b", 4.0),
            c("duckdb", OVERHEAD, 0.5),
        ];
        let s = side_by_side(&v.iter().collect::<Vec<_>>());
        assert_eq!(s.writers, ["silt", "duckdb"]);
        assert_eq!(s.rows.last().unwrap().0, OVERHEAD);
        assert_eq!(s.best_of, Some(1.0 + 4.0 + 0.5));
        // A column one writer lacks: no best-of sum.
        let v2 = [c("silt", "a", 1.0), c("duckdb", "b", 1.0)];
        assert_eq!(side_by_side(&v2.iter().collect::<Vec<_>>()).best_of, None);
    }
}
