//! The user's per-column encoding hints (`--dictionary`, `--no-dictionary`, `--delta`,
//! `--byte-stream-split`, [`crate::config::EncodingHints`]) resolved against a table schema
//! ([`encoding_plan`]) into per-leaf settings ([`ColumnEncoding`]) that override silt's own
//! choices.
//!
//! Touches nothing: it only computes.

use arrow::datatypes::{DataType, Schema};
use parquet::basic::Encoding;
use parquet::file::properties::WriterPropertiesBuilder;
use parquet::schema::types::ColumnPath;

use super::paths::addressable_leaves;
use crate::config::WriterConfig;

/// What the encoding hints ask of one Parquet leaf column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnEncoding {
    /// The Parquet leaf path (`id.orig_h`, `tags.list.item`).
    pub path: Vec<String>,
    /// `Some(true)`: dictionary forced on; `Some(false)`: off; `None`: silt's automatic choice.
    pub dictionary: Option<bool>,
    /// The value encoding (the fallback encoding when the dictionary is on).
    pub encoding: Option<Encoding>,
}

impl ColumnEncoding {
    pub(super) fn apply(
        &self,
        b: WriterPropertiesBuilder,
        dict_page_bytes: usize,
    ) -> WriterPropertiesBuilder {
        let cp = ColumnPath::new(self.path.clone());
        let mut b = b;
        if let Some(d) = self.dictionary {
            b = b.set_column_dictionary_enabled(cp.clone(), d);
            if d {
                // A forced dictionary gets room to grow before parquet-rs falls back to plain.
                b = b.set_column_dictionary_page_size_limit(
                    cp.clone(),
                    dict_page_bytes.saturating_mul(4),
                );
            }
        }
        if let Some(e) = self.encoding {
            b = b.set_column_encoding(cp, e);
        }
        b
    }
}

/// Resolves the configuration's encoding hints against a table schema: every hinted path must
/// name a leaf column (a list column's path names its elements) whose type the encoding
/// supports. Returns the per-leaf settings, or a message naming the column and what is wrong.
///
/// Rules: `--delta` is DELTA_BINARY_PACKED for integers, timestamps, dates, times, durations and
/// decimals of up to 18 digits (stored as INT32/INT64), DELTA_BYTE_ARRAY for strings and binary;
/// `--byte-stream-split` takes Float32/Float64 only (parquet-rs could also split integers, but
/// not every reader decodes that yet). Both turn the dictionary off unless `--dictionary` names
/// the column too, in which case they become the fallback encoding.
pub fn encoding_plan(cfg: &WriterConfig, schema: &Schema) -> Result<Vec<ColumnEncoding>, String> {
    let h = &cfg.encodings;
    let leaves = addressable_leaves(schema);
    let mut out: Vec<ColumnEncoding> = Vec::new();
    fn entry(out: &mut Vec<ColumnEncoding>, path: &[String]) -> usize {
        match out.iter().position(|c| c.path == path) {
            Some(i) => i,
            None => {
                out.push(ColumnEncoding {
                    path: path.to_vec(),
                    dictionary: None,
                    encoding: None,
                });
                out.len() - 1
            }
        }
    }
    let lists: [(&str, &Vec<String>); 4] = [
        ("--dictionary", &h.dictionary),
        ("--no-dictionary", &h.no_dictionary),
        ("--delta", &h.delta),
        ("--byte-stream-split", &h.byte_stream_split),
    ];
    for (flag, cols) in lists {
        for col in cols {
            let found: Vec<&(String, Vec<String>, DataType)> =
                leaves.iter().filter(|(u, _, _)| u == col).collect();
            if found.is_empty() {
                let below: Vec<&str> = leaves
                    .iter()
                    .filter(|(u, _, _)| u.starts_with(&format!("{col}.")))
                    .map(|(u, _, _)| u.as_str())
                    .collect();
                return Err(if below.is_empty() {
                    format!(
                        "{flag} {col}: no such column (columns: {})",
                        schema
                            .fields()
                            .iter()
                            .map(|f| f.name().as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    format!(
                        "{flag} {col}: {col} is a struct; name its fields ({})",
                        below.join(", ")
                    )
                });
            }
            for (_, path, dt) in found {
                let i = entry(&mut out, path);
                let c = &mut out[i];
                match flag {
                    "--dictionary" => c.dictionary = Some(true),
                    "--no-dictionary" => c.dictionary = Some(false),
                    "--delta" => {
                        c.encoding = Some(delta_encoding(dt).ok_or_else(|| {
                            format!("--delta {col}: column {col} is {dt}; delta encodings take integers, timestamps, dates, decimals up to 18 digits, strings and binary")
                        })?);
                    }
                    _ => {
                        if !matches!(dt, DataType::Float32 | DataType::Float64) {
                            return Err(format!(
                                "--byte-stream-split {col}: column {col} is {dt}; byte-stream-split takes Float32/Float64 columns"
                            ));
                        }
                        c.encoding = Some(Encoding::BYTE_STREAM_SPLIT);
                    }
                }
            }
        }
    }
    // A value encoding without an explicit dictionary choice means "this encoding", so the
    // dictionary (which would otherwise be tried first) goes off.
    for c in out.iter_mut() {
        if c.encoding.is_some() && c.dictionary.is_none() {
            c.dictionary = Some(false);
        }
    }
    Ok(out)
}

/// The delta encoding for a leaf type, if it has one.
fn delta_encoding(dt: &DataType) -> Option<Encoding> {
    match dt {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Timestamp(_, _)
        | DataType::Date32
        | DataType::Date64
        | DataType::Time32(_)
        | DataType::Time64(_)
        | DataType::Duration(_) => Some(Encoding::DELTA_BINARY_PACKED),
        DataType::Decimal128(p, _) if *p <= 18 => Some(Encoding::DELTA_BINARY_PACKED),
        DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView => Some(Encoding::DELTA_BYTE_ARRAY),
        DataType::Dictionary(_, v) => delta_encoding(v),
        _ => None,
    }
}
