//! `silt convert`: inputs of one table to one Parquet or Feather file, like columnify, through
//! `silt_ingest` (the format from `--format`, else the file extension, else the content) into
//! `silt_lake::single::SingleFileWriter`.
//!
//! Touches the inputs, the output file (and its hidden temporary files) and `_rejects/` next to
//! the output.

use std::path::Path;

use silt_lake::StoreKind;

use crate::cli::ConvertArgs;
use crate::{opts, progress};

pub fn run(a: ConvertArgs) -> anyhow::Result<i32> {
    let mut cfg = opts::writer_config(&a.write)?;
    anyhow::ensure!(
        cfg.table_format == silt_lake::TableFormat::Hive,
        "--table-format delta is for lakes (silt import, silt serve): convert writes one file"
    );
    let ext = a
        .output
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if matches!(ext.as_str(), "feather" | "arrow" | "ipc") {
        cfg.store = StoreKind::Feather;
        if !matches!(
            cfg.codec,
            silt_lake::Codec::Zstd | silt_lake::Codec::Lz4 | silt_lake::Codec::None
        ) {
            anyhow::bail!("feather files support --codec zstd, lz4 or none");
        }
    } else if ext == "parquet" || ext == "pq" {
        cfg.store = StoreKind::Parquet;
    }
    cfg.validate().map_err(anyhow::Error::msg)?;
    let choice = opts::format_choice(a.format.as_deref().unwrap_or("auto"), true)?;
    let pipeline = opts::pipeline(choice, &a.log, &a.access, &a.pcap, &a.enrich, a.batch_rows)?;
    let inputs = silt_ingest::expand(&a.inputs)?;
    let output = std::path::absolute(&a.output)?;
    let root = output.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut bar = progress::Bar::new(a.quiet);
    let done = silt_ingest::jobs::convert(inputs, pipeline, &output, cfg, &root, &mut bar)?;
    drop(bar);
    let s = &done.summary;
    for line in &done.run.transform_reports {
        eprintln!("{line}");
    }
    match &s.file {
        Some(f) => println!(
            "{} rows -> {} ({} bytes{})",
            s.rows,
            f.path.display(),
            f.bytes,
            if s.runs > 0 {
                format!(", merged from {} sorted runs", s.runs)
            } else {
                String::new()
            }
        ),
        None => println!("no rows: nothing written"),
    }
    if s.rejects > 0 {
        println!("{} records rejected", s.rejects);
        if let Some(p) = &s.rejects_file {
            println!("rejected records kept in {}", p.display());
        }
    }
    if s.file.is_none() && !a.allow_empty {
        let kept = if output.exists() {
            format!(" ({} is left as it was)", output.display())
        } else {
            String::new()
        };
        eprintln!(
            "error: the inputs gave no rows, so no file was written{kept}: give the right \
--format (`silt convert --help` lists them); --allow-empty accepts inputs without rows"
        );
        return Ok(4);
    }
    if s.rejects > 0 && a.strict {
        eprintln!("error: records were rejected and --strict is set");
        return Ok(2);
    }
    Ok(0)
}
