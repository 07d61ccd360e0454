//! `silt convert`: generic logs (JSON, MessagePack, CSV, TSV, LTSV, Avro, Docker, syslog) file to
//! one Parquet or Feather file, like columnify. Reads with `silt_logs`, writes with
//! `silt_lake::single::SingleFileWriter`; also builds the generic formats' reader for
//! `silt import` ([`log_reader`]).
//!
//! Touches the inputs, the output file (and its hidden temporary files) and `_rejects/` next to
//! the output.

use std::io::{BufRead as _, IsTerminal as _};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use silt_core::{Emit, ReadOptions, Reject, TableName};
use silt_lake::single::SingleFileWriter;
use silt_lake::StoreKind;
use silt_logs::{LogFormat, LogOptions, TargetSchema};
use silt_readers::source;

use crate::cli::{ConvertArgs, ImportFormat, LogArgs};
use crate::cmd::import::{pipeline, writer_config, ReaderSpec};

/// The generic log format of an `ImportFormat`, if it is one.
pub fn log_format(f: ImportFormat) -> Option<LogFormat> {
    Some(match f {
        ImportFormat::Json => LogFormat::Json,
        ImportFormat::Msgpack => LogFormat::Msgpack,
        ImportFormat::Csv => LogFormat::Csv,
        ImportFormat::Tsv => LogFormat::Tsv,
        ImportFormat::Ltsv => LogFormat::Ltsv,
        ImportFormat::Avro => LogFormat::Avro,
        ImportFormat::Docker => LogFormat::Docker,
        ImportFormat::Syslog => LogFormat::Syslog,
        _ => return None,
    })
}

/// The readers' options from the command line (reads `--schema`).
pub fn log_options(a: &LogArgs) -> anyhow::Result<LogOptions> {
    let table = match &a.table {
        Some(t) => Some(TableName::parse(t).ok_or_else(|| {
            anyhow::anyhow!(
                "--table {t:?}: use module.type with [a-z0-9_] in each part, e.g. web.nginx"
            )
        })?),
        None => None,
    };
    let time_unit = match &a.time_unit {
        Some(u) => Some(u.parse().map_err(anyhow::Error::msg)?),
        None => None,
    };
    let schema = match &a.schema {
        Some(p) => Some(Arc::new(TargetSchema::from_file(p)?)),
        None => None,
    };
    let delimiter = match &a.delimiter {
        Some(d) if d == "\\t" || d == "tab" => Some(b'\t'),
        Some(d) if d.len() == 1 => Some(d.as_bytes()[0]),
        Some(d) => anyhow::bail!("--delimiter {d:?}: give one ASCII character (or \\t)"),
        None => None,
    };
    Ok(LogOptions {
        table,
        time_field: a.time_field.clone(),
        time_unit,
        schema,
        delimiter,
        no_header: a.no_header,
        syslog_year: None,
    })
}

/// `silt import <generic format>`: a custom reader with the options captured.
pub fn log_reader(format: LogFormat, a: &LogArgs, batch_rows: usize) -> anyhow::Result<ReaderSpec> {
    let lo = log_options(a)?;
    let ro = ReadOptions { batch_rows };
    Ok(ReaderSpec::Custom(Box::new(move |input, source, out| {
        silt_logs::read(format, input, source, &ro, &lo, out)
    })))
}

pub fn run(a: ConvertArgs) -> anyhow::Result<i32> {
    let mut cfg = writer_config(&a.write)?;
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
    let inputs = source::expand(&a.inputs)?;
    let mut lo = log_options(&a.log)?;
    let parse_field = crate::cmd::access::parse_field_spec(&a.access)?;
    // `access` is silt-access's reader; every other format is silt-logs'.
    let access = match a.format.as_deref() {
        Some("access") => {
            crate::cmd::access::refuse_parse_field(&a.access, "access")?;
            Some(silt_access::AccessOptions::new(
                &a.access.log_format,
                a.log.table.as_deref(),
            )?)
        }
        _ => None,
    };
    let forced = a
        .format
        .filter(|f| f != "access")
        .map(|f| f.parse::<LogFormat>())
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let output = std::path::absolute(&a.output)?;
    let root = output.parent().unwrap_or(Path::new(".")).to_path_buf();
    let mut w = SingleFileWriter::new(&output, cfg, &root)?;
    let ro = ReadOptions {
        batch_rows: a.batch_rows,
    };
    let total: Option<u64> = inputs.iter().map(source::Input::size).sum();
    let show_progress = !a.quiet && std::io::stderr().is_terminal();
    // Reading on a reader thread; --parse-field, sorting and encoding on this one (parsing the
    // field on the reader thread made it the bottleneck: 71 % of a run's CPU samples).
    let read = move |counter: Arc<AtomicU64>, out: &mut dyn Emit| -> anyhow::Result<()> {
        for input in &inputs {
            let info = input.info();
            let path = match input {
                source::Input::File(p) => Some(p.as_path()),
                source::Input::Stdin => None,
            };
            let mut r = match input.open(counter.clone()) {
                Ok(r) => r,
                Err(e) => {
                    out.reject(whole(&info.display, format!("{e:#}")))?;
                    continue;
                }
            };
            if let Some(ao) = &access {
                if let Err(e) = silt_access::read(&mut *r, &info, &ro, ao, &mut *out) {
                    out.reject(whole(&info.display, format!("stopped reading: {e:#}")))?;
                }
                continue;
            }
            let format = match forced.or_else(|| path.and_then(LogFormat::from_path)) {
                Some(f) => Some(f),
                None => LogFormat::sniff(r.fill_buf()?),
            };
            let Some(format) = format else {
                if !r.fill_buf()?.is_empty() {
                    out.reject(whole(
                        &info.display,
                        "cannot detect the format; give --format".into(),
                    ))?;
                }
                continue;
            };
            // One output file is one table: the first input names it for all.
            if lo.table.is_none() {
                lo.table = Some(silt_logs::default_table(format, &info));
            }
            if let Err(e) = silt_logs::read(format, &mut *r, &info, &ro, &lo, &mut *out) {
                out.reject(whole(&info.display, format!("stopped reading: {e:#}")))?;
            }
        }
        Ok(())
    };
    match &parse_field {
        Some(pf) => {
            let mut pw = silt_access::ParseFieldEmit::new(&mut w, pf.clone());
            pipeline(&mut pw, show_progress, total, read)?;
            let what = match a.inputs.as_slice() {
                [one] => one.display().to_string(),
                _ => "the inputs".to_string(),
            };
            crate::cmd::access::report_unparsed(&pw, &what);
        }
        None => pipeline(&mut w, show_progress, total, read)?,
    }
    let s = w.finish()?;
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
        if a.strict {
            eprintln!("error: records were rejected and --strict is set");
            return Ok(2);
        }
    }
    Ok(0)
}

fn whole(source: &str, reason: String) -> Reject {
    Reject {
        source: source.to_string(),
        line: 0,
        reason,
        raw: Vec::new(),
        table: None,
    }
}
