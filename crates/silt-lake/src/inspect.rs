//! `silt inspect FILE`: what is inside a Parquet or Feather file.
//!
//! For Parquet: file metadata, then per row group its offset, rows, compressed and uncompressed
//! bytes and sorting columns, and per column chunk its path, type, encodings, codec, sizes,
//! min/max, nulls, and whether it has a bloom filter and a page index. For Feather: schema,
//! record batches, rows. Reads only the footer (Parquet) or the file (Feather).

use std::fs::File;
use std::path::Path;

use anyhow::Context;
use parquet::basic::{LogicalType, TimeUnit as PqTimeUnit};
use parquet::file::reader::{ChunkReader, FileReader, SerializedFileReader};
use parquet::file::statistics::Statistics;
use parquet::schema::types::ColumnDescriptor;
use serde_json::{json, Value};

/// A structured description of a file (render it with [`render_text`] or as JSON); `path` may
/// be an object's URL (`s3://bucket/key.parquet`, read in ranges: [`crate::remote`]).
pub fn inspect(path: &Path) -> anyhow::Result<Value> {
    if crate::remote::is_remote(path) {
        let url = path.to_str().unwrap_or_default();
        let rest = url.split_once("://").map(|(_, r)| r).unwrap_or_default();
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("s3");
        let lake = std::sync::Arc::new(crate::remote::RemoteLake::open(&format!(
            "{scheme}://{bucket}"
        ))?);
        let size = lake.size(key)?;
        let file = crate::remote::file::RemoteFile::new(lake.clone(), lake.key(key), size);
        let head = file.get_bytes(0, 6.min(size as usize))?;
        return if head.starts_with(b"PAR1") {
            inspect_parquet(file, path, size)
        } else if &head[..] == b"ARROW1" {
            inspect_feather(file.reader(), path, size)
        } else {
            anyhow::bail!(
                "{} is neither a Parquet nor an Arrow IPC (Feather) file",
                path.display()
            )
        };
    }
    let mut head = [0u8; 6];
    let size = {
        use std::io::Read;
        let mut f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let _ = f.read(&mut head)?;
        f.metadata()?.len()
    };
    if &head[..4] == b"PAR1" {
        inspect_parquet(File::open(path)?, path, size)
    } else if &head == b"ARROW1" {
        inspect_feather(File::open(path)?, path, size)
    } else {
        anyhow::bail!(
            "{} is neither a Parquet nor an Arrow IPC (Feather) file",
            path.display()
        )
    }
}

fn inspect_parquet<C: ChunkReader + 'static>(
    file: C,
    path: &Path,
    size: u64,
) -> anyhow::Result<Value> {
    let r = SerializedFileReader::new(file)
        .with_context(|| format!("{}: cannot read the Parquet footer", path.display()))?;
    let md = r.metadata();
    let fm = md.file_metadata();
    let schema = fm.schema_descr();
    let kv: serde_json::Map<String, Value> = fm
        .key_value_metadata()
        .map(|kv| {
            kv.iter()
                .filter(|k| k.key != "ARROW:schema")
                .map(|k| {
                    (
                        k.key.clone(),
                        Value::from(k.value.clone().unwrap_or_default()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut groups = Vec::new();
    for (gi, rg) in md.row_groups().iter().enumerate() {
        let offset = rg.file_offset().or_else(|| {
            rg.columns()
                .first()
                .map(|c| c.dictionary_page_offset().unwrap_or(c.data_page_offset()))
        });
        let sorting: Vec<Value> = rg
            .sorting_columns()
            .map(|s| {
                s.iter()
                    .map(|c| {
                        json!({
                            "column": schema.column(c.column_idx as usize).path().string(),
                            "descending": c.descending,
                            "nulls_first": c.nulls_first,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut cols = Vec::new();
        for (ci, c) in rg.columns().iter().enumerate() {
            let descr = schema.column(ci);
            let (min, max, nulls, distinct) = match c.statistics() {
                Some(s) => (
                    render_stat(s, &descr, true),
                    render_stat(s, &descr, false),
                    s.null_count_opt(),
                    s.distinct_count_opt(),
                ),
                None => (None, None, None, None),
            };
            cols.push(json!({
                "path": c.column_path().string(),
                "type": format!("{:?}", descr.physical_type()),
                "logical_type": descr.logical_type_ref().map(|l| format!("{l:?}")),
                "encodings": c.encodings().map(|e| format!("{e:?}")).collect::<Vec<_>>(),
                "codec": format!("{:?}", c.compression()),
                "compressed_bytes": c.compressed_size(),
                "uncompressed_bytes": c.uncompressed_size(),
                "min": min,
                "max": max,
                "nulls": nulls,
                "distinct": distinct,
                "bloom_filter_bytes": c.bloom_filter_length(),
                "page_index": c.column_index_offset().is_some() && c.offset_index_offset().is_some(),
            }));
        }
        groups.push(json!({
            "index": gi,
            "offset": offset,
            "rows": rg.num_rows(),
            "compressed_bytes": rg.compressed_size(),
            "uncompressed_bytes": rg.total_byte_size(),
            "sorting_columns": sorting,
            "columns": cols,
        }));
    }
    Ok(json!({
        "file": path.display().to_string(),
        "format": "parquet",
        "bytes": size,
        "rows": fm.num_rows(),
        "created_by": fm.created_by(),
        "version": fm.version(),
        "metadata": kv,
        "row_groups": groups,
    }))
}

fn render_stat(s: &Statistics, d: &ColumnDescriptor, min: bool) -> Option<String> {
    let ts_unit = match d.logical_type_ref() {
        Some(LogicalType::Timestamp(t)) => Some(t.unit),
        _ => None,
    };
    // Decimals stored as INT32/INT64 (Zeek intervals: decimal(18,6)) show as decimals, not as
    // their unscaled integers.
    let scale = match d.logical_type_ref() {
        Some(LogicalType::Decimal(_)) if d.type_scale() > 0 => Some(d.type_scale() as u32),
        _ => None,
    };
    let decimal = |x: i64, scale: u32| {
        let p = 10i128.pow(scale);
        let x = x as i128;
        let sign = if x < 0 { "-" } else { "" };
        format!(
            "{sign}{}.{:0w$}",
            x.abs() / p,
            x.abs() % p,
            w = scale as usize
        )
    };
    Some(match s {
        Statistics::Boolean(v) => format!("{}", if min { v.min_opt()? } else { v.max_opt()? }),
        Statistics::Int32(v) => {
            let x = *if min { v.min_opt()? } else { v.max_opt()? };
            match scale {
                Some(sc) => decimal(x as i64, sc),
                None => x.to_string(),
            }
        }
        Statistics::Int64(v) => {
            let x = *if min { v.min_opt()? } else { v.max_opt()? };
            if let Some(sc) = scale {
                return Some(decimal(x, sc));
            }
            match ts_unit {
                Some(u) => {
                    let micros = match u {
                        PqTimeUnit::MILLIS => x * 1000,
                        PqTimeUnit::MICROS => x,
                        PqTimeUnit::NANOS => x / 1000,
                    };
                    chrono::DateTime::from_timestamp_micros(micros)
                        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
                        .unwrap_or_else(|| x.to_string())
                }
                None => x.to_string(),
            }
        }
        Statistics::Int96(v) => format!("{:?}", if min { v.min_opt()? } else { v.max_opt()? }),
        Statistics::Float(v) => format!("{}", if min { v.min_opt()? } else { v.max_opt()? }),
        Statistics::Double(v) => format!("{}", if min { v.min_opt()? } else { v.max_opt()? }),
        Statistics::ByteArray(_) | Statistics::FixedLenByteArray(_) => {
            let b = if min {
                s.min_bytes_opt()?
            } else {
                s.max_bytes_opt()?
            };
            let t = String::from_utf8_lossy(b);
            if t.chars().count() > 48 {
                format!("{}…", t.chars().take(48).collect::<String>())
            } else {
                t.into_owned()
            }
        }
    })
}

fn inspect_feather<R: std::io::Read + std::io::Seek>(
    file: R,
    path: &Path,
    size: u64,
) -> anyhow::Result<Value> {
    let r = crate::ipc::open(file)
        .with_context(|| format!("{}: cannot read the Arrow IPC footer", path.display()))?;
    let schema = r.schema();
    // The schema's metadata and the footer's own (where silt keeps the file's checksum).
    let mut metadata: std::collections::BTreeMap<String, String> =
        schema.metadata().clone().into_iter().collect();
    metadata.extend(r.custom_metadata().clone());
    let mut batches = Vec::new();
    let mut rows = 0usize;
    for (i, b) in r.enumerate() {
        let b = b?;
        rows += b.num_rows();
        batches.push(
            json!({"index": i, "rows": b.num_rows(), "arrow_bytes": b.get_array_memory_size()}),
        );
    }
    Ok(json!({
        "file": path.display().to_string(),
        "format": "feather",
        "bytes": size,
        "rows": rows,
        "metadata": metadata,
        "columns": schema.fields().iter().map(|f| json!({"name": f.name(), "type": f.data_type().to_string()})).collect::<Vec<_>>(),
        "record_batches": batches,
    }))
}

/// Renders [`inspect`]'s description for a terminal.
pub fn render_text(v: &Value) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} file, {} bytes, {} rows",
        v["file"].as_str().unwrap_or(""),
        v["format"].as_str().unwrap_or(""),
        v["bytes"],
        v["rows"]
    );
    if let Some(cb) = v["created_by"].as_str() {
        let _ = writeln!(s, "created by: {cb}");
    }
    if let Some(m) = v["metadata"].as_object() {
        for (k, val) in m {
            let _ = writeln!(
                s,
                "metadata {k} = {}",
                val.as_str().unwrap_or(&val.to_string())
            );
        }
    }
    if let Some(cols) = v["columns"].as_array() {
        for c in cols {
            let _ = writeln!(
                s,
                "  column {}: {}",
                c["name"].as_str().unwrap_or(""),
                c["type"].as_str().unwrap_or("")
            );
        }
    }
    if let Some(bs) = v["record_batches"].as_array() {
        let _ = writeln!(s, "{} record batches", bs.len());
    }
    for g in v["row_groups"].as_array().into_iter().flatten() {
        let sorting: Vec<String> = g["sorting_columns"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| c["column"].as_str().unwrap_or("").to_string())
            .collect();
        let _ = writeln!(
            s,
            "\nrow group {}: offset {}, {} rows, {} bytes compressed, {} uncompressed{}",
            g["index"],
            g["offset"],
            g["rows"],
            g["compressed_bytes"],
            g["uncompressed_bytes"],
            if sorting.is_empty() {
                String::new()
            } else {
                format!(", sorted by {}", sorting.join(", "))
            }
        );
        let _ = writeln!(
            s,
            "  {:<28} {:<10} {:<7} {:>10} {:>10} {:>7} {:<26} {:<26} {:<5} encodings",
            "column", "type", "codec", "compressed", "raw", "nulls", "min", "max", "bloom",
        );
        for c in g["columns"].as_array().into_iter().flatten() {
            let enc: Vec<&str> = c["encodings"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str())
                .collect();
            let cut = |x: &Value| {
                let t = x.as_str().unwrap_or("-");
                if t.chars().count() > 26 {
                    format!("{}…", t.chars().take(25).collect::<String>())
                } else {
                    t.to_string()
                }
            };
            let _ = writeln!(
                s,
                "  {:<28} {:<10} {:<7} {:>10} {:>10} {:>7} {:<26} {:<26} {:<5} {}",
                c["path"].as_str().unwrap_or(""),
                c["type"].as_str().unwrap_or(""),
                c["codec"]
                    .as_str()
                    .unwrap_or("")
                    .split('(')
                    .next()
                    .unwrap_or(""),
                c["compressed_bytes"].to_string(),
                c["uncompressed_bytes"].to_string(),
                c["nulls"]
                    .as_u64()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".into()),
                cut(&c["min"]),
                cut(&c["max"]),
                if c["bloom_filter_bytes"].is_null() {
                    "no"
                } else {
                    "yes"
                },
                enc.join(",")
            );
        }
    }
    s
}
