//! `silt query`: SQL over a lake; results to stdout or a file, scan statistics to stderr.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use silt_query::OutputFormat;

use crate::cli::{self, QueryArgs};

fn output_format(f: cli::OutputFormat) -> OutputFormat {
    match f {
        cli::OutputFormat::Table => OutputFormat::Table,
        cli::OutputFormat::Csv => OutputFormat::Csv,
        cli::OutputFormat::Json => OutputFormat::Json,
        cli::OutputFormat::Ndjson => OutputFormat::Ndjson,
        cli::OutputFormat::Parquet => OutputFormat::Parquet,
    }
}

pub fn run(a: QueryArgs) -> anyhow::Result<i32> {
    let format = output_format(a.format);
    if format == OutputFormat::Parquet && a.output.is_none() && std::io::stdout().is_terminal() {
        anyhow::bail!("--format parquet writes binary data: give a file with -o result.parquet");
    }
    if !a.lake.is_dir() {
        anyhow::bail!(
            "lake {} does not exist: import logs first (silt import ... --lake {})",
            a.lake.display(),
            a.lake.display()
        );
    }
    let rt = silt_query::runtime()?;
    let session = rt
        .block_on(silt_query::open(&a.lake))?
        .allow_write(a.allow_write);
    for w in session.warnings() {
        eprintln!("warning: {w}");
    }
    // csv/json/ndjson stream batch by batch (any result size); table and parquet are written
    // once the result is complete.
    let streaming = matches!(
        format,
        OutputFormat::Csv | OutputFormat::Json | OutputFormat::Ndjson
    );
    let run = |out: &mut dyn Write| -> anyhow::Result<(u64, silt_query::ScanStats)> {
        rt.block_on(async {
            if streaming {
                session.query_to_writer(&a.sql, format, out).await
            } else {
                let r = session.query(&a.sql).await?;
                r.write(format, out)?;
                Ok((r.num_rows() as u64, r.stats))
            }
        })
    };
    let (rows, stats) = match &a.output {
        Some(path) => {
            // Write next to the target and rename, so a failed query never leaves half a file.
            let tmp = path.with_extension("silt-tmp");
            let file = std::fs::File::create(&tmp)
                .with_context(|| format!("cannot create {}", tmp.display()))?;
            let mut f = std::io::BufWriter::new(file);
            let res = run(&mut f).and_then(|r| {
                f.flush()?;
                Ok(r)
            });
            drop(f);
            match res {
                Ok(r) => {
                    std::fs::rename(&tmp, path)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    eprintln!("{} rows written to {}", r.0, path.display());
                    r
                }
                Err(e) => {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(e);
                }
            }
        }
        None => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let r = run(&mut out)?;
            out.flush()?;
            r
        }
    };
    let _ = rows;
    if a.stats {
        eprintln!("{stats}");
    }
    Ok(0)
}
