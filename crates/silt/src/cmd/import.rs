//! `silt import`: inputs into a lake through `silt_ingest` (format registry, file source,
//! pipeline, lake writer), with a progress bar, a summary and the exit status the help text
//! documents (0, or 3 a table failed, 4 an input gave no rows, 5 an input grew since an earlier
//! import read it, 2 rejects under --strict).

use crate::cli::ImportArgs;
use crate::{opts, progress, render};

pub fn run(a: ImportArgs) -> anyhow::Result<i32> {
    if a.format == "kafka" {
        return super::import_kafka::run(a);
    }
    anyhow::ensure!(
        a.kafka.kafka.is_none() && a.kafka.topics.is_empty(),
        "--kafka and --topic belong to `silt import kafka`"
    );
    let cfg = opts::writer_config(&a.write)?;
    let choice = opts::format_choice(&a.format, false)?;
    let pipeline = opts::pipeline(choice, &a.log, &a.access, &a.pcap, &a.enrich, a.batch_rows)?;
    let inputs = silt_ingest::expand(&a.inputs)?;
    let mut bar = progress::Bar::new(a.quiet);
    let reimport = if a.force {
        silt_ingest::Reimport::Force
    } else {
        silt_ingest::Reimport::Skip
    };
    let lake = silt_lake::remote::LakeRoot::open(&a.lake)?;
    let done = silt_ingest::jobs::import_into(inputs, pipeline, &lake, cfg, reimport, &mut bar)?;
    drop(bar);
    render::import_summary(&done, &a.lake, a.format == "auto");
    let (s, run) = (&done.summary, &done.run);
    let failed: Vec<_> = s.failed_tables().collect();
    if !failed.is_empty() {
        eprintln!(
            "error: {} table(s) could not be written completely ({}); the other tables were",
            failed.len(),
            failed
                .iter()
                .map(|(t, _)| t.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(3);
    }
    let empty: Vec<_> = run.streams.iter().filter(|r| r.is_empty()).collect();
    if !empty.is_empty() && !a.allow_empty {
        for r in &empty {
            let why = if r.rejects > 0 {
                format!(
                    "all {} of its records or the whole input were rejected",
                    r.rejects
                )
            } else {
                "it is empty".to_string()
            };
            eprintln!(
                "error: nothing was imported from {}: {why}",
                r.checkpoint.stream
            );
        }
        eprintln!(
            "(give the right format, see `silt import --help`; --allow-empty accepts inputs without rows)"
        );
        return Ok(4);
    }
    if !done.grown.is_empty() {
        return Ok(5);
    }
    if a.strict && s.total_rejects() > 0 {
        eprintln!(
            "error: {} input lines were rejected and --strict is set (valid rows were imported)",
            s.total_rejects()
        );
        return Ok(2);
    }
    Ok(0)
}
